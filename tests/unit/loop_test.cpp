// The loop driven end to end against the in-memory API server, with a fake kubelet (restarts
// changed containers), a fake Deployment controller (status, annotation copies; fails the test
// if it would start a native rollout) and, where hooks are declared, a fake LB controller.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "server/loop.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"

using namespace iw;
using namespace iw::fixtures;
using std::chrono::seconds;

namespace {

constexpr std::string_view kNs = "default";

struct Cluster {
  fake::FakeApi api;
  std::string base, target;
  iw::InProgress record;
  std::vector<std::string> podNames;
  std::map<std::string, std::string> podUids;

  // A 3-replica Deployment `web` whose template just changed from `base` to `target` (the
  // webhook paused it and wrote in-progress), its ReplicaSet web-h1 and three running pods.
  explicit Cluster(std::string lifecycle = "", bool gate = false, int replicas = 3,
                   std::string strategy = R"({"rollingUpdate":{"maxUnavailable":1}})") {
    Strings baseLabels = {
        {"app", "web"}, {"version", "v1"}, {"inplace-webhook.io/enabled", "true"}};
    Strings targetLabels = {
        {"app", "web"}, {"version", "v2"}, {"inplace-webhook.io/enabled", "true"}};
    if (!lifecycle.empty()) {
      baseLabels["lb"] = "on";  // the hook label comes with the template (Kruise's pattern)
      targetLabels["lb"] = "on";
    }
    base = Template(baseLabels, {{"app", "nginx:1.25"}, {"sidecar", "busybox:1.36"}}, {}, gate);
    target = Template(targetLabels, {{"app", "nginx:1.27"}, {"sidecar", "busybox:1.36"}}, {}, gate);
    DeploymentSpec d;
    d.replicas = replicas;
    d.strategy = strategy;
    d.templateJson = target;
    d.lifecycle = lifecycle;
    record = iw::InProgress{Hash(base), Hash(target), true, "2026-01-01T00:00:00Z"};
    d.inProgress = record;
    api.Put(kube::DeploymentsPath(kNs), DeploymentJson(d));
    api.Put(kube::ReplicaSetsPath(kNs),
            ReplicaSetJson("web-h1", "uid-rs1", d.uid, replicas, base, "h1"));
    for (int i = 0; i < replicas; ++i) AddPod("web-" + std::string(1, static_cast<char>('a' + i)));
    fake::KubeletSync(api, kNs);
    REQUIRE(fake::ControllerSync(api, kNs, "web"));
  }

  void AddPod(const std::string& name) {
    fake::AddPodFromReplicaSet(api, kNs, "web-h1", name);
    podNames.push_back(name);
    json::Document p = Pod(name);
    podUids[name] = std::string(json::StringOr(json::Find(&p, "metadata"), "uid"));
  }

  json::Document Pod(const std::string& name) const { return api.Object(kube::PodPath(kNs, name)); }
  json::Document Deployment() const { return api.Object(kube::DeploymentPath(kNs, "web")); }
  bool Running() const { return Annotation(Deployment(), keys::kInProgressAnnotation).has_value(); }

  // The LB controller of the hook tests: deregisters (removes `lb`) a pod the loop holds in
  // PreparingUpdate, registers it again once Updated.
  void LoadBalancer() {
    for (const auto& name : podNames) {
      json::Document p = Pod(name);
      std::string_view state = pod_update::StateOf(p);
      if (state == keys::kStatePreparingUpdate && Label(p, "lb")) {
        api.Mutate(kube::PodPath(kNs, name),
                   [](json::Document& d) { SetLabel(d, "lb", std::nullopt); });
      } else if (state == keys::kStateUpdated && !Label(p, "lb")) {
        api.Mutate(kube::PodPath(kNs, name), [](json::Document& d) { SetLabel(d, "lb", "on"); });
      }
    }
  }

  int PodsInUpdate() const {
    int n = 0;
    for (const auto& name : podNames) {
      if (pod_update::StateOf(Pod(name)) != keys::kStateNormal) ++n;
    }
    return n;
  }

  std::map<std::string, int> EventReasons(std::string_view kind = "") const {
    std::map<std::string, int> out;
    for (const auto& path : api.Paths(kube::EventsPath(kNs))) {
      json::Document e = api.Object(path);
      if (!kind.empty() && json::StringOr(json::Find(&e, "involvedObject"), "kind") != kind)
        continue;
      ++out[std::string(json::StringOr(&e, "reason"))];
    }
    return out;
  }

  // Asserts the whole update happened in place.
  void CheckDone() const {
    json::Document d = Deployment();
    CHECK_FALSE(Annotation(d, keys::kInProgressAnnotation).has_value());
    CHECK_FALSE(d["spec"]["paused"].GetBool());
    CHECK(api.Paths(kube::ReplicaSetsPath(kNs)).size() == 1);  // no new ReplicaSet
    json::Document rs = api.Object(kube::ReplicaSetPath(kNs, "web-h1"));
    CHECK(TemplateHash(rs["spec"]["template"]) == record.to);
    CHECK(Label(rs["spec"]["template"], keys::kPodTemplateHashLabel) == "h1");
    CHECK(api.Paths(kube::PodsPath(kNs)).size() == podNames.size());
    for (const auto& name : podNames) {
      CAPTURE(name);
      json::Document p = Pod(name);
      CHECK(std::string(json::StringOr(json::Find(&p, "metadata"), "uid")) == podUids.at(name));
      CHECK(pod_update::StateOf(p) == keys::kStateNormal);
      CHECK(Label(p, "version") == "v2");
      CHECK(pod_update::ReadUpdateState(p)->revision == record.to);
      for (const auto& c : p["spec"]["containers"].GetArray()) {
        if (json::StringOr(&c, "name") == "app") CHECK(json::StringOr(&c, "image") == "nginx:1.27");
      }
      for (const auto& c : p["status"]["containerStatuses"].GetArray()) {
        const int restarts = c["restartCount"].GetInt();
        CHECK(restarts == (json::StringOr(&c, "name") == "app" ? 1 : 0));  // sidecar untouched
      }
      CHECK(budget::IsReady(p));
    }
    for (const auto& w : api.Writes()) {
      CHECK_FALSE(w.starts_with("DELETE"));
      CHECK_FALSE(w.starts_with("CREATE /api/v1/namespaces/default/pods"));
    }
  }
};

// Drives passes until the in-progress record is gone; `fresh` makes a new Loop each pass (a
// restart or a new leader every time).
int Drive(Cluster& c, loop::LoopMetrics& metrics, bool fresh, int maxUnavailable = 1,
          std::function<Clock::time_point()> clock = {}) {
  loop::Options opts;
  opts.metrics = &metrics;
  opts.clock = clock;
  opts.instance = "test";
  loop::Loop kept(c.api, opts);
  int pass = 0;
  for (; pass < 60 && c.Running(); ++pass) {
    if (fresh) {
      loop::Loop once(c.api, opts);
      once.RunOnce();
    } else {
      kept.RunOnce();
    }
    CHECK(c.PodsInUpdate() <= maxUnavailable);
    c.LoadBalancer();
    fake::KubeletSync(c.api, kNs);
    REQUIRE_MESSAGE(fake::ControllerSync(c.api, kNs, "web"),
                    "the Deployment controller would have started a native rollout");
  }
  return pass;
}

}  // namespace

TEST_CASE("loop: a 3-pod Deployment is updated in place, one pod at a time") {
  Cluster c;
  loop::LoopMetrics metrics;
  int passes = Drive(c, metrics, /*fresh=*/false);
  CHECK(passes < 60);
  c.CheckDone();
  const auto reasons = c.EventReasons();
  CHECK(reasons.at("InPlaceUpdateStarted") == 1);
  CHECK(reasons.at("PodUpdating") == 3);
  CHECK(reasons.at("PodUpdated") == 3);
  CHECK(reasons.at("InPlaceUpdateCompleted") == 1);
  CHECK(reasons.count("InPlaceUpdateAborted") == 0);
  CHECK(metrics.Value(rollout::Metric::kRolloutStarted) == 1);
  CHECK(metrics.Value(rollout::Metric::kRolloutCompleted) == 1);
  CHECK(metrics.Value(rollout::Metric::kPodUpdateStarted) == 3);
  CHECK(metrics.Value(rollout::Metric::kPodUpdateCompleted) == 3);
  CHECK(metrics.conflicts.load() == 0);
  CHECK(metrics.errors.load() == 0);

  // Every Event names its object and the component.
  for (const auto& path : c.api.Paths(kube::EventsPath(kNs))) {
    json::Document e = c.api.Object(path);
    CHECK(json::StringOr(json::Find(&e, "source"), "component") == "inplace-webhook");
    CHECK(json::StringOr(&e, "reportingInstance") == "test");
    CHECK_FALSE(json::StringOr(json::Find(&e, "involvedObject"), "uid").empty());
  }

  // After completion the loop leaves the Deployment alone, and removes the in-progress copy the
  // Deployment controller left on the ReplicaSet.
  loop::Loop after(c.api, {});
  CHECK(after.RunOnce().empty());
  json::Document rs = c.api.Object(kube::ReplicaSetPath(kNs, "web-h1"));
  CHECK_FALSE(Annotation(rs, keys::kInProgressAnnotation).has_value());
}

TEST_CASE("loop: hooks, readiness gate and drain; resumes with a new loop every pass") {
  Cluster c(R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"markPodNotReady":true}})",
            /*gate=*/true);
  // New pods declare the gate and have no condition yet: the first pass sets it True.
  CHECK_FALSE(pod_update::GateStatus(c.Pod("web-a")).has_value());
  loop::LoopMetrics metrics;
  Drive(c, metrics, /*fresh=*/true);
  c.CheckDone();
  for (const auto& name : c.podNames) {
    CHECK(pod_update::GateStatus(c.Pod(name)) == true);
    CHECK(Label(c.Pod(name), "lb") == "on");  // re-registered by the LB, not re-armed by us
  }
  const auto reasons = c.EventReasons("Pod");
  CHECK(reasons.at("PodPreparingUpdate") == 3);
  CHECK(reasons.at("PodUpdating") == 3);
  CHECK(reasons.at("PodUpdated") == 6);  // done (waiting for the post hook), then Normal
  CHECK(c.EventReasons("Deployment").at("InPlaceUpdateStarted") == 1);  // not repeated by restarts
}

TEST_CASE("loop: maxUnavailable 2 of 4 updates two pods at a time") {
  Cluster c("", false, 4, R"({"rollingUpdate":{"maxUnavailable":"50%"}})");
  loop::LoopMetrics metrics;
  Drive(c, metrics, false, /*maxUnavailable=*/2);
  c.CheckDone();
}

TEST_CASE("loop: a 409 ends the pass; the next pass re-reads and continues") {
  Cluster c;
  loop::LoopMetrics metrics;
  loop::Options opts;
  opts.metrics = &metrics;
  loop::Loop l(c.api, opts);
  c.api.FailNext(kube::PodPath(kNs, "web-a"), 409);
  auto results = l.RunOnce();
  REQUIRE(results.count("default/web") == 1);
  CHECK(results["default/web"].conflict);
  CHECK_FALSE(results["default/web"].ok);
  CHECK(pod_update::StateOf(c.Pod("web-a")) == keys::kStateNormal);
  CHECK(metrics.conflicts.load() == 1);

  results = l.RunOnce();
  CHECK(results["default/web"].ok);
  CHECK(pod_update::StateOf(c.Pod("web-a")) == keys::kStateUpdating);
  Drive(c, metrics, false);
  c.CheckDone();
}

TEST_CASE("loop: abort mid-update hands back to the native rollout, pods as they are") {
  Cluster c;
  loop::Loop l(c.api, {});
  l.RunOnce();
  REQUIRE(pod_update::StateOf(c.Pod("web-a")) == keys::kStateUpdating);
  c.api.Mutate(kube::DeploymentPath(kNs, "web"),
               [](json::Document& d) { SetAnnotation(d, keys::kAbortAnnotation, "true"); });
  auto results = l.RunOnce();
  CHECK(results["default/web"].phase == rollout::Phase::kAborted);
  json::Document d = c.Deployment();
  CHECK_FALSE(d["spec"]["paused"].GetBool());
  CHECK_FALSE(Annotation(d, keys::kInProgressAnnotation).has_value());
  CHECK_FALSE(Annotation(d, keys::kAbortAnnotation).has_value());
  CHECK(pod_update::StateOf(c.Pod("web-a")) == keys::kStateUpdating);  // left as it is
  CHECK(c.EventReasons().at("InPlaceUpdateAborted") == 1);
  CHECK(l.RunOnce().empty());
}

TEST_CASE("loop: a failed precondition aborts before any pod moves") {
  Cluster c;
  c.api.Put(kube::ReplicaSetsPath(kNs),
            ReplicaSetJson("web-h0", "uid-rs0", "uid-web", 1, c.base, "h0"));
  loop::Loop l(c.api, {});
  auto results = l.RunOnce();
  CHECK(results["default/web"].phase == rollout::Phase::kAborted);
  CHECK_FALSE(c.Running());
  for (const auto& name : c.podNames) CHECK(pod_update::StateOf(c.Pod(name)) == keys::kStateNormal);
}

TEST_CASE("loop: a hook timeout is reported once, across restarts of the loop") {
  Cluster c(R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"timeoutSeconds":30}})");
  Clock::time_point now = T0();
  loop::LoopMetrics metrics;
  loop::Options opts;
  opts.metrics = &metrics;
  opts.clock = [&now] { return now; };
  {
    loop::Loop l(c.api, opts);
    l.RunOnce();
  }
  REQUIRE(pod_update::StateOf(c.Pod("web-a")) == keys::kStatePreparingUpdate);
  for (int i = 1; i <= 4; ++i) {
    now = T0() + seconds(20 * i);
    loop::Loop l(c.api, opts);  // a new leader each time
    l.RunOnce();
  }
  CHECK(c.EventReasons("Pod").at("HookTimeout") == 1);
  CHECK(c.EventReasons("Deployment").at("HookTimeout") == 1);
  CHECK(metrics.Value(rollout::Metric::kHookTimeout) == 1);
  CHECK(pod_update::StateOf(c.Pod("web-a")) == keys::kStatePreparingUpdate);  // never skipped
  CHECK(c.PodsInUpdate() == 1);
  std::string rendered;
  metrics.Render(rendered);
  CHECK(rendered.find("inplace_webhook_hook_timeouts_total 1\n") != std::string::npos);
  CHECK(rendered.find("inplace_webhook_pods{state=\"PreparingUpdate\"} 1\n") != std::string::npos);
  CHECK(rendered.find("inplace_webhook_pods{state=\"Normal\"} 2\n") != std::string::npos);
}

TEST_CASE("loop: on its own thread until done; Stop joins") {
  Cluster c;
  loop::LoopMetrics metrics;
  loop::Options opts;
  opts.metrics = &metrics;
  opts.activePeriod = std::chrono::milliseconds(10);
  opts.resyncPeriod = std::chrono::milliseconds(30);
  {
    loop::Loop l(c.api, opts);
    l.Start();
    l.Start();  // idempotent
    CHECK(l.Running());
    // Generous bound: this checks that the thread makes progress, not how fast.
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (c.Running() && std::chrono::steady_clock::now() < deadline) {
      fake::KubeletSync(c.api, kNs);
      REQUIRE(fake::ControllerSync(c.api, kNs, "web"));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    l.Stop();
    CHECK_FALSE(l.Running());
  }  // the destructor after Stop is a no-op
  c.CheckDone();
  CHECK(metrics.Value(rollout::Metric::kRolloutCompleted) == 1);
}

TEST_CASE("loop: Enqueue wakes the thread for one Deployment") {
  Cluster c;
  loop::Options opts;
  opts.activePeriod = std::chrono::milliseconds(10);
  opts.resyncPeriod = std::chrono::hours(1);  // only the first resync and Enqueue drive it
  loop::Loop l(c.api, opts);
  l.Start();
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (c.Running() && std::chrono::steady_clock::now() < deadline) {
    fake::KubeletSync(c.api, kNs);
    REQUIRE(fake::ControllerSync(c.api, kNs, "web"));
    l.Enqueue(kNs, "web");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  l.Stop();
  c.CheckDone();
}
