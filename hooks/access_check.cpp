#include "hooks/access_check.h"

namespace iw::access {

namespace {

constexpr Permission kLoopNeeds[] = {
    {"", "pods", "", "list"},
    {"", "pods", "", "watch"},
    {"", "pods", "", "patch"},
    {"", "pods", "status", "patch"},
    {"apps", "deployments", "", "list"},
    {"apps", "deployments", "", "watch"},
    {"apps", "deployments", "", "patch"},
    {"apps", "deployments", "status", "patch"},
    {"apps", "replicasets", "", "list"},
    {"apps", "replicasets", "", "watch"},
    {"apps", "replicasets", "", "create"},
    {"apps", "replicasets", "", "patch"},
    {"apps", "replicasets", "", "delete"},
    {"", "events", "", "create"},
};

}  // namespace

std::span<const Permission> LoopNeeds() {
  return kLoopNeeds;
}

std::string Describe(const Permission& p) {
  std::string out = std::string(p.verb) + " ";
  if (!p.group.empty()) out += std::string(p.group) + "/";
  out += p.resource;
  if (!p.subresource.empty()) out += "/" + std::string(p.subresource);
  return out;
}

json::Document Review(const Permission& p) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("apiVersion", "authorization.k8s.io/v1", a);
  d.AddMember("kind", "SelfSubjectAccessReview", a);
  json::Value& attrs =
      json::EnsureObject(json::EnsureObject(d, "spec", a), "resourceAttributes", a);
  json::SetString(attrs, "group", p.group, a);
  json::SetString(attrs, "resource", p.resource, a);
  if (!p.subresource.empty()) json::SetString(attrs, "subresource", p.subresource, a);
  json::SetString(attrs, "verb", p.verb, a);
  return d;
}

bool Allowed(const json::Value& answer) {
  const json::Value* allowed = json::Path(&answer, {"status", "allowed"});
  return allowed != nullptr && allowed->IsBool() && allowed->GetBool();
}

std::string Problem(const std::vector<Permission>& refused) {
  if (refused.empty()) return "";
  std::string names;
  for (const Permission& p : refused) {
    if (!names.empty()) names += ", ";
    names += Describe(p);
  }
  return "the loop cannot act: the API server refuses it " + names +
         " (RBAC: the chart's ClusterRole and ClusterRoleBinding); this replica does not lead " +
         "until it may, so the webhooks inject no readiness gate and end an abort at once";
}

}  // namespace iw::access
