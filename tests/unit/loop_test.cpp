// The loop driven end to end against the in-memory API server, with a fake kubelet (restarts
// changed containers), a fake Deployment controller (status, annotation copies; fails the test
// if it would start a native rollout) and, where hooks are declared, a fake LB controller: pass
// by pass through the API (RunOnce), and on its thread from informer caches fed by watches.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "server/loop/loop.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsPod;
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
    // The passes run back to back on the real clock: no default drain to sit out.
    if (gate) d.policy = R"({"gracePeriodSeconds":0})";
    record = iw::InProgress{Hash(base), Hash(target), true, "2026-01-01T00:00:00Z", ""};
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
      std::string_view state = pod_update::StateName(pod_update::StateOf(AsPod(p)));
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
      if (pod_update::StateOf(AsPod(Pod(name))) != pod_update::PodState::kNormal) ++n;
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
    // No ReplicaSet with replicas was made: the one added is the zero-replica history of the
    // template the pods left.
    CHECK(api.Paths(kube::ReplicaSetsPath(kNs)).size() == 2);
    json::Document history = api.Object(kube::ReplicaSetPath(kNs, "web-" + record.from));
    CHECK(TemplateHash(test::AsTemplate(history["spec"]["template"])) == record.from);
    CHECK(history["spec"]["replicas"].GetInt() == 0);
    json::Document rs = api.Object(kube::ReplicaSetPath(kNs, "web-h1"));
    CHECK(TemplateHash(test::AsTemplate(rs["spec"]["template"])) == record.to);
    CHECK(Label(rs["spec"]["template"], keys::kPodTemplateHashLabel) == "h1");
    CHECK(api.Paths(kube::PodsPath(kNs)).size() == podNames.size());
    for (const auto& name : podNames) {
      CAPTURE(name);
      json::Document p = Pod(name);
      CHECK(std::string(json::StringOr(json::Find(&p, "metadata"), "uid")) == podUids.at(name));
      CHECK(pod_update::StateOf(AsPod(p)) == pod_update::PodState::kNormal);
      CHECK(Label(p, "version") == "v2");
      CHECK(pod_update::ReadUpdateState(AsPod(p))->revision == record.to);
      for (const auto& c : p["spec"]["containers"].GetArray()) {
        if (json::StringOr(&c, "name") == "app") CHECK(json::StringOr(&c, "image") == "nginx:1.27");
      }
      for (const auto& c : p["status"]["containerStatuses"].GetArray()) {
        const int restarts = c["restartCount"].GetInt();
        CHECK(restarts == (json::StringOr(&c, "name") == "app" ? 1 : 0));  // sidecar untouched
      }
      CHECK(budget::IsReady(test::AsPod(p)));
    }
    for (const auto& w : api.Writes()) {
      CHECK_FALSE(w.starts_with("DELETE"));
      CHECK_FALSE(w.starts_with("CREATE /api/v1/namespaces/default/pods"));
    }
  }
};

// What Drive saw: the passes it took and the most pods in update after any pass.
struct Driven {
  int passes = 0;
  int peak = 0;
};

// Drives passes until the in-progress record is gone; `fresh` makes a new Loop each pass (a
// restart or a new leader every time). No pass may leave more than `maxUnavailable` pods in update.
Driven Drive(Cluster& c, loop::LoopMetrics& metrics, bool fresh, int maxUnavailable = 1,
             std::function<Clock::time_point()> clock = {}) {
  loop::Options opts;
  opts.metrics = &metrics;
  opts.clock = clock;
  opts.instance = "test";
  loop::Loop kept(c.api, opts);
  Driven driven;
  for (; driven.passes < 60 && c.Running(); ++driven.passes) {
    if (fresh) {
      loop::Loop once(c.api, opts);
      once.RunOnce();
    } else {
      kept.RunOnce();
    }
    driven.peak = std::max(driven.peak, c.PodsInUpdate());
    CHECK(c.PodsInUpdate() <= maxUnavailable);
    c.LoadBalancer();
    fake::KubeletSync(c.api, kNs);
    REQUIRE_MESSAGE(fake::ControllerSync(c.api, kNs, "web"),
                    "the Deployment controller would have started a native rollout");
  }
  return driven;
}

}  // namespace

TEST_CASE("loop: a 3-pod Deployment is updated in place, one pod at a time") {
  Cluster c;
  loop::LoopMetrics metrics;
  const Driven driven = Drive(c, metrics, /*fresh=*/false);
  CHECK(driven.passes < 60);
  CHECK(driven.peak == 1);
  c.CheckDone();
  const auto reasons = c.EventReasons();
  CHECK(reasons.at("InPlaceUpdateStarted") == 1);
  // The pods' ordinary steps make no Event (progress is told on the Deployment with its report,
  // at most every 2 s: none in a run this fast, progress_test shows them).
  CHECK(c.EventReasons("Pod").empty());
  CHECK(reasons.at("InPlaceUpdateCompleted") == 1);
  CHECK(reasons.count("InPlaceUpdateAborted") == 0);
  CHECK(metrics.Value(rollout::Metric::kRolloutStarted) == 1);
  CHECK(metrics.Value(rollout::Metric::kRolloutCompleted) == 1);
  CHECK(metrics.Value(rollout::Metric::kPodUpdateStarted) == 3);
  // Each pod was done on the kubelet's report with no write of ours: that completion is counted
  // from the pod watch (the event-driven test below), which passes over lists do not have.
  CHECK(metrics.Value(rollout::Metric::kPodUpdateCompleted) == 0);
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
  CHECK_FALSE(pod_update::GateStatus(AsPod(c.Pod("web-a"))).has_value());
  loop::LoopMetrics metrics;
  Drive(c, metrics, /*fresh=*/true);
  c.CheckDone();
  for (const auto& name : c.podNames) {
    CHECK(pod_update::GateStatus(AsPod(c.Pod(name))) == true);
    CHECK(Label(c.Pod(name), "lb") == "on");  // re-registered by the LB, not re-armed by us
  }
  CHECK(c.EventReasons("Pod").empty());  // the pods' ordinary steps make no Event
  CHECK(c.EventReasons("Deployment").at("InPlaceUpdateStarted") == 1);  // not repeated by restarts
}

TEST_CASE("loop: maxUnavailable 2 of 4 updates two pods at a time") {
  Cluster c("", false, 4, R"({"rollingUpdate":{"maxUnavailable":"50%"}})");
  loop::LoopMetrics metrics;
  // Two at a time, not one: the budget is used, and never exceeded.
  CHECK(Drive(c, metrics, false, /*maxUnavailable=*/2).peak == 2);
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
  CHECK_FALSE(results["default/web"].status.ok());
  CHECK(pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kNormal);
  CHECK(metrics.conflicts.load() == 1);

  results = l.RunOnce();
  CHECK(results["default/web"].status.ok());
  CHECK(pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kUpdating);
  Drive(c, metrics, false);
  c.CheckDone();
}

TEST_CASE(
    "loop: abort mid-update hands back to the native rollout, pods in flight back to Normal") {
  Cluster c;
  loop::Loop l(c.api, {});
  l.RunOnce();
  REQUIRE(pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kUpdating);
  c.api.Mutate(kube::DeploymentPath(kNs, "web"),
               [](json::Document& d) { SetAnnotation(d, keys::kAbortAnnotation, "true"); });
  auto results = l.RunOnce();
  CHECK(results["default/web"].phase == rollout::Phase::kAborted);
  json::Document d = c.Deployment();
  CHECK_FALSE(d["spec"]["paused"].GetBool());
  CHECK_FALSE(Annotation(d, keys::kInProgressAnnotation).has_value());
  CHECK_FALSE(Annotation(d, keys::kAbortAnnotation).has_value());
  // Its content is left as it is; its state no longer holds it out of service.
  CHECK(pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kNormal);
  CHECK(c.EventReasons().at("InPlaceUpdateAborted") == 1);
  CHECK(l.RunOnce().empty());
}

namespace {

// A 2-replica Deployment whose container app changes cpu in place (no image, no label), in the
// middle of its update: the webhook paused it and wrote in-progress. No progressDeadlineSeconds.
void PutResizeUpdate(fake::FakeApi& api) {
  const Strings labels = {{"app", "web"}, {"inplace-webhook.io/enabled", "true"}};
  auto withCpu = [](const std::string& t, std::string_view r) {
    json::Document d = Parse(t);
    auto& a = d.GetAllocator();
    json::Set(d["spec"]["containers"][0], "resources", json::Value(Parse(r), a), a);
    return json::Serialize(d);
  };
  const std::string base = withCpu(Template(labels, {{"app", "nginx:1.25"}}),
                                   R"({"requests":{"cpu":"100m"},"limits":{"cpu":"200m"}})");
  const std::string target = withCpu(Template(labels, {{"app", "nginx:1.25"}}),
                                     R"({"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}})");
  DeploymentSpec d;
  d.replicas = 2;
  d.templateJson = target;
  d.inProgress = iw::InProgress{Hash(base), Hash(target), true, "2026-01-01T00:00:00Z", ""};
  api.Put(kube::DeploymentsPath(kNs), DeploymentJson(d));
  api.Put(kube::ReplicaSetsPath(kNs), ReplicaSetJson("web-h1", "uid-rs1", d.uid, 2, base, "h1"));
  fake::AddPodFromReplicaSet(api, kNs, "web-h1", "web-a");
  fake::AddPodFromReplicaSet(api, kNs, "web-h1", "web-b");
  fake::KubeletSync(api, kNs);
  REQUIRE(fake::ControllerSync(api, kNs, "web"));
}

const json::Value* DeploymentCondition(const json::Value& d, std::string_view type) {
  const json::Value* list = json::Path(&d, {"status", "conditions"});
  if (list == nullptr || !list->IsArray()) return nullptr;
  for (const auto& c : list->GetArray()) {
    if (json::StringOr(&c, "type") == type) return &c;
  }
  return nullptr;
}

}  // namespace

TEST_CASE(
    "loop: a pods/resize the API server refuses is reported stuck at once, not retried "
    "silently") {
  fake::FakeApi api;
  PutResizeUpdate(api);
  const std::string resizePath = kube::PodResizePath(kNs, "web-a");
  const std::string missing = "the server could not find the requested resource";
  loop::LoopMetrics metrics;
  loop::Options opts;
  opts.metrics = &metrics;
  loop::Loop l(api, opts);
  auto events = [&api](std::string_view reason, std::string_view kind) {
    int n = 0;
    for (const auto& path : api.Paths(kube::EventsPath(kNs))) {
      json::Document e = api.Object(path);
      if (json::StringOr(&e, "reason") == reason &&
          json::StringOr(json::Find(&e, "involvedObject"), "kind") == kind) {
        ++n;
      }
    }
    return n;
  };

  SUBCASE("404: the API server has no pods/resize (a chart rendered for another version)") {
    api.FailNext(resizePath, 404, 2, missing);
    auto results = l.RunOnce();
    const loop::ReconcileResult& r = results["default/web"];
    CHECK_FALSE(r.status.ok());
    CHECK(r.refusedResize);
    CHECK(r.refusalCode == 404);
    CHECK(r.refusedPod == "web-a");
    // Reported in the same pass, though the Deployment has no progress deadline at all.
    CHECK(events("PodResizeRefused", "Pod") == 1);
    CHECK(events("PodResizeRefused", "Deployment") == 1);
    json::Document d = api.Object(kube::DeploymentPath(kNs, "web"));
    const json::Value* ours = DeploymentCondition(d, keys::kProgressCondition);
    REQUIRE(ours != nullptr);
    CHECK(json::StringOr(ours, "status") == "False");
    CHECK(json::StringOr(ours, "reason") == "PodResizeRefused");
    CHECK(std::string(json::StringOr(ours, "message"))
              .find("pod web-a: resize refused by the API "
                    "server: " +
                    missing) != std::string::npos);
    const json::Value* progressing = DeploymentCondition(d, "Progressing");
    REQUIRE(progressing != nullptr);
    CHECK(json::StringOr(progressing, "reason") == "ProgressDeadlineExceeded");
    CHECK(metrics.StalledUpdates() == std::vector<std::string>{"default/web"});
    CHECK(pod_update::StateOf(AsPod(api.Object(kube::PodPath(kNs, "web-a")))) ==
          pod_update::PodState::kUpdating);

    // Retried (with the loop's backoff), refused again: still stuck, no Event twice.
    results = l.RunOnce();
    CHECK(results["default/web"].refusedResize);
    CHECK(events("PodResizeRefused", "Pod") == 1);
    CHECK(events("PodResizeRefused", "Deployment") == 1);
    d = api.Object(kube::DeploymentPath(kNs, "web"));
    CHECK(json::StringOr(DeploymentCondition(d, keys::kProgressCondition), "reason") ==
          "PodResizeRefused");
    CHECK(json::StringOr(DeploymentCondition(d, "Progressing"), "reason") ==
          "ProgressDeadlineExceeded");
    CHECK(api.CountWrites("PATCH " + resizePath) == 0);
  }
  SUBCASE("422 from validation (a node without resize support), 403 from admission") {
    for (int code : {422, 403}) {
      CAPTURE(code);
      api.FailNext(resizePath, code, 1, "refused " + std::to_string(code));
      auto results = l.RunOnce();
      CHECK(results["default/web"].refusedResize);
      json::Document d = api.Object(kube::DeploymentPath(kNs, "web"));
      CHECK(std::string(json::StringOr(DeploymentCondition(d, keys::kProgressCondition), "message"))
                .find("refused " + std::to_string(code)) != std::string::npos);
    }
    CHECK(events("PodResizeRefused", "Deployment") == 2);
  }
  SUBCASE("a conflict, throttling or a server error is retried without a report") {
    for (int code : {409, 429, 500}) {
      CAPTURE(code);
      api.FailNext(resizePath, code);
      auto results = l.RunOnce();
      CHECK_FALSE(results["default/web"].status.ok());
      CHECK(results["default/web"].refusedPod.empty());
    }
    CHECK(events("PodResizeRefused", "Deployment") == 0);
    json::Document d = api.Object(kube::DeploymentPath(kNs, "web"));
    const json::Value* ours = DeploymentCondition(d, keys::kProgressCondition);
    CHECK((ours == nullptr || json::StringOr(ours, "reason") != "PodResizeRefused"));
  }
}

TEST_CASE("loop: a failed precondition aborts before any pod moves") {
  Cluster c;
  c.api.Put(kube::ReplicaSetsPath(kNs),
            ReplicaSetJson("web-h0", "uid-rs0", "uid-web", 1, c.base, "h0"));
  loop::Loop l(c.api, {});
  auto results = l.RunOnce();
  CHECK(results["default/web"].phase == rollout::Phase::kAborted);
  CHECK_FALSE(c.Running());
  for (const auto& name : c.podNames)
    CHECK(pod_update::StateOf(AsPod(c.Pod(name))) == pod_update::PodState::kNormal);
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
  REQUIRE(pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kPreparingUpdate);
  for (int i = 1; i <= 4; ++i) {
    now = T0() + seconds(20 * i);
    loop::Loop l(c.api, opts);  // a new leader each time
    l.RunOnce();
  }
  CHECK(c.EventReasons("Pod").at("HookTimeout") == 1);
  CHECK(c.EventReasons("Deployment").at("HookTimeout") == 1);
  CHECK(metrics.Value(rollout::Metric::kHookTimeout) == 1);
  CHECK(pod_update::StateOf(AsPod(c.Pod("web-a"))) ==
        pod_update::PodState::kPreparingUpdate);  // never skipped
  CHECK(c.PodsInUpdate() == 1);
  std::string rendered;
  metrics.Render(rendered);
  CHECK(rendered.find("inplace_webhook_hook_timeouts_total 1\n") != std::string::npos);
  CHECK(rendered.find("inplace_webhook_pods{state=\"PreparingUpdate\"} 1\n") != std::string::npos);
  CHECK(rendered.find("inplace_webhook_pods{state=\"Normal\"} 2\n") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The thread: informers over the in-memory API.

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// The in-memory API with watches: each watch looks at the store every millisecond and reports
// what changed since the collection's last LIST or event, as the watch cache would (ADDED,
// MODIFIED, DELETED; an object leaving the selector is DELETED). A held resource delivers no
// events until released: a watch that lags. Counts the calls made through it.
class Watchable : public kube::WatchApi {
 public:
  explicit Watchable(fake::FakeApi& api) : api_(api) {}

  kube::Result Get(std::string_view path) override {
    ++gets_;
    return api_.Get(path);
  }
  kube::Result List(std::string_view path, const kube::ListOptions& options) override {
    ++lists_;
    kube::Result r = api_.List(path, options);
    if (r.Ok()) {
      std::lock_guard lock(mu_);
      seen_[std::string(path) + "?" + options.labelSelector] = ByKey(r.object);
    }
    return r;
  }
  kube::Result Create(std::string_view path, const json::Value& object) override {
    ++writes_;
    return api_.Create(path, object);
  }
  kube::Result Update(std::string_view path, const json::Value& object) override {
    ++writes_;
    return api_.Update(path, object);
  }
  kube::Result Patch(std::string_view path, kube::PatchType type, std::string_view body) override {
    ++writes_;
    if (path.find("/pods/") != std::string_view::npos && !path.ends_with("/status")) {
      std::unique_lock lock(mu_);
      ++waitingPatches_;
      patchCv_.wait(lock, [this] { return !holdPodPatches_; });
      --waitingPatches_;
    }
    return api_.Patch(path, type, body);
  }
  kube::Result Delete(std::string_view path) override {
    ++writes_;
    return api_.Delete(path);
  }
  kube::WatchResult Watch(std::string_view path, const kube::WatchOptions& options,
                          const kube::WatchHandler& handler, std::stop_token stop) override {
    kube::WatchResult res;
    res.code = 200;
    const auto end = Steady::now() + std::chrono::seconds(options.timeoutSeconds);
    // A LIST only when an object or a hold changed since the last one: listing every millisecond
    // in each of the loop's four watches took most of a CPU under TSan, and the loop starved.
    long long listed = -1;
    int holds = -1;
    while (Steady::now() < end) {
      if (stop.stop_requested()) {
        res.stopped = true;
        return res;
      }
      const long long revision = api_.Revision();
      const int held = holdChanges_.load();
      if (revision == listed && held == holds) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      listed = revision;
      holds = held;
      for (kube::WatchEvent& e : Changes(path, options.labelSelector)) {
        ++res.events;
        if (!handler(e)) {
          res.stopped = true;
          return res;
        }
      }
      std::this_thread::sleep_for(1ms);
    }
    return res;
  }

  void Hold(std::string_view collection, bool held) {
    std::lock_guard lock(mu_);
    if (held) {
      held_.insert(std::string(collection));
    } else {
      held_.erase(std::string(collection));
    }
    ++holdChanges_;  // a released watch reports what it held back
  }
  // While held, a pod write other than pods/status waits in Patch until released: a Deployment
  // pass stuck behind a slow API (or a rate limit).
  void HoldPodPatches(bool held) {
    {
      std::lock_guard lock(mu_);
      holdPodPatches_ = held;
    }
    patchCv_.notify_all();
  }
  int WaitingPatches() {
    std::lock_guard lock(mu_);
    return waitingPatches_;
  }
  int Gets() const { return gets_.load(); }
  int Lists() const { return lists_.load(); }
  int Calls() const { return gets_.load() + lists_.load() + writes_.load(); }

 private:
  using Seen = std::map<std::string, json::Document>;  // "namespace/name" → object

  static Seen ByKey(const json::Document& list) {
    Seen out;
    for (const auto& item : list["items"].GetArray()) {
      const json::Value* meta = json::Find(&item, "metadata");
      json::Document copy;
      copy.CopyFrom(item, copy.GetAllocator());
      out[std::string(json::StringOr(meta, "namespace")) + "/" +
          std::string(json::StringOr(meta, "name"))] = std::move(copy);
    }
    return out;
  }

  static kube::WatchEvent Event(std::string type, const json::Value& object) {
    kube::WatchEvent e;
    e.type = std::move(type);
    e.object.CopyFrom(object, e.object.GetAllocator());
    return e;
  }

  std::vector<kube::WatchEvent> Changes(std::string_view path, const std::string& selector) {
    kube::ListOptions options;
    options.labelSelector = selector;
    kube::Result now = api_.List(path, options);  // not one of the loop's calls
    std::vector<kube::WatchEvent> out;
    std::lock_guard lock(mu_);
    if (!now.Ok() || held_.contains(std::string(path))) return out;
    Seen& before = seen_[std::string(path) + "?" + selector];
    Seen after = ByKey(now.object);
    for (const auto& [key, object] : after) {
      auto it = before.find(key);
      if (it == before.end()) {
        out.push_back(Event("ADDED", object));
      } else if (Meta(it->second, "resourceVersion") != Meta(object, "resourceVersion")) {
        out.push_back(Event("MODIFIED", object));
      }
    }
    for (const auto& [key, object] : before) {
      if (!after.contains(key)) out.push_back(Event("DELETED", object));
    }
    before = std::move(after);
    return out;
  }

  static std::string_view Meta(const json::Value& o, std::string_view k) {
    return json::StringOr(json::Find(&o, "metadata"), k);
  }

  fake::FakeApi& api_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // by "path?selector"
  std::set<std::string> held_;
  std::condition_variable patchCv_;
  bool holdPodPatches_ = false;
  int waitingPatches_ = 0;
  std::atomic<int> gets_{0}, lists_{0}, writes_{0};
  std::atomic<int> holdChanges_{0};
};

loop::Options ThreadOptions(loop::LoopMetrics* metrics) {
  loop::Options opts;
  opts.metrics = metrics;
  opts.batchDelay = 1ms;
  opts.resyncPeriod = std::chrono::hours(1);  // only events drive the thread
  opts.expectationTimeout = std::chrono::hours(1);
  opts.instance = "test";
  return opts;
}

// Waits (generously: this checks progress, not speed) until `done`, calling `tick` meanwhile.
bool WaitFor(const std::function<bool()>& done, const std::function<void()>& tick = {}) {
  const auto deadline = Steady::now() + 60s;
  while (!done()) {
    if (Steady::now() > deadline) return false;
    if (tick) tick();
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// The kubelet and the Deployment controller, once.
void Sync(Cluster& c) {
  fake::KubeletSync(c.api, kNs);
  REQUIRE_MESSAGE(fake::ControllerSync(c.api, kNs, "web"),
                  "the Deployment controller would have started a native rollout");
}

// Removes the Deployment's in-progress record (as if the webhook had not admitted the change
// yet) and returns it, to be put back with PutRecord while the loop runs.
std::string TakeRecord(Cluster& c) {
  std::string record = *Annotation(c.Deployment(), keys::kInProgressAnnotation);
  c.api.Mutate(kube::DeploymentPath(kNs, "web"), [](json::Document& d) {
    SetAnnotation(d, keys::kInProgressAnnotation, std::nullopt);
  });
  return record;
}
void PutRecord(Cluster& c, const std::string& record) {
  c.api.Mutate(kube::DeploymentPath(kNs, "web"), [&record](json::Document& d) {
    SetAnnotation(d, keys::kInProgressAnnotation, record);
  });
}

bool Synced(const loop::Loop& l) {
  return l.GetCacheStats().synced;
}

}  // namespace

TEST_CASE("loop thread: event-driven from the caches until done, then idle; Stop joins") {
  Cluster c;
  Watchable w(c.api);
  loop::LoopMetrics metrics;
  loop::Loop l(w, ThreadOptions(&metrics));
  l.Start();
  l.Start();  // idempotent
  CHECK(l.Running());
  REQUIRE(WaitFor([&] { return !c.Running(); },
                  [&] {
                    Sync(c);
                    CHECK(c.PodsInUpdate() <= 1);
                  }));
  // The ReplicaSet copy of in-progress the Deployment controller left is removed on its event.
  REQUIRE(WaitFor(
      [&] {
        return !Annotation(c.api.Object(kube::ReplicaSetPath(kNs, "web-h1")),
                           keys::kInProgressAnnotation);
      },
      [&] { Sync(c); }));
  c.CheckDone();
  CHECK(metrics.Value(rollout::Metric::kRolloutCompleted) == 1);
  CHECK(metrics.Value(rollout::Metric::kPodUpdateCompleted) == 3);

  // Every snapshot of the pods' updates came from the caches: the reads are the informers' first
  // LISTs and, for the two passes that finish and end the update, one GET of the Deployment and
  // two LISTs (ReplicaSets, pods) each (the pod cache holds opted-in pods only).
  // (More when a pass meets the finish again before the caches show its write: slow builds do.)
  // The counts agree once no pass runs: one still running between the reads is in one count only.
  loop::CacheStats stats;
  CHECK(WaitFor([&] {
    stats = l.GetCacheStats();
    const auto gets = static_cast<uint64_t>(w.Gets()), lists = static_cast<uint64_t>(w.Lists());
    return gets == stats.freshPasses && lists == 4 + 2 * stats.freshPasses &&
           l.GetCacheStats().freshPasses == stats.freshPasses;
  }));
  CHECK(stats.freshPasses >= 2);
  CHECK(stats.cachedPasses > 0);
  CHECK(w.Gets() == stats.freshPasses);
  CHECK(w.Lists() == 4 + 2 * stats.freshPasses);
  REQUIRE(stats.kinds.size() == 4);
  CHECK(stats.kinds[3].name == "statefulsets");
  CHECK(stats.kinds[2].name == "pods");
  CHECK(stats.kinds[2].objects == 3);
  CHECK(stats.kinds[2].bytes > 0);
  std::string rendered;
  l.RenderMetrics(rendered);
  CHECK(rendered.find("inplace_webhook_informer_objects{resource=\"pods\"} 3\n") !=
        std::string::npos);

  // Nothing changes: no API call at all.
  const int calls = w.Calls();
  std::this_thread::sleep_for(200ms);
  CHECK(w.Calls() == calls);

  l.Stop();
  CHECK_FALSE(l.Running());
  CHECK_FALSE(l.GetCacheStats().running);
  l.Stop();  // idempotent; the destructor after Stop is a no-op too
}

TEST_CASE("loop thread: an update starts on the Deployment's own event") {
  Cluster c;
  const std::string record = TakeRecord(c);
  Watchable w(c.api);
  loop::LoopMetrics metrics;
  loop::Loop l(w, ThreadOptions(&metrics));
  l.Start();
  REQUIRE(WaitFor([&] { return Synced(l); }));
  l.Enqueue(kNs, "web");  // nothing to do: no in-place update
  PutRecord(c, record);
  REQUIRE(WaitFor([&] { return !c.Running(); }, [&] { Sync(c); }));
  c.CheckDone();
  CHECK(l.GetCacheStats().freshPasses >= 2);  // the finish and the end
}

TEST_CASE(
    "loop thread: a pass that waits for the caches is woken by its object's event, update or not") {
  // After an update ends the loop's last writes are awaited still (the completion writes the
  // Deployment twice; the cleanup of the ReplicaSet copies): their events carry no update, yet
  // they must wake the waiting pass, or it sleeps until the expectation's deadline.
  Cluster c;
  TakeRecord(c);
  c.api.Mutate(kube::ReplicaSetPath(kNs, "web-h1"), [](json::Document& rs) {
    SetAnnotation(rs, keys::kInProgressAnnotation, R"({"copy":"left by the controller"})");
  });
  Watchable w(c.api);
  loop::Loop l(w, ThreadOptions(nullptr));  // the expectations' deadline: an hour
  w.Hold(kube::ReplicaSetsPath(""), true);  // the ReplicaSet cache keeps what it listed
  l.Start();
  REQUIRE(WaitFor([&] { return Synced(l); }));
  // The listed ReplicaSet's event: the update has ended, the copy is removed.
  REQUIRE(WaitFor([&] {
    return !Annotation(c.api.Object(kube::ReplicaSetPath(kNs, "web-h1")),
                       keys::kInProgressAnnotation);
  }));
  // Asked again before the ReplicaSet cache shows the write: the pass waits.
  REQUIRE(WaitFor([&] { return l.GetCacheStats().awaiting == 1; }, [&] { l.Enqueue(kNs, "web"); }));
  CHECK(l.GetCacheStats().waits >= 1);
  // The write's event: neither the ReplicaSet nor its Deployment has an update now.
  w.Hold(kube::ReplicaSetsPath(""), false);
  CHECK(WaitFor([&] { return l.GetCacheStats().awaiting == 0; }));
  CHECK(c.api.CountWrites("PATCH /apis/apps/v1/namespaces/default/replicasets/web-h1") == 1);
  l.Stop();
}

TEST_CASE("loop thread: pod events alone carry the update (pod → ReplicaSet → Deployment)") {
  Cluster c("", false, 4, R"({"rollingUpdate":{"maxUnavailable":"50%"}})");
  Watchable w(c.api);
  loop::Loop l(w, ThreadOptions(nullptr));
  l.Start();
  // Only kubelet acts (no Deployment or ReplicaSet changes): every pod reaches the target.
  auto allMoved = [&c] {
    for (const auto& name : c.podNames) {
      json::Document p = c.Pod(name);
      if (pod_update::StateOf(AsPod(p)) != pod_update::PodState::kNormal ||
          Label(p, "version") != "v2") {
        return false;
      }
    }
    return true;
  };
  REQUIRE(WaitFor(allMoved, [&] {
    fake::KubeletSync(c.api, kNs);
    CHECK(c.PodsInUpdate() <= 2);
  }));
  REQUIRE(WaitFor([&] { return !c.Running(); }, [&] { Sync(c); }));
  c.CheckDone();
  CHECK(l.GetCacheStats().freshPasses >= 2);  // the finish and the end
}

TEST_CASE("loop thread: while the caches lag behind its own write, the loop writes nothing more") {
  Cluster c;
  const std::string record = TakeRecord(c);
  Watchable w(c.api);
  loop::LoopMetrics metrics;
  loop::Loop l(w, ThreadOptions(&metrics));
  l.Start();
  REQUIRE(WaitFor([&] { return Synced(l); }));
  w.Hold(kube::PodsPath(""), true);
  PutRecord(c, record);
  REQUIRE(WaitFor([&] {
    return pod_update::StateOf(AsPod(c.Pod("web-a"))) == pod_update::PodState::kUpdating;
  }));
  const size_t podWrites = c.api.CountWrites("PATCH /api/v1/namespaces/default/pods/");
  auto passes = [&l] {
    loop::CacheStats s = l.GetCacheStats();
    return s.cachedPasses + s.freshPasses + s.waits;
  };
  const uint64_t before = passes();
  // Kubelet restarts web-a, and the loop is asked again and again; its cache still shows web-a
  // as it was before the write (Normal, available): planning from it would write web-a again
  // (refused) or start web-b beyond the budget.
  REQUIRE(WaitFor([&] { return passes() >= before + 3; },
                  [&] {
                    Sync(c);
                    l.Enqueue(kNs, "web");
                  }));
  // (web-a is done on the kubelet's report: the API shows it Normal, its cache before the write.)
  for (const char* other : {"web-b", "web-c"}) {
    CHECK_FALSE(Annotation(c.Pod(other), keys::kUpdateStateAnnotation).has_value());
  }
  CHECK(c.api.CountWrites("PATCH /api/v1/namespaces/default/pods/") == podWrites);
  CHECK(metrics.conflicts.load() == 0);
  CHECK(l.GetCacheStats().freshPasses == 0);

  w.Hold(kube::PodsPath(""), false);
  REQUIRE(WaitFor([&] { return !c.Running(); },
                  [&] {
                    Sync(c);
                    CHECK(c.PodsInUpdate() <= 1);
                  }));
  c.CheckDone();
  CHECK(l.GetCacheStats().freshPasses >= 2);  // the finish and the end
}

TEST_CASE("loop thread: a conflict waits for the cache's newer version, with no API read") {
  Cluster c;
  const std::string record = TakeRecord(c);
  Watchable w(c.api);
  loop::LoopMetrics metrics;
  loop::Options opts = ThreadOptions(&metrics);
  opts.conflictTimeout = std::chrono::hours(1);  // only the cache's newer version lets it go on
  loop::Loop l(w, opts);
  l.Start();
  REQUIRE(WaitFor([&] { return Synced(l); }));
  w.Hold(kube::PodsPath(""), true);
  // Another writer changes web-a; the loop's cache does not show it yet.
  c.api.Mutate(kube::PodPath(kNs, "web-a"),
               [](json::Document& p) { SetAnnotation(p, "example.com/touched", "1"); });
  PutRecord(c, record);
  REQUIRE(WaitFor([&] { return metrics.conflicts.load() >= 1; }));
  CHECK(pod_update::StateOf(AsPod(c.Pod("web-a"))) ==
        pod_update::PodState::kNormal);  // the write was refused
  CHECK(w.Gets() == 0);                  // the refusal read nothing through the API
  CHECK(l.GetCacheStats().freshPasses == 0);
  w.Hold(kube::PodsPath(""), false);
  REQUIRE(WaitFor([&] { return !c.Running(); }, [&] { Sync(c); }));
  c.CheckDone();
  CHECK(Annotation(c.Pod("web-a"), "example.com/touched") == "1");
  // Stopped, the counters hold still. Each full fresh pass reads the Deployment and lists twice,
  // after the informers' four lists; a read after the end finds no update and stops at its GET, so
  // a slow run may have more GETs than full passes.
  l.Stop();
  const uint64_t fresh = l.GetCacheStats().freshPasses;  // the finish and the end
  CHECK(fresh >= 2);
  CHECK(w.Gets() >= fresh);
  CHECK(w.Lists() == 4 + 2 * fresh);
}

TEST_CASE("loop thread: new pods get the readiness gate on their own event") {
  Cluster c("", /*gate=*/true);
  TakeRecord(c);  // no update running: only the gates
  Watchable w(c.api);
  loop::Loop l(w, ThreadOptions(nullptr));
  l.Start();
  auto gated = [&c](const std::string& name) {
    return pod_update::GateStatus(AsPod(c.Pod(name))) == true;
  };
  REQUIRE(WaitFor([&] { return gated("web-a") && gated("web-b") && gated("web-c"); }));
  c.AddPod("web-d");
  fake::KubeletSync(c.api, kNs);
  REQUIRE(WaitFor([&] { return gated("web-d"); }));
  fake::KubeletSync(c.api, kNs);  // the kubelet computes Ready from the gate, the loop never
  CHECK(budget::IsReady(test::AsPod(c.Pod("web-d"))));
  CHECK(c.api.CountWrites("PATCH /api/v1/namespaces/default/pods/web-d/status") == 1);
  CHECK(w.Gets() == 0);
  CHECK(WaitFor([&] { return w.Lists() == 4; }));  // the four informers' first LISTs
}

TEST_CASE("loop thread: a new pod's gate does not wait for a Deployment pass (its own lane)") {
  Cluster c("", /*gate=*/true);
  Watchable w(c.api);
  w.HoldPodPatches(true);
  loop::LoopMetrics metrics;
  loop::Loop l(w, ThreadOptions(&metrics));
  struct Release {  // before the Loop's destructor joins its thread, even when a check fails
    Watchable& w;
    ~Release() { w.HoldPodPatches(false); }
  } release{w};
  l.Start();
  auto gated = [&c](const std::string& name) {
    return pod_update::GateStatus(AsPod(c.Pod(name))) == true;
  };
  REQUIRE(WaitFor([&] { return gated("web-a") && gated("web-b") && gated("web-c"); }));
  // The pods become Ready: the update's pass starts a pod and its write hangs.
  REQUIRE(WaitFor([&] { return w.WaitingPatches() == 1; }, [&] { Sync(c); }));
  c.AddPod("web-d");
  fake::KubeletSync(c.api, kNs);
  const bool gatedMeanwhile = WaitFor([&] { return gated("web-d"); });
  CHECK(w.WaitingPatches() == 1);  // the pass is still in its write
  w.HoldPodPatches(false);
  CHECK(gatedMeanwhile);
  // Each of the four gates was timed once, from its pod's event (sub-second buckets), also one
  // the update's pass set first (the lane's write of it met a conflict and looked again).
  std::string out;
  CHECK(WaitFor([&] {
    out.clear();
    metrics.Render(out);
    return out.find("inplace_webhook_gate_latency_seconds_count 4\n") != std::string::npos;
  }));
  CAPTURE(out);
  l.Stop();  // the pass's write, released, returns
  CHECK(out.find("inplace_webhook_gate_latency_seconds_bucket{le=\"0.05\"}") != std::string::npos);
}

TEST_CASE("loop: Start without watches does nothing") {
  Cluster c;
  loop::Loop l(c.api, {});
  l.Start();
  CHECK_FALSE(l.Running());
  CHECK(c.Running());
}

// ---------------------------------------------------------------------------------------------
// The caches' projections.

namespace {

json::Document Project(const kube::Projection& projection, const json::Value& full) {
  json::Document out;
  projection(full, out, out.GetAllocator());
  return out;
}

void ComparePlansUntilDone(Cluster& c, const std::map<std::string, std::string>& digests);

std::string Describe(const rollout::Plan& plan) {
  std::string out(rollout::PhaseName(plan.phase));
  out += " " + plan.message + "\n";
  for (const rollout::Action& a : plan.actions) {
    out += a.Path() + " rv=" + a.resourceVersion + " " + json::SerializeCanonical(a.body) + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("loop: plans from the trimmed caches equal plans from whole objects, at every step") {
  struct Case {
    const char* name;
    std::string lifecycle;
    bool gate;
    int replicas;
    std::string strategy;
    std::map<std::string, std::string> digests;  // image → digest kubelet reports
  };
  const Case cases[] = {
      {"hooks, drain, readiness gate",
       R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"markPodNotReady":true}})",
       true,
       3,
       R"({"rollingUpdate":{"maxUnavailable":1}})",
       {}},
      {"no hook, no gate, two at a time",
       "",
       false,
       4,
       R"({"rollingUpdate":{"maxUnavailable":"50%"}})",
       {}},
      // The new tag names the same image: only the restart (new containerID, same image) tells.
      {"a retag",
       "",
       false,
       3,
       R"({"rollingUpdate":{"maxUnavailable":1}})",
       {{"nginx:1.25", "sha256:one"}, {"nginx:1.27", "sha256:one"}}},
  };
  for (const Case& tc : cases) {
    const std::string caseName = tc.name;
    CAPTURE(caseName);
    Cluster c(tc.lifecycle, tc.gate, tc.replicas, tc.strategy);
    for (const auto& name : c.podNames) {  // running the digest the map says
      c.api.Mutate(kube::PodPath(kNs, name), [&tc](json::Document& p) {
        for (auto& st : p["status"]["containerStatuses"].GetArray()) {
          for (const auto& spec : p["spec"]["containers"].GetArray()) {
            if (json::StringOr(&spec, "name") != json::StringOr(&st, "name")) continue;
            const std::string image(json::StringOr(&spec, "image"));
            json::SetString(st, "imageID", fake::ImageIdFor(image, tc.digests), p.GetAllocator());
          }
        }
      });
    }
    ComparePlansUntilDone(c, tc.digests);
  }
}

namespace {

void ComparePlansUntilDone(Cluster& c, const std::map<std::string, std::string>& digests) {
  // Bulk the objects up with what the projections drop.
  for (const auto& name : c.podNames) {
    c.api.Mutate(kube::PodPath(kNs, name), [](json::Document& p) {
      auto& a = p.GetAllocator();
      json::Value& spec = p["spec"];
      spec.AddMember("nodeName", "node-1", a);
      spec.AddMember("volumes", json::Value(rapidjson::kArrayType), a);
      p["metadata"].AddMember("managedFields", json::Value(rapidjson::kArrayType), a);
    });
  }
  c.api.Mutate(kube::DeploymentPath(kNs, "web"), [](json::Document& d) {
    SetAnnotation(d, "kubectl.kubernetes.io/last-applied-configuration", "{\"big\":true}");
  });
  loop::Loop l(c.api, {});
  int compared = 0;
  for (int pass = 0; pass < 60 && c.Running(); ++pass) {
    json::Document d = c.Deployment();
    kube::Result rs = c.api.List(kube::ReplicaSetsPath(kNs), {});
    kube::Result pods = c.api.List(kube::PodsPath(kNs), {});
    rollout::Snapshot whole;
    whole.deployment = &d;
    whole.now = Clock::now();
    for (const auto& o : rs.object["items"].GetArray()) whole.replicaSets.push_back(&o);
    for (const auto& o : pods.object["items"].GetArray()) whole.pods.push_back(&o);

    std::vector<json::Document> kept;
    kept.reserve(1 + whole.replicaSets.size() + whole.pods.size());
    rollout::Snapshot trimmed;
    trimmed.now = whole.now;
    kept.push_back(Project(loop::DeploymentProjection(), d));
    trimmed.deployment = &kept.back();
    for (const json::Value* o : whole.replicaSets) {
      kept.push_back(Project(loop::ReplicaSetProjection(), *o));
      trimmed.replicaSets.push_back(&kept.back());
    }
    for (const json::Value* o : whole.pods) {
      kept.push_back(Project(loop::PodProjection(), *o));
      trimmed.pods.push_back(&kept.back());
      CHECK_FALSE(json::Path(&kept.back(), {"spec", "volumes"}));
      CHECK_FALSE(json::Path(&kept.back(), {"metadata", "managedFields"}));
    }
    CHECK(Describe(rollout::PlanRollout(trimmed)) == Describe(rollout::PlanRollout(whole)));
    for (size_t i = 0; i < whole.pods.size(); ++i) {
      CHECK(pod_update::StateOf(AsPod(*trimmed.pods[i])) ==
            pod_update::StateOf(AsPod(*whole.pods[i])));
    }
    CHECK(rollout::PlanNewPodGates(trimmed.pods, whole.now).size() ==
          rollout::PlanNewPodGates(whole.pods, whole.now).size());
    ++compared;

    l.RunOnce();
    c.LoadBalancer();
    fake::KubeletSync(c.api, kNs, digests);
    REQUIRE(fake::ControllerSync(c.api, kNs, "web"));
  }
  CHECK_FALSE(c.Running());
  CHECK(compared >= 4);  // 3 pods one or two at a time: the start, the pods, the finish
}

}  // namespace

TEST_CASE("loop: the pod cache keeps what the resize decisions read, in every state") {
  // Whether a pod's kubelet can resize it (its first running container's resources, its node) is
  // read before the pod leaves Normal; status.resize while it is Updating.
  for (const char* state : {"Normal", "Updating"}) {
    CAPTURE(state);
    json::Document full = Parse(std::string(R"({"metadata":{"name":"web-a","labels":{)") +
                                R"("inplace-webhook.io/state":")" + state +
                                R"("}},"spec":{"nodeName":"node-old","containers":[{"name":"app"},)"
                                R"({"name":"sidecar"}]},"status":{"resize":"Deferred",)"
                                R"("containerStatuses":[{"name":"app","restartCount":0,)"
                                R"("state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}},)"
                                R"({"name":"sidecar","resources":{},)"
                                R"("state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}})");
    json::Document kept = Project(loop::PodProjection(), full);
    CHECK(pod_update::ResizeUnsupported(AsPod(kept)) == pod_update::ResizeUnsupported(AsPod(full)));
    CHECK(pod_update::ResizeUnsupported(AsPod(kept)).has_value());
    CHECK(json::StringOr(json::Find(&kept, "status"), "resize") == "Deferred");
  }
}

TEST_CASE("loop: the pod cache reads a pod done on the kubelet's report as the stored pod does") {
  // Labelled Normal at its write (completesOnReport): Updating until the kubelet's report shows
  // the recorded containers done. A container that had not started at the write (no imageID
  // recorded) is done by the image it reports, which the cache must keep once done too, or the
  // cached pod would read as Updating again.
  const std::string record =
      R"({\"revision\":\"h1\",\"updateTimestamp\":\"2026-01-01T00:00:00Z\",)"
      R"(\"lastContainerStatuses\":{\"app\":{\"imageID\":\"\",\"containerID\":\"c1\",)"
      R"(\"restartCount\":0}},\"completesOnReport\":true})";
  for (const char* image : {"docker.io/library/nginx:1.27", "docker.io/library/nginx:1.25"}) {
    CAPTURE(image);
    json::Document full = Parse(
        std::string(
            R"({"metadata":{"name":"web-a","labels":{"inplace-webhook.io/state":"Normal",)") +
        R"("inplace-webhook.io/enabled":"true"},"annotations":{"inplace-webhook.io/update-state":")" +
        record +
        R"("}},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]},"status":{)"
        R"("containerStatuses":[{"name":"app","restartCount":0,"containerID":"c2","imageID":"x",)"
        R"("image":")" +
        image +
        R"(","lastState":{"terminated":{"containerID":"c1"}},)"
        R"("state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}})");
    json::Document kept = Project(loop::PodProjection(), full);
    CHECK(pod_update::StateOf(AsPod(kept)) == pod_update::StateOf(AsPod(full)));
    CHECK((pod_update::StateOf(AsPod(full)) == pod_update::PodState::kNormal) ==
          (std::string_view(image) == "docker.io/library/nginx:1.27"));
  }
}

TEST_CASE("loop: what the caches keep of ReplicaSets and Deployments") {
  const std::string opted =
      Template({{"app", "web"}, {"inplace-webhook.io/enabled", "true"}}, {{"app", "nginx:1.25"}});
  const std::string plain = Template({{"app", "web"}}, {{"app", "nginx:1.25"}});
  struct Case {
    const char* name;
    int replicas;
    const std::string& templ;
    bool keepsTemplate;
  };
  const Case cases[] = {
      {"history, opted in", 0, opted, true},
      {"history, not opted in", 0, plain, false},
      {"active, not opted in", 2, plain, false},  // such a Deployment is read through the API
      {"active, opted in", 2, opted, true},
  };
  for (const Case& tc : cases) {
    CAPTURE(tc.name);
    json::Document rs =
        Parse(ReplicaSetJson("web-h0", "uid-rs0", "uid-web", tc.replicas, tc.templ, "h0"));
    json::Document status = Parse(R"({"replicas":2})");
    rs.AddMember("status", json::Value(status, rs.GetAllocator()), rs.GetAllocator());
    json::Document kept = Project(loop::ReplicaSetProjection(), rs);
    CHECK((json::Path(&kept, {"spec", "template"}) != nullptr) == tc.keepsTemplate);
    CHECK(json::Path(&kept, {"spec", "replicas"}) != nullptr);
    CHECK(json::Find(&kept, "status") == nullptr);
    CHECK(test::AsReplicaSet(kept).controllerUid() == "uid-web");
    CHECK(json::Path(&kept, {"metadata", "labels"}) != nullptr);
    CHECK(json::Path(&kept, {"metadata", "annotations"}) != nullptr);
  }
  {
    // Controlled by something else (an Argo Rollout): only what the pods' owner index needs.
    json::Document rs = Parse(ReplicaSetJson("web-h0", "uid-rs0", "uid-web", 2, opted, "h0"));
    for (auto& ref : rs["metadata"]["ownerReferences"].GetArray()) ref["kind"] = "Rollout";
    json::Document kept = Project(loop::ReplicaSetProjection(), rs);
    CHECK(json::Find(&kept, "spec") == nullptr);
    CHECK(json::Path(&kept, {"metadata", "labels"}) == nullptr);
    CHECK(json::Path(&kept, {"metadata", "annotations"}) == nullptr);
    CHECK(json::StringOr(json::Find(&kept, "metadata"), "uid") == "uid-rs0");
    CHECK(json::StringOr(json::Find(&kept, "metadata"), "resourceVersion") ==
          json::StringOr(json::Find(&rs, "metadata"), "resourceVersion"));
    CHECK(test::AsReplicaSet(kept).controllerUid() == "uid-web");
  }

  DeploymentSpec spec;
  spec.templateJson = opted;
  json::Document d = Parse(DeploymentJson(spec));
  SetAnnotation(d, "kubectl.kubernetes.io/last-applied-configuration", "{}");
  SetAnnotation(d, "team", "a");
  json::Document kept = Project(loop::DeploymentProjection(), d);
  CHECK_FALSE(Annotation(kept, "kubectl.kubernetes.io/last-applied-configuration"));
  CHECK(Annotation(kept, "team") == "a");
  CHECK(json::Path(&kept, {"spec", "template"}) != nullptr);
  CHECK(json::Path(&kept, {"status", "observedGeneration"}) != nullptr);
}

TEST_CASE("loop: the pod cache holds an update's pods only when both templates are opted in") {
  const std::string opted =
      Template({{"app", "web"}, {"inplace-webhook.io/enabled", "true"}}, {{"app", "nginx:1.25"}});
  const std::string plain = Template({{"app", "web"}}, {{"app", "nginx:1.25"}});
  struct Case {
    const char* name;
    const std::string& target;
    std::vector<std::pair<int, const std::string*>> replicaSets;  // replicas, template
    bool cacheable;
  };
  const Case cases[] = {
      {"both opted in", opted, {{3, &opted}}, true},
      {"older history not opted in", opted, {{3, &opted}, {0, &plain}}, true},
      {"the update adds the opt-in label", opted, {{3, &plain}}, false},
      {"the update removes it", plain, {{3, &opted}}, false},
      {"no ReplicaSet with replicas", opted, {{0, &opted}}, false},
      {"two with replicas, one not opted in", opted, {{2, &opted}, {1, &plain}}, false},
  };
  for (const Case& tc : cases) {
    CAPTURE(tc.name);
    DeploymentSpec spec;
    spec.templateJson = tc.target;
    json::Document d = Parse(DeploymentJson(spec));
    std::vector<json::Document> docs;
    docs.reserve(tc.replicaSets.size());
    std::vector<const json::Value*> rs;
    for (const auto& [replicas, templ] : tc.replicaSets) {
      docs.push_back(Parse(ReplicaSetJson("web-" + std::to_string(docs.size()), "u", spec.uid,
                                          replicas, *templ, "h")));
      rs.push_back(&docs.back());
    }
    CHECK(loop::PodsCacheable(d, rs) == tc.cacheable);
  }
}

TEST_CASE("loop: the pod cache keeps why an Updating pod's container waits, and only then") {
  // An image the kubelet cannot pull or run is what an Updating pod reports stuck on
  // (pod_update::FindImageTrouble); the caches dropped state.waiting before, so the loop never
  // saw it on the real cluster (w05).
  const std::string longMessage(5000, 'x');
  for (const char* state : {"Normal", "Updating"}) {
    CAPTURE(state);
    json::Document full =
        Parse(std::string(R"({"metadata":{"name":"web-a","labels":{)") +
              R"("inplace-webhook.io/state":")" + state +
              R"("},"annotations":{"inplace-webhook.io/update-state":)" +
              R"("{\"revision\":\"b\",\"lastContainerStatuses\":{\"app\":{\"imageID\":\"i\",)"
              R"(\"containerID\":\"c\",\"restartCount\":0}},\"images\":{\"app\":{\"asked\":)"
              R"(\"nginx:1.27\",\"got\":\"mirror/nginx:1.27\",\"before\":\"nginx:1.25\"}}}"}},)"
              R"("spec":{"containers":[{"name":"app","image":"mirror/nginx:1.27"}]},)"
              R"("status":{"containerStatuses":[{"name":"app","restartCount":0,)"
              R"("state":{"waiting":{"reason":"ImagePullBackOff","message":")" +
              longMessage + R"("}}}]}})");
    json::Document kept = Project(loop::PodProjection(), full);
    auto us = pod_update::ReadUpdateState(AsPod(kept));
    REQUIRE(us.has_value());
    std::optional<pod_update::ImageTrouble> trouble =
        pod_update::FindImageTrouble(AsPod(kept), *us);
    if (std::string_view(state) == "Updating") {
      REQUIRE(trouble.has_value());
      CHECK(trouble->text ==
            "pod web-a container app: asked for image nginx:1.27, the API server stored "
            "mirror/nginx:1.27 (rewritten by admission), which the kubelet cannot pull "
            "(ImagePullBackOff)");
      CHECK(trouble->detail.size() < 300);  // clipped
    } else {
      CHECK_FALSE(trouble.has_value());
      CHECK(json::Path(&kept, {"status", "containerStatuses"})->GetArray()[0].HasMember("state"));
    }
  }
}
