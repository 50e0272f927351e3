// hooks/statefulset_workload: the planner (hooks/rollout_plan PlanUpdate) driving a StatefulSet's
// update (DESIGN.md §4.8): highest ordinal first, within maxUnavailable (or one pod), the pods
// below the partition left, the pod write carrying the update revision, the controller's own
// finish.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/keys.h"
#include "hooks/rollout_plan.h"
#include "hooks/statefulset_workload.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

namespace iw {
namespace {

using namespace fixtures;
using rollout::Action;
using rollout::Phase;
using rollout::Plan;
using rollout::WriteKind;

const std::string kFrom = Template({{"app", "db"}}, {{"app", "db:1"}});
const std::string kTo = Template({{"app", "db"}}, {{"app", "db:2"}});

// A StatefulSet `web` (uid sts-uid) at kTo, its controller having observed it; `spec` and `status`
// add to its spec and status.
std::string SetJson(const std::string& spec = "", const std::string& status = "",
                    const std::string& currentRevision = "web-old") {
  return R"({"metadata":{"name":"web","namespace":"default","uid":"sts-uid","generation":4,
             "resourceVersion":"77","labels":{"inplace-webhook.io/enabled":"true"},
             "annotations":{"inplace-webhook.io/in-progress":"x"}},
             "spec":{"replicas":3,"template":)" +
         kTo + (spec.empty() ? "" : "," + spec) +
         R"(},"status":{"observedGeneration":4,"replicas":3,"readyReplicas":3,"currentRevision":")" +
         currentRevision + R"(","updateRevision":"web-new")" +
         (status.empty() ? "" : "," + status) + "}}";
}

InProgress Record() {
  return InProgress{Hash(kFrom), Hash(kTo), /*pausedByUs=*/true, Ts(T0()), ""};
}

struct Fixture {
  explicit Fixture(const std::string& set, int replicas = 3) : setJson(Parse(set)) {
    for (int i = 0; i < replicas; ++i) {
      podJson.push_back(Pod("web-" + std::to_string(i), "sts-uid", kFrom));
      SetLabel(podJson.back(), keys::kControllerRevisionHashLabel, "web-old");
    }
  }
  Plan PlanOnce() {
    pods.clear();
    podPtrs.clear();
    for (const json::Document& p : podJson) pods.push_back(test::AsPod(p));
    for (const kube::Pod& p : pods) podPtrs.push_back(&p);
    const kube::StatefulSet set = test::AsStatefulSet(setJson);
    const json::Document current = Parse(kFrom);
    const kube::PodTemplate currentView = test::AsTemplate(current);
    rollout::StatefulSetWorkload w(set, podPtrs, withRevision ? &currentView : nullptr);
    return rollout::PlanUpdate(w, record, T0());
  }

  json::Document setJson;
  std::vector<json::Document> podJson;
  std::vector<kube::Pod> pods;
  std::vector<const kube::Pod*> podPtrs;
  InProgress record = Record();
  bool withRevision = true;
};

std::vector<std::string> PodWrites(const Plan& p) {
  std::vector<std::string> out;
  for (const Action& a : p.actions) {
    if (a.kind == WriteKind::kPodPatch) out.push_back(a.name);
  }
  return out;
}

const Action* PodWrite(const Plan& p, std::string_view name) {
  for (const Action& a : p.actions) {
    if (a.kind == WriteKind::kPodPatch && a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a StatefulSet's update takes the highest ordinal first, to the update revision") {
  Fixture f(SetJson());
  Plan p = f.PlanOnce();
  CHECK(PodWrites(p) == std::vector<std::string>{"web-2"});
  const Action* w = PodWrite(p, "web-2");
  REQUIRE(w != nullptr);
  // One write: the image and the controller-revision-hash the controller counts by.
  CHECK(Label(w->body, keys::kControllerRevisionHashLabel) == "web-new");
  CHECK(json::Serialize(w->body).find("db:2") != std::string::npos);
  bool started = false;
  for (const Action& a : p.actions) {
    if (a.kind == WriteKind::kEvent &&
        json::Serialize(a.body).find("InPlaceUpdateStarted") != std::string::npos) {
      started = true;
      CHECK(json::Serialize(a.body).find("\"kind\":\"StatefulSet\"") != std::string::npos);
    }
  }
  CHECK(started);
}

TEST_CASE("a StatefulSet's budget is its maxUnavailable, rounded up, else one pod") {
  Fixture two(SetJson(
      R"("updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0,"maxUnavailable":"50%"}})"));
  CHECK(PodWrites(two.PlanOnce()) == std::vector<std::string>{"web-2", "web-1"});
  Fixture one(SetJson(
      R"("updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0,"maxUnavailable":0}})"));
  CHECK(PodWrites(one.PlanOnce()) == std::vector<std::string>{"web-2"});
}

TEST_CASE("a StatefulSet's partition leaves the ordinals below it, and holds the end") {
  Fixture f(
      SetJson(R"("updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}})"));
  CHECK(PodWrites(f.PlanOnce()) == std::vector<std::string>{"web-2"});
  // web-2 done: at the target, its revision the update's, Normal, Ready.
  SetSpecImage(f.podJson[2], "app", "db:2");
  SetContainerStatus(f.podJson[2], "app", "db:2", "db:2@sha256:new", "containerd://web-2-app-2");
  SetLabel(f.podJson[2], keys::kControllerRevisionHashLabel, "web-new");
  Plan p = f.PlanOnce();
  CHECK(PodWrites(p).empty());
  CHECK(p.phase == Phase::kBlocked);
  CHECK(p.staged);  // the user's staging: no stall deadline runs
  CHECK(p.message.find("below the partition 2") != std::string::npos);
  // Nothing of the StatefulSet is written but the progress report: the record stays.
  for (const Action& a : p.actions) {
    if (a.kind != WriteKind::kStatefulSetPatch) continue;
    CHECK(json::Serialize(a.body).find("in-progress") == std::string::npos);
    CHECK(json::Serialize(a.body).find("inplace-webhook.io/progress") != std::string::npos);
  }
}

TEST_CASE("a StatefulSet's update paused by the user starts no pod") {
  Fixture f(SetJson(""));
  f.record.pausedByUs = false;  // the pause command
  const Plan p = f.PlanOnce();
  CHECK(PodWrites(p).empty());
  f.record.pausedByUs = true;  // resumed
  CHECK(PodWrites(f.PlanOnce()) == std::vector<std::string>{"web-2"});
}

TEST_CASE("a pod whose move began before the partition was raised goes on to the end") {
  Fixture f(
      SetJson(R"("updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}})"));
  // web-1 was taken out of service for the update (PreparingUpdate) when the partition was 0.
  SetLabel(f.podJson[1], keys::kStateLabel, std::string(keys::kStatePreparingUpdate));
  SetAnnotation(f.podJson[1], keys::kStateTimestampAnnotation, "2026-01-01T00:00:00Z");
  Plan p = f.PlanOnce();
  CHECK(p.podsTotal == 2);  // web-2 and web-1; web-0, Normal, stays below the partition
  // Not a pod below the partition that was never touched: web-0 gets no write.
  for (const std::string& name : PodWrites(p)) CHECK(name != "web-0");
}

TEST_CASE("a StatefulSet's update waits for its controller, and ends on the controller's count") {
  SUBCASE("the controller has not observed the template yet") {
    Fixture f(SetJson());
    f.setJson = Parse(SetJson().replace(SetJson().find("\"observedGeneration\":4"), 22,
                                        "\"observedGeneration\":3"));
    Plan p = f.PlanOnce();
    CHECK(PodWrites(p).empty());
    CHECK(p.message.find("observe generation 4") != std::string::npos);
  }
  SUBCASE("the current revision not read yet") {
    Fixture f(SetJson());
    f.withRevision = false;
    Plan p = f.PlanOnce();
    CHECK(PodWrites(p).empty());
    CHECK(p.message.find("ControllerRevision web-old") != std::string::npos);
  }
  SUBCASE("the current revision holds another template: the update ends") {
    Fixture f(SetJson());
    f.record.from = "0000000000";
    Plan p = f.PlanOnce();
    CHECK(PodWrites(p).empty());
    bool ended = false;
    for (const Action& a : p.actions) ended = ended || a.kind == WriteKind::kStatefulSetPatch;
    CHECK(ended);
  }
  SUBCASE("every pod done: the end waits for the controller's count, then removes the record") {
    Fixture f(SetJson());
    for (int i = 0; i < 3; ++i) {
      const std::string name = "web-" + std::to_string(i);
      SetSpecImage(f.podJson[i], "app", "db:2");
      SetContainerStatus(f.podJson[i], "app", "db:2", "db:2@sha256:new",
                         "containerd://" + name + "-app-2");
      SetLabel(f.podJson[i], keys::kControllerRevisionHashLabel, "web-new");
    }
    Plan waiting = f.PlanOnce();
    CHECK(waiting.phase == Phase::kWaitingForController);
    CHECK(waiting.message.find("revision web-new") != std::string::npos);
    f.setJson = Parse(SetJson("", R"("updatedReplicas":3,"currentReplicas":3)", "web-new"));
    Plan done = f.PlanOnce();
    const Action* end = nullptr;
    for (const Action& a : done.actions) {
      if (a.kind == WriteKind::kStatefulSetPatch &&
          json::Serialize(a.body).find("in-progress") != std::string::npos) {
        end = &a;
      }
    }
    REQUIRE(end != nullptr);
    CHECK(end->Path() == "/apis/apps/v1/namespaces/default/statefulsets/web");
    CHECK(json::Serialize(end->body).find("\"inplace-webhook.io/in-progress\":null") !=
          std::string::npos);
    CHECK(done.phase == Phase::kCompleted);
  }
}

TEST_CASE(
    "a StatefulSet's snapshot: the base from its ControllerRevision as the controller stores it") {
  // The record as the webhook writes it; the revision as the controller stores it: the template
  // under data.spec with the strategic-merge "$patch":"replace" key beside its fields.
  std::string set = SetJson();
  set.replace(
      set.find("\"x\""), 3,
      json::Serialize(json::Value(rapidjson::StringRef(SerializeInProgress(Record()).c_str()))));
  const json::Document setJson = Parse(set);
  json::Document revision =
      Parse(R"({"metadata":{"name":"web-old","namespace":"default"},"revision":1,
                                      "data":{"spec":{"template":)" +
            kFrom + "}}}");
  {
    auto& a = revision.GetAllocator();
    json::SetString(
        *json::FindMutable(json::FindMutable(json::FindMutable(&revision, "data"), "spec"),
                           "template"),
        "$patch", "replace", a);
  }
  std::vector<json::Document> podJson;
  for (int i = 0; i < 3; ++i) {
    podJson.push_back(Pod("web-" + std::to_string(i), "sts-uid", kFrom));
    SetLabel(podJson.back(), keys::kControllerRevisionHashLabel, "web-old");
  }
  rollout::StatefulSetSnapshot snapshot;
  snapshot.statefulSet = &setJson;
  for (const json::Document& p : podJson) snapshot.pods.push_back(&p);
  snapshot.now = T0();
  SUBCASE("the revision the status names: the update starts at the highest ordinal") {
    snapshot.currentRevision = &revision;
    Plan p = rollout::PlanStatefulSetRollout(snapshot);
    CHECK(PodWrites(p) == std::vector<std::string>{"web-2"});
  }
  SUBCASE("another revision than the status names is not the base: the update waits") {
    json::SetString(*json::FindMutable(&revision, "metadata"), "name", "web-older",
                    revision.GetAllocator());
    snapshot.currentRevision = &revision;
    Plan p = rollout::PlanStatefulSetRollout(snapshot);
    CHECK(PodWrites(p).empty());
    CHECK(p.phase == Phase::kBlocked);
  }
  SUBCASE("no record: nothing to do") {
    json::Document plain = Parse(SetJson());
    json::Remove(*json::FindMutable(&plain, "metadata"), "annotations");
    snapshot.statefulSet = &plain;
    snapshot.currentRevision = &revision;
    Plan p = rollout::PlanStatefulSetRollout(snapshot);
    CHECK(p.actions.empty());
    CHECK(p.phase == Phase::kIdle);
  }
}

}  // namespace iw
