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

// On Deployments, written by the webhook and the loop only.
inline constexpr std::string_view kInProgressAnnotation = "inplace-webhook.io/in-progress";
// A Deployment status condition, written by the loop (hooks/progress.h, DESIGN.md §8.9).
inline constexpr std::string_view kProgressCondition = "inplace-webhook.io/Progressing";

// On pods, written by the webhook and the loop only.
inline constexpr std::string_view kStateLabel = "inplace-webhook.io/state";
inline constexpr std::string_view kStateTimestampAnnotation = "inplace-webhook.io/state-timestamp";
inline constexpr std::string_view kUpdateStateAnnotation = "inplace-webhook.io/update-state";
inline constexpr std::string_view kReadyCondition = "inplace-webhook.io/ready";
// On pods, written by the loop: `<state>@<state-timestamp>` of the wait for which a HookTimeout
// Event was reported, so it is reported once per wait even across restarts of the loop.
inline constexpr std::string_view kHookTimeoutAnnotation = "inplace-webhook.io/hook-timeout";

// On ReplicaSets, written by the loop when it finishes an update.
inline constexpr std::string_view kPreviousTemplateHashAnnotation =
    "inplace-webhook.io/previous-template-hash";
inline constexpr std::string_view kPreviousTemplateAnnotation =
    "inplace-webhook.io/previous-template";
// On the pod template of an older, zero-replica ReplicaSet whose template equals the target,
// so the Deployment controller's FindNewReplicaSet can no longer pick it.
inline constexpr std::string_view kSupersededByAnnotation = "inplace-webhook.io/superseded-by";

// Values of kStateLabel (Kruise's names).
inline constexpr std::string_view kStateNormal = "Normal";
inline constexpr std::string_view kStatePreparingUpdate = "PreparingUpdate";
inline constexpr std::string_view kStateUpdating = "Updating";
inline constexpr std::string_view kStateUpdated = "Updated";

// Kubernetes' own keys that the rules depend on.
inline constexpr std::string_view kPodTemplateHashLabel = "pod-template-hash";
inline constexpr std::string_view kRestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt";
inline constexpr std::string_view kRevisionAnnotation = "deployment.kubernetes.io/revision";
inline constexpr std::string_view kDesiredReplicasAnnotation =
    "deployment.kubernetes.io/desired-replicas";
inline constexpr std::string_view kMaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas";

inline constexpr std::string_view kTrue = "true";

}  // namespace iw::keys
