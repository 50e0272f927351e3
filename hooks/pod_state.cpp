#include "hooks/pod_state.h"

#include "hooks/keys.h"
#include "lib/kube_objects.h"

namespace iw::pod_update {

std::string_view StateName(PodState state) {
  switch (state) {
    case PodState::kNormal:
      return keys::kStateNormal;
    case PodState::kPreparingUpdate:
      return keys::kStatePreparingUpdate;
    case PodState::kUpdating:
      return keys::kStateUpdating;
    case PodState::kUpdated:
      return keys::kStateUpdated;
  }
  return keys::kStateNormal;
}

std::optional<PodState> ParseState(std::string_view value) {
  for (PodState s : kAllPodStates) {
    if (StateName(s) == value) return s;
  }
  return std::nullopt;
}

PodState StateOf(const json::Value& pod) {
  return ParseState(kube::LabelOf(pod, keys::kStateLabel).value_or("")).value_or(PodState::kNormal);
}

}  // namespace iw::pod_update
