#include "hooks/identity_check.h"

namespace iw::identity {

json::Document SelfSubjectReview() {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("apiVersion", "authentication.k8s.io/v1", a);
  d.AddMember("kind", "SelfSubjectReview", a);
  return d;
}

StatusOr<std::string> Check(const json::Value& review, std::string_view controllerUser) {
  const json::Value* info = json::Path(&review, {"status", "userInfo"});
  std::string username(json::StringOr(info, "username"));
  if (username.empty()) {
    return Status::InvalidArgument("the API server's SelfSubjectReview answer names no user");
  }
  if (username != controllerUser) {
    return Status::InvalidArgument(
        "the loop's API identity is " + username + ", not --controller-user " +
        std::string(controllerUser) +
        ": the webhooks would judge the loop's own writes as a user's (its unpause re-paused), "
        "so the loop does not run; set --controller-user (chart: controllerUser) to the identity "
        "the loop's credentials authenticate as");
  }
  return username;
}

}  // namespace iw::identity
