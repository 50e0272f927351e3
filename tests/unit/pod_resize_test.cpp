// The pod step of an in-place resource change (DESIGN.md §3.1): the pods/resize write after the
// labels/annotations write, the images only once the kubelet reports the resize done, and a
// resize the kubelet cannot make stopping the pod with a stuck report, never a recreate.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsPod;
using namespace iw::fixtures;
using pod_update::PodOp;
using std::chrono::seconds;

namespace {

// `templateJson` with container `name`'s resources set to `resources` (JSON).
std::string WithResources(const std::string& templateJson, std::string_view name,
                          std::string_view resources) {
  json::Document t = Parse(templateJson);
  json::Document r = Parse(resources);
  auto& a = t.GetAllocator();
  for (auto& c : t["spec"]["containers"].GetArray()) {
    if (json::StringOr(&c, "name") == name) json::Set(c, "resources", json::Value(r, a), a);
  }
  return json::Serialize(t);
}

constexpr std::string_view kSmall = R"({"requests":{"cpu":"100m","memory":"64Mi"},)"
                                    R"("limits":{"cpu":"200m","memory":"128Mi"}})";
constexpr std::string_view kLarge = R"({"requests":{"cpu":"150m","memory":"96Mi"},)"
                                    R"("limits":{"cpu":"300m","memory":"192Mi"}})";

struct ResizeEnv {
  std::string base, target;
  pod_update::Target t;
  pod_update::Rules rules;

  explicit ResizeEnv(bool imageToo) {
    base = WithResources(Template({{"app", "web"}, {"version", "v1"}},
                                  {{"app", "nginx:1.25"}, {"sidecar", "busybox:1.36"}}),
                         "app", kSmall);
    target = WithResources(
        Template({{"app", "web"}, {"version", "v2"}},
                 {{"app", imageToo ? "nginx:1.27" : "nginx:1.25"}, {"sidecar", "busybox:1.36"}}),
        "app", kLarge);
    auto made =
        pod_update::MakeTarget(test::AsTemplate(Parse(base)), test::AsTemplate(Parse(target)), {},
                               Hash(base), Hash(target));
    REQUIRE_MESSAGE(made.ok(), made.status().message());
    t = *made;
    rules = pod_update::MakeRules({});
  }
  json::Document NewPod() const {
    json::Document pod = Pod("web-a", "uid-rs", base);
    auto& a = pod.GetAllocator();
    json::Set(pod["metadata"], "generation", json::Value(1), a);
    json::Set(pod["status"], "observedGeneration", json::Value(1), a);
    for (auto& st : pod["status"]["containerStatuses"].GetArray()) {
      json::Set(st, "state",
                json::Value(Parse(R"({"running":{"startedAt":"2026-01-01T00:00:00Z"}})"), a), a);
      if (json::StringOr(&st, "name") == "app") {
        json::Set(st, "resources", json::Value(Parse(kSmall), a), a);
      }
    }
    return pod;
  }
};

void Apply(json::Document& pod, const pod_update::Step& s) {
  for (const auto& op : s.ops) {
    if (op.kind == PodOp::Kind::kEvent) continue;
    fake::StrategicMergePatch(pod, op.body, pod.GetAllocator());
    if (op.kind != PodOp::Kind::kStatusPatch) {  // the API server bumps the generation
      auto& a = pod.GetAllocator();
      json::Set(pod["metadata"], "generation",
                json::Value(pod["metadata"]["generation"].GetInt64() + 1), a);
    }
  }
}

// The kubelet has applied the spec's resources of `app` (status.containerStatuses[].resources and
// observedGeneration), optionally restarting the container.
void KubeletResized(json::Document& pod, bool restart) {
  auto& a = pod.GetAllocator();
  json::Value want(pod["spec"]["containers"][0]["resources"], a);
  for (auto& st : pod["status"]["containerStatuses"].GetArray()) {
    if (json::StringOr(&st, "name") != "app") continue;
    json::Set(st, "resources", std::move(want), a);
    if (restart) {
      json::Set(st, "restartCount", json::Value(st["restartCount"].GetInt64() + 1), a);
      json::SetString(st, "containerID", "containerd://resized-app", a);
    }
  }
  json::Set(pod["status"], "observedGeneration", json::Value(pod["metadata"]["generation"], a), a);
}

void SetResizeCondition(json::Document& pod, std::string_view type, std::string_view reason,
                        std::string_view message) {
  SetCondition(pod, type, "True");
  auto& a = pod.GetAllocator();
  for (auto& c : pod["status"]["conditions"].GetArray()) {
    if (json::StringOr(&c, "type") == type) {
      json::SetString(c, "reason", reason, a);
      json::SetString(c, "message", message, a);
    }
  }
}

std::vector<PodOp::Kind> Kinds(const pod_update::Step& s) {
  std::vector<PodOp::Kind> out;
  for (const auto& op : s.ops) out.push_back(op.kind);
  return out;
}

}  // namespace

TEST_CASE("MakeTarget names the resized containers and the target's full cpu/memory") {
  ResizeEnv env(false);
  CHECK(env.t.resizedContainers == std::set<std::string>{"app"});
  CHECK(env.t.changedContainers.empty());
  const auto& app = env.t.resources.at("app");
  CHECK(app.requests == std::map<std::string, std::string>{{"cpu", "150m"}, {"memory", "96Mi"}});
  CHECK(app.limits == std::map<std::string, std::string>{{"cpu", "300m"}, {"memory", "192Mi"}});
}

TEST_CASE("resize only: labels write, then pods/resize, then Normal once the kubelet reports it") {
  ResizeEnv env(false);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), /*mayStart=*/true, T0());
  CHECK(s.started);
  REQUIRE(Kinds(s) == std::vector<PodOp::Kind>{PodOp::Kind::kPatch, PodOp::Kind::kResizePatch});
  CHECK_FALSE(s.ops[0].body.HasMember("spec"));  // no image with the resize pending
  CHECK(json::Serialize(s.ops[1].body) ==
        R"({"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m",)"
        R"("memory":"96Mi"},"limits":{"cpu":"300m","memory":"192Mi"}}}]}})");
  Apply(pod, s);
  CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
  auto us = pod_update::ReadUpdateState(AsPod(pod));
  REQUIRE(us.has_value());
  CHECK(us->resizedContainers == std::set<std::string>{"app"});

  // The kubelet has not acted: waiting (no write), the observedGeneration is behind.
  pod_update::Step wait =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1));
  CHECK(wait.ops.empty());
  CHECK(wait.stuckReason.empty());
  CHECK(pod_update::ResizeStatus(AsPod(pod), *us).phase ==
        pod_update::ResizeProgress::Phase::kInProgress);

  SUBCASE("in progress while PodResizeInProgress is present") {
    KubeletResized(pod, false);
    SetResizeCondition(pod, "PodResizeInProgress", "", "");
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(2)).ops.empty());
  }
  SUBCASE("done: Normal with the container never restarted") {
    KubeletResized(pod, false);
    CHECK(pod_update::ResizeStatus(AsPod(pod), *us).phase ==
          pod_update::ResizeProgress::Phase::kDone);
    pod_update::Step done =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(3));
    CHECK(done.completed);
    Apply(pod, done);
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
    CHECK(pod_update::AtTarget(env.t, AsPod(pod)));
  }
  SUBCASE("a status in other units counts: 0.15 cpu is 150m") {
    KubeletResized(pod, false);
    auto& a = pod.GetAllocator();
    json::SetString(pod["status"]["containerStatuses"][0]["resources"]["requests"], "cpu", "0.15",
                    a);
    CHECK(pod_update::ResizeStatus(AsPod(pod), *us).phase ==
          pod_update::ResizeProgress::Phase::kDone);
  }
  SUBCASE("a container not running (restarting for the resize) is not done") {
    KubeletResized(pod, true);
    auto& a = pod.GetAllocator();
    json::Set(pod["status"]["containerStatuses"][0], "state",
              json::Value(Parse(R"({"waiting":{"reason":"ContainerCreating"}})"), a), a);
    CHECK(pod_update::ResizeStatus(AsPod(pod), *us).phase ==
          pod_update::ResizeProgress::Phase::kInProgress);
  }
  SUBCASE("a status still at the old values is not done") {
    json::Set(pod["status"], "observedGeneration",
              json::Value(pod["metadata"]["generation"], pod.GetAllocator()), pod.GetAllocator());
    CHECK(pod_update::ResizeStatus(AsPod(pod), *us).phase ==
          pod_update::ResizeProgress::Phase::kInProgress);
  }
}

TEST_CASE("resize and image: the image is written only after the resize is done") {
  ResizeEnv env(true);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0());
  REQUIRE(Kinds(s) == std::vector<PodOp::Kind>{PodOp::Kind::kPatch, PodOp::Kind::kResizePatch});
  CHECK_FALSE(s.ops[0].body.HasMember("spec"));
  CHECK(s.summary.find("images once the resize is done") != std::string::npos);
  Apply(pod, s);
  CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1)).ops.empty());

  // RestartContainer policy: the kubelet restarts the container for the resize.
  KubeletResized(pod, /*restart=*/true);
  pod_update::Step images =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(5));
  REQUIRE(Kinds(images) == std::vector<PodOp::Kind>{PodOp::Kind::kPatch});
  CHECK(json::Serialize(images.ops[0].body["spec"]) ==
        R"({"containers":[{"name":"app","image":"nginx:1.27"}]})");
  Apply(pod, images);
  auto us = pod_update::ReadUpdateState(AsPod(pod));
  REQUIRE(us.has_value());
  // The baseline is the container as it runs after the resize's restart.
  CHECK(us->lastContainerStatuses.at("app").containerID == "containerd://resized-app");
  CHECK(us->lastContainerStatuses.at("app").restartCount == 1);
  CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(6)).ops.empty());

  SetContainerStatus(pod, "app", "docker.io/library/nginx:1.27",
                     "docker.io/library/nginx:1.27@sha256:new", "containerd://new-app");
  json::Set(pod["status"]["containerStatuses"][0], "state",
            json::Value(Parse(R"({"running":{"startedAt":")" + Ts(T0() + seconds(7)) + R"("}})"),
                        pod.GetAllocator()),
            pod.GetAllocator());
  pod_update::Step behind =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(8));
  CHECK_FALSE(behind.completed);  // the kubelet's status is not yet of the image write's generation
  KubeletResized(pod, false);
  pod_update::Step done =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(9));
  CHECK(done.completed);
}

TEST_CASE("a resize the API server took but the pod's spec lacks is written again") {
  ResizeEnv env(false);
  json::Document pod = env.NewPod();
  pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0());
  // Only the first write landed (the resize write failed, e.g. a conflict).
  fake::StrategicMergePatch(pod, s.ops[0].body, pod.GetAllocator());
  pod_update::Step again =
      pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1));
  CHECK(Kinds(again) == std::vector<PodOp::Kind>{PodOp::Kind::kResizePatch});
}

TEST_CASE("a resize the kubelet cannot make stops the pod with a stuck report, never a recreate") {
  ResizeEnv env(false);
  json::Document pod = env.NewPod();
  Apply(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);

  SUBCASE("Infeasible: at once, a Warning Event on the pod and the Deployment") {
    SetResizeCondition(pod, "PodResizePending", "Infeasible",
                       "Node didn't have enough capacity: cpu, requested: 150000, capacity: 2000");
    pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(2));
    CHECK(s.stuckReason == "PodResizeInfeasible");
    CHECK(s.stuckMessage.find("pod web-a: the kubelet finds the resize infeasible") == 0);
    CHECK(s.stuckMessage.find("enough capacity") != std::string::npos);
    REQUIRE(Kinds(s) == std::vector<PodOp::Kind>{PodOp::Kind::kEvent});
    CHECK(s.ops[0].event.type == "Warning");
    CHECK(s.ops[0].event.reason == "PodResizeInfeasible");
    CHECK(s.ops[0].event.onDeployment);
    CHECK(s.ops[0].event.message.find(keys::kAbortAnnotation) != std::string::npos);
    // Asked again: the same dedup key (one Event per pod generation), still stuck, no pod write.
    pod_update::Step t =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(900));
    CHECK(t.stuckReason == "PodResizeInfeasible");
    CHECK(t.ops[0].event.dedupKey == s.ops[0].event.dedupKey);
    CHECK_FALSE(t.timedOut);
  }
  SUBCASE("Deferred: waits up to the Updating timeout, then stuck") {
    SetResizeCondition(pod, "PodResizePending", "Deferred", "Node didn't have enough resource");
    pod_update::Step s =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(10));
    CHECK(s.stuckReason.empty());
    CHECK(s.ops.empty());
    pod_update::Step late =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(600));
    CHECK(late.stuckReason == "PodResizeDeferred");
    CHECK(late.stuckMessage.find("deferred the resize for longer than 600s") != std::string::npos);
  }
  SUBCASE("Error: waits up to the Updating timeout, then stuck") {
    SetResizeCondition(pod, "PodResizeInProgress", "Error", "memory limit below usage");
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(10))
              .stuckReason.empty());
    pod_update::Step late =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(601));
    CHECK(late.stuckReason == "PodResizeFailed");
    CHECK(late.stuckMessage.find("memory limit below usage") != std::string::npos);
  }
}

TEST_CASE("a kubelet before 1.33 reports the resize in the deprecated status.resize") {
  // 1.30-1.32 kubelets with their alpha gate on: no observedGeneration, no PodResize* condition;
  // status.resize Proposed (set by a 1.30-1.32 API server), InProgress, Deferred or Infeasible,
  // cleared once the resize is applied.
  ResizeEnv env(false);
  json::Document pod = env.NewPod();
  json::Remove(pod["status"], "observedGeneration");
  Apply(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
  auto us = pod_update::ReadUpdateState(AsPod(pod));
  REQUIRE(us.has_value());
  auto& a = pod.GetAllocator();
  auto applied = [&pod, &a] {  // the container runs what its spec asks (no observedGeneration)
    json::Value want(pod["spec"]["containers"][0]["resources"], a);
    json::Set(pod["status"]["containerStatuses"][0], "resources", std::move(want), a);
  };
  using Phase = pod_update::ResizeProgress::Phase;
  struct Case {
    const char* resize;
    bool applied;
    Phase phase;
  };
  const Case cases[] = {
      {"Proposed", false, Phase::kInProgress},   {"InProgress", false, Phase::kInProgress},
      {"InProgress", true, Phase::kInProgress},  {"Deferred", false, Phase::kDeferred},
      {"Infeasible", false, Phase::kInfeasible}, {"", true, Phase::kDone},
      {"", false, Phase::kInProgress},
  };
  for (const Case& c : cases) {
    CAPTURE(c.resize);
    CAPTURE(c.applied);
    json::Document p;
    p.CopyFrom(pod, p.GetAllocator());
    if (c.applied) {
      json::Value want(p["spec"]["containers"][0]["resources"], p.GetAllocator());
      json::Set(p["status"]["containerStatuses"][0], "resources", std::move(want),
                p.GetAllocator());
    }
    if (*c.resize != '\0') json::SetString(p["status"], "resize", c.resize, p.GetAllocator());
    CHECK(pod_update::ResizeStatus(AsPod(p), *us).phase == c.phase);
  }

  SUBCASE("Infeasible stops the pod at once, as the condition does") {
    json::SetString(pod["status"], "resize", "Infeasible", a);
    pod_update::Step s = pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(2));
    CHECK(s.stuckReason == "PodResizeInfeasible");
    CHECK(s.stuckMessage.find("status.resize Infeasible") != std::string::npos);
    CHECK(Kinds(s) == std::vector<PodOp::Kind>{PodOp::Kind::kEvent});
  }
  SUBCASE("Deferred: waits up to the Updating timeout, then stuck") {
    json::SetString(pod["status"], "resize", "Deferred", a);
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(10))
              .stuckReason.empty());
    CHECK(
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(600)).stuckReason ==
        "PodResizeDeferred");
  }
  SUBCASE("InProgress with the new values already reported: not done until it is cleared") {
    json::SetString(pod["status"], "resize", "InProgress", a);
    applied();
    CHECK(pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(3)).ops.empty());
    json::Remove(pod["status"], "resize");
    pod_update::Step done =
        pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(4));
    CHECK(done.completed);
    Apply(pod, done);
    CHECK(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  }
}

TEST_CASE("whether the pod's kubelet can resize it: the API server's own test") {
  // ValidatePodResize (1.32+): the first running container must report
  // status.containerStatuses[].resources, else 422 "Pod running on node without support for
  // resize". Kubelets report them only where they act on a resize.
  struct Case {
    const char* what;
    std::string statuses;
    bool unsupported;
  };
  const std::string running = R"("state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}})";
  const std::string waiting = R"("state":{"waiting":{"reason":"CrashLoopBackOff"}})";
  const std::string small = R"("resources":)" + std::string(kSmall);
  const Case cases[] = {
      {"a kubelet 1.33+ (or one with its alpha gate on)",
       R"([{"name":"app",)" + running + "," + small + "}]", false},
      {"a kubelet before 1.33 on default gates: no resources",
       R"([{"name":"app",)" + running + "}]", true},
      {"resources null", R"([{"name":"app",)" + running + R"(,"resources":null}])", true},
      {"resources {}: a container without requests or limits, reported",
       R"([{"name":"app",)" + running + R"(,"resources":{}}])", false},
      {"the first running container decides: the first is waiting",
       R"([{"name":"app",)" + waiting + R"(},{"name":"sidecar",)" + running + "," + small + "}]",
       false},
      {"the first running container decides: the second is not looked at",
       R"([{"name":"app",)" + running + "," + small + R"(},{"name":"sidecar",)" + running + "}]",
       false},
      {"the first running container lacks them",
       R"([{"name":"app",)" + running + R"(},{"name":"sidecar",)" + running + "," + small + "}]",
       true},
      {"no running container tells nothing", R"([{"name":"app",)" + waiting + "}]", false},
      {"no container status yet", "[]", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    json::Document pod = Parse(R"({"metadata":{"name":"web-a"},"spec":{"nodeName":"node-1",)"
                               R"("containers":[{"name":"app"},{"name":"sidecar"}]},)"
                               R"("status":{"containerStatuses":)" +
                               c.statuses + "}}");
    std::optional<std::string> why = pod_update::ResizeUnsupported(AsPod(pod));
    CHECK(why.has_value() == c.unsupported);
    if (why) {
      CHECK(why->find("pod web-a on node node-1") == 0);
      CHECK(why->find("running container app") != std::string::npos);
    }
  }
}

TEST_CASE("a pod waits on its kubelet for a resize until the kubelet reports it done") {
  ResizeEnv env(false);
  json::Document pod = env.NewPod();
  CHECK(pod_update::ResizePending(env.t, AsPod(pod)));  // Normal, its spec at the old values
  Apply(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), true, T0()));
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kUpdating);
  CHECK(pod_update::ResizePending(env.t, AsPod(pod)));  // written; the kubelet has not acted
  KubeletResized(pod, false);
  CHECK_FALSE(pod_update::ResizePending(env.t, AsPod(pod)));
  Apply(pod, pod_update::Decide(env.t, env.rules, AsPod(pod), false, T0() + seconds(1)));
  REQUIRE(pod_update::StateOf(AsPod(pod)) == pod_update::PodState::kNormal);
  CHECK_FALSE(pod_update::ResizePending(env.t, AsPod(pod)));

  SUBCASE("an update without a resources change never waits on one") {
    const std::string base = Template({{"app", "web"}}, {{"app", "nginx:1.25"}});
    const std::string target = Template({{"app", "web"}}, {{"app", "nginx:1.27"}});
    auto t = pod_update::MakeTarget(test::AsTemplate(Parse(base)), test::AsTemplate(Parse(target)),
                                    {}, Hash(base), Hash(target));
    REQUIRE(t.ok());
    CHECK_FALSE(pod_update::ResizePending(*t, AsPod(Pod("web-b", "uid-rs", base))));
  }
}
