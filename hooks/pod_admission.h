// Admission of Pods: stamp the lifecycle state on opted-in pods at CREATE, and keep the state
// keys the controller's alone (DESIGN.md §4.2). At CREATE, while a loop is known to be alive
// (Context::loopAlive), an opted-in pod also gets the readiness gate inplace-webhook.io/ready in
// spec.readinessGates, which the loop then sets True; while none is, pods are created without it,
// so none waits on a condition nothing would set (DESIGN.md §8.6). A pod created carrying a state
// of ours (deployment::ForgedStateKeys) starts Normal all the same: those keys are dropped, with a
// warning.
#pragma once

#include <string>

#include "hooks/admission.h"

namespace iw::admission {

Response MutatePod(const Request& req, const Context& ctx);
Response ValidatePod(const Request& req, const Context& ctx);
// A pod DELETE (DESIGN.md §4.8): refused only when the StatefulSet controller deletes a pod that an
// in-place update of its StatefulSet moves, as the loop answers (Context::askHold); every other
// DELETE, one the webhook cannot read, and one the loop does not answer go through.
Response HoldPodDeletion(const Request& req, const Context& ctx);

}  // namespace iw::admission
