// Which Deployment template changes are applied in place (DESIGN.md §3).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/eligibility.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "tests/unit/eligibility_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using eligibility::Verdict;
using test::AsDeployment;

namespace {

using test::Parse;

// A defaulted pod template as the API server stores it, with two containers, an init container,
// an env read from metadata.name and a downwardAPI volume that reads metadata.name (neither reads
// labels or annotations).
constexpr std::string_view kTemplate = R"({
  "metadata": {"creationTimestamp": null,
               "labels": {"app": "web", "version": "1", "inplace-webhook.io/enabled": "true"},
               "annotations": {"example.com/team": "a"}},
  "spec": {
    "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["true"],
                        "imagePullPolicy": "IfNotPresent"}],
    "containers": [
      {"name": "app", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
       "ports": [{"containerPort": 80, "protocol": "TCP"}],
       "env": [{"name": "MODE", "value": "prod"},
               {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
       "readinessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "periodSeconds": 10},
       "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"},
      {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "infinity"],
       "imagePullPolicy": "IfNotPresent", "resources": {},
       "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
    "volumes": [{"name": "podinfo", "downwardAPI": {"defaultMode": 420,
                 "items": [{"path": "name", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}]}}],
    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
    "securityContext": {}, "terminationGracePeriodSeconds": 30}
})";

// Applies a JSON Patch to a copy of `base`.
json::Document Patch(std::string_view base, std::string_view patch) {
  json::Document doc = Parse(base);
  if (patch.empty()) return doc;
  json::Document ops = Parse(patch);
  Status err = json_patch::Apply(ops, doc);
  REQUIRE_MESSAGE(err.ok(), (std::string(patch) + ": " + err.message()));
  return doc;
}

// "image app=nginx:1.27; label -version; label tier=web; annotation example.com/owner=x".
std::string Describe(const eligibility::Plan& plan) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (const auto& [name, image] : plan.images) add("image " + name + "=" + image);
  for (const auto& [k, v] : plan.labels) add(v ? "label " + k + "=" + *v : "label -" + k);
  for (const auto& [k, v] : plan.annotations) {
    add(v ? "annotation " + k + "=" + *v : "annotation -" + k);
  }
  return out;
}

lifecycle::Policy PolicyOf(std::vector<std::string> patterns) {
  lifecycle::Policy p;
  p.annotations = std::move(patterns);
  return p;
}

// What one comparison gives: "no change", "eligible: <plan>" or "not eligible: <path>".
std::string Outcome(const eligibility::Result& r) {
  switch (r.verdict) {
    case Verdict::kNoChange:
      return "no change";
    case Verdict::kEligible:
      return "eligible: " + Describe(r.plan);
    case Verdict::kNotEligible:
      return "not eligible: " + r.blockingPath;
  }
  return "?";
}

struct Row {
  const char* name;
  const char* both;    // JSON Patch applied to the old and the new template (the scenario)
  const char* change;  // JSON Patch applied to the new template only (the user's change)
  const char* expected;
};

void RunTable(const std::vector<Row>& rows, const lifecycle::Policy& policy) {
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document oldT = Patch(kTemplate, row.both);
    json::Document newT = Patch(json::Serialize(oldT), row.change);
    eligibility::Result r = test::CompareJson(&oldT, &newT, policy);
    CHECK(Outcome(r) == std::string(row.expected));
    if (r.verdict == Verdict::kNotEligible) CHECK_FALSE(r.reason.empty());
  }
}

}  // namespace

TEST_CASE("eligible template changes, alone and combined, give the in-place plan") {
  const std::vector<Row> rows = {
      {"nothing changed", "", "", "no change"},
      {"image of one container", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"}])",
       "eligible: image app=nginx:1.27"},
      {"images of both containers", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/spec/containers/1/image","value":"busybox:1.37"}])",
       "eligible: image app=nginx:1.27; image sidecar=busybox:1.37"},
      {"template label app changed", "",
       R"([{"op":"replace","path":"/metadata/labels/app","value":"web-v2"}])",
       "eligible: label app=web-v2"},
      {"label added", "", R"([{"op":"add","path":"/metadata/labels/tier","value":"frontend"}])",
       "eligible: label tier=frontend"},
      {"label removed", "", R"([{"op":"remove","path":"/metadata/labels/version"}])",
       "eligible: label -version"},
      {"allow-listed annotation added (prefix pattern)", "",
       R"([{"op":"add","path":"/metadata/annotations/example.com~1owner","value":"x"}])",
       "eligible: annotation example.com/owner=x"},
      {"allow-listed annotation changed (exact key)",
       R"([{"op":"add","path":"/metadata/annotations/exact.io~1key","value":"1"}])",
       R"([{"op":"replace","path":"/metadata/annotations/exact.io~1key","value":"2"}])",
       "eligible: annotation exact.io/key=2"},
      {"allow-listed annotation removed", "",
       R"([{"op":"remove","path":"/metadata/annotations/example.com~1team"}])",
       "eligible: annotation -example.com/team"},
      {"image + labels + annotation together", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/metadata/labels/version","value":"2"},
           {"op":"add","path":"/metadata/labels/tier","value":"frontend"},
           {"op":"replace","path":"/metadata/annotations/example.com~1team","value":"b"}])",
       "eligible: image app=nginx:1.27; label tier=frontend; label version=2; "
       "annotation example.com/team=b"},
      {"no labels vs an empty labels map", R"([{"op":"remove","path":"/metadata/labels"}])",
       R"([{"op":"add","path":"/metadata/labels","value":{}}])", "no change"},
      {"annotations map removed with its last allow-listed key", "",
       R"([{"op":"remove","path":"/metadata/annotations"}])",
       "eligible: annotation -example.com/team"},
      {"member order does not matter", "",
       R"([{"op":"move","from":"/spec/dnsPolicy","path":"/spec/zzz"},
           {"op":"move","from":"/spec/zzz","path":"/spec/dnsPolicy"}])",
       "no change"},
  };
  RunTable(rows, PolicyOf({"example.com/*", "exact.io/key"}));
}

TEST_CASE("template changes that need new pods name the first blocking path") {
  const std::vector<Row> rows = {
      {"env value", "",
       R"([{"op":"replace","path":"/spec/containers/0/env/0/value","value":"dev"}])",
       "not eligible: spec.template.spec.containers[0].env"},
      {"env added", "",
       R"([{"op":"add","path":"/spec/containers/1/env","value":[{"name":"A","value":"b"}]}])",
       "not eligible: spec.template.spec.containers[1].env"},
      {"command", "", R"([{"op":"replace","path":"/spec/containers/1/command/1","value":"3600"}])",
       "not eligible: spec.template.spec.containers[1].command"},
      {"resources", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"200m"}])",
       "not eligible: spec.template.spec.containers[0].resources"},
      {"ports", "",
       R"([{"op":"replace","path":"/spec/containers/0/ports/0/containerPort","value":8080}])",
       "not eligible: spec.template.spec.containers[0].ports"},
      {"readiness probe", "",
       R"([{"op":"replace","path":"/spec/containers/0/readinessProbe/periodSeconds","value":5}])",
       "not eligible: spec.template.spec.containers[0].readinessProbe"},
      {"liveness probe added", "",
       R"([{"op":"add","path":"/spec/containers/0/livenessProbe","value":{"tcpSocket":{"port":80}}}])",
       "not eligible: spec.template.spec.containers[0].livenessProbe"},
      {"imagePullPolicy", "",
       R"([{"op":"replace","path":"/spec/containers/0/imagePullPolicy","value":"Always"}])",
       "not eligible: spec.template.spec.containers[0].imagePullPolicy"},
      {"image emptied", "", R"([{"op":"replace","path":"/spec/containers/0/image","value":""}])",
       "not eligible: spec.template.spec.containers[0].image"},
      {"image and env: env blocks", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/spec/containers/0/env/0/value","value":"dev"}])",
       "not eligible: spec.template.spec.containers[0].env"},
      {"volume added", "",
       R"([{"op":"add","path":"/spec/volumes/-","value":{"name":"tmp","emptyDir":{}}}])",
       "not eligible: spec.template.spec.volumes"},
      {"readinessGates added", "",
       R"([{"op":"add","path":"/spec/readinessGates","value":[{"conditionType":"inplace-webhook.io/ready"}]}])",
       "not eligible: spec.template.spec.readinessGates"},
      {"init-container image", "",
       R"([{"op":"replace","path":"/spec/initContainers/0/image","value":"busybox:1.37"}])",
       "not eligible: spec.template.spec.initContainers"},
      {"container added", "",
       R"([{"op":"add","path":"/spec/containers/-","value":{"name":"extra","image":"busybox:1.36"}}])",
       "not eligible: spec.template.spec.containers"},
      {"container removed", "", R"([{"op":"remove","path":"/spec/containers/1"}])",
       "not eligible: spec.template.spec.containers"},
      {"container renamed", "",
       R"([{"op":"replace","path":"/spec/containers/1/name","value":"helper"}])",
       "not eligible: spec.template.spec.containers[1].name"},
      {"containers reordered", "",
       R"([{"op":"move","from":"/spec/containers/1","path":"/spec/containers/0"}])",
       "not eligible: spec.template.spec.containers[0].name"},
      {"nodeSelector", "", R"([{"op":"add","path":"/spec/nodeSelector","value":{"disk":"ssd"}}])",
       "not eligible: spec.template.spec.nodeSelector"},
      {"kubectl rollout restart", "",
       R"([{"op":"add","path":"/metadata/annotations/kubectl.kubernetes.io~1restartedAt","value":"2026-11-29T18:00:00Z"}])",
       "not eligible: spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']"},
      {"annotation outside the allow-list", "",
       R"([{"op":"add","path":"/metadata/annotations/prometheus.io~1scrape","value":"true"}])",
       "not eligible: spec.template.metadata.annotations['prometheus.io/scrape']"},
      {"template finalizers", "", R"([{"op":"add","path":"/metadata/finalizers","value":["f"]}])",
       "not eligible: spec.template.metadata.finalizers"},
      {"label read by a container env fieldRef",
       R"([{"op":"add","path":"/spec/containers/1/env","value":[{"name":"TIER","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['version']"}}}]}])",
       R"([{"op":"replace","path":"/metadata/labels/version","value":"2"}])",
       "not eligible: spec.template.metadata.labels['version']"},
      {"label read by an init-container env fieldRef",
       R"([{"op":"add","path":"/spec/initContainers/0/env","value":[{"name":"V","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['version']"}}}]}])",
       R"([{"op":"remove","path":"/metadata/labels/version"}])",
       "not eligible: spec.template.metadata.labels['version']"},
      {"label read by a downwardAPI volume item",
       R"([{"op":"add","path":"/spec/volumes/0/downwardAPI/items/-","value":{"path":"v","fieldRef":{"fieldPath":"metadata.labels['version']"}}}])",
       R"([{"op":"replace","path":"/metadata/labels/version","value":"2"}])",
       "not eligible: spec.template.metadata.labels['version']"},
      {"new label, all labels read by a downwardAPI volume",
       R"([{"op":"add","path":"/spec/volumes/0/downwardAPI/items/-","value":{"path":"labels","fieldRef":{"fieldPath":"metadata.labels"}}}])",
       R"([{"op":"add","path":"/metadata/labels/tier","value":"frontend"}])",
       "not eligible: spec.template.metadata.labels['tier']"},
      {"label read by a projected downwardAPI source",
       R"([{"op":"add","path":"/spec/volumes/-","value":{"name":"p","projected":{"sources":[{"downwardAPI":{"items":[{"path":"v","fieldRef":{"fieldPath":"metadata.labels['version']"}}]}}]}}}])",
       R"([{"op":"replace","path":"/metadata/labels/version","value":"2"}])",
       "not eligible: spec.template.metadata.labels['version']"},
      {"allow-listed annotation read by env",
       R"([{"op":"add","path":"/spec/containers/1/env","value":[{"name":"TEAM","valueFrom":{"fieldRef":{"fieldPath":"metadata.annotations['example.com/team']"}}}]}])",
       R"([{"op":"replace","path":"/metadata/annotations/example.com~1team","value":"b"}])",
       "not eligible: spec.template.metadata.annotations['example.com/team']"},
      {"a label nobody reads, next to one that is read",
       R"([{"op":"add","path":"/spec/containers/1/env","value":[{"name":"TIER","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['version']"}}}]}])",
       R"([{"op":"add","path":"/metadata/labels/tier","value":"frontend"}])",
       "eligible: label tier=frontend"},
      {"template spec removed", "", R"([{"op":"remove","path":"/spec"}])",
       "not eligible: spec.template.spec"},
  };
  RunTable(rows, PolicyOf({"example.com/*", "exact.io/key"}));
}

TEST_CASE("restartedAt is never eligible, even when the allow-list matches everything") {
  json::Document oldT = Parse(kTemplate);
  json::Document newT = Patch(
      kTemplate,
      R"([{"op":"add","path":"/metadata/annotations/kubectl.kubernetes.io~1restartedAt","value":"now"}])");
  eligibility::Result r = test::CompareJson(&oldT, &newT, PolicyOf({"*"}));
  CHECK(r.verdict == Verdict::kNotEligible);
  CHECK(r.reason.find("rollout restart") != std::string::npos);
  json::Document other = Patch(
      kTemplate, R"([{"op":"add","path":"/metadata/annotations/anything.io~1x","value":"y"}])");
  CHECK(Outcome(test::CompareJson(&oldT, &other, PolicyOf({"*"}))) ==
        "eligible: annotation anything.io/x=y");
}

TEST_CASE("only the templates matter: changes outside them neither block nor count") {
  // After case #2 of OpenKruise's TestCalculateInPlaceUpdateSpec (identical labels outside the
  // template); here they even differ.
  json::Document oldD = Parse(R"({"metadata":{"name":"web","labels":{"a":"1"},"generation":4},
      "spec":{"replicas":3,"minReadySeconds":0,"template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"app","image":"nginx:1.25"}]}}},"status":{"replicas":3}})");
  json::Document newD = Parse(R"({"metadata":{"name":"web","labels":{"a":"2"},"generation":5},
      "spec":{"replicas":5,"minReadySeconds":10,"strategy":{"type":"Recreate"},
      "template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}},"status":{"replicas":4}})");
  lifecycle::Policy none;
  CHECK(Outcome(eligibility::CompareDeployments(AsDeployment(oldD), AsDeployment(newD), none)) ==
        "eligible: image app=nginx:1.27");
  json::Document scaled = Parse(json::Serialize(oldD));
  scaled["spec"]["replicas"].SetInt(7);
  CHECK(Outcome(eligibility::CompareDeployments(AsDeployment(oldD), AsDeployment(scaled), none)) ==
        "no change");
}

// OpenKruise's own unit-test tables for this rule (DESIGN.md §3), ported from its
// pkg/util/inplaceupdate: TestCalculateInPlaceUpdateSpec (inplace_update_test.go) and
// TestDefaultCalculateInPlaceUpdateSpec (inplace_update_defaults_test.go), with the gates our
// product runs with: InPlaceUpdateEnvFromMetadata OFF (no node agent restarts a container whose env
// reads a changed label) and InPlaceWorkloadVerticalScaling OFF (no resize).
TEST_CASE("OpenKruise TestCalculateInPlaceUpdateSpec, env-from-metadata off") {
  struct KruiseRow {
    const char* kruiseCase;
    const char* oldT;  // nullptr: no old template
    const char* newT;
    const char* expected;
    const char* why;
  };
  const std::vector<KruiseRow> rows = {
      {"#0 old revision nil", nullptr, R"({"spec":{"containers":[{"name":"c1","image":"foo2"}]}})",
       "not eligible: spec.template",
       "same as Kruise (nil): without an old template nothing can be patched in place"},
      {"#1 image foo1 -> foo2", R"({"spec":{"containers":[{"name":"c1","image":"foo1"}]}})",
       R"({"spec":{"containers":[{"name":"c1","image":"foo2"}]}})", "eligible: image c1=foo2",
       "same as Kruise"},
      {"#3 label k1 added + image",
       R"({"metadata":{"labels":{"k":"v"}},"spec":{"containers":[{"name":"c1","image":"foo1"}]}})",
       R"({"metadata":{"labels":{"k":"v","k1":"v1"}},"spec":{"containers":[{"name":"c1","image":"foo2"}]}})",
       "eligible: image c1=foo2; label k1=v1", "same as Kruise: images + metadata patch {k1: v1}"},
      {"#4 env reads label k, k changes",
       R"({"metadata":{"labels":{"k":"v"}},"spec":{"containers":[{"name":"c1","image":"foo1",
           "env":[{"name":"TEST_ENV","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['k']"}}}]}]}})",
       R"({"metadata":{"labels":{"k":"v2","k1":"v1"}},"spec":{"containers":[{"name":"c1","image":"foo2",
           "env":[{"name":"TEST_ENV","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['k']"}}}]}]}})",
       "not eligible: spec.template.metadata.labels['k']",
       "DIFFERS from Kruise (in place with updateEnvFromMetadata): we have no node agent to "
       "restart "
       "c1 for its env, so a label read by env means new pods"},
      {"#5 labels k2 removed, k1 added, finalizers changed",
       R"({"metadata":{"labels":{"k":"v","k2":"v2"},"finalizers":["fz1","fz2"]},"spec":{"containers":[{"name":"c1","image":"foo1"}]}})",
       R"({"metadata":{"labels":{"k":"v","k1":"v1"},"finalizers":["fz2"]},"spec":{"containers":[{"name":"c1","image":"foo2"}]}})",
       "not eligible: spec.template.metadata.finalizers",
       "DIFFERS from Kruise: template finalizers are not in DESIGN §3's eligible set"},
      {"#5 without the finalizer change",
       R"({"metadata":{"labels":{"k":"v","k2":"v2"}},"spec":{"containers":[{"name":"c1","image":"foo1"}]}})",
       R"({"metadata":{"labels":{"k":"v","k1":"v1"}},"spec":{"containers":[{"name":"c1","image":"foo2"}]}})",
       "eligible: image c1=foo2; label k1=v1; label -k2",
       "same as Kruise's labels part: {k1: v1, k2: null}"},
      {"#6 malformed templates", R"({"spec":{"name":"x","containers":[{"image":"foo1"}]}})",
       R"({"spec":{"containers":[{"name":"c1","image":"foo2","env":["k"]}]}})",
       "refused: template.spec.containers[0].name must be a string",
       "same as Kruise (nil): an unnamed container cannot be matched; the template view refuses "
       "it before any comparison (a Deployment's shape check does the same)"},
  };
  lifecycle::Policy none;
  for (const KruiseRow& row : rows) {
    const std::string kruiseCase = row.kruiseCase, why = row.why;
    CAPTURE(kruiseCase);
    CAPTURE(why);
    json::Document newT = Parse(row.newT);
    json::Document oldT;
    if (row.oldT != nullptr) oldT = Parse(row.oldT);
    if (std::string_view(row.expected).starts_with("refused: ")) {
      StatusOr<kube::PodTemplate> view = kube::PodTemplate::From(oldT);
      REQUIRE(!view.ok());
      CHECK("refused: " + view.status().message() == row.expected);
      continue;
    }
    eligibility::Result r = test::CompareJson(row.oldT ? &oldT : nullptr, &newT, none);
    CHECK(Outcome(r) == std::string(row.expected));
  }
}

namespace {

// The base template of OpenKruise's TestDefaultCalculateInPlaceUpdateSpec
// (getFakeControllerRevisionData): containers nginx and nginx2 with image nginx:stable-alpine22,
// imagePullPolicy Always and resources; each change applies to the first `n` containers.
std::string VerticalTemplate(int n, bool image, bool cpu, bool memory, bool pullPolicy) {
  std::string out = R"({"spec":{"containers":[)";
  for (int i = 0; i < 2; ++i) {
    bool on = i < n;
    out +=
        std::string(i ? "," : "") + R"({"name":"nginx)" + (i ? "2" : "") +
        R"(","image":"nginx:stable-alpine)" + (on && image ? "23" : "22") +
        R"(","imagePullPolicy":")" + (on && pullPolicy ? "222" : "Always") +
        R"(","resources":{"limits":{"cpu":"2","memory":"4Gi","sigma/eni":"2"},"requests":{"cpu":")" +
        (on && cpu ? "2" : "1") + R"(","memory":")" + (on && memory ? "4Gi" : "2Gi") +
        R"(","sigma/eni":"2"}}})";
  }
  return out + "]}}";
}

}  // namespace

TEST_CASE("OpenKruise TestDefaultCalculateInPlaceUpdateSpec, vertical scaling off") {
  // With the gate off Kruise itself answers nil for every resources diff; only the image-only
  // rows stay in place.
  struct VerticalRow {
    const char* kruiseCase;
    int n;
    bool image, cpu, memory, pullPolicy;
    const char* expected;
  };
  const char* kResources = "not eligible: spec.template.spec.containers[0].resources";
  const char* kPullPolicy = "not eligible: spec.template.spec.containers[0].imagePullPolicy";
  const std::vector<VerticalRow> rows = {
      {"only resource", 1, false, true, false, false, kResources},
      {"image+resource", 1, true, true, false, false, kResources},
      {"other+resource", 1, false, true, false, true, kPullPolicy},
      {"all (image, other, resource)", 1, true, true, false, true, kPullPolicy},
      {"two containers resource", 2, false, true, false, false, kResources},
      {"two containers image+resource", 2, true, true, false, false, kResources},
      {"two containers other+resource", 2, false, true, false, true, kPullPolicy},
      {"two containers all", 2, true, true, false, true, kPullPolicy},
      {"qos, two containers", 2, false, true, true, false, kResources},
      {"qos, one container", 1, false, true, true, false, kResources},
      {"qos + image, one container", 1, true, true, true, false, kResources},
      {"qos + other, one container", 1, false, true, true, true, kPullPolicy},
      {"image only, one container (as in Test_defaultCalculateInPlaceUpdateSpec_VCTHash, gate off)",
       1, true, false, false, false, "eligible: image nginx=nginx:stable-alpine23"},
      {"image only, two containers", 2, true, false, false, false,
       "eligible: image nginx=nginx:stable-alpine23; image nginx2=nginx:stable-alpine23"},
  };
  json::Document oldT = Parse(VerticalTemplate(0, false, false, false, false));
  lifecycle::Policy none;
  for (const VerticalRow& row : rows) {
    const std::string kruiseCase = row.kruiseCase;
    CAPTURE(kruiseCase);
    json::Document newT =
        Parse(VerticalTemplate(row.n, row.image, row.cpu, row.memory, row.pullPolicy));
    CHECK(Outcome(test::CompareJson(&oldT, &newT, none)) == std::string(row.expected));
  }
}

// kube-apiserver's pod update validation (ValidatePodUpdate, v1.37) refuses these on a running pod,
// so no allow-list can make them eligible: the loop's pod write would fail for ever.
TEST_CASE("what the pod API refuses to change is never eligible, whatever the allow-list") {
  struct Row {
    const char* name;
    const char* both;
    const char* change;
    const char* path;           // blockingPath
    const char* podApiRefuses;  // "" when the pod API would accept it (not eligible for us anyway)
  };
  const std::vector<Row> rows = {
      // ValidatePodSpecificAnnotationUpdates: AppArmor keys may not be added, updated or removed.
      {"AppArmor annotation added", "",
       R"([{"op":"add","path":"/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1app","value":"unconfined"}])",
       "spec.template.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app']",
       "annotation container.apparmor.security.beta.kubernetes.io/app"},
      {"AppArmor annotation changed",
       R"([{"op":"add","path":"/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1app","value":"unconfined"}])",
       R"([{"op":"replace","path":"/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1app","value":"runtime/default"}])",
       "spec.template.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app']",
       "annotation container.apparmor.security.beta.kubernetes.io/app"},
      {"AppArmor annotation removed",
       R"([{"op":"add","path":"/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1sidecar","value":"unconfined"}])",
       R"([{"op":"remove","path":"/metadata/annotations/container.apparmor.security.beta.kubernetes.io~1sidecar"}])",
       "spec.template.metadata.annotations['container.apparmor.security.beta.kubernetes.io/"
       "sidecar']",
       "annotation container.apparmor.security.beta.kubernetes.io/sidecar"},
      // ... nor the mirror-pod annotation.
      {"mirror-pod annotation added", "",
       R"([{"op":"add","path":"/metadata/annotations/kubernetes.io~1config.mirror","value":"x"}])",
       "spec.template.metadata.annotations['kubernetes.io/config.mirror']",
       "annotation kubernetes.io/config.mirror"},
      {"mirror-pod annotation removed",
       R"([{"op":"add","path":"/metadata/annotations/kubernetes.io~1config.mirror","value":"x"}])",
       R"([{"op":"remove","path":"/metadata/annotations/kubernetes.io~1config.mirror"}])",
       "spec.template.metadata.annotations['kubernetes.io/config.mirror']",
       "annotation kubernetes.io/config.mirror"},
      // ValidateContainerUpdates: an image with outer whitespace (the template accepts it).
      {"image with a leading space", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":" nginx:1.27"}])",
       "spec.template.spec.containers[0].image",
       "the image of container app to one with leading or trailing whitespace"},
      {"image with a trailing newline", "",
       R"([{"op":"replace","path":"/spec/containers/1/image","value":"busybox:1.37\n"}])",
       "spec.template.spec.containers[1].image",
       "the image of container sidecar to one with leading or trailing whitespace"},
      // "pod updates may not change fields other than ...": every other container field.
      {"imagePullPolicy", "",
       R"([{"op":"replace","path":"/spec/containers/0/imagePullPolicy","value":"Always"}])",
       "spec.template.spec.containers[0].imagePullPolicy", ""},
      {"resources", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"200m"}])",
       "spec.template.spec.containers[0].resources", ""},
      {"terminationGracePeriodSeconds", "",
       R"([{"op":"replace","path":"/spec/terminationGracePeriodSeconds","value":5}])",
       "spec.template.spec.terminationGracePeriodSeconds", ""},
      // What the pod API does accept but a running pod would not act on: still new pods.
      {"activeDeadlineSeconds added", "",
       R"([{"op":"add","path":"/spec/activeDeadlineSeconds","value":600}])",
       "spec.template.spec.activeDeadlineSeconds", ""},
      {"toleration added", "",
       R"([{"op":"add","path":"/spec/tolerations","value":[{"key":"k","operator":"Exists"}]}])",
       "spec.template.spec.tolerations", ""},
      {"init container image", "",
       R"([{"op":"replace","path":"/spec/initContainers/0/image","value":"busybox:1.37"}])",
       "spec.template.spec.initContainers", ""},
  };
  for (const auto& policy :
       {PolicyOf({"*"}), PolicyOf({"container.apparmor.security.beta.kubernetes.io/*",
                                   "kubernetes.io/config.mirror"})}) {
    for (const Row& row : rows) {
      const std::string name = row.name;
      CAPTURE(name);
      json::Document oldT = Patch(kTemplate, row.both);
      json::Document newT = Patch(json::Serialize(oldT), row.change);
      eligibility::Result r = test::CompareJson(&oldT, &newT, policy);
      CHECK(Outcome(r) == "not eligible: " + std::string(row.path));
      CHECK(r.podApiRefuses == row.podApiRefuses);
      CHECK_FALSE(r.reason.empty());
    }
  }
  // Other annotations next to them stay eligible under the allow-list; an image without whitespace
  // too; seccomp's deprecated annotations are accepted by the pod API (and non-functional).
  json::Document oldT = Parse(kTemplate);
  json::Document newT = Patch(kTemplate, R"([
      {"op":"add","path":"/metadata/annotations/seccomp.security.alpha.kubernetes.io~1pod","value":"runtime/default"},
      {"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"}])");
  CHECK(Outcome(test::CompareJson(&oldT, &newT, PolicyOf({"*"}))) ==
        "eligible: image app=nginx:1.27; annotation "
        "seccomp.security.alpha.kubernetes.io/pod=runtime/default");
}
