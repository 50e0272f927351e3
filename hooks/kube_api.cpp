#include "hooks/kube_api.h"

namespace iw::kube {

std::string_view ContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

namespace {
std::string Namespaced(std::string_view prefix, std::string_view ns, std::string_view resource) {
  std::string p(prefix);
  if (!ns.empty()) {
    p += "/namespaces/";
    p += ns;
  }
  p += '/';
  p += resource;
  return p;
}
}  // namespace

std::string PodsPath(std::string_view ns) {
  return Namespaced("/api/v1", ns, "pods");
}
std::string PodPath(std::string_view ns, std::string_view name) {
  return PodsPath(ns) + "/" + std::string(name);
}
std::string PodStatusPath(std::string_view ns, std::string_view name) {
  return PodPath(ns, name) + "/status";
}
std::string DeploymentsPath(std::string_view ns) {
  return Namespaced("/apis/apps/v1", ns, "deployments");
}
std::string DeploymentPath(std::string_view ns, std::string_view name) {
  return DeploymentsPath(ns) + "/" + std::string(name);
}
std::string ReplicaSetsPath(std::string_view ns) {
  return Namespaced("/apis/apps/v1", ns, "replicasets");
}
std::string ReplicaSetPath(std::string_view ns, std::string_view name) {
  return ReplicaSetsPath(ns) + "/" + std::string(name);
}
std::string EventsPath(std::string_view ns) {
  return Namespaced("/api/v1", ns, "events");
}
std::string LeasesPath(std::string_view ns) {
  return Namespaced("/apis/coordination.k8s.io/v1", ns, "leases");
}
std::string LeasePath(std::string_view ns, std::string_view name) {
  return LeasesPath(ns) + "/" + std::string(name);
}

}  // namespace iw::kube
