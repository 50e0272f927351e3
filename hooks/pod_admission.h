// Admission of Pods: stamp the lifecycle state on opted-in pods at CREATE, and keep the state
// keys the controller's alone (DESIGN.md §4.2). At CREATE, while a loop is known to be alive
// (Context::loopAlive), an opted-in pod also gets the readiness gate inplace-webhook.io/ready in
// spec.readinessGates, which the loop then sets True; while none is, pods are created without it,
// so none waits on a condition nothing would set (DESIGN.md §8.6). A pod created carrying a state
// of ours (ForgedStateKeys) starts Normal all the same: those keys are dropped, with a warning.
#pragma once

#include <string>

#include "hooks/admission.h"

namespace iw::admission {

// The pod state keys of ours that `object`'s metadata (a pod, or a Deployment's pod template)
// carries and that no new pod may start with: `state` other than Normal, `update-state` and
// `hook-timeout` (the loop's records of an update step and of a hook's timeout). Comma-separated
// key names ("" = none); values are not quoted (they came from a client).
std::string ForgedStateKeys(const json::Value& object);

Response MutatePod(const Request& req, const Context& ctx);
Response ValidatePod(const Request& req, const Context& ctx);

}  // namespace iw::admission
