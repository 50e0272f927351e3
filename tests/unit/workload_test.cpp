// The planner against hooks/workload.h alone: a workload kind that is not a Deployment (a test
// double holding a few pods) gets the same update, budget, abort, hold and end, through the
// interface and nothing else (issue: room for a second workload kind).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/keys.h"
#include "hooks/rollout_plan.h"
#include "hooks/workload.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

namespace iw {
namespace {

using namespace fixtures;
using rollout::Action;
using rollout::NoBase;
using rollout::Phase;
using rollout::Plan;
using rollout::RunBase;
using rollout::WriteKind;

const std::string kFrom = Template({{"app", "web"}}, {{"app", "nginx:1.25"}});
const std::string kTo = Template({{"app", "web"}}, {{"app", "nginx:1.27"}});

// A kind with its own object (annotations only), pods it owns by uid "owner", a hold flag and a
// finish that is done when `finished` says so. It records what the planner asked of it.
class BareWorkload final : public rollout::Workload {
 public:
  explicit BareWorkload(const std::string& annotations)
      : objectJson_(Parse(R"({"metadata":{"name":"bare","namespace":"default","uid":"owner",
                              "annotations":)" +
                          annotations + "}}")),
        object_(test::AsObject(objectJson_)),
        fromJson_(Parse(kFrom)),
        toJson_(Parse(kTo)) {}

  void AddPod(const std::string& name, const std::string& templateJson) {
    podJson_.push_back(Pod(name, "owner", templateJson));
  }

  const kube::ObjectView& object() const override { return object_; }
  std::string_view apiVersion() const override { return "example.io/v1"; }
  std::string_view kind() const override { return "Bare"; }
  std::string Ref() const override { return "bare/bare"; }
  kube::PodTemplate podTemplate() const override { return test::AsTemplate(toJson_); }
  int minReadySeconds() const override { return 0; }
  int MaxUnavailable() const override { return maxUnavailable; }
  std::vector<const kube::Pod*> Pods() const override {
    std::vector<const kube::Pod*> out;
    for (const kube::Pod& p : pods_) out.push_back(&p);
    return out;
  }
  bool Held() const override { return held; }
  std::optional<std::string> EndReason() const override {
    if (!held) return std::string("the hold was removed");
    return std::nullopt;
  }
  bool RevertPending() const override { return false; }
  Action EndPatch(bool release, std::string summary) const override {
    ++endPatches;
    released = release;
    return rollout::WriteAction(WriteKind::kDeploymentPatch, object_, Parse("{}"),
                                std::move(summary));
  }
  std::string ReleaseWords(bool release) const override {
    return release ? "the hold is released" : "the hold is left";
  }
  std::string_view ReleasedNote() const override { return "hold released"; }
  std::variant<RunBase, NoBase> FindBase(const InProgress&) override {
    if (noBase) return *noBase;
    pods_.clear();
    for (const json::Document& p : podJson_) pods_.push_back(test::AsPod(p));
    RunBase base{{}, test::AsTemplate(fromJson_), "the bare owner", false};
    for (const kube::Pod& p : pods_) base.pods.push_back(&p);
    return base;
  }
  bool UndoRequested() const override { return false; }
  Plan Undo(const RunBase&, const InProgress&, rollout::Clock::time_point) const override {
    return {};
  }
  bool Finish(Plan& plan, const RunBase&, const InProgress&) const override {
    ++finishes;
    if (finished) return true;
    plan.phase = Phase::kFinishing;
    plan.message = "bare bookkeeping";
    return false;
  }
  void AddProgress(Plan&, rollout::Clock::time_point) const override { ++progressCalls; }
  void AddEndedWithoutLoop(Plan&, rollout::Clock::time_point) const override {}

  int maxUnavailable = 1;
  bool held = true;
  bool finished = false;
  std::optional<NoBase> noBase;
  mutable int endPatches = 0, finishes = 0, progressCalls = 0;
  mutable bool released = false;

 private:
  json::Document objectJson_;
  kube::ObjectView object_;
  json::Document fromJson_, toJson_;
  std::vector<json::Document> podJson_;
  std::vector<kube::Pod> pods_;
};

InProgress Record() {
  return InProgress{Hash(kFrom), Hash(kTo), /*pausedByUs=*/true, Ts(T0()), ""};
}

int Count(const Plan& p, WriteKind kind) {
  int n = 0;
  for (const Action& a : p.actions) n += a.kind == kind ? 1 : 0;
  return n;
}

const Action* EventReason(const Plan& p, std::string_view reason) {
  for (const Action& a : p.actions) {
    if (a.kind == WriteKind::kEvent && json::StringOr(&a.body, "reason") == reason) return &a;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("a second kind: the update starts, within its budget, Events naming the kind") {
  BareWorkload w("{}");
  for (const char* name : {"p-a", "p-b", "p-c", "p-d"}) w.AddPod(name, kFrom);
  w.maxUnavailable = 2;
  const Plan p = rollout::PlanUpdate(w, Record(), T0());
  CHECK(p.phase == Phase::kUpdating);
  CHECK(Count(p, WriteKind::kPodPatch) == 2);  // two pods leave Normal, by name
  CHECK(p.actions[1].name == "p-a");
  const Action* started = EventReason(p, "InPlaceUpdateStarted");
  REQUIRE(started != nullptr);
  CHECK(json::StringOr(json::Find(&started->body, "involvedObject"), "kind") == "Bare");
  CHECK(json::StringOr(json::Find(&started->body, "involvedObject"), "apiVersion") ==
        "example.io/v1");
  CHECK(w.progressCalls == 1);
  CHECK(w.endPatches == 0);
}

TEST_CASE("a second kind: abort, a released hold and a missing base end or hold the update") {
  SUBCASE("the abort annotation: pods back in service, the kind's end patch releases") {
    BareWorkload w(R"({"inplace-webhook.io/abort":"true"})");
    w.AddPod("p-a", kFrom);
    const Plan p = rollout::PlanUpdate(w, Record(), T0());
    CHECK(p.phase == Phase::kAborted);
    CHECK(w.endPatches == 1);
    CHECK(w.released);
    const Action* aborted = EventReason(p, "InPlaceUpdateAborted");
    REQUIRE(aborted != nullptr);
    CHECK(json::StringOr(&aborted->body, "message").ends_with("the hold is released"));
  }
  SUBCASE("the kind's own end reason") {
    BareWorkload w("{}");
    w.held = false;
    const Plan p = rollout::PlanUpdate(w, Record(), T0());
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message == "the hold was removed");
    CHECK_FALSE(w.released);  // not held: nothing to release
  }
  SUBCASE("no base, abort") {
    BareWorkload w("{}");
    w.noBase = NoBase{true, "no owner at the starting template"};
    const Plan p = rollout::PlanUpdate(w, Record(), T0());
    CHECK(p.phase == Phase::kAborted);
    CHECK(p.message == "no owner at the starting template");
  }
  SUBCASE("no base, wait") {
    BareWorkload w("{}");
    w.noBase = NoBase{false, "two owners; waiting"};
    const Plan p = rollout::PlanUpdate(w, Record(), T0());
    CHECK(p.phase == Phase::kBlocked);
    CHECK(p.requeueAfter == rollout::kBlockedPoll);
    CHECK(w.endPatches == 0);
  }
}

TEST_CASE("a second kind: every pod at the target, the kind's finish, then one end") {
  BareWorkload w("{}");
  for (const char* name : {"p-a", "p-b"}) w.AddPod(name, kTo);
  Plan p = rollout::PlanUpdate(w, Record(), T0());
  CHECK(w.finishes == 1);
  CHECK(p.phase == Phase::kFinishing);
  CHECK(p.message == "bare bookkeeping");
  CHECK(w.endPatches == 0);
  w.finished = true;
  p = rollout::PlanUpdate(w, Record(), T0() + std::chrono::seconds(75));
  CHECK(p.phase == Phase::kCompleted);
  CHECK(w.endPatches == 1);
  CHECK(w.released);  // pausedByUs: the hold was ours
  const Action* completed = EventReason(p, "InPlaceUpdateCompleted");
  REQUIRE(completed != nullptr);
  CHECK(json::StringOr(&completed->body, "message") ==
        "in-place update to template " + Hash(kTo) + " completed: 2 pods in 1m15s; hold released");
}

}  // namespace iw
