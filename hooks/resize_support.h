// What the API server lets the product do with container resources of a running pod (DESIGN.md
// §3.1): whether it serves the pods/resize subresource (in-place pod vertical scaling: beta and on
// by default in Kubernetes 1.33, GA in 1.35), and whether it accepts a memory limit decrease for a
// container whose memory resizePolicy is NotRequired (1.34 and later; 1.33 asks for
// RestartContainer). Pure.
#pragma once

#include <optional>
#include <string_view>

#include "lib/json.h"
#include "lib/status.h"

namespace iw::resize_support {

struct Support {
  bool podResize = false;            // pods/resize is served: cpu/memory changes can be in place
  bool memoryLimitDecrease = false;  // ... including a memory limit decrease without a restart
  bool operator==(const Support&) const = default;
};

// Everything on (the loop's view: the webhook already decided what is in place).
inline constexpr Support kAll{true, true};

// From a Kubernetes version as `kubectl version` or Helm's .Capabilities.KubeVersion print it
// ("v1.33.4", "1.34", "v1.35.0-gke.100"): pods/resize from 1.33, memory decreases from 1.34.
// InvalidArgument when it is not a version.
StatusOr<Support> FromVersion(std::string_view version);

// From discovery: whether /api/v1 lists `pods/resize`, and the server's /version gitVersion
// (memory decreases as FromVersion; an unreadable version with the subresource served: 1.33's
// rules, the stricter ones).
Support FromDiscovery(bool resizeServed, std::string_view gitVersion);

// FromDiscovery over the API server's own answers: `apiV1` the APIResourceList of GET /api/v1,
// `version` the object of GET /version. InvalidArgument when either is not what it sends.
StatusOr<Support> FromDiscoveryAnswers(const json::Value& apiV1, const json::Value& version);

// The value of --pod-resize: "auto" (nullopt: ask the API server), "off", or a version.
// InvalidArgument otherwise.
StatusOr<std::optional<Support>> ParseFlag(std::string_view flag);

}  // namespace iw::resize_support
