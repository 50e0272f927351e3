#include "hooks/statefulset_workload.h"

#include <algorithm>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/pod_state.h"
#include "hooks/progress.h"
#include "hooks/statefulset_rules.h"
#include "lib/kube_patch.h"

namespace iw::rollout {

StatefulSetWorkload::StatefulSetWorkload(const kube::StatefulSet& set,
                                         const std::vector<const kube::Pod*>& pods,
                                         const kube::PodTemplate* currentRevisionTemplate)
    : s_(set), pods_(pods), current_(currentRevisionTemplate) {
  target_.CopyFrom(set.podTemplate().json(), target_.GetAllocator());
  if (!target_.IsObject()) target_.SetObject();
  if (!set.updateRevision().empty()) {
    auto& a = target_.GetAllocator();
    json::SetString(json::EnsureObject(json::EnsureObject(target_, "metadata", a), "labels", a),
                    keys::kControllerRevisionHashLabel, set.updateRevision(), a);
  }
}

std::string StatefulSetWorkload::Ref() const {
  return statefulset::Ref(s_);
}

kube::PodTemplate StatefulSetWorkload::podTemplate() const {
  // A copy of a template StatefulSet::From checked, with one string label more: always a template.
  StatusOr<kube::PodTemplate> t = kube::PodTemplate::From(target_, "template");
  return t.ok() ? *t : s_.podTemplate();
}

int StatefulSetWorkload::MaxUnavailable() const {
  const json::Value* v = s_.maxUnavailable();
  if (v == nullptr) return 1;
  return std::max(1, budget::ResolveIntOrPercent(*v, s_.replicas(), /*roundUp=*/true).value_or(1));
}

std::vector<const kube::Pod*> StatefulSetWorkload::Pods() const {
  std::vector<std::pair<int, const kube::Pod*>> owned;
  for (const kube::Pod* pod : pods_) {
    if (!pod->live() || pod->controllerUid() != s_.uid() || s_.uid().empty()) continue;
    if (std::optional<int> ordinal = s_.OrdinalOf(pod->name())) owned.emplace_back(*ordinal, pod);
  }
  std::sort(owned.begin(), owned.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const kube::Pod*> out;
  out.reserve(owned.size());
  for (const auto& [ordinal, pod] : owned) out.push_back(pod);
  return out;
}

std::optional<std::string> StatefulSetWorkload::EndReason() const {
  if (!s_.rollingUpdate()) {
    return "updateStrategy " + std::string(s_.updateStrategy()) + " leaves the pods to the user";
  }
  return std::nullopt;
}

Action StatefulSetWorkload::EndPatch(bool /*release*/, std::string summary) const {
  kube::PatchBuilder patch;
  patch.Annotation(keys::kInProgressAnnotation, std::nullopt);
  if (s_.annotation(keys::kAbortAnnotation)) patch.Annotation(keys::kAbortAnnotation, std::nullopt);
  return WriteAction(WriteKind::kStatefulSetPatch, s_, patch.Take(), std::move(summary));
}

std::string StatefulSetWorkload::ReleaseWords(bool /*release*/) const {
  return "the StatefulSet controller's pod deletions go through again and its rolling update "
         "takes over";
}

std::variant<RunBase, NoBase> StatefulSetWorkload::FindBase(const InProgress& r) {
  if (!s_.ControllerObserved() || s_.updateRevision().empty()) {
    return NoBase{false, "waiting for the StatefulSet controller to observe generation " +
                             std::to_string(s_.generation())};
  }
  if (current_ == nullptr) {
    return NoBase{false, "waiting to read ControllerRevision " + std::string(s_.currentRevision())};
  }
  const bool finished = s_.currentRevision() == s_.updateRevision();
  if (!finished && TemplateHash(*current_) != r.from) {
    return NoBase{true, "the pods' revision " + std::string(s_.currentRevision()) +
                            " holds another template than the update started from (" + r.from +
                            ")"};
  }
  const long long low = static_cast<long long>(s_.ordinalStart()) + s_.partition();
  const long long high = static_cast<long long>(s_.ordinalStart()) + s_.replicas();
  RunBase base{{},
               *current_,
               "StatefulSet " + std::string(s_.name()) + " (revision " +
                   std::string(s_.currentRevision()) + ")",
               finished};
  for (const kube::Pod* pod : Pods()) {
    const std::optional<int> ordinal = s_.OrdinalOf(pod->name());
    if (!ordinal || *ordinal >= high) continue;
    // Below the partition only a pod whose move began before the partition was raised: it goes on
    // to the end (out of service, it would otherwise wait for the partition to be lowered), as a
    // pod the controller had replaced keeps the update revision.
    if (*ordinal >= low || pod_update::StateOf(*pod) != pod_update::PodState::kNormal) {
      base.pods.push_back(pod);
    }
  }
  return base;
}

bool StatefulSetWorkload::Finish(Plan& p, const RunBase& /*base*/, const InProgress& /*r*/) const {
  if (s_.partition() > 0) {
    p.phase = Phase::kBlocked;
    p.staged = true;
    p.message = "ordinals below the partition " + std::to_string(s_.partition()) +
                " keep their revision; the update goes on in place when the partition is lowered";
    p.requeueAfter = kBlockedPoll;
    return false;
  }
  if (s_.ControllerObserved() && s_.currentRevision() == s_.updateRevision() &&
      s_.updatedReplicas() == s_.replicas()) {
    return true;
  }
  p.phase = Phase::kWaitingForController;
  p.message = "waiting for the StatefulSet controller to count every pod at revision " +
              std::string(s_.updateRevision());
  p.requeueAfter = kControllerPoll;
  return false;
}

void StatefulSetWorkload::AddProgress(Plan& plan, Clock::time_point now) const {
  progress::AddProgress(plan, s_, now);
}

void StatefulSetWorkload::AddEndedWithoutLoop(Plan& plan, Clock::time_point now) const {
  progress::AddEndedWithoutLoop(plan, s_, now);
}

}  // namespace iw::rollout
