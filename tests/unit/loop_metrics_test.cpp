// The loop's metrics the chart's alerts and dashboard read (charts/inplace-webhook/rules,
// dashboards): every family is there with HELP and TYPE before any event; the per-update gauges;
// the hook-wait histogram and the plan fields that feed it and the stalled gauge.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "hooks/rollout_plan.h"
#include "lib/rfc3339.h"
#include "server/loop/loop_metrics.h"
#include "server/process/metrics.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsPod;
using namespace iw::fixtures;
using std::chrono::seconds;

namespace {

std::string Render(const loop::LoopMetrics& m) {
  std::string out;
  m.Render(out);
  return out;
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

void Apply(json::Document& pod, const pod_update::Step& s) {
  for (const auto& op : s.ops) {
    if (op.kind != pod_update::PodOp::Kind::kEvent) {
      fake::StrategicMergePatch(pod, op.body, pod.GetAllocator());
    }
  }
}

}  // namespace

TEST_CASE("loop metrics: every family has HELP and TYPE before any event") {
  loop::LoopMetrics m;
  const std::string out = Render(m);
  for (const char* family :
       {"inplace_webhook_rollouts_started_total", "inplace_webhook_hook_timeouts_total",
        "inplace_webhook_hook_wait_seconds", "inplace_webhook_pods",
        "inplace_webhook_updates_in_progress", "inplace_webhook_update_stalled",
        "inplace_webhook_statefulset_update_stalled", "inplace_webhook_pod_update_duration_seconds",
        "inplace_webhook_gate_latency_seconds"}) {
    CAPTURE(family);
    CHECK(out.find("# HELP " + std::string(family) + " ") != std::string::npos);
    CHECK(out.find("# TYPE " + std::string(family) + " ") != std::string::npos);
  }
  CHECK(Has(out, "# TYPE inplace_webhook_hook_wait_seconds histogram"));
  CHECK(Has(out, "inplace_webhook_hook_wait_seconds_bucket{hook=\"preUpdate\",le=\"+Inf\"} 0"));
  CHECK(Has(out, "inplace_webhook_hook_wait_seconds_count{hook=\"postUpdate\"} 0"));
  CHECK(Has(out, "inplace_webhook_updates_in_progress 0"));
  CHECK(out.find("inplace_webhook_update_stalled{") == std::string::npos);  // no update, no series
}

TEST_CASE("loop metrics: updates in progress, stalled ones by Deployment, forgotten at the end") {
  loop::LoopMetrics m;
  m.SetUpdate("shop/web", {{"Normal", 2}, {"PreparingUpdate", 1}},
              {{"turn", 2}, {"pre_update_hook", 1}}, false);
  m.SetUpdate("shop/api", {{"Updating", 1}}, {{"image", 1}}, true);
  m.SetUpdate("shop/empty", {}, {}, false);  // no pods yet: still an update in progress
  std::string out = Render(m);
  CHECK(Has(out, "inplace_webhook_updates_in_progress 3"));
  CHECK(Has(out,
            R"(inplace_webhook_update_stalled{deployment_namespace="shop",deployment="api"} 1)"));
  CHECK(Has(out,
            R"(inplace_webhook_update_stalled{deployment_namespace="shop",deployment="web"} 0)"));
  CHECK(Has(out, R"(inplace_webhook_pods{state="PreparingUpdate"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_pods{state="Updating"} 1)"));
  // What they wait on: every name of pod_update::PodWait, 0 when none waits on it.
  CHECK(Has(out, "# TYPE inplace_webhook_pods_waiting gauge"));
  CHECK(Has(out, R"(inplace_webhook_pods_waiting{on="turn"} 2)"));
  CHECK(Has(out, R"(inplace_webhook_pods_waiting{on="pre_update_hook"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_pods_waiting{on="image"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_pods_waiting{on="drain"} 0)"));
  CHECK(Has(out, R"(inplace_webhook_pods_waiting{on="post_update_hook"} 0)"));
  CHECK(m.StalledUpdates() == std::vector<std::string>{"shop/api"});

  m.SetUpdate("shop/api", {{"Updating", 1}}, {{"restart", 1}}, false);  // progress again
  CHECK(m.StalledUpdates().empty());
  m.ForgetUpdate("shop/api");
  CHECK(m.UpdatesInProgress() == 2);
  CHECK(m.PodsByState() == std::map<std::string, int>{{"Normal", 2}, {"PreparingUpdate", 1}});
  CHECK(m.PodsByWait() == std::map<std::string, int>{{"turn", 2}, {"pre_update_hook", 1}});
  m.ForgetUpdates();  // the loop stopped (no longer leading)
  out = Render(m);
  CHECK(Has(out, "inplace_webhook_updates_in_progress 0"));
  CHECK(out.find("inplace_webhook_update_stalled{") == std::string::npos);
}

TEST_CASE("loop metrics: a StatefulSet's stall in its own family, named by the StatefulSet") {
  loop::LoopMetrics m;
  const std::string sts(loop::kStatefulSetKeyPrefix);
  m.SetUpdate("shop/api", {{"Updating", 1}}, {{"restart", 1}}, false);
  m.SetUpdate(sts + "shop/db", {{"PreparingUpdate", 1}}, {{"pre_update_hook", 1}}, true);
  m.SetUpdate(sts + "shop/cache", {{"Normal", 2}}, {{"turn", 2}}, false);
  std::string out = Render(m);
  CHECK(Has(out, "inplace_webhook_updates_in_progress 3"));
  CHECK(Has(
      out,
      R"(inplace_webhook_statefulset_update_stalled{statefulset_namespace="shop",statefulset="db"} 1)"));
  CHECK(Has(
      out,
      R"(inplace_webhook_statefulset_update_stalled{statefulset_namespace="shop",statefulset="cache"} 0)"));
  CHECK(Has(out,
            R"(inplace_webhook_update_stalled{deployment_namespace="shop",deployment="api"} 0)"));
  // Neither family names the other kind's updates.
  CHECK(out.find(R"(deployment="db")") == std::string::npos);
  CHECK(out.find(R"(statefulset="api")") == std::string::npos);
  m.ForgetUpdate(sts + "shop/db");
  out = Render(m);
  CHECK(out.find(R"(statefulset="db")") == std::string::npos);
}

TEST_CASE("loop metrics: hook waits observed by hook, cumulative buckets") {
  loop::LoopMetrics m;
  m.Count(rollout::Metric::kPreUpdateWaitEnded, 42);
  m.Count(rollout::Metric::kPreUpdateWaitEnded, 3);
  m.Count(rollout::Metric::kPostUpdateWaitEnded, 700);
  const std::string out = Render(m);
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_bucket{hook="preUpdate",le="5"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_bucket{hook="preUpdate",le="60"} 2)"));
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_sum{hook="preUpdate"} 45)"));
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_count{hook="preUpdate"} 2)"));
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_bucket{hook="postUpdate",le="600"} 0)"));
  CHECK(Has(out, R"(inplace_webhook_hook_wait_seconds_bucket{hook="postUpdate",le="1800"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_pod_update_duration_seconds_count 0)"));  // not mixed in
}

TEST_CASE("pod steps say which wait they end and for how long, from the state-timestamp") {
  const std::string base = Template({{"app", "web"}}, {{"app", "nginx:1.25"}}, {}, false);
  const std::string target = Template({{"app", "web"}}, {{"app", "nginx:1.27"}}, {}, false);
  lifecycle::Settings settings;
  auto l = lifecycle::ParseLifecycle(
      R"({"preUpdate":{"labelsHandler":{"hold":"yes"}},"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})");
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  settings.lifecycle = *l;
  auto p = lifecycle::ParsePolicy(R"({"gracePeriodSeconds":0})");
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  settings.policy = *p;
  auto made = pod_update::MakeTarget(test::AsTemplate(Parse(base)), test::AsTemplate(Parse(target)),
                                     settings.policy, Hash(base), Hash(target));
  REQUIRE_MESSAGE(made.ok(), made.status().message());
  const pod_update::Rules rules = pod_update::MakeRules(settings);
  using Wait = pod_update::Step::Wait;

  json::Document pod = Pod("web-a", "uid-rs", base);
  SetLabel(pod, "hold", "yes");  // the pre-update hook is armed
  pod_update::Step s = pod_update::Decide(*made, rules, AsPod(pod), true, T0());
  CHECK(s.waitEnded == Wait::kNone);  // enters PreparingUpdate
  Apply(pod, s);
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kPreparingUpdate);
  CHECK(pod_update::Decide(*made, rules, AsPod(pod), false, T0() + seconds(5)).waitEnded ==
        Wait::kNone);

  SetLabel(pod, "hold", std::nullopt);  // released
  s = pod_update::Decide(*made, rules, AsPod(pod), false, T0() + seconds(40));
  CHECK(s.waitEnded == Wait::kPreparingUpdate);
  CHECK(s.waitSeconds == doctest::Approx(40));
  Apply(pod, s);
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);

  SetContainerStatus(pod, "app", "docker.io/library/nginx:1.27",
                     "docker.io/library/nginx:1.27@sha256:new", "containerd://new-app");
  s = pod_update::Decide(*made, rules, AsPod(pod), false, T0() + seconds(50));
  CHECK(s.completed);
  CHECK(s.waitEnded == Wait::kNone);  // Updating → Updated is no hook wait
  Apply(pod, s);
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdated);

  SetLabel(pod, "lb", "on");  // the post-update hook is satisfied
  s = pod_update::Decide(*made, rules, AsPod(pod), false, T0() + seconds(80));
  CHECK(s.waitEnded == Wait::kUpdated);
  CHECK(s.waitSeconds == doctest::Approx(30));
  Apply(pod, s);
  CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
}

TEST_CASE("a stall marks the plan stalled; progress before the deadline does not") {
  const Clock::time_point now = *rfc3339::Parse("2026-01-01T00:10:00Z");
  auto deployment = [](const std::string& lastUpdate) {
    return test::Parse(
        R"({"metadata":{"name":"web","namespace":"ns","annotations":{")" +
        std::string(keys::kInProgressAnnotation) +
        R"(":"{\"from\":\"a\",\"to\":\"b\",\"pausedByUs\":true,\"startedAt\":\"2026-01-01T00:00:00Z\"}"}},)"
        R"("spec":{"paused":true,"progressDeadlineSeconds":30},"status":{"conditions":[)"
        R"({"type":"inplace-webhook.io/Progressing","status":"True","reason":"InPlaceUpdateProgressing",)"
        R"("message":"1/3 pods updated to template b","lastUpdateTime":")" +
        lastUpdate + R"(","lastTransitionTime":"2026-01-01T00:00:00Z"}]}})");
  };
  auto plan = [] {
    rollout::Plan p;
    p.phase = rollout::Phase::kUpdating;
    p.podsAtTarget = 1;
    p.podsTotal = 3;
    p.target = "b";
    return p;
  };
  rollout::Plan quiet = plan();
  const json::Document recent = deployment("2026-01-01T00:09:55Z");
  progress::AddProgress(quiet, test::AsDeployment(recent), now);
  CHECK_FALSE(quiet.stalled);

  rollout::Plan stuck = plan();
  const json::Document old = deployment("2026-01-01T00:09:00Z");
  progress::AddProgress(stuck, test::AsDeployment(old), now);
  CHECK(stuck.stalled);
}

TEST_CASE("a declared route has its handler-error and latency series at 0 before any request") {
  metrics::Registry r;
  r.DeclareRoute("/mutate/pods");
  std::string out = r.Render();
  CHECK(Has(out, R"(inplace_webhook_handler_errors_total{route="/mutate/pods"} 0)"));
  CHECK(Has(out, R"(inplace_webhook_request_duration_seconds_count{route="/mutate/pods"} 0)"));
  r.RecordHandlerError("/mutate/pods");
  r.RecordRequest("/mutate/pods", 500, 0.001);
  r.DeclareRoute("/mutate/pods");  // again: keeps what was counted
  out = r.Render();
  CHECK(Has(out, R"(inplace_webhook_handler_errors_total{route="/mutate/pods"} 1)"));
  CHECK(Has(out, R"(inplace_webhook_request_duration_seconds_count{route="/mutate/pods"} 1)"));
}
