// The loop's decisions for one Deployment (DESIGN.md §4 steps 3–5, §4a): given a snapshot of the
// Deployment, its ReplicaSets and its pods as stored in the cluster, and the time, which writes
// this pass makes. Pure: the driver (server/loop/loop) gathers snapshots and applies the actions in
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

#include "hooks/plan.h"
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
std::optional<Action> PlanReplicaSetCleanup(const kube::Deployment& deployment,
                                            const kube::ReplicaSet& rs);

}  // namespace iw::rollout
