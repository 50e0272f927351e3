// Deployment admission (DESIGN.md §4.1, §4.2, §4a): the in-place decision, the mutator that applies
// it and the validator that admits only its fixed points; plus the in-progress record and the
// Deployment facts they read.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "hooks/budget.h"
#include "hooks/deployment_rules.h"
#include "hooks/in_progress.h"
#include "hooks/workload_admission.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "lib/rfc3339.h"
#include "tests/unit/test_json.h"

using namespace iw;
using admission::Operation;
using Action = deployment::Decision::Action;

namespace {

using test::AsDeployment;
using test::Parse;

// An opted-in Deployment whose last rollout finished: 3 replicas, all updated.
constexpr std::string_view kDeployment = R"({
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web", "namespace": "shop", "generation": 3, "resourceVersion": "4711",
               "labels": {"inplace-webhook.io/enabled": "true"},
               "annotations": {"deployment.kubernetes.io/revision": "2"}},
  "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
           "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
           "template": {"metadata": {"creationTimestamp": null,
                                     "labels": {"app": "web", "inplace-webhook.io/enabled": "true"}},
                        "spec": {"containers": [{"name": "app", "image": "nginx:1.25",
                                                 "imagePullPolicy": "IfNotPresent"}],
                                 "restartPolicy": "Always"}}},
  "status": {"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
             "availableReplicas": 3}
})";

constexpr std::string_view kImage =
    R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"}])";
constexpr std::string_view kImage2 =
    R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.28"}])";
constexpr std::string_view kEnv =
    R"([{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"A","value":"b"}]}])";
constexpr std::string_view kUnpause = R"([{"op":"replace","path":"/spec/paused","value":false}])";
constexpr std::string_view kPause = R"([{"op":"add","path":"/spec/paused","value":true}])";
// A spec write the Deployment controller has not observed yet (generation 3 observed, 4 stored).
constexpr std::string_view kGenerationAhead =
    R"([{"op":"replace","path":"/metadata/generation","value":4}])";
// kubectl scale 3 -> 5, observed: the ReplicaSet scaled, its two new pods not created yet.
constexpr std::string_view kScaledUp = R"([{"op":"replace","path":"/spec/replicas","value":5}])";
constexpr std::string_view kRecreate =
    R"([{"op":"replace","path":"/spec/strategy","value":{"type":"Recreate"}}])";

json::Document With(const json::Value& base, std::string_view patch) {
  json::Document doc;
  doc.CopyFrom(base, doc.GetAllocator());
  if (patch.empty()) return doc;
  json::Document ops = Parse(patch);
  Status err = json_patch::Apply(ops, doc);
  REQUIRE_MESSAGE(err.ok(), (std::string(patch) + ": " + err.message()));
  return doc;
}

json::Document Deployment(std::string_view patch = "") {
  return With(Parse(kDeployment), patch);
}

std::string SetAnnotation(std::string_view key, std::string_view value) {
  json::Document op = Parse(R"([{"op":"add","path":"","value":""}])");
  std::string path = "/metadata/annotations/" + json::EscapePointerToken(key);
  op[0]["path"].SetString(path.c_str(), static_cast<rapidjson::SizeType>(path.size()),
                          op.GetAllocator());
  op[0]["value"].SetString(value.data(), static_cast<rapidjson::SizeType>(value.size()),
                           op.GetAllocator());
  return json::Serialize(op);
}

constexpr std::string_view kInProgressKey = "inplace-webhook.io/in-progress";

std::string HashOf(const json::Value& d) {
  return TemplateHash(test::AsTemplate(*json::Path(&d, {"spec", "template"})));
}

// The stored object of a running in-place update from kDeployment to its image 1.27.
json::Document Running(bool pausedByUs = true) {
  json::Document before = Deployment();
  json::Document d = Deployment(kImage);
  InProgress record{HashOf(before), HashOf(d), pausedByUs, "2026-11-29T17:00:00Z"};
  d = With(d, kPause);
  return With(d, SetAnnotation(kInProgressKey, SerializeInProgress(record)));
}

const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1795975200));
constexpr std::string_view kNowText = "2026-11-29T18:00:00Z";

admission::Context Ctx(int secondsLater = 0, bool loopAlive = true) {
  admission::Context ctx;
  ctx.controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
  ctx.now = kNow + std::chrono::seconds(secondsLater);
  ctx.loopAlive = loopAlive;
  return ctx;
}

// The rules' facts, as the webhooks fill them from their context.
deployment::Facts FactsOf(const admission::Context& ctx) {
  return {ctx.now, ctx.loopAlive, ctx.resize};
}
admission::Request Update(const json::Value& oldObject, const json::Value& object,
                          std::string user = "alice") {
  admission::Request r;
  r.uid = "u-1";
  r.kind = {"apps", "v1", "Deployment"};
  r.resource = "deployments";
  r.name = "web";
  r.namespaceName = "shop";
  r.operation = Operation::kUpdate;
  r.username = std::move(user);
  r.object = &object;
  r.oldObject = &oldObject;
  return r;
}

// The request object with the response's patch applied.
json::Document Patched(const json::Value& object, const admission::Response& r) {
  json::Document out;
  out.CopyFrom(object, out.GetAllocator());
  if (r.patch.empty()) return out;
  json::Document ops = Parse(r.patch);
  Status err = json_patch::Apply(ops, out);
  REQUIRE_MESSAGE(err.ok(), err.message());
  return out;
}

std::string InProgressText(const json::Value& d) {
  return std::string(kube::AnnotationOf(d, kInProgressKey).value_or(""));
}

InProgress RecordOf(const json::Value& d) {
  StatusOr<std::optional<InProgress>> r = ReadInProgress(AsDeployment(d));
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  REQUIRE(r->has_value());
  return **r;
}

bool AnyContains(const std::vector<std::string>& list, std::string_view part) {
  for (const auto& s : list) {
    if (s.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// ---- the in-progress record ----

TEST_CASE("in-progress record: serialise in a fixed key order, parse back, reject other shapes") {
  InProgress r{"4d21772ec1", "0123456789", false, "2026-11-29T18:00:00Z"};
  const std::string text = SerializeInProgress(r);
  CHECK(
      text ==
      R"({"from":"4d21772ec1","to":"0123456789","pausedByUs":false,"startedAt":"2026-11-29T18:00:00Z"})");
  StatusOr<InProgress> parsed = ParseInProgress(text);
  REQUIRE(parsed.ok());
  CHECK(*parsed == r);
  for (const char* bad :
       {"", "{", "[]", R"({"from":"a","to":"b","pausedByUs":"yes","startedAt":"t"})",
        R"({"from":"","to":"b","pausedByUs":true,"startedAt":"t"})",
        R"({"to":"b","pausedByUs":true,"startedAt":"t"})"}) {
    const std::string text2 = bad;
    CAPTURE(text2);
    const Status st = ParseInProgress(text2).status();
    CHECK_FALSE(st.ok());
    CHECK_FALSE(st.message().empty());
  }
}

TEST_CASE(
    "TemplateHash: SHA-256 of the canonical template without pod-template-hash, 10 hex digits") {
  // Known value, computed independently: python3 json.dumps(sort_keys=True, separators=(",",":"))
  // then hashlib.sha256(...).hexdigest()[:10].
  json::Document t = Parse(R"({"spec":{"containers":[{"name":"app","image":"nginx:1.25"}]},
                               "metadata":{"labels":{"pod-template-hash":"5d4f8c7b9","app":"web"}}})");
  CHECK(TemplateHash(test::AsTemplate(t)) == "4d21772ec1");
  json::Document reordered = Parse(R"({"metadata":{"labels":{"app":"web"}},
                                       "spec":{"containers":[{"image":"nginx:1.25","name":"app"}]}})");
  CHECK(TemplateHash(test::AsTemplate(reordered)) == "4d21772ec1");
  json::Document other = Parse(R"({"metadata":{"labels":{"app":"web"}},
                                   "spec":{"containers":[{"image":"nginx:1.27","name":"app"}]}})");
  CHECK(TemplateHash(test::AsTemplate(other)) != "4d21772ec1");
  // Only the hash label present: the same as no labels at all.
  CHECK(TemplateHash(
            test::AsTemplate(Parse(R"({"metadata":{"labels":{"pod-template-hash":"x"}}})"))) ==
        TemplateHash(test::AsTemplate(Parse(R"({"metadata":{}})"))));
}

// ---- Deployment facts ----

TEST_CASE("RolloutComplete: observed generation caught up and every replica updated") {
  struct Row {
    const char* name;
    const char* patch;
    bool complete;
  };
  const std::vector<Row> rows = {
      {"finished", "", true},
      {"generation not observed yet",
       R"([{"op":"replace","path":"/metadata/generation","value":4}])", false},
      {"observed ahead", R"([{"op":"replace","path":"/status/observedGeneration","value":4}])",
       true},
      {"one replica not updated",
       R"([{"op":"replace","path":"/status/updatedReplicas","value":2}])", false},
      {"scaling up", R"([{"op":"replace","path":"/spec/replicas","value":5}])", false},
      {"surge pod still there", R"([{"op":"replace","path":"/status/replicas","value":4}])", false},
      {"no status yet", R"([{"op":"remove","path":"/status"}])", false},
      {"replicas absent = 1", R"([{"op":"remove","path":"/spec/replicas"},
          {"op":"replace","path":"/status/replicas","value":1},{"op":"replace","path":"/status/updatedReplicas","value":1}])",
       true},
      {"scaled to zero",
       R"([{"op":"replace","path":"/spec/replicas","value":0},
           {"op":"replace","path":"/status/replicas","value":0},
           {"op":"replace","path":"/status/updatedReplicas","value":0}])",
       true},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    CHECK(test::AsDeployment(Deployment(row.patch)).ControllerCaughtUp() == row.complete);
  }
}

TEST_CASE("ResolveMaxUnavailable resolves like the Deployment controller, maxSurge ignored") {
  struct Row {
    const char* strategy;
    long long replicas;
    long long expected;
  };
  const std::vector<Row> rows = {
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}})", 3,
       0},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}})", 4,
       1},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}})", 10,
       2},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}})", 10, 0},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":2}})", 10, 2},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"100%"}})", 7, 7},
      {R"({"type":"RollingUpdate"})", 8, 2},
      {R"({})", 8, 2},
      {R"({"type":"Recreate"})", 5, 5},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"x%"}})", 8, 0},
      {R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"3"}})", 8, 0},
  };
  for (const Row& row : rows) {
    const std::string strategy = row.strategy;
    CAPTURE(strategy);
    json::Document d =
        Deployment(R"([{"op":"replace","path":"/spec/strategy","value":)" + strategy +
                   R"(},{"op":"replace","path":"/spec/replicas","value":)" +
                   std::to_string(row.replicas) + "}]");
    CHECK(budget::ResolveMaxUnavailable(test::AsDeployment(d)) == row.expected);
  }
}

TEST_CASE("CheckDeploymentShape names the first field with a type Kubernetes never sends") {
  struct Row {
    const char* patch;
    const char* message;  // nullptr: fine
  };
  const std::vector<Row> rows = {
      {"", nullptr},
      {R"([{"op":"replace","path":"/metadata/labels","value":["a"]}])",
       "object.metadata.labels must be an object of string values, got array"},
      {R"([{"op":"replace","path":"/metadata/annotations","value":{"a":1}}])",
       "object.metadata.annotations[\"a\"] must be a string, got number"},
      {R"([{"op":"add","path":"/metadata/finalizers","value":["f",null]}])",
       "object.metadata.finalizers[1] must be a string, got null"},
      {R"([{"op":"replace","path":"/spec/replicas","value":"3"}])",
       "object.spec.replicas must be an integer, got string"},
      {R"([{"op":"add","path":"/spec/paused","value":"true"}])",
       "object.spec.paused must be a boolean, got string"},
      {R"([{"op":"replace","path":"/spec/template/metadata/labels","value":"app=web"}])",
       "object.spec.template.metadata.labels must be an object of string values, got string"},
      {R"([{"op":"replace","path":"/spec/template/spec/containers","value":{"name":"app"}}])",
       "object.spec.template.spec.containers must be an array of containers, got object"},
      {R"([{"op":"replace","path":"/spec/template/spec/containers","value":[{"image":"x"}]}])",
       "object.spec.template.spec.containers[0].name must be a string"},
      {R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":5}])",
       "object.spec.template.spec.containers[0].image must be a string, got number"},
      {R"([{"op":"add","path":"/spec/template/spec/readinessGates","value":["inplace-webhook.io/ready"]}])",
       "object.spec.template.spec.readinessGates[0] must be an object, got string"},
      {R"([{"op":"replace","path":"/status/replicas","value":1.5}])",
       "object.status.replicas must be an integer, got number"},
      {R"([{"op":"add","path":"/spec/paused","value":null}])", nullptr},
      {R"([{"op":"replace","path":"/metadata","value":[]}])",
       "object.metadata must be an object, got array"},
  };
  for (const Row& row : rows) {
    const std::string patch = row.patch;
    CAPTURE(patch);
    Status s = kube::CheckDeploymentShape(Deployment(row.patch), "object");
    if (row.message == nullptr) {
      CHECK(s.ok());
    } else {
      REQUIRE_FALSE(s.ok());
      CHECK(s.message() == std::string(row.message));
    }
  }
  CHECK(kube::CheckDeploymentShape(Parse("[]"), "request.object").message() ==
        "request.object must be an object, got array");
}

// ---- the mutating decision ----

TEST_CASE("an eligible change of a finished rollout starts an in-place update") {
  json::Document old = Deployment();
  json::Document obj = Deployment(kImage);
  admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
  REQUIRE(r.allowed);
  REQUIRE_FALSE(r.patch.empty());
  json::Document out = Patched(obj, r);
  CHECK(test::AsDeployment(out).paused());
  InProgress record = RecordOf(out);
  CHECK(record.from == HashOf(old));
  CHECK(record.to == HashOf(obj));
  CHECK(record.pausedByUs);
  CHECK(record.startedAt == kNowText);
  // Nothing else changed: the template stays as the user wrote it.
  json::Document expected = With(obj, kPause);
  expected["metadata"]["annotations"].AddMember(
      json::Value(kInProgressKey.data(), expected.GetAllocator()),
      json::Value(InProgressText(out).c_str(), expected.GetAllocator()), expected.GetAllocator());
  CHECK(json::SerializeCanonical(out) == json::SerializeCanonical(expected));
  // The second warning names the undo path; 25% of 3 replicas is 0: the third explains what that
  // means in place.
  REQUIRE(r.warnings.size() == 3);
  CHECK(r.warnings[0] ==
        "in-place update: 3 pods will be updated without restart of unchanged containers; rollout "
        "paused until done");
  CHECK(r.warnings[1] ==
        "kubectl rollout undo refuses a paused Deployment; to undo: kubectl annotate deploy/web "
        "inplace-webhook.io/undo=true");
}

TEST_CASE(
    "with no controller known to run the update starts all the same, and says how to end it") {
  json::Document old = Deployment();
  json::Document obj = Deployment(kImage);
  admission::Response alive = admission::MutateDeployment(Update(old, obj), Ctx(0, true));
  admission::Response none = admission::MutateDeployment(Update(old, obj), Ctx(0, false));
  REQUIRE(none.allowed);
  CHECK(none.patch == alive.patch);  // the same start: paused, the same record
  CHECK_FALSE(AnyContains(alive.warnings, "no inplace-webhook controller"));
  REQUIRE(none.warnings.size() == alive.warnings.size() + 2);
  CHECK(none.warnings[none.warnings.size() - 2] ==
        "in-place update: no inplace-webhook controller is known to run; the update waits until "
        "one does");
  CHECK(none.warnings.back() ==
        "to end it now: kubectl annotate deploy/web inplace-webhook.io/abort=true -n shop");
}

TEST_CASE(
    "maxUnavailable resolving to 0 adds a warning: one pod at a time, changed containers restart") {
  json::Document old = Deployment(
      R"([{"op":"replace","path":"/spec/strategy/rollingUpdate/maxUnavailable","value":0}])");
  json::Document obj = With(old, kImage);
  admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
  REQUIRE(r.warnings.size() == 3);
  CHECK(r.warnings[2].find("maxUnavailable is 0") != std::string::npos);
  CHECK(r.warnings[2].find("one at a time") != std::string::npos);
  CHECK(r.warnings[2].find("restarts") != std::string::npos);
  for (const auto& w : r.warnings) CHECK(w.size() <= 120);
  json::Document one = Deployment(
      R"([{"op":"replace","path":"/spec/strategy/rollingUpdate/maxUnavailable","value":1}])");
  json::Document oneObj = With(one, kImage);
  CHECK(admission::MutateDeployment(Update(one, oneObj), Ctx()).warnings.size() == 2);
}

TEST_CASE("a Deployment the user paused: the update starts but pausedByUs is false") {
  json::Document old = Deployment(kPause);
  json::Document obj = With(old, kImage);
  admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
  json::Document out = Patched(obj, r);
  CHECK(test::AsDeployment(out).paused());
  CHECK_FALSE(RecordOf(out).pausedByUs);
}

TEST_CASE("pausedByUs comes from the stored object; a user's write can only hold the update") {
  // The user writes an in-progress claiming pausedByUs:true on a Deployment the user paused: the
  // loop would unpause it at the end. Refused: the record says the user holds the pause.
  json::Document old = Deployment(kPause);
  InProgress forged{HashOf(old), HashOf(Deployment(kImage)), true, "2026-01-01T00:00:00Z"};
  json::Document obj = With(With(Deployment(kImage), kPause),
                            SetAnnotation(kInProgressKey, SerializeInProgress(forged)));
  json::Document out = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
  CHECK_FALSE(RecordOf(out).pausedByUs);
  CHECK(RecordOf(out).startedAt == kNowText);
  // pausedByUs:false on an unpaused one is a pause issued with the change (the pause command's
  // result, seen again on re-invocation): the update starts held.
  json::Document old2 = Deployment();
  forged.pausedByUs = false;
  json::Document obj2 =
      With(Deployment(kImage), SetAnnotation(kInProgressKey, SerializeInProgress(forged)));
  CHECK_FALSE(
      RecordOf(Patched(obj2, admission::MutateDeployment(Update(old2, obj2), Ctx()))).pausedByUs);
  // An in-progress written with a change that is not in-place is removed.
  json::Document envObj =
      With(Deployment(kEnv), SetAnnotation(kInProgressKey, SerializeInProgress(forged)));
  json::Document envOut = Patched(envObj, admission::MutateDeployment(Update(old2, envObj), Ctx()));
  CHECK(InProgressText(envOut).empty());
  CHECK_FALSE(test::AsDeployment(envOut).paused());
}

TEST_CASE("requests the mutator passes untouched: allowed, no patch, no warning") {
  json::Document old = Deployment();
  json::Document obj = Deployment(kImage);
  const json::Document running = Running();
  const json::Document runningUnpaused = With(With(running, kUnpause), kEnv);
  struct Row {
    const char* name;
    std::function<void(admission::Request&)> tweak;
  };
  const std::vector<Row> rows = {
      {"scale subresource", [](admission::Request& r) { r.subResource = "scale"; }},
      {"status subresource", [](admission::Request& r) { r.subResource = "status"; }},
      {"CREATE",
       [&](admission::Request& r) {
         r.operation = Operation::kCreate;
         r.oldObject = nullptr;
       }},
      {"DELETE",
       [&](admission::Request& r) {
         r.operation = Operation::kDelete;
         r.object = nullptr;
       }},
      {"controller user",
       [](admission::Request& r) {
         r.username = "system:serviceaccount:inplace-webhook:inplace-webhook";
       }},
      {"controller user unpausing a running update",
       [&](admission::Request& r) {
         r.username = "system:serviceaccount:inplace-webhook:inplace-webhook";
         r.oldObject = &running;
         r.object = &runningUnpaused;
       }},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    admission::Request req = Update(old, obj);
    row.tweak(req);
    admission::Response r = admission::MutateDeployment(req, Ctx());
    CHECK(r.allowed);
    CHECK(r.patch.empty());
    CHECK(r.warnings.empty());
  }
}

TEST_CASE("no in-place update starts: no patch, and a warning says why when the template changed") {
  struct Row {
    const char* name;
    const char* oldPatch;
    const char* change;
    const char* warning;  // nullptr: no warning
  };
  const std::vector<Row> rows = {
      {"change not eligible (env)", "", kEnv.data(),
       "in-place update not possible (spec.template.spec.containers[0].env changed): a normal "
       "rollout follows"},
      {"kubectl rollout restart", "",
       R"([{"op":"add","path":"/spec/template/metadata/annotations","value":{"kubectl.kubernetes.io/restartedAt":"2026-11-29T17:59:00Z"}}])",
       "spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'] changed"},
      {"previous rollout not complete",
       R"([{"op":"replace","path":"/status/updatedReplicas","value":1}])", kImage.data(),
       "the previous rollout is not complete"},
      {"a native rollout under way, not observed either",
       R"([{"op":"replace","path":"/metadata/generation","value":4},
           {"op":"replace","path":"/status/replicas","value":4}])",
       kImage.data(), "the previous rollout is not complete"},
      {"paused, then a template change observed: no ReplicaSet holds it",
       R"([{"op":"add","path":"/spec/paused","value":true},
           {"op":"replace","path":"/status/updatedReplicas","value":0}])",
       kImage.data(), "the previous rollout is not complete"},
      {"no pod runs yet",
       R"([{"op":"replace","path":"/status/replicas","value":0},
           {"op":"replace","path":"/status/updatedReplicas","value":0}])",
       kImage.data(), "in-place update not possible (no pod runs yet): a normal rollout follows"},
      {"strategy Recreate", kRecreate.data(), kImage.data(),
       "in-place update not possible (strategy Recreate never runs two templates at once): a "
       "normal rollout follows"},
      {"switched to Recreate with the change", "",
       R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/spec/strategy","value":{"type":"Recreate"}}])",
       "strategy Recreate never runs two templates at once"},
      {"template not opted in",
       R"([{"op":"remove","path":"/spec/template/metadata/labels/inplace-webhook.io~1enabled"}])",
       kImage.data(), "pod template lacks label inplace-webhook.io/enabled=true"},
      {"abort annotation set", "",
       R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"add","path":"/metadata/annotations/inplace-webhook.io~1abort","value":"true"}])",
       "inplace-webhook.io/abort is set"},
      {"no template change (scale)", "", R"([{"op":"replace","path":"/spec/replicas","value":5}])",
       nullptr},
      {"zero replicas",
       R"([{"op":"replace","path":"/spec/replicas","value":0},{"op":"replace","path":"/status/replicas","value":0},
           {"op":"replace","path":"/status/updatedReplicas","value":0}])",
       kImage.data(), nullptr},
      {"not opted in", R"([{"op":"remove","path":"/metadata/labels/inplace-webhook.io~1enabled"}])",
       kImage.data(), nullptr},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document old = Deployment(row.oldPatch);
    json::Document obj = With(old, row.change);
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    CHECK(r.allowed);
    CHECK(r.patch.empty());
    if (row.warning == nullptr) {
      CHECK(r.warnings.empty());
    } else {
      CHECK_MESSAGE(AnyContains(r.warnings, row.warning),
                    (r.warnings.empty() ? "" : r.warnings[0]));
    }
    for (const auto& w : r.warnings) CHECK(w.size() <= 120);
  }
}

TEST_CASE(
    "previous rollout complete: every pod the controller counts is of its newest ReplicaSet, "
    "whether or not it observed the newest generation (DESIGN.md §3)") {
  // Each row is the stored object right after a spec write that leaves the template alone, then
  // kubectl set image at once: the update starts in place.
  struct Row {
    const char* name;
    const char* stored;  // patch of kDeployment (status: observed generation 3, 3 of 3 updated)
    bool pausedByUs;
  };
  const std::vector<Row> rows = {
      {"kubectl rollout pause, not observed yet",
       R"([{"op":"add","path":"/spec/paused","value":true},
           {"op":"replace","path":"/metadata/generation","value":4}])",
       false},
      {"kubectl rollout pause, observed (as before)",
       R"([{"op":"add","path":"/spec/paused","value":true}])", false},
      {"kubectl scale 3 -> 5, not observed yet",
       R"([{"op":"replace","path":"/spec/replicas","value":5},
           {"op":"replace","path":"/metadata/generation","value":4}])",
       true},
      {"kubectl scale 3 -> 5, observed, 2 pods not created yet",
       R"([{"op":"replace","path":"/spec/replicas","value":5},
           {"op":"replace","path":"/metadata/generation","value":4},
           {"op":"replace","path":"/status/observedGeneration","value":4}])",
       true},
      {"scale 3 -> 5, 4 pods counted", R"([{"op":"replace","path":"/spec/replicas","value":5},
           {"op":"replace","path":"/status/replicas","value":4},
           {"op":"replace","path":"/status/updatedReplicas","value":4}])",
       true},
      {"scale-down 3 -> 2, not observed", R"([{"op":"replace","path":"/spec/replicas","value":2},
           {"op":"replace","path":"/metadata/generation","value":4}])",
       true},
      {"an HPA write (scale subresource) then a minReadySeconds change, neither observed",
       R"([{"op":"replace","path":"/spec/replicas","value":4},
           {"op":"add","path":"/spec/minReadySeconds","value":5},
           {"op":"replace","path":"/metadata/generation","value":5}])",
       true},
      {"our finish's unpause, not observed yet",
       R"([{"op":"replace","path":"/metadata/generation","value":4}])", true},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document old = Deployment(row.stored);
    json::Document obj = With(old, kImage);
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    json::Document out = Patched(obj, r);
    CHECK(test::AsDeployment(out).paused());
    REQUIRE_FALSE(InProgressText(out).empty());
    CHECK(RecordOf(out).from == HashOf(old));
    CHECK(RecordOf(out).pausedByUs == row.pausedByUs);
    CHECK_FALSE(AnyContains(r.warnings, "not possible"));
    CHECK(admission::ValidateDeployment(Update(old, out), Ctx(1)).allowed);
  }
}

TEST_CASE("a pause written with the change holds the update; the end leaves it paused (§8.5)") {
  // kubectl apply --server-side (Argo CD, Flux) of a manifest with spec.paused: true and a new
  // image: upstream never rolls a paused Deployment out.
  const json::Document old = Deployment();
  const json::Document obj = With(Deployment(kImage), kPause);
  admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
  json::Document out = Patched(obj, r);
  CHECK(test::AsDeployment(out).paused());
  CHECK_FALSE(RecordOf(out).pausedByUs);
  CHECK(RecordOf(out).startedAt == kNowText);
  CHECK(admission::ValidateDeployment(Update(old, out), Ctx(1)).allowed);
  SUBCASE("the same apply again while held: nothing changes") {
    admission::Response again = admission::MutateDeployment(Update(out, out), Ctx(5));
    CHECK(again.patch.empty());
    CHECK(admission::ValidateDeployment(Update(out, out), Ctx(5)).allowed);
  }
  SUBCASE("the user's unpause (kubectl rollout resume, or the apply with paused: false) resumes") {
    json::Document resumed = With(out, kUnpause);
    json::Document after =
        Patched(resumed, admission::MutateDeployment(Update(out, resumed), Ctx(5)));
    CHECK(test::AsDeployment(after).paused());
    CHECK(RecordOf(after).pausedByUs);
  }
  SUBCASE("an end while held (an env change) leaves the user's pause") {
    json::Document env = With(out, kEnv);
    json::Document after = Patched(env, admission::MutateDeployment(Update(out, env), Ctx(5)));
    CHECK(InProgressText(after).empty());
    CHECK(test::AsDeployment(after).paused());
  }
  SUBCASE("re-invoked after a later webhook made the change ineligible: the user's pause stays") {
    json::Document later = With(out, kEnv);
    json::Document again = Patched(later, admission::MutateDeployment(Update(old, later), Ctx(1)));
    CHECK(InProgressText(again).empty());
    CHECK(test::AsDeployment(again).paused());
    CHECK(admission::ValidateDeployment(Update(old, again), Ctx(2)).allowed);
  }
  SUBCASE("a pause written with a change that is not in place: nothing of ours") {
    json::Document envPaused = With(Deployment(kEnv), kPause);
    admission::Response e = admission::MutateDeployment(Update(old, envPaused), Ctx());
    CHECK(e.patch.empty());
  }
  SUBCASE("our own output: its pause is ours, pausedByUs true is kept on re-invocation") {
    json::Document plain = Deployment(kImage);
    json::Document first = Patched(plain, admission::MutateDeployment(Update(old, plain), Ctx()));
    REQUIRE(RecordOf(first).pausedByUs);
    deployment::Decision d =
        deployment::Decide(AsDeployment(old), AsDeployment(first), FactsOf(Ctx(1)));
    CHECK(d.action == Action::kStart);
    CHECK(deployment::Conforms(d, test::AsDeployment(first)));
  }
}

TEST_CASE("strategy Recreate: never in place; a running update ends when it switches (§3.2)") {
  SUBCASE("Recreate -> RollingUpdate in the same write as the image: in place") {
    json::Document old = Deployment(kRecreate);
    json::Document obj = Deployment(kImage);
    json::Document out = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
    CHECK_FALSE(InProgressText(out).empty());
  }
  SUBCASE("a running update switched to Recreate ends; the pause we added is taken back") {
    json::Document old = Running();
    json::Document obj = With(old, kRecreate);
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    json::Document out = Patched(obj, r);
    CHECK(InProgressText(out).empty());
    CHECK_FALSE(test::AsDeployment(out).paused());
    CHECK(r.warnings == std::vector<std::string>{
                            "in-place update ended (strategy Recreate): a normal rollout follows"});
    CHECK(admission::ValidateDeployment(Update(old, out), Ctx(1)).allowed);
    // The write as it was (still in progress) is not a fixed point: denied with the reason.
    admission::Response v = admission::ValidateDeployment(Update(old, obj), Ctx(1));
    CHECK_FALSE(v.allowed);
    CHECK(v.message.find("ends the in-place update") != std::string::npos);
  }
  SUBCASE("the user's pause stays") {
    json::Document old = Running(/*pausedByUs=*/false);
    json::Document obj = With(old, kRecreate);
    json::Document out = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
    CHECK(InProgressText(out).empty());
    CHECK(test::AsDeployment(out).paused());
  }
}

TEST_CASE("while an update runs, every write keeps paused and the in-progress record as stored") {
  const json::Document old = Running();
  struct Row {
    const char* name;
    const char* change;
    bool warns;
  };
  const std::vector<Row> rows = {
      {"no change at all", "", false},
      {"scale", R"([{"op":"replace","path":"/spec/replicas","value":5}])", false},
      {"kubectl rollout resume", kUnpause.data(), true},
      {"in-progress removed",
       R"([{"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1in-progress"}])", true},
      {"in-progress edited", nullptr, true},
      {"abort requested with a non-eligible change",
       R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1abort","value":"true"},
           {"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"A","value":"b"}]}])",
       false},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document obj =
        row.change != nullptr
            ? With(old, row.change)
            : With(
                  old,
                  SetAnnotation(
                      kInProgressKey,
                      R"({"from":"x","to":"y","pausedByUs":false,"startedAt":"2020-01-01T00:00:00Z"})"));
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    CHECK(r.allowed);
    json::Document out = Patched(obj, r);
    CHECK(test::AsDeployment(out).paused());
    InProgress expected = RecordOf(old);
    // The abort's first admission stamps its time into the record (DESIGN.md §9.8), nothing else.
    if (name.starts_with("abort")) expected.abortRequestedAt = std::string(kNowText);
    CHECK(InProgressText(out) == SerializeInProgress(expected));
    CHECK(AnyContains(r.warnings,
                      "kubectl annotate deploy/web inplace-webhook.io/abort=true -n shop") ==
          row.warns);
  }
}

TEST_CASE(
    "a further eligible change re-targets the running update; from, pausedByUs, startedAt kept") {
  const json::Document old = Running(/*pausedByUs=*/false);
  json::Document obj = With(old, kImage2);
  admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
  json::Document out = Patched(obj, r);
  InProgress before = RecordOf(old);
  InProgress after = RecordOf(out);
  CHECK(after.from == before.from);
  CHECK(after.to == HashOf(obj));
  CHECK(after.to != before.to);
  CHECK_FALSE(after.pausedByUs);
  CHECK(after.startedAt == before.startedAt);
  CHECK(test::AsDeployment(out).paused());
  CHECK(AnyContains(r.warnings, "re-targeted"));
  CHECK(json::SerializeCanonical(*json::Path(&out, {"spec", "template"})) ==
        json::SerializeCanonical(*json::Path(&obj, {"spec", "template"})));
}

TEST_CASE(
    "a change that is not eligible ends the running update; paused restored only if we paused") {
  SUBCASE("we paused it: unpaused, record removed") {
    const json::Document old = Running(true);
    json::Document obj = With(old, kEnv);
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    json::Document out = Patched(obj, r);
    CHECK_FALSE(test::AsDeployment(out).paused());
    CHECK(InProgressText(out).empty());
    CHECK(AnyContains(r.warnings,
                      "in-place update ended (spec.template.spec.containers[0].env changed)"));
  }
  SUBCASE("the user paused it: paused stays as the user wrote it") {
    const json::Document old = Running(false);
    json::Document obj = With(old, kEnv);
    json::Document out = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
    CHECK(test::AsDeployment(out).paused());
    CHECK(InProgressText(out).empty());
    json::Document unpaused = With(obj, kUnpause);
    json::Document out2 =
        Patched(unpaused, admission::MutateDeployment(Update(old, unpaused), Ctx()));
    CHECK_FALSE(test::AsDeployment(out2).paused());
  }
  SUBCASE("opt-out: the Deployment label removed") {
    const json::Document old = Running(true);
    json::Document obj =
        With(old, R"([{"op":"remove","path":"/metadata/labels/inplace-webhook.io~1enabled"}])");
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    json::Document out = Patched(obj, r);
    CHECK_FALSE(test::AsDeployment(out).paused());
    CHECK(InProgressText(out).empty());
    CHECK(AnyContains(r.warnings, "a normal rollout follows"));
  }
}

TEST_CASE("a malformed stored record is kept for the loop to abort") {
  json::Document old = With(Deployment(kPause), SetAnnotation(kInProgressKey, "garbage"));
  json::Document obj = With(With(old, kUnpause), kEnv);
  deployment::Decision d = deployment::Decide(AsDeployment(old), AsDeployment(obj), FactsOf(Ctx()));
  CHECK(d.action == Action::kKeep);
  json::Document out = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
  CHECK(test::AsDeployment(out).paused());
  CHECK(InProgressText(out) == "garbage");
}

namespace {

// Every scenario the decision distinguishes, as (stored, written) pairs.
struct Scenario {
  const char* name;
  json::Document old, obj;
  Action action;
};

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> out;
  auto add = [&](const char* name, json::Document old, json::Document obj, Action action) {
    out.push_back({name, std::move(old), std::move(obj), action});
  };
  add("start", Deployment(), Deployment(kImage), Action::kStart);
  add("start, user paused", Deployment(kPause), With(Deployment(kPause), kImage), Action::kStart);
  add("none (env)", Deployment(), Deployment(kEnv), Action::kNone);
  add("none (scale)", Deployment(),
      Deployment(R"([{"op":"replace","path":"/spec/replicas","value":4}])"), Action::kNone);
  add("ignore (not opted in)", Deployment(R"([{"op":"remove","path":"/metadata/labels"}])"),
      Deployment(R"([{"op":"remove","path":"/metadata/labels"}])"), Action::kIgnore);
  add("keep (resume)", Running(), With(Running(), kUnpause), Action::kKeep);
  add("keep (annotation dropped)", Running(),
      With(Running(),
           R"([{"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1in-progress"}])"),
      Action::kKeep);
  add("retarget", Running(), With(Running(), kImage2), Action::kRetarget);
  add("retarget, user paused", Running(false), With(Running(false), kImage2), Action::kRetarget);
  add("end", Running(), With(Running(), kEnv), Action::kEnd);
  add("end, user paused", Running(false), With(Running(false), kEnv), Action::kEnd);
  add("start, paused in the same write", Deployment(), With(Deployment(kImage), kPause),
      Action::kStart);
  add("start, pause not observed yet", With(Deployment(kPause), kGenerationAhead),
      With(With(Deployment(kPause), kGenerationAhead), kImage), Action::kStart);
  add("start, scale-up pods being created", Deployment(kScaledUp),
      With(Deployment(kScaledUp), kImage), Action::kStart);
  add("none (Recreate)", Deployment(kRecreate), With(Deployment(kRecreate), kImage), Action::kNone);
  add("end (switched to Recreate)", Running(), With(Running(), kRecreate), Action::kEnd);
  add("end (switched to Recreate), user paused", Running(false), With(Running(false), kRecreate),
      Action::kEnd);
  return out;
}

}  // namespace

TEST_CASE("idempotent: answering its own output again changes nothing, even a second later") {
  for (const Scenario& s : Scenarios()) {
    const std::string name = s.name;
    CAPTURE(name);
    CHECK(deployment::Decide(AsDeployment(s.old), AsDeployment(s.obj), FactsOf(Ctx())).action ==
          s.action);
    json::Document first = Patched(s.obj, admission::MutateDeployment(Update(s.old, s.obj), Ctx()));
    admission::Response again = admission::MutateDeployment(Update(s.old, first), Ctx(1));
    CHECK(again.allowed);
    CHECK_MESSAGE(again.patch.empty(), again.patch);
    deployment::Decision d =
        deployment::Decide(AsDeployment(s.old), AsDeployment(first), FactsOf(Ctx(1)));
    CHECK(d.action == s.action);
    CHECK(deployment::Conforms(d, test::AsDeployment(first)));
  }
}

TEST_CASE("the mutator leaves the request object as it came and patches as a full copy would") {
  // Beyond the scenarios: every command Apply drops, the restartedAt it adds to the template (an
  // A->B->A update the webhook ends, no loop running) and annotations it creates; `reaches` names
  // the write each of them is there for.
  std::vector<Scenario> cases = Scenarios();
  const std::map<std::string, std::vector<std::string>> reaches = {
      {"end, pause and undo commands",
       {R"("op":"remove","path":"/metadata/annotations/inplace-webhook.io~1pause")",
        R"("op":"remove","path":"/metadata/annotations/inplace-webhook.io~1undo")"}},
      {"abort back at the start", {"/spec/template/metadata/annotations"}},
      {"the abort left behind, consumed",
       {R"("op":"remove","path":"/metadata/annotations/inplace-webhook.io~1abort")"}},
      {"start, no annotations", {R"("op":"add","path":"/metadata/annotations")"}}};
  const std::string pause = SetAnnotation("inplace-webhook.io/pause", "true");
  const std::string undo = SetAnnotation("inplace-webhook.io/undo", "true");
  const std::string abort = SetAnnotation("inplace-webhook.io/abort", "true");
  cases.push_back({"end, pause and undo commands", Running(),
                   With(With(With(Running(), kEnv), pause), undo), Action::kEnd});
  cases.push_back({"abort", Running(), With(Running(), abort), Action::kEnd});
  cases.push_back({"abort back at the start", Running(),
                   With(With(Running(), abort),
                        R"([{"op":"replace","path":"/spec/template/spec/containers/0/image",)"
                        R"("value":"nginx:1.25"}])"),
                   Action::kEnd});
  const json::Document ended = With(Deployment(kImage), abort);  // ended by the webhook
  cases.push_back({"the abort left behind, consumed", With(ended, ""),
                   With(ended, R"([{"op":"replace","path":"/spec/replicas","value":5}])"),
                   Action::kNone});
  constexpr std::string_view kNoAnnotations = R"([{"op":"remove","path":"/metadata/annotations"}])";
  cases.push_back({"start, no annotations", Deployment(kNoAnnotations),
                   With(Deployment(kNoAnnotations), kImage), Action::kStart});
  std::size_t reached = 0;  // cases of `reaches` run: none misnamed
  for (const Scenario& s : cases) {
    const std::string name = s.name;
    CAPTURE(name);
    const admission::Context ctx = Ctx(0, /*loopAlive=*/false);
    const std::string before = json::Serialize(s.obj);
    admission::Response r = admission::MutateDeployment(Update(s.old, s.obj), ctx);
    CHECK(json::Serialize(s.obj) == before);
    deployment::Decision d =
        deployment::Decide(AsDeployment(s.old), AsDeployment(s.obj), FactsOf(ctx));
    if (d.action == Action::kIgnore) {
      CHECK(r.patch.empty());
      continue;
    }
    json::Document full;
    full.CopyFrom(s.obj, full.GetAllocator());
    Apply(d, full, full.GetAllocator());
    json::Document ops;
    static_cast<json::Value&>(ops) = json_patch::Diff(s.obj, full, ops.GetAllocator());
    CHECK(r.patch == (ops.Empty() ? std::string() : json::Serialize(ops)));
    // The cases added above reach the writes they are there for.
    if (auto it = reaches.find(name); it != reaches.end()) {
      ++reached;
      for (const std::string& write : it->second) {
        CAPTURE(write);
        CHECK(r.patch.find(write) != std::string::npos);
      }
    }
  }
  CHECK(reached == reaches.size());
}

// ---- the validator ----

TEST_CASE("the validator admits the mutator's output for every scenario") {
  for (const Scenario& s : Scenarios()) {
    const std::string name = s.name;
    CAPTURE(name);
    json::Document out = Patched(s.obj, admission::MutateDeployment(Update(s.old, s.obj), Ctx()));
    admission::Response v = admission::ValidateDeployment(Update(s.old, out), Ctx(2));
    CHECK_MESSAGE(v.allowed, v.message);
    CHECK(v.patch.empty());
  }
}

TEST_CASE("the validator denies what the mutator would have changed, and says how to abort") {
  const json::Document running = Running();
  struct Row {
    const char* name;
    json::Document old, obj;
    const char* messageContains;
  };
  std::vector<Row> rows;
  rows.push_back({"unpause while in progress", Running(), With(running, kUnpause),
                  "spec.paused must stay true while an in-place update is running"});
  rows.push_back(
      {"hand edit of in-progress", Running(),
       With(running,
            SetAnnotation(
                kInProgressKey,
                R"({"from":"a","to":"b","pausedByUs":true,"startedAt":"2026-11-29T17:00:00Z"})")),
       "inplace-webhook.io/in-progress is managed by inplace-webhook"});
  rows.push_back(
      {"in-progress dropped", Running(),
       With(running,
            R"([{"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1in-progress"}])"),
       "kubectl annotate deploy/web inplace-webhook.io/abort=true -n shop"});
  rows.push_back({"eligible change that the mutator never saw", Deployment(), Deployment(kImage),
                  "were not set by the mutating webhook"});
  rows.push_back({"non-eligible change during an update that the mutator never saw", Running(),
                  With(running, kEnv), "this change ends the in-place update"});
  rows.push_back(
      {"in-progress added by hand, no update running", Deployment(),
       With(Deployment(),
            SetAnnotation(
                kInProgressKey,
                R"({"from":"a","to":"b","pausedByUs":true,"startedAt":"2026-11-29T17:00:00Z"})")),
       "is written by inplace-webhook only"});
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    admission::Response v = admission::ValidateDeployment(Update(row.old, row.obj), Ctx());
    CHECK_FALSE(v.allowed);
    CHECK(v.code == 403);
    CHECK_MESSAGE(v.message.find(row.messageContains) != std::string::npos, v.message);
    if (std::string_view(row.name).find("no update running") == std::string_view::npos &&
        std::string_view(row.name).find("never saw") == std::string_view::npos) {
      CHECK_MESSAGE(v.message.find("kubectl annotate deploy/web inplace-webhook.io/abort=true") !=
                        std::string::npos,
                    v.message);
    }
  }
  // The controller may do all of it (finish: unpause and drop in-progress).
  json::Document finished =
      With(With(running, kUnpause),
           R"([{"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1in-progress"}])");
  CHECK(
      admission::ValidateDeployment(
          Update(running, finished, "system:serviceaccount:inplace-webhook:inplace-webhook"), Ctx())
          .allowed);
}

TEST_CASE("the validator checks the lifecycle and policy annotations; drain needs no gate") {
  auto annotate = [](std::string_view key, std::string_view value) {
    return Deployment(SetAnnotation(key, value));
  };
  constexpr std::string_view kLifecycle = "inplace-webhook.io/lifecycle";
  constexpr std::string_view kPolicy = "inplace-webhook.io/policy";
  const std::string gate =
      R"([{"op":"add","path":"/spec/template/spec/readinessGates","value":[{"conditionType":"inplace-webhook.io/ready"}]}])";
  constexpr const char* kGateWarning =
      "template declares readiness gate inplace-webhook.io/ready: the webhook adds it; if "
      "uninstalled, new pods never get Ready";
  struct Row {
    const char* name;
    json::Document obj;
    const char* messageContains;  // nullptr: allowed
    const char* warning = nullptr;
  };
  std::vector<Row> rows;
  rows.push_back({"valid lifecycle",
                  annotate(kLifecycle, R"({"inPlaceUpdate":{"labelsHandler":{"lb":"on"}}})"),
                  nullptr});
  rows.push_back({"malformed lifecycle",
                  annotate(kLifecycle, R"({"inPlaceUpdate":{"labelsHandler":["lb"]}})"),
                  "inplace-webhook.io/lifecycle: inPlaceUpdate.labelsHandler must be an object of "
                  "string values"});
  rows.push_back({"lifecycle not JSON", annotate(kLifecycle, "labels=lb"),
                  "inplace-webhook.io/lifecycle: not valid JSON"});
  rows.push_back({"malformed policy", annotate(kPolicy, R"({"annotations":"example.com/*"})"),
                  "inplace-webhook.io/policy: annotations must be an array"});
  rows.push_back(
      {"valid policy", annotate(kPolicy, R"({"annotations":["example.com/*"]})"), nullptr});
  // The pod webhook injects the gate at pod creation (DESIGN.md §8.6): no template change needed.
  rows.push_back({"markPodNotReady without the gate in the template",
                  annotate(kLifecycle, R"({"inPlaceUpdate":{"markPodNotReady":true}})"), nullptr});
  rows.push_back({"postUpdate markPodNotReady without the gate",
                  annotate(kLifecycle, R"({"postUpdate":{"markPodNotReady":true}})"), nullptr});
  rows.push_back({"gracePeriodSeconds without the gate",
                  annotate(kPolicy, R"({"gracePeriodSeconds":5})"), nullptr});
  rows.push_back({"the gate declared by the template: accepted, with a warning",
                  With(annotate(kLifecycle, R"({"inPlaceUpdate":{"markPodNotReady":true}})"), gate),
                  nullptr, kGateWarning});
  rows.push_back(
      {"not opted in: not judged",
       With(annotate(kLifecycle, "garbage"), R"([{"op":"remove","path":"/metadata/labels"}])"),
       nullptr});
  rows.push_back({"not opted in, gate declared: no warning",
                  With(Deployment(R"([{"op":"remove","path":"/metadata/labels"}])"), gate),
                  nullptr});
  for (Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    for (Operation op : {Operation::kCreate, Operation::kUpdate}) {
      // UPDATE: the stored object already had the same annotations, nothing else changes.
      admission::Request req = Update(row.obj, row.obj);
      req.operation = op;
      if (op == Operation::kCreate) req.oldObject = nullptr;
      admission::Response v = admission::ValidateDeployment(req, Ctx());
      if (row.messageContains == nullptr) {
        CHECK_MESSAGE(v.allowed, v.message);
        if (row.warning == nullptr) {
          CHECK(v.warnings.empty());
        } else {
          REQUIRE(v.warnings.size() == 1);
          CHECK(v.warnings[0] == row.warning);
          CHECK(v.warnings[0].size() <= 120);
        }
      } else {
        CHECK_FALSE(v.allowed);
        CHECK(v.code == 403);
        CHECK_MESSAGE(v.message.find(row.messageContains) != std::string::npos, v.message);
      }
    }
  }
}

TEST_CASE(
    "the validator: CREATE with a forged in-progress is denied; subresources and DELETE pass") {
  json::Document forged = With(Deployment(), SetAnnotation(kInProgressKey, "{}"));
  admission::Request create = Update(forged, forged);
  create.operation = Operation::kCreate;
  create.oldObject = nullptr;
  CHECK_FALSE(admission::ValidateDeployment(create, Ctx()).allowed);

  const json::Document running = Running();
  json::Document unpaused = With(running, kUnpause);
  admission::Request scale = Update(running, unpaused);
  scale.subResource = "scale";
  CHECK(admission::ValidateDeployment(scale, Ctx()).allowed);
  admission::Request del = Update(running, running);
  del.operation = Operation::kDelete;
  del.object = nullptr;
  CHECK(admission::ValidateDeployment(del, Ctx()).allowed);
}

TEST_CASE("a Deployment being deleted: both webhooks admit every write, whatever its settings") {
  // Invalid settings (a malformed lifecycle annotation), an update under way, a user's
  // unpause and an edit the validator would refuse on a live object: all admitted once
  // deletionTimestamp is set, so that foreground deletion and finalizer removal always go through.
  const std::string deleting =
      R"([{"op":"add","path":"/metadata/deletionTimestamp","value":"2026-12-01T10:00:00Z"},)"
      R"({"op":"add","path":"/metadata/finalizers","value":["foregroundDeletion"]}])";
  json::Document invalid =
      With(Deployment(SetAnnotation("inplace-webhook.io/lifecycle",
                                    R"({"inPlaceUpdate":{"labelsHandler":["lb"]}})")),
           deleting);
  json::Document finalizerGone =
      With(invalid, R"([{"op":"remove","path":"/metadata/finalizers"}])");
  json::Document running = With(Running(), deleting);
  json::Document unpaused = With(running, kUnpause);
  struct Row {
    const char* name;
    const json::Document& before;
    const json::Document& after;
  };
  for (const Row& row : {Row{"invalid settings, finalizer removed", invalid, finalizerGone},
                         Row{"in-place update under way, unpaused", running, unpaused}}) {
    CAPTURE(row.name);
    admission::Request req = Update(row.before, row.after);
    admission::Response v = admission::ValidateDeployment(req, Ctx());
    CHECK_MESSAGE(v.allowed, v.message);
    admission::Response m = admission::MutateDeployment(req, Ctx());
    CHECK(m.allowed);
    CHECK(m.patch.empty());
  }
  // The same edit of the live object is refused: the rule above is what lets it through.
  json::Document live = Deployment(SetAnnotation("inplace-webhook.io/lifecycle",
                                                 R"({"inPlaceUpdate":{"labelsHandler":["lb"]}})"));
  CHECK_FALSE(admission::ValidateDeployment(Update(live, live), Ctx()).allowed);
}

TEST_CASE("malformed request objects are answered 400 with the field named, by both webhooks") {
  json::Document good = Deployment();
  json::Document badLabels = Deployment(
      R"([{"op":"replace","path":"/metadata/labels","value":["inplace-webhook.io/enabled"]}])");
  for (auto* handler : {&admission::MutateDeployment, &admission::ValidateDeployment}) {
    admission::Response r = (*handler)(Update(good, badLabels), Ctx());
    CHECK_FALSE(r.allowed);
    CHECK(r.code == 400);
    CHECK(r.message ==
          "request.object.metadata.labels must be an object of string values, got array");
    admission::Response r2 = (*handler)(Update(badLabels, good), Ctx());
    CHECK(r2.code == 400);
    CHECK(r2.message.starts_with("request.oldObject.metadata.labels"));
    admission::Request noOld = Update(good, good);
    noOld.oldObject = nullptr;
    CHECK((*handler)(noOld, Ctx()).message == "request.oldObject is missing for UPDATE");
  }
}

TEST_CASE("a change the pod API refuses takes the native rollout, with a warning naming the key") {
  // The policy allows every annotation: the pod API's refusal still wins (DESIGN.md §8.8).
  json::Document old =
      Deployment(SetAnnotation("inplace-webhook.io/policy", R"({"annotations":["*"]})"));
  const std::string apparmor =
      R"([{"op":"add","path":"/spec/template/metadata/annotations","value":{"container.apparmor.security.beta.kubernetes.io/app":"unconfined"}}])";
  const std::string warning =
      "the pod API refuses to change annotation "
      "container.apparmor.security.beta.kubernetes.io/app: "
      "a normal rollout follows";
  json::Document changed = With(old, apparmor);
  admission::Response m = admission::MutateDeployment(Update(old, changed), Ctx());
  CHECK(m.allowed);
  CHECK(m.patch.empty());
  REQUIRE(m.warnings.size() == 1);
  CHECK(m.warnings[0] == warning);
  CHECK(m.warnings[0].size() <= 120);
  CHECK(admission::ValidateDeployment(Update(old, changed), Ctx()).allowed);

  // Mid-update, the same change ends the update: unpaused, in-progress gone, the key named.
  json::Document running = Running();
  json::Document runningChanged = With(running, apparmor);
  json::Document out =
      Patched(runningChanged, admission::MutateDeployment(Update(running, runningChanged), Ctx()));
  CHECK(InProgressText(out).empty());
  CHECK_FALSE(test::AsDeployment(out).paused());
  deployment::Decision d =
      deployment::Decide(AsDeployment(running), AsDeployment(runningChanged), FactsOf(Ctx()));
  CHECK(d.action == Action::kEnd);
  CHECK(AnyContains(d.warnings, "annotation container.apparmor.security.beta.kubernetes.io/app"));

  // An image the template accepts but every pod write refuses (outer whitespace).
  json::Document spaced = With(
      old,
      R"([{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.27 "}])");
  admission::Response s = admission::MutateDeployment(Update(old, spaced), Ctx());
  CHECK(s.patch.empty());
  CHECK(AnyContains(s.warnings, "the pod API refuses to change the image of container app"));
}

TEST_CASE("a user's pause and resume of a running update (DESIGN.md §8.5)") {
  auto mutateAndValidate = [](const json::Document& old, const json::Document& obj) {
    admission::Response r = admission::MutateDeployment(Update(old, obj), Ctx());
    REQUIRE(r.allowed);
    json::Document out = Patched(obj, r);
    // The mutator's output is a fixed point: the validator admits it, a second pass changes
    // nothing.
    CHECK(admission::ValidateDeployment(Update(old, out), Ctx(1)).allowed);
    CHECK(admission::MutateDeployment(Update(old, out), Ctx(1)).patch.empty());
    return std::pair{std::move(out), r.warnings};
  };
  const std::string pauseKey = "inplace-webhook.io/pause";
  SUBCASE("the pause command holds it; the command is consumed; the Deployment stays paused") {
    json::Document old = Running(true);
    json::Document obj = With(old, SetAnnotation(pauseKey, "true"));
    auto [out, warnings] = mutateAndValidate(old, obj);
    CHECK_FALSE(RecordOf(out).pausedByUs);
    CHECK(test::AsDeployment(out).paused());
    CHECK_FALSE(kube::AnnotationOf(out, pauseKey).has_value());
    REQUIRE_FALSE(warnings.empty());
    CHECK(warnings[0].find("in-place update paused") != std::string::npos);
  }
  SUBCASE("kubectl rollout resume of a held update: it goes on, still paused until its end") {
    json::Document old = Running(false);
    json::Document obj = With(old, kUnpause);
    auto [out, warnings] = mutateAndValidate(old, obj);
    CHECK(RecordOf(out).pausedByUs);
    CHECK(test::AsDeployment(out).paused());
    // Only the resume is said: no "spec.paused kept ... to stop it" as for an unpause refused.
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("in-place update resumed") != std::string::npos);
  }
  SUBCASE("an unpause of an update that is ours is re-paused") {
    json::Document old = Running(true);
    auto [out, warnings] = mutateAndValidate(old, With(old, kUnpause));
    CHECK(RecordOf(out).pausedByUs);
    CHECK(test::AsDeployment(out).paused());
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[0].find("spec.paused=true and inplace-webhook.io/in-progress kept") !=
          std::string::npos);
    CHECK(warnings[1].find("to stop it: ") == 0);
  }
  SUBCASE("the pause command with no update running is spec.paused") {
    json::Document old = Deployment();
    auto [out, warnings] = mutateAndValidate(old, With(old, SetAnnotation(pauseKey, "true")));
    CHECK(test::AsDeployment(out).paused());
    CHECK_FALSE(kube::AnnotationOf(out, pauseKey).has_value());
  }
  SUBCASE("the pause command with the change that starts an update: it starts held") {
    json::Document old = Deployment();
    auto [out, warnings] =
        mutateAndValidate(old, With(Deployment(kImage), SetAnnotation(pauseKey, "true")));
    CHECK_FALSE(RecordOf(out).pausedByUs);
  }
  SUBCASE("the undo command with no update running is dropped with a pointer to kubectl") {
    json::Document old = Deployment();
    auto [out, warnings] =
        mutateAndValidate(old, With(old, SetAnnotation("inplace-webhook.io/undo", "true")));
    CHECK_FALSE(kube::AnnotationOf(out, "inplace-webhook.io/undo").has_value());
    REQUIRE_FALSE(warnings.empty());
    CHECK(warnings.back().find("kubectl rollout undo") != std::string::npos);
  }
}

TEST_CASE("re-invoked after a later webhook made the change ineligible: our pause is taken back") {
  json::Document old = Deployment();
  json::Document obj = Deployment(kImage);
  json::Document first = Patched(obj, admission::MutateDeployment(Update(old, obj), Ctx()));
  REQUIRE(test::AsDeployment(first).paused());
  // Another mutating webhook adds an env var to the template after ours; ours runs again.
  json::Document later = With(first, kEnv);
  admission::Response r = admission::MutateDeployment(Update(old, later), Ctx(1));
  json::Document out = Patched(later, r);
  CHECK_FALSE(test::AsDeployment(out).paused());
  CHECK(InProgressText(out).empty());
  CHECK(admission::ValidateDeployment(Update(old, out), Ctx(2)).allowed);
}

// ---- the abort the loop does not act on (DESIGN.md §9.8) ----

namespace {

constexpr std::string_view kAbortKey = "inplace-webhook.io/abort";
constexpr std::string_view kAbort =
    R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1abort","value":"true"}])";

// Admits `obj` over `old` as the API server does: the mutator, then the validator on its output.
struct Admitted {
  admission::Response mutation;
  json::Document out;
  admission::Response validation;
};
Admitted Admit(const json::Value& old, const json::Value& obj, const admission::Context& ctx,
               const admission::Context& validatorCtx) {
  Admitted a;
  a.mutation = admission::MutateDeployment(Update(old, obj), ctx);
  a.out = Patched(obj, a.mutation);
  a.validation = admission::ValidateDeployment(Update(old, a.out), validatorCtx);
  return a;
}

}  // namespace

TEST_CASE("an abort: left to a running loop, ended by the webhook when no loop acts on it") {
  const json::Document old = Running(/*pausedByUs=*/true);
  struct Row {
    const char* name;
    bool abortStored;         // the stored object already carries the abort
    const char* stampStored;  // abortRequestedAt in the stored record ("" none)
    int secondsLater;         // of this write after kNow
    bool loopAlive;
    bool ends;                 // the webhook ends the update (unpaused, record gone)
    const char* stampWritten;  // the record's abortRequestedAt after the write, if it goes on
    const char* warning;
  };
  const std::vector<Row> rows = {
      {"first abort, loop running: stamped, left to the loop", false, "", 0, true, false,
       kNowText.data(), "if it still runs in 60 s, run the abort command again"},
      {"first abort, no loop runs: ended at once", false, "", 0, false, true, "",
       "ended by the webhook (no in-place loop runs)"},
      {"abort again 30 s later: still the loop's", true, "2026-11-29T18:00:00Z", 30, true, false,
       "2026-11-29T18:00:00Z", "abort pending since 2026-11-29T18:00:00Z"},
      {"abort again 60 s later: the webhook ends it", true, "2026-11-29T18:00:00Z", 60, true, true,
       "", "ended by the webhook (the loop did not act on the abort)"},
      {"any later write carrying the stored abort, 61 s later: ended", true, "2026-11-29T18:00:00Z",
       61, true, true, "", "ended by the webhook"},
      {"stored abort with an unreadable stamp: ended", true, "yesterday", 1, true, true, "",
       "ended by the webhook"},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    InProgress record = RecordOf(old);
    record.abortRequestedAt = row.stampStored;
    json::Document stored = With(old, SetAnnotation(kInProgressKey, SerializeInProgress(record)));
    if (row.abortStored) stored = With(stored, kAbort);
    // kubectl annotate --overwrite of the same value, or any other write: the abort is carried.
    json::Document obj = With(stored, kAbort);
    Admitted a = Admit(stored, obj, Ctx(row.secondsLater, row.loopAlive),
                       Ctx(row.secondsLater, row.loopAlive));
    CHECK(a.mutation.allowed);
    CHECK_MESSAGE(a.validation.allowed, a.validation.message);
    CHECK(AnyContains(a.mutation.warnings, row.warning));
    CHECK(kube::AnnotationOf(a.out, kAbortKey) == "true");
    if (row.ends) {
      CHECK_FALSE(test::AsDeployment(a.out).paused());
      CHECK(InProgressText(a.out).empty());
    } else {
      CHECK(test::AsDeployment(a.out).paused());
      InProgress after = RecordOf(a.out);
      CHECK(after.abortRequestedAt == row.stampWritten);
      InProgress rest = after;
      rest.abortRequestedAt = record.abortRequestedAt;
      CHECK(rest == record);  // nothing else of the record changes
    }
  }
}

TEST_CASE("an abort the user paused keeps the user's pause when the webhook ends it") {
  const json::Document old = Running(/*pausedByUs=*/false);
  json::Document obj = With(old, kAbort);
  Admitted a = Admit(old, obj, Ctx(0, false), Ctx(0, false));
  CHECK_MESSAGE(a.validation.allowed, a.validation.message);
  CHECK(test::AsDeployment(a.out).paused());
  CHECK(InProgressText(a.out).empty());
}

TEST_CASE("the abort stamp: our own, seen again, is kept; a forged or a future one is not") {
  const json::Document old = Running();
  const json::Document obj = With(old, kAbort);
  const admission::Response first = admission::MutateDeployment(Update(old, obj), Ctx(0));
  const json::Document out = Patched(obj, first);
  REQUIRE(RecordOf(out).abortRequestedAt == kNowText);
  SUBCASE("re-invocation and the validator a moment later: a fixed point") {
    CHECK(admission::MutateDeployment(Update(old, out), Ctx(2)).patch.empty());
    CHECK(admission::ValidateDeployment(Update(old, out), Ctx(2)).allowed);
  }
  for (const char* forged : {"2026-11-29T17:00:00Z", "2026-11-29T18:05:00Z", "soon"}) {
    const std::string text = forged;
    CAPTURE(text);
    InProgress r = RecordOf(old);
    r.abortRequestedAt = forged;
    json::Document written = With(obj, SetAnnotation(kInProgressKey, SerializeInProgress(r)));
    json::Document o = Patched(written, admission::MutateDeployment(Update(old, written), Ctx(0)));
    CHECK(RecordOf(o).abortRequestedAt == kNowText);
    CHECK(test::AsDeployment(o).paused());
  }
}

TEST_CASE("an abort withdrawn before the loop acted clears its stamp; a later one starts anew") {
  InProgress record = RecordOf(Running());
  record.abortRequestedAt = std::string(kNowText);
  const json::Document stored =
      With(With(Running(), SetAnnotation(kInProgressKey, SerializeInProgress(record))), kAbort);
  json::Document obj =
      With(stored, R"([{"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1abort"}])");
  Admitted a = Admit(stored, obj, Ctx(5), Ctx(5));
  CHECK_MESSAGE(a.validation.allowed, a.validation.message);
  CHECK(test::AsDeployment(a.out).paused());
  CHECK(RecordOf(a.out).abortRequestedAt.empty());
}

TEST_CASE("the abort left by an update the webhook ended is consumed by the next write") {
  // The stored object after the webhook ended the update: unpaused, no record, abort kept.
  const json::Document ended = With(Deployment(kImage), kAbort);
  SUBCASE("a scale: the abort is removed") {
    json::Document obj = With(ended, R"([{"op":"replace","path":"/spec/replicas","value":5}])");
    Admitted a = Admit(ended, obj, Ctx(), Ctx());
    CHECK_MESSAGE(a.validation.allowed, a.validation.message);
    CHECK_FALSE(kube::AnnotationOf(a.out, kAbortKey).has_value());
  }
  SUBCASE("an eligible change: in place, not blocked by the leftover") {
    json::Document obj = With(ended, kImage2);
    Admitted a = Admit(ended, obj, Ctx(), Ctx());
    CHECK_MESSAGE(a.validation.allowed, a.validation.message);
    CHECK_FALSE(kube::AnnotationOf(a.out, kAbortKey).has_value());
    CHECK(test::AsDeployment(a.out).paused());
    CHECK_FALSE(InProgressText(a.out).empty());
  }
}

TEST_CASE("a cpu/memory change is in place where pods/resize is served, else a warning says why") {
  constexpr std::string_view kRequests =
      R"([{"op":"add","path":"/spec/template/spec/containers/0/resources","value":{"requests":{"cpu":"100m","memory":"64Mi"}}}])";
  constexpr std::string_view kMoreCpu =
      R"([{"op":"replace","path":"/spec/template/spec/containers/0/resources/requests/cpu","value":"200m"}])";
  constexpr std::string_view kGuaranteed =
      R"([{"op":"add","path":"/spec/template/spec/containers/0/resources/limits","value":{"cpu":"100m","memory":"64Mi"}}])";
  json::Document old = Deployment(kRequests);
  admission::Context served = Ctx();
  served.resize = resize_support::kAll;

  SUBCASE("served: the update starts in place") {
    admission::Response r = admission::MutateDeployment(Update(old, With(old, kMoreCpu)), served);
    CHECK(r.allowed);
    CHECK_FALSE(r.patch.empty());
    CHECK(AnyContains(r.warnings, "in-place update: 3 pods will be updated"));
    CHECK_FALSE(AnyContains(r.warnings, "not possible"));
  }
  SUBCASE("not served: a normal rollout, and the warning names pods/resize") {
    admission::Response r = admission::MutateDeployment(Update(old, With(old, kMoreCpu)), Ctx());
    CHECK(r.patch.empty());
    CHECK(AnyContains(r.warnings, "spec.template.spec.containers[0].resources changed"));
    CHECK(AnyContains(r.warnings,
                      "in-place resize not possible: the API server does not serve "
                      "pods/resize"));
    for (const auto& w : r.warnings) CHECK(w.size() <= 120);
  }
  SUBCASE("served, but the QoS class would change: a normal rollout, the warning says so") {
    admission::Response r =
        admission::MutateDeployment(Update(old, With(old, kGuaranteed)), served);
    CHECK(r.patch.empty());
    CHECK(AnyContains(r.warnings, "QoS class would change from Burstable to Guaranteed"));
    for (const auto& w : r.warnings) CHECK(w.size() <= 120);
  }
}

TEST_CASE(
    "the webhook's end of a revert restarts the template, so that a rollout follows (§8.11)") {
  // A→B, then reverted to A while pods already run B: the record's target is its start again.
  const json::Document a = Deployment();
  InProgress reverted{HashOf(a), HashOf(a), true, "2026-11-29T17:00:00Z"};
  const json::Document revert =
      With(With(a, kPause), SetAnnotation(kInProgressKey, SerializeInProgress(reverted)));
  InProgress stamped = reverted;
  stamped.abortRequestedAt = "2026-11-29T18:00:00Z";
  const json::Document abortPending = With(
      With(With(a, kPause), SetAnnotation(kInProgressKey, SerializeInProgress(stamped))), kAbort);
  constexpr std::string_view kOptOut =
      R"([{"op":"remove","path":"/metadata/labels/inplace-webhook.io~1enabled"}])";
  struct Row {
    const char* name;
    const json::Value* stored;
    std::string_view patch;  // the user's write over the stored object
    int secondsLater;
    bool loopAlive;
    bool restart;  // the template gets kubectl.kubernetes.io/restartedAt
  };
  const json::Document running = Running();  // A→B, template B: the native rollout follows anyway
  const std::vector<Row> rows = {
      {"revert, abort while no loop runs", &revert, kAbort, 0, false, true},
      {"revert, abort repeated 60 s after the loop left it", &abortPending, kAbort, 60, true, true},
      {"revert, opt-in label removed", &revert, kOptOut, 0, true, true},
      {"revert, strategy Recreate", &revert, kRecreate, 0, true, true},
      {"A→B, abort while no loop runs: the template differs, no restart", &running, kAbort, 0,
       false, false},
      {"A→B, opt-in label removed: no restart", &running, kOptOut, 0, true, false},
      {"revert, abort left to a running loop: it goes on, no restart", &revert, kAbort, 0, true,
       false},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document obj = With(*row.stored, row.patch);
    const admission::Context ctx = Ctx(row.secondsLater, row.loopAlive);
    Admitted adm = Admit(*row.stored, obj, ctx, ctx);
    CHECK(adm.mutation.allowed);
    CHECK_MESSAGE(adm.validation.allowed, adm.validation.message);
    const std::string_view restartedAt =
        json::StringOr(json::Path(&adm.out, {"spec", "template", "metadata", "annotations"}),
                       "kubectl.kubernetes.io/restartedAt");
    if (row.restart) {
      CHECK(InProgressText(adm.out).empty());
      CHECK(restartedAt == rfc3339::Format(ctx.now));
      CHECK(AnyContains(adm.mutation.warnings, "kubectl.kubernetes.io/restartedAt added"));
      CHECK(HashOf(adm.out) != reverted.from);  // the Deployment controller sees a new template
    } else {
      CHECK(restartedAt.empty());
      CHECK_FALSE(AnyContains(adm.mutation.warnings, "restartedAt"));
    }
    // Seen again (reinvocation), the answer changes nothing more: no second restart.
    admission::Response again = admission::MutateDeployment(Update(*row.stored, adm.out), ctx);
    CHECK(json::Serialize(Patched(adm.out, again)) == json::Serialize(adm.out));
  }
}

TEST_CASE(
    "the validator: a template carrying the pods' state keys of ours is denied, unless stored so") {
  struct Row {
    const char* what;
    const char* patch;  // on the template's metadata
    bool allowed;
  };
  const Row rows[] = {
      {"state Normal (harmless)",
       R"([{"op":"add","path":"/spec/template/metadata/labels/inplace-webhook.io~1state","value":"Normal"}])",
       true},
      {"state Updated",
       R"([{"op":"add","path":"/spec/template/metadata/labels/inplace-webhook.io~1state","value":"Updated"}])",
       false},
      {"update-state",
       R"([{"op":"add","path":"/spec/template/metadata/annotations","value":{"inplace-webhook.io/update-state":"{}"}}])",
       false},
      {"hook-timeout",
       R"([{"op":"add","path":"/spec/template/metadata/annotations","value":{"inplace-webhook.io/hook-timeout":"x"}}])",
       false},
  };
  const json::Document plain = Deployment();
  for (const Row& row : rows) {
    CAPTURE(std::string(row.what));
    json::Document d = With(plain, row.patch);
    admission::Request create = Update(d, d);
    create.operation = Operation::kCreate;
    create.oldObject = nullptr;
    admission::Response r = admission::ValidateDeployment(create, Ctx());
    CHECK(r.allowed == row.allowed);
    if (!row.allowed) {
      CHECK(r.message.find("the pod template carries inplace-webhook.io/") != std::string::npos);
    }
    // An update that adds the key is denied as a CREATE is (an allowed template change is the
    // mutator's to judge); one that keeps what is stored passes.
    if (!row.allowed) {
      admission::Response u = admission::ValidateDeployment(Update(plain, d), Ctx());
      CHECK_FALSE(u.allowed);
      CHECK(u.message.find("the pod template carries inplace-webhook.io/") != std::string::npos);
    }
    json::Document scaled = With(d, kScaledUp);
    CHECK(admission::ValidateDeployment(Update(d, scaled), Ctx()).allowed);
  }
}
