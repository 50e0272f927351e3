#include "hooks/deployment_workload.h"

#include <algorithm>
#include <set>

#include "hooks/budget.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "lib/kube_patch.h"

namespace iw::rollout {

namespace {

using json::Allocator;
using json::Value;

// The user's settings on the Deployment, which the Deployment controller copies to its new
// ReplicaSet and kubectl rollout undo copies back: every owned ReplicaSet carries the Deployment's
// current values, so a rollback never changes the hooks (DESIGN.md §8.1).
constexpr std::string_view kSettingsKeys[] = {keys::kLifecycleAnnotation, keys::kPolicyAnnotation};

// A copied string value; an empty view may have a null data() (StringOr's default).
Value Str(std::string_view s, Allocator& a) {
  return s.empty() ? Value("", 0, a)
                   : Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// RFC 7386: the merge patch that turns `from` into `to` (objects member by member, null for a
// removed member, anything else replaced whole).
Value MergeDiff(const Value& from, const Value& to, Allocator& a) {
  if (!from.IsObject() || !to.IsObject()) return Value(to, a);
  Value out(rapidjson::kObjectType);
  for (const auto& m : from.GetObject()) {
    if (!to.HasMember(m.name)) out.AddMember(Value(m.name, a), Value(rapidjson::kNullType), a);
  }
  for (const auto& m : to.GetObject()) {
    auto it = from.FindMember(m.name);
    if (it == from.MemberEnd()) {
      out.AddMember(Value(m.name, a), Value(m.value, a), a);
    } else if (it->value != m.value) {
      out.AddMember(Value(m.name, a), MergeDiff(it->value, m.value, a), a);
    }
  }
  return out;
}

// The ReplicaSet an update works from: its template is the old one (`from`), the new one (`to`:
// the finish has begun), or an earlier target of this run that a finish already wrote (its
// previous-template-hash is `from`).
bool MatchesRun(const kube::ReplicaSet& rs, const InProgress& record) {
  const std::string h = TemplateHash(rs.podTemplate());
  return h == record.from || h == record.to ||
         rs.annotation(keys::kPreviousTemplateHashAnnotation) == record.from;
}

// The owned zero-replica ReplicaSets other than `except` whose template hash is `hash`, newest
// revision first.
std::vector<const kube::ReplicaSet*> Holders(const std::vector<const kube::ReplicaSet*>& owned,
                                             const kube::ReplicaSet* except,
                                             const std::string& hash) {
  std::vector<const kube::ReplicaSet*> out;
  for (const kube::ReplicaSet* rs : owned) {
    if (rs != except && rs->replicas() == 0 && TemplateHash(rs->podTemplate()) == hash) {
      out.push_back(rs);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const kube::ReplicaSet* a, const kube::ReplicaSet* b) {
                     return a->revision() > b->revision();
                   });
  return out;
}

// The template the pods of `rs` were created from: its own, or, once the finish wrote a later
// template into it, the update's starting template as its history ReplicaSet holds it (so pods
// created meanwhile from a stale cache are still brought to the target).
kube::PodTemplate BaseTemplate(const kube::ReplicaSet& rs,
                               const std::vector<const kube::ReplicaSet*>& owned,
                               const InProgress& record) {
  const kube::PodTemplate own = rs.podTemplate();
  if (TemplateHash(own) == record.from) return own;
  std::vector<const kube::ReplicaSet*> history = Holders(owned, &rs, record.from);
  return history.empty() ? own : history.front()->podTemplate();
}

bool Moved(const kube::Pod& pod, const InProgress& record) {
  if (pod_update::StateOf(pod) != pod_update::PodState::kNormal) return true;
  std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(pod);
  return us && !us->revision.empty() && us->revision != record.from;
}

// `tmpl` with its pod-template-hash label set to `hash` (every template a ReplicaSet holds must
// carry the hash of the ReplicaSet's selector).
json::Document WithHashLabel(const kube::PodTemplate& tmpl, std::string_view hash) {
  json::Document out;
  out.CopyFrom(tmpl.json(), out.GetAllocator());
  auto& a = out.GetAllocator();
  if (!out.IsObject()) out.SetObject();
  Value& labels = json::EnsureObject(json::EnsureObject(out, "metadata", a), "labels", a);
  if (hash.empty()) {
    json::Remove(labels, keys::kPodTemplateHashLabel);
  } else {
    json::SetString(labels, keys::kPodTemplateHashLabel, hash, a);
  }
  return out;
}

std::string_view HashLabel(const kube::ReplicaSet& rs) {
  std::string_view h = rs.selectorMatchLabel(keys::kPodTemplateHashLabel);
  if (h.empty()) h = rs.label(keys::kPodTemplateHashLabel).value_or("");
  return h;
}

// What the history ReplicaSet of the template the pods leave carries: the active ReplicaSet's
// annotations (those the Deployment controller copied from the Deployment while it was the new
// one) without ours and the controller's revision history, the Deployment's settings, and the
// active ReplicaSet's revision.
json::Document HistoryAnnotations(const kube::ReplicaSet& active, const kube::Deployment& d) {
  json::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  if (const Value* from = active.annotations()) {
    for (const auto& m : from->GetObject()) {
      const std::string_view k = json::View(m.name);
      if (k == keys::kRevisionHistoryAnnotation || k.starts_with(keys::kPrefix)) continue;
      out.AddMember(Value(m.name, a), Value(m.value, a), a);
    }
  }
  for (std::string_view k : kSettingsKeys) {
    if (std::optional<std::string_view> v = d.annotation(k)) json::SetString(out, k, *v, a);
  }
  json::SetString(out, keys::kRevisionAnnotation,
                  active.annotation(keys::kRevisionAnnotation).value_or(""), a);
  return out;
}

// Finish step 1: the history ReplicaSet of the template the pods leave (`base` holds it now),
// then the target template into `base`. Writes nothing when `base` already holds the target.
void FinishReplicaSets(Plan& plan, const kube::Deployment& d, const kube::ReplicaSet& base,
                       const std::vector<const kube::ReplicaSet*>& owned,
                       const InProgress& record) {
  const kube::PodTemplate current = base.podTemplate();
  const std::string currentHash = TemplateHash(current);
  if (currentHash == record.to) return;
  std::vector<const kube::ReplicaSet*> atTarget = Holders(owned, &base, record.to);
  const bool leavesFrom = currentHash == record.from && record.from != record.to;
  const bool keepHistory = d.revisionHistoryLimit() > 0;
  if (leavesFrom && keepHistory && Holders(owned, &base, record.from).empty()) {
    json::Document annotations = HistoryAnnotations(base, d);
    if (!atTarget.empty()) {
      // An older ReplicaSet at the target (a rollback): it becomes the history of the template
      // the pods leave, as the Deployment controller's rollback would leave it.
      const kube::ReplicaSet& rs = *atTarget.front();
      atTarget.erase(atTarget.begin());
      json::Document body(rapidjson::kObjectType);
      auto& a = body.GetAllocator();
      json::Document tmpl = WithHashLabel(current, HashLabel(rs));
      json::EnsureObject(body, "spec", a)
          .AddMember("template", MergeDiff(rs.podTemplate().json(), tmpl, a), a);
      static const Value kNoAnnotations(rapidjson::kObjectType);
      const Value* had = rs.annotations();
      json::EnsureObject(body, "metadata", a)
          .AddMember("annotations",
                     MergeDiff(had != nullptr ? *had : kNoAnnotations, annotations, a), a);
      plan.actions.push_back(WriteAction(
          WriteKind::kReplicaSetPatch, rs, std::move(body),
          "ReplicaSet " + std::string(rs.name()) + " := history of template " + record.from +
              " (revision " + std::string(base.annotation(keys::kRevisionAnnotation).value_or("")) +
              "); it held the target " + record.to));
    } else {
      // A new zero-replica ReplicaSet, named and labelled as the controller would name one.
      const std::string hash = record.from;
      json::Document rs(rapidjson::kObjectType);
      auto& a = rs.GetAllocator();
      rs.AddMember("apiVersion", "apps/v1", a);
      rs.AddMember("kind", "ReplicaSet", a);
      Value meta(rapidjson::kObjectType);
      const std::string name = std::string(d.name()).substr(0, 253 - 1 - hash.size()) + "-" + hash;
      meta.AddMember("name", Str(name, a), a);
      meta.AddMember("namespace", Str(d.ns(), a), a);
      json::Document tmpl = WithHashLabel(current, hash);
      Value labels(rapidjson::kObjectType);
      if (const Value* l = json::Path(&tmpl, {"metadata", "labels"})) labels.CopyFrom(*l, a);
      meta.AddMember("labels", labels, a);
      meta.AddMember("annotations", Value(annotations, a), a);
      Value owner(rapidjson::kObjectType);
      owner.AddMember("apiVersion", "apps/v1", a);
      owner.AddMember("kind", "Deployment", a);
      owner.AddMember("name", Str(d.name(), a), a);
      owner.AddMember("uid", Str(d.uid(), a), a);
      owner.AddMember("controller", true, a);
      Value owners(rapidjson::kArrayType);
      owners.PushBack(owner, a);
      meta.AddMember("ownerReferences", owners, a);
      rs.AddMember("metadata", meta, a);
      Value spec(rapidjson::kObjectType);
      spec.AddMember("replicas", 0, a);
      if (const Value* m = json::Path(&base.json(), {"spec", "minReadySeconds"})) {
        spec.AddMember("minReadySeconds", Value(*m, a), a);
      }
      Value selector(rapidjson::kObjectType);
      if (const Value* sel = d.selector()) selector.CopyFrom(*sel, a);
      json::SetString(json::EnsureObject(selector, "matchLabels", a), keys::kPodTemplateHashLabel,
                      hash, a);
      spec.AddMember("selector", selector, a);
      spec.AddMember("template", Value(tmpl, a), a);
      rs.AddMember("spec", spec, a);
      Action create;
      create.kind = WriteKind::kReplicaSetCreate;
      create.ns = std::string(d.ns());
      create.name = name;
      create.body = std::move(rs);
      create.summary = "create ReplicaSet " + name + ": history of template " + record.from +
                       " (revision " +
                       std::string(base.annotation(keys::kRevisionAnnotation).value_or("")) + ")";
      plan.actions.push_back(std::move(create));
    }
  }
  // Any other ReplicaSet at the target would be the Deployment controller's new one (it picks the
  // oldest match) and take the pods over: the active one alone may hold the target.
  for (const kube::ReplicaSet* rs : atTarget) {
    Action del;
    del.kind = WriteKind::kReplicaSetDelete;
    del.ns = std::string(rs->ns());
    del.name = std::string(rs->name());
    del.summary = "delete zero-replica ReplicaSet " + del.name + ": it duplicates the target " +
                  record.to + " the active ReplicaSet now holds";
    plan.actions.push_back(std::move(del));
  }

  json::Document desired = WithHashLabel(d.podTemplate(), HashLabel(base));
  kube::PatchBuilder patch;
  patch.Annotation(keys::kPreviousTemplateHashAnnotation, record.from);
  if (base.annotation(keys::kPreviousTemplateAnnotation)) {
    patch.Annotation(keys::kPreviousTemplateAnnotation, std::nullopt);
  }
  patch.Template(MergeDiff(current.json(), desired, patch.allocator()));
  plan.actions.push_back(WriteAction(WriteKind::kReplicaSetPatch, base, patch.Take(),
                                     "ReplicaSet " + std::string(base.name()) +
                                         " template := Deployment template " + record.to +
                                         " (was " + currentHash + ")"));
}

}  // namespace

DeploymentWorkload::DeploymentWorkload(const kube::Deployment& deployment,
                                       const std::vector<const kube::ReplicaSet*>& replicaSets,
                                       const std::vector<const kube::Pod*>& pods)
    : d_(deployment), pods_(pods) {
  for (const kube::ReplicaSet* rs : replicaSets) {
    if (rs->controllerUid() == d_.uid()) owned_.push_back(rs);
  }
}

std::string DeploymentWorkload::Ref() const {
  return "deploy/" + std::string(d_.name());
}

int DeploymentWorkload::MaxUnavailable() const {
  return budget::MaxUnavailable(d_);
}

std::vector<const kube::Pod*> DeploymentWorkload::Pods() const {
  std::set<std::string_view> owners;
  for (const kube::ReplicaSet* rs : owned_) owners.insert(rs->uid());
  std::vector<const kube::Pod*> out;
  for (const kube::Pod* pod : pods_) {
    if (pod->live() && owners.contains(pod->controllerUid())) out.push_back(pod);
  }
  return out;
}

std::vector<const kube::Pod*> DeploymentWorkload::PodsOf(const kube::ReplicaSet& rs) const {
  std::vector<const kube::Pod*> pods;
  for (const kube::Pod* p : pods_) {
    if (p->live() && p->controllerUid() == rs.uid()) pods.push_back(p);
  }
  std::sort(pods.begin(), pods.end(),
            [](const kube::Pod* a, const kube::Pod* b) { return a->name() < b->name(); });
  return pods;
}

// An unpause that bypassed the webhook; strategy Recreate (an update an earlier version started,
// or a write that bypassed the webhook), unless a revert must finish first: the native rollout
// would leave its pods as they are.
std::optional<std::string> DeploymentWorkload::EndReason() const {
  if (!d_.paused()) {
    return "the Deployment was unpaused while the update ran (a write bypassed the webhook); the "
           "native rollout takes over";
  }
  if (d_.recreate() && !RevertPending()) {
    return "strategy Recreate never runs two templates at once; the native rollout replaces every "
           "pod";
  }
  return std::nullopt;
}

// After a revert to the template the pods' ReplicaSet holds, an abort would leave the pods this
// run moved at a template nothing asks for: the native rollout sees nothing to do. True while one
// ReplicaSet holds the pods, its template is the Deployment's, and a pod of it carries an
// update-state of another template.
bool DeploymentWorkload::RevertPending() const {
  const kube::ReplicaSet* active = nullptr;
  for (const kube::ReplicaSet* rs : owned_) {
    if (rs->replicas() == 0) continue;
    if (active != nullptr) return false;
    active = rs;
  }
  const std::string want = TemplateHash(d_.podTemplate());
  if (active == nullptr || TemplateHash(active->podTemplate()) != want) return false;
  for (const kube::Pod* pod : pods_) {
    if (!pod->live() || pod->controllerUid() != active->uid()) continue;
    std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pod);
    if (us && !us->revision.empty() && us->revision != want) return true;
  }
  return false;
}

// The Deployment patch: drop `in-progress` (and `abort`), unpause when releasing.
Action DeploymentWorkload::EndPatch(bool release, std::string summary) const {
  kube::PatchBuilder patch;
  patch.Annotation(keys::kInProgressAnnotation, std::nullopt);
  if (d_.annotation(keys::kAbortAnnotation)) {
    patch.Annotation(keys::kAbortAnnotation, std::nullopt);
  }
  if (release) patch.Paused(false);
  return WriteAction(WriteKind::kDeploymentPatch, d_, patch.Take(), std::move(summary));
}

std::string DeploymentWorkload::ReleaseWords(bool release) const {
  return release ? "the Deployment is unpaused and the native rollout takes over"
                 : "the Deployment's paused setting is left unchanged";
}

std::variant<RunBase, NoBase> DeploymentWorkload::FindBase(const InProgress& r) {
  std::vector<const kube::ReplicaSet*> active;
  for (const kube::ReplicaSet* rs : owned_) {
    if (rs->replicas() > 0) active.push_back(rs);
  }
  bool moved = false;
  for (const kube::Pod* p : Pods()) moved = moved || Moved(*p, r);
  base_ = nullptr;
  if (active.size() == 1 && MatchesRun(*active[0], r)) {
    base_ = active[0];
  } else if (active.empty() && moved) {  // scaled to zero mid-update
    for (const kube::ReplicaSet* rs : owned_) {
      if (MatchesRun(*rs, r) && (base_ == nullptr || rs->revision() > base_->revision())) {
        base_ = rs;
      }
    }
  }
  if (base_ != nullptr) {
    return RunBase{PodsOf(*base_), BaseTemplate(*base_, owned_, r),
                   "ReplicaSet " + std::string(base_->name()),
                   TemplateHash(base_->podTemplate()) == r.to};
  }
  if (!moved) {
    if (active.size() != 1) {
      return NoBase{true, "an in-place update needs exactly one ReplicaSet with replicas, found " +
                              std::to_string(active.size())};
    }
    return NoBase{true, "the active ReplicaSet " + std::string(active[0]->name()) +
                            " has template " + TemplateHash(active[0]->podTemplate()) +
                            ", not the template " + r.from + " the update started from"};
  }
  return NoBase{false, "no single ReplicaSet with replicas matches the update (found " +
                           std::to_string(active.size()) + " with replicas); waiting"};
}

bool DeploymentWorkload::UndoRequested() const {
  return d_.annotation(keys::kUndoAnnotation) == keys::kTrue;
}

// The undo command (DESIGN.md §8.1): the Deployment's template goes back to the one the pods
// started from, and the running update is re-targeted to it, in one write (ours pass both
// webhooks unchanged), so every pod the update moved is moved back in place.
Plan DeploymentWorkload::Undo(const RunBase& base, const InProgress& r,
                              Clock::time_point now) const {
  Plan plan;
  plan.phase = Phase::kUpdating;
  if (TemplateHash(base.from) != r.from) {
    plan.phase = Phase::kBlocked;
    plan.message = "undo: the template " + r.from + " the update started from is not found";
    plan.requeueAfter = kBlockedPoll;
    return plan;
  }
  InProgress next = r;
  next.to = r.from;
  kube::PatchBuilder patch;
  patch.Annotation(keys::kUndoAnnotation, std::nullopt)
      .Annotation(keys::kInProgressAnnotation, SerializeInProgress(next));
  patch.Template(
      MergeDiff(d_.podTemplate().json(), WithHashLabel(base.from, ""), patch.allocator()));
  plan.actions.push_back(WriteAction(WriteKind::kDeploymentPatch, d_, patch.Take(),
                                     "undo: template := " + r.from + " (was " + r.to + ")"));
  plan.actions.push_back(Event("Normal", "InPlaceUpdateUndone",
                               "undo requested: the in-place update now returns the pods to "
                               "template " +
                                   r.from + " (was going to " + r.to + ")",
                               now));
  plan.message = "undo to " + r.from;
  return plan;
}

// The ReplicaSets as a native rollout leaves them, then the wait until the Deployment controller
// adopted them.
bool DeploymentWorkload::Finish(Plan& p, const RunBase& base, const InProgress& r) const {
  const kube::ReplicaSet& rs = *base_;
  if (!base.finishBegun) {
    p.phase = Phase::kFinishing;
    FinishReplicaSets(p, d_, rs, owned_, r);
    p.message =
        "all pods at template " + r.to + "; writing it into ReplicaSet " + std::string(rs.name());
    return false;
  }
  // The controller gives the new ReplicaSet the newest revision in the same pass that adopts it.
  int newestOther = 0;
  for (const kube::ReplicaSet* other : owned_) {
    if (other != &rs) newestOther = std::max(newestOther, other->revision());
  }
  if (d_.ControllerCaughtUp() && rs.revision() > newestOther) return true;
  p.phase = Phase::kWaitingForController;
  p.message = "waiting for the Deployment controller to adopt ReplicaSet " +
              std::string(rs.name()) + " (observedGeneration " +
              std::to_string(d_.observedGeneration()) + "/" + std::to_string(d_.generation()) +
              ", updatedReplicas " + std::to_string(d_.updatedReplicas()) + "/" +
              std::to_string(d_.statusReplicas()) + ", revision " + std::to_string(rs.revision()) +
              " after " + std::to_string(newestOther) + ")";
  p.requeueAfter = kControllerPoll;
  return false;
}

void DeploymentWorkload::AddProgress(Plan& plan, Clock::time_point now) const {
  progress::AddProgress(plan, d_, now);
}

void DeploymentWorkload::AddEndedWithoutLoop(Plan& plan, Clock::time_point now) const {
  progress::AddEndedWithoutLoop(plan, d_, now);
}

std::optional<Action> PlanReplicaSetCleanup(const kube::Deployment& deployment,
                                            const kube::ReplicaSet& rs) {
  if (rs.controllerUid() != deployment.uid() || deployment.uid().empty()) return std::nullopt;
  if (deployment.annotation(keys::kInProgressAnnotation)) return std::nullopt;
  // Only an opted-in Deployment's ReplicaSets are ours to clean: product keys on anyone else's
  // objects cause no write (issue 28: a user's keys must not start a write fight).
  if (deployment.label(keys::kEnabledLabel) != keys::kTrue) return std::nullopt;
  // Nor a ReplicaSet of a template not opted in: the chart's policy decides "ours" by its label.
  if (rs.label(keys::kEnabledLabel) != keys::kTrue) return std::nullopt;
  kube::PatchBuilder patch;
  for (std::string_view k : {keys::kInProgressAnnotation, keys::kAbortAnnotation,
                             keys::kPauseAnnotation, keys::kUndoAnnotation}) {
    if (rs.annotation(k) && !deployment.annotation(k)) patch.Annotation(k, std::nullopt);
  }
  // Never remove what the Deployment itself carries: the Deployment controller copies its
  // annotations onto the ReplicaSet again, and removing them would be a fight without end.
  for (std::string_view k :
       {keys::kPreviousTemplateHashAnnotation, keys::kPreviousTemplateAnnotation}) {
    if (rs.annotation(k) && !deployment.annotation(k)) patch.Annotation(k, std::nullopt);
  }
  for (std::string_view k : kSettingsKeys) {
    const std::optional<std::string_view> want = deployment.annotation(k);
    const std::optional<std::string_view> have = rs.annotation(k);
    if (!want && have) {
      patch.Annotation(k, std::nullopt);
    } else if (want && want != have) {
      patch.Annotation(k, *want);
    }
  }
  if (patch.empty()) return std::nullopt;
  return WriteAction(WriteKind::kReplicaSetPatch, rs, patch.Take(),
                     "ReplicaSet " + std::string(rs.name()) +
                         ": in-place bookkeeping removed, settings as the Deployment has them");
}

}  // namespace iw::rollout
