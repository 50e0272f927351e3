// The QoS class of a pod spec (hooks/qos.h), as ComputePodQOS computes it
// (pkg/apis/core/helper/qos, Kubernetes v1.37) on the pod a template makes: each container's limits
// defaulting its missing requests (SetDefaults_Pod). The expected classes were checked against
// k8s.io/kubectl v0.37.2 pkg/util/qos.ComputePodQOS (the same code over v1 types) after that
// defaulting.
#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "hooks/qos.h"
#include "lib/json.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::Parse;

struct Row {
  const char* name;
  const char* spec;  // a pod spec
  std::string_view want;
};

void CheckRows(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    const std::string name = row.name, spec = row.spec;
    CAPTURE(name);
    CAPTURE(spec);
    json::Document d = Parse(row.spec);
    CHECK(qos::OfPodSpec(&d) == row.want);
  }
}

}  // namespace

TEST_CASE("OfRequirements classifies one resources object") {
  struct Case {
    const char* resources;
    std::string_view want;
  };
  const Case cases[] = {
      {R"({})", qos::kBestEffort},
      {R"({"requests":{},"limits":{}})", qos::kBestEffort},
      {R"({"requests":{"cpu":"100m"}})", qos::kBurstable},
      {R"({"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}})",
       qos::kGuaranteed},
      {R"({"limits":{"cpu":"1","memory":"1Gi"}})", qos::kGuaranteed},
      {R"({"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"2","memory":"1Gi"}})",
       qos::kBurstable},
  };
  for (const Case& c : cases) {
    const std::string resources = c.resources;
    CAPTURE(resources);
    json::Document d = Parse(c.resources);
    CHECK(qos::OfRequirements(&d) == c.want);
  }
  CHECK(qos::OfRequirements(nullptr) == qos::kBestEffort);
}

TEST_CASE("OfPodSpec: one container's requests and limits decide its class") {
  CheckRows({
      {"no resources", R"({"containers":[{"name":"a"}]})", qos::kBestEffort},
      {"empty resources", R"({"containers":[{"name":"a","resources":{}}]})", qos::kBestEffort},
      {"empty maps", R"({"containers":[{"name":"a","resources":{"requests":{},"limits":{}}}]})",
       qos::kBestEffort},
      {"cpu request only",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"100m"}}}]})", qos::kBurstable},
      {"requests without limits",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]})",
       qos::kBurstable},
      {"requests equal to limits",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}}]})",
       qos::kGuaranteed},
      {"limits only: the requests default to them",
       R"({"containers":[{"name":"a","resources":{"limits":{"cpu":"100m","memory":"64Mi"}}}]})",
       qos::kGuaranteed},
      {"limits, the cpu request equal, the memory one defaulted",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"100m"},"limits":{"cpu":"100m","memory":"64Mi"}}}]})",
       qos::kGuaranteed},
      {"limits, a lower cpu request",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"50m"},"limits":{"cpu":"100m","memory":"64Mi"}}}]})",
       qos::kBurstable},
      {"a higher memory limit",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"100m","memory":"128Mi"}}}]})",
       qos::kBurstable},
      {"cpu request equal to its limit, no memory",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"1"},"limits":{"cpu":"1"}}}]})",
       qos::kBurstable},
      {"memory limit only",
       R"({"containers":[{"name":"a","resources":{"limits":{"memory":"64Mi"}}}]})",
       qos::kBurstable},
      {"equal quantities spelled differently",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1000m","memory":"1024Mi"}}}]})",
       qos::kGuaranteed},
      {"numbers and strings",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":1,"memory":"1Gi"},"limits":{"cpu":"1","memory":1073741824}}}]})",
       qos::kGuaranteed},
      {"ephemeral-storage only: neither cpu nor memory",
       R"({"containers":[{"name":"a","resources":{"requests":{"ephemeral-storage":"1Gi"}}}]})",
       qos::kBestEffort},
      {"other resources do not count",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi","ephemeral-storage":"1Gi"},"limits":{"cpu":"1","memory":"1Gi","ephemeral-storage":"2Gi"}}}]})",
       qos::kGuaranteed},
      {"zero requests are none",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"0","memory":"0"}}}]})",
       qos::kBestEffort},
      {"a zero request below a limit",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"0","memory":"64Mi"},"limits":{"cpu":"1","memory":"64Mi"}}}]})",
       qos::kBurstable},
  });
}

TEST_CASE("OfPodSpec: every container counts, init containers too") {
  constexpr const char* kG =
      R"({"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"100m","memory":"64Mi"}})";
  const std::string g = kG;
  const std::string both = R"({"name":"a","resources":)" + g + "}";
  const std::vector<std::string> specs = {
      R"({"containers":[)" + both + R"(,{"name":"b","resources":)" + g + "}]}",
      R"({"containers":[)" + both + R"(,{"name":"b"}]})",
      R"({"containers":[{"name":"a"},{"name":"b","resources":{}}]})",
      R"({"containers":[)" + both + R"(,{"name":"b","resources":{"requests":{"cpu":"1"}}}]})",
      R"({"initContainers":[{"name":"i"}],"containers":[)" + both + "]}",
      R"({"initContainers":[{"name":"i","resources":)" + g + R"(}],"containers":[{"name":"a"}]})",
      R"({"initContainers":[{"name":"i","resources":)" + g + R"(}],"containers":[)" + both + "]}",
      R"({"initContainers":[{"name":"i","resources":{"limits":{"cpu":"1"}}}],"containers":[{"name":"a"}]})",
      R"({"initContainers":[{"name":"i"}],"containers":[{"name":"a"}]})",
  };
  const std::vector<Row> rows = {
      {"two Guaranteed containers", specs[0].c_str(), qos::kGuaranteed},
      {"Guaranteed and BestEffort containers", specs[1].c_str(), qos::kBurstable},
      {"two BestEffort containers", specs[2].c_str(), qos::kBestEffort},
      {"Guaranteed and Burstable containers", specs[3].c_str(), qos::kBurstable},
      {"Guaranteed container, BestEffort init container", specs[4].c_str(), qos::kBurstable},
      {"BestEffort container, Guaranteed init container", specs[5].c_str(), qos::kBurstable},
      {"Guaranteed container and init container", specs[6].c_str(), qos::kGuaranteed},
      {"Burstable init container", specs[7].c_str(), qos::kBurstable},
      {"BestEffort container and init container", specs[8].c_str(), qos::kBestEffort},
      {"no containers", R"({})", qos::kBestEffort},
  };
  CheckRows(rows);
  CHECK(qos::OfPodSpec(nullptr) == qos::kBestEffort);
}

TEST_CASE("OfPodSpec: pod-level resources, when set, decide alone") {
  CheckRows({
      {"pod-level Guaranteed, BestEffort containers",
       R"({"resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}},"containers":[{"name":"a"}]})",
       qos::kGuaranteed},
      {"pod-level limits only, BestEffort containers: the requests default to the limits",
       R"({"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"containers":[{"name":"a"}]})",
       qos::kGuaranteed},
      {"pod-level Burstable, Guaranteed containers",
       R"({"resources":{"requests":{"cpu":"1"}},"containers":[{"name":"a","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]})",
       qos::kBurstable},
      {"pod-level requests only, BestEffort containers",
       R"({"resources":{"requests":{"cpu":"1","memory":"1Gi"}},"containers":[{"name":"a"}]})",
       qos::kBurstable},
      {"empty pod-level resources: the containers decide",
       R"({"resources":{},"containers":[{"name":"a","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]})",
       qos::kGuaranteed},
      {"empty pod-level maps: the containers decide",
       R"({"resources":{"requests":{},"limits":{}},"containers":[{"name":"a","resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]})",
       qos::kGuaranteed},
  });
}

// A quantity with the n or u suffix, which the API server writes itself (cpu "0.0005" is stored as
// "500u"): an equal request and limit make Guaranteed. resourceQOS
// (pkg/apis/core/helper/qos/qos.go): `else { // req == lim != 0  return core.PodQOSGuaranteed }`.
TEST_CASE("OfPodSpec reads u and n quantities") {
  CheckRows({
      {"cpu 500u requested and limited",
       R"({"containers":[{"name":"a","resources":{"requests":{"cpu":"500u","memory":"64Mi"},"limits":{"cpu":"500u","memory":"64Mi"}}}]})",
       qos::kGuaranteed},
  });
}

// A divergence from upstream, kept. Pod-level limits without pod-level requests: upstream defaults
// the pod's requests to the containers' aggregate requests first, and only to the limits for a
// resource no container requests (pkg/apis/core/v1/defaults.go defaultPodRequests: "the pod-level
// requests default to the effective requests of all the containers for that resource"), which
// makes this pod Burstable; OfRequirements defaults them to the limits: Guaranteed. No effect on
// eligibility: a template with pod-level resources is never resized in place
// (eligibility_resources_test).
TEST_CASE("OfPodSpec defaults pod-level requests to the pod-level limits (upstream: Burstable)") {
  CheckRows({
      {"pod-level limits, lower container requests",
       R"({"resources":{"limits":{"cpu":"1","memory":"1Gi"}},"containers":[{"name":"a","resources":{"requests":{"cpu":"500m","memory":"512Mi"}}}]})",
       qos::kGuaranteed},
  });
}
