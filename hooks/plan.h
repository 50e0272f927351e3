// What one pass of the loop decides for one Deployment: the writes (Action), in order, and what the
// pass found (Plan: phase, counts for the progress condition, requeue). The types alone, shared by
// the planner (hooks/rollout_plan), the progress report (hooks/progress) and the driver
// (server/loop/loop), so that none of them depends on another's decisions. DESIGN.md §4.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/kube_api.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

using Clock = std::chrono::system_clock;

// `source.component` and `reportingComponent` of our Events.
inline constexpr std::string_view kComponent = "inplace-webhook";

enum class WriteKind {
  kPodPatch,
  kPodStatusPatch,
  kPodResizePatch,  // pods/resize: the containers' cpu and memory (strategic merge)
  kReplicaSetPatch,
  kReplicaSetCreate,  // `body` is the whole object
  kReplicaSetDelete,  // no body
  kDeploymentPatch,
  kDeploymentStatusPatch,  // strategic merge of status.conditions, no resourceVersion (progress.h)
  kStatefulSetPatch,
  kEvent,
};

// What a successful action counts in the loop's metrics.
enum class Metric {
  kNone,
  kRolloutStarted,    // an InPlaceUpdateStarted Event was created (not a repeat)
  kRolloutCompleted,  // `seconds`: time since the in-progress record's startedAt
  kRolloutAborted,
  kPodUpdateStarted,    // a pod left Normal for the update
  kPodUpdateCompleted,  // `seconds`: time from the pod write to its containers running
  kHookTimeout,
  kPreUpdateWaitEnded,   // `seconds`: time the pod spent in PreparingUpdate (hook and drain)
  kPostUpdateWaitEnded,  // `seconds`: time the pod spent in Updated (the post-update hook)
};

struct Action {
  WriteKind kind = WriteKind::kEvent;
  std::string ns;
  std::string name;  // object written; for kEvent the Event's name, "" = driver makes a unique one
  std::string resourceVersion;  // writes: the driver sends it as metadata.resourceVersion
  json::Document body;          // the patch (no resourceVersion), or the whole Event object
  Metric metric = Metric::kNone;
  double seconds = 0;
  std::string pod;      // the pod concerned, if any (logs)
  std::string summary;  // one line for the logs
  // kPodStatusPatch of a gate change: the writer sets every condition's lastTransitionTime in
  // `body` to the time it sends the write (pod_update::PodOp::stampTransition).
  bool stampTransition = false;

  // Strategic merge for pods (containers merge by name, conditions by type) and Deployment
  // status (conditions by type), JSON merge patch for ReplicaSets and Deployments.
  kube::PatchType PatchType() const;
  // The API path this action writes to (for kEvent: the namespace's events collection).
  std::string Path() const;
};

enum class Phase {
  kIdle,                  // no in-place update on this Deployment
  kUpdating,              // pods are being moved (or wait in hooks / for budget)
  kFinishing,             // ReplicaSet patches made this pass
  kWaitingForController,  // ReplicaSet patched; waiting for the Deployment controller's status
  kCompleted,             // the final Deployment patch is in `actions`
  kAborted,               // the abort patch is in `actions`
  kBlocked,               // cannot proceed (see message); no writes
};
std::string_view PhaseName(Phase phase);

struct Plan {
  Phase phase = Phase::kIdle;
  std::vector<Action> actions;
  std::optional<Clock::duration> requeueAfter;  // a time-based wait ends then
  std::string message;                          // the reason for abort / block / wait
  std::map<std::string, int> podsByState;       // for the pods-by-state gauge
  std::map<std::string, int> podsByWait;        // by pod_update::WaitName, for the waiting gauge
  // For the progress condition (hooks/progress.h): pods of the update at the target (-1: not
  // counted this pass), all of them, and the target template hash.
  int podsAtTarget = -1;
  int podsTotal = 0;
  std::string target;
  // The user holds what is left (a StatefulSet's partition above every pod done): no stall
  // deadline runs, as while a user pauses a Deployment's update.
  bool staged = false;
  // No progress for spec.progressDeadlineSeconds: the progress condition reports
  // ProgressDeadlineExceeded (set by progress::AddProgress, for the stalled-update gauge).
  bool stalled = false;
  // A pod that cannot go on until something changes (pod_update::Step's stuckReason): reported
  // at once as a stall, the first one met of this pass.
  std::string stuckReason;
  std::string stuckMessage;
  // What a pod waits on that the user must fix (pod_update::Step's waitingMessage, the first one
  // met of this pass): named in the stall's message once progressDeadlineSeconds pass.
  std::string waitingMessage;
};

// A core/v1 Event about `involved` (whose apiVersion/kind are given: list items lack them).
// `name` "" leaves metadata.name for the driver to fill.
json::Document MakeEvent(const kube::ObjectView& involved, std::string_view apiVersion,
                         std::string_view kind, std::string_view type, std::string_view reason,
                         std::string_view message, Clock::time_point now, std::string_view name);

// The action that creates MakeEvent's Event (kEvent, its namespace and name, `metric` counted when
// it is made, a summary for the logs).
Action EventAction(const kube::ObjectView& involved, std::string_view apiVersion,
                   std::string_view kind, std::string_view type, std::string_view reason,
                   std::string_view message, Clock::time_point now, std::string name,
                   Metric metric = Metric::kNone);

// A write of `kind` to `object` with `body`, sent with the object's resourceVersion.
Action WriteAction(WriteKind kind, const kube::ObjectView& object, json::Document body,
                   std::string summary);

// A deterministic Event name for `involvedName` and `key`: `<name>.<16 hex digits>`, at most 253
// characters, so creating the same Event twice fails with AlreadyExists.
std::string DedupEventName(std::string_view involvedName, std::string_view key);

}  // namespace iw::rollout
