// A StatefulSet as a Workload (hooks/workload.h), DESIGN.md §4.8. The native controller is held by
// refusing its pod DELETEs (hooks/statefulset_hold), so as long as the record is stored it is held
// and nothing of the StatefulSet is released at the end but the record. The pods an update works
// on are the live ones it controls with an ordinal from the partition up to the replicas, highest
// ordinal first (the order the controller would replace them in), and below the partition those
// whose move began before it was raised (they finish it); the template they were made from
// is the current ControllerRevision's (the driver reads it). The target is the StatefulSet's
// template with the controller-revision-hash label of status.updateRevision, so that the pod write
// that moves a pod also moves it to the update revision, and the controller counts it as updated.
// The finish is the controller's own: once it reports every pod at the update revision
// (currentRevision == updateRevision), the update ends; pods below a partition wait for it to be
// lowered. No undo command (kubectl rollout undo sts/NAME is a re-target). Progress is reported in
// the StatefulSet's annotation keys::kProgressAnnotation, not in a status condition.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hooks/workload.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

class StatefulSetWorkload final : public Workload {
 public:
  // The views of one pass (they must outlive this): the StatefulSet, the pods of the snapshot
  // (those it controls count) and the template of its current ControllerRevision (nullptr: not
  // read; the update then waits).
  StatefulSetWorkload(const kube::StatefulSet& set, const std::vector<const kube::Pod*>& pods,
                      const kube::PodTemplate* currentRevisionTemplate);

  const kube::ObjectView& object() const override { return s_; }
  std::string_view apiVersion() const override { return "apps/v1"; }
  std::string_view kind() const override { return "StatefulSet"; }
  std::string Ref() const override;
  // spec.template with controller-revision-hash: status.updateRevision.
  kube::PodTemplate podTemplate() const override;
  int minReadySeconds() const override { return s_.minReadySeconds(); }
  // spec.updateStrategy.rollingUpdate.maxUnavailable against the replicas, rounded up, at least 1
  // (the controller's getStatefulSetMaxUnavailable); 1 when absent.
  int MaxUnavailable() const override;
  // The live pods it controls, highest ordinal first.
  std::vector<const kube::Pod*> Pods() const override;
  bool Held() const override { return true; }
  // Another update strategy than RollingUpdate (the webhook ends the update on such a write).
  std::optional<std::string> EndReason() const override;
  bool RevertPending() const override { return false; }
  // The record (and an abort request) removed; `release` adds nothing: the refusals end with it.
  Action EndPatch(bool release, std::string summary) const override;
  std::string ReleaseWords(bool release) const override;
  std::string_view ReleasedNote() const override { return "hold released"; }
  // Waits until the controller observed the StatefulSet's generation (its updateRevision is then
  // the template's) and the current ControllerRevision is read; aborts when that revision's
  // template is not the one the update started from (unless the controller already reports the
  // update revision current: the finish).
  std::variant<RunBase, NoBase> FindBase(const InProgress& r) override;
  bool UndoRequested() const override { return false; }
  Plan Undo(const RunBase&, const InProgress&, Clock::time_point) const override { return {}; }
  bool Finish(Plan& plan, const RunBase& base, const InProgress& r) const override;
  // The report in the StatefulSet's annotation (hooks/progress.h).
  void AddProgress(Plan& plan, Clock::time_point now) const override;
  void AddEndedWithoutLoop(Plan& plan, Clock::time_point now) const override;

 private:
  const kube::StatefulSet& s_;
  const std::vector<const kube::Pod*>& pods_;
  const kube::PodTemplate* current_;
  json::Document target_;  // spec.template with the revision label; viewed by podTemplate()
};

}  // namespace iw::rollout
