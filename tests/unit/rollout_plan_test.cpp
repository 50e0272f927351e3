#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/deployment_workload.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "hooks/rollout_plan.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsDeployment;
using test::AsPod;
using test::AsReplicaSet;
using namespace iw::fixtures;
using rollout::Phase;
using rollout::WriteKind;
using std::chrono::seconds;

namespace {

// A Deployment mid-way through an in-place update from `base` to `target`: one ReplicaSet
// (web-h1, replicas = pods) at the base template, pods created from it.
struct Scenario {
  DeploymentSpec spec;
  std::string base, target;
  std::vector<json::Document> replicaSets;
  std::vector<json::Document> pods;

  explicit Scenario(int replicas = 3, bool gate = false) {
    base = Template({{"app", "web"}, {"version", "v1"}}, {{"app", "nginx:1.25"}}, {}, gate);
    target = Template({{"app", "web"}, {"version", "v2"}}, {{"app", "nginx:1.27"}}, {}, gate);
    spec.replicas = replicas;
    spec.templateJson = target;
    spec.inProgress = InProgress{Hash(base), Hash(target), true, Ts(T0() - seconds(60)), ""};
    replicaSets.push_back(Parse(ReplicaSetJson("web-h1", "uid-rs1", spec.uid, replicas, base, "h1",
                                               {{std::string(keys::kRevisionAnnotation), "3"}})));
    for (int i = 0; i < replicas; ++i) {
      pods.push_back(Pod("web-" + std::string(1, static_cast<char>('a' + i)), "uid-rs1", base));
    }
  }
  std::string From() const { return spec.inProgress->from; }
  std::string To() const { return spec.inProgress->to; }

  rollout::Plan Plan(Clock::time_point now = T0()) {
    deployment = Parse(DeploymentJson(spec));
    rollout::Snapshot s;
    s.deployment = &deployment;
    for (auto& rs : replicaSets) s.replicaSets.push_back(&rs);
    for (auto& p : pods) s.pods.push_back(&p);
    s.now = now;
    return rollout::PlanRollout(s);
  }

  json::Document* PodNamed(std::string_view name) {
    for (auto& p : pods) {
      if (json::StringOr(json::Find(&p, "metadata"), "name") == name) return &p;
    }
    return nullptr;
  }
  json::Document* ReplicaSetNamed(std::string_view name) {
    for (auto& r : replicaSets) {
      if (json::StringOr(json::Find(&r, "metadata"), "name") == name) return &r;
    }
    return nullptr;
  }

  // Applies the plan's writes to the scenario's objects as the API server would.
  void Apply(const rollout::Plan& plan) {
    for (const auto& a : plan.actions) {
      if (a.kind == WriteKind::kPodPatch || a.kind == WriteKind::kPodStatusPatch) {
        json::Document* p = PodNamed(a.name);
        REQUIRE(p != nullptr);
        fake::StrategicMergePatch(*p, a.body, p->GetAllocator());
      } else if (a.kind == WriteKind::kReplicaSetPatch) {
        json::Document* r = ReplicaSetNamed(a.name);
        REQUIRE(r != nullptr);
        fake::MergePatch(*r, a.body, r->GetAllocator());
      } else if (a.kind == WriteKind::kReplicaSetCreate) {
        REQUIRE(ReplicaSetNamed(a.name) == nullptr);
        json::Document r;
        r.CopyFrom(a.body, r.GetAllocator());
        json::SetString(r["metadata"], "uid", "uid-" + a.name, r.GetAllocator());
        replicaSets.push_back(std::move(r));
      } else if (a.kind == WriteKind::kReplicaSetDelete) {
        std::erase_if(replicaSets, [&a](const json::Document& r) {
          return json::StringOr(json::Find(&r, "metadata"), "name") == a.name;
        });
      } else if (a.kind == WriteKind::kDeploymentPatch) {
        const json::Value* ann = json::Path(&a.body, {"metadata", "annotations"});
        if (ann != nullptr && json::Find(ann, keys::kInProgressAnnotation) != nullptr) {
          spec.inProgress.reset();
        }
        const json::Value* paused = json::Path(&a.body, {"spec", "paused"});
        if (paused != nullptr) spec.paused = paused->GetBool();
      }
    }
    Controller();
  }

  // The Deployment controller's revision sync (getNewReplicaSet): the ReplicaSet whose template
  // is the Deployment's gets the newest revision.
  void Controller() {
    const std::string want = Hash(spec.templateJson);
    json::Document* newest = nullptr;
    long long others = 0;
    for (auto& r : replicaSets) {
      const long long rev = std::stoll(std::string(json::StringOr(
          json::Path(&r, {"metadata", "annotations"}), keys::kRevisionAnnotation, "0")));
      if (newest == nullptr && TemplateHash(test::AsTemplate(r["spec"]["template"])) == want) {
        newest = &r;
      } else {
        others = std::max(others, rev);
      }
    }
    if (newest != nullptr)
      SetAnnotation(*newest, keys::kRevisionAnnotation, std::to_string(others + 1));
  }

  // Kubelet restarts every container whose spec image changed.
  void Kubelet() {
    for (auto& p : pods) {
      for (const auto& c : p["spec"]["containers"].GetArray()) {
        std::string name(json::StringOr(&c, "name")), image(json::StringOr(&c, "image"));
        for (auto& st : p["status"]["containerStatuses"].GetArray()) {
          if (json::StringOr(&st, "name") == name && json::StringOr(&st, "image") != image) {
            auto& a = p.GetAllocator();
            // A digest and a container ID of its own for every image and restart.
            const std::string digest = std::to_string(std::hash<std::string>{}(image));
            json::SetString(st, "image", image, a);
            json::SetString(st, "imageID", image + "@sha256:" + digest, a);
            json::SetString(st, "containerID", "containerd://" + digest + "-" + name, a);
          }
        }
      }
    }
  }

  json::Document deployment;
};

std::vector<const rollout::Action*> Of(const rollout::Plan& p, WriteKind kind) {
  std::vector<const rollout::Action*> out;
  for (const auto& a : p.actions) {
    if (a.kind == kind) out.push_back(&a);
  }
  return out;
}

// The plan's ReplicaSet writes, in order.
std::vector<const rollout::Action*> RsWrites(const rollout::Plan& p) {
  std::vector<const rollout::Action*> out;
  for (const auto& a : p.actions) {
    if (a.kind == WriteKind::kReplicaSetPatch || a.kind == WriteKind::kReplicaSetCreate ||
        a.kind == WriteKind::kReplicaSetDelete) {
      out.push_back(&a);
    }
  }
  return out;
}

std::vector<std::string> Reasons(const rollout::Plan& p) {
  std::vector<std::string> out;
  for (const auto* a : Of(p, WriteKind::kEvent))
    out.emplace_back(json::StringOr(&a->body, "reason"));
  return out;
}

// Pods whose update this plan starts (a write or PreparingUpdate leaving Normal).
std::vector<std::string> Started(const rollout::Plan& p) {
  std::vector<std::string> out;
  for (const auto& a : p.actions) {  // a pod patch, or the gate's write that starts a drain
    if (a.metric == rollout::Metric::kPodUpdateStarted) out.push_back(a.name);
  }
  return out;
}

std::string Serialized(const rollout::Plan& p) {
  std::string out;
  for (const auto& a : p.actions) {
    out += std::to_string(static_cast<int>(a.kind)) + " " + a.name + " " + a.resourceVersion + " " +
           json::Serialize(a.body) + "\n";
  }
  return out;
}

// Brings every pod to the target as the loop would have.
void AllAtTarget(Scenario& s) {
  for (int pass = 0; pass < 10; ++pass) {
    rollout::Plan p = s.Plan();
    if (p.phase != Phase::kUpdating) return;
    s.Apply(p);
    s.Kubelet();
  }
}

}  // namespace

TEST_CASE("no in-progress record: nothing to do") {
  Scenario s;
  s.spec.inProgress.reset();
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kIdle);
  CHECK(p.actions.empty());
}

TEST_CASE("an object whose shape Kubernetes never gives blocks the plan, naming it; no write") {
  Scenario s;
  SUBCASE("a pod") {
    json::Document& pod = *s.PodNamed("web-b");
    json::SetString(pod["status"], "conditions", "Ready", pod.GetAllocator());
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kBlocked);
    CHECK(p.actions.empty());
    CHECK(p.message ==
          "cannot read the objects of the update: pod web-b: pod.status.conditions must be an "
          "array of objects, got string");
  }
  SUBCASE("a ReplicaSet") {
    json::Document& rs = *s.ReplicaSetNamed("web-h1");
    json::SetString(rs["spec"], "replicas", "3", rs.GetAllocator());
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kBlocked);
    CHECK(p.actions.empty());
    CHECK(p.message ==
          "cannot read the objects of the update: ReplicaSet web-h1: ReplicaSet.spec.replicas must "
          "be an integer, got string");
  }
}

TEST_CASE("the first pass announces the update and starts the first pod by name") {
  Scenario s;
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kUpdating);
  CHECK(Reasons(p) == std::vector<std::string>{"InPlaceUpdateStarted"});  // no Event per pod
  CHECK(Started(p) == std::vector<std::string>{"web-a"});
  const rollout::Action& started = p.actions[0];
  CHECK(started.name ==
        rollout::DedupEventName("web", "started/" + s.To() + "/" + s.spec.inProgress->startedAt));
  CHECK(started.metric == rollout::Metric::kRolloutStarted);
  auto writes = Of(p, WriteKind::kPodPatch);
  REQUIRE(writes.size() == 1);
  CHECK(writes[0]->resourceVersion == "30");
  CHECK(writes[0]->PatchType() == kube::PatchType::kStrategicMerge);
  CHECK(writes[0]->Path() == "/api/v1/namespaces/default/pods/web-a");
  CHECK(p.podsByState.at("Normal") == 3);

  // The same snapshot gives the same plan: nothing depends on memory.
  CHECK(Serialized(s.Plan()) == Serialized(p));

  s.Apply(p);
  rollout::Plan next = s.Plan();
  CHECK(std::find(Reasons(next).begin(), Reasons(next).end(), "InPlaceUpdateStarted") ==
        Reasons(next).end());
}

TEST_CASE("the budget: maxUnavailable 0 / 25% / 2 of 4 replicas") {
  struct Case {
    std::string maxUnavailable;
    std::vector<std::string> started;
  };
  const Case cases[] = {
      {"0", {"web-a"}},
      {R"("25%")", {"web-a"}},
      {"2", {"web-a", "web-b"}},
      {R"("100%")", {"web-a", "web-b", "web-c", "web-d"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.maxUnavailable);
    Scenario s(4);
    s.spec.strategy = R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":)" +
                      c.maxUnavailable + R"(,"maxSurge":1}})";
    CHECK(Started(s.Plan()) == c.started);
  }
}

TEST_CASE("unavailable pods count against the budget; pods in an update hold their slot") {
  SUBCASE("a not-Ready pod uses a slot but can itself be updated") {
    Scenario s(4);
    s.spec.strategy = R"({"rollingUpdate":{"maxUnavailable":2}})";
    SetCondition(*s.PodNamed("web-c"), "Ready", "False");
    CHECK(Started(s.Plan()) == std::vector<std::string>{"web-a", "web-c"});
  }
  SUBCASE("budget 1 taken by a not-Ready pod: only that pod starts") {
    Scenario s(4);
    SetCondition(*s.PodNamed("web-d"), "Ready", "False");
    CHECK(Started(s.Plan()) == std::vector<std::string>{"web-d"});
  }
  SUBCASE("a pod waiting in a hook holds the only slot") {
    Scenario s(3);
    s.spec.lifecycle = R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})";
    SetLabel(*s.PodNamed("web-a"), "lb", "on");
    s.Apply(s.Plan());
    REQUIRE(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) ==
            pod_update::PodState::kPreparingUpdate);
    for (int i = 0; i < 3; ++i) {
      rollout::Plan p = s.Plan(T0() + seconds(i));
      CHECK(Started(p).empty());
      CHECK(Of(p, WriteKind::kPodPatch).empty());
    }
    SetLabel(*s.PodNamed("web-a"), "lb", std::nullopt);  // released
    rollout::Plan p = s.Plan();
    // (InPlaceUpdateStarted is repeated under its fixed name until a pod reaches the target.)
    CHECK(Reasons(p) == std::vector<std::string>{"InPlaceUpdateStarted"});  // no Event per pod
  }
}

TEST_CASE("pods created meanwhile at the old template are updated too") {
  Scenario s(2);
  AllAtTarget(s);
  s.pods.push_back(Pod("web-z", "uid-rs1", s.base));  // scale-up from the unchanged RS
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kUpdating);
  CHECK(Started(p) == std::vector<std::string>{"web-z"});
}

TEST_CASE("a pod whose opt-in label was removed is left as it is; the update waits and says so") {
  Scenario s(3, /*gate=*/true);
  s.spec.policy = R"({"gracePeriodSeconds":30})";
  SetLabel(*s.PodNamed("web-a"), keys::kEnabledLabel, std::nullopt);
  rollout::Plan p = s.Plan();
  // Not the loop's to write (the chart's policy): web-b starts in its place.
  CHECK(Started(p) == std::vector<std::string>{"web-b"});
  for (const auto& a : p.actions) CHECK(a.name != "web-a");
  CHECK(p.waitingMessage.find("pod web-a without label inplace-webhook.io/enabled=true") !=
        std::string::npos);
  CHECK(p.stuckReason.empty());  // others still move
  s.Apply(p);
  REQUIRE(pod_update::GateStatus(AsPod(*s.PodNamed("web-b"))) == false);
  // A pod an update holds stays the loop's (its label removed by a write that bypassed the
  // pod-state policy): it goes on, and back in service.
  SetLabel(*s.PodNamed("web-b"), keys::kEnabledLabel, std::nullopt);
  bool wroteB = false;
  for (int pass = 0; pass < 16; ++pass) {  // web-b, then web-c, each through its 30 s drain
    rollout::Plan q = s.Plan(T0() + seconds(40 * (pass + 1)));
    for (const auto& a : q.actions) wroteB = wroteB || a.name == "web-b";
    s.Apply(q);
    s.Kubelet();
  }
  CHECK(wroteB);
  CHECK(Label(*s.PodNamed("web-b"), "version") == "v2");
  CHECK(pod_update::StateOf(AsPod(*s.PodNamed("web-b"))) == pod_update::PodState::kNormal);
  CHECK(pod_update::GateStatus(AsPod(*s.PodNamed("web-b"))) == true);
  // Only the unlabelled pods are left: stuck at once, naming them; no finish, no write to them.
  CHECK(Label(*s.PodNamed("web-c"), "version") == "v2");
  rollout::Plan last = s.Plan(T0() + seconds(1000));
  CHECK(last.phase == Phase::kUpdating);
  CHECK(last.stuckReason == "PodNotOptedIn");
  CHECK(last.stuckMessage.find("pod web-a without label") != std::string::npos);
  CHECK(RsWrites(last).empty());
  CHECK(Label(*s.PodNamed("web-a"), "version") == "v1");
  // Labelled again: it is updated in place as the others were.
  SetLabel(*s.PodNamed("web-a"), keys::kEnabledLabel, std::string(keys::kTrue));
  CHECK(Started(s.Plan(T0() + seconds(1000))) == std::vector<std::string>{"web-a"});
}

TEST_CASE("pods being deleted or finished are ignored") {
  Scenario s(2);
  auto& a = s.pods[0].GetAllocator();
  s.pods[0]["metadata"].AddMember("deletionTimestamp", "2026-03-01T11:00:00Z", a);
  json::SetString(s.pods[1]["status"], "phase", "Failed", s.pods[1].GetAllocator());
  rollout::Plan p = s.Plan();
  CHECK(Of(p, WriteKind::kPodPatch).empty());
  CHECK(p.phase == Phase::kFinishing);  // nothing live left to update
}

TEST_CASE("abort: restore paused, drop in-progress and abort; pods in flight back to Normal") {
  Scenario s(3, /*gate=*/true);
  s.spec.policy = R"({"gracePeriodSeconds":30})";
  s.Apply(s.Plan());  // web-a is PreparingUpdate, draining: its gate False, its label still Normal
  REQUIRE(pod_update::GateStatus(AsPod(*s.PodNamed("web-a"))) == false);
  REQUIRE(pod_update::LabelStateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kNormal);
  REQUIRE(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) ==
          pod_update::PodState::kPreparingUpdate);
  s.spec.abort = "true";
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kAborted);
  // First the pod (a failed Deployment patch leaves the update to retry this), then the end; the
  // pod needs only its gate back.
  REQUIRE(p.actions.size() == 3);
  CHECK(p.actions[0].kind == WriteKind::kPodStatusPatch);
  SUBCASE("the pod in flight is in service again, its content as it was") {
    s.Apply(p);
    CHECK(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kNormal);
    CHECK(pod_update::GateStatus(AsPod(*s.PodNamed("web-a"))) == true);
    CHECK(Label(*s.PodNamed("web-a"), "version") == "v1");
  }
  std::erase_if(p.actions, [](const rollout::Action& a) {
    return a.kind == WriteKind::kPodPatch || a.kind == WriteKind::kPodStatusPatch;
  });
  const rollout::Action& patch = p.actions[0];
  CHECK(patch.kind == WriteKind::kDeploymentPatch);
  CHECK(patch.PatchType() == kube::PatchType::kMerge);
  CHECK(patch.resourceVersion == "10");
  CHECK(patch.metric == rollout::Metric::kRolloutAborted);
  CHECK(json::Serialize(patch.body) ==
        R"({"metadata":{"annotations":{"inplace-webhook.io/in-progress":null,)"
        R"("inplace-webhook.io/abort":null}},"spec":{"paused":false}})");
  CHECK(Reasons(p) == std::vector<std::string>{"InPlaceUpdateAborted"});
  CHECK(json::StringOr(&p.actions[1].body, "type") == "Warning");

  SUBCASE("a Deployment the user had paused stays paused") {
    s.spec.inProgress->pausedByUs = false;
    rollout::Plan q = s.Plan();
    CHECK(json::Find(&Of(q, WriteKind::kDeploymentPatch)[0]->body, "spec") == nullptr);
  }
  SUBCASE("abort values other than true are ignored") {
    s.spec.abort = "false";
    CHECK(s.Plan().phase == Phase::kUpdating);
  }
}

TEST_CASE("an update the webhook ended without the loop: its pods out of service are released") {
  Scenario s(3, /*gate=*/true);
  s.spec.policy = R"({"gracePeriodSeconds":30})";
  s.Apply(s.Plan());  // web-a is PreparingUpdate, draining with its gate False
  REQUIRE(pod_update::GateStatus(AsPod(*s.PodNamed("web-a"))) == false);
  // The webhook ended the update (DESIGN.md §9.8): no record, unpaused, the abort kept.
  s.spec.inProgress.reset();
  s.spec.paused = false;
  s.spec.abort = "true";
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kIdle);
  REQUIRE(p.actions.size() == 1);  // its label is still Normal: the gate alone
  CHECK(p.actions[0].kind == WriteKind::kPodStatusPatch);
  CHECK(p.actions[0].pod == "web-a");
  s.Apply(p);
  CHECK(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kNormal);
  CHECK(pod_update::GateStatus(AsPod(*s.PodNamed("web-a"))) == true);
  CHECK(s.Plan().actions.empty());  // nothing more once they are back
}

TEST_CASE("cpu/memory goes native, with a Warning, when a pod's kubelet cannot resize it") {
  // DESIGN.md §3.1: whether a resize happens depends on the node. A pod still to be resized whose
  // first running container reports no status.containerStatuses[].resources (kubelets before
  // 1.33 on default gates: the API server would refuse the resize with 422) hands the change to
  // the native rollout as an abort does, before any pod is touched.
  constexpr std::string_view kSmall = R"({"requests":{"cpu":"100m"},"limits":{"cpu":"200m"}})";
  constexpr std::string_view kLarge = R"({"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}})";
  auto withResources = [](std::string t, std::string_view r) {
    json::Document d = Parse(t);
    auto& a = d.GetAllocator();
    json::Set(d["spec"]["containers"][0], "resources", json::Value(Parse(r), a), a);
    return json::Serialize(d);
  };
  Scenario s;
  s.base = withResources(s.base, kSmall);
  s.target = withResources(s.base, kLarge);
  s.spec.templateJson = s.target;
  s.spec.inProgress = InProgress{Hash(s.base), Hash(s.target), true, Ts(T0() - seconds(60)), ""};
  s.replicaSets.clear();
  s.replicaSets.push_back(Parse(ReplicaSetJson("web-h1", "uid-rs1", s.spec.uid, 3, s.base, "h1")));
  s.pods.clear();
  for (const char* name : {"web-a", "web-b", "web-c"}) {
    json::Document p = Pod(name, "uid-rs1", s.base);
    auto& a = p.GetAllocator();
    json::SetString(p["spec"], "nodeName", std::string(name) == "web-c" ? "node-old" : "node-new",
                    a);
    json::Value& st = p["status"]["containerStatuses"][0];
    json::Set(st, "state", json::Value(Parse(R"({"running":{}})"), a), a);
    if (std::string(name) != "web-c") json::Set(st, "resources", json::Value(Parse(kSmall), a), a);
    s.pods.push_back(std::move(p));
  }

  SUBCASE("one pod on a kubelet without resize support: native at once, nothing resized") {
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message.find("pod web-c on node node-old") != std::string::npos);
    CHECK(Of(p, WriteKind::kPodResizePatch).empty());
    CHECK(Of(p, WriteKind::kPodPatch).empty());
    auto patches = Of(p, WriteKind::kDeploymentPatch);
    REQUIRE(patches.size() == 1);
    CHECK(json::Serialize(patches[0]->body["spec"]) == R"({"paused":false})");
    auto events = Of(p, WriteKind::kEvent);
    REQUIRE(events.size() == 1);
    CHECK(json::StringOr(&events[0]->body, "type") == "Warning");
    CHECK(json::StringOr(&events[0]->body, "reason") == "InPlaceUpdateAborted");
    const std::string message(json::StringOr(&events[0]->body, "message"));
    CHECK(message.find("pod web-c on node node-old") != std::string::npos);
    CHECK(message.find("native rollout") != std::string::npos);
  }
  SUBCASE("every kubelet reports container resources: in place") {
    auto& a = s.pods[2].GetAllocator();
    json::Set(s.pods[2]["status"]["containerStatuses"][0], "resources",
              json::Value(Parse(kSmall), a), a);
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kUpdating);
    CHECK(Of(p, WriteKind::kPodResizePatch).size() == 1);
  }
  SUBCASE("found mid-update: pods in flight are released, the native rollout takes over") {
    rollout::Plan first = s.Plan();
    REQUIRE(first.phase == Phase::kAborted);
    // As if web-c's kubelet had reported resources until web-a had started.
    auto& a = s.pods[2].GetAllocator();
    json::Set(s.pods[2]["status"]["containerStatuses"][0], "resources",
              json::Value(Parse(kSmall), a), a);
    rollout::Plan start = s.Plan();
    REQUIRE(start.phase == Phase::kUpdating);
    s.Apply(start);
    REQUIRE(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kUpdating);
    json::Remove(s.pods[2]["status"]["containerStatuses"][0], "resources");
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    auto released = Of(p, WriteKind::kPodPatch);
    REQUIRE(released.size() == 1);
    CHECK(released[0]->name == "web-a");
    CHECK(Label(released[0]->body, keys::kStateLabel) == "Normal");
  }
  SUBCASE("a pod with no running container tells nothing") {
    auto& a = s.pods[2].GetAllocator();
    json::Set(s.pods[2]["status"]["containerStatuses"][0], "state",
              json::Value(Parse(R"({"waiting":{"reason":"CrashLoopBackOff"}})"), a), a);
    CHECK(s.Plan().phase == Phase::kUpdating);
  }
}

TEST_CASE("abort when something unpaused the Deployment or the record is malformed") {
  Scenario s;
  s.spec.paused = false;
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kAborted);
  CHECK(p.message.find("unpaused") != std::string::npos);
  CHECK(json::Find(&p.actions[0].body, "spec") == nullptr);  // already unpaused

  Scenario m;
  m.spec.inProgress.reset();
  m.spec.lifecycle = R"({"inPlaceUpdate":{"labelsHandler":"oops"}})";
  m.spec.inProgress = InProgress{m.From(), m.To(), true, "", ""};
  rollout::Plan bad = m.Plan();
  CHECK(bad.phase == Phase::kAborted);
  CHECK(bad.message.find("labelsHandler") != std::string::npos);
}

TEST_CASE("strategy Recreate: the loop hands the update to the native rollout (DESIGN.md §3.2)") {
  // An update an earlier version started, or a switch to Recreate that bypassed the webhook.
  struct Row {
    const char* name;
    bool podMoved;
    bool pausedByUs;
  };
  for (const Row& row : {Row{"before any pod moved", false, true},
                         Row{"with a pod at the target already", true, true},
                         Row{"the user holds the pause: it stays", false, false}}) {
    CAPTURE(row.name);
    Scenario s;
    s.spec.inProgress->pausedByUs = true;
    if (row.podMoved) {
      s.Apply(s.Plan());  // web-a written (RollingUpdate, maxUnavailable 1)
      REQUIRE(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kUpdating);
    }
    s.spec.inProgress->pausedByUs = row.pausedByUs;
    s.spec.strategy = R"({"type":"Recreate"})";
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message.find("strategy Recreate") != std::string::npos);
    const auto patches = Of(p, WriteKind::kDeploymentPatch);
    REQUIRE(patches.size() == 1);
    CHECK((json::Find(&patches[0]->body, "spec") != nullptr) == row.pausedByUs);
  }
  // RollingUpdate: the same update goes on.
  Scenario r;
  CHECK(r.Plan().phase == Phase::kUpdating);
}

TEST_CASE("the precondition: exactly one ReplicaSet with replicas, at the old template") {
  SUBCASE("two ReplicaSets with replicas") {
    Scenario s;
    s.replicaSets.push_back(Parse(ReplicaSetJson(
        "web-h0", "uid-rs0", "uid-web", 1, Template({{"app", "web"}}, {{"app", "old:1"}}), "h0")));
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message.find("exactly one ReplicaSet") != std::string::npos);
    CHECK(p.message.find("found 2") != std::string::npos);
  }
  SUBCASE("the active ReplicaSet is not at the old template") {
    Scenario s;
    s.spec.inProgress->from = "0123456789";
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message.find("not the template 0123456789") != std::string::npos);
  }
  SUBCASE("another Deployment's ReplicaSet does not count") {
    Scenario s;
    s.replicaSets.push_back(Parse(ReplicaSetJson("other", "uid-o", "uid-other", 3, s.base, "h9")));
    CHECK(s.Plan().phase == Phase::kUpdating);
  }
  SUBCASE("once pods moved, a failed precondition blocks instead of aborting") {
    Scenario s;
    s.Apply(s.Plan());
    s.replicaSets.push_back(Parse(ReplicaSetJson(
        "web-h0", "uid-rs0", "uid-web", 1, Template({{"app", "web"}}, {{"app", "old:1"}}), "h0")));
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kBlocked);
    CHECK(p.actions.empty());
  }
  SUBCASE("a change that cannot be applied in place") {
    Scenario s;
    s.spec.templateJson = Template({{"app", "web"}}, {{"app", "nginx:1.25"}, {"x", "y:1"}});
    s.spec.inProgress->to = Hash(s.spec.templateJson);
    rollout::Plan p = s.Plan();
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message.find("cannot be applied in place") != std::string::npos);
  }
}

TEST_CASE(
    "finish: the template the pods leave gets a history ReplicaSet, then the active one "
    "takes the target") {
  Scenario s;
  s.spec.lifecycle = R"({"inPlaceUpdate":{}})";
  // History: web-h3 ran some other template at revision 2.
  s.replicaSets.push_back(Parse(ReplicaSetJson("web-h3", "uid-rs3", "uid-web", 0,
                                               Template({{"app", "web"}}, {{"app", "x:1"}}), "h3",
                                               {{std::string(keys::kRevisionAnnotation), "2"}})));
  // The Deployment controller copied annotations onto the active ReplicaSet when it was new.
  SetAnnotation(s.replicaSets[0], keys::kLifecycleAnnotation, "{}");
  SetAnnotation(s.replicaSets[0], keys::kInProgressAnnotation, "{}");
  SetAnnotation(s.replicaSets[0], "team", "payments");
  AllAtTarget(s);

  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kFinishing);
  auto rs = RsWrites(p);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0]->kind == WriteKind::kReplicaSetCreate);  // first: a crash leaves history
  CHECK(rs[1]->kind == WriteKind::kReplicaSetPatch);
  CHECK(rs[1]->name == "web-h1");
  s.Apply(p);

  const std::string historyName = "web-" + s.From();
  const json::Document* history = s.ReplicaSetNamed(historyName);
  REQUIRE(history != nullptr);
  CHECK(TemplateHash(test::AsTemplate((*history)["spec"]["template"])) == s.From());
  CHECK(Label((*history)["spec"]["template"], keys::kPodTemplateHashLabel) == s.From());
  CHECK(json::Serialize((*history)["spec"]["selector"]) ==
        R"({"matchLabels":{"app":"web","pod-template-hash":")" + s.From() + R"("}})");
  CHECK((*history)["spec"]["replicas"].GetInt() == 0);
  CHECK(test::AsReplicaSet(*history).controllerUid() == "uid-web");
  CHECK(Annotation(*history, keys::kRevisionAnnotation) == "3");  // the revision it had
  CHECK(Annotation(*history, "team") == "payments");
  CHECK(Annotation(*history, keys::kLifecycleAnnotation) == R"({"inPlaceUpdate":{}})");
  CHECK_FALSE(Annotation(*history, keys::kInProgressAnnotation).has_value());

  const json::Document& h1 = *s.ReplicaSetNamed("web-h1");
  CHECK(TemplateHash(test::AsTemplate(h1["spec"]["template"])) == s.To());
  CHECK(Label(h1["spec"]["template"], keys::kPodTemplateHashLabel) == "h1");
  CHECK(Annotation(h1, keys::kPreviousTemplateHashAnnotation) == s.From());
  CHECK(Annotation(h1, keys::kRevisionAnnotation) == "4");  // (the controller's sync)
  CHECK(TemplateHash(test::AsTemplate((*s.ReplicaSetNamed("web-h3"))["spec"]["template"])) !=
        s.To());

  SUBCASE("after the end, no bookkeeping is left for kubectl rollout undo to copy") {
    s.spec.inProgress.reset();
    json::Document d = Parse(DeploymentJson(s.spec));
    for (const json::Document& rs : s.replicaSets) {
      std::optional<rollout::Action> c =
          rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs));
      json::Document after;
      after.CopyFrom(rs, after.GetAllocator());
      if (c) fake::MergePatch(after, c->body, after.GetAllocator());
      const json::Value* ann = json::Path(&after, {"metadata", "annotations"});
      for (const auto& m : ann->GetObject()) {
        const std::string_view k = json::View(m.name);
        CHECK_MESSAGE((!k.starts_with(keys::kPrefix) || k == keys::kLifecycleAnnotation), k);
      }
    }
  }
  SUBCASE("then wait while paused for the Deployment controller") {
    s.spec.status = R"({"observedGeneration":2,"replicas":3,"updatedReplicas":0})";
    rollout::Plan w = s.Plan();
    CHECK(w.phase == Phase::kWaitingForController);
    CHECK(RsWrites(w).empty());
    CHECK(Of(w, WriteKind::kDeploymentPatch).empty());
    CHECK(w.requeueAfter.has_value());
    s.spec.status = R"({"observedGeneration":1,"replicas":3,"updatedReplicas":3})";
    CHECK(s.Plan().phase == Phase::kWaitingForController);
  }
  SUBCASE("then unpause and drop in-progress in one patch") {
    rollout::Plan done = s.Plan(T0());
    CHECK(done.phase == Phase::kCompleted);
    std::erase_if(done.actions, [](const rollout::Action& a) {
      return a.kind == WriteKind::kDeploymentStatusPatch;  // progress (tests/unit/progress_test)
    });
    REQUIRE(done.actions.size() == 2);
    CHECK(done.actions[0].kind == WriteKind::kDeploymentPatch);
    CHECK(json::Serialize(done.actions[0].body) ==
          R"({"metadata":{"annotations":{"inplace-webhook.io/in-progress":null}},)"
          R"("spec":{"paused":false}})");
    CHECK(done.actions[0].metric == rollout::Metric::kRolloutCompleted);
    CHECK(done.actions[0].seconds == doctest::Approx(60));
    CHECK(Reasons(done) == std::vector<std::string>{"InPlaceUpdateCompleted"});
    CHECK(std::string(json::StringOr(&done.actions[1].body, "message")).find("in 1m00s") !=
          std::string::npos);
  }
  SUBCASE("a Deployment the user had paused is left paused") {
    s.spec.inProgress->pausedByUs = false;
    rollout::Plan done = s.Plan();
    CHECK(json::Find(&done.actions[0].body, "spec") == nullptr);
  }
  SUBCASE("a pod created from a stale cache after the patch is still brought to the target") {
    s.pods.push_back(Pod("web-z", "uid-rs1", s.base));
    rollout::Plan p2 = s.Plan();
    CHECK(p2.phase == Phase::kUpdating);
    CHECK(Started(p2) == std::vector<std::string>{"web-z"});
  }
}

TEST_CASE("resume: every intermediate state gives the same next step on a fresh look") {
  // A Deployment with a pre/post hook, a readiness gate and a drain; the pod walks through every
  // state. At each point the plan is computed twice from the stored objects alone.
  Scenario s(1, /*gate=*/true);
  s.spec.lifecycle =
      R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"markPodNotReady":true,"timeoutSeconds":600}})";
  s.spec.policy = R"({"gracePeriodSeconds":5})";
  json::Document& pod = *s.PodNamed("web-a");
  SetLabel(pod, "lb", "on");

  std::vector<std::string> states;
  Clock::time_point now = T0();
  for (int pass = 0; pass < 20; ++pass) {
    rollout::Plan p = s.Plan(now);
    CHECK(Serialized(s.Plan(now)) == Serialized(p));
    states.push_back(std::string(pod_update::StateName(pod_update::StateOf(AsPod(pod)))) + "/" +
                     std::string(rollout::PhaseName(p.phase)));
    if (p.phase == Phase::kCompleted) break;
    s.Apply(p);
    // The world moves on: the LB controller releases the pre-hook, kubelet restarts, the LB
    // re-registers the pod after the update.
    if (pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kPreparingUpdate)
      SetLabel(pod, "lb", std::nullopt);
    s.Kubelet();
    if (pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdated)
      SetLabel(pod, "lb", "on");
    now += seconds(3);
  }
  const std::vector<std::string> expected = {
      "Normal/updating",           // → PreparingUpdate + gate False
      "PreparingUpdate/updating",  // released by the LB; gate already False; grace 5 s pending
      "PreparingUpdate/updating",  // 6 s: grace and its 1.5 s of slack pending
      "PreparingUpdate/updating",  // grace elapsed → write
      "Updating/updating",         // restarted → Updated (not all hooked yet)
      "Updated/updating",          // re-registered → Normal
      "Normal/finishing",          // RS template := Deployment template
      "Normal/completed",
  };
  CHECK(states == expected);
  CHECK(pod_update::GateStatus(AsPod(pod)) == true);
  CHECK(Label(pod, "version") == "v2");
  CHECK(Label(pod, "lb") == "on");
}

TEST_CASE("hook timeouts become Events on the pod and the Deployment with stable names") {
  Scenario s(1);
  s.spec.lifecycle = R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"timeoutSeconds":30}})";
  SetLabel(*s.PodNamed("web-a"), "lb", "on");
  s.Apply(s.Plan(T0()));
  rollout::Plan p = s.Plan(T0() + seconds(31));
  std::vector<const rollout::Action*> events;
  for (const auto* e : Of(p, WriteKind::kEvent)) {
    if (json::StringOr(&e->body, "reason") == "HookTimeout") events.push_back(e);
  }
  REQUIRE(events.size() == 2);
  CHECK(json::StringOr(json::Find(&events[0]->body, "involvedObject"), "kind") == "Pod");
  CHECK(json::StringOr(json::Find(&events[1]->body, "involvedObject"), "kind") == "Deployment");
  CHECK_FALSE(events[0]->name.empty());
  CHECK(events[0]->name.starts_with("web-a."));
  CHECK(events[1]->name.starts_with("web."));
  auto marker = Of(p, WriteKind::kPodPatch);
  REQUIRE(marker.size() == 1);
  CHECK(marker[0]->metric == rollout::Metric::kHookTimeout);
  CHECK(Serialized(s.Plan(T0() + seconds(31))) == Serialized(p));  // same names on a retry
  s.Apply(p);
  CHECK(Of(s.Plan(T0() + seconds(90)), WriteKind::kPodPatch).empty());
}

TEST_CASE("new pods that declare the gate get it set True, others are left alone") {
  Scenario s(4, /*gate=*/true);
  for (auto& p : s.pods) RemoveCondition(p, keys::kReadyCondition);
  SetCondition(s.pods[1], keys::kReadyCondition, "False");  // someone else's business
  SetLabel(s.pods[2], keys::kStateLabel, "Updating");
  auto& a = s.pods[3].GetAllocator();
  s.pods[3]["metadata"].AddMember("deletionTimestamp", "2026-03-01T11:00:00Z", a);
  std::vector<const json::Value*> pods;
  for (auto& p : s.pods) pods.push_back(&p);
  auto actions = rollout::PlanNewPodGates(pods, T0());
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].name == "web-a");
  CHECK(actions[0].kind == WriteKind::kPodStatusPatch);
  CHECK(actions[0].Path() == "/api/v1/namespaces/default/pods/web-a/status");
  CHECK(actions[0].stampTransition);  // stamped when the writer sends it
}

TEST_CASE(
    "stale annotation copies on ReplicaSets are removed once the update ended; settings "
    "follow the Deployment") {
  Scenario s;
  s.spec.inProgress.reset();
  s.spec.lifecycle = R"({"inPlaceUpdate":{}})";
  json::Document d = Parse(DeploymentJson(s.spec));
  json::Document& rs = s.replicaSets[0];
  SetAnnotation(rs, keys::kInProgressAnnotation, "{}");
  SetAnnotation(rs, keys::kLifecycleAnnotation, "{}");
  SetAnnotation(rs, keys::kPolicyAnnotation, "{}");
  SetAnnotation(rs, keys::kPreviousTemplateHashAnnotation, "abc");
  auto a = rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs));
  REQUIRE(a.has_value());
  CHECK(json::Serialize(a->body) ==
        R"({"metadata":{"annotations":{"inplace-webhook.io/in-progress":null,)"
        R"("inplace-webhook.io/previous-template-hash":null,)"
        R"("inplace-webhook.io/lifecycle":"{\"inPlaceUpdate\":{}}",)"
        R"("inplace-webhook.io/policy":null}}})");
  CHECK(a->resourceVersion == "20");
  fake::MergePatch(rs, a->body, rs.GetAllocator());

  SetAnnotation(rs, keys::kInProgressAnnotation, std::nullopt);
  CHECK_FALSE(rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs)).has_value());

  SetAnnotation(rs, keys::kInProgressAnnotation, "{}");
  s.spec.inProgress = InProgress{"a", "b", true, "", ""};
  CHECK_FALSE(
      rollout::PlanReplicaSetCleanup(AsDeployment(Parse(DeploymentJson(s.spec))), AsReplicaSet(rs))
          .has_value());
  s.spec.inProgress.reset();
  s.spec.uid = "someone-else";
  CHECK_FALSE(
      rollout::PlanReplicaSetCleanup(AsDeployment(Parse(DeploymentJson(s.spec))), AsReplicaSet(rs))
          .has_value());
}

TEST_CASE("ReplicaSet cleanup never fights the Deployment controller's copies") {
  Scenario s;
  s.spec.inProgress.reset();
  json::Document d = Parse(DeploymentJson(s.spec));
  // Someone puts the product's keys on a Deployment; the controller copies them to the ReplicaSet.
  SetAnnotation(d, keys::kAbortAnnotation, "true");
  SetAnnotation(d, keys::kPreviousTemplateHashAnnotation, "abc");
  json::Document& rs = s.replicaSets[0];
  SetAnnotation(rs, keys::kAbortAnnotation, "true");
  SetAnnotation(rs, keys::kPreviousTemplateHashAnnotation, "abc");
  // Opted in: nothing to remove, every copy is the Deployment's own.
  CHECK_FALSE(rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs)).has_value());
  // Not opted in: no write at all, even for a stale copy the Deployment no longer has.
  SetAnnotation(rs, keys::kInProgressAnnotation, "{}");
  REQUIRE(rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs))
              .has_value());  // opted in: the stale copy goes
  // A ReplicaSet of a template not opted in is not the loop's to write (the chart's policy).
  SetLabel(rs, keys::kEnabledLabel, std::nullopt);
  CHECK_FALSE(rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs)).has_value());
  SetLabel(rs, keys::kEnabledLabel, std::string(keys::kTrue));
  json::Value& labels = d["metadata"]["labels"];
  labels.RemoveMember("inplace-webhook.io/enabled");
  CHECK_FALSE(rollout::PlanReplicaSetCleanup(AsDeployment(d), AsReplicaSet(rs)).has_value());
}

TEST_CASE("Events are core/v1 Events from inplace-webhook") {
  json::Document pod = Pod("web-a", "uid-rs1", Template({{"app", "web"}}, {{"app", "x:1"}}));
  json::Document e = rollout::MakeEvent(test::AsObject(pod), "v1", "Pod", "Normal", "PodUpdating",
                                        "msg", T0(), "n1");
  CHECK(
      json::Serialize(e) ==
      R"({"apiVersion":"v1","kind":"Event","metadata":{"name":"n1","namespace":"default"},)"
      R"("involvedObject":{"apiVersion":"v1","kind":"Pod","namespace":"default","name":"web-a",)"
      R"("uid":"uid-web-a","resourceVersion":"30"},"reason":"PodUpdating","message":"msg",)"
      R"("type":"Normal","firstTimestamp":"2026-03-01T12:00:00Z",)"
      R"("lastTimestamp":"2026-03-01T12:00:00Z","count":1,"source":{"component":"inplace-webhook"},)"
      R"("reportingComponent":"inplace-webhook","reportingInstance":""})");
}

TEST_CASE("deterministic Event names are valid and distinct") {
  CHECK(rollout::DedupEventName("web", "k1") == rollout::DedupEventName("web", "k1"));
  CHECK(rollout::DedupEventName("web", "k1") != rollout::DedupEventName("web", "k2"));
  CHECK(rollout::DedupEventName("web", "k1") != rollout::DedupEventName("web2", "k1"));
  std::string longName(250, 'a');
  longName[235] = '-';
  std::string n = rollout::DedupEventName(longName, "k");
  CHECK(n.size() <= 253);
  CHECK(n.find("-.") == std::string::npos);
}

TEST_CASE(
    "finish of a rollback: the older ReplicaSet at the target becomes the history of the "
    "template the pods leave; a duplicate of the target is deleted") {
  Scenario s;
  // web-h0 ran the target at revision 1 (kubectl rollout undo copied its template back; being the
  // oldest at the Deployment's template, the paused controller gives it the newest revision),
  // web-h5 is a duplicate of it; web-h1 (revision 3) holds the pods.
  s.replicaSets.push_back(Parse(ReplicaSetJson("web-h0", "uid-rs0", "uid-web", 0, s.target, "h0",
                                               {{std::string(keys::kRevisionAnnotation), "1"}},
                                               "2025-12-01T00:00:00Z")));
  s.replicaSets.push_back(Parse(ReplicaSetJson("web-h5", "uid-rs5", "uid-web", 0, s.target, "h5",
                                               {{std::string(keys::kRevisionAnnotation), "2"}})));
  s.Controller();
  CHECK(Annotation(*s.ReplicaSetNamed("web-h0"), keys::kRevisionAnnotation) == "4");
  AllAtTarget(s);
  rollout::Plan p = s.Plan();
  CHECK(p.phase == Phase::kFinishing);
  auto rs = RsWrites(p);
  REQUIRE(rs.size() == 3);
  CHECK(rs[0]->kind == WriteKind::kReplicaSetPatch);
  CHECK(rs[0]->name == "web-h0");  // the newest revision at the target
  CHECK(rs[1]->kind == WriteKind::kReplicaSetDelete);
  CHECK(rs[1]->name == "web-h5");
  CHECK(rs[2]->name == "web-h1");
  s.Apply(p);
  REQUIRE(s.ReplicaSetNamed("web-h0") != nullptr);
  const json::Document& h0 = *s.ReplicaSetNamed("web-h0");
  CHECK(TemplateHash(test::AsTemplate(h0["spec"]["template"])) == s.From());
  CHECK(Label(h0["spec"]["template"], keys::kPodTemplateHashLabel) == "h0");  // its selector's
  CHECK(Annotation(h0, keys::kRevisionAnnotation) == "3");
  CHECK(s.ReplicaSetNamed("web-h5") == nullptr);
  CHECK(Annotation(*s.ReplicaSetNamed("web-h1"), keys::kRevisionAnnotation) == "4");
  CHECK(s.Plan().phase == Phase::kCompleted);
}

TEST_CASE("finish with revisionHistoryLimit 0 keeps no history, as the controller would") {
  Scenario s;
  s.spec.strategy = R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}},)"
                    R"("revisionHistoryLimit":0)";
  AllAtTarget(s);
  rollout::Plan p = s.Plan();
  auto rs = RsWrites(p);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0]->name == "web-h1");
  s.Apply(p);
  CHECK(s.Plan().phase == Phase::kCompleted);
}

TEST_CASE("a user's pause holds the update: no pod starts, pods in flight go on") {
  Scenario s;
  s.spec.inProgress->pausedByUs = false;
  rollout::Plan p = s.Plan();
  CHECK(Started(p).empty());
  CHECK(Reasons(p) == std::vector<std::string>{"InPlaceUpdatePaused"});
  CHECK(p.message.find("paused by the user") != std::string::npos);

  SUBCASE("resumed, it runs; paused again mid-way, in-flight pods finish and no new one starts") {
    s.spec.inProgress->pausedByUs = true;
    rollout::Plan run = s.Plan();
    CHECK(Started(run) == std::vector<std::string>{"web-a"});
    s.Apply(run);
    s.spec.inProgress->pausedByUs = false;
    s.Kubelet();
    rollout::Plan held = s.Plan();
    CHECK(Started(held).empty());
    s.Apply(held);
    CHECK(pod_update::StateOf(AsPod(*s.PodNamed("web-a"))) == pod_update::PodState::kNormal);
    CHECK(pod_update::StateOf(AsPod(*s.PodNamed("web-b"))) == pod_update::PodState::kNormal);
    CHECK(Label(*s.PodNamed("web-b"), "version") == "v1");
  }
  SUBCASE("every pod at the target: the finish leaves the Deployment paused") {
    s.spec.inProgress->pausedByUs = true;
    AllAtTarget(s);
    s.spec.inProgress->pausedByUs = false;
    s.Apply(s.Plan());
    rollout::Plan done = s.Plan();
    CHECK(done.phase == Phase::kCompleted);
    CHECK(json::Find(&done.actions[0].body, "spec") == nullptr);
  }
}

TEST_CASE("the undo command re-targets the update to the template the pods started from") {
  Scenario s;
  s.Apply(s.Plan());  // web-a started
  s.Kubelet();
  s.spec.undo = true;
  rollout::Plan p = s.Plan();
  REQUIRE(Of(p, WriteKind::kDeploymentPatch).size() == 1);
  const json::Value& body = Of(p, WriteKind::kDeploymentPatch)[0]->body;
  json::Document d = Parse(DeploymentJson(s.spec));
  fake::MergePatch(d, body, d.GetAllocator());
  CHECK(TemplateHash(test::AsTemplate(d["spec"]["template"])) == s.From());
  CHECK_FALSE(Annotation(d, keys::kUndoAnnotation).has_value());
  StatusOr<std::optional<InProgress>> read = ReadInProgress(AsDeployment(d));
  REQUIRE(read.ok());
  const std::optional<InProgress> next = *read;
  REQUIRE(next);
  CHECK(next->to == s.From());
  CHECK(next->from == s.From());
  CHECK(Reasons(p) == std::vector<std::string>{"InPlaceUpdateUndone"});
}

TEST_CASE(
    "a re-target between the finish and the unpause: the pods still reach the newest target") {
  Scenario s;
  AllAtTarget(s);
  s.Apply(s.Plan());  // the finish: history ReplicaSet created, web-h1 holds the target
  REQUIRE(TemplateHash(test::AsTemplate((*s.ReplicaSetNamed("web-h1"))["spec"]["template"])) ==
          s.To());
  // Before the unpause, the user changes the image again: the mutator moves `to`.
  const std::string third =
      Template({{"app", "web"}, {"version", "v3"}}, {{"app", "nginx:1.28"}}, {}, false);
  s.spec.templateJson = third;
  s.spec.inProgress->to = Hash(third);
  for (int pass = 0; pass < 20; ++pass) {
    rollout::Plan p = s.Plan();
    if (p.phase == Phase::kCompleted) break;
    REQUIRE(p.phase != Phase::kAborted);
    REQUIRE(p.phase != Phase::kBlocked);
    s.Apply(p);
    s.Kubelet();
  }
  CHECK(s.Plan().phase == Phase::kCompleted);
  for (const auto& pod : s.pods) {
    CHECK(Label(pod, "version") == "v3");
    CHECK(json::StringOr(&pod["spec"]["containers"][0], "image") == "nginx:1.28");
  }
  CHECK(TemplateHash(test::AsTemplate((*s.ReplicaSetNamed("web-h1"))["spec"]["template"])) ==
        Hash(third));
  const json::Document* history = s.ReplicaSetNamed("web-" + s.From());
  REQUIRE(history != nullptr);
  CHECK(TemplateHash(test::AsTemplate((*history)["spec"]["template"])) == s.From());
  CHECK(Annotation(*history, keys::kRevisionAnnotation) == "3");
  CHECK(Annotation(*s.ReplicaSetNamed("web-h1"), keys::kRevisionAnnotation) == "4");
}

namespace {

// Three pods with the gate and the default drain, maxUnavailable 3 (one step of three), taken to
// the pod write: gates False at T0, the writes at T0 + 5 s. `restart` plays the kubelet.
void WriteOneStep(Scenario& s) {
  s.spec.strategy = R"({"rollingUpdate":{"maxUnavailable":3}})";
  for (auto& p : s.pods) {
    const std::string name(json::StringOr(json::Find(&p, "metadata"), "name"));
    SetCondition(p, keys::kReadyCondition, "True");
    SetContainerStatus(p, "app", "nginx:1.25", "sha256:" + std::string(64, 'c'),
                       "containerd://" + name);
  }
  s.Apply(s.Plan(T0()));  // three gates False
  CHECK(Started(s.Plan(T0())).empty());
  rollout::Plan write = s.Plan(T0() + seconds(5));  // the drain is over: three pod writes
  CHECK(Of(write, WriteKind::kPodPatch).size() == 3);
  s.Apply(write);
}

void Restart(Scenario& s, std::string_view name) {
  SetContainerStatus(*s.PodNamed(name), "app", "nginx:1.27", "sha256:" + std::string(64, 'd'),
                     "containerd://new-" + std::string(name));
}

size_t GateWrites(const rollout::Plan& p) {
  return Of(p, WriteKind::kPodStatusPatch).size();
}

}  // namespace

TEST_CASE("a step goes back in service together: one burst of gate writes, not one per pod") {
  Scenario s(3, /*gate=*/true);
  WriteOneStep(s);
  Restart(s, "web-a");
  Restart(s, "web-b");
  // web-c still restarting: web-a and web-b wait for it, with nothing written.
  rollout::Plan wait = s.Plan(T0() + seconds(7));
  CHECK(GateWrites(wait) == 0);
  CHECK(Of(wait, WriteKind::kPodPatch).empty());
  CHECK(wait.podsByWait["step"] == 2);
  CHECK(wait.podsByWait["restart"] == 1);
  Restart(s, "web-c");
  rollout::Plan back = s.Plan(T0() + seconds(8));  // all three back in one pass
  CHECK(GateWrites(back) == 3);
  CHECK(Of(back, WriteKind::kPodPatch).empty());  // Normal goes with each gate
}

TEST_CASE("a pod that restarts late keeps the rest of its step out for at most 10 s") {
  Scenario s(3, /*gate=*/true);
  WriteOneStep(s);
  Restart(s, "web-a");
  CHECK(GateWrites(s.Plan(T0() + seconds(14))) == 0);
  CHECK(GateWrites(s.Plan(T0() + seconds(15))) == 1);  // alone, 10 s after its write
}
