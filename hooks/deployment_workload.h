// A Deployment as a Workload (hooks/workload.h), DESIGN.md §4.7: the native controller is held by
// spec.paused; the pods an update works on are those of the one ReplicaSet at the update's starting
// template (the base); the finish leaves the ReplicaSets as a native rollout would (DESIGN.md §8.1:
// (1) the template the pods leave gets a zero-replica ReplicaSet of its own holding the base's
// revision (an older zero-replica ReplicaSet at the target is rewritten to be it, or one is
// created; further ones at the target are deleted), then the base's template becomes the
// Deployment's, keeping its pod-template-hash; (2) while still paused, wait until the Deployment
// controller has caught up (kube::Deployment::ControllerCaughtUp) and has given the base the
// newest revision); the undo command writes the starting template back into the Deployment.
// Progress goes into the Deployment's status (hooks/progress).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hooks/workload.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

class DeploymentWorkload final : public Workload {
 public:
  // The views of one pass (they must outlive this): the Deployment, and the ReplicaSets and pods
  // of the snapshot (those it controls, and theirs, count).
  DeploymentWorkload(const kube::Deployment& deployment,
                     const std::vector<const kube::ReplicaSet*>& replicaSets,
                     const std::vector<const kube::Pod*>& pods);

  const kube::ObjectView& object() const override { return d_; }
  std::string_view apiVersion() const override { return "apps/v1"; }
  std::string_view kind() const override { return "Deployment"; }
  std::string Ref() const override;
  kube::PodTemplate podTemplate() const override { return d_.podTemplate(); }
  int minReadySeconds() const override { return d_.minReadySeconds(); }
  int MaxUnavailable() const override;
  std::vector<const kube::Pod*> Pods() const override;
  bool Held() const override { return d_.paused(); }
  std::optional<std::string> EndReason() const override;
  bool RevertPending() const override;
  Action EndPatch(bool release, std::string summary) const override;
  std::string ReleaseWords(bool release) const override;
  std::string_view ReleasedNote() const override { return "Deployment unpaused"; }
  // Exactly one ReplicaSet with replicas, at the old template (or at the new one once the finish
  // began), checked until pods start moving; once they moved, the newest matching one even if
  // scaled to zero. Remembers it for Undo and Finish.
  std::variant<RunBase, NoBase> FindBase(const InProgress& r) override;
  bool UndoRequested() const override;
  Plan Undo(const RunBase& base, const InProgress& r, Clock::time_point now) const override;
  bool Finish(Plan& plan, const RunBase& base, const InProgress& r) const override;
  void AddProgress(Plan& plan, Clock::time_point now) const override;
  void AddEndedWithoutLoop(Plan& plan, Clock::time_point now) const override;

 private:
  // The live pods of `rs`, by name.
  std::vector<const kube::Pod*> PodsOf(const kube::ReplicaSet& rs) const;

  const kube::Deployment& d_;
  std::vector<const kube::ReplicaSet*> owned_;  // controlled by the Deployment
  const std::vector<const kube::Pod*>& pods_;
  const kube::ReplicaSet* base_ = nullptr;  // FindBase's
};

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
