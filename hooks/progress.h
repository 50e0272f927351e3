// Progress of an in-place update as tools read it (DESIGN.md §8.9, §8.12; a StatefulSet's, §4.8,
// keeps the same report in an annotation: Report below). While paused the
// Deployment controller holds Progressing at Unknown/DeploymentPaused, so it never reports a stuck
// in-place update; the loop reports instead, in the Deployment's status (deployments/status):
//
// - our own condition `inplace-webhook.io/Progressing` (the controller's calculateStatus keeps
//   condition types it does not manage): True/InPlaceUpdateProgressing with "n/m pods updated to
//   template X (k Updating, ...)" while it runs, False/PodUpdateRefused when the API server refused
//   a pod write (the refusal's message follows), False/PodResizeRefused (at once a stall) when it
//   refused a pods/resize write, False/ProgressDeadlineExceeded on a stall,
//   True/InPlaceUpdateCompleted at the end, False/InPlaceUpdateAborted on an abort. Its
//   lastUpdateTime is the last progress: the moment its progress part (the text before the first
//   "; ") last changed. That is the only state, and it lives in the cluster. Each write of it
//   that reports progress of a running update comes with one Normal Event
//   InPlaceUpdateProgressing on the Deployment carrying the same text (so at most one every
//   kMinWriteInterval): the pods' ordinary steps have no Event of their own.
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

#include "hooks/plan.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::progress {

inline constexpr std::string_view kReasonProgressing = "InPlaceUpdateProgressing";
inline constexpr std::string_view kReasonCompleted = "InPlaceUpdateCompleted";
inline constexpr std::string_view kReasonAborted = "InPlaceUpdateAborted";
inline constexpr std::string_view kReasonRefused = "PodUpdateRefused";
inline constexpr std::string_view kReasonResizeRefused = "PodResizeRefused";
// Only pods whose opt-in label was removed are left: the update waits for the user.
inline constexpr std::string_view kReasonNotOptedIn = "PodNotOptedIn";
// The Deployment controller's TimedOutReason, used for both conditions.
inline constexpr std::string_view kReasonDeadline = "ProgressDeadlineExceeded";
// Progressing's message on a stall we report starts with this (how we know the stall is ours).
inline constexpr std::string_view kStallPrefix = "in-place update has timed out progressing";
// Progress changes are written at most this often (a change of reason or status at once).
inline constexpr auto kMinWriteInterval = std::chrono::seconds(2);

// What the loop reports of an update: the fields of a Deployment's condition
// keys::kProgressCondition, which a StatefulSet keeps as JSON in its annotation
// keys::kProgressAnnotation instead (its controller writes status.conditions from its cache and
// retries a conflict with the status it computed before, so a condition of ours there could be
// lost; DESIGN.md §4.8). The rules of both are the same; a StatefulSet has no controller
// Progressing condition to set on a stall.
struct Report {
  std::string status, reason, message;
  std::string lastUpdateTime, lastTransitionTime;
};

// A report as a StatefulSet's annotation stores it: nullopt when absent or malformed (not a JSON
// object, a status or reason that is not a non-empty string, a type other than
// keys::kProgressCondition); other fields of a wrong type read as empty. The loop overwrites a
// malformed one with its next report.
std::optional<Report> ParseReport(std::optional<std::string_view> text);
// ParseReport of the StatefulSet's keys::kProgressAnnotation.
std::optional<Report> StoredReport(const kube::ObjectView& statefulSet);

// A StatefulSet's stall deadline: keys::kProgressDeadlineAnnotation in seconds, a positive integer
// (2147483647: none, as a Deployment's math.MaxInt32), kDefaultStatefulSetDeadline when absent.
// InvalidArgument, naming the key, for any other value (the webhook refuses it).
inline constexpr int kDefaultStatefulSetDeadline = 600;
StatusOr<std::optional<int>> ProgressDeadline(const kube::StatefulSet& statefulSet);

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
// podsByState, target and waitingMessage (a stall's message names it); plans without counts
// (podsAtTarget < 0) other than kCompleted and kAborted get nothing.
void AddProgress(rollout::Plan& plan, const kube::Deployment& deployment,
                 rollout::Clock::time_point now);
// The same for a StatefulSet: its report in keys::kProgressAnnotation (a merge patch of that
// annotation, no resourceVersion), its stall judged by ProgressDeadline(statefulSet).
void AddProgress(rollout::Plan& plan, const kube::StatefulSet& statefulSet,
                 rollout::Clock::time_point now);

// With no update running: the status patch that closes our condition (False/InPlaceUpdateAborted,
// naming why as far as the Deployment shows it) when it still reports an update the webhook ended
// without the loop (DESIGN.md §8.11, §9.8); nothing when it is absent, completed or aborted.
void AddEndedWithoutLoop(rollout::Plan& plan, const kube::Deployment& deployment,
                         rollout::Clock::time_point now);
void AddEndedWithoutLoop(rollout::Plan& plan, const kube::StatefulSet& statefulSet,
                         rollout::Clock::time_point now);

// Whether an answer to a pod write means the API server refused it for good until something
// changes (400 BadRequest, 403 Forbidden: an admission policy or webhook, RBAC; 422 Invalid),
// rather than a conflict, a missing object, throttling or a server error.
bool IsRefusal(int code);

// Whether an answer to the pods/resize write of pod `pod` means the resize will not be made until
// something changes: any 4xx but a conflict (409), a timeout (408) or throttling (429). Besides
// IsRefusal's codes that is 404 when the API server has no pods/resize (before 1.33, or the
// InPlacePodVerticalScaling gate off: --pod-resize names a version the cluster does not run), and
// 401; not a 404 for the pod itself (`pods "P" not found`: it is gone, the next pass no longer has
// it).
bool IsResizeRefusal(int code, std::string_view message, std::string_view pod);

// What the API server refused: a pod write (PodUpdateRefused: retried with backoff, a stall only
// once progressDeadlineSeconds pass without progress), or a pods/resize write (PodResizeRefused:
// the pod keeps running as it was and the update is stuck at once, as for a resize the kubelet
// finds infeasible; the write is still retried, and the first one taken ends the report).
enum class Refused { kPodWrite, kResize };

// The API server refused the pod write (or pods/resize write) of `podName` with `message`, HTTP
// `code` (an admission policy or webhook, validation, RBAC; for a resize also a missing
// subresource): Warning Events PodUpdateRefused / PodResizeRefused on the pod (when `pod` is given)
// and the Deployment (deterministic names: one per pod and message), and the status patch that
// reports it (False/<reason>, "<progress>; pod P: update refused by the API server: <message>", or
// "resize refused"; progress and its lastUpdateTime kept), with Progressing
// False/ProgressDeadlineExceeded at once for a resize. `progress` is the plan's ProgressText.
std::vector<rollout::Action> PlanRefusal(const kube::Deployment& deployment, const kube::Pod* pod,
                                         std::string_view podName, std::string_view progress,
                                         std::string_view message, rollout::Clock::time_point now,
                                         Refused what = Refused::kPodWrite, int code = 0);
std::vector<rollout::Action> PlanRefusal(const kube::StatefulSet& statefulSet, const kube::Pod* pod,
                                         std::string_view podName, std::string_view progress,
                                         std::string_view message, rollout::Clock::time_point now,
                                         Refused what = Refused::kPodWrite, int code = 0);

}  // namespace iw::progress
