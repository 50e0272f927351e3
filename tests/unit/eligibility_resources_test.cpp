// Which container resources changes of a Deployment template go to running pods through
// pods/resize (hooks/eligibility.h, DESIGN.md §3.1): cpu and memory requests and limits only, never
// removed, the QoS class kept, as ValidatePodResize (pkg/apis/core/validation, Kubernetes v1.37)
// allows, and as far as the API server at hand supports it (resize_support::Support).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/eligibility.h"
#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "lib/quantity.h"
#include "tests/unit/eligibility_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using eligibility::Plan;
using eligibility::Verdict;
using resize_support::Support;
using test::AsDeployment;

namespace {

using test::Parse;

constexpr Support kNone{};                   // no pods/resize
constexpr Support kResizeOnly{true, false};  // 1.33
constexpr Support kAll{true, true};          // 1.34 and later

// A Burstable pod template: `app` with requests below its limits, `sidecar` with none (BestEffort
// alone), an init container with requests only.
constexpr std::string_view kTemplate = R"({
  "metadata": {"labels": {"app": "web"}},
  "spec": {
    "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["true"],
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
    "containers": [
      {"name": "app", "image": "nginx:1.25",
       "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                     "limits": {"cpu": "200m", "memory": "128Mi"}}},
      {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "infinity"],
       "resources": {}}],
    "restartPolicy": "Always"}
})";

// Scenarios (applied to both templates): every container but `app` Guaranteed, so that `app`
// alone decides between Burstable and Guaranteed ...
constexpr const char* kOthersGuaranteed = R"([
  {"op":"replace","path":"/spec/initContainers/0/resources","value":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"10m","memory":"16Mi"}}},
  {"op":"replace","path":"/spec/containers/1/resources","value":{"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"cpu":"50m","memory":"32Mi"}}}])";
// ... then `app` Guaranteed too ...
constexpr const char* kAllGuaranteed = R"([
  {"op":"replace","path":"/spec/initContainers/0/resources","value":{"requests":{"cpu":"10m","memory":"16Mi"},"limits":{"cpu":"10m","memory":"16Mi"}}},
  {"op":"replace","path":"/spec/containers/1/resources","value":{"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"cpu":"50m","memory":"32Mi"}}},
  {"op":"replace","path":"/spec/containers/0/resources","value":{"requests":{"cpu":"200m","memory":"128Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}])";
// ... or no container asks for anything (BestEffort).
constexpr const char* kNoResources = R"([
  {"op":"remove","path":"/spec/initContainers/0/resources"},
  {"op":"remove","path":"/spec/containers/0/resources"}])";
constexpr const char* kMemoryRestarts = R"([
  {"op":"add","path":"/spec/containers/0/resizePolicy","value":[{"resourceName":"cpu","restartPolicy":"NotRequired"},{"resourceName":"memory","restartPolicy":"RestartContainer"}]}])";

// Applies a JSON Patch to a copy of `base`.
json::Document Patch(std::string_view base, std::string_view patch) {
  json::Document doc = Parse(base);
  if (patch.empty()) return doc;
  json::Document ops = Parse(patch);
  Status err = json_patch::Apply(ops, doc);
  REQUIRE_MESSAGE(err.ok(), (std::string(patch) + ": " + err.message()));
  return doc;
}

std::string Join(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ",") + k + "=" + v;
  return "{" + out + "}";
}

// "image app=nginx:1.27; resources app requests{cpu=150m,memory=64Mi} limits{...}".
std::string Describe(const Plan& plan) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (const auto& [name, image] : plan.images) add("image " + name + "=" + image);
  for (const auto& [k, v] : plan.labels) add(v ? "label " + k + "=" + *v : "label -" + k);
  for (const auto& [name, r] : plan.resources) {
    add("resources " + name + " requests" + Join(r.requests) + " limits" + Join(r.limits));
  }
  return out;
}

// "no change", "eligible: <plan>" or "not eligible: <path>".
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

// The cpu/memory requests and limits a pod gets from `r` (SetDefaults_Pod: a limit without a
// request makes the request).
Plan::Resources Defaulted(Plan::Resources r) {
  for (const auto& [resource, q] : r.limits) r.requests.emplace(resource, q);
  return r;
}

bool SameLists(const std::map<std::string, std::string>& a,
               const std::map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [resource, q] : a) {
    auto it = b.find(resource);
    if (it == b.end() || quantity::ParseMilli(q) != quantity::ParseMilli(it->second) ||
        !quantity::ParseMilli(q)) {
      return false;
    }
  }
  return true;
}

// An eligible plan brings a running pod of `oldT` to what `newT` makes: for every container, the
// pod's defaulted cpu/memory with the plan's entries merged in by name (the pods/resize strategic
// merge patch), defaulted again, equal the new template's defaulted ones. Empty when they do, else
// the first container that differs.
std::string PlanMismatch(const json::Value& oldT, const json::Value& newT, const Plan& plan) {
  const json::Value& oldCs = oldT["spec"]["containers"];
  const json::Value& newCs = newT["spec"]["containers"];
  for (rapidjson::SizeType i = 0; i < newCs.Size(); ++i) {
    const std::string name(json::StringOr(&newCs[i], "name"));
    Plan::Resources pod = Defaulted(eligibility::ResourcesOf(kube::Container(oldCs[i])));
    if (auto it = plan.resources.find(name); it != plan.resources.end()) {
      for (const auto& [resource, q] : it->second.requests) pod.requests[resource] = q;
      for (const auto& [resource, q] : it->second.limits) pod.limits[resource] = q;
      pod = Defaulted(pod);
    }
    const Plan::Resources fresh = Defaulted(eligibility::ResourcesOf(kube::Container(newCs[i])));
    if (!SameLists(pod.requests, fresh.requests) || !SameLists(pod.limits, fresh.limits)) {
      return name + ": the pod would have requests" + Join(pod.requests) + " limits" +
             Join(pod.limits) + ", a new pod requests" + Join(fresh.requests) + " limits" +
             Join(fresh.limits);
    }
  }
  return "";
}

struct Row {
  const char* name;
  const char* both;    // JSON Patch applied to the old and the new template (the scenario)
  const char* change;  // JSON Patch applied to the new template only (the user's change)
  Support support;
  const char* expected;  // Outcome
  const char* reason;    // kNotEligible: part of the reason
  bool resize;           // kNotEligible: Result::resize
};

void RunTable(const std::vector<Row>& rows) {
  const lifecycle::Policy policy;
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document oldT = Patch(kTemplate, row.both);
    json::Document newT = Patch(json::Serialize(oldT), row.change);
    eligibility::Result r = test::CompareJson(&oldT, &newT, policy, row.support);
    CHECK(Outcome(r) == std::string(row.expected));
    if (r.verdict == Verdict::kNotEligible) {
      const std::string reason = r.reason;
      CAPTURE(reason);
      CHECK(reason.find(row.reason) != std::string::npos);
      CHECK(r.resize == row.resize);
      CHECK(r.podApiRefuses.empty());
    } else {
      CHECK_FALSE(r.resize);
    }
    if (r.verdict == Verdict::kEligible) CHECK(PlanMismatch(oldT, newT, r.plan) == "");
    // CompareDeployments reads the same templates.
    json::Document oldD = Parse(R"({"spec":{"template":)" + json::Serialize(oldT) + "}}");
    json::Document newD = Parse(R"({"spec":{"template":)" + json::Serialize(newT) + "}}");
    CHECK(Outcome(eligibility::CompareDeployments(AsDeployment(oldD), AsDeployment(newD), policy,
                                                  row.support)) == std::string(row.expected));
  }
}

}  // namespace

TEST_CASE("cpu and memory changes go through pods/resize, with the container's full resources") {
  const std::vector<Row> rows = {
      {"nothing changed", "", "", kAll, "no change", "", false},
      {"nothing changed, no pods/resize", "", "", kNone, "no change", "", false},
      {"cpu request raised", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"}])",
       kAll, "eligible: resources app requests{cpu=150m,memory=64Mi} limits{cpu=200m,memory=128Mi}",
       "", false},
      {"cpu request raised on 1.33", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"}])",
       kResizeOnly,
       "eligible: resources app requests{cpu=150m,memory=64Mi} limits{cpu=200m,memory=128Mi}", "",
       false},
      {"memory request and limit raised", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"96Mi"},
           {"op":"replace","path":"/spec/containers/0/resources/limits/memory","value":"192Mi"}])",
       kAll, "eligible: resources app requests{cpu=100m,memory=96Mi} limits{cpu=200m,memory=192Mi}",
       "", false},
      {"image and cpu limit together", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"300m"}])",
       kAll,
       "eligible: image app=nginx:1.27; resources app requests{cpu=100m,memory=64Mi} "
       "limits{cpu=300m,memory=128Mi}",
       "", false},
      {"an image alone needs no pods/resize", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"}])", kNone,
       "eligible: image app=nginx:1.27", "", false},
      {"request added to empty resources (the pod stays Burstable)", "",
       R"([{"op":"add","path":"/spec/containers/1/resources/requests","value":{"cpu":"10m"}}])",
       kAll, "eligible: resources sidecar requests{cpu=10m} limits{}", "", false},
      {"memory limit added (its request defaults to it)", "",
       R"([{"op":"add","path":"/spec/containers/1/resources/limits","value":{"memory":"64Mi"}}])",
       kAll, "eligible: resources sidecar requests{memory=64Mi} limits{memory=64Mi}", "", false},
      {"two containers resized", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"},
           {"op":"add","path":"/spec/containers/1/resources/requests","value":{"memory":"8Mi"}}])",
       kAll,
       "eligible: resources app requests{cpu=150m,memory=64Mi} limits{cpu=200m,memory=128Mi}; "
       "resources sidecar requests{memory=8Mi} limits{}",
       "", false},
      {"quantities as written, numbers as their JSON text", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"0.15"},
           {"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":1}])",
       kAll, "eligible: resources app requests{cpu=0.15,memory=64Mi} limits{cpu=1,memory=128Mi}",
       "", false},
      {"a Guaranteed pod kept Guaranteed", kAllGuaranteed,
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"300m"},
           {"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"300m"}])",
       kAll,
       "eligible: resources app requests{cpu=300m,memory=128Mi} limits{cpu=300m,memory=128Mi}", "",
       false},
      {"empty pod-level resources are none",
       R"([{"op":"add","path":"/spec/resources","value":{}}])",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"}])",
       kAll, "eligible: resources app requests{cpu=150m,memory=64Mi} limits{cpu=200m,memory=128Mi}",
       "", false},
  };
  RunTable(rows);
}

TEST_CASE("a memory limit is lowered in place from 1.34, or with a RestartContainer policy") {
  constexpr const char* kLower =
      R"([{"op":"replace","path":"/spec/containers/0/resources/limits/memory","value":"96Mi"}])";
  constexpr const char* kLowered =
      "eligible: resources app requests{cpu=100m,memory=64Mi} limits{cpu=200m,memory=96Mi}";
  constexpr const char* kBlocked =
      "not eligible: spec.template.spec.containers[0].resources.limits['memory']";
  const std::vector<Row> rows = {
      {"1.34: lowered", "", kLower, kAll, kLowered, "", false},
      {"1.33: lowered, default policy (NotRequired)", "", kLower, kResizeOnly, kBlocked,
       "RestartContainer", true},
      {"1.33: lowered, explicit NotRequired",
       R"([{"op":"add","path":"/spec/containers/0/resizePolicy","value":[{"resourceName":"memory","restartPolicy":"NotRequired"}]}])",
       kLower, kResizeOnly, kBlocked, "RestartContainer", true},
      {"1.33: lowered, only cpu restarts",
       R"([{"op":"add","path":"/spec/containers/0/resizePolicy","value":[{"resourceName":"cpu","restartPolicy":"RestartContainer"}]}])",
       kLower, kResizeOnly, kBlocked, "RestartContainer", true},
      {"1.33: lowered, memory RestartContainer", kMemoryRestarts, kLower, kResizeOnly, kLowered, "",
       false},
      {"1.34: lowered, memory RestartContainer", kMemoryRestarts, kLower, kAll, kLowered, "",
       false},
      {"1.33: raised", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/memory","value":"256Mi"}])",
       kResizeOnly,
       "eligible: resources app requests{cpu=100m,memory=64Mi} limits{cpu=200m,memory=256Mi}", "",
       false},
      {"1.33: memory request lowered (requests are not limits)", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"32Mi"}])",
       kResizeOnly,
       "eligible: resources app requests{cpu=100m,memory=32Mi} limits{cpu=200m,memory=128Mi}", "",
       false},
      {"1.33: cpu limit lowered", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"150m"}])",
       kResizeOnly,
       "eligible: resources app requests{cpu=100m,memory=64Mi} limits{cpu=150m,memory=128Mi}", "",
       false},
      {"1.33: lowered, spelled in Gi (0.09375Gi = 96Mi)", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/memory","value":"0.09375Gi"}])",
       kResizeOnly, kBlocked, "RestartContainer", true},
  };
  RunTable(rows);
}

TEST_CASE("resources changes pods/resize refuses, or this API server cannot make, need new pods") {
  constexpr const char* kCpu =
      R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"}])";
  const std::vector<Row> rows = {
      {"cpu request raised, no pods/resize", "", kCpu, kNone,
       "not eligible: spec.template.spec.containers[0].resources", "pods/resize", true},
      {"image and cpu, no pods/resize", "",
       R"([{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
           {"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"}])",
       kNone, "not eligible: spec.template.spec.containers[0].resources", "pods/resize", true},
      {"a request removed", "",
       R"([{"op":"remove","path":"/spec/containers/0/resources/requests/memory"}])", kAll,
       "not eligible: spec.template.spec.containers[0].resources.requests['memory']",
       "refuses to remove", true},
      {"a limit removed", "",
       R"([{"op":"remove","path":"/spec/containers/0/resources/limits/cpu"}])", kAll,
       "not eligible: spec.template.spec.containers[0].resources.limits['cpu']",
       "refuses to remove", true},
      {"a limit set to null", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":null}])", kAll,
       "not eligible: spec.template.spec.containers[0].resources.limits['cpu']",
       "refuses to remove", true},
      {"all resources removed", "", R"([{"op":"remove","path":"/spec/containers/0/resources"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources.requests['cpu']",
       "refuses to remove", true},
      {"ephemeral-storage request added", "",
       R"([{"op":"add","path":"/spec/containers/0/resources/requests/ephemeral-storage","value":"1Gi"}])",
       kAll,
       "not eligible: spec.template.spec.containers[0].resources.requests['ephemeral-storage']",
       "only cpu and memory", true},
      {"ephemeral-storage limit changed",
       R"([{"op":"add","path":"/spec/containers/0/resources/limits/ephemeral-storage","value":"1Gi"}])",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/ephemeral-storage","value":"2Gi"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources.limits['ephemeral-storage']",
       "only cpu and memory", true},
      {"cpu and ephemeral-storage together", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"},
           {"op":"add","path":"/spec/containers/0/resources/requests/ephemeral-storage","value":"1Gi"}])",
       kAll,
       "not eligible: spec.template.spec.containers[0].resources.requests['ephemeral-storage']",
       "only cpu and memory", true},
      {"an extended resource added", "",
       R"([{"op":"add","path":"/spec/containers/0/resources/limits/example.com~1gpu","value":"1"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources.limits['example.com/gpu']",
       "only cpu and memory", true},
      {"resource claims added", "",
       R"([{"op":"add","path":"/spec/containers/0/resources/claims","value":[{"name":"gpu"}]}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources.claims",
       "only cpu and memory", true},
      {"Burstable to Guaranteed (limits = requests)", kOthersGuaranteed,
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"200m"},
           {"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"128Mi"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources",
       "QoS class would change from Burstable to Guaranteed", true},
      {"Guaranteed to Burstable (a limit raised)", kAllGuaranteed,
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"300m"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources",
       "QoS class would change from Guaranteed to Burstable", true},
      {"BestEffort to Burstable (a request added)", kNoResources,
       R"([{"op":"add","path":"/spec/containers/1/resources/requests","value":{"cpu":"10m"}}])",
       kAll, "not eligible: spec.template.spec.containers[1].resources",
       "QoS class would change from BestEffort to Burstable", true},
      {"pod-level resources present",
       R"([{"op":"add","path":"/spec/resources","value":{"limits":{"cpu":"1","memory":"1Gi"}}}])",
       kCpu, kAll, "not eligible: spec.template.spec.resources", "pod-level resources", true},
      {"pod-level resources changed",
       R"([{"op":"add","path":"/spec/resources","value":{"limits":{"cpu":"1","memory":"1Gi"}}}])",
       R"([{"op":"replace","path":"/spec/resources/limits/cpu","value":"2"}])", kAll,
       "not eligible: spec.template.spec.resources", "only container images", false},
      {"not a quantity", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"lots"}])",
       kAll, "not eligible: spec.template.spec.containers[0].resources.requests['cpu']",
       "not a quantity", false},
      {"init container resources", "",
       R"([{"op":"replace","path":"/spec/initContainers/0/resources/requests/cpu","value":"20m"}])",
       kAll, "not eligible: spec.template.spec.initContainers", "init containers", false},
      {"resizePolicy changed with the resources", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150m"},
           {"op":"add","path":"/spec/containers/0/resizePolicy","value":[{"resourceName":"memory","restartPolicy":"RestartContainer"}]}])",
       kAll, "not eligible: spec.template.spec.containers[0].resizePolicy",
       "only the image and cpu/memory resources", false},
  };
  RunTable(rows);
}

// Kubernetes compares templates by value: apimachinery pkg/api/equality/semantic.go
// `return a.Cmp(b) == 0`, which the Deployment controller's EqualIgnoreHash uses, so such an edit
// makes no rollout, and no pods/resize. "64Mi" and "67108864" are both canonical: the API server
// keeps either as written.
TEST_CASE("Equal quantities spelled differently are no change") {
  const std::vector<Row> rows = {
      {"1 and 1000m",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"1"}])",
       R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"1000m"}])",
       kAll, "no change", "", false},
      {"64Mi and 67108864", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/memory","value":"67108864"}])",
       kAll, "no change", "", false},
      {"100m and 0.1, no pods/resize", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"0.1"}])",
       kNone, "no change", "", false},
  };
  RunTable(rows);
}

// A cpu of "0.1505" is stored by the API server as "150500u" (its canonical form): suffix.go
// fastLookup `case "u": return 10, -6, DecimalSI, true`.
TEST_CASE("A quantity with the u suffix is resized in place") {
  RunTable({
      {"cpu request 150500u", "",
       R"([{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"150500u"}])",
       kAll,
       "eligible: resources app requests{cpu=150500u,memory=64Mi} limits{cpu=200m,memory=128Mi}",
       "", false},
  });
}

// A template container with a limit but no request: its pods got the request from the limit when
// they were made (SetDefaults_Pod, pkg/apis/core/v1/defaults.go: "If limits are specified, but
// requests are not, default requests to limits"). The plan carries the defaulted request too, so
// the pods/resize patch brings the pod to what the new template makes, and a Guaranteed pod stays
// Guaranteed (ValidatePodResize: "Pod QOS Class may not change as a result of resizing").
TEST_CASE("A limit without a request is resized with its defaulted request") {
  struct Case {
    const char* name;
    const char* both;
  };
  const Case cases[] = {
      {"Guaranteed pod, app with limits only",
       R"([{"op":"replace","path":"/spec/initContainers/0/resources","value":{"limits":{"cpu":"10m","memory":"16Mi"}}},
           {"op":"replace","path":"/spec/containers/1/resources","value":{"limits":{"cpu":"50m","memory":"32Mi"}}},
           {"op":"replace","path":"/spec/containers/0/resources","value":{"limits":{"cpu":"200m","memory":"128Mi"}}}])"},
      {"Burstable pod, app with a cpu limit and no cpu request",
       R"([{"op":"replace","path":"/spec/containers/0/resources","value":{"requests":{"memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}])"},
  };
  const lifecycle::Policy policy;
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    json::Document oldT = Patch(kTemplate, c.both);
    json::Document newT = Patch(
        json::Serialize(oldT),
        R"([{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"300m"}])");
    eligibility::Result r = test::CompareJson(&oldT, &newT, policy, kAll);
    const std::string outcome = Outcome(r);
    CAPTURE(outcome);
    if (r.verdict == Verdict::kEligible) CHECK(PlanMismatch(oldT, newT, r.plan) == "");
    CHECK(r.verdict != Verdict::kNoChange);
  }
}
