// StatefulSet admission (DESIGN.md §4.8): the in-place decision (statefulset::Decide), the mutator
// that applies it and the validator that admits only its fixed points, and the pod-DELETE route
// that asks the hold.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/pod_admission.h"
#include "hooks/statefulset_rules.h"
#include "hooks/workload_admission.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "lib/rfc3339.h"
#include "tests/unit/test_json.h"

using namespace iw;
using admission::Operation;
using Action = rules::Decision::Action;
using test::AsStatefulSet;
using test::Parse;

namespace {

// An opted-in 3-replica StatefulSet at one revision, as the API server stores it (defaults).
constexpr std::string_view kSet = R"({
  "apiVersion": "apps/v1", "kind": "StatefulSet",
  "metadata": {"name": "web", "namespace": "db", "uid": "u-web", "generation": 2,
               "labels": {"inplace-webhook.io/enabled": "true"}},
  "spec": {"replicas": 3, "serviceName": "web", "podManagementPolicy": "OrderedReady",
           "selector": {"matchLabels": {"app": "web"}},
           "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
           "template": {"metadata": {"labels": {"app": "web", "inplace-webhook.io/enabled": "true"}},
                        "spec": {"containers": [{"name": "app", "image": "db:1"}]}}},
  "status": {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
             "updatedReplicas": 3, "currentRevision": "web-aaa", "updateRevision": "web-aaa"}
})";

json::Document Set(std::string_view patch = "") {
  json::Document doc = Parse(kSet);
  if (patch.empty()) return doc;
  json::Document ops = Parse(patch);
  Status err = json_patch::Apply(ops, doc);
  REQUIRE_MESSAGE(err.ok(), (std::string(patch) + ": " + err.message()));
  return doc;
}

constexpr std::string_view kImage =
    R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"db:2"}])";
constexpr std::string_view kEnv =
    R"([{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"A","value":"b"}]}])";

rules::Facts Facts(bool loopAlive = true) {
  return {*rfc3339::Parse("2026-12-06T19:00:00Z"), loopAlive, {}};
}

// `set` with `op` (a JSON Patch) applied on top.
json::Document With(const json::Value& set, std::string_view op) {
  json::Document doc;
  doc.CopyFrom(set, doc.GetAllocator());
  json::Document ops = Parse(op);
  REQUIRE(json_patch::Apply(ops, doc).ok());
  return doc;
}

rules::Decision Decide(const json::Value& old, const json::Value& obj, bool loopAlive = true) {
  return statefulset::Decide(AsStatefulSet(old), AsStatefulSet(obj), Facts(loopAlive));
}

admission::Request Update(const json::Value& old, const json::Value& obj) {
  admission::Request r;
  r.uid = "u-1";
  r.kind = {"apps", "v1", "StatefulSet"};
  r.resource = "statefulsets";
  r.name = "web";
  r.namespaceName = "db";
  r.operation = Operation::kUpdate;
  r.username = "alice";
  r.object = &obj;
  r.oldObject = &old;
  return r;
}

// The request object with the response's patch applied.
json::Document Patched(const json::Value& obj, const admission::Response& r) {
  json::Document doc;
  doc.CopyFrom(obj, doc.GetAllocator());
  if (r.patch.empty()) return doc;
  json::Document ops = Parse(r.patch);
  REQUIRE(json_patch::Apply(ops, doc).ok());
  return doc;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

}  // namespace

TEST_CASE(
    "an eligible change of a StatefulSet starts an in-place update and changes nothing else") {
  json::Document old = Set(), obj = Set(kImage);
  rules::Decision d = Decide(old, obj);
  REQUIRE(d.action == Action::kStart);
  CHECK_FALSE(d.paused);
  CHECK_FALSE(d.restartedAt);
  StatusOr<InProgress> record = ParseInProgress(*d.inProgress);
  REQUIRE(record.ok());
  CHECK(record->from == TemplateHash(AsStatefulSet(old).podTemplate()));
  CHECK(record->to == TemplateHash(AsStatefulSet(obj).podTemplate()));
  CHECK(record->pausedByUs);  // the planner reads false as a user's pause (§8.5)
  CHECK(record->startedAt == "2026-12-06T19:00:00Z");
  CHECK_MESSAGE(
      Joined(d.warnings).find("3 pods will be updated in place, highest ordinal first\n") !=
          std::string::npos,
      Joined(d.warnings));
  // With a partition, the warning counts the pods from it up and says the others stay.
  json::Document staged =
      Set(R"([{"op":"replace","path":"/spec/updateStrategy/rollingUpdate/partition","value":2}])");
  json::Document stagedNew = With(staged, kImage);
  const rules::Decision sd = Decide(staged, stagedNew);
  CHECK_MESSAGE(Joined(sd.warnings)
                        .find("1 pod will be updated in place, highest ordinal first; 2 below "
                              "partition 2 stay\n") != std::string::npos,
                Joined(sd.warnings));

  // The mutator adds the record and only it; deciding again on its output changes nothing, and the
  // validator admits it.
  admission::Response m = admission::MutateStatefulSet(Update(old, obj), {});
  REQUIRE(m.allowed);
  CHECK(m.patch.find("\"path\":\"/metadata/annotations\"") != std::string::npos);
  CHECK(m.patch.find("inplace-webhook.io/in-progress") != std::string::npos);
  CHECK(m.patch.find("/spec") == std::string::npos);
  json::Document out = Patched(obj, m);
  admission::Context later;  // a re-invocation seconds later keeps the startedAt written then
  later.now = std::chrono::system_clock::now() + std::chrono::seconds(5);
  CHECK(admission::MutateStatefulSet(Update(old, out), later).patch.empty());
  CHECK(admission::ValidateStatefulSet(Update(old, out), later).allowed);
  // The write without the mutator's record is not a fixed point.
  admission::Response v = admission::ValidateStatefulSet(Update(old, obj), {});
  CHECK_FALSE(v.allowed);
  CHECK(v.message.find("was not set by the mutating webhook (/mutate/statefulsets)") !=
        std::string::npos);
}

TEST_CASE("a StatefulSet's progress deadline annotation must be a number of seconds") {
  const json::Document old = Set();
  for (const auto& [value, allowed] : std::vector<std::pair<std::string, bool>>{
           {"120", true}, {"2147483647", true}, {"0", false}, {"2m", false}, {"-1", false}}) {
    CAPTURE(value);
    const json::Document obj = With(
        old,
        R"([{"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/progress-deadline-seconds":")" +
            value + R"("}}])");
    admission::Request req = Update(old, obj);
    const admission::Response v = admission::ValidateStatefulSet(req, {});
    CHECK(v.allowed == allowed);
    if (!allowed) {
      CHECK(v.message.find("inplace-webhook.io/progress-deadline-seconds") != std::string::npos);
    }
    req.operation = Operation::kCreate;
    req.oldObject = nullptr;
    CHECK(admission::ValidateStatefulSet(req, {}).allowed == allowed);
  }
}

TEST_CASE("a StatefulSet change takes the rolling update when it cannot be made in place") {
  struct Row {
    const char* what;
    std::string oldPatch, newPatch;
    Action action;
    const char* reason;
  };
  const std::string image(kImage);
  const Row rows[] = {
      {"not eligible (env)", "", std::string(kEnv), Action::kNone, "changed"},
      {"no template change", "", R"([{"op":"replace","path":"/spec/replicas","value":5}])",
       Action::kNone, "no template change"},
      {"OnDelete", "",
       R"([{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}},)" +
           image.substr(1),
       Action::kNone, "updateStrategy OnDelete"},
      {"a rolling update under way",
       R"([{"op":"replace","path":"/status/updateRevision","value":"web-bbb"}])", image,
       Action::kNone, "a rolling update is under way"},
      {"no pods", R"([{"op":"replace","path":"/spec/replicas","value":0}])", image, Action::kNone,
       "no pods"},
      {"template not opted in", "",
       R"([{"op":"remove","path":"/spec/template/metadata/labels/inplace-webhook.io~1enabled"},)" +
           image.substr(1),
       Action::kNone, "pod template lacks label"},
      {"StatefulSet not opted in", "",
       R"([{"op":"remove","path":"/metadata/labels/inplace-webhook.io~1enabled"},)" +
           image.substr(1),
       Action::kIgnore, "not opted in"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    json::Document old = Set(r.oldPatch);
    json::Document obj = With(old, r.newPatch);
    rules::Decision d = Decide(old, obj);
    CHECK(d.action == r.action);
    CHECK_FALSE(d.inProgress);
    CHECK_MESSAGE(d.reason.find(r.reason) != std::string::npos, d.reason);
  }
}

TEST_CASE("while a StatefulSet's update runs: re-target, end, abort, and the record kept") {
  json::Document old = Set();
  json::Document started =
      Patched(Set(kImage), admission::MutateStatefulSet(Update(old, Set(kImage)), {}));
  const std::string stored =
      std::string(*AsStatefulSet(started).annotation("inplace-webhook.io/in-progress"));

  SUBCASE("a further eligible change re-targets") {
    json::Document obj = With(
        started,
        R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"db:3"}])");
    rules::Decision d = Decide(started, obj);
    CHECK(d.action == Action::kRetarget);
    CHECK(ParseInProgress(*d.inProgress)->to == TemplateHash(AsStatefulSet(obj).podTemplate()));
    CHECK(ParseInProgress(*d.inProgress)->from == ParseInProgress(stored)->from);
  }
  SUBCASE("kubectl rollout undo writes the old template back: re-targeted in place") {
    json::Document obj = With(
        started,
        R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"db:1"}])");
    rules::Decision d = Decide(started, obj);
    CHECK(d.action == Action::kRetarget);
    CHECK(ParseInProgress(*d.inProgress)->to == ParseInProgress(stored)->from);
  }
  SUBCASE("a change that is not eligible ends it") {
    json::Document obj = With(started, kEnv);
    rules::Decision d = Decide(started, obj);
    CHECK(d.action == Action::kEnd);
    CHECK_FALSE(d.inProgress);
    CHECK(Joined(d.warnings).find("the rolling update replaces the pods") != std::string::npos);
    admission::Response m = admission::MutateStatefulSet(Update(started, obj), {});
    CHECK(m.patch.find("\"op\":\"remove\"") != std::string::npos);
  }
  SUBCASE("OnDelete ends it") {
    json::Document obj = With(
        started, R"([{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}}])");
    CHECK(Decide(started, obj).action == Action::kEnd);
  }
  SUBCASE("a hand edit of the record is refused by the validator and restored by the mutator") {
    json::Document obj = With(
        started,
        R"([{"op":"replace","path":"/metadata/annotations/inplace-webhook.io~1in-progress","value":"{}"}])");
    admission::Response v = admission::ValidateStatefulSet(Update(started, obj), {});
    CHECK_FALSE(v.allowed);
    CHECK(v.message.find("kubectl annotate sts/web inplace-webhook.io/abort=true -n db") !=
          std::string::npos);
    json::Document fixed = Patched(obj, admission::MutateStatefulSet(Update(started, obj), {}));
    CHECK(AsStatefulSet(fixed).annotation("inplace-webhook.io/in-progress") == stored);
  }
  SUBCASE("the abort with no loop known to run ends it in the webhook") {
    json::Document obj = With(
        started,
        R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1abort","value":"true"}])");
    CHECK(Decide(started, obj, /*loopAlive=*/false).action == Action::kEnd);
    rules::Decision d = Decide(started, obj, /*loopAlive=*/true);
    CHECK(d.action == Action::kKeep);
    CHECK(ParseInProgress(*d.inProgress)->abortRequestedAt == "2026-12-06T19:00:00Z");
  }
  SUBCASE("the undo command is taken out with a word") {
    json::Document obj = With(
        started,
        R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1undo","value":"true"}])");
    rules::Decision d = Decide(started, obj);
    CHECK(d.dropUndoCommand);
    CHECK(Joined(d.warnings).find("kubectl rollout undo sts/web") != std::string::npos);
  }
  SUBCASE("pause=true holds the update, pause=false lets it go on; each a fixed point") {
    const std::string pauseOp =
        R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1pause","value":"%s"}])";
    auto command = [&](const json::Value& from, const char* value) {
      std::string op = pauseOp;
      op.replace(op.find("%s"), 2, value);
      return With(from, op);
    };
    json::Document asked = command(started, "true");
    rules::Decision d = Decide(started, asked);
    CHECK(d.dropPauseCommand);
    REQUIRE(d.inProgress);
    CHECK_FALSE(ParseInProgress(*d.inProgress)->pausedByUs);  // the planner's user pause
    CHECK(ParseInProgress(*d.inProgress)->to == ParseInProgress(stored)->to);
    CHECK(Joined(d.warnings)
              .find("in-place update paused: no further pod starts until kubectl "
                    "inplace resume sts/web") != std::string::npos);
    // The mutator's output: the command gone, the record held; deciding again changes nothing and
    // the validator admits it (and refuses the command left in place).
    admission::Response m = admission::MutateStatefulSet(Update(started, asked), {});
    REQUIRE(m.allowed);
    json::Document paused = Patched(asked, m);
    CHECK_FALSE(AsStatefulSet(paused).annotation("inplace-webhook.io/pause"));
    CHECK(admission::MutateStatefulSet(Update(started, paused), {}).patch.empty());
    CHECK(admission::ValidateStatefulSet(Update(started, paused), {}).allowed);
    CHECK_FALSE(admission::ValidateStatefulSet(Update(started, asked), {}).allowed);
    // Stored paused, a later write keeps it paused; pause=false resumes.
    CHECK_FALSE(ParseInProgress(*Decide(paused, With(paused, R"([])")).inProgress)->pausedByUs);
    json::Document resume = command(paused, "false");
    rules::Decision r = Decide(paused, resume);
    CHECK(r.dropPauseCommand);
    CHECK(ParseInProgress(*r.inProgress)->pausedByUs);
    CHECK(Joined(r.warnings).find("in-place update resumed: it goes on") != std::string::npos);
    json::Document resumed =
        Patched(resume, admission::MutateStatefulSet(Update(paused, resume), {}));
    CHECK(admission::ValidateStatefulSet(Update(paused, resumed), {}).allowed);
    CHECK(AsStatefulSet(resumed).annotation("inplace-webhook.io/in-progress") == stored);
  }
}

TEST_CASE("a StatefulSet's pause command with no update running is taken out with a word") {
  json::Document old = Set();
  json::Document obj = With(
      old,
      R"([{"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/pause":"true"}}])");
  rules::Decision d = Decide(old, obj);
  CHECK(d.dropPauseCommand);
  CHECK_FALSE(d.inProgress);
  CHECK(Joined(d.warnings).find("no in-place update runs on sts/web to pause or resume") !=
        std::string::npos);
}

TEST_CASE("a pod DELETE is refused only on the hold's answer") {
  const std::string pod =
      R"({"metadata":{"name":"web-2","namespace":"db","uid":"u-pod",
          "labels":{"inplace-webhook.io/enabled":"true","controller-revision-hash":"web-aaa"},
          "ownerReferences":[{"kind":"StatefulSet","name":"web","uid":"u-web","controller":true}]},
          "status":{"phase":"Running"}})";
  json::Document d = Parse(pod);
  admission::Request r;
  r.uid = "u-2";
  r.kind = {"", "v1", "Pod"};
  r.resource = "pods";
  r.name = "web-2";
  r.namespaceName = "db";
  r.operation = Operation::kDelete;
  r.username = "system:serviceaccount:kube-system:statefulset-controller";
  r.oldObject = &d;
  admission::Context ctx;
  std::vector<statefulset_hold::PodFacts> asked;
  std::optional<statefulset_hold::Answer> answer = statefulset_hold::Answer{true, "held: why"};
  ctx.askHold = [&](const statefulset_hold::PodFacts& f) {
    asked.push_back(f);
    return answer;
  };
  admission::Response res = admission::HoldPodDeletion(r, ctx);
  CHECK_FALSE(res.allowed);
  CHECK(res.code == 403);
  CHECK(res.message == "held: why");
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].setName == "web");

  answer = statefulset_hold::Answer{false, "released"};
  CHECK(admission::HoldPodDeletion(r, ctx).allowed);
  answer.reset();  // no answer: the DELETE goes through
  CHECK(admission::HoldPodDeletion(r, ctx).allowed);

  asked.clear();
  r.username = "alice";  // a user's delete is never even asked about
  CHECK(admission::HoldPodDeletion(r, ctx).allowed);
  CHECK(asked.empty());
  r.username = ctx.statefulSetControllerUser;
  ctx.askHold = nullptr;  // no way to ask: through
  CHECK(admission::HoldPodDeletion(r, ctx).allowed);
  json::Document bad = Parse(R"({"metadata":{"labels":3}})");
  r.oldObject = &bad;  // unreadable: never blocks a deletion
  ctx.askHold = [&](const statefulset_hold::PodFacts&) { return answer; };
  CHECK(admission::HoldPodDeletion(r, ctx).allowed);
}
