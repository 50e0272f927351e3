#include "hooks/pod_admission.h"

namespace iw::admission {

// Pass-through until the pod decisions land (issue 3).
Response MutatePod(const Request&, const Context&) { return Allowed(); }
Response ValidatePod(const Request&, const Context&) { return Allowed(); }

}  // namespace iw::admission
