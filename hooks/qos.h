// The QoS class kube-apiserver computes for a pod (pkg/apis/core/helper/qos ComputePodQOS), from a
// pod spec or a pod template's spec: a resize may not change it (ValidatePodResize). Template
// containers that set a limit but no request get the request defaulted to the limit on the pod
// (SetDefaults_Pod), so they are read that way. Pod-level spec.resources, when set, decide alone.
// Pure.
#pragma once

#include <string_view>

#include "lib/json.h"

namespace iw::qos {

inline constexpr std::string_view kGuaranteed = "Guaranteed";
inline constexpr std::string_view kBurstable = "Burstable";
inline constexpr std::string_view kBestEffort = "BestEffort";

// One container's (or the pod-level) `resources` object: Guaranteed, Burstable or BestEffort.
std::string_view OfRequirements(const json::Value* resources);

// The pod's class from its spec (init containers and containers).
std::string_view OfPodSpec(const json::Value* podSpec);

}  // namespace iw::qos
