// The loop's decisions for one Deployment (DESIGN.md §4 steps 3–5, §4a): given a snapshot of the
// Deployment, its ReplicaSets and its pods as stored in the cluster, and the time, which writes
// this pass makes. Pure: the driver (server/loop) gathers snapshots and applies the actions in
// order, stopping at the first failed write; the next pass re-reads and decides again, so every
// step is resumable and nothing lives only in memory.
//
// One pass does at most one step per pod and, once every pod is at the target and Normal, the
// finish (DESIGN.md §8.1), which leaves the ReplicaSets as a native rollout would: (1) the template
// the pods leave gets a zero-replica ReplicaSet of its own holding the active one's revision (an
// older zero-replica ReplicaSet at the target is rewritten to be it, or one is created; further
// ones at the target are deleted), then the active ReplicaSet's template becomes the stored
// Deployment template (keeping its pod-template-hash); (2) while still paused, wait until the
// Deployment controller has caught up (kube::Deployment::ControllerCaughtUp: observedGeneration >=
// generation, updatedReplicas == replicas == spec.replicas) and has given the active ReplicaSet the
// newest revision; (3) one Deployment patch:
// unpause if we paused it, drop `in-progress`; Event InPlaceUpdateCompleted.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/kube_api.h"
#include "lib/json.h"

namespace iw::rollout {

using Clock = std::chrono::system_clock;

// `source.component` and `reportingComponent` of our Events.
inline constexpr std::string_view kComponent = "inplace-webhook";

// The objects as read; PlanRollout checks the shape of each (kube::Deployment::From, ...).
struct Snapshot {
  const json::Value* deployment = nullptr;
  std::vector<const json::Value*> replicaSets;  // those controlled by the Deployment count
  std::vector<const json::Value*> pods;         // those controlled by its ReplicaSets count
  Clock::time_point now;
};

enum class WriteKind {
  kPodPatch,
  kPodStatusPatch,
  kPodResizePatch,  // pods/resize: the containers' cpu and memory (strategic merge)
  kReplicaSetPatch,
  kReplicaSetCreate,  // `body` is the whole object
  kReplicaSetDelete,  // no body
  kDeploymentPatch,
  kDeploymentStatusPatch,  // strategic merge of status.conditions, no resourceVersion (progress.h)
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
  // For the progress condition (hooks/progress.h): pods of the update at the target (-1: not
  // counted this pass), all of them, and the target template hash.
  int podsAtTarget = -1;
  int podsTotal = 0;
  std::string target;
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

// The decisions for one Deployment. Deployments without `in-progress` give kIdle and no action but
// putting back in service the pods an update that ended without the loop left out of it.
Plan PlanRollout(const Snapshot& snapshot);

// Status patches that set the readiness gate True on pods that declare it, have no such condition
// yet and are not in an update (new pods of any opted-in Deployment; DESIGN.md §2).
std::vector<Action> PlanNewPodGates(const std::vector<const json::Value*>& pods,
                                    Clock::time_point now);

// After an update ends the Deployment controller leaves its copies of our Deployment annotations
// on the ReplicaSet (it copies, never removes): a patch removing the `in-progress`, `abort`,
// `pause` and `undo` copies the Deployment itself no longer has, and the finish's
// previous-template-hash (and an earlier version's previous-template), so that kubectl rollout
// undo never copies them into a Deployment; nullopt when there is nothing to remove or `rs` is
// not controlled by `deployment`, or the Deployment still has `in-progress`, or is not opted in.
// A key the Deployment itself carries is never removed (the controller would copy it back).
std::optional<Action> PlanReplicaSetCleanup(const json::Value& deployment, const json::Value& rs);

// A core/v1 Event about `involved` (whose apiVersion/kind are given: list items lack them).
// `name` "" leaves metadata.name for the driver to fill.
json::Document MakeEvent(const json::Value& involved, std::string_view apiVersion,
                         std::string_view kind, std::string_view type, std::string_view reason,
                         std::string_view message, Clock::time_point now, std::string_view name);

// A deterministic Event name for `involvedName` and `key`: `<name>.<16 hex digits>`, at most 253
// characters, so creating the same Event twice fails with AlreadyExists.
std::string DedupEventName(std::string_view involvedName, std::string_view key);

}  // namespace iw::rollout
