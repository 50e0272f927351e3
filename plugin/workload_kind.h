// The two kinds of workload the plugin reads and steers (DESIGN.md §8.13, §4.8): a Deployment
// (deploy/NAME, or a bare NAME) and a StatefulSet (sts/NAME). Pure.
#pragma once

#include <string>
#include <string_view>

namespace iw::plugin {

enum class WorkloadKind { kDeployment, kStatefulSet };

// "Deployment" or "StatefulSet".
inline std::string_view KindName(WorkloadKind kind) {
  return kind == WorkloadKind::kStatefulSet ? "StatefulSet" : "Deployment";
}

// "deploy/NAME" or "sts/NAME": how messages name the workload (kubectl takes both as they are).
inline std::string RefOf(WorkloadKind kind, std::string_view name) {
  return std::string(kind == WorkloadKind::kStatefulSet ? "sts/" : "deploy/") + std::string(name);
}

// "deployment.apps/NAME" or "statefulset.apps/NAME": the resource given to kubectl (the group
// named, so that no CRD of the same short name is taken instead).
inline std::string ResourceOf(WorkloadKind kind, std::string_view name) {
  return std::string(kind == WorkloadKind::kStatefulSet ? "statefulset.apps/"
                                                        : "deployment.apps/") +
         std::string(name);
}

}  // namespace iw::plugin
