#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "hooks/admission.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "lib/rfc3339.h"
#include "tests/unit/test_json.h"

using namespace iw;
using rollout::Clock;

namespace {

const Clock::time_point kNow = *rfc3339::Parse("2026-01-01T00:10:00Z");

// A paused Deployment under an in-place update with `conditions` (JSON array text).
json::Document Deployment(const std::string& conditions, const std::string& deadline = "30",
                          bool pausedByUs = true) {
  std::string ip = std::string(R"({\"from\":\"a\",\"to\":\"b\",\"pausedByUs\":)") +
                   (pausedByUs ? "true" : "false") + R"(,\"startedAt\":\"2026-01-01T00:00:00Z\"})";
  return test::Parse(R"({"metadata":{"name":"web","namespace":"ns","annotations":{")" +
                     std::string(keys::kInProgressAnnotation) + R"(":")" + ip +
                     R"("}},"spec":{"paused":true,"progressDeadlineSeconds":)" + deadline +
                     R"(},"status":{"conditions":)" + conditions + "}}");
}

std::string Ours(const std::string& status, const std::string& reason, const std::string& message,
                 const std::string& lastUpdate) {
  return R"({"type":"inplace-webhook.io/Progressing","status":")" + status + R"(","reason":")" +
         reason + R"(","message":")" + message + R"(","lastUpdateTime":")" + lastUpdate +
         R"(","lastTransitionTime":"2026-01-01T00:00:00Z"})";
}
const std::string kPaused =
    R"({"type":"Progressing","status":"Unknown","reason":"DeploymentPaused","message":"Deployment is paused"})";
const std::string kOurStall =
    R"({"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded","message":"in-place update has timed out progressing: x"})";

rollout::Plan Updating(int at, int total, std::map<std::string, int> states = {}) {
  rollout::Plan p;
  p.phase = rollout::Phase::kUpdating;
  p.podsAtTarget = at;
  p.podsTotal = total;
  p.target = "b";
  p.podsByState = std::move(states);
  return p;
}

// The condition of `type` in the plan's status patch, or null.
const json::Value* Written(const rollout::Plan& p, std::string_view type) {
  for (const rollout::Action& a : p.actions) {
    if (a.kind != rollout::WriteKind::kDeploymentStatusPatch) continue;
    const json::Value* list = json::Path(&a.body, {"status", "conditions"});
    for (const auto& c : list->GetArray()) {
      if (json::StringOr(&c, "type") == type) return &c;
    }
  }
  return nullptr;
}
std::string Field(const json::Value* c, std::string_view k) {
  return c == nullptr ? "-" : std::string(json::StringOr(c, k));
}

}  // namespace

TEST_CASE("progress text: n/m pods and the states other than Normal") {
  CHECK(progress::ProgressText(1, 3, "b", {{"Normal", 2}, {"Updating", 1}}) ==
        "1/3 pods updated to template b (1 Updating)");
  CHECK(progress::ProgressText(0, 2, "b", {{"PreparingUpdate", 1}, {"Updating", 1}}) ==
        "0/2 pods updated to template b (1 PreparingUpdate, 1 Updating)");
  CHECK(progress::ProgressText(3, 3, "b", {{"Normal", 3}}) == "3/3 pods updated to template b");
  CHECK(progress::ProgressPart("1/3 pods x; pod p: refused; more") == "1/3 pods x");
  CHECK(progress::ProgressPart("1/3 pods x") == "1/3 pods x");
}

TEST_CASE("progress deadline as the controller reads it") {
  CHECK(progress::ProgressDeadline(test::AsDeployment(Deployment("[]", "600"))) == 600);
  CHECK(progress::ProgressDeadline(test::AsDeployment(Deployment("[]", "2147483647"))) ==
        std::nullopt);
  CHECK(progress::ProgressDeadline(test::AsDeployment(test::Parse(R"({"spec":{}})"))) ==
        std::nullopt);
}

TEST_CASE("refusals are the answers that will not change by retrying alone") {
  for (int code : {400, 403, 422}) CHECK(progress::IsRefusal(code));
  for (int code : {0, 200, 404, 409, 429, 500, 503}) CHECK_FALSE(progress::IsRefusal(code));
}

TEST_CASE("the progress condition and Progressing, pass by pass") {
  const std::string t0 = "2026-01-01T00:09:59Z";    // 1 s ago: within the write interval
  const std::string t5 = "2026-01-01T00:09:55Z";    // 5 s ago
  const std::string tOld = "2026-01-01T00:09:00Z";  // 60 s ago: past a 30 s deadline
  const std::string p13 = "1/3 pods updated to template b";
  const std::string p13u = "1/3 pods updated to template b (1 Updating)";
  struct Case {
    std::string name;
    std::string conditions;
    std::function<rollout::Plan()> plan;
    std::string ours;         // "status reason" written, "-" none
    std::string progressing;  // "status reason" written, "-" none
    std::string lastUpdate;   // of ours when written: "now" or a time
    std::string deadline = "30";
    bool pausedByUs = true;
  };
  std::vector<Case> cases = {
      {"first pass writes True/InPlaceUpdateProgressing", "[" + kPaused + "]",
       [] { return Updating(0, 3); }, "True InPlaceUpdateProgressing", "-", "now"},
      {"progress changed, 5 s after the last write: written",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13, t5) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "True InPlaceUpdateProgressing", "-", "now"},
      {"every pod at the target: reported, no Event (the finish's Completed tells it)",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13, t5) + "]", [] { return Updating(3, 3); },
       "True InPlaceUpdateProgressing", "-", "now"},
      {"progress changed within 2 s: throttled",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13, t0) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "-", "-", ""},
      {"no progress, before the deadline: nothing",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13u, t5) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "-", "-", ""},
      {"no progress past the deadline: both ProgressDeadlineExceeded, anchor kept",
       "[" + kPaused + "," + Ours("True", "InPlaceUpdateProgressing", p13u, tOld) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "False ProgressDeadlineExceeded", "False ProgressDeadlineExceeded", tOld},
      {"stalled and already reported: nothing",
       "[" + kOurStall + "," +
           Ours("False", "ProgressDeadlineExceeded",
                p13u + "; no progress for 30s (progressDeadlineSeconds)", tOld) +
           "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "-", "-", ""},
      {"a refusal past the deadline keeps its message; Progressing set",
       "[" + kPaused + "," +
           Ours("False", "PodUpdateRefused", p13 + "; pod p: update refused", tOld) + "]",
       [] { return Updating(1, 3); }, "-", "False ProgressDeadlineExceeded", ""},
      {"a refusal before the deadline stays",
       "[" + Ours("False", "PodUpdateRefused", p13 + "; pod p: x", t5) + "]",
       [] { return Updating(1, 3); }, "-", "-", ""},
      {"progress after a refusal: back to progressing at once",
       "[" + Ours("False", "PodUpdateRefused", p13 + "; pod p: x", t0) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "True InPlaceUpdateProgressing", "-", "now"},
      {"progress after our stall: Progressing back to DeploymentPaused",
       "[" + kOurStall + "," +
           Ours("False", "ProgressDeadlineExceeded", p13u + "; no progress", tOld) + "]",
       [] { return Updating(2, 3); }, "True InPlaceUpdateProgressing", "Unknown DeploymentPaused",
       "now"},
      {"no deadline (MaxInt32): never stalls",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13u, tOld) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "-", "-", "", "2147483647"},
      {"a user's pause holds the update: no deadline",
       "[" + Ours("True", "InPlaceUpdateProgressing", p13u, tOld) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "-", "-", "", "30", false},
      {"an earlier update's Completed: new progress",
       "[" + Ours("True", "InPlaceUpdateCompleted", p13u, tOld) + "]",
       [] {
         return Updating(1, 3, {{"Updating", 1}});
       },
       "True InPlaceUpdateProgressing", "-", "now"},
  };
  auto completed = [] {
    rollout::Plan p;
    p.phase = rollout::Phase::kCompleted;
    p.podsAtTarget = 3;
    p.podsTotal = 3;
    p.target = "b";
    return p;
  };
  cases.push_back({"completed", "[" + Ours("True", "InPlaceUpdateProgressing", p13u, t0) + "]",
                   completed, "True InPlaceUpdateCompleted", "-", "now"});
  auto aborted = [] {
    rollout::Plan p;
    p.phase = rollout::Phase::kAborted;
    p.message = "requested";
    return p;
  };
  cases.push_back({"aborted after a report",
                   "[" + Ours("True", "InPlaceUpdateProgressing", p13u, t0) + "]", aborted,
                   "False InPlaceUpdateAborted", "-", "now"});
  cases.push_back({"aborted, never reported: nothing", "[]", aborted, "-", "-", ""});
  auto uncounted = [] {
    rollout::Plan p;
    p.phase = rollout::Phase::kBlocked;
    return p;
  };
  cases.push_back({"blocked without counts: nothing", "[]", uncounted, "-", "-", ""});

  for (Case& c : cases) {
    CAPTURE(c.name);
    json::Document d = Deployment(c.conditions, c.deadline, c.pausedByUs);
    rollout::Plan p = c.plan();
    progress::AddProgress(p, test::AsDeployment(d), kNow);
    const json::Value* ours = Written(p, keys::kProgressCondition);
    const json::Value* prog = Written(p, "Progressing");
    CHECK((ours ? Field(ours, "status") + " " + Field(ours, "reason") : "-") == c.ours);
    CHECK((prog ? Field(prog, "status") + " " + Field(prog, "reason") : "-") == c.progressing);
    if (ours != nullptr) {
      CHECK(Field(ours, "lastUpdateTime") ==
            (c.lastUpdate == "now" ? rfc3339::Format(kNow) : c.lastUpdate));
    }
    // Progress of a running update (not its first report, nor its end) comes with one Event on
    // the Deployment, after the report and with its text.
    const std::set<std::string> withEvent = {
        "progress changed, 5 s after the last write: written",
        "progress after a refusal: back to progressing at once",
        "progress after our stall: Progressing back to DeploymentPaused"};
    int events = 0;
    for (size_t i = 0; i < p.actions.size(); ++i) {
      const rollout::Action& a = p.actions[i];
      CHECK(a.resourceVersion.empty());
      if (a.kind == rollout::WriteKind::kEvent) {
        ++events;
        CHECK(i == p.actions.size() - 1);
        CHECK(json::StringOr(&a.body, "reason") == "InPlaceUpdateProgressing");
        CHECK(json::StringOr(&a.body, "type") == "Normal");
        CHECK(json::StringOr(json::Find(&a.body, "involvedObject"), "kind") == "Deployment");
        CHECK(json::StringOr(&a.body, "message") == "in-place update: " + Field(ours, "message"));
        CHECK(a.name == rollout::DedupEventName("web", "progress/" + Field(ours, "message")));
        continue;
      }
      CHECK(a.Path() == "/apis/apps/v1/namespaces/ns/deployments/web/status");
      CHECK(a.PatchType() == kube::PatchType::kStrategicMerge);
    }
    CHECK(events == (withEvent.contains(c.name) ? 1 : 0));
  }
}

TEST_CASE("a stall report names the deadline; the requeue is when it falls due") {
  const std::string t5 = "2026-01-01T00:09:55Z";
  rollout::Plan p = Updating(1, 3);
  const json::Document quiet = Deployment(
      "[" + Ours("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b", t5) + "]");
  progress::AddProgress(p, test::AsDeployment(quiet), kNow);
  CHECK(p.actions.empty());
  REQUIRE(p.requeueAfter.has_value());
  CHECK(*p.requeueAfter == std::chrono::seconds(25));

  rollout::Plan stalled = Updating(1, 3);
  const json::Document old =
      Deployment("[" +
                 Ours("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                      "2026-01-01T00:00:00Z") +
                 "]");
  progress::AddProgress(stalled, test::AsDeployment(old), kNow);
  CHECK(Field(Written(stalled, keys::kProgressCondition), "message") ==
        "1/3 pods updated to template b; no progress for 30s (progressDeadlineSeconds)");
  CHECK(Field(Written(stalled, "Progressing"), "message") ==
        "in-place update has timed out progressing: 1/3 pods updated to template b; no progress "
        "for 30s (progressDeadlineSeconds)");
  CHECK(Field(Written(stalled, keys::kProgressCondition), "lastTransitionTime") ==
        rfc3339::Format(kNow));  // True → False
}

TEST_CASE("a refused pod write: Events on the pod and the Deployment, and the condition") {
  const std::string p13 = "1/3 pods updated to template b";
  json::Document podJson =
      test::Parse(R"({"metadata":{"name":"web-1","namespace":"ns","uid":"u1"}})");
  const kube::Pod pod = test::AsPod(podJson);
  json::Document dJson = Deployment(
      "[" + Ours("True", "InPlaceUpdateProgressing", p13, "2026-01-01T00:09:00Z") + "]", "600");
  const kube::Deployment d = test::AsDeployment(dJson);
  std::vector<rollout::Action> out =
      progress::PlanRefusal(d, &pod, "web-1", p13, "denied: no v2", kNow);
  REQUIRE(out.size() == 3);
  CHECK(out[0].kind == rollout::WriteKind::kEvent);
  CHECK(json::StringOr(json::Find(&out[0].body, "involvedObject"), "kind") == "Pod");
  CHECK(json::StringOr(&out[0].body, "reason") == "PodUpdateRefused");
  CHECK(json::StringOr(&out[0].body, "type") == "Warning");
  CHECK(json::StringOr(&out[0].body, "message") ==
        "pod web-1: update refused by the API server: denied: no v2");
  CHECK(json::StringOr(json::Find(&out[1].body, "involvedObject"), "kind") == "Deployment");
  CHECK_FALSE(out[0].name.empty());  // deterministic: a retry does not repeat it
  CHECK(out[0].name == progress::PlanRefusal(d, &pod, "web-1", p13, "denied: no v2", kNow)[0].name);
  CHECK(out[0].name != progress::PlanRefusal(d, &pod, "web-1", p13, "other", kNow)[0].name);
  const json::Value* c = json::Path(&out[2].body, {"status", "conditions"});
  REQUIRE(c != nullptr);
  const json::Value& cond = (*c)[0];
  CHECK(json::StringOr(&cond, "status") == "False");
  CHECK(json::StringOr(&cond, "reason") == "PodUpdateRefused");
  CHECK(json::StringOr(&cond, "message") ==
        p13 + "; pod web-1: update refused by the API server: denied: no v2");
  CHECK(json::StringOr(&cond, "lastUpdateTime") == "2026-01-01T00:09:00Z");  // no progress

  // Already reported: only the (deduplicated) Events.
  json::Document reportedJson =
      Deployment("[" +
                     Ours("False", "PodUpdateRefused",
                          p13 + "; pod web-1: update refused by the API server: denied: no v2",
                          "2026-01-01T00:09:00Z") +
                     "]",
                 "600");
  const kube::Deployment reported = test::AsDeployment(reportedJson);
  CHECK(progress::PlanRefusal(reported, &pod, "web-1", p13, "denied: no v2", kNow).size() == 2);
  // A refusal that lasts past progressDeadlineSeconds (30 s; 60 s without progress): the stall,
  // once (a pass that meets the refusal ends before the usual progress report).
  json::Document lastingJson =
      Deployment("[" +
                 Ours("False", "PodUpdateRefused",
                      p13 + "; pod web-1: update refused by the API server: denied: no v2",
                      "2026-01-01T00:09:00Z") +
                 "," + kPaused + "]");
  std::vector<rollout::Action> stall = progress::PlanRefusal(test::AsDeployment(lastingJson), &pod,
                                                             "web-1", p13, "denied: no v2", kNow);
  REQUIRE(stall.size() == 3);
  const json::Value* sc = json::Path(&stall[2].body, {"status", "conditions"});
  REQUIRE(sc != nullptr);
  bool deadline = false;
  for (const auto& c : sc->GetArray()) {
    if (json::StringOr(&c, "type") != "Progressing") continue;
    deadline = json::StringOr(&c, "status") == "False" &&
               json::StringOr(&c, "reason") == "ProgressDeadlineExceeded" &&
               json::StringOr(&c, "message").find("denied: no v2") != std::string::npos;
  }
  CHECK(deadline);
  json::Document stalledJson =
      Deployment("[" +
                 Ours("False", "PodUpdateRefused",
                      p13 + "; pod web-1: update refused by the API server: denied: no v2",
                      "2026-01-01T00:09:00Z") +
                 "," + kOurStall + "]");
  CHECK(progress::PlanRefusal(test::AsDeployment(stalledJson), &pod, "web-1", p13, "denied: no v2",
                              kNow)
            .size() == 2);
  // Unknown pod (not in the snapshot): the Deployment Event and the condition.
  CHECK(progress::PlanRefusal(d, nullptr, "web-1", p13, "denied", kNow).size() == 2);
}

TEST_CASE("a pod that cannot go on (a resize the kubelet refuses) is a stall at once, naming it") {
  rollout::Plan p = Updating(1, 3, {{"Updating", 1}});
  p.stuckReason = "PodResizeInfeasible";
  p.stuckMessage = "pod web-b: the kubelet finds the resize infeasible: Infeasible: no cpu";
  json::Document d =
      Deployment("[" +
                 Ours("True", "InPlaceUpdateProgressing",
                      "1/3 pods updated to template b (1 Updating)", "2026-01-01T00:09:59Z") +
                 "," + kPaused + "]");
  progress::AddProgress(p, test::AsDeployment(d), kNow);
  CHECK(p.stalled);
  const json::Value* ours = Written(p, keys::kProgressCondition);
  REQUIRE(ours != nullptr);
  CHECK(json::StringOr(ours, "status") == "False");
  CHECK(json::StringOr(ours, "reason") == "PodResizeInfeasible");
  CHECK(json::StringOr(ours, "message") ==
        "1/3 pods updated to template b (1 Updating); pod web-b: the kubelet finds the resize "
        "infeasible: Infeasible: no cpu");
  // No progress since the last report: its lastUpdateTime stays the anchor.
  CHECK(json::StringOr(ours, "lastUpdateTime") == "2026-01-01T00:09:59Z");
  const json::Value* progressing = Written(p, "Progressing");
  REQUIRE(progressing != nullptr);
  CHECK(json::StringOr(progressing, "status") == "False");
  CHECK(json::StringOr(progressing, "reason") == "ProgressDeadlineExceeded");
  CHECK(json::StringOr(progressing, "message").find("PodResizeInfeasible") == std::string::npos);
  CHECK(json::StringOr(progressing, "message").find("resize infeasible") != std::string::npos);
}

TEST_CASE("a refused pods/resize write: every 4xx but a conflict, a timeout or throttling") {
  struct Case {
    int code;
    const char* message;
    bool refused;
  };
  const Case cases[] = {
      {404, "the server could not find the requested resource", true},  // no pods/resize
      {404, R"(pods "web-1" not found)", false},                        // the pod is gone
      {404, R"(pods "web-2" not found)", true},  // another pod's name: not this one gone
      {400, "bad patch", true},
      {401, "Unauthorized", true},
      {403, "node didn't have enough allocatable resources", true},
      {422, "Pod running on node without support for resize", true},
      {405, "method not allowed", true},
      {408, "timeout", false},
      {409, "the object has been modified", false},
      {429, "too many requests", false},
      {500, "etcd", false},
      {503, "unavailable", false},
      {0, "connection refused", false},
      {200, "", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.code);
    CAPTURE(c.message);
    CHECK(progress::IsResizeRefusal(c.code, c.message, "web-1") == c.refused);
  }
}

TEST_CASE("a refused resize is reported stuck at once, with the API server's message") {
  const std::string p13 = "1/3 pods updated to template b (1 Updating)";
  json::Document podJson =
      test::Parse(R"({"metadata":{"name":"web-1","namespace":"ns","uid":"u1"}})");
  const kube::Pod pod = test::AsPod(podJson);
  // Progress a second ago, a deadline of 600 s: far from a stall by time.
  json::Document dJson =
      Deployment("[" + Ours("True", "InPlaceUpdateProgressing", p13, "2026-01-01T00:09:59Z") + "," +
                     kPaused + "]",
                 "600");
  const kube::Deployment d = test::AsDeployment(dJson);
  const std::string missing = "the server could not find the requested resource";
  std::vector<rollout::Action> out =
      progress::PlanRefusal(d, &pod, "web-1", p13, missing, kNow, progress::Refused::kResize, 404);
  REQUIRE(out.size() == 3);
  for (int i : {0, 1}) {
    CHECK(json::StringOr(&out[i].body, "type") == "Warning");
    CHECK(json::StringOr(&out[i].body, "reason") == "PodResizeRefused");
    const std::string message(json::StringOr(&out[i].body, "message"));
    CHECK(message.find("pod web-1: resize refused by the API server: " + missing) == 0);
    CHECK(message.find("does not serve pods/resize") != std::string::npos);
    CHECK(message.find(keys::kAbortAnnotation) != std::string::npos);
  }
  CHECK(json::StringOr(json::Find(&out[0].body, "involvedObject"), "kind") == "Pod");
  CHECK(json::StringOr(json::Find(&out[1].body, "involvedObject"), "kind") == "Deployment");
  // Not the pod write's Event names: a refused resize and a refused write are reported apart.
  CHECK(out[0].name != progress::PlanRefusal(d, &pod, "web-1", p13, missing, kNow)[0].name);
  rollout::Plan report;
  report.actions.push_back(std::move(out[2]));
  const json::Value* ours = Written(report, keys::kProgressCondition);
  REQUIRE(ours != nullptr);
  CHECK(Field(ours, "status") == "False");
  CHECK(Field(ours, "reason") == "PodResizeRefused");
  CHECK(Field(ours, "message")
            .find(p13 + "; pod web-1: resize refused by the API server: " + missing) == 0);
  CHECK(Field(ours, "lastUpdateTime") == "2026-01-01T00:09:59Z");  // no progress
  const json::Value* progressing = Written(report, "Progressing");
  CHECK(Field(progressing, "status") == "False");
  CHECK(Field(progressing, "reason") == "ProgressDeadlineExceeded");
  CHECK(Field(progressing, "message").find(missing) != std::string::npos);

  SUBCASE("without progressDeadlineSeconds too") {
    json::Document none = Deployment(
        "[" + Ours("True", "InPlaceUpdateProgressing", p13, "2026-01-01T00:09:59Z") + "]",
        "2147483647");
    std::vector<rollout::Action> again =
        progress::PlanRefusal(test::AsDeployment(none), &pod, "web-1", p13, "forbidden", kNow,
                              progress::Refused::kResize, 403);
    REQUIRE(again.size() == 3);
    rollout::Plan r;
    r.actions.push_back(std::move(again[2]));
    CHECK(Field(Written(r, "Progressing"), "reason") == "ProgressDeadlineExceeded");
    CHECK(Field(Written(r, keys::kProgressCondition), "message").find("does not serve") ==
          std::string::npos);  // the hint is for a 404 only
  }
  SUBCASE("refused again: only the (deduplicated) Events") {
    const std::string stored = Field(ours, "message");
    json::Document reported =
        Deployment("[" + Ours("False", "PodResizeRefused", stored, "2026-01-01T00:09:59Z") + "," +
                       kOurStall + "]",
                   "600");
    CHECK(progress::PlanRefusal(test::AsDeployment(reported), &pod, "web-1", p13, missing, kNow,
                                progress::Refused::kResize, 404)
              .size() == 2);
  }
  SUBCASE("the resize taken at last: the report ends, which is no progress") {
    // The pass's status patch lands only if every write before it did, the resize included.
    json::Document reported =
        Deployment("[" +
                       Ours("False", "PodResizeRefused", p13 + "; pod web-1: resize refused: x",
                            "2026-01-01T00:09:59Z") +
                       "," + kOurStall + "]",
                   "600");
    rollout::Plan p = Updating(1, 3, {{"Updating", 1}});
    progress::AddProgress(p, test::AsDeployment(reported), kNow);
    CHECK_FALSE(p.stalled);
    const json::Value* now = Written(p, keys::kProgressCondition);
    CHECK(Field(now, "status") == "True");
    CHECK(Field(now, "reason") == "InPlaceUpdateProgressing");
    CHECK(Field(now, "message") == p13);
    CHECK(Field(now, "lastUpdateTime") == "2026-01-01T00:09:59Z");
    CHECK(Field(Written(p, "Progressing"), "reason") == "DeploymentPaused");
  }
}

TEST_CASE("an update the webhook ended without the loop: our condition is closed, once") {
  // No in-progress record any more; `labels` and `annotations` as the webhook's end left them.
  auto idle = [](const std::string& labels, const std::string& annotations,
                 const std::string& conditions, bool paused = false) {
    return test::Parse(
        R"({"metadata":{"name":"web","namespace":"ns","labels":)" + labels + R"(,"annotations":)" +
        annotations + R"(},"spec":{"paused":)" + (paused ? "true" : "false") +
        R"(,"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"x:1"}]}}},"status":{"conditions":)" +
        conditions + "}}");
  };
  const std::string optedIn = R"({"inplace-webhook.io/enabled":"true"})";
  const std::string abort = R"({"inplace-webhook.io/abort":"true"})";
  const std::string lifecycle = R"({"inplace-webhook.io/lifecycle":"{}"})";
  const json::Document plain = idle(optedIn, "{}", "[]");
  const std::string at = TemplateHash(test::AsTemplate(*json::Path(&plain, {"spec", "template"})));
  struct Row {
    const char* name;
    std::string labels, annotations, conditions;
    bool paused;
    const char* reason;      // our condition's reason written; "" nothing written
    std::string message;     // part of its message
    bool pausedProgressing;  // Progressing put back to Unknown/DeploymentPaused
  };
  const std::vector<Row> rows = {
      {"an abort no loop acted on", optedIn, abort,
       "[" +
           Ours("True", "InPlaceUpdateProgressing",
                "1/2 pods updated to template b (1 PreparingUpdate)", "2026-01-01T00:09:00Z") +
           "]",
       false, "InPlaceUpdateAborted", "ended by the webhook (an abort the loop did not carry out)",
       false},
      {"opted out while stalled", "{}", lifecycle,
       "[" +
           Ours("False", "ProgressDeadlineExceeded", "1/2 pods updated to template b; no progress",
                "2026-01-01T00:09:00Z") +
           "," + kOurStall + "]",
       true, "InPlaceUpdateAborted", "(the Deployment is no longer opted in)", true},
      {"a change not made in place", optedIn, "{}",
       "[" +
           Ours("True", "InPlaceUpdateProgressing", "0/2 pods updated to template b",
                "2026-01-01T00:09:00Z") +
           "]",
       false, "InPlaceUpdateAborted", "(a change not made in place)", false},
      {"the loop's finish whose report did not land", optedIn, "{}",
       "[" +
           Ours("True", "InPlaceUpdateProgressing", "2/2 pods updated to template " + at,
                "2026-01-01T00:09:00Z") +
           "]",
       false, "InPlaceUpdateCompleted", "2/2 pods updated to template " + at, false},
      {"already completed", optedIn, "{}",
       "[" +
           Ours("True", "InPlaceUpdateCompleted", "2/2 pods updated to template b",
                "2026-01-01T00:09:00Z") +
           "]",
       false, "", "", false},
      {"already aborted", optedIn, abort,
       "[" +
           Ours("False", "InPlaceUpdateAborted", "in-place update aborted; x",
                "2026-01-01T00:09:00Z") +
           "]",
       false, "", "", false},
      {"never ours", optedIn, "{}", "[]", false, "", "", false},
      // The chart's policy lets the controller close its own condition on a Deployment no longer
      // opted in (that status write only), with no other key of ours left.
      {"opted out, nothing else of ours left", "{}", "{}",
       "[" +
           Ours("True", "InPlaceUpdateProgressing", "0/2 pods updated to template b",
                "2026-01-01T00:09:00Z") +
           "]",
       false, "InPlaceUpdateAborted", "(the Deployment is no longer opted in)", false},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    const json::Document raw = idle(row.labels, row.annotations, row.conditions, row.paused);
    StatusOr<kube::Deployment> d = kube::Deployment::From(raw, "deployment");
    REQUIRE(d.ok());
    rollout::Plan p;
    progress::AddEndedWithoutLoop(p, *d, kNow);
    const json::Value* ours = Written(p, keys::kProgressCondition);
    if (std::string_view(row.reason).empty()) {
      CHECK(p.actions.empty());
      continue;
    }
    REQUIRE(ours != nullptr);
    CHECK(Field(ours, "reason") == row.reason);
    CHECK(Field(ours, "message").find(row.message) != std::string::npos);
    const json::Value* progressing = Written(p, "Progressing");
    CHECK((progressing != nullptr) == row.pausedProgressing);
  }
}

TEST_CASE("a stall names what a pod waits on that the user must fix (an image it cannot pull)") {
  const std::string old = "2026-01-01T00:00:00Z";
  const std::string waits =
      "pod web-a container app: asked for image localhost/httpd-demo:v2, the API server stored "
      "localhost/missing/httpd-demo:v2 (rewritten by admission), which the kubelet cannot pull "
      "(ImagePullBackOff)";
  struct Case {
    const char* what;
    std::string waiting;     // the plan's waitingMessage
    std::string lastUpdate;  // of our condition, "1/2 pods updated ..." since then
    std::string want;        // our condition's message written, "-" = none written
  };
  const std::string text = "1/2 pods updated to template b (1 Updating)";
  const Case cases[] = {
      {"past the deadline, a pod's cause: named", waits, old,
       text + "; no progress for 30s (progressDeadlineSeconds); " + waits},
      {"past the deadline, nothing named", "", old,
       text + "; no progress for 30s (progressDeadlineSeconds)"},
      {"within the deadline: no stall yet", waits, "2026-01-01T00:09:55Z", "-"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    rollout::Plan p = Updating(1, 2, {{"Normal", 1}, {"Updating", 1}});
    p.waitingMessage = c.waiting;
    const json::Document d =
        Deployment("[" + Ours("True", "InPlaceUpdateProgressing", text, c.lastUpdate) + "]");
    progress::AddProgress(p, test::AsDeployment(d), kNow);
    CHECK(Field(Written(p, keys::kProgressCondition), "message") == c.want);
    if (c.want != "-") {
      CHECK(Field(Written(p, "Progressing"), "reason") == "ProgressDeadlineExceeded");
      CHECK(Field(Written(p, "Progressing"), "message") ==
            "in-place update has timed out progressing: " + c.want);
    }
  }
}
