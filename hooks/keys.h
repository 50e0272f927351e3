// Every label, annotation and condition key the product reads or writes, in one place.
// The prefix is `inplace-webhook.io/`; DESIGN.md §2 is the contract for each key.
#pragma once

#include <string_view>

namespace iw::keys {

inline constexpr std::string_view kPrefix = "inplace-webhook.io/";

// On Deployments and their pod templates, written by users.
inline constexpr std::string_view kEnabledLabel = "inplace-webhook.io/enabled";
inline constexpr std::string_view kLifecycleAnnotation = "inplace-webhook.io/lifecycle";
inline constexpr std::string_view kPolicyAnnotation = "inplace-webhook.io/policy";
inline constexpr std::string_view kAbortAnnotation = "inplace-webhook.io/abort";
// Commands, consumed when acted on (DESIGN.md §8.1, §8.5): `pause` = "true" holds a running
// in-place update (kubectl rollout pause cannot: the Deployment is already paused); `undo` = "true"
// re-targets a running update to the template its pods started from (kubectl rollout undo refuses
// a paused Deployment).
inline constexpr std::string_view kPauseAnnotation = "inplace-webhook.io/pause";
inline constexpr std::string_view kUndoAnnotation = "inplace-webhook.io/undo";

// On Deployments, written by the webhook and the loop only.
inline constexpr std::string_view kInProgressAnnotation = "inplace-webhook.io/in-progress";
// A Deployment status condition, written by the loop (hooks/progress.h, DESIGN.md §8.9).
inline constexpr std::string_view kProgressCondition = "inplace-webhook.io/Progressing";
// On StatefulSets, written by the loop only: the same condition as JSON (its controller writes
// status.conditions from its cache, so a condition of ours there could be lost; DESIGN.md §4.8).
inline constexpr std::string_view kProgressAnnotation = "inplace-webhook.io/progress";
// On StatefulSets, written by users: seconds without progress before an update is reported
// stalled (a Deployment's spec.progressDeadlineSeconds; default 600).
inline constexpr std::string_view kProgressDeadlineAnnotation =
    "inplace-webhook.io/progress-deadline-seconds";

// On pods, written by the webhook and the loop only.
inline constexpr std::string_view kStateLabel = "inplace-webhook.io/state";
inline constexpr std::string_view kStateTimestampAnnotation = "inplace-webhook.io/state-timestamp";
inline constexpr std::string_view kUpdateStateAnnotation = "inplace-webhook.io/update-state";
inline constexpr std::string_view kReadyCondition = "inplace-webhook.io/ready";
// On pods, written by the loop: `<state>@<state-timestamp>` of the wait for which a HookTimeout
// Event was reported, so it is reported once per wait even across restarts of the loop.
inline constexpr std::string_view kHookTimeoutAnnotation = "inplace-webhook.io/hook-timeout";
// On pods, written by the loop with the gate False (removed with the gate True): when that write
// was sent, to the millisecond, where the gate's lastTransitionTime holds whole seconds. The drain
// runs from it (pod_update::DrainEnd).
inline constexpr std::string_view kGateSentAnnotation = "inplace-webhook.io/gate-sent";

// On the active ReplicaSet from the finish until the update ends (then removed): the template hash
// the update started from, so a re-target after the finish still finds the pods' ReplicaSet.
inline constexpr std::string_view kPreviousTemplateHashAnnotation =
    "inplace-webhook.io/previous-template-hash";
// Written by earlier versions on ReplicaSets; removed when seen (it must not reach a Deployment
// through kubectl rollout undo).
inline constexpr std::string_view kPreviousTemplateAnnotation =
    "inplace-webhook.io/previous-template";

// Values of kStateLabel (Kruise's names).
inline constexpr std::string_view kStateNormal = "Normal";
inline constexpr std::string_view kStatePreparingUpdate = "PreparingUpdate";
inline constexpr std::string_view kStateUpdating = "Updating";
inline constexpr std::string_view kStateUpdated = "Updated";

// Kubernetes' own keys that the rules depend on.
inline constexpr std::string_view kPodTemplateHashLabel = "pod-template-hash";
// A StatefulSet pod's revision: the ControllerRevision its template came from; the StatefulSet
// controller counts and deletes pods by it (DESIGN.md §4.8).
inline constexpr std::string_view kControllerRevisionHashLabel = "controller-revision-hash";
inline constexpr std::string_view kRestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt";
// Pod annotations the API server's pod update validation refuses to add, change or remove
// (ValidatePodSpecificAnnotationUpdates): AppArmor's per-container keys (a prefix) and the
// kubelet's mirror-pod marker.
inline constexpr std::string_view kAppArmorAnnotationPrefix =
    "container.apparmor.security.beta.kubernetes.io/";
inline constexpr std::string_view kMirrorPodAnnotation = "kubernetes.io/config.mirror";
inline constexpr std::string_view kRevisionAnnotation = "deployment.kubernetes.io/revision";
inline constexpr std::string_view kRevisionHistoryAnnotation =
    "deployment.kubernetes.io/revision-history";

// The certificate Secret of --manage-certificates (DESIGN.md §9.7): the user's CA rotation
// trigger (any new value starts one rotation), and the controller's own bookkeeping.
inline constexpr std::string_view kRotateCaAnnotation = "inplace-webhook.io/rotate-ca";
inline constexpr std::string_view kRotateCaDoneAnnotation = "inplace-webhook.io/rotate-ca-done";
inline constexpr std::string_view kCaStagedAtAnnotation = "inplace-webhook.io/ca-staged-at";
inline constexpr std::string_view kCaPromotedAtAnnotation = "inplace-webhook.io/ca-promoted-at";

inline constexpr std::string_view kTrue = "true";

}  // namespace iw::keys
