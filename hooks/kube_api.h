// The small Kubernetes API surface the loop's decisions are written against. server/ implements
// it over HTTPS (kube_client); tests implement it in memory or point the real client at the test
// API server. Paths are API paths without the host: /api/v1/namespaces/NS/pods/NAME.
//
// Thread safety: the process shares one implementation (server/kube/kube_client.h, thread-safe)
// between the loop, its informers, the leader elector, the access monitor and the certificate
// controller, each on threads of its own: an implementation given to more than one of them must
// take calls from any thread at once.
#pragma once

#include <string>
#include <string_view>

#include "lib/json.h"

namespace iw::kube {

enum class PatchType { kMerge, kJson, kStrategicMerge };

std::string_view ContentType(PatchType type);

// The metav1.StatusReason kube-apiserver pairs with HTTP `code` ("NotFound" for 404, "Invalid"
// for 422, ...), or "" for a code it names no reason for.
std::string_view StatusReason(int code);

// The answer of one call. `code` is the HTTP status (0 when no answer arrived); on failure
// `reason` and `message` come from the metav1.Status body (or describe the transport error).
struct Result {
  int code = 0;
  std::string reason;
  std::string message;
  json::Document object;  // the returned object (or list) when the call succeeded

  bool Ok() const { return code >= 200 && code < 300; }
  bool Conflict() const { return code == 409; }
  bool NotFound() const { return code == 404; }
};

// A failed call as logs and results name it: "HTTP <code> <reason>: <message>" (each part only
// when present).
std::string Describe(const Result& r);

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
  int limit = 500;  // page size; List follows `continue` until the end
};

class Api {
 public:
  virtual ~Api() = default;
  virtual Result Get(std::string_view path) = 0;
  // All pages concatenated into one list object ({"items":[...],"metadata":{"resourceVersion"}}).
  virtual Result List(std::string_view path, const ListOptions& options) = 0;
  virtual Result Create(std::string_view path, const json::Value& object) = 0;
  virtual Result Update(std::string_view path, const json::Value& object) = 0;
  virtual Result Patch(std::string_view path, PatchType type, std::string_view body) = 0;
  virtual Result Delete(std::string_view path) = 0;
};

// Path builders.
std::string PodsPath(std::string_view ns);
std::string PodPath(std::string_view ns, std::string_view name);
std::string PodStatusPath(std::string_view ns, std::string_view name);
std::string PodResizePath(std::string_view ns, std::string_view name);
std::string DeploymentsPath(std::string_view ns);  // ns empty: all namespaces
std::string DeploymentPath(std::string_view ns, std::string_view name);
std::string DeploymentStatusPath(std::string_view ns, std::string_view name);
std::string ReplicaSetsPath(std::string_view ns);
std::string ReplicaSetPath(std::string_view ns, std::string_view name);
std::string StatefulSetsPath(std::string_view ns);  // ns empty: all namespaces
std::string StatefulSetPath(std::string_view ns, std::string_view name);
std::string ControllerRevisionPath(std::string_view ns, std::string_view name);
std::string EventsPath(std::string_view ns);
std::string LeasePath(std::string_view ns, std::string_view name);
std::string LeasesPath(std::string_view ns);
std::string SecretPath(std::string_view ns, std::string_view name);
std::string MutatingWebhookConfigurationPath(std::string_view name);
std::string ValidatingWebhookConfigurationPath(std::string_view name);

}  // namespace iw::kube
