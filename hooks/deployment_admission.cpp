#include "hooks/deployment_admission.h"

namespace iw::admission {

// Pass-through until the in-place decisions land (issue 3): the right answer for objects that
// have not opted in.
Response MutateDeployment(const Request&, const Context&) { return Allowed(); }
Response ValidateDeployment(const Request&, const Context&) { return Allowed(); }

}  // namespace iw::admission
