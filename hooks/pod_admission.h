// Admission of Pods: stamp the lifecycle state on opted-in pods at CREATE, and keep the state
// keys the controller's alone (DESIGN.md §4.2).
#pragma once

#include "hooks/admission.h"

namespace iw::admission {

Response MutatePod(const Request& req, const Context& ctx);
Response ValidatePod(const Request& req, const Context& ctx);

}  // namespace iw::admission
