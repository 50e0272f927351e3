#include "server/loop/writer.h"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "hooks/keys.h"
#include "lib/kube_objects.h"
#include "lib/rfc3339.h"
#include "tests/unit/fake_api.h"

using namespace iw;

namespace {

rollout::Action PodPatch(const std::string& name, const std::string& rv, const std::string& body) {
  rollout::Action a;
  a.kind = rollout::WriteKind::kPodPatch;
  a.ns = "ns";
  a.name = name;
  a.pod = name;
  a.resourceVersion = rv;
  a.body = json::Document();
  a.body.Parse(body.c_str());
  a.summary = "patch " + name;
  return a;
}

std::string Version(fake::FakeApi& api, const std::string& name) {
  json::Document o = api.Object(kube::PodPath("ns", name));
  return std::string(kube::MetaOf(o, "resourceVersion"));
}

}  // namespace

TEST_CASE("writer: each write carries the version its predecessor returned; expectations follow") {
  fake::FakeApi api;
  api.Put(kube::PodsPath("ns"), R"({"metadata":{"name":"a","namespace":"ns"},"spec":{}})");
  const std::string v0 = Version(api, "a");
  loop::Writer writer(api, {});
  std::vector<rollout::Action> actions;
  actions.push_back(PodPatch("a", v0, R"({"metadata":{"labels":{"x":"1"}}})"));
  actions.push_back(PodPatch("a", v0, R"({"metadata":{"labels":{"y":"2"}}})"));  // planned at v0
  std::vector<loop::Expectation> expect;
  loop::WriteResult r = writer.Apply("ns/web", actions, &expect, /*cached=*/true);
  CHECK(r.status.ok());
  CHECK(r.writes == 2);
  // One expectation for the pod: leave the planned version, reach the last one written.
  REQUIRE(expect.size() == 1);
  CHECK(expect[0].leave == v0);
  CHECK(expect[0].reach == Version(api, "a"));
}

TEST_CASE("writer: a 409 ends the pass and expects a newer version; a refusal names the pod") {
  fake::FakeApi api;
  api.Put(kube::PodsPath("ns"), R"({"metadata":{"name":"a","namespace":"ns"},"spec":{}})");
  api.Put(kube::PodsPath("ns"), R"({"metadata":{"name":"b","namespace":"ns"},"spec":{}})");
  loop::Writer writer(api, {});
  std::vector<rollout::Action> actions;
  actions.push_back(PodPatch("a", Version(api, "a"), R"({"metadata":{"labels":{"x":"1"}}})"));
  actions.push_back(PodPatch("b", Version(api, "b"), R"({"metadata":{"labels":{"x":"1"}}})"));
  // A Deployment patch after the two pods' run: not sent once a write of the run failed.
  rollout::Action deployment;
  deployment.kind = rollout::WriteKind::kDeploymentPatch;
  deployment.ns = "ns";
  deployment.name = "web";
  deployment.body.Parse(R"({"metadata":{"annotations":{"x":"1"}}})");
  actions.push_back(std::move(deployment));
  api.FailNext(kube::PodPath("ns", "a"), 409);
  const std::string bBefore = Version(api, "b");
  std::vector<loop::Expectation> expect;
  loop::WriteResult r = writer.Apply("ns/web", actions, &expect, /*cached=*/true);
  CHECK_FALSE(r.status.ok());
  CHECK(r.conflict);
  // a and b, two pods in a row, went out at once: b applied, and is counted and expected.
  CHECK(r.writes == 1);
  REQUIRE(expect.size() == 2);
  CHECK(expect[0].name == "a");
  CHECK(expect[0].leave == Version(api, "a"));  // the cache must move past the refused version
  CHECK(expect[1].name == "b");
  CHECK(expect[1].leave == bBefore);
  CHECK(expect[1].reach == Version(api, "b"));
  CHECK(api.CountWrites("PATCH " + kube::DeploymentPath("ns", "web")) == 0);
  // An admission refusal of a pod write: named for the progress report, no expectation.
  actions.clear();
  actions.push_back(PodPatch("b", Version(api, "b"), R"({"metadata":{"labels":{"x":"1"}}})"));
  api.FailNext(kube::PodPath("ns", "b"), 403, 1, "denied by policy deny-v2");
  expect.clear();
  r = writer.Apply("ns/web", actions, &expect, /*cached=*/true);
  CHECK_FALSE(r.status.ok());
  CHECK(r.refusedPod == "b");
  CHECK(r.refusal == "denied by policy deny-v2");
  CHECK(r.refusalCode == 403);
  CHECK(expect.empty());
}

TEST_CASE(
    "writer: a gate change is stamped with the time it is sent, not the time it was planned") {
  fake::FakeApi api;
  api.Put(kube::PodsPath("ns"),
          R"({"metadata":{"name":"a","namespace":"ns"},"spec":{},"status":{"conditions":[
          {"type":"inplace-webhook.io/ready","status":"True","lastTransitionTime":"2020-01-01T00:00:00Z"}]}})");
  loop::Writer writer(api, {});
  // Planned long ago (a slow pass, writes queued ahead of it): the drain is measured from the
  // stored lastTransitionTime, so it must be the time the API server got the write.
  // Its gate-sent record (milliseconds) is stamped with it, at the same instant.
  const std::string planned = R"({"metadata":{"annotations":{
      "inplace-webhook.io/gate-sent":"2020-01-01T00:00:05.250Z"}},
      "status":{"conditions":[{"type":"inplace-webhook.io/ready",
      "status":"False","lastTransitionTime":"2020-01-01T00:00:05Z"}]}})";
  for (bool stamp : {true, false}) {
    CAPTURE(stamp);
    std::vector<rollout::Action> actions;
    actions.push_back(PodPatch("a", "", planned));
    actions.back().kind = rollout::WriteKind::kPodStatusPatch;
    actions.back().stampTransition = stamp;
    const auto before = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
    REQUIRE(writer.Apply("ns/web", actions, nullptr, /*cached=*/true).status.ok());
    json::Document o = api.Object(kube::PodPath("ns", "a"));
    const json::Value& c = o["status"]["conditions"][0];
    CHECK(json::StringOr(&c, "status") == "False");
    const auto stored = rfc3339::Parse(json::StringOr(&c, "lastTransitionTime"));
    REQUIRE(stored.has_value());
    const auto sent = rfc3339::Parse(
        json::StringOr(json::Path(&o, {"metadata", "annotations"}), keys::kGateSentAnnotation));
    REQUIRE(sent.has_value());
    if (stamp) {
      CHECK(*stored >= before);
      CHECK(std::chrono::floor<std::chrono::seconds>(*sent) == *stored);
      CHECK(*sent <= std::chrono::system_clock::now());
    } else {
      CHECK(json::StringOr(&c, "lastTransitionTime") == "2020-01-01T00:00:05Z");
      CHECK(rfc3339::FormatMillis(*sent) == "2020-01-01T00:00:05.250Z");
    }
  }
}

namespace {

// Holds every pod PATCH until `want` are in flight at once (or a second passed), counting the most
// seen in flight.
class Gathering : public fake::FakeApi {
 public:
  explicit Gathering(int want) : want_(want) {}
  kube::Result Patch(std::string_view path, kube::PatchType type, std::string_view body) override {
    {
      std::unique_lock lock(mu_);
      most_ = std::max(most_, ++inFlight_);
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return inFlight_ >= want_ || gathered_; });
      gathered_ = gathered_ || inFlight_ >= want_;
    }
    kube::Result r = fake::FakeApi::Patch(path, type, body);
    std::lock_guard lock(mu_);
    --inFlight_;
    return r;
  }
  int Most() {
    std::lock_guard lock(mu_);
    return most_;
  }

 private:
  const int want_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inFlight_ = 0, most_ = 0;
  bool gathered_ = false;
};

}  // namespace

TEST_CASE("writer: a step's pod writes are in flight together, at most concurrentWrites") {
  for (size_t concurrent : {size_t{1}, size_t{4}}) {
    CAPTURE(concurrent);
    Gathering api(static_cast<int>(concurrent));
    std::vector<rollout::Action> actions;
    for (int i = 0; i < 10; ++i) {
      const std::string name = "p" + std::to_string(i);
      api.Put(kube::PodsPath("ns"),
              R"({"metadata":{"name":")" + name + R"(","namespace":"ns"},"spec":{}})");
      actions.push_back(PodPatch(name, Version(api, name), R"({"metadata":{"labels":{"x":"1"}}})"));
    }
    // The same pod again ends the run: its write needs the version the first one returned.
    actions.push_back(PodPatch("p0", Version(api, "p0"), R"({"metadata":{"labels":{"y":"2"}}})"));
    loop::WriterOptions options;
    options.concurrentWrites = concurrent;
    loop::Writer writer(api, options);
    std::vector<loop::Expectation> expect;
    loop::WriteResult r = writer.Apply("ns/web", actions, &expect, /*cached=*/true);
    REQUIRE(r.status.ok());
    CHECK(r.writes == 11);
    CHECK(api.Most() == static_cast<int>(concurrent));
    REQUIRE(expect.size() == 10);  // one per pod: p0's reaches its second write's version
    CHECK(expect[0].name == "p0");
    CHECK(expect[0].reach == Version(api, "p0"));
    json::Document p0 = api.Object(kube::PodPath("ns", "p0"));
    CHECK(json::StringOr(json::Find(json::Find(&p0, "metadata"), "labels"), "y") == "2");
  }
}
