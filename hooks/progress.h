// Progress of an in-place update as tools read it (DESIGN.md §8.9, §8.12). While paused the
// Deployment controller holds Progressing at Unknown/DeploymentPaused, so it never reports a stuck
// in-place update; the loop reports instead, in the Deployment's status (deployments/status):
//
// - our own condition `inplace-webhook.io/Progressing` (the controller's calculateStatus keeps
//   condition types it does not manage): True/InPlaceUpdateProgressing with "n/m pods updated to
//   template X (k Updating, ...)" while it runs, False/PodUpdateRefused when the API server refused
//   a pod write (the refusal's message follows), False/ProgressDeadlineExceeded on a stall,
//   True/InPlaceUpdateCompleted at the end, False/InPlaceUpdateAborted on an abort. Its
//   lastUpdateTime is the last progress: the moment its progress part (the text before the first
//   "; ") last changed. That is the only state, and it lives in the cluster.
// - on a stall (no progress for spec.progressDeadlineSeconds): the controller's own Progressing
//   condition False/ProgressDeadlineExceeded, which checkPausedConditions keeps while paused, so
//   `kubectl rollout status` fails with "exceeded its progress deadline" and Argo CD and kstatus
//   report it. When progress resumes it is put back to Unknown/DeploymentPaused.
//
// Pure; the writes are strategic merge patches of status.conditions without a resourceVersion
// (they touch only these conditions, merged by type), placed last in a plan.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/rollout_plan.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::progress {

inline constexpr std::string_view kReasonProgressing = "InPlaceUpdateProgressing";
inline constexpr std::string_view kReasonCompleted = "InPlaceUpdateCompleted";
inline constexpr std::string_view kReasonAborted = "InPlaceUpdateAborted";
inline constexpr std::string_view kReasonRefused = "PodUpdateRefused";
// The Deployment controller's TimedOutReason, used for both conditions.
inline constexpr std::string_view kReasonDeadline = "ProgressDeadlineExceeded";
// Progressing's message on a stall we report starts with this (how we know the stall is ours).
inline constexpr std::string_view kStallPrefix = "in-place update has timed out progressing";
// Progress changes are written at most this often (a change of reason or status at once).
inline constexpr auto kMinWriteInterval = std::chrono::seconds(2);

// "n/m pods updated to template X" plus, when any, "(a PreparingUpdate, b Updating)" in the
// order of the states' names.
std::string ProgressText(int atTarget, int total, std::string_view target,
                         const std::map<std::string, int>& podsByState);

// The text before the first "; " of a condition message (its progress part).
std::string_view ProgressPart(std::string_view message);

// spec.progressDeadlineSeconds; nullopt when absent or math.MaxInt32 (no deadline, as the
// controller's HasProgressDeadline).
std::optional<int> ProgressDeadline(const kube::Deployment& deployment);

// Appends to `plan` the status patch (if the conditions must change) for this pass of an update
// of `deployment` and shortens plan.requeueAfter to the next moment the conditions may change by
// time alone (a stall becoming due, a throttled write). Reads plan.phase, podsAtTarget, podsTotal,
// podsByState and target; plans without counts (podsAtTarget < 0) other than kCompleted and
// kAborted get nothing.
void AddProgress(rollout::Plan& plan, const kube::Deployment& deployment,
                 rollout::Clock::time_point now);

// Whether an answer to a pod write means the API server refused it for good until something
// changes (400 BadRequest, 403 Forbidden: an admission policy or webhook, RBAC; 422 Invalid),
// rather than a conflict, a missing object, throttling or a server error.
bool IsRefusal(int code);

// The API server refused the pod write of `podName` with `message` (an admission policy or
// webhook, validation, RBAC): Warning Events PodUpdateRefused on the pod (when `pod` is given) and
// the Deployment (deterministic names: one per pod and message), and the status patch that
// reports it (False/PodUpdateRefused, "<progress>; pod P: update refused: <message>"; progress
// and its lastUpdateTime kept). `progress` is the plan's ProgressText.
std::vector<rollout::Action> PlanRefusal(const kube::Deployment& deployment, const kube::Pod* pod,
                                         std::string_view podName, std::string_view progress,
                                         std::string_view message, rollout::Clock::time_point now);

}  // namespace iw::progress
