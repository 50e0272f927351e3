#include "hooks/admission.h"
#include "hooks/pod_admission.h"
#include "hooks/workload_admission.h"

namespace iw::admission {

const std::vector<Route>& Routes() {
  static const std::vector<Route> kRoutes = {
      {"/mutate/deployments", true, MutateDeployment},
      {"/validate/deployments", false, ValidateDeployment},
      {"/mutate/pods", true, MutatePod},
      {"/validate/pods", false, ValidatePod},
      {"/mutate/statefulsets", true, MutateStatefulSet},
      {"/validate/statefulsets", false, ValidateStatefulSet},
      {"/validate/pod-deletions", false, HoldPodDeletion},
  };
  return kRoutes;
}

const Route* FindRoute(std::string_view path) {
  for (const Route& r : Routes()) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

std::string RoutePaths() {
  std::string out;
  for (const Route& r : Routes()) {
    if (!out.empty()) out += ", ";
    out += r.path;
  }
  return out;
}

}  // namespace iw::admission
