// Admission of apps/v1 workloads: for a Deployment, the mutating decision that starts, re-targets
// and ends an in-place update (DESIGN.md §4.1) and the validator that admits only its fixed points
// (§4a); for a StatefulSet the same pair over its own decision (§4.8). One set of handlers, a
// kind's rules plugged in.
#pragma once

#include "hooks/admission.h"

namespace iw::admission {

Response MutateDeployment(const Request& req, const Context& ctx);
Response ValidateDeployment(const Request& req, const Context& ctx);
Response MutateStatefulSet(const Request& req, const Context& ctx);
Response ValidateStatefulSet(const Request& req, const Context& ctx);

}  // namespace iw::admission
