// The loop's identity check at start (DESIGN.md §9.6): the API server's answer to a
// SelfSubjectReview (authentication.k8s.io/v1, POST /apis/authentication.k8s.io/v1/
// selfsubjectreviews) names the user the loop's requests run as. The webhooks exempt exactly
// --controller-user; a loop running as anyone else would have its own writes judged as a user's
// (its final unpause re-paused: Deployments paused forever), so it must not run.
#pragma once

#include <string>
#include <string_view>

#include "lib/json.h"
#include "lib/status.h"

namespace iw::identity {

inline constexpr std::string_view kSelfSubjectReviewsPath =
    "/apis/authentication.k8s.io/v1/selfsubjectreviews";

// The request body to POST.
json::Document SelfSubjectReview();

// `review` is the answered SelfSubjectReview: its status.userInfo.username when that is
// `controllerUser`; otherwise InvalidArgument saying why the loop must not run (naming the user it
// found), for the log, the Event and /readyz.
StatusOr<std::string> Check(const json::Value& review, std::string_view controllerUser);

}  // namespace iw::identity
