// Pod admission (DESIGN.md §4.2): opted-in pods start in state Normal; the state keys are the
// controller's alone.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "hooks/pod_admission.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "tests/unit/test_json.h"

using namespace iw;
using admission::Operation;

namespace {

using test::Parse;

constexpr std::string_view kController = "system:serviceaccount:inplace-webhook:inplace-webhook";

admission::Context Ctx() {
  admission::Context ctx;
  ctx.controllerUser = std::string(kController);
  ctx.now = std::chrono::system_clock::time_point(std::chrono::seconds(1795975200));
  return ctx;
}

// A pod of an opted-in Deployment as the ReplicaSet controller creates it.
constexpr std::string_view kPod = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"generateName": "web-5d4f8c7b9-", "namespace": "shop",
               "labels": {"app": "web", "pod-template-hash": "5d4f8c7b9",
                          "inplace-webhook.io/enabled": "true"},
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                    "name": "web-5d4f8c7b9", "uid": "0b1c", "controller": true,
                                    "blockOwnerDeletion": true}]},
  "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}
})";

json::Document With(std::string_view base, std::string_view patch) {
  json::Document doc = Parse(base);
  if (patch.empty()) return doc;
  json::Document ops = Parse(patch);
  Status err = json_patch::Apply(ops, doc);
  REQUIRE_MESSAGE(err.ok(), (std::string(patch) + ": " + err.message()));
  return doc;
}

// A running pod: named, stamped Normal by the webhook at creation.
std::string Running() {
  return json::Serialize(
      With(kPod, R"([{"op":"add","path":"/metadata/name","value":"web-5d4f8c7b9-x2k4q"},
      {"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"},
      {"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/state-timestamp":"2026-11-29T17:00:00Z"}}])"));
}

admission::Request Request(
    Operation op, const json::Value* oldObject, const json::Value* object,
    std::string user = "system:serviceaccount:kube-system:replicaset-controller") {
  admission::Request r;
  r.uid = "u-1";
  r.kind = {"", "v1", "Pod"};
  r.resource = "pods";
  r.namespaceName = "shop";
  r.operation = op;
  r.username = std::move(user);
  r.object = object;
  r.oldObject = oldObject;
  return r;
}

json::Document Patched(const json::Value& object, const admission::Response& r) {
  json::Document out;
  out.CopyFrom(object, out.GetAllocator());
  if (r.patch.empty()) return out;
  json::Document ops = Parse(r.patch);
  Status err = json_patch::Apply(ops, out);
  REQUIRE_MESSAGE(err.ok(), err.message());
  return out;
}

}  // namespace

TEST_CASE(
    "MutatePod stamps state Normal and the timestamp on an opted-in pod at CREATE, nothing else") {
  json::Document pod = Parse(kPod);
  admission::Response r = admission::MutatePod(Request(Operation::kCreate, nullptr, &pod), Ctx());
  REQUIRE(r.allowed);
  json::Document out = Patched(pod, r);
  json::Document expected = With(kPod, R"([
      {"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"},
      {"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/state-timestamp":"2026-11-29T18:00:00Z"}}])");
  CHECK(json::SerializeCanonical(out) == json::SerializeCanonical(expected));
  CHECK(r.warnings.empty());
  // Re-invocation on its own output: nothing more.
  CHECK(admission::MutatePod(Request(Operation::kCreate, nullptr, &out), Ctx()).patch.empty());
}

TEST_CASE("MutatePod drops a state of ours the pod was created with, with a warning") {
  struct Row {
    const char* what;
    const char* patch;
    const char* dropped;  // named in the warning; "" = nothing dropped, no warning
  };
  const Row rows[] = {
      {"state Updated",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Updated"}])",
       "state"},
      {"update-state and hook-timeout with state Normal",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"},
           {"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/update-state":"{}",
            "inplace-webhook.io/hook-timeout":"preUpdate","inplace-webhook.io/state-timestamp":"2020-01-01T00:00:00Z","keep":"me"}}])",
       "update-state, hook-timeout"},
      {"state Normal only: kept, a missing timestamp added",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"}])",
       ""},
  };
  for (const Row& row : rows) {
    CAPTURE(std::string(row.what));
    json::Document pod = With(kPod, row.patch);
    admission::Response r = admission::MutatePod(Request(Operation::kCreate, nullptr, &pod), Ctx());
    REQUIRE(r.allowed);
    json::Document out = Patched(pod, r);
    const json::Value* labels = json::Path(&out, {"metadata", "labels"});
    const json::Value* annotations = json::Path(&out, {"metadata", "annotations"});
    CHECK(json::StringOr(labels, "inplace-webhook.io/state") == "Normal");
    CHECK(json::StringOr(annotations, "inplace-webhook.io/state-timestamp") ==
          "2026-11-29T18:00:00Z");
    CHECK(json::Find(annotations, "inplace-webhook.io/update-state") == nullptr);
    CHECK(json::Find(annotations, "inplace-webhook.io/hook-timeout") == nullptr);
    if (json::Find(json::Path(&pod, {"metadata", "annotations"}), "keep") != nullptr) {
      CHECK(json::StringOr(annotations, "keep") == "me");
    }
    if (std::string_view(row.dropped).empty()) {
      CHECK(r.warnings.empty());
    } else {
      REQUIRE(r.warnings.size() == 1);
      CHECK(r.warnings[0] == "dropped inplace-webhook.io/ " + std::string(row.dropped) +
                                 " from the new pod: it starts Normal (the controller's keys)");
      CHECK(r.warnings[0].size() <= 120);
    }
    // Its own output: nothing more to drop (the validator admits it too).
    CHECK(admission::MutatePod(Request(Operation::kCreate, nullptr, &out), Ctx()).patch.empty());
    CHECK(admission::ValidatePod(Request(Operation::kCreate, nullptr, &out), Ctx()).allowed);
  }
  json::Document stamped = Parse(Running());
  CHECK(admission::MutatePod(Request(Operation::kCreate, nullptr, &stamped), Ctx()).patch.empty());
}

TEST_CASE("MutatePod leaves everything else alone") {
  json::Document pod = Parse(kPod);
  json::Document notOptedIn = With(
      kPod,
      R"([{"op":"replace","path":"/metadata/labels/inplace-webhook.io~1enabled","value":"false"}])");
  json::Document running = Parse(Running());
  struct Row {
    const char* name;
    admission::Request req;
  };
  admission::Request binding = Request(Operation::kCreate, nullptr, &pod);
  binding.subResource = "binding";
  const std::vector<Row> rows = {
      {"not opted in", Request(Operation::kCreate, nullptr, &notOptedIn)},
      {"UPDATE", Request(Operation::kUpdate, &running, &running)},
      {"DELETE", Request(Operation::kDelete, &running, nullptr)},
      {"binding subresource", binding},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    admission::Response r = admission::MutatePod(row.req, Ctx());
    CHECK(r.allowed);
    CHECK(r.patch.empty());
  }
}

TEST_CASE(
    "ValidatePod: only the controller changes state, state-timestamp, update-state, hook-timeout "
    "and gate-sent") {
  const std::string running = Running();
  struct Row {
    const char* name;
    const char* change;
    bool allowedForUser;
    const char* messageContains;
  };
  const std::vector<Row> rows = {
      {"state changed",
       R"([{"op":"replace","path":"/metadata/labels/inplace-webhook.io~1state","value":"Updated"}])",
       false,
       "label inplace-webhook.io/state may be changed only by the inplace-webhook controller"},
      {"state removed", R"([{"op":"remove","path":"/metadata/labels/inplace-webhook.io~1state"}])",
       false, "label inplace-webhook.io/state"},
      {"timestamp changed",
       R"([{"op":"replace","path":"/metadata/annotations/inplace-webhook.io~1state-timestamp","value":"2026-11-29T19:00:00Z"}])",
       false, "annotation inplace-webhook.io/state-timestamp"},
      {"update-state added",
       R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1update-state","value":"{}"}])",
       false, "annotation inplace-webhook.io/update-state"},
      {"hook-timeout forged",
       R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1hook-timeout","value":"{}"}])",
       false, "annotation inplace-webhook.io/hook-timeout"},
      {"gate-sent moved earlier (a shorter drain)",
       R"([{"op":"add","path":"/metadata/annotations/inplace-webhook.io~1gate-sent","value":"2026-11-29T19:00:00.000Z"}])",
       false, "annotation inplace-webhook.io/gate-sent"},
      {"state and timestamp together",
       R"([{"op":"replace","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal2"},
           {"op":"remove","path":"/metadata/annotations/inplace-webhook.io~1state-timestamp"}])",
       false,
       "label inplace-webhook.io/state, annotation inplace-webhook.io/state-timestamp may be"},
      {"hook handler label added",
       R"([{"op":"add","path":"/metadata/labels/lb.example.com~1registered","value":"true"}])",
       true, nullptr},
      {"hook finalizer removed", R"([{"op":"add","path":"/metadata/finalizers","value":[]}])", true,
       nullptr},
      {"other label changed", R"([{"op":"replace","path":"/metadata/labels/app","value":"web2"}])",
       true, nullptr},
      {"image changed",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"}])", true,
       nullptr},
      {"nothing changed", "", true, nullptr},
  };
  json::Document old = Parse(running);
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document obj = With(running, row.change);
    admission::Response user =
        admission::ValidatePod(Request(Operation::kUpdate, &old, &obj, "alice"), Ctx());
    CHECK(user.allowed == row.allowedForUser);
    if (row.messageContains != nullptr) {
      CHECK(user.code == 403);
      CHECK_MESSAGE(user.message.find(row.messageContains) != std::string::npos, user.message);
      CHECK(user.message.find(std::string(kController)) != std::string::npos);
      CHECK(user.message.find("not by alice") != std::string::npos);
    }
    admission::Response controller = admission::ValidatePod(
        Request(Operation::kUpdate, &old, &obj, std::string(kController)), Ctx());
    CHECK(controller.allowed);
  }
}

TEST_CASE("ValidatePod: CREATE with a forged state is denied; status updates and DELETE pass") {
  struct Row {
    const char* name;
    const char* patch;
    bool allowed;
  };
  const std::vector<Row> rows = {
      {"no state", "", true},
      {"state Normal",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"}])",
       true},
      {"state Updated",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Updated"}])",
       false},
      {"update-state",
       R"([{"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/update-state":"{}"}}])",
       false},
      {"hook-timeout",
       R"([{"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/hook-timeout":"x"}}])",
       false},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document pod = With(kPod, row.patch);
    admission::Response r =
        admission::ValidatePod(Request(Operation::kCreate, nullptr, &pod), Ctx());
    CHECK(r.allowed == row.allowed);
    if (!row.allowed) CHECK(r.message.find("inplace-webhook.io/state=Normal") != std::string::npos);
    CHECK(admission::ValidatePod(
              Request(Operation::kCreate, nullptr, &pod, std::string(kController)), Ctx())
              .allowed);
  }
  json::Document old = Parse(Running());
  json::Document changed = With(
      Running(),
      R"([{"op":"replace","path":"/metadata/labels/inplace-webhook.io~1state","value":"Updated"}])");
  admission::Request status = Request(Operation::kUpdate, &old, &changed, "system:node:node-1");
  status.subResource = "status";
  CHECK(admission::ValidatePod(status, Ctx()).allowed);
  CHECK(admission::ValidatePod(Request(Operation::kDelete, &old, nullptr, "alice"), Ctx()).allowed);
}

TEST_CASE("pod webhooks answer 400 for malformed metadata") {
  json::Document bad =
      With(kPod, R"([{"op":"replace","path":"/metadata/labels","value":["app=web"]}])");
  json::Document good = Parse(Running());
  admission::Response m = admission::MutatePod(Request(Operation::kCreate, nullptr, &bad), Ctx());
  CHECK_FALSE(m.allowed);
  CHECK(m.code == 400);
  CHECK(m.message ==
        "request.object.metadata.labels must be an object of string values, got array");
  admission::Response v =
      admission::ValidatePod(Request(Operation::kUpdate, &bad, &good, "alice"), Ctx());
  CHECK(v.code == 400);
  CHECK(v.message.starts_with("request.oldObject.metadata.labels"));
  admission::Response missing =
      admission::ValidatePod(Request(Operation::kUpdate, nullptr, &good, "alice"), Ctx());
  CHECK(missing.code == 400);
}

TEST_CASE("MutatePod adds the readiness gate at CREATE only while a loop is known to be alive") {
  admission::Context alive = Ctx();
  alive.loopAlive = true;
  struct Row {
    const char* name;
    const char* change;  // applied to kPod
    bool loopAlive;
    const char* gatesAfter;  // spec.readinessGates after the patch, serialised ("null": absent)
  };
  const std::vector<Row> rows = {
      {"no gates, loop alive", "", true, R"([{"conditionType":"inplace-webhook.io/ready"}])"},
      {"no gates, loop not known to be alive: no gate, nothing waits on it", "", false, "null"},
      {"another gate: ours appended",
       R"([{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"lb.example.com/ok"}]}])",
       true,
       R"([{"conditionType":"lb.example.com/ok"},{"conditionType":"inplace-webhook.io/ready"}])"},
      {"declared by the template: not twice",
       R"([{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"inplace-webhook.io/ready"}]}])",
       true, R"([{"conditionType":"inplace-webhook.io/ready"}])"},
      {"null gates", R"([{"op":"add","path":"/spec/readinessGates","value":null}])", true,
       R"([{"conditionType":"inplace-webhook.io/ready"}])"},
      {"gates of a shape the API server refuses: left to it",
       R"([{"op":"add","path":"/spec/readinessGates","value":"x"}])", true, R"("x")"},
      {"already stamped Normal (re-created by a controller): still gets the gate",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Normal"},
           {"op":"add","path":"/metadata/annotations","value":{"inplace-webhook.io/state-timestamp":"2026-11-29T17:00:00Z"}}])",
       true, R"([{"conditionType":"inplace-webhook.io/ready"}])"},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document pod = With(kPod, row.change);
    admission::Context ctx = Ctx();
    ctx.loopAlive = row.loopAlive;
    admission::Response r = admission::MutatePod(Request(Operation::kCreate, nullptr, &pod), ctx);
    REQUIRE(r.allowed);
    json::Document out = Patched(pod, r);
    const json::Value* gates = json::Path(&out, {"spec", "readinessGates"});
    CHECK((gates == nullptr ? std::string("null") : json::SerializeCanonical(*gates)) ==
          std::string(row.gatesAfter));
    // The state stamp is there either way.
    CHECK(json::StringOr(json::Path(&out, {"metadata", "labels"}), "inplace-webhook.io/state") ==
          "Normal");
    // Idempotent: answering its own output changes nothing.
    CHECK(admission::MutatePod(Request(Operation::kCreate, nullptr, &out), ctx).patch.empty());
  }
  // Never on pods that are not opted in, nor on UPDATE.
  json::Document other = With(
      kPod,
      R"([{"op":"replace","path":"/metadata/labels/inplace-webhook.io~1enabled","value":"false"}])");
  CHECK(admission::MutatePod(Request(Operation::kCreate, nullptr, &other), alive).patch.empty());
  json::Document running = Parse(Running());
  CHECK(admission::MutatePod(Request(Operation::kUpdate, &running, &running), alive).patch.empty());
}
