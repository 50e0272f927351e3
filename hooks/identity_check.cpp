#include "hooks/identity_check.h"

namespace iw::identity {

json::Document SelfSubjectReview() {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("apiVersion", "authentication.k8s.io/v1", a);
  d.AddMember("kind", "SelfSubjectReview", a);
  return d;
}

Verdict Check(const json::Value& review, std::string_view controllerUser) {
  Verdict v;
  const json::Value* info = json::Path(&review, {"status", "userInfo"});
  v.username = std::string(json::StringOr(info, "username"));
  if (v.username.empty()) {
    v.message = "the API server's SelfSubjectReview answer names no user";
    return v;
  }
  if (v.username != controllerUser) {
    v.message = "the loop's API identity is " + v.username + ", not --controller-user " +
                std::string(controllerUser) +
                ": the webhooks would judge the loop's own writes as a user's (its unpause " +
                "re-paused), so the loop does not run; set --controller-user (chart: " +
                "controllerUser) to the identity the loop's credentials authenticate as";
    return v;
  }
  v.ok = true;
  return v;
}

}  // namespace iw::identity
