#include "hooks/pod_state.h"

#include "hooks/keys.h"
#include "hooks/update_state.h"
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

PodState LabelStateOf(const kube::Pod& pod) {
  return ParseState(pod.label(keys::kStateLabel).value_or("")).value_or(PodState::kNormal);
}

std::optional<bool> GateStatus(const kube::Pod& pod) {
  const std::optional<kube::Condition> c = pod.condition(keys::kReadyCondition);
  if (!c) return std::nullopt;
  return c->isTrue();
}

PodState StateOf(const kube::Pod& pod) {
  const PodState labelled = LabelStateOf(pod);
  if (labelled != PodState::kNormal) return labelled;
  if (GateStatus(pod) == false) return PodState::kPreparingUpdate;
  if (pod.label(keys::kEnabledLabel) != keys::kTrue) return labelled;
  const std::optional<UpdateState> us = ReadUpdateState(pod);
  if (us && us->completesOnReport && !UpdateCompleted(pod, *us)) return PodState::kUpdating;
  return labelled;
}

}  // namespace iw::pod_update
