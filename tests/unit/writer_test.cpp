#include "server/loop/writer.h"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

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
  api.FailNext(kube::PodPath("ns", "a"), 409);
  std::vector<loop::Expectation> expect;
  loop::WriteResult r = writer.Apply("ns/web", actions, &expect, /*cached=*/true);
  CHECK_FALSE(r.status.ok());
  CHECK(r.conflict);
  CHECK(r.writes == 0);  // b was not written after a's failure
  REQUIRE(expect.size() == 1);
  CHECK(expect[0].name == "a");
  CHECK(expect[0].leave == Version(api, "a"));  // the cache must move past the refused version
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
  const std::string planned = R"({"status":{"conditions":[{"type":"inplace-webhook.io/ready",
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
    if (stamp) {
      CHECK(*stored >= before);
    } else {
      CHECK(json::StringOr(&c, "lastTransitionTime") == "2020-01-01T00:00:05Z");
    }
  }
}
