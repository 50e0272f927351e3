// lib/kube_objects.h: the typed views and the one definition of each fact they compute. Tables in
// the style of OpenKruise's lifecycle_utils_test.go.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "lib/kube_objects.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::Parse;

TEST_CASE("a view exists only for an object of Kubernetes' shape") {
  json::Document ok = Parse(R"({"metadata":{"name":"web"},"spec":{"replicas":2}})");
  CHECK(kube::Deployment::From(ok).ok());
  CHECK(kube::ReplicaSet::From(ok).ok());
  CHECK(kube::Pod::From(Parse(R"({"metadata":{"name":"p"}})")).ok());
  struct Row {
    const char* object;
    const char* message;
  };
  for (const Row& r : {
           Row{"[]", "d must be an object, got array"},
           Row{R"({"spec":{"replicas":"2"}})", "d.spec.replicas must be an integer, got string"},
           Row{R"({"spec":{"paused":1}})", "d.spec.paused must be a boolean, got number"},
           Row{R"({"status":{"conditions":{}}})",
               "d.status.conditions must be an array of objects, got object"},
           Row{R"({"metadata":{"labels":{"a":1}}})",
               "d.metadata.labels[\"a\"] must be a string, got number"},
       }) {
    CAPTURE(r.object);
    const Status s = kube::Deployment::From(Parse(r.object), "d").status();
    CHECK(s.code() == Status::Code::kInvalidArgument);
    CHECK(s.message() == r.message);
  }
  CHECK(kube::Pod::From(Parse(R"({"status":{"phase":3}})"), "p").status().message() ==
        "p.status.phase must be a string, got number");
}

TEST_CASE("a pod template: the workload's spec.template, or one on its own through its check") {
  json::Document d = Parse(R"({"metadata":{"annotations":{"deployment.kubernetes.io/revision":"3"}},
    "spec":{"template":{"metadata":{"labels":{"app":"web"},"annotations":{"a":"1"}},
    "spec":{"containers":[{"name":"app","image":"nginx:1.25"},{"name":"log","image":"busybox"}],
            "readinessGates":[{"conditionType":"inplace-webhook.io/ready"}]}}}})");
  const kube::Deployment deployment = test::AsDeployment(d);
  CHECK(deployment.revision() == 3);
  const kube::PodTemplate t = deployment.podTemplate();
  CHECK(&t.json() == json::Path(&d, {"spec", "template"}));  // a view, not a copy
  CHECK(t.label("app") == "web");
  CHECK(t.annotation("a") == "1");
  CHECK(t.annotations() != nullptr);
  CHECK(t.name().empty());
  REQUIRE(t.containers().size() == 2);
  CHECK(t.containers()[1].image() == "busybox");
  CHECK(t.container("app")->image() == "nginx:1.25");
  CHECK_FALSE(t.container("none").has_value());
  CHECK(t.hasReadinessGate("inplace-webhook.io/ready"));
  CHECK_FALSE(t.hasReadinessGate("other"));
  // Absent: an empty template, the same for a ReplicaSet.
  json::Document bare = Parse(R"({"metadata":{"name":"rs"}})");
  CHECK(test::AsReplicaSet(bare).podTemplate().containers().empty());
  CHECK(test::AsReplicaSet(bare).podTemplate().labels() == nullptr);
  // On its own, through its shape check.
  CHECK(kube::PodTemplate::From(*json::Path(&d, {"spec", "template"})).ok());
  struct Row {
    const char* tmpl;
    const char* message;
  };
  for (const Row& r : {
           Row{R"({"spec":{"containers":[{"image":"x"}]}})",
               "t.spec.containers[0].name must be a string"},
           Row{R"({"spec":{"initContainers":{}}})",
               "t.spec.initContainers must be an array of containers, got object"},
           Row{R"({"spec":{"readinessGates":["x"]}})",
               "t.spec.readinessGates[0] must be an object, got string"},
           Row{R"({"metadata":{"annotations":{"a":true}}})",
               "t.metadata.annotations[\"a\"] must be a string, got boolean"},
       }) {
    CAPTURE(r.tmpl);
    CHECK(kube::PodTemplate::From(Parse(r.tmpl), "t").status().message() == r.message);
  }
  // Any object's metadata alone.
  CHECK(
      kube::ObjectView::From(Parse(R"({"metadata":{"labels":{"a":"b"}},"spec":3})"))->label("a") ==
      "b");
  CHECK(kube::ObjectView::From(Parse(R"({"metadata":{"labels":[]}})"), "o").status().message() ==
        "o.metadata.labels must be an object of string values, got array");
}

TEST_CASE("replicas: absent is the API default 1, never below 0") {
  struct Row {
    const char* spec;
    int replicas;
  };
  for (const Row& r : {Row{"{}", 1}, Row{R"({"replicas":0})", 0}, Row{R"({"replicas":5})", 5},
                       Row{R"({"replicas":-3})", 0}, Row{R"({"replicas":null})", 1}}) {
    CAPTURE(r.spec);
    json::Document d = Parse(std::string(R"({"spec":)") + r.spec + "}");
    CHECK(test::AsDeployment(d).replicas() == r.replicas);
    CHECK(test::AsReplicaSet(d).replicas() == r.replicas);
  }
}

// A Deployment with only what the rollout-progress readers look at: metadata.generation,
// spec.replicas and status.{observedGeneration,replicas,updatedReplicas}.
namespace {
json::Document DeploymentWithStatus(int generation, int observed, int spec, int replicas,
                                    int updated) {
  return Parse(R"({"metadata":{"generation":)" + std::to_string(generation) +
               R"(},"spec":{"replicas":)" + std::to_string(spec) +
               R"(},"status":{"observedGeneration":)" + std::to_string(observed) +
               R"(,"replicas":)" + std::to_string(replicas) + R"(,"updatedReplicas":)" +
               std::to_string(updated) + "}}");
}
}  // namespace

TEST_CASE("ControllerCaughtUp: observed this generation, every pod of the newest ReplicaSet") {
  struct Row {
    int generation, observed, spec, replicas, updated;
    bool caughtUp;
  };
  for (const Row& r : {
           Row{3, 3, 2, 2, 2, true},
           Row{3, 4, 2, 2, 2, true},   // observed ahead (kubectl rollout status: >=)
           Row{3, 2, 2, 2, 2, false},  // the controller has not seen the last write
           Row{3, 3, 2, 3, 2, false},  // a surge pod still counted
           Row{3, 3, 2, 2, 1, false},  // an old pod left
           Row{3, 3, 3, 2, 2, false},  // scaled up, not there yet
           Row{1, 1, 0, 0, 0, true},
       }) {
    CAPTURE(r.generation);
    CAPTURE(r.observed);
    CAPTURE(r.replicas);
    json::Document d =
        DeploymentWithStatus(r.generation, r.observed, r.spec, r.replicas, r.updated);
    CHECK(test::AsDeployment(d).ControllerCaughtUp() == r.caughtUp);
  }
}

TEST_CASE("PodsOnNewestReplicaSet: every counted pod updated, whatever the generation observed") {
  struct Row {
    const char* name;
    int generation, observed, spec, replicas, updated;
    bool onNewest;
  };
  for (const Row& r : {
           Row{"caught up", 3, 3, 2, 2, 2, true},
           Row{"a pause or a scale not observed yet", 4, 3, 2, 2, 2, true},
           Row{"a scale-up observed, pods not created yet", 4, 4, 5, 2, 2, true},
           Row{"a scale-down, pods not deleted yet", 4, 4, 1, 2, 2, true},
           Row{"a surge pod of the new ReplicaSet beside an old one", 3, 3, 2, 3, 2, false},
           Row{"paused with a template no ReplicaSet holds", 3, 3, 2, 2, 0, false},
           Row{"no status yet", 1, 0, 2, 0, 0, true},
       }) {
    CAPTURE(r.name);
    json::Document d =
        DeploymentWithStatus(r.generation, r.observed, r.spec, r.replicas, r.updated);
    CHECK(test::AsDeployment(d).PodsOnNewestReplicaSet() == r.onNewest);
  }
}

TEST_CASE("recreate: spec.strategy.type Recreate; absent is RollingUpdate") {
  for (const auto& [spec, recreate] : std::vector<std::pair<const char*, bool>>{
           {"{}", false},
           {R"({"strategy":{}})", false},
           {R"({"strategy":{"type":"RollingUpdate"}})", false},
           {R"({"strategy":{"type":"Recreate"}})", true}}) {
    CAPTURE(spec);
    json::Document d = Parse(std::string(R"({"spec":)") + spec + "}");
    CHECK(test::AsDeployment(d).recreate() == recreate);
  }
}

TEST_CASE("metadata facts: controller owner, labels, annotations, deletion") {
  json::Document d = Parse(R"({"metadata":{"name":"web-1","namespace":"ns","uid":"u",
    "labels":{"app":"web"},"annotations":{"deployment.kubernetes.io/revision":"7"},
    "ownerReferences":[{"kind":"Other","name":"x","uid":"u0"},
                       {"kind":"Deployment","name":"web","uid":"u1","controller":true}]}})");
  const kube::ReplicaSet rs = test::AsReplicaSet(d);
  CHECK(rs.name() == "web-1");
  CHECK(rs.ns() == "ns");
  CHECK(rs.controllerUid() == "u1");
  CHECK(kube::ControllerNameOf(d, "Deployment") == "web");
  CHECK(kube::ControllerNameOf(d, "StatefulSet").empty());
  CHECK(rs.label("app") == "web");
  CHECK_FALSE(rs.label("tier").has_value());
  CHECK(rs.revision() == 7);
  CHECK_FALSE(rs.deleting());
  for (const char* revision : {"", "x", "-1", "7a"}) {
    json::Document r = Parse(std::string(R"({"metadata":{"annotations":{)") +
                             R"("deployment.kubernetes.io/revision":")" + revision + R"("}}})");
    CHECK(test::AsReplicaSet(r).revision() == 0);
  }
  CHECK(test::AsReplicaSet(
            Parse(R"({"metadata":{"ownerReferences":[{"uid":"u","controller":false}]}})"))
            .controllerUid()
            .empty());
}

TEST_CASE("a pod is live unless being deleted or in a terminal phase") {
  struct Row {
    const char* pod;
    bool live;
  };
  for (const Row& r : {
           Row{R"({"status":{"phase":"Running"}})", true},
           Row{R"({"status":{"phase":"Pending"}})", true},
           Row{"{}", true},
           Row{R"({"status":{"phase":"Succeeded"}})", false},
           Row{R"({"status":{"phase":"Failed"}})", false},
           Row{R"({"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}})", false},
       }) {
    CAPTURE(r.pod);
    json::Document p = Parse(r.pod);
    CHECK(test::AsPod(p).live() == r.live);
  }
  json::Document p = Parse(R"({"status":{"conditions":[{"type":"Ready","status":"True"},
    {"type":"inplace-webhook.io/ready","status":"False"}]}})");
  CHECK(test::AsPod(p).conditionTrue("Ready"));
  CHECK_FALSE(test::AsPod(p).conditionTrue("inplace-webhook.io/ready"));
  CHECK_FALSE(test::AsPod(p).conditionTrue("PodScheduled"));
}

TEST_CASE("a condition: one reader of its fields, on pods and Deployments alike") {
  json::Document d = Parse(R"({"status":{"conditions":[{"type":"Progressing","status":"False",
    "reason":"ProgressDeadlineExceeded","message":"m","lastUpdateTime":"2026-01-01T00:00:01Z",
    "lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Available","status":7}]}})");
  const std::optional<kube::Condition> c = test::AsDeployment(d).condition("Progressing");
  REQUIRE(c.has_value());
  CHECK(c->type() == "Progressing");
  CHECK(c->status() == "False");
  CHECK_FALSE(c->isTrue());
  CHECK(c->reason() == "ProgressDeadlineExceeded");
  CHECK(c->message() == "m");
  CHECK(c->lastUpdateTime() == "2026-01-01T00:00:01Z");
  CHECK(c->lastTransitionTime() == "2026-01-01T00:00:00Z");
  // A field of a wrong type reads as empty; an absent condition is nullopt.
  CHECK(test::AsDeployment(d).condition("Available")->status().empty());
  CHECK_FALSE(test::AsDeployment(d).condition("ReplicaFailure").has_value());
  CHECK(test::AsPod(d).condition("Progressing")->reason() == "ProgressDeadlineExceeded");
}

TEST_CASE("a StatefulSet's view: its defaults, its strategy and its pods' ordinals") {
  json::Document bare = Parse(R"({"metadata":{"name":"web","generation":2}})");
  const kube::StatefulSet b = test::AsStatefulSet(bare);
  CHECK(b.replicas() == 1);
  CHECK(b.updateStrategy() == "RollingUpdate");
  CHECK(b.partition() == 0);
  CHECK(b.maxUnavailable() == nullptr);
  CHECK_FALSE(b.parallel());
  CHECK(b.ordinalStart() == 0);
  CHECK_FALSE(b.ControllerObserved());  // observedGeneration 0 < generation 2

  json::Document full = Parse(R"({"metadata":{"name":"web","generation":2},
    "spec":{"replicas":3,"podManagementPolicy":"Parallel","ordinals":{"start":5},"minReadySeconds":7,
            "updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2,"maxUnavailable":"50%"}}},
    "status":{"observedGeneration":2,"replicas":3,"readyReplicas":2,"currentReplicas":1,
              "updatedReplicas":2,"currentRevision":"web-a","updateRevision":"web-b"}})");
  const kube::StatefulSet f = test::AsStatefulSet(full);
  CHECK(f.replicas() == 3);
  CHECK(f.parallel());
  CHECK(f.ordinalStart() == 5);
  CHECK(f.minReadySeconds() == 7);
  CHECK(f.partition() == 2);
  REQUIRE(f.maxUnavailable() != nullptr);
  CHECK(json::View(*f.maxUnavailable()) == "50%");
  CHECK(f.ControllerObserved());
  CHECK(f.readyReplicas() == 2);
  CHECK(f.currentReplicas() == 1);
  CHECK(f.updatedReplicas() == 2);
  CHECK(f.currentRevision() == "web-a");
  CHECK(f.updateRevision() == "web-b");

  // The controller's getParentNameAndOrdinal: `<name>-<digits>`, nothing else.
  CHECK(f.OrdinalOf("web-0") == 0);
  CHECK(f.OrdinalOf("web-12") == 12);
  CHECK(f.OrdinalOf("web-007") == 7);
  for (const char* other :
       {"web", "web-", "web-a", "web-1x", "webb-1", "db-1", "web-99999999999"}) {
    CAPTURE(other);
    CHECK_FALSE(f.OrdinalOf(other));
  }
  CHECK(test::AsStatefulSet(Parse(R"({"spec":{"updateStrategy":{"type":"OnDelete"}}})"))
            .updateStrategy() == "OnDelete");
  CHECK(kube::StatefulSet::From(Parse(R"({"spec":{"template":{"metadata":{"labels":{"a":1}}}}})"),
                                "s")
            .status()
            .message() == "s.spec.template.metadata.labels[\"a\"] must be a string, got number");
  CHECK(kube::StatefulSet::From(
            Parse(R"({"spec":{"updateStrategy":{"rollingUpdate":{"partition":"2"}}}})"), "s")
            .status()
            .message() ==
        "s.spec.updateStrategy.rollingUpdate.partition must be an integer, got string");
}
