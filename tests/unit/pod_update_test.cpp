#include <doctest/doctest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "lib/rfc3339.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsPod;
using namespace iw::fixtures;
using pod_update::PodOp;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr std::string_view kPolicyConfig = R"({"annotations":["config/*"]})";
// The same with no drain wait (the default drain applies to pods with the gate).
constexpr std::string_view kNoDrain = R"({"annotations":["config/*"],"gracePeriodSeconds":0})";

// An update from the base template to the target template, with the Deployment's hooks.
struct Env {
  std::string base, target;
  lifecycle::Settings settings;
  pod_update::Target t;
  pod_update::Rules rules;

  Env(bool gate, std::string_view lifecycleJson = "", std::string_view policyJson = kPolicyConfig) {
    base = Template({{"app", "web"}, {"version", "v1"}, {"old", "y"}},
                    {{"app", "nginx:1.25"}, {"sidecar", "busybox:1.36"}}, {{"config/hash", "a"}},
                    gate);
    target = Template({{"app", "web"}, {"version", "v2"}, {"new", "x"}},
                      {{"app", "nginx:1.27"}, {"sidecar", "busybox:1.36"}}, {{"config/hash", "b"}},
                      gate);
    if (!lifecycleJson.empty()) {
      auto l = lifecycle::ParseLifecycle(lifecycleJson);
      REQUIRE_MESSAGE(l.ok(), l.status().message());
      settings.lifecycle = *l;
    }
    auto p = lifecycle::ParsePolicy(policyJson);
    REQUIRE_MESSAGE(p.ok(), p.status().message());
    settings.policy = *p;
    auto made =
        pod_update::MakeTarget(test::AsTemplate(Parse(base)), test::AsTemplate(Parse(target)),
                               settings.policy, Hash(base), Hash(target));
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    t = *made;
    rules = pod_update::MakeRules(settings);
  }
  json::Document NewPod(const std::string& name = "web-a") const {
    return Pod(name, "uid-rs", base);
  }
};

std::vector<const PodOp*> Ops(const pod_update::Step& s, PodOp::Kind kind) {
  std::vector<const PodOp*> out;
  for (const auto& op : s.ops) {
    if (op.kind == kind) out.push_back(&op);
  }
  return out;
}
std::vector<std::string> Reasons(const pod_update::Step& s) {
  std::vector<std::string> out;
  for (const auto* op : Ops(s, PodOp::Kind::kEvent)) out.push_back(op->event.reason);
  return out;
}

// Applies the step's writes to `pod` as the API server would.
void ApplyStep(json::Document& pod, const pod_update::Step& s) {
  for (const auto& op : s.ops) {
    if (op.kind != PodOp::Kind::kEvent) fake::StrategicMergePatch(pod, op.body, pod.GetAllocator());
  }
}

std::string State(const json::Value& pod) {
  return std::string(pod_update::StateName(pod_update::StateOf(AsPod(pod))));
}

std::optional<bool> Gate(const json::Value& pod) {
  return pod_update::GateStatus(AsPod(pod));
}

// Puts a pod in `state` as if the loop had moved it there at `when`.
void Enter(json::Document& pod, std::string_view state, Clock::time_point when) {
  SetLabel(pod, keys::kStateLabel, std::string(state));
  SetAnnotation(pod, keys::kStateTimestampAnnotation, Ts(when));
}

// Kubelet restarted container `name` on `image` with a new image ID and container ID.
void Restart(json::Document& pod, std::string_view name, std::string_view image) {
  SetContainerStatus(pod, name, "docker.io/library/" + std::string(image),
                     "docker.io/library/" + std::string(image) + "@sha256:new",
                     "containerd://new-" + std::string(name));
}

}  // namespace

TEST_CASE("the pod write carries only the template difference") {
  Env env(false);
  json::Document pod = env.NewPod();
  SetLabel(pod, "team", "payments");  // not named by the template: never touched
  SetLabel(pod, "lb", std::nullopt);

  pod_update::Changes c = pod_update::ComputeChanges(env.t, AsPod(pod));
  CHECK(c.labels.size() == 3);
  CHECK(c.labels.at("version") == "v2");
  CHECK(c.labels.at("new") == "x");
  CHECK_FALSE(c.labels.at("old").has_value());  // removed from the template → removed
  CHECK_FALSE(c.labels.contains("app"));        // unchanged template label: not re-applied
  CHECK_FALSE(c.labels.contains("team"));
  CHECK_FALSE(c.labels.contains(std::string(keys::kPodTemplateHashLabel)));
  CHECK(c.annotations.size() == 1);
  CHECK(c.annotations.at("config/hash") == "b");
  REQUIRE(c.images.size() == 1);
  CHECK(c.images.at("app") == "nginx:1.27");  // sidecar unchanged: not written, not restarted

  SUBCASE("a template label a hook controller removed from the pod is not re-armed") {
    Env hooked(false);
    std::string base = Template({{"app", "web"}, {"lb", "on"}}, {{"app", "nginx:1.25"}});
    std::string target = Template({{"app", "web"}, {"lb", "on"}}, {{"app", "nginx:1.27"}});
    auto t = pod_update::MakeTarget(test::AsTemplate(Parse(base)), test::AsTemplate(Parse(target)),
                                    {}, Hash(base), Hash(target));
    REQUIRE(t.ok());
    json::Document p = Pod("web-b", "uid-rs", base);
    SetLabel(p, "lb", std::nullopt);  // released by the LB controller
    pod_update::Changes changes = pod_update::ComputeChanges(*t, AsPod(p));
    CHECK(changes.labels.empty());
    CHECK(changes.images.size() == 1);
  }
  SUBCASE("an image already equal after normalisation is not written") {
    SetSpecImage(pod, "app", "docker.io/library/nginx:1.27");
    CHECK_FALSE(pod_update::ComputeChanges(env.t, AsPod(pod)).images.contains("app"));
  }
  SUBCASE("annotations outside the policy never appear") {
    SetAnnotation(pod, "other/key", "1");
    CHECK_FALSE(pod_update::ComputeChanges(env.t, AsPod(pod)).annotations.contains("other/key"));
  }
}

TEST_CASE("MakeTarget refuses a difference that is not in-place eligible") {
  std::string base = Template({{"app", "web"}}, {{"app", "nginx:1.25"}});
  std::string target = Template({{"app", "web"}}, {{"app", "nginx:1.25"}, {"extra", "x:1"}});
  const Status st = pod_update::MakeTarget(test::AsTemplate(Parse(base)),
                                           test::AsTemplate(Parse(target)), {}, "a", "b")
                        .status();
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("cannot be applied in place") != std::string::npos);
}

TEST_CASE("Normal → Updating in one write when nothing holds the pod") {
  Env env(false);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), /*mayStart=*/true, T0());
  CHECK(s.started);
  auto patches = Ops(s, PodOp::Kind::kPatch);
  REQUIRE(patches.size() == 1);
  CHECK(Ops(s, PodOp::Kind::kStatusPatch).empty());
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
  const json::Value& body = patches[0]->body;
  CHECK(json::Serialize(body["spec"]) == R"({"containers":[{"name":"app","image":"nginx:1.27"}]})");

  ApplyStep(pod, s);
  CHECK(State(pod) == "Updating");
  CHECK(Annotation(pod, keys::kStateTimestampAnnotation) == Ts(T0()));
  CHECK(Label(pod, "version") == "v2");
  CHECK(Label(pod, "new") == "x");
  CHECK_FALSE(Label(pod, "old").has_value());
  CHECK(Label(pod, "app") == "web");
  CHECK(Annotation(pod, "config/hash") == "b");
  auto us = pod_update::ReadUpdateState(AsPod(pod));
  REQUIRE(us.has_value());
  CHECK(us->revision == env.t.to);
  CHECK(us->updateTimestamp == Ts(T0()));
  REQUIRE(us->lastContainerStatuses.size() == 1);
  const auto& rec = us->lastContainerStatuses.at("app");
  CHECK(rec.imageID == "nginx:1.25@sha256:old-app");
  CHECK(rec.containerID == "containerd://web-a-app");
  CHECK(rec.restartCount == 0);
  // Kruise's field names, in order.
  CHECK(Annotation(pod, keys::kUpdateStateAnnotation)
            ->starts_with(
                R"({"revision":")" + env.t.to + R"(","updateTimestamp":")" + Ts(T0()) +
                R"(","lastContainerStatuses":{"app":{"imageID":"nginx:1.25@sha256:old-app",)"
                R"("containerID":"containerd://web-a-app","restartCount":0}})"));
}

TEST_CASE("Normal waits without budget, but a new pod still gets its gate") {
  Env env(true);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), /*mayStart=*/false, T0());
  CHECK(s.ops.empty());
  CHECK_FALSE(s.started);

  RemoveCondition(pod, keys::kReadyCondition);  // a new pod: gate declared, no condition
  s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0());
  auto status = Ops(s, PodOp::Kind::kStatusPatch);
  REQUIRE(status.size() == 1);
  ApplyStep(pod, s);
  CHECK(Gate(pod) == true);
  CHECK(State(pod) == "Normal");
}

TEST_CASE("Normal → PreparingUpdate while the pre-update hook is armed; gate False if asked") {
  constexpr std::string_view kHook =
      R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"markPodNotReady":true,"timeoutSeconds":300}})";
  Env env(true, kHook);
  json::Document pod = env.NewPod();
  SetLabel(pod, "lb", "on");  // armed by the LB controller

  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0());
  CHECK(s.started);
  REQUIRE(s.ops.size() == 2);
  CHECK(s.ops[0].kind == PodOp::Kind::kPatch);  // state first, then the gate: resumable order
  CHECK(s.ops[1].kind == PodOp::Kind::kStatusPatch);
  CHECK(s.ops[1].stampTransition);  // the drain runs from the write, not from this pass
  CHECK_FALSE(s.ops[0].stampTransition);
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
  CHECK(s.wakeAfter == seconds(300));
  ApplyStep(pod, s);
  CHECK(State(pod) == "PreparingUpdate");
  CHECK(Label(pod, "version") == "v1");  // nothing of the template yet
  CHECK(Gate(pod) == false);
  CHECK_FALSE(pod_update::GateStatus(AsPod(pod)).value());
  // Ready is the kubelet's: the gate write leaves it for the kubelet to recompute.
  CHECK(budget::IsReady(test::AsPod(pod)));

  SUBCASE("it waits while any handler is present") {
    pod_update::Step wait =
        pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0() + seconds(10));
    CHECK(wait.ops.empty());
    CHECK(wait.wakeAfter == seconds(290));
  }
  SUBCASE("after a crash between the two writes the gate write is made on the next pass") {
    SetCondition(pod, keys::kReadyCondition, "True");
    pod_update::Step again =
        pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0() + seconds(1));
    REQUIRE(again.ops.size() == 1);
    CHECK(again.ops[0].kind == PodOp::Kind::kStatusPatch);
    CHECK(again.ops[0].stampTransition);
  }
  SUBCASE("released: the pod write follows") {
    SetLabel(pod, "lb", std::nullopt);
    pod_update::Step w =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(20));
    CHECK_FALSE(w.started);     // it started when it left Normal
    CHECK(Reasons(w).empty());  // an ordinary step: no Event
    ApplyStep(pod, w);
    CHECK(State(pod) == "Updating");
    CHECK(Label(pod, "version") == "v2");
    CHECK_FALSE(Label(pod, "lb").has_value());  // the hook label is not put back
  }
}

TEST_CASE("a declared but unarmed hook lets the pod through; finalizer handlers hold it too") {
  constexpr std::string_view kHook =
      R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"},"finalizersHandler":["example.com/drain"]}})";
  Env env(false, kHook);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0());
  CHECK(Reasons(s).empty());  // an ordinary step: no Event

  json::Document held = env.NewPod("web-b");
  auto& a = held.GetAllocator();
  json::Value finalizers(rapidjson::kArrayType);
  finalizers.PushBack("example.com/drain", a);
  held["metadata"].AddMember("finalizers", finalizers, a);
  s = pod_update::Decide(env.t, env.rules, AsPod(held), true, T0());
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
}

TEST_CASE("default drain: with the gate and no gracePeriodSeconds, gate False, then the default") {
  struct Case {
    const char* what;
    bool gate;
    std::string_view policy;
    long long drain;  // seconds between gate False and the write; -1: written at once
  };
  const Case cases[] = {
      {"gate, no grace: the default drain", true, R"({"annotations":["config/*"]})",
       pod_update::kDefaultDrainSeconds},
      {"gate, explicit 0: no drain", true, kNoDrain, -1},
      {"gate, explicit 7", true, R"({"annotations":["config/*"],"gracePeriodSeconds":7})", 7},
      {"no gate: nothing could drain it, written at once", false, R"({"annotations":["config/*"]})",
       -1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    Env env(c.gate, "", c.policy);
    json::Document pod = env.NewPod();
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
    if (c.drain < 0) {
      CHECK(State(pod) == "Updating");
      continue;
    }
    REQUIRE(State(pod) == "PreparingUpdate");
    CHECK(Gate(pod) == false);
    // The gate's change is stamped to the millisecond (gate-sent) as its write is sent, and the
    // API server stores it later: 0.5 s of slack keeps the drain at least as long.
    CHECK(Annotation(pod, keys::kGateSentAnnotation) == rfc3339::FormatMillis(T0()));
    pod_update::Step early = pod_update::Decide(env.t, env.rules, AsPod(pod), false,
                                                T0() + seconds(c.drain) + milliseconds(499));
    CHECK(early.ops.empty());
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false,
                                      T0() + seconds(c.drain) + milliseconds(500)));
    CHECK(State(pod) == "Updating");
  }
}

TEST_CASE("drain: gate False, then gracePeriodSeconds, then the write") {
  Env env(true, "", R"({"annotations":["config/*"],"gracePeriodSeconds":30})");
  json::Document pod = env.NewPod();

  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0());
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
  CHECK(Ops(s, PodOp::Kind::kStatusPatch).size() == 1);
  ApplyStep(pod, s);
  CHECK(State(pod) == "PreparingUpdate");
  CHECK(Gate(pod) == false);

  pod_update::Step early =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(10));
  CHECK(early.ops.empty());
  // The gate's write is stored after its stamp (gate-sent, milliseconds): 0.5 s of slack keeps
  // the drain >= 30 s.
  CHECK(early.wakeAfter == seconds(20) + milliseconds(500));
  CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(30)).ops.empty());

  pod_update::Step late = pod_update::Decide(env.t, env.rules, AsPod(pod), false,
                                             T0() + seconds(30) + milliseconds(500));
  CHECK(Reasons(late).empty());  // an ordinary step: no Event

  SUBCASE("the grace counts from the gate going False, not from an earlier hook wait") {
    json::Document p = env.NewPod("web-c");
    Enter(p, keys::kStatePreparingUpdate, T0() - seconds(600));  // held by a hook for 10 min
    pod_update::Step g = pod_update::Decide(env.t, env.rules, AsPod(p), false, T0());
    REQUIRE(Ops(g, PodOp::Kind::kStatusPatch).size() == 1);  // gate False now
    CHECK(Ops(g, PodOp::Kind::kPatch).empty());
    ApplyStep(p, g);
    pod_update::Step wait =
        pod_update::Decide(env.t, env.rules, AsPod(p), false, T0() + seconds(5));
    CHECK(wait.ops.empty());
    CHECK(wait.wakeAfter == seconds(25) + milliseconds(500));
  }
}

TEST_CASE("DrainEnd: from the gate-sent record of the gate's own write, else whole seconds") {
  const Clock::time_point sent = T0() + milliseconds(730);  // the gate write, as it was sent
  struct Case {
    const char* what;
    std::optional<std::string> gateSent;    // the annotation; nullopt: absent
    std::optional<std::string> stateStamp;  // state-timestamp; nullopt: absent
    long long grace;
    Clock::time_point want;
  };
  const Case cases[] = {
      {"the record of the same write: grace + 0.5 s after it", rfc3339::FormatMillis(sent),
       std::nullopt, 3, sent + seconds(3) + milliseconds(500)},
      {"no record (a loop before it): the whole second + 1.5 s", std::nullopt, std::nullopt, 3,
       T0() + seconds(3) + milliseconds(1500)},
      {"a record of another write (another second): the whole second + 1.5 s",
       rfc3339::FormatMillis(sent - seconds(40)), std::nullopt, 3,
       T0() + seconds(3) + milliseconds(1500)},
      {"an unreadable record: the whole second + 1.5 s", std::string("soon"), std::nullopt, 3,
       T0() + seconds(3) + milliseconds(1500)},
      {"a later state timestamp (whole seconds) wins with its 1.5 s", rfc3339::FormatMillis(sent),
       rfc3339::Format(T0() + seconds(1)), 3, T0() + seconds(1) + seconds(3) + milliseconds(1500)},
      {"the same second's state timestamp: its 1.5 s is the later end", rfc3339::FormatMillis(sent),
       rfc3339::Format(T0()), 3, T0() + seconds(3) + milliseconds(1500)},
      {"an earlier state timestamp: the record's end", rfc3339::FormatMillis(sent),
       rfc3339::Format(T0() - seconds(600)), 3, sent + seconds(3) + milliseconds(500)},
      {"no grace: the later anchor, no slack", rfc3339::FormatMillis(sent), std::nullopt, 0, sent},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    json::Document pod =
        Parse(R"({"metadata":{"name":"web-a","annotations":{}},)"
              R"("spec":{"readinessGates":[{"conditionType":"inplace-webhook.io/ready"}]},)"
              R"("status":{}})");
    SetCondition(pod, keys::kReadyCondition, "False", rfc3339::Format(sent));
    json::Value& annotations =
        *json::FindMutable(json::FindMutable(&pod, "metadata"), "annotations");
    if (c.gateSent) {
      json::SetString(annotations, keys::kGateSentAnnotation, *c.gateSent, pod.GetAllocator());
    }
    if (c.stateStamp) {
      json::SetString(annotations, keys::kStateTimestampAnnotation, *c.stateStamp,
                      pod.GetAllocator());
    }
    CHECK(pod_update::DrainEnd(AsPod(pod), c.grace, T0() + seconds(100)) == c.want);
  }
}

TEST_CASE("a pod's state is one of four, read from its label; anything else reads as Normal") {
  using pod_update::PodState;
  for (PodState s : pod_update::kAllPodStates) {
    CHECK(pod_update::ParseState(pod_update::StateName(s)) == s);
  }
  CHECK(pod_update::StateName(PodState::kPreparingUpdate) == "PreparingUpdate");
  CHECK_FALSE(pod_update::ParseState("updating").has_value());  // case matters, as in Kruise
  CHECK_FALSE(pod_update::ParseState("").has_value());
  for (auto [label, want] : std::vector<std::pair<const char*, PodState>>{
           {R"({"inplace-webhook.io/state":"Updated"})", PodState::kUpdated},
           {R"({"inplace-webhook.io/state":"Paused"})", PodState::kNormal},
           {R"({"app":"web"})", PodState::kNormal}}) {
    json::Document pod = Parse(std::string(R"({"metadata":{"labels":)") + label + "}}");
    CHECK(pod_update::StateOf(AsPod(pod)) == want);
  }
}

TEST_CASE("every wait has its own name, and kAllWaits lists each once") {
  std::set<std::string_view> names;
  for (pod_update::PodWait::On on : pod_update::kAllWaits) {
    CHECK_FALSE(pod_update::WaitName(on).empty());
    names.insert(pod_update::WaitName(on));
  }
  CHECK(names.size() == pod_update::kAllWaits.size());
  CHECK(pod_update::WaitName(pod_update::PodWait::On::kNothing).empty());
}

TEST_CASE("Decide says what the pod waits on, in one vocabulary, through a whole update") {
  constexpr std::string_view kHooks =
      R"({"preUpdate":{"labelsHandler":{"lb":"on"},"timeoutSeconds":300},)"
      R"("postUpdate":{"labelsHandler":{"lb":"up"}}})";
  Env env(true, kHooks, R"({"annotations":["config/*"],"gracePeriodSeconds":5})");
  json::Document pod = env.NewPod();
  SetLabel(pod, "lb", "on");
  using On = pod_update::PodWait::On;
  // Decides at `at`, checks the wait and its words, applies the step.
  auto pass = [&](Clock::time_point at, bool mayStart, On on, const std::string& words) {
    pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), mayStart, at);
    CHECK(s.wait.on == on);
    CHECK(pod_update::Describe(s.wait, at) == words);
    CHECK(pod_update::WaitName(s.wait.on).empty() == (on == On::kNothing));
    ApplyStep(pod, s);
    return s;
  };
  pass(T0(), false, On::kTurn, "its turn");
  pass(T0(), true, On::kNothing, "");  // PreparingUpdate: the state changes, nothing waits yet
  REQUIRE(State(pod) == "PreparingUpdate");
  pod_update::Step held =
      pass(T0() + seconds(10), false, On::kPreHook, "pre-update hook: label lb=on");
  CHECK(held.wait.since == T0());
  CHECK(held.wait.until == T0() + seconds(300));
  pass(T0() + seconds(301), false, On::kPreHook,
       "pre-update hook: label lb=on (past its 300s timeout)");
  SetLabel(pod, "lb", std::nullopt);  // released
  pass(T0() + seconds(400), false, On::kGateFalse, "drain: readiness gate going False");
  REQUIRE(Gate(pod) == false);
  // The drain counts from the gate's change (its gate-sent record, 0.5 s of slack), not the
  // state's.
  pod_update::Step drain = pass(T0() + seconds(402), false, On::kDrain, "drain grace 5s (4s left)");
  CHECK(drain.wait.until == T0() + seconds(405) + milliseconds(500));
  pass(T0() + seconds(407), false, On::kNothing, "");  // the pod write
  REQUIRE(State(pod) == "Updating");
  pass(T0() + seconds(408), false, On::kRestart, "containers restarting: app");
  Restart(pod, "app", "nginx:1.27");
  pass(T0() + seconds(420), false, On::kNothing, "");
  REQUIRE(State(pod) == "Updated");
  pass(T0() + seconds(421), false, On::kPostHook, "post-update hook: label lb=up");
  SetLabel(pod, "lb", "up");
  pass(T0() + seconds(430), false, On::kNothing, "");
  CHECK(State(pod) == "Normal");
  pass(T0() + seconds(431), false, On::kNothing, "");  // at the target: nothing to wait for
}

TEST_CASE("Updating → Normal once every changed container runs its new image; gate True") {
  Env env(true, "", kNoDrain);
  json::Document pod = env.NewPod();
  SetCondition(pod, keys::kReadyCondition, "False");  // as if drained: the write's return sets it
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  REQUIRE(pod_update::LabelStateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
  CHECK_FALSE(pod_update::ReadUpdateState(AsPod(pod))->completesOnReport);

  pod_update::Step wait =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(5));
  CHECK(wait.ops.empty());
  CHECK(wait.wakeAfter == seconds(595));  // the default Updating timeout

  Restart(pod, "app", "nginx:1.27");
  pod_update::Step done =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(42));
  CHECK(done.completed);
  CHECK(done.updateSeconds == doctest::Approx(42));
  CHECK(Reasons(done).empty());  // an ordinary step: no Event
  ApplyStep(pod, done);
  CHECK(State(pod) == "Normal");
  CHECK(Gate(pod) == true);
  CHECK(pod_update::AtTarget(env.t, AsPod(pod)));
}

TEST_CASE(
    "Updating → Updated while the post-update hook is not fully present, → Normal when it is") {
  constexpr std::string_view kHook =
      R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on","registered":"yes"},"timeoutSeconds":60}})";
  Env env(true, kHook, kNoDrain);
  json::Document pod = env.NewPod();
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));  // not armed: write
  REQUIRE(State(pod) == "Updating");
  Restart(pod, "app", "nginx:1.27");

  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(5));
  ApplyStep(pod, s);
  CHECK(State(pod) == "Updated");
  CHECK(s.wakeAfter == seconds(60));

  SetLabel(pod, "lb", "on");  // one of two handlers back: not enough (kruise#528)
  s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(6));
  CHECK(Ops(s, PodOp::Kind::kPatch).empty());

  SetLabel(pod, "registered", "yes");
  s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(7));
  ApplyStep(pod, s);
  CHECK(State(pod) == "Normal");
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
}

TEST_CASE("an empty post-update hook counts as all present") {
  Env env(false, R"({"postUpdate":{}})");
  json::Document pod = env.NewPod();
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  Restart(pod, "app", "nginx:1.27");
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1)));
  CHECK(State(pod) == "Normal");

  SUBCASE("and a pod left in Updated moves on") {
    Enter(pod, keys::kStateUpdated, T0());
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(2)));
    CHECK(State(pod) == "Normal");
  }
}

TEST_CASE("completion: imageID changed, or containerID changed and the image matches") {
  json::Document pod = Parse(R"({"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]},
    "status":{"containerStatuses":[{"name":"app","image":"docker.io/library/nginx:1.25",
    "imageID":"docker.io/library/nginx@sha256:aaa","containerID":"containerd://1"}]}})");
  pod_update::UpdateState st;
  st.lastContainerStatuses["app"] = {"docker.io/library/nginx@sha256:aaa", "containerd://1", 0};

  struct Case {
    const char* what;
    std::string image, imageID, containerID;
    bool done;
  };
  const Case cases[] = {
      {"nothing restarted yet", "docker.io/library/nginx:1.25",
       "docker.io/library/nginx@sha256:aaa", "containerd://1", false},
      {"new imageID", "docker.io/library/nginx:1.27", "docker.io/library/nginx@sha256:bbb",
       "containerd://2", true},
      {"retag: same imageID, new container, normalised image matches",
       "docker.io/library/nginx:1.27", "docker.io/library/nginx@sha256:aaa", "containerd://2",
       true},
      {"imageID and containerID unchanged even if the image name matches",
       "docker.io/library/nginx:1.27", "docker.io/library/nginx@sha256:aaa", "containerd://1",
       false},
      {"a new container on the old bits that replaced nothing the kubelet counted",
       "docker.io/library/nginx:1.25", "docker.io/library/nginx@sha256:aaa", "containerd://3",
       false},
      {"same digest in another imageID format", "docker.io/library/nginx:1.25", "sha256:aaa",
       "containerd://1", false},
      {"waiting for the pull: empty imageID and containerID", "nginx:1.27", "", "", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    SetContainerStatus(pod, "app", c.image, c.imageID, c.containerID);
    CHECK(pod_update::UpdateCompleted(AsPod(pod), st) == c.done);
  }
  SUBCASE("a recorded container without a status is not done") {
    st.lastContainerStatuses["gone"] = {"x", "y", 0};
    SetContainerStatus(pod, "app", "nginx:1.27", "nginx@sha256:bbb", "containerd://2");
    CHECK_FALSE(pod_update::UpdateCompleted(AsPod(pod), st));
  }
  SUBCASE("no recorded container: a metadata-only update is done at once") {
    CHECK(pod_update::UpdateCompleted(AsPod(pod), pod_update::UpdateState{}));
  }
}

TEST_CASE("completion from what containerd and the kubelet report (DESIGN.md 8.2)") {
  // containerd reports status.image as the image record's first tag and imageID as its first repo
  // digest (or the config digest of an imported image), never the reference in the spec.
  constexpr std::string_view kID =
      "sha256:1111111111111111111111111111111111111111111111111111111111111111";
  constexpr std::string_view kOther =
      "sha256:2222222222222222222222222222222222222222222222222222222222222222";
  struct Reported {  // one container's status as the kubelet reports it
    std::string image, imageID, containerID;
    long long restartCount;
    std::string replaced;  // lastState.terminated.containerID, "" = none
    std::string startedAt;
  };
  struct Case {
    const char* what;
    std::string specImage;
    pod_update::ContainerRecord recorded;  // at the write
    long long generation, observed;        // 0: not reported (kubelets before 1.34)
    Reported now;
    bool done;
  };
  const std::string id(kID), other(kOther);
  const std::string v2 = "localhost/httpd-demo:v2", v201 = "localhost/httpd-demo:v2.0.1";
  const std::string pinned = "localhost/httpd-demo:v2@" + id;
  // The write was recorded at 10:00:00 by the loop's clock; the node's clock may differ.
  const std::string at = "2026-05-01T10:00:00Z", after = "2026-05-01T10:00:02Z",
                    behind = "2026-05-01T09:55:02Z", ahead = "2026-05-01T10:05:02Z",
                    before = "2026-05-01T09:59:59Z";
  const pod_update::ContainerRecord ran{id, "containerd://old", 3};  // running at the write
  const pod_update::ContainerRecord notStarted{"", "", 0};
  const Reported restarted{v2, id, "containerd://new", 4, "containerd://old", after};
  auto with = [](Reported r, auto change) {
    change(r);
    return r;
  };
  const Case cases[] = {
      // Kubelets that report observedGeneration (1.34+).
      {"retag v2 -> v2.0.1, same digest: restarted on the written spec", v201, ran, 2, 2, restarted,
       true},
      {"retag, the kubelet has not seen the write yet (observedGeneration behind)", v201, ran, 2, 1,
       restarted, false},
      {"retag, fresh status but the old container still runs (the kill comes next)",
       v201,
       ran,
       2,
       2,
       {v2, id, "containerd://old", 3, "", before},
       false},
      {"tag@digest of the running image: pinned digest matches", pinned, ran, 2, 2, restarted,
       true},
      {"retag, the kubelet names the replaced container but its count was reset", v201, ran, 2, 2,
       with(restarted, [](Reported& r) { r.restartCount = 0; }), true},
      {"retag, a new container that replaced nothing the kubelet reports", v201, ran, 2, 2,
       with(restarted,
            [](Reported& r) {
              r.restartCount = 3;
              r.replaced = "containerd://older";
            }),
       false},
      {"node 5 min behind the loop: done all the same", v201, ran, 2, 2,
       with(restarted, [&](Reported& r) { r.startedAt = behind; }), true},
      {"node 5 min ahead of the loop: done all the same", v201, ran, 2, 2,
       with(restarted, [&](Reported& r) { r.startedAt = ahead; }), true},
      {"node 5 min behind, the kubelet has not seen the write: not done", v201, ran, 2, 1,
       with(restarted, [&](Reported& r) { r.startedAt = behind; }), false},
      // Kubelets without observedGeneration (1.30-1.33).
      {"retag without observedGeneration: the restart that replaced the recorded container", v201,
       ran, 0, 0, restarted, true},
      {"retag without observedGeneration, node 5 min behind", v201, ran, 0, 0,
       with(restarted, [&](Reported& r) { r.startedAt = behind; }), true},
      {"retag without observedGeneration, only the restart count tells", v201, ran, 0, 0,
       with(restarted, [](Reported& r) { r.replaced = ""; }), true},
      {"retag without observedGeneration, the old container still runs",
       v201,
       ran,
       0,
       0,
       {v2, id, "containerd://old", 3, "", before},
       false},
      {"retag without observedGeneration, a restart the record already counts", v201, ran, 0, 0,
       with(restarted,
            [](Reported& r) {
              r.restartCount = 3;
              r.replaced = "";
            }),
       false},
      {"tag@digest without observedGeneration: pinned digest matches", pinned, ran, 0, 0, restarted,
       true},
      {"a different image without observedGeneration: imageID changed", v201, ran, 0, 0,
       with(restarted, [&](Reported& r) { r.imageID = other; }), true},
      {"a different image, node 5 min behind", v201, ran, 0, 0,
       with(restarted,
            [&](Reported& r) {
              r.imageID = other;
              r.startedAt = behind;
            }),
       true},
      {"the spec's image by name, node 5 min behind", v201, ran, 0, 0,
       with(restarted,
            [&](Reported& r) {
              r.image = v201;
              r.imageID = other;
              r.startedAt = behind;
            }),
       true},
      {"the spec's image by name, but the old container still runs",
       v201,
       ran,
       0,
       0,
       {v201, other, "containerd://old", 3, "", after},
       false},
      // A container that had not started at the write may have started from the old spec.
      {"not started at the write, now runs the old spec's image under another name",
       v201,
       notStarted,
       2,
       2,
       {v2, id, "containerd://first", 0, "", after},
       false},
      {"not started at the write, now runs the spec's image by name",
       v201,
       notStarted,
       2,
       2,
       {v201, id, "containerd://first", 0, "", after},
       true},
      {"not started at the write, imageID appears (no observedGeneration): not by itself",
       v201,
       notStarted,
       0,
       0,
       {v2, id, "containerd://first", 1, "", after},
       false},
      {"waiting for the pull: no containerID yet",
       v201,
       ran,
       0,
       0,
       {v201, "", "", 3, "", ""},
       false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string meta = c.generation ? R"("generation":)" + std::to_string(c.generation) : "";
    std::string observed =
        c.observed ? R"("observedGeneration":)" + std::to_string(c.observed) + "," : "";
    std::string last = c.now.replaced.empty()
                           ? "{}"
                           : R"({"terminated":{"containerID":")" + c.now.replaced + R"("}})";
    std::string state = c.now.startedAt.empty()
                            ? R"({"waiting":{"reason":"ContainerCreating"}})"
                            : R"({"running":{"startedAt":")" + c.now.startedAt + R"("}})";
    json::Document pod =
        Parse(R"({"metadata":{)" + meta + R"(},"spec":{"containers":[{"name":"app","image":")" +
              c.specImage + R"("}]},"status":{)" + observed +
              R"("containerStatuses":[{"name":"app","image":")" + c.now.image + R"(","imageID":")" +
              c.now.imageID + R"(","containerID":")" + c.now.containerID + R"(","restartCount":)" +
              std::to_string(c.now.restartCount) + R"(,"lastState":)" + last + R"(,"state":)" +
              state + "}]}}");
    pod_update::UpdateState st;
    st.updateTimestamp = at;
    st.lastContainerStatuses["app"] = c.recorded;
    CHECK(pod_update::UpdateCompleted(AsPod(pod), st) == c.done);
  }
}

TEST_CASE("Updating → Normal on a node whose clock is 5 minutes behind the loop's") {
  // The pod write is recorded by the loop's clock; the kubelet stamps the new container's
  // startedAt by the node's, 5 minutes earlier. Completion reads only the kubelet's report.
  Env env(false, "", kNoDrain);
  json::Document pod = env.NewPod();
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  REQUIRE(State(pod) == "Updating");
  auto& a = pod.GetAllocator();
  for (auto& st : pod["status"]["containerStatuses"].GetArray()) {
    if (json::StringOr(&st, "name") != "app") continue;
    json::SetString(st, "containerID", "containerd://web-a-app-2", a);
    json::Set(st, "restartCount", json::Value(1), a);
    json::Set(st, "lastState",
              json::Value(Parse(R"({"terminated":{"containerID":"containerd://web-a-app"}})"), a),
              a);
    json::Set(
        st, "state",
        json::Value(Parse(R"({"running":{"startedAt":")" + Ts(T0() - seconds(295)) + R"("}})"), a),
        a);
  }
  // Labelled Normal at the write (nothing returns it): done on the kubelet's report, no write.
  SUBCASE("a retag: the same bits, in the container that replaced the recorded one") {
    CHECK(State(pod) == "Normal");
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(5)).ops.empty());
  }
  SUBCASE("the new image by name") {
    SetContainerStatus(pod, "app", "docker.io/library/nginx:1.27",
                       "docker.io/library/nginx@sha256:new", "containerd://web-a-app-2");
    CHECK(State(pod) == "Normal");
  }
}

TEST_CASE("hook timeouts are reported once, the pod stays where it is") {
  constexpr std::string_view kHook =
      R"({"preUpdate":{"labelsHandler":{"lb":"on"},"timeoutSeconds":60},)"
      R"("postUpdate":{"labelsHandler":{"lb":"on"},"timeoutSeconds":120}})";
  Env env(false, kHook);

  SUBCASE("pre-update hook") {
    json::Document pod = env.NewPod();
    SetLabel(pod, "lb", "on");
    Enter(pod, keys::kStatePreparingUpdate, T0());
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(59)).ops.empty());
    pod_update::Step s =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(61));
    CHECK(s.timedOut);
    REQUIRE(s.ops.size() == 2);
    CHECK(s.ops[0].kind == PodOp::Kind::kEvent);  // Event first: the marker only after it
    CHECK(s.ops[0].event.reason == "HookTimeout");
    CHECK(s.ops[0].event.type == "Warning");
    CHECK(s.ops[0].event.onDeployment);
    CHECK_FALSE(s.ops[0].event.dedupKey.empty());
    CHECK(s.ops[0].event.message.find("label lb=on") != std::string::npos);
    CHECK(s.ops[1].kind == PodOp::Kind::kPatch);
    ApplyStep(pod, s);
    CHECK(State(pod) == "PreparingUpdate");  // never skipped
    CHECK(Annotation(pod, keys::kHookTimeoutAnnotation) == "PreparingUpdate@" + Ts(T0()));
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(600)).ops.empty());

    // A later wait in another state is reported again, and the marker is cleared on the way.
    SetLabel(pod, "lb", std::nullopt);
    pod_update::Step w =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(601));
    CHECK(w.ops[0].body["metadata"]["annotations"][keys::kHookTimeoutAnnotation.data()].IsNull());
  }
  SUBCASE("post-update hook") {
    json::Document pod = env.NewPod();
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
    Restart(pod, "app", "nginx:1.27");
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0()));
    REQUIRE(State(pod) == "Updated");
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(119)).ops.empty());
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(121)).timedOut);
  }
  SUBCASE("Updating: the largest hook timeout") {
    json::Document pod = env.NewPod();
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
    REQUIRE(State(pod) == "Updating");
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(119)).ops.empty());
    pod_update::Step s =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(121));
    CHECK(s.timedOut);
    CHECK(s.ops[0].event.message.find("kubelet") != std::string::npos);
  }
  SUBCASE("Updating without any hook timeout: 600 s") {
    Env plain(false);
    json::Document pod = plain.NewPod();
    ApplyStep(pod, pod_update::Decide(plain.t, plain.rules, AsPod(pod), true, T0()));
    CHECK_FALSE(
        pod_update::Decide(plain.t, plain.rules, AsPod(pod), false, T0() + seconds(599)).timedOut);
    CHECK(
        pod_update::Decide(plain.t, plain.rules, AsPod(pod), false, T0() + seconds(600)).timedOut);
  }
  SUBCASE("a hook without timeoutSeconds waits for ever") {
    Env forever(false, R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})");
    json::Document pod = forever.NewPod();
    SetLabel(pod, "lb", "on");
    Enter(pod, keys::kStatePreparingUpdate, T0());
    pod_update::Step s =
        pod_update::Decide(forever.t, forever.rules, AsPod(pod), false, T0() + seconds(100000));
    CHECK(s.ops.empty());
    CHECK_FALSE(s.wakeAfter.has_value());
  }
}

TEST_CASE("re-target: a pod mid-update goes through again to the newest template") {
  Env env(false);
  json::Document pod = env.NewPod();
  ApplyStep(pod,
            pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));  // at T2 = env.target
  REQUIRE(State(pod) == "Updating");

  // T3: version back to v1, an image change of its own; `from` stays the base template.
  std::string t3 =
      Template({{"app", "web"}, {"version", "v1"}, {"new", "x"}},
               {{"app", "nginx:1.28"}, {"sidecar", "busybox:1.36"}}, {{"config/hash", "b"}});
  auto target3 =
      pod_update::MakeTarget(test::AsTemplate(Parse(env.base)), test::AsTemplate(Parse(t3)),
                             env.settings.policy, Hash(env.base), Hash(t3));
  REQUIRE(target3.ok());
  CHECK_FALSE(pod_update::AtTarget(*target3, AsPod(pod)));

  pod_update::Step s =
      pod_update::Decide(*target3, env.rules, AsPod(pod), false, T0() + seconds(3));
  CHECK(Reasons(s).empty());  // an ordinary step: no Event
  ApplyStep(pod, s);
  CHECK(State(pod) == "Updating");
  CHECK(Label(pod, "version") == "v1");  // put back although T3 does not change it vs. the base
  CHECK(pod_update::ReadUpdateState(AsPod(pod))->revision == target3->to);
  // The baseline of the restart still pending from the first write is kept.
  CHECK(pod_update::ReadUpdateState(AsPod(pod))->lastContainerStatuses.at("app").imageID ==
        "nginx:1.25@sha256:old-app");

  SUBCASE("a re-target that asks nothing more only re-stamps the revision") {
    std::string t4 = t3;
    auto target4 =
        pod_update::MakeTarget(test::AsTemplate(Parse(env.base)), test::AsTemplate(Parse(t4)),
                               env.settings.policy, Hash(env.base), "t4hash");
    REQUIRE(target4.ok());
    pod_update::Step r =
        pod_update::Decide(*target4, env.rules, AsPod(pod), false, T0() + seconds(4));
    REQUIRE(r.ops.size() == 1);
    ApplyStep(pod, r);
    CHECK(State(pod) == "Updating");
    CHECK(pod_update::ReadUpdateState(AsPod(pod))->revision == "t4hash");
  }
  SUBCASE("a pod in PreparingUpdate re-targeted back to its own template is released") {
    json::Document waiting = env.NewPod("web-w");
    Enter(waiting, keys::kStatePreparingUpdate, T0());
    auto back =
        pod_update::MakeTarget(test::AsTemplate(Parse(env.base)), test::AsTemplate(Parse(env.base)),
                               env.settings.policy, Hash(env.base), Hash(env.base));
    REQUIRE(back.ok());
    pod_update::Step b = pod_update::Decide(*back, env.rules, AsPod(waiting), false, T0());
    ApplyStep(waiting, b);
    CHECK(State(waiting) == "Normal");
    CHECK_FALSE(b.completed);
  }
}

TEST_CASE("a pod in Updated targeted by a newer template waits in the pre-update hook again") {
  constexpr std::string_view kHook = R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})";
  Env env(false, kHook);
  json::Document pod = env.NewPod();
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  Restart(pod, "app", "nginx:1.27");
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0()));
  REQUIRE(State(pod) == "Updated");

  std::string t3 =
      Template({{"app", "web"}, {"version", "v3"}, {"new", "x"}},
               {{"app", "nginx:1.27"}, {"sidecar", "busybox:1.36"}}, {{"config/hash", "b"}});
  auto target3 =
      pod_update::MakeTarget(test::AsTemplate(Parse(env.base)), test::AsTemplate(Parse(t3)),
                             env.settings.policy, Hash(env.base), Hash(t3));
  REQUIRE(target3.ok());
  SetLabel(pod, "lb", "on");  // re-registered meanwhile: the pre-update hook holds it again
  ApplyStep(pod, pod_update::Decide(*target3, env.rules, AsPod(pod), false, T0() + seconds(1)));
  CHECK(State(pod) == "PreparingUpdate");
}

TEST_CASE("GatePatch writes only the gate, never the kubelet's Ready") {
  json::Document pod =
      Parse(R"({"spec":{"readinessGates":[{"conditionType":"inplace-webhook.io/ready"}]},
    "status":{"conditions":[{"type":"ContainersReady","status":"True"},{"type":"Ready","status":"True"},
    {"type":"inplace-webhook.io/ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}]}})");
  struct Case {
    bool value;
    const char* status;
    bool transition;  // lastTransitionTime is now, not kept
  };
  for (const Case& c : {Case{false, "False", true}, Case{true, "True", false}}) {
    CAPTURE(c.value);
    json::Document p = pod_update::GatePatch(AsPod(pod), c.value, T0());
    const json::Value& conditions = p["status"]["conditions"];
    REQUIRE(conditions.Size() == 1);
    CHECK(json::StringOr(&conditions[0], "type") == keys::kReadyCondition);
    CHECK(json::StringOr(&conditions[0], "status") == c.status);
    CHECK((json::StringOr(&conditions[0], "lastTransitionTime") == Ts(T0())) == c.transition);
    CHECK(p["status"].MemberCount() == 1);
  }
}

TEST_CASE("update-state round-trips and reads Kruise's shape") {
  pod_update::UpdateState s;
  s.revision = "abc";
  s.updateTimestamp = "2026-03-01T12:00:00Z";
  s.lastContainerStatuses["app"] = {"img@sha256:1", "containerd://x", 3};
  s.changedLabels = {"version"};
  auto back = pod_update::ParseUpdateState(pod_update::SerializeUpdateState(s));
  REQUIRE(back.has_value());
  CHECK(*back == s);
  // The loop's pod watch skips records by text before parsing: exact for what we write.
  CHECK_FALSE(pod_update::MayCompleteOnReport(pod_update::SerializeUpdateState(s)));
  pod_update::UpdateState flagged = s;
  flagged.completesOnReport = true;
  CHECK(pod_update::MayCompleteOnReport(pod_update::SerializeUpdateState(flagged)));

  auto kruise = pod_update::ParseUpdateState(
      R"({"revision":"rev_new","updateTimestamp":"2022-03-22T09:06:55Z","lastContainerStatuses":null,)"
      R"("updateImages":true,"containerBatchesRecord":[]})");
  REQUIRE(kruise.has_value());
  CHECK(kruise->revision == "rev_new");
  CHECK(kruise->lastContainerStatuses.empty());
  CHECK_FALSE(pod_update::ParseUpdateState("not json").has_value());
  CHECK_FALSE(pod_update::ParseUpdateState(R"({"updateTimestamp":"x"})").has_value());
}

TEST_CASE("rfc3339::Parse reads RFC 3339") {
  CHECK(rfc3339::Parse("2026-03-01T12:00:00Z") == T0());
  CHECK(rfc3339::Parse("2026-03-01T13:00:00+01:00") == T0());
  CHECK(rfc3339::Parse("2026-03-01T12:00:00.500000Z") == T0() + std::chrono::milliseconds(500));
  CHECK_FALSE(rfc3339::Parse("2026-03-01 12:00:00").has_value());
  CHECK_FALSE(rfc3339::Parse("2026-13-01T12:00:00Z").has_value());
  CHECK_FALSE(rfc3339::Parse("").has_value());
  CHECK_FALSE(rfc3339::Parse("2026-03-01T12:00:00").has_value());
  // Only years the clock holds: a forged far-future time is refused, not wrapped into the past.
  CHECK(rfc3339::Parse("2261-12-31T23:59:59+00:00").has_value());
  CHECK(rfc3339::Parse("1678-01-01T00:00:00Z").has_value());
  CHECK_FALSE(rfc3339::Parse("2262-04-12T00:00:00Z").has_value());
  CHECK_FALSE(rfc3339::Parse("9999-12-31T23:59:59Z").has_value());
  CHECK_FALSE(rfc3339::Parse("0001-01-01T00:00:00Z").has_value());
}

TEST_CASE("Release: back to Normal with the gate True, from any state the update left") {
  struct Case {
    const char* what;
    bool gate;
    std::string_view state;  // "" stays Normal
    bool gateFalse;          // the gate set False first
    size_t patches, statusPatches;
  };
  const Case cases[] = {
      {"Normal, gate True: nothing", true, "", false, 0, 0},
      {"Normal, gate False (an update that ended between its writes)", true, "", true, 0, 1},
      // (the label goes back with the gate: one pods/status write)
      {"PreparingUpdate, draining with the gate False", true, "PreparingUpdate", true, 0, 1},
      {"Updating, no gate", false, "Updating", false, 1, 0},
      {"Updated, held by its post-update hook", true, "Updated", false, 1, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    Env env(c.gate, "", kPolicyConfig);
    json::Document pod = env.NewPod();
    if (c.gate)
      ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0()));  // gate True
    if (!c.state.empty()) Enter(pod, c.state, T0());
    if (c.gateFalse) {
      json::Document g = pod_update::GatePatch(AsPod(pod), false, T0());
      pod_update::Step s;
      s.ops.push_back(PodOp{PodOp::Kind::kStatusPatch, std::move(g), {}});
      ApplyStep(pod, s);
      REQUIRE(Gate(pod) == false);
    }
    pod_update::Step step = pod_update::Release(AsPod(pod), T0() + seconds(5));
    CHECK(Ops(step, PodOp::Kind::kPatch).size() == c.patches);
    CHECK(Ops(step, PodOp::Kind::kStatusPatch).size() == c.statusPatches);
    ApplyStep(pod, step);
    CHECK(State(pod) == "Normal");
    if (c.gate) CHECK(Gate(pod) == true);
    CHECK(
        pod_update::Release(AsPod(pod), T0() + seconds(6)).ops.empty());  // nothing left to release
  }
}

namespace {

constexpr std::string_view kDigestA =
    "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

// The kubelet's report of container `name`: running (a new container replacing the last one) or
// waiting with `reason`.
void Report(json::Document& pod, std::string_view name, std::string_view image,
            std::string_view imageID, std::string_view containerID, std::string_view waiting = "") {
  SetContainerStatus(pod, name, image, imageID, containerID);
  auto& a = pod.GetAllocator();
  for (auto& c : pod["status"]["containerStatuses"].GetArray()) {
    if (json::StringOr(&c, "name") != name) continue;
    json::Document st =
        Parse(waiting.empty() ? R"({"running":{"startedAt":"2026-03-01T12:00:01Z"}})"
                              : R"({"waiting":{"reason":")" + std::string(waiting) +
                                    R"(","message":"failed to pull"}})");
    json::Set(c, "state", json::Value(st, a), a);
  }
}

std::string SpecImage(const json::Value& pod, std::string_view name) {
  for (const auto& c : pod["spec"]["containers"].GetArray()) {
    if (json::StringOr(&c, "name") == name) return std::string(json::StringOr(&c, "image"));
  }
  return "";
}

}  // namespace

TEST_CASE(
    "another webhook rewrites the pod's image: the stored reference is the target, and the "
    "pod is written a bounded number of times") {
  // A mutating webhook on pods (a registry mirror, a digest pin) rewrites every image the loop
  // writes; the template keeps the image it names. Each case plays the loop pass by pass (2 s
  // apart) with that webhook and a kubelet, from Normal, and counts the loop's pod patches (not
  // pods/status): 1 without a rewrite (the write; the drain starts with the gate write alone and
  // the return to Normal goes with the gate's return to True, or without a gate is read from the
  // kubelet's report), one more with one (the
  // update-state records the stored image). The code before wrote
  // the image again at every pass and never completed.
  const std::string digestA(kDigestA);
  const std::string digestB = "sha256:" + std::string(64, 'b');
  const std::string mirrored = "mirror.local/nginx:1.27";
  const std::string pinned = "nginx:1.27@" + digestA;
  // The other webhook, on every pod UPDATE.
  enum class Admission { kNone, kMirror, kPin };
  auto admit = [&](Admission a, const std::string& image) -> std::string {
    if (a == Admission::kMirror && image.rfind("nginx:", 0) == 0) return "mirror.local/" + image;
    if (a == Admission::kPin && image == "nginx:1.27") return pinned;
    return image;
  };
  struct Kubelet {  // what the kubelet reports once the spec's image changed
    std::string image, imageID, waiting;
  };
  struct Case {
    const char* what;
    Admission admission;
    std::string podImage;  // the pod's spec image before
    Kubelet kubelet;
    bool done;
    int podPatches;       // exactly, over 12 passes (no Normal write while it waits)
    std::string got;      // recorded in the update-state ("" = nothing rewritten)
    std::string trouble;  // a PodImageNotRunning Event contains this ("" = none)
  };
  const Case cases[] = {
      {"no other webhook",
       Admission::kNone,
       "nginx:1.25",
       {"docker.io/library/nginx:1.27", "docker.io/library/nginx@" + digestB, ""},
       true,
       1,
       "",
       ""},
      {"a registry mirror",
       Admission::kMirror,
       "mirror.local/nginx:1.25",
       {mirrored, "mirror.local/nginx@" + digestB, ""},
       true,
       2,
       mirrored,
       ""},
      {"a digest pin the kubelet runs",
       Admission::kPin,
       "nginx:1.25",
       {"docker.io/library/nginx:1.27", "docker.io/library/nginx@" + digestA, ""},
       true,
       2,
       pinned,
       ""},
      {"a digest pin, the kubelet reports other bits: never done by imageID alone",
       Admission::kPin,
       "nginx:1.25",
       {"docker.io/library/nginx:1.27", "docker.io/library/nginx@" + digestB, ""},
       false,
       2,
       pinned,
       ""},
      {"a mirror the kubelet cannot pull: it waits, naming the pod, asked and got",
       Admission::kMirror,
       "mirror.local/nginx:1.25",
       {"", "", "ImagePullBackOff"},
       false,
       2,
       mirrored,
       "pod web-a container app: asked for image nginx:1.27, the API server stored "
       "mirror.local/nginx:1.27 (rewritten by admission), which the kubelet cannot pull "
       "(ImagePullBackOff)"},
      {"between pull retries the kubelet says CrashLoopBackOff: named all the same",
       Admission::kMirror,
       "mirror.local/nginx:1.25",
       {"", "", "CrashLoopBackOff"},
       false,
       2,
       mirrored,
       "pod web-a container app: asked for image nginx:1.27, the API server stored "
       "mirror.local/nginx:1.27 (rewritten by admission), which the kubelet has not started "
       "(CrashLoopBackOff; the pod's Events say why)"},
      {"still being created: no trouble",
       Admission::kMirror,
       "mirror.local/nginx:1.25",
       {"", "", "ContainerCreating"},
       false,
       2,
       mirrored,
       ""},
      {"an image the kubelet cannot pull, not rewritten",
       Admission::kNone,
       "nginx:1.25",
       {"", "", "ErrImagePull"},
       false,
       1,
       "",
       "pod web-a container app: the kubelet cannot pull image nginx:1.27 (ErrImagePull)"},
      {"rewritten to the image the pod already runs (a pod made from the target): no restart",
       Admission::kMirror,
       mirrored,
       {"", "", ""},
       true,
       2,
       mirrored,
       ""},
  };
  // With the gate and the default drain (the gate False first, Normal back with the gate's
  // return), and without a gate (the write leaves the label Normal: done on the kubelet's report):
  // the same pod patches.
  for (const bool gate : {true, false})
    for (const Case& c : cases) {
      const std::string what = std::string(c.what) + (gate ? "" : ", no gate");
      INFO(what);
      Env env(gate);
      json::Document pod = env.NewPod();
      SetSpecImage(pod, "app", c.podImage);
      Report(pod, "app", c.podImage, "sha256:" + std::string(64, 'c'), "containerd://web-a-app");
      std::string running = c.podImage;
      int podPatches = 0, restarts = 0;
      bool done = false;
      std::string trouble, waiting;
      std::set<std::string> troubleKeys;
      for (int pass = 0; pass < 12 && !done; ++pass) {
        const Clock::time_point now = T0() + seconds(2 * pass);
        pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod),
                                                pod_update::WantsStart(env.t, AsPod(pod)), now);
        // Done: Normal at the target, and a pass has nothing more to write.
        done = s.ops.empty() && State(pod) == "Normal" && pod_update::AtTarget(env.t, AsPod(pod)) &&
               pod_update::ReadUpdateState(AsPod(pod)).has_value();
        podPatches += static_cast<int>(Ops(s, PodOp::Kind::kPatch).size());
        for (const auto* e : Ops(s, PodOp::Kind::kEvent)) {
          if (e->event.reason == "PodImageNotRunning") {
            CHECK(e->event.onDeployment);
            troubleKeys.insert(e->event.dedupKey);  // one Event: the same name at every pass
            trouble = e->event.message;
          }
        }
        if (!s.waitingMessage.empty()) waiting = s.waitingMessage;
        ApplyStep(pod, s);
        SetSpecImage(pod, "app", admit(c.admission, SpecImage(pod, "app")));  // on every pod UPDATE
        if (SpecImage(pod, "app") != running) {                               // the kubelet acts
          running = SpecImage(pod, "app");
          if (c.kubelet.waiting.empty()) {  // a new container runs
            Report(pod, "app", c.kubelet.image, c.kubelet.imageID,
                   "containerd://new-" + std::to_string(++restarts));
          } else {  // none starts: the kubelet reports the one it stopped, and why it waits
            Report(pod, "app", c.podImage, "sha256:" + std::string(64, 'c'),
                   "containerd://web-a-app", c.kubelet.waiting);
          }
        }
        if (gate) SetCondition(pod, keys::kReadyCondition, Gate(pod) == false ? "False" : "True");
      }
      CHECK(done == c.done);
      CHECK(podPatches == c.podPatches);
      CHECK(restarts <= 1);
      auto us = pod_update::ReadUpdateState(AsPod(pod));
      REQUIRE(us.has_value());
      REQUIRE(us->images.contains("app"));
      CHECK(us->images.at("app").asked == "nginx:1.27");
      CHECK(us->images.at("app").got == c.got);
      CHECK(us->images.at("app").before == c.podImage);
      if (c.done) CHECK(SpecImage(pod, "app") == admit(c.admission, "nginx:1.27"));
      if (c.trouble.empty()) {
        CHECK(trouble.empty());
        CHECK(waiting.empty());
      } else {
        CHECK(trouble.find(c.trouble) != std::string::npos);
        CHECK(waiting == c.trouble);
        CHECK(troubleKeys.size() == 1);
        CHECK(State(pod) == "Updating");
      }
    }
}

TEST_CASE(
    "a recorded rewrite counts only for the image it was asked for, while the spec holds it") {
  Env env(false);
  const std::string target = "nginx:1.27", mirrored = "mirror.local/nginx:1.27";
  struct Case {
    const char* what;
    std::string revision;  // of the update-state: "to", "from" (an earlier run's record)
    std::optional<pod_update::ImageRecord> record;
    std::string spec;
    bool write;  // the target's image is written again
  };
  const Case cases[] = {
      {"asked for the target, stored as the mirror, not yet recorded", "to",
       pod_update::ImageRecord{target, "", "nginx:1.25"}, mirrored, false},
      {"asked for the target, stored as the mirror, recorded", "to",
       pod_update::ImageRecord{target, mirrored, "nginx:1.25"}, mirrored, false},
      {"recorded, but the spec changed since (someone set another image)", "to",
       pod_update::ImageRecord{target, mirrored, "nginx:1.25"}, "mirror.local/nginx:1.28", true},
      {"asked for an earlier target (a later template change): written", "to",
       pod_update::ImageRecord{"nginx:1.26", "mirror.local/nginx:1.26", "nginx:1.25"},
       "mirror.local/nginx:1.26", true},
      {"an earlier run's record (revision is the update's base)", "from",
       pod_update::ImageRecord{target, mirrored, "nginx:1.25"}, mirrored, true},
      {"nothing asked: another image is not taken for a rewrite", "to", std::nullopt, mirrored,
       true},
      {"the target's image itself", "to", std::nullopt, target, false},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    json::Document pod = env.NewPod();
    SetSpecImage(pod, "app", c.spec);
    pod_update::UpdateState us;
    us.revision = c.revision == "to" ? env.t.to : env.t.from;
    us.lastContainerStatuses["app"] = {"x", "containerd://web-a-app", 0};
    if (c.record) us.images["app"] = *c.record;
    SetAnnotation(pod, keys::kUpdateStateAnnotation, pod_update::SerializeUpdateState(us));
    CHECK(pod_update::ComputeChanges(env.t, AsPod(pod)).images.contains("app") == c.write);
    // Round trip of the record.
    CHECK(pod_update::ReadUpdateState(AsPod(pod)) == us);
  }

  SUBCASE("re-targeted to another image after a rewrite: the new image is asked, got cleared") {
    json::Document pod = env.NewPod();
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
    SetSpecImage(pod, "app", mirrored);  // the other webhook
    ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1)));
    REQUIRE(pod_update::ReadUpdateState(AsPod(pod))->images.at("app").got == mirrored);
    std::string next =
        Template({{"app", "web"}, {"version", "v3"}, {"new", "x"}},
                 {{"app", "nginx:1.28"}, {"sidecar", "busybox:1.36"}}, {{"config/hash", "b"}});
    auto t3 =
        pod_update::MakeTarget(test::AsTemplate(Parse(env.base)), test::AsTemplate(Parse(next)),
                               env.settings.policy, env.t.from, Hash(next));
    REQUIRE(t3.ok());
    CHECK(pod_update::ComputeChanges(*t3, AsPod(pod)).images.at("app") == "nginx:1.28");
    pod_update::Step s = pod_update::Decide(*t3, env.rules, AsPod(pod), false, T0() + seconds(2));
    ApplyStep(pod, s);
    CHECK(SpecImage(pod, "app") == "nginx:1.28");
    auto us = pod_update::ReadUpdateState(AsPod(pod));
    CHECK(us->images.at("app") == pod_update::ImageRecord{"nginx:1.28", "", mirrored});
  }
}

TEST_CASE("why a changed container does not run its new image, in the kubelet's words") {
  struct Case {
    const char* what;
    std::string spec;         // the stored image
    std::string reason;       // state.waiting.reason, "" = running
    std::string containerID;  // the status' ("containerd://old" = the one recorded at the write)
    std::string text;         // "" = no trouble
  };
  const std::string asked = "nginx:1.27", mirror = "mirror.local/nginx:1.27";
  const std::string rewritten =
      "pod web-a container app: asked for image nginx:1.27, the API "
      "server stored mirror.local/nginx:1.27 (rewritten by admission), "
      "which the kubelet ";
  const Case cases[] = {
      {"a pull fails", mirror, "ErrImagePull", "containerd://old",
       rewritten + "cannot pull (ErrImagePull)"},
      {"its retries back off", mirror, "ImagePullBackOff", "",
       rewritten + "cannot pull (ImagePullBackOff)"},
      {"between pull retries: no container of the written spec ever started", mirror,
       "CrashLoopBackOff", "containerd://old",
       rewritten + "has not started (CrashLoopBackOff; the pod's Events say why)"},
      {"a new container of the written spec crashes", mirror, "CrashLoopBackOff",
       "containerd://new", rewritten + "does not run (CrashLoopBackOff)"},
      {"not rewritten", asked, "InvalidImageName", "",
       "pod web-a container app: the kubelet cannot pull image nginx:1.27 (InvalidImageName)"},
      {"being created", mirror, "ContainerCreating", "", ""},
      {"running", mirror, "", "containerd://new", ""},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    const std::string state = c.reason.empty()
                                  ? R"({"running":{}})"
                                  : R"({"waiting":{"reason":")" + c.reason + R"(","message":"m"}})";
    json::Document pod =
        Parse(R"({"metadata":{"name":"web-a"},"spec":{"containers":[{"name":"app","image":")" +
              c.spec + R"("}]},"status":{"containerStatuses":[{"name":"app","containerID":")" +
              c.containerID + R"(","state":)" + state + "}]}}");
    pod_update::UpdateState us;
    us.lastContainerStatuses["app"] = {"sha256:x", "containerd://old", 0};
    us.images["app"] = {asked, c.spec == asked ? "" : c.spec, "nginx:1.25"};
    std::optional<pod_update::ImageTrouble> t = pod_update::FindImageTrouble(AsPod(pod), us);
    CHECK(t.has_value() == !c.text.empty());
    if (t) {
      CHECK(t->text == c.text);
      CHECK(t->container == "app");
      CHECK(t->image == c.spec);
      CHECK(t->detail == "m");
    }
  }
}

TEST_CASE("without a pre-update hook a drain starts with the gate write alone") {
  Env env(true);  // the gate and the default drain, no hook
  json::Document pod = env.NewPod();
  SetCondition(pod, keys::kReadyCondition, "True");
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), /*mayStart=*/true, T0());
  CHECK(s.started);
  REQUIRE(s.ops.size() == 1);  // no state write: the gate is the drain's one record
  CHECK(s.ops[0].kind == PodOp::Kind::kStatusPatch);
  CHECK(s.ops[0].stampTransition);
  ApplyStep(pod, s);
  CHECK(pod_update::LabelStateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kPreparingUpdate);
  CHECK_FALSE(pod_update::WantsStart(env.t, AsPod(pod)));  // in the update: it needs no turn again

  // A pass during the drain (a restarted loop included: all it needs is in the pod) waits.
  pod_update::Step wait =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1));
  CHECK(wait.ops.empty());
  CHECK(wait.wait.on == pod_update::PodWait::On::kDrain);
  CHECK(wait.wait.until == T0() + seconds(pod_update::kDefaultDrainSeconds) + milliseconds(500));

  SUBCASE("past the drain: the pod write") {
    pod_update::Step write =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false,
                           T0() + seconds(pod_update::kDefaultDrainSeconds) + milliseconds(500));
    REQUIRE(Ops(write, PodOp::Kind::kPatch).size() == 1);
    CHECK(Ops(write, PodOp::Kind::kStatusPatch).empty());
    ApplyStep(pod, write);
    CHECK(pod_update::LabelStateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
    CHECK(SpecImage(pod, "app") == "nginx:1.27");
  }
  SUBCASE("an abort: only the gate back") {
    pod_update::Step r = pod_update::Release(AsPod(pod), T0() + seconds(1));
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].kind == PodOp::Kind::kStatusPatch);
    ApplyStep(pod, r);
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  }
  SUBCASE("re-targeted back while draining: only the gate back") {
    auto back = pod_update::MakeTarget(test::AsTemplate(Parse(env.target)),
                                       test::AsTemplate(Parse(env.base)), env.settings.policy,
                                       Hash(env.target), Hash(env.base));
    REQUIRE(back.ok());
    pod_update::Step r = pod_update::Decide(*back, env.rules, AsPod(pod), false, T0() + seconds(1));
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].kind == PodOp::Kind::kStatusPatch);
  }
  SUBCASE("with a pre-update hook configured the label is written (its handlers watch it)") {
    Env hooked(true, R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})");
    json::Document p = hooked.NewPod();
    SetCondition(p, keys::kReadyCondition, "True");  // the hook not armed: a drain all the same
    pod_update::Step h = pod_update::Decide(hooked.t, hooked.rules, AsPod(p), true, T0());
    CHECK(Ops(h, PodOp::Kind::kPatch).size() == 1);
    ApplyStep(p, h);
    CHECK(pod_update::LabelStateOf(AsPod(p)) == pod_update::PodState::kPreparingUpdate);
  }
}

TEST_CASE("what one pod's update costs: pod writes and gate writes, played with a kubelet") {
  // The loop pass by pass (1 s apart) from Normal to Normal at the target, with a kubelet that
  // restarts the changed container once the spec's image changes, counting the writes by kind.
  // With the drain: the gate False, the pod write, then the gate True and the return to Normal
  // in one pods/status write (DESIGN.md §4.3): 3 writes, of which 1 pod write. Without one, the
  // pod write leaves the label Normal and the kubelet's report says when it is done: 1 write.
  struct Case {
    const char* what;
    bool gate;
    std::string_view policy;
    std::string_view lifecycle;
    int podPatches, statusPatches;
  };
  const Case cases[] = {
      {"the gate and the default drain", true, kPolicyConfig, "", 1, 2},
      {"the gate, drain off: the write alone, done on the kubelet's report", true, kNoDrain, "", 1,
       0},
      {"no gate (nothing to drain): the write alone, done on the kubelet's report", false,
       kPolicyConfig, "", 1, 0},
      {"a post-update hook: Updated goes with the gate's return, Normal once its handler is back",
       true, kPolicyConfig, R"({"postUpdate":{"labelsHandler":{"lb":"on"}}})", 2, 2},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    Env env(c.gate, c.lifecycle, c.policy);
    json::Document pod = env.NewPod();
    Report(pod, "app", "nginx:1.25", "sha256:" + std::string(64, 'c'), "containerd://web-a-app");
    if (c.gate) ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0()));
    std::string running = SpecImage(pod, "app");
    int podPatches = 0, statusPatches = 0;
    bool done = false;
    for (int pass = 0; pass < 20 && !done; ++pass) {
      const Clock::time_point now = T0() + seconds(pass + 1);
      pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod),
                                              pod_update::WantsStart(env.t, AsPod(pod)), now);
      podPatches += static_cast<int>(Ops(s, PodOp::Kind::kPatch).size());
      statusPatches += static_cast<int>(Ops(s, PodOp::Kind::kStatusPatch).size());
      ApplyStep(pod, s);
      if (SpecImage(pod, "app") != running) {
        running = SpecImage(pod, "app");
        Report(pod, "app", running, "sha256:" + std::string(64, 'd'), "containerd://new");
      }
      if (State(pod) == "Updated") SetLabel(pod, "lb", "on");  // the hook's own controller
      done = State(pod) == "Normal" && pod_update::AtTarget(env.t, AsPod(pod)) &&
             pod_update::ReadUpdateState(AsPod(pod)).has_value() && Gate(pod) != false;
    }
    CHECK(done);
    CHECK(SpecImage(pod, "app") == "nginx:1.27");
    CHECK(podPatches == c.podPatches);
    CHECK(statusPatches == c.statusPatches);
  }
}

TEST_CASE("a step goes back in service together: a done pod waits for the rest of its step") {
  // The default drain: gate False, 4 s, the pod write; the kubelet restarts the container later.
  Env env(true);
  json::Document pod = env.NewPod();
  Report(pod, "app", "nginx:1.25", "sha256:" + std::string(64, 'c'), "containerd://web-a-app");
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0()));  // gate True
  CHECK_FALSE(pod_update::OnItsWay(env.t, env.rules, AsPod(pod)));                // Normal
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));   // gate False
  REQUIRE(State(pod) == "PreparingUpdate");
  CHECK(pod_update::OnItsWay(env.t, env.rules, AsPod(pod)));  // draining
  const Clock::time_point written = T0() + seconds(5);
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, written));
  REQUIRE(State(pod) == "Updating");
  CHECK(pod_update::OnItsWay(env.t, env.rules, AsPod(pod)));  // restarting
  Report(pod, "app", "nginx:1.27", "sha256:" + std::string(64, 'd'), "containerd://new");
  CHECK_FALSE(pod_update::OnItsWay(env.t, env.rules, AsPod(pod)));  // done

  struct Case {
    const char* what;
    bool stepBusy;
    seconds after;  // since the pod write
    bool waits;
  };
  const Case cases[] = {
      {"alone: back at once", false, seconds(2), false},
      {"others of its step on their way: it waits", true, seconds(2), true},
      {"still waiting 9 s after its write", true, seconds(9), true},
      {"10 s after its write it goes back alone", true, seconds(10), false},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    pod_update::Step s =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, written + c.after, c.stepBusy);
    if (c.waits) {
      CHECK(s.ops.empty());
      CHECK(s.wait.on == pod_update::PodWait::On::kStep);
      REQUIRE(s.wakeAfter.has_value());
      CHECK(*s.wakeAfter == seconds(pod_update::kStepReturnSeconds) - c.after);
      CHECK_FALSE(s.completed);
    } else {
      REQUIRE(Ops(s, PodOp::Kind::kStatusPatch).size() == 1);  // the gate and Normal together
      CHECK(Ops(s, PodOp::Kind::kPatch).empty());
      CHECK(s.completed);
    }
  }

  // What holds no other pod: a pod held by its pre-update hook, or one whose image the kubelet
  // cannot pull.
  Env hooked(true, R"({"preUpdate":{"labelsHandler":{"lb":"on"}}})");
  json::Document held = hooked.NewPod("web-b");
  SetLabel(held, "lb", "on");
  ApplyStep(held, pod_update::Decide(hooked.t, hooked.rules, AsPod(held), true, T0()));
  REQUIRE(State(held) == "PreparingUpdate");
  CHECK_FALSE(pod_update::OnItsWay(hooked.t, hooked.rules, AsPod(held)));

  json::Document pulling = env.NewPod("web-c");
  Report(pulling, "app", "nginx:1.25", "sha256:" + std::string(64, 'c'), "containerd://web-c-app");
  ApplyStep(pulling, pod_update::Decide(env.t, env.rules, AsPod(pulling), false, T0()));
  ApplyStep(pulling, pod_update::Decide(env.t, env.rules, AsPod(pulling), true, T0()));
  ApplyStep(pulling, pod_update::Decide(env.t, env.rules, AsPod(pulling), false, written));
  REQUIRE(State(pulling) == "Updating");
  Report(pulling, "app", "nginx:1.25", "sha256:" + std::string(64, 'c'), "containerd://web-c-app",
         "ErrImagePull");
  CHECK_FALSE(pod_update::OnItsWay(env.t, env.rules, AsPod(pulling)));
}

TEST_CASE("a pod written Normal reads Updating until the kubelet's report says done") {
  Env env(false);
  json::Document pod = env.NewPod();
  json::Document before;
  before.CopyFrom(pod, before.GetAllocator());
  ApplyStep(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  // Nothing returns it later (no gate, no resize, no post-update hook): labelled Normal.
  CHECK(pod_update::LabelStateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  REQUIRE(pod_update::ReadUpdateState(AsPod(pod)).has_value());
  CHECK(pod_update::ReadUpdateState(AsPod(pod))->completesOnReport);
  CHECK(Annotation(pod, keys::kUpdateStateAnnotation)->ends_with(R"(,"completesOnReport":true})"));
  CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
  CHECK_FALSE(pod_update::WantsStart(env.t, AsPod(pod)));  // counted in flight, never started twice
  CHECK_FALSE(pod_update::CompletedOnReport(AsPod(before), AsPod(pod), T0()).has_value());

  pod_update::Step wait = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0() + seconds(5));
  CHECK(wait.ops.empty());
  CHECK(wait.wait.on == pod_update::PodWait::On::kRestart);
  CHECK(pod_update::OnItsWay(env.t, env.rules, AsPod(pod)));

  SUBCASE("the restart done: Normal, no write, the completion counted once") {
    json::Document restarting;
    restarting.CopyFrom(pod, restarting.GetAllocator());
    Restart(pod, "app", "nginx:1.27");
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
    CHECK(pod_update::AtTarget(env.t, AsPod(pod)));
    pod_update::Step done =
        pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0() + seconds(42));
    CHECK(done.ops.empty());
    CHECK(done.wait.on == pod_update::PodWait::On::kNothing);
    CHECK(pod_update::CompletedOnReport(AsPod(restarting), AsPod(pod), T0() + seconds(42)) ==
          doctest::Approx(42));
    // A watch that skipped the restarting version (a relist) still counts it.
    CHECK(pod_update::CompletedOnReport(AsPod(before), AsPod(pod), T0() + seconds(42)).has_value());
    CHECK_FALSE(
        pod_update::CompletedOnReport(AsPod(pod), AsPod(pod), T0() + seconds(43)).has_value());
  }
  SUBCASE("an image the kubelet cannot pull: Updating, reported, not done") {
    Report(pod, "app", "nginx:1.25", "nginx:1.25@sha256:old-app", "containerd://web-a-app",
           "ErrImagePull");
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
    pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0() + seconds(10));
    CHECK(s.wait.on == pod_update::PodWait::On::kImage);
    CHECK(Reasons(s) == std::vector<std::string>{"PodImageNotRunning"});
  }
  SUBCASE("an abort: the record stops saying Updating, in one pod patch") {
    pod_update::Step r = pod_update::Release(AsPod(pod), T0() + seconds(10));
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].kind == PodOp::Kind::kPatch);
    ApplyStep(pod, r);
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
    CHECK_FALSE(pod_update::ReadUpdateState(AsPod(pod))->completesOnReport);
    CHECK(pod_update::Release(AsPod(pod), T0() + seconds(11)).ops.empty());
  }
  SUBCASE("opt-in label removed: the pod reads as its label") {
    SetLabel(pod, keys::kEnabledLabel, std::nullopt);
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  }
  SUBCASE("a record of an earlier update reads as not done: not this update's, waits its turn") {
    Restart(pod, "app", "nginx:1.27");
    auto next = pod_update::MakeTarget(test::AsTemplate(Parse(env.target)),
                                       test::AsTemplate(Parse(env.base)), env.settings.policy,
                                       env.t.to, "h-next");
    REQUIRE(next.ok());
    json::Set(pod["metadata"], "generation", json::Value(3), pod.GetAllocator());
    json::Set(pod["status"], "observedGeneration", json::Value(2), pod.GetAllocator());
    REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);  // for a moment
    pod_update::Step s =
        pod_update::Decide(*next, env.rules, AsPod(pod), /*mayStart=*/false, T0() + seconds(60));
    CHECK(s.ops.empty());
    CHECK(s.wait.on == pod_update::PodWait::On::kTurn);
  }
}
