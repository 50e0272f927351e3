#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>

#include "server/leader_election.h"
#include "tests/unit/fake_api.h"

using namespace iw;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

namespace {

constexpr std::string_view kNs = "inplace-webhook";

leader::Options Named(std::string identity) {
  leader::Options o;
  o.namespaceName = std::string(kNs);
  o.identity = std::move(identity);
  return o;
}

json::Document Lease(fake::FakeApi& api) {
  return api.Object(kube::LeasePath(kNs, leader::kLeaseName));
}
std::string Holder(fake::FakeApi& api) {
  json::Document l = Lease(api);
  return std::string(json::StringOr(json::Find(&l, "spec"), "holderIdentity"));
}
long long Transitions(fake::FakeApi& api) {
  json::Document l = Lease(api);
  return l["spec"]["leaseTransitions"].GetInt64();
}

}  // namespace

TEST_CASE("leader election: the first candidate creates the Lease with client-go's record") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  CHECK(a.TryAcquireOrRenew(Steady::now()));
  json::Document l = Lease(api);
  CHECK(json::StringOr(&l, "apiVersion") == "coordination.k8s.io/v1");
  CHECK(json::StringOr(json::Find(&l, "metadata"), "name") == "inplace-webhook");
  CHECK(Holder(api) == "a");
  CHECK(l["spec"]["leaseDurationSeconds"].GetInt() == 15);
  CHECK(Transitions(api) == 0);
  std::string renew(json::StringOr(json::Find(&l, "spec"), "renewTime"));
  CHECK(renew.size() == std::string("2026-01-01T00:00:00.000000Z").size());  // MicroTime
  CHECK(renew.back() == 'Z');
}

TEST_CASE("leader election: a valid lease is respected; an expired one is taken over") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));  // b observes a's record now
  CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(14)));

  SUBCASE("renewals keep it valid for the others, and keep acquireTime") {
    json::Document before = Lease(api);
    CHECK(a.TryAcquireOrRenew(t0 + seconds(10)));
    json::Document after = Lease(api);
    CHECK(json::StringOr(json::Find(&after, "spec"), "acquireTime") ==
          json::StringOr(json::Find(&before, "spec"), "acquireTime"));
    CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(20)));  // changed record: b's clock restarts
    CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(34)));
    CHECK(b.TryAcquireOrRenew(t0 + seconds(36)));
  }
  SUBCASE("no renewal for a lease duration: taken over, transitions counted") {
    CHECK(b.TryAcquireOrRenew(t0 + seconds(16)));
    CHECK(Holder(api) == "b");
    CHECK(Transitions(api) == 1);
    CHECK_FALSE(a.TryAcquireOrRenew(t0 + seconds(17)));  // a sees b's fresh record
  }
}

TEST_CASE("leader election: release clears the holder so a successor need not wait") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));
  CHECK(a.Release());
  CHECK(Holder(api).empty());
  CHECK(b.TryAcquireOrRenew(t0 + seconds(1)));
  CHECK(Holder(api) == "b");
  CHECK(a.Release());  // not ours any more: nothing to do
  CHECK(Holder(api) == "b");
}

TEST_CASE("leader election: writes are pinned to the resourceVersion read") {
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  REQUIRE(a.TryAcquireOrRenew(Steady::now()));
  api.FailNext(kube::LeasePath(kNs, leader::kLeaseName), 409);
  CHECK_FALSE(a.TryAcquireOrRenew(Steady::now()));
  CHECK(a.TryAcquireOrRenew(Steady::now()));

  // Another writer changes the Lease between our read and write: our stale write is refused.
  struct Racing : fake::FakeApi {
    kube::Result Update(std::string_view path, const json::Value& object) override {
      Mutate(path, [](json::Document&) {});  // bumps the resourceVersion
      return fake::FakeApi::Update(path, object);
    }
  } racing;
  leader::LeaderElector c(racing, Named("c"));
  CHECK(c.TryAcquireOrRenew(Steady::now()));  // create: no race
  CHECK_FALSE(c.TryAcquireOrRenew(Steady::now()));
}

TEST_CASE("leader election: identities are unique per process") {
  std::string a = leader::DefaultIdentity(), b = leader::DefaultIdentity();
  CHECK(a != b);
  CHECK(a.find('_') != std::string::npos);
}

TEST_CASE("leader election: the thread leads, calls back, and releases on Stop") {
  fake::FakeApi api;
  std::atomic<int> started{0}, stopped{0};
  leader::Options o = Named("a");
  o.retryPeriod = milliseconds(10);
  o.onStartedLeading = [&] { ++started; };
  o.onStoppedLeading = [&] { ++stopped; };
  {
    leader::LeaderElector a(api, o);
    a.Start();
    const auto deadline = Steady::now() + seconds(60);
    while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    CHECK(a.IsLeader());
    CHECK(started.load() == 1);
    std::string metrics;
    a.RenderMetrics(metrics);
    CHECK(metrics.find("inplace_webhook_leader{identity=\"a\"} 1") != std::string::npos);
    a.Stop();
    CHECK_FALSE(a.IsLeader());
  }
  CHECK(stopped.load() == 1);
  CHECK(Holder(api).empty());
}

TEST_CASE("leader election: a leader that loses the Lease to another holder steps down") {
  fake::FakeApi api;
  std::atomic<int> stopped{0};
  leader::Options o = Named("a");
  o.retryPeriod = milliseconds(10);
  o.onStoppedLeading = [&] { ++stopped; };
  leader::LeaderElector a(api, o);
  a.Start();
  const auto deadline = Steady::now() + seconds(60);
  while (!a.IsLeader() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
  REQUIRE(a.IsLeader());
  // Someone else writes the Lease (e.g. after a long pause of this process).
  api.Mutate(kube::LeasePath(kNs, leader::kLeaseName), [](json::Document& l) {
    json::SetString(l["spec"], "holderIdentity", "z", l.GetAllocator());
    json::SetString(l["spec"], "renewTime", "2099-01-01T00:00:00.000000Z", l.GetAllocator());
  });
  // IsLeader() turns false just before onStoppedLeading runs: wait for both.
  while ((a.IsLeader() || stopped.load() == 0) && Steady::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  CHECK_FALSE(a.IsLeader());
  CHECK(stopped.load() == 1);
  a.Stop();
  CHECK(Holder(api) == "z");  // never released what is not ours
}

TEST_CASE("leader election: a loop is known alive only while the holder's record keeps changing") {
  // The pod webhook injects the readiness gate only while this is true (DESIGN.md §8.6).
  fake::FakeApi api;
  leader::LeaderElector a(api, Named("a"));
  leader::LeaderElector b(api, Named("b"));
  const Steady::time_point t0 = Steady::now();
  CHECK_FALSE(b.LeaderKnownAlive(t0));  // nothing observed yet
  REQUIRE(a.TryAcquireOrRenew(t0));
  CHECK_FALSE(b.TryAcquireOrRenew(t0));  // b observes a's record at t0
  CHECK(b.LeaderKnownAlive(t0 + seconds(9)));
  // Not renewed for the renew deadline (10 s): a holder in that state has stopped leading.
  CHECK_FALSE(b.LeaderKnownAlive(t0 + seconds(10)));
  CHECK(a.TryAcquireOrRenew(t0 + seconds(11)));
  CHECK_FALSE(b.TryAcquireOrRenew(t0 + seconds(12)));  // a changed record, seen at 12 s
  CHECK(b.LeaderKnownAlive(t0 + seconds(21)));
  // Released: whoever polls next takes the free Lease, and counts as alive only once its thread
  // leads (then the loop runs).
  CHECK(a.Release());
  CHECK(b.TryAcquireOrRenew(t0 + seconds(13)));
  CHECK_FALSE(b.LeaderKnownAlive(t0 + seconds(13)));
  // a, the former holder, now observes b's record: alive as far as a can tell.
  CHECK_FALSE(a.TryAcquireOrRenew(t0 + seconds(14)));
  CHECK(a.LeaderKnownAlive(t0 + seconds(14)));
}

TEST_CASE("leader election: the leading thread counts as alive until it stops") {
  fake::FakeApi api;
  leader::Options o = Named("a");
  o.retryPeriod = milliseconds(20);
  leader::LeaderElector a(api, o);
  a.Start();
  for (int i = 0; i < 200 && !a.IsLeader(); ++i) std::this_thread::sleep_for(milliseconds(10));
  REQUIRE(a.IsLeader());
  CHECK(a.LeaderKnownAlive(Steady::now()));
  a.Stop();
  CHECK_FALSE(a.LeaderKnownAlive(Steady::now()));
}
