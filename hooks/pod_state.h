// PodState: where a pod stands in an in-place update (DESIGN.md §4.3), Kruise's four names, stored
// as the value of the label inplace-webhook.io/state. Pure.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "lib/kube_objects.h"

namespace iw::pod_update {

enum class PodState {
  kNormal,           // in service, at no step of an update (also: no label, or one not ours)
  kPreparingUpdate,  // out of service for the change: the pre-update hook, the drain
  kUpdating,         // the change written; the kubelet applies it
  kUpdated,          // the change applied; the post-update hook
};

// Every state, in the order of an update.
inline constexpr std::array<PodState, 4> kAllPodStates = {
    PodState::kNormal, PodState::kPreparingUpdate, PodState::kUpdating, PodState::kUpdated};

// The label's value for `state` ("Normal", "PreparingUpdate", "Updating", "Updated").
std::string_view StateName(PodState state);

// The state a label value names; nullopt for any other value.
std::optional<PodState> ParseState(std::string_view value);

// The pod's state label: kNormal when absent or not one of ours.
PodState LabelStateOf(const kube::Pod& pod);

// The status of the pod's readiness-gate condition (keys::kReadyCondition); nullopt when absent.
std::optional<bool> GateStatus(const kube::Pod& pod);

// Where the pod stands: its state label, except for a pod labelled Normal that
// - has its readiness gate False: draining before its pod write, kPreparingUpdate. Without a
//   pre-update hook the loop starts a drain with the gate write alone (DESIGN.md §4.3: the state
//   label is written only where a hook needs it), so that the gate is the one record of the drain;
//   nothing else leaves a Normal pod with its gate False for longer than a pass (a step that makes
//   the pod Normal sets the gate True in the same pass);
// - is opted in and carries an update-state whose write left the label Normal (completesOnReport)
//   and which the kubelet's report does not show done yet (UpdateCompleted): kUpdating. Where no
//   later write would return the pod (no resize, no post-update hook, no drain's gate), the pod
//   write labels it Normal and the kubelet's report says when it is: one write per pod.
PodState StateOf(const kube::Pod& pod);

}  // namespace iw::pod_update
