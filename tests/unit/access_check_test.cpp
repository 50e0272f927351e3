// Whether the loop can act (DESIGN.md §9.8): the SelfSubjectAccessReviews asked, the verdict kept,
// and the elector that does not lead while a permission is refused.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "hooks/access_check.h"
#include "server/loop/access_monitor.h"
#include "server/loop/leader_election.h"
#include "tests/unit/fake_api.h"

using namespace iw;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

namespace {

json::Document Parse(const char* text) {
  json::Document d;
  REQUIRE(json::ParseUntrusted(text, d).ok());
  return d;
}

// Answers SelfSubjectAccessReviews as kube-apiserver does: allowed unless the permission is in
// `refused`; every call answers `failWith` instead when it is set. Nothing else is served.
class ReviewApi : public kube::Api {
 public:
  kube::Result Get(std::string_view) override { return Error(404); }
  kube::Result List(std::string_view, const kube::ListOptions&) override { return Error(404); }
  kube::Result Update(std::string_view, const json::Value&) override { return Error(405); }
  kube::Result Patch(std::string_view, kube::PatchType, std::string_view) override {
    return Error(405);
  }
  kube::Result Delete(std::string_view) override { return Error(405); }
  kube::Result Create(std::string_view path, const json::Value& review) override {
    std::lock_guard lock(mu);
    ++asked;
    if (path != access::kSelfSubjectAccessReviewsPath) return Error(404);
    if (failWith != 0) return Error(failWith);
    const json::Value* attrs = json::Path(&review, {"spec", "resourceAttributes"});
    access::Permission p{json::StringOr(attrs, "group"), json::StringOr(attrs, "resource"),
                         json::StringOr(attrs, "subresource"), json::StringOr(attrs, "verb")};
    kube::Result r;
    r.code = 201;
    r.object.CopyFrom(review, r.object.GetAllocator());
    json::Value& status = json::EnsureObject(r.object, "status", r.object.GetAllocator());
    // kube-apiserver omits allowed=false (omitempty): a refusal carries only a reason.
    if (refused.count(access::Describe(p)) == 0) {
      json::Set(status, "allowed", json::Value(true), r.object.GetAllocator());
    }
    return r;
  }

  std::mutex mu;
  std::set<std::string> refused;
  int failWith = 0;
  int asked = 0;

 private:
  static kube::Result Error(int code) {
    kube::Result r;
    r.code = code;
    r.message = "ReviewApi: " + std::to_string(code);
    return r;
  }
};

}  // namespace

TEST_CASE(
    "access check: one SelfSubjectAccessReview per permission, read as the API server answers") {
  const access::Permission status{"", "pods", "status", "patch"};
  CHECK(access::Describe(status) == "patch pods/status");
  CHECK(access::Describe({"apps", "deployments", "", "list"}) == "list apps/deployments");
  json::Document review = access::Review(status);
  CHECK(json::Serialize(review) ==
        R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",)"
        R"("spec":{"resourceAttributes":{"group":"","resource":"pods","subresource":"status",)"
        R"("verb":"patch"}}})");
  struct Case {
    const char* name;
    const char* answer;
    bool allowed;
  } cases[] = {
      {"allowed", R"({"status":{"allowed":true,"reason":"RBAC: allowed by ClusterRoleBinding"}})",
       true},
      {"refused, allowed omitted", R"({"status":{"reason":""}})", false},
      {"denied explicitly", R"({"status":{"allowed":false,"denied":true}})", false},
      {"no status", R"({})", false},
      {"allowed not a bool", R"({"status":{"allowed":"true"}})", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(access::Allowed(Parse(c.answer)) == c.allowed);
  }
  // The gate and the pod writes are among what the loop needs.
  std::set<std::string> needs;
  for (const access::Permission& p : access::LoopNeeds()) needs.insert(access::Describe(p));
  for (const char* p : {"patch pods/status", "patch pods", "watch pods", "patch apps/deployments",
                        "create apps/replicasets", "create events"}) {
    CAPTURE(p);
    CHECK(needs.count(p) == 1);
  }
  CHECK(access::Problem({}).empty());
  const std::string problem = access::Problem({status, {"", "pods", "", "watch"}});
  CHECK(problem.find("patch pods/status, watch pods") != std::string::npos);
  CHECK(problem.find("does not lead") != std::string::npos);
}

TEST_CASE(
    "access monitor: the verdict follows completed rounds; an unanswered one changes nothing") {
  ReviewApi api;
  std::atomic<int> reported{0};
  std::string lastProblem;
  server::AccessMonitor monitor(api, {.onRefused = [&](const std::string& problem) {
                                  ++reported;
                                  lastProblem = problem;
                                }});
  CHECK_FALSE(monitor.Known());
  CHECK_FALSE(monitor.Able());

  REQUIRE(monitor.CheckNow());
  CHECK(api.asked == static_cast<int>(access::LoopNeeds().size()));
  CHECK(monitor.Known());
  CHECK(monitor.Able());
  CHECK(monitor.Problem().empty());

  api.refused = {"patch pods/status"};
  REQUIRE(monitor.CheckNow());
  CHECK_FALSE(monitor.Able());
  CHECK(monitor.Problem().find("patch pods/status") != std::string::npos);
  CHECK(reported.load() == 1);
  CHECK(lastProblem == monitor.Problem());
  REQUIRE(monitor.CheckNow());  // still refused: reported once
  CHECK(reported.load() == 1);
  std::string metrics;
  monitor.RenderMetrics(metrics);
  CHECK(metrics.find("inplace_webhook_controller_permissions_refused 1\n") != std::string::npos);
  CHECK(metrics.find("inplace_webhook_access_checks_total{result=\"refused\"} 2\n") !=
        std::string::npos);

  // The API server does not answer: the last verdict stands (refused), and so it would for able.
  api.failWith = 503;
  CHECK_FALSE(monitor.CheckNow());
  CHECK_FALSE(monitor.Able());
  api.failWith = 0;
  api.refused = {"patch pods/status", "watch pods"};
  REQUIRE(monitor.CheckNow());
  CHECK(reported.load() == 2);  // a newly refused permission is reported again
  api.refused.clear();
  REQUIRE(monitor.CheckNow());
  CHECK(monitor.Able());
  api.failWith = 500;
  CHECK_FALSE(monitor.CheckNow());
  CHECK(monitor.Able());
  metrics.clear();
  monitor.RenderMetrics(metrics);
  CHECK(metrics.find("inplace_webhook_controller_permissions_refused 0\n") != std::string::npos);
  CHECK(metrics.find("inplace_webhook_access_checks_total{result=\"error\"} 2\n") !=
        std::string::npos);
}

TEST_CASE("leader election: a replica that cannot act does not campaign, and a leader steps down") {
  fake::FakeApi api;
  std::atomic<bool> may{false};
  std::atomic<int> started{0}, stopped{0};
  leader::Options o;
  o.namespaceName = "inplace-webhook";
  o.identity = "a";
  o.timing.retryPeriod = milliseconds(10);
  o.mayLead = [&] { return may.load(); };
  o.onStartedLeading = [&] { ++started; };
  o.onStoppedLeading = [&] { ++stopped; };
  const std::string lease = kube::LeasePath("inplace-webhook", leader::kLeaseName);
  auto holder = [&] {
    json::Document l = api.Object(lease);
    return std::string(json::StringOr(json::Find(&l, "spec"), "holderIdentity"));
  };
  auto eventually = [](auto pred) {
    const auto deadline = Steady::now() + seconds(60);
    while (!pred() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(5));
    return pred();
  };
  leader::LeaderElector a(api, o);
  a.Start();
  std::this_thread::sleep_for(milliseconds(200));  // twenty retry periods
  CHECK_FALSE(a.IsLeader());
  CHECK(started.load() == 0);
  CHECK(api.Object(lease).IsNull());  // not even created

  may = true;
  REQUIRE(eventually([&] { return a.IsLeader(); }));
  CHECK(holder() == "a");

  may = false;  // e.g. its ClusterRoleBinding deleted
  REQUIRE(eventually([&] { return !a.IsLeader() && stopped.load() == 1; }));
  CHECK(holder().empty());  // released, so an able replica need not wait out the lease
  CHECK_FALSE(a.LeaderKnownAlive(Steady::now()));

  may = true;
  // (IsLeader turns true before the elector's thread calls onStartedLeading.)
  REQUIRE(eventually([&] { return a.IsLeader() && started.load() >= 2; }));
  CHECK(started.load() == 2);
  a.Stop();
  CHECK(stopped.load() == 2);
}
