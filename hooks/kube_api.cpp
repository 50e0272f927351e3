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

std::string Describe(const Result& r) {
  std::string out = "HTTP " + std::to_string(r.code);
  if (!r.reason.empty()) out += " " + r.reason;
  if (!r.message.empty()) out += ": " + r.message;
  return out;
}

std::string_view StatusReason(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
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
std::string PodResizePath(std::string_view ns, std::string_view name) {
  return PodPath(ns, name) + "/resize";
}
std::string DeploymentsPath(std::string_view ns) {
  return Namespaced("/apis/apps/v1", ns, "deployments");
}
std::string StatefulSetsPath(std::string_view ns) {
  return Namespaced("/apis/apps/v1", ns, "statefulsets");
}
std::string StatefulSetPath(std::string_view ns, std::string_view name) {
  return StatefulSetsPath(ns) + "/" + std::string(name);
}
std::string ControllerRevisionPath(std::string_view ns, std::string_view name) {
  return Namespaced("/apis/apps/v1", ns, "controllerrevisions") + "/" + std::string(name);
}
std::string DeploymentPath(std::string_view ns, std::string_view name) {
  return DeploymentsPath(ns) + "/" + std::string(name);
}
std::string DeploymentStatusPath(std::string_view ns, std::string_view name) {
  return DeploymentPath(ns, name) + "/status";
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
std::string SecretPath(std::string_view ns, std::string_view name) {
  return "/api/v1/namespaces/" + std::string(ns) + "/secrets/" + std::string(name);
}
std::string MutatingWebhookConfigurationPath(std::string_view name) {
  return "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + std::string(name);
}
std::string ValidatingWebhookConfigurationPath(std::string_view name) {
  return "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/" +
         std::string(name);
}

}  // namespace iw::kube
