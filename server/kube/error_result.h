// What an API error answer becomes: a Result with the metav1.Status code, reason and message,
// as client-go reports them. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "hooks/kube_api.h"

namespace iw::kube {

// Maps an HTTP error answer to a Result: the metav1.Status fields when `body` is one, else a
// reason derived from the code (NotFound, Conflict, ...) and the body text (shortened).
Result ErrorResult(int code, std::string_view body);

// The Status reason for an answer that carried none: client-go says Unknown for codes without one.
std::string ReasonForCode(int code);

}  // namespace iw::kube
