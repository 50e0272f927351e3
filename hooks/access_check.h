// Whether the loop can act (DESIGN.md §9.8): the API calls it cannot work without, asked of the
// API server as SelfSubjectAccessReviews (authorization.k8s.io/v1, POST
// /apis/authorization.k8s.io/v1/selfsubjectaccessreviews; every authenticated user may ask,
// through the default system:basic-user binding). A replica that lacks one of them does not lead
// (it steps down, releasing the Lease), answers /loopz "no loop" and fails /readyz, so the
// webhooks stop injecting a readiness gate nothing would set and end an abort at once.
// Pure decisions; the periodic asking is server/loop/access_monitor.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/json.h"

namespace iw::access {

inline constexpr std::string_view kSelfSubjectAccessReviewsPath =
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

// One cluster-wide permission (resourceAttributes without a namespace: every namespace).
struct Permission {
  std::string_view group;  // "" for the core group
  std::string_view resource;
  std::string_view subresource;  // "" for the object itself
  std::string_view verb;
};

// What the loop needs in every namespace (rows of tests/chart/api-calls.md): without one of these
// it cannot watch, update or release pods, gate them or end an update. The Lease is not asked:
// a renewal that is refused already ends leadership.
std::span<const Permission> LoopNeeds();

// "patch pods/status", "list apps/deployments": for messages.
std::string Describe(const Permission& p);

// The request body to POST for `p`.
json::Document Review(const Permission& p);

// An answered review: true when status.allowed is true; false when it is false or absent (the
// API server omits allowed=false).
bool Allowed(const json::Value& answer);

// The /readyz and log message for the permissions refused ("" when none): names them and says
// what the replica does about it.
std::string Problem(const std::vector<Permission>& refused);

}  // namespace iw::access
