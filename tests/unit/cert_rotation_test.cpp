#include <doctest/doctest.h>

#include <string>

#include "hooks/cert_rotation.h"

using namespace iw::certs;

namespace {

constexpr int64_t kNow = 1'800'000'000;
constexpr int64_t kDay = 24 * 3600;

Policy TestPolicy() {
  Policy p;
  p.caValidity = 1000 * kDay;
  p.caRenewBefore = 100 * kDay;
  p.servingValidity = 100 * kDay;
  p.servingRenewBefore = 10 * kDay;
  p.overlap = 3600;
  return p;
}

// A settled Secret: CA valid for 500 more days, serving certificate for 50 more, published.
State Settled() {
  State s;
  s.ca = {true, kNow - 500 * kDay, kNow + 500 * kDay};
  s.serving = {true, kNow - 50 * kDay, kNow + 50 * kDay};
  s.servingSignedByCa = true;
  s.servingNamesOk = true;
  s.bundlePublished = true;
  return s;
}

}  // namespace

TEST_CASE("certificate controller: one step at a time, CA rotation staged over two overlaps") {
  struct Case {
    const char* name;
    State state;
    Action expected;
  };
  const Policy p = TestPolicy();
  auto with = [](auto f) {
    State s = Settled();
    f(s);
    return s;
  };
  const Case cases[] = {
      {"settled: nothing", Settled(), Action::kNone},
      {"empty Secret: create", State{}, Action::kCreateCa},
      {"CA expired: create", with([](State& s) { s.ca.notAfter = kNow; }), Action::kCreateCa},
      {"CA in its renewal window: stage", with([](State& s) { s.ca.notAfter = kNow + 99 * kDay; }),
       Action::kStageNextCa},
      {"CA just before its renewal window: nothing",
       with([](State& s) { s.ca.notAfter = kNow + 101 * kDay; }), Action::kNone},
      {"rotation requested: stage", with([](State& s) { s.rotateRequested = "1"; }),
       Action::kStageNextCa},
      {"rotation request already handled: nothing",
       with([](State& s) { s.rotateRequested = s.rotateDone = "1"; }), Action::kNone},
      {"staged, overlap not over: wait", with([](State& s) {
         s.nextCa = {true, kNow - 60, kNow + 999 * kDay};
         s.stagedAt = kNow - 3599;
       }),
       Action::kNone},
      // Stamps are truncated seconds: staged at kNow - 3600 may mean kNow - 3599.9.
      {"staged exactly an overlap ago by the truncated clock: wait one more second",
       with([](State& s) {
         s.nextCa = {true, kNow - 3600, kNow + 999 * kDay};
         s.stagedAt = kNow - 3600;
       }),
       Action::kNone},
      {"staged, overlap over: promote", with([](State& s) {
         s.nextCa = {true, kNow - 3601, kNow + 999 * kDay};
         s.stagedAt = kNow - 3601;
       }),
       Action::kPromoteNextCa},
      {"staged, overlap over but bundle not in the configurations: wait", with([](State& s) {
         s.nextCa = {true, kNow - 7200, kNow + 999 * kDay};
         s.stagedAt = kNow - 7200;
         s.bundlePublished = false;
       }),
       Action::kNone},
      {"staged CA expired: stage again", with([](State& s) {
         s.nextCa = {true, kNow - 7200, kNow};
         s.stagedAt = kNow - 10;
       }),
       Action::kStageNextCa},
      {"promoted, overlap not over: keep previous", with([](State& s) {
         s.previous = {true, kNow - 900 * kDay, kNow + 99 * kDay};
         s.promotedAt = kNow - 10;
       }),
       Action::kNone},
      {"promoted exactly an overlap ago by the truncated clock: keep previous", with([](State& s) {
         s.previous = {true, kNow - 900 * kDay, kNow + 99 * kDay};
         s.promotedAt = kNow - 3600;
       }),
       Action::kNone},
      {"promoted, overlap over: drop previous", with([](State& s) {
         s.previous = {true, kNow - 900 * kDay, kNow + 99 * kDay};
         s.promotedAt = kNow - 3601;
       }),
       Action::kDropPrevious},
      {"rotation requested during the overlap: after the drop", with([](State& s) {
         s.previous = {true, kNow - 900 * kDay, kNow + 99 * kDay};
         s.promotedAt = kNow - 10;
         s.rotateRequested = "2";
       }),
       Action::kNone},
      {"no serving certificate: issue", with([](State& s) { s.serving = {}; }),
       Action::kIssueServing},
      {"serving certificate by another CA: issue",
       with([](State& s) { s.servingSignedByCa = false; }), Action::kIssueServing},
      {"serving certificate without the Service's name: issue",
       with([](State& s) { s.servingNamesOk = false; }), Action::kIssueServing},
      {"serving certificate in its renewal window: issue",
       with([](State& s) { s.serving.notAfter = kNow + 9 * kDay; }), Action::kIssueServing},
      {"serving renewal that cannot outlast the CA: wait for the CA", with([](State& s) {
         s.ca.notAfter = kNow + 5 * kDay;
         s.serving.notAfter = kNow + 5 * kDay;
         s.nextCa = {true, kNow, kNow + 999 * kDay};
         s.stagedAt = kNow - 10;
       }),
       Action::kNone},
      {"staged and the serving certificate missing: issue from the current CA", with([](State& s) {
         s.nextCa = {true, kNow, kNow + 999 * kDay};
         s.stagedAt = kNow - 10;
         s.serving = {};
       }),
       Action::kIssueServing},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Decision d = Decide(c.state, p, kNow);
    CHECK(ActionName(d.action) == ActionName(c.expected));
    if (d.action != Action::kNone) CHECK(!d.reason.empty());
  }
}

TEST_CASE("certificate controller: the recheck time is the soonest due step") {
  const Policy p = TestPolicy();
  State s = Settled();
  CHECK(Decide(s, p, kNow).recheckAt == kNow + 40 * kDay);  // serving renewal window
  s.ca.notAfter = kNow + 120 * kDay;
  CHECK(Decide(s, p, kNow).recheckAt == kNow + 20 * kDay);  // CA renewal window first
  s.nextCa = {true, kNow, kNow + 999 * kDay};
  s.stagedAt = kNow - 100;
  CHECK(Decide(s, p, kNow).recheckAt == kNow + 3501);  // the promotion (a whole second more)
}

TEST_CASE("a serving certificate never outlives its CA") {
  const Policy p = TestPolicy();
  CHECK(ServingNotAfter(p, kNow, kNow + 1000 * kDay) == kNow + 100 * kDay);
  CHECK(ServingNotAfter(p, kNow, kNow + 7 * kDay) == kNow + 7 * kDay);
}
