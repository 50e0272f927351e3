// Admission of apps/v1 Deployments: the mutating decision that starts, re-targets and ends an
// in-place update (DESIGN.md §4.1), and the validator that admits only its fixed points (§4a).
#pragma once

#include "hooks/admission.h"

namespace iw::admission {

Response MutateDeployment(const Request& req, const Context& ctx);
Response ValidateDeployment(const Request& req, const Context& ctx);

}  // namespace iw::admission
