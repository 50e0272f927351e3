// The loop's decisions for one workload (DESIGN.md §4 steps 3–5, §4a, §4.7): given a snapshot of
// a Deployment, its ReplicaSets and its pods as stored in the cluster, and the time, which writes
// this pass makes. Pure: the driver (server/loop/loop) gathers snapshots and applies the actions in
// order, stopping at the first failed write; the next pass re-reads and decides again, so every
// step is resumable and nothing lives only in memory.
//
// The planner is written against hooks/workload.h alone: the end before the start, the base the
// workload finds, the start Events, one step per pod within the budget, and, once every pod is at
// the target and Normal, the workload's finish (a Deployment's: hooks/deployment_workload.h),
// then one end patch (the record dropped, the native controller released if we held it) and the
// Event InPlaceUpdateCompleted.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/plan.h"
#include "hooks/workload.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

// The objects as read; PlanRollout checks the shape of each (kube::Deployment::From, ...).
struct Snapshot {
  const json::Value* deployment = nullptr;
  std::vector<const json::Value*> replicaSets;  // those controlled by the Deployment count
  std::vector<const json::Value*> pods;         // those controlled by its ReplicaSets count
  Clock::time_point now;
};

// A StatefulSet's objects as read: the StatefulSet, its pods (those it controls count) and the
// ControllerRevision its status.currentRevision names (nullptr: not read, or none).
struct StatefulSetSnapshot {
  const json::Value* statefulSet = nullptr;
  std::vector<const json::Value*> pods;
  const json::Value* currentRevision = nullptr;
  Clock::time_point now;
};

// The decisions for one Deployment. Deployments without `in-progress` give kIdle and no action but
// putting back in service the pods an update that ended without the loop left out of it.
Plan PlanRollout(const Snapshot& snapshot);

// The decisions for one StatefulSet (hooks/statefulset_workload), as PlanRollout's for a
// Deployment.
Plan PlanStatefulSetRollout(const StatefulSetSnapshot& snapshot);

// The pod template a StatefulSet's ControllerRevision holds (data.spec.template, without the
// strategic-merge "$patch" key the controller stores with it); nullopt when it holds none.
std::optional<json::Document> RevisionTemplate(const json::Value& controllerRevision);

// One pass over the running update `record` of any workload (PlanRollout's for a Deployment):
// what ends it first, the base the workload finds, the start Events, one step per pod within
// the budget, the workload's finish and the end; then the workload's progress write, last.
Plan PlanUpdate(Workload& workload, const InProgress& record, Clock::time_point now);

// Status patches that set the readiness gate True on pods that declare it, have no such condition
// yet and are not in an update (new pods of any opted-in Deployment; DESIGN.md §2).
std::vector<Action> PlanNewPodGates(const std::vector<const json::Value*>& pods,
                                    Clock::time_point now);

}  // namespace iw::rollout
