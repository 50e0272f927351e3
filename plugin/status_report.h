// `kubectl inplace status`: what an in-place update of one Deployment or StatefulSet is doing,
// computed from what kubectl read (the Deployment, its pods, its ReplicaSets; or the StatefulSet,
// its pods, its current ControllerRevision) and the time. Pure: no I/O. Every key is
// hooks/keys.h's; the hooks, targets and drains are the loop's own rules (hooks/lifecycle.h,
// hooks/pod_update.h, hooks/statefulset_workload.h), so a row says what the loop waits for.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/pod_state.h"
#include "hooks/progress.h"
#include "lib/json.h"
#include "lib/status.h"
#include "plugin/workload_kind.h"

namespace iw::plugin {

using Clock = std::chrono::system_clock;

// The loop's progress report: a Deployment's condition inplace-webhook.io/Progressing, or the
// same fields in a StatefulSet's annotation (progress::ParseReport).
using ProgressReport = progress::Report;

struct PodRow {
  std::string name;
  pod_update::PodState state = pod_update::PodState::kNormal;  // the state label
  bool ready = false;
  std::string images;    // "app=nginx:1.27,sidecar=pause:3"
  bool updated = false;  // at the update's target (the loop's AtTarget)
  // The update works on it (a StatefulSet's pod at an ordinal below its partition, or beyond its
  // replicas, is not; it counts in neither StatusReport::updated nor total).
  bool inUpdate = true;
  std::string waitsOn;  // what it waits on; empty when it waits on nothing
  std::optional<std::chrono::seconds> inStateFor;  // since state-timestamp, for states not Normal
};

struct StatusReport {
  WorkloadKind kind = WorkloadKind::kDeployment;
  std::string ns, name;
  std::optional<InProgress> record;  // the running update; nullopt: none runs
  bool recordMalformed = false;      // an in-progress annotation that does not parse
  bool userPaused = false;           // the user holds the running update (pausedByUs false)
  bool abortRequested = false;       // abort=true is stored
  bool undoRequested = false;        // undo=true is stored
  // The loop's progress report (ProgressReport); empty when absent.
  std::string conditionStatus, conditionReason, conditionMessage;
  // The Deployment controller's own Progressing condition reason (ProgressDeadlineExceeded on a
  // stall); always empty for a StatefulSet (its controller has no such condition).
  std::string controllerReason;
  bool optedIn = false;  // the workload's inplace-webhook.io/enabled label is "true"
  int updated = 0;       // pods the update works on that are at the target
  int total = 0;         // pods the update works on: a Deployment's live pods; a StatefulSet's
                         // live pods at ordinals from its partition up to its replicas
  // A StatefulSet's spec.updateStrategy.rollingUpdate.partition, and how many of its live pods
  // are below it (rows, not counted in total: they keep their revision until it is lowered).
  int partition = 0;
  int belowPartition = 0;
  std::vector<PodRow> pods;
};

// `deployment` is the Deployment as `kubectl get -o json` prints it; `pods` and `replicaSets` are
// lists (`{"items":[...]}`) of its selector's objects (others are ignored). InvalidArgument when
// the Deployment's shape is not one Kubernetes gives.
StatusOr<StatusReport> BuildStatus(const json::Value& deployment, const json::Value& pods,
                                   const json::Value& replicaSets, Clock::time_point now);

// The same for a StatefulSet (`kubectl get sts -o json`), `pods` a list of its selector's pods
// (those it controls by uid, named by an ordinal, count) and `currentRevision` the
// ControllerRevision its status.currentRevision names (nullptr, or another name: not read). As
// the loop's StatefulSetWorkload: the base template is that revision's (rollout::RevisionTemplate)
// when it is the record's `from` (or the controller already reports the update revision current),
// the target is spec.template with controller-revision-hash: status.updateRevision, and the
// update works on the pods at ordinals from start + partition up to start + replicas; a pod below
// the partition waits on it ("held: below partition N"). The report is keys::kProgressAnnotation's;
// a StatefulSet has no controller condition (controllerReason stays empty).
StatusOr<StatusReport> BuildStatefulSetStatus(const json::Value& statefulSet,
                                              const json::Value& pods,
                                              const json::Value* currentRevision,
                                              Clock::time_point now);

// One word for where the running update is: "updating", "finishing" (every pod at the target and
// Normal), "held" (the user paused it; for a StatefulSet: every pod at or above the partition is
// at the target and Normal, and the rest wait for the partition to be lowered), "aborting" (abort
// requested), "stuck" (a stall or a refused pod write); "" when none runs.
std::string Phase(const StatusReport& report);

// "45s", "3m12s", "1h02m".
std::string FormatDuration(std::chrono::seconds d);
// "[#######-------] 1/2 pods updated", `width` characters between the brackets.
std::string ProgressBar(int done, int total, int width = 30);
// The whole report as the command prints it.
std::string RenderStatus(const StatusReport& report);

// What `status --watch` concludes from one report (DESIGN.md §8.13).
enum class WatchVerdict {
  kRunning,   // an update runs and moves (or waits on a hook within its deadline)
  kStuck,     // it runs, but the loop reports a stall or a refused pod write: exit 1
  kDone,      // no update runs and the last one completed, or none ran while watched: exit 0
  kAborted,   // the watched update ended without completing: exit 2
  kSettling,  // an update's record is gone but the loop has not yet said how it ended
};
// `sawRunning`: an update ran at some earlier poll of this watch.
WatchVerdict Judge(const StatusReport& report, bool sawRunning);

// The exit codes of `status --watch`.
inline constexpr int kExitDone = 0;
inline constexpr int kExitStuck = 1;
inline constexpr int kExitAborted = 2;
inline constexpr int kExitTimeout = 3;

}  // namespace iw::plugin
