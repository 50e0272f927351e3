#include "hooks/rollout_plan.h"
#include "lib/rfc3339.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>

#include "hooks/budget.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "lib/kube_objects.h"
#include "lib/kube_patch.h"

namespace iw::rollout {

namespace {

using json::Allocator;
using json::Value;

// The largest previous template kept in a ReplicaSet annotation (the API server limits all
// annotations of an object to 256 KiB together).
constexpr size_t kMaxPreviousTemplateBytes = 32 * 1024;
// Event messages longer than this are cut (events.k8s.io limits `note` to 1 KiB).
// How often to look again while waiting for the Deployment controller or a blocked update.
constexpr auto kControllerPoll = std::chrono::seconds(2);
constexpr auto kBlockedPoll = std::chrono::seconds(30);

// The snapshot's objects as views: each has passed its shape check. The ReplicaSets and pods are
// kept in `rsStore`/`podStore` and listed by pointer (an object's identity in the plan); filled in
// place by ReadObjects, never copied.
struct Objects {
  std::optional<kube::Deployment> deployment;
  std::vector<kube::ReplicaSet> rsStore;
  std::vector<kube::Pod> podStore;
  std::vector<const kube::ReplicaSet*> replicaSets;
  std::vector<const kube::Pod*> pods;
  Clock::time_point now;

  Objects() = default;
  Objects(const Objects&) = delete;
  Objects& operator=(const Objects&) = delete;
};

// Views of `objects` into `store` and pointers to them into `list`; InvalidArgument naming the
// first object (`kind` and its name) whose shape is not what Kubernetes gives.
template <class View>
Status ReadViews(const std::vector<const Value*>& objects, std::string_view kind,
                 std::vector<View>& store, std::vector<const View*>& list) {
  store.reserve(objects.size());
  for (const Value* o : objects) {
    if (o == nullptr) continue;
    StatusOr<View> v = View::From(*o, kind);
    if (!v.ok()) {
      return v.status().Prefixed(std::string(kind) + " " +
                                 std::string(json::StringOr(json::Find(o, "metadata"), "name")));
    }
    store.push_back(*v);
  }
  for (const View& v : store) list.push_back(&v);
  return Status::Ok();
}

// Views of every object of `snapshot`; InvalidArgument naming the first object whose shape is
// not what Kubernetes gives (the plan then writes nothing: a half-read Deployment is never acted
// on).
Status ReadObjects(const Snapshot& snapshot, Objects& out) {
  StatusOr<kube::Deployment> d = kube::Deployment::From(*snapshot.deployment, "deployment");
  if (!d.ok()) return d.status();
  out.deployment = *d;
  out.now = snapshot.now;
  if (Status s = ReadViews(snapshot.replicaSets, "ReplicaSet", out.rsStore, out.replicaSets);
      !s.ok()) {
    return s;
  }
  return ReadViews(snapshot.pods, "pod", out.podStore, out.pods);
}

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

Action DeploymentEvent(const kube::Deployment& d, std::string_view type, std::string_view reason,
                       std::string_view message, Clock::time_point now, std::string name = {},
                       Metric metric = Metric::kNone) {
  return EventAction(d, "apps/v1", "Deployment", type, reason, message, now, std::move(name),
                     metric);
}

Action Write(WriteKind kind, const kube::ObjectView& object, json::Document body,
             std::string summary) {
  Action act;
  act.kind = kind;
  act.ns = std::string(object.ns());
  act.name = std::string(object.name());
  act.resourceVersion = std::string(object.resourceVersion());
  act.body = std::move(body);
  act.summary = std::move(summary);
  return act;
}

std::string Duration(double seconds) {
  long long s = static_cast<long long>(seconds);
  char buf[64];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, (s / 60) % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

// The Deployment patch that ends the update: drop `in-progress` (and `abort`), unpause if asked.
Action EndPatch(const kube::Deployment& d, bool unpause, std::string summary) {
  kube::PatchBuilder patch;
  patch.Annotation(keys::kInProgressAnnotation, std::nullopt);
  if (d.annotation(keys::kAbortAnnotation)) patch.Annotation(keys::kAbortAnnotation, std::nullopt);
  if (unpause) patch.Paused(false);
  return Write(WriteKind::kDeploymentPatch, d, patch.Take(), std::move(summary));
}

void AddPodStep(Plan& plan, const kube::Deployment& d, const kube::Pod& pod, pod_update::Step step);

// Pods of the Deployment's ReplicaSets left out of Normal by the update (in a hook, draining with
// the gate False, restarting) would stay out of service for good once the update is gone: each goes
// back to Normal with its gate True, before the Deployment patch (DESIGN.md §8.11).
void ReleasePods(Plan& plan, const Objects& s, const kube::Deployment& d, std::string_view why) {
  std::set<std::string_view> owned;
  for (const kube::ReplicaSet* rs : s.replicaSets) {
    if (rs->controllerUid() == d.uid()) owned.insert(rs->uid());
  }
  for (const kube::Pod* pod : s.pods) {
    if (!pod->live() || !owned.contains(pod->controllerUid())) continue;
    pod_update::Step step = pod_update::Release(*pod, s.now);
    if (step.ops.empty()) continue;
    step.summary = std::string(why) + ": " + step.summary;
    AddPodStep(plan, d, *pod, std::move(step));
  }
}

Plan Abort(const Objects& s, const kube::Deployment& d, const std::optional<InProgress>& record,
           std::string why, Clock::time_point now) {
  Plan plan;
  plan.phase = Phase::kAborted;
  plan.message = why;
  ReleasePods(plan, s, d, "abort");
  // Unknown record (malformed): leave `paused` as it is rather than guess who paused it.
  const bool unpause = record && record->pausedByUs && d.paused();
  Action patch = EndPatch(d, unpause, "abort: " + why);
  patch.metric = Metric::kRolloutAborted;
  plan.actions.push_back(std::move(patch));
  std::string message = "in-place update aborted: " + why +
                        ". Pods keep their content; any in an update step are back in service; ";
  message += unpause ? "the Deployment is unpaused and the native rollout takes over"
                     : "the Deployment's paused setting is left unchanged";
  plan.actions.push_back(DeploymentEvent(d, "Warning", "InPlaceUpdateAborted", message, now));
  return plan;
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

void AddPodStep(Plan& plan, const kube::Deployment& d, const kube::Pod& pod,
                pod_update::Step step) {
  const std::string podName(pod.name());
  bool metricPlaced = false;
  for (pod_update::PodOp& op : step.ops) {
    if (op.kind == pod_update::PodOp::Kind::kEvent) {
      const pod_update::PodEvent& e = op.event;
      std::string name = e.dedupKey.empty() ? "" : DedupEventName(podName, e.dedupKey);
      Action ev =
          EventAction(pod, "v1", "Pod", e.type, e.reason, e.message, Clock::time_point{}, name);
      ev.pod = podName;
      plan.actions.push_back(std::move(ev));
      if (e.onDeployment) {
        std::string dName = e.dedupKey.empty() ? "" : DedupEventName(d.name(), e.dedupKey);
        Action dev = DeploymentEvent(d, e.type, e.reason, e.message, Clock::time_point{}, dName);
        dev.pod = podName;
        plan.actions.push_back(std::move(dev));
      }
      continue;
    }
    const WriteKind kind = op.kind == pod_update::PodOp::Kind::kPatch ? WriteKind::kPodPatch
                           : op.kind == pod_update::PodOp::Kind::kResizePatch
                               ? WriteKind::kPodResizePatch
                               : WriteKind::kPodStatusPatch;
    Action w = Write(kind, pod, std::move(op.body), step.summary);
    w.pod = podName;
    w.stampTransition = op.stampTransition;
    // (On the step's first write but a resize: a drain without a hook starts with the gate's.)
    if (!metricPlaced && kind != WriteKind::kPodResizePatch) {
      metricPlaced = true;
      if (step.started) {
        w.metric = Metric::kPodUpdateStarted;
      } else if (step.completed) {
        w.metric = Metric::kPodUpdateCompleted;
        w.seconds = step.updateSeconds;
      } else if (step.timedOut) {
        w.metric = Metric::kHookTimeout;
      } else if (step.waitEnded != pod_update::Step::Wait::kNone) {
        w.metric = step.waitEnded == pod_update::Step::Wait::kPreparingUpdate
                       ? Metric::kPreUpdateWaitEnded
                       : Metric::kPostUpdateWaitEnded;
        w.seconds = step.waitSeconds;
      }
    }
    plan.actions.push_back(std::move(w));
  }
  if (!step.waitingMessage.empty() && plan.waitingMessage.empty()) {
    plan.waitingMessage = step.waitingMessage;
  }
  if (!step.stuckReason.empty() && plan.stuckReason.empty()) {
    plan.stuckReason = step.stuckReason;
    plan.stuckMessage = step.stuckMessage;
  }
  if (step.wakeAfter && (!plan.requeueAfter || *step.wakeAfter < *plan.requeueAfter)) {
    plan.requeueAfter = step.wakeAfter;
  }
}

// Event timestamps are filled once per plan (the pure pod step does not know the clock's value
// for Events; it does for everything else).
void StampEvents(Plan& plan, Clock::time_point now) {
  const std::string ts = rfc3339::Format(now);
  for (Action& a : plan.actions) {
    if (a.kind != WriteKind::kEvent) continue;
    auto& alloc = a.body.GetAllocator();
    json::SetString(a.body, "firstTimestamp", ts, alloc);
    json::SetString(a.body, "lastTimestamp", ts, alloc);
  }
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
  std::string_view h = json::StringOr(json::Path(&rs.json(), {"spec", "selector", "matchLabels"}),
                                      keys::kPodTemplateHashLabel);
  if (h.empty()) h = rs.label(keys::kPodTemplateHashLabel).value_or("");
  return h;
}

// The user's settings on the Deployment, which the Deployment controller copies to its new
// ReplicaSet and kubectl rollout undo copies back: every owned ReplicaSet carries the Deployment's
// current values, so a rollback never changes the hooks (DESIGN.md §8.1).
constexpr std::string_view kSettingsKeys[] = {keys::kLifecycleAnnotation, keys::kPolicyAnnotation};

// What the history ReplicaSet of the template the pods leave carries: the active ReplicaSet's
// annotations (those the Deployment controller copied from the Deployment while it was the new
// one) without ours and the controller's revision history, the Deployment's settings, and the
// active ReplicaSet's revision.
json::Document HistoryAnnotations(const kube::ReplicaSet& active, const kube::Deployment& d) {
  json::Document out(rapidjson::kObjectType);
  auto& a = out.GetAllocator();
  const Value* from = json::Path(&active.json(), {"metadata", "annotations"});
  if (from != nullptr && from->IsObject()) {
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
      const Value* had = json::Path(&rs.json(), {"metadata", "annotations"});
      json::EnsureObject(body, "metadata", a)
          .AddMember("annotations",
                     MergeDiff(had != nullptr ? *had : kNoAnnotations, annotations, a), a);
      plan.actions.push_back(Write(
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
      if (const Value* sel = json::Path(&d.json(), {"spec", "selector"}))
        selector.CopyFrom(*sel, a);
      if (!selector.IsObject()) selector.SetObject();
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
  plan.actions.push_back(Write(WriteKind::kReplicaSetPatch, base, patch.Take(),
                               "ReplicaSet " + std::string(base.name()) +
                                   " template := Deployment template " + record.to + " (was " +
                                   currentHash + ")"));
}

// After a revert to the template the pods' ReplicaSet holds, an abort would leave the pods this
// run moved at a template nothing asks for: the native rollout sees nothing to do. Such an abort
// waits until the revert is done (DESIGN.md §8.11): true while one ReplicaSet holds the pods, its
// template is the Deployment's, and a pod of it carries an update-state of another template.
bool RevertPending(const Objects& s, const kube::Deployment& d) {
  const kube::ReplicaSet* active = nullptr;
  for (const kube::ReplicaSet* rs : s.replicaSets) {
    if (rs->controllerUid() != d.uid() || rs->replicas() == 0) continue;
    if (active != nullptr) return false;
    active = rs;
  }
  const std::string want = TemplateHash(d.podTemplate());
  if (active == nullptr || TemplateHash(active->podTemplate()) != want) return false;
  for (const kube::Pod* pod : s.pods) {
    if (!pod->live() || pod->controllerUid() != active->uid()) continue;
    std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pod);
    if (us && !us->revision.empty() && us->revision != want) return true;
  }
  return false;
}

// The undo command (DESIGN.md §8.1): the Deployment's template goes back to the one the pods
// started from, and the running update is re-targeted to it, in one write (ours pass both
// webhooks unchanged), so every pod the update moved is moved back in place.
Plan Undo(const kube::Deployment& d, const kube::PodTemplate& fromTemplate,
          const InProgress& record, Clock::time_point now) {
  Plan plan;
  plan.phase = Phase::kUpdating;
  if (TemplateHash(fromTemplate) != record.from) {
    plan.phase = Phase::kBlocked;
    plan.message = "undo: the template " + record.from + " the update started from is not found";
    plan.requeueAfter = kBlockedPoll;
    return plan;
  }
  InProgress next = record;
  next.to = record.from;
  kube::PatchBuilder patch;
  patch.Annotation(keys::kUndoAnnotation, std::nullopt)
      .Annotation(keys::kInProgressAnnotation, SerializeInProgress(next));
  patch.Template(
      MergeDiff(d.podTemplate().json(), WithHashLabel(fromTemplate, ""), patch.allocator()));
  plan.actions.push_back(Write(WriteKind::kDeploymentPatch, d, patch.Take(),
                               "undo: template := " + record.from + " (was " + record.to + ")"));
  plan.actions.push_back(
      DeploymentEvent(d, "Normal", "InPlaceUpdateUndone",
                      "undo requested: the in-place update now returns the pods to template " +
                          record.from + " (was going to " + record.to + ")",
                      now));
  plan.message = "undo to " + record.from;
  return plan;
}

// ---- the planner's steps (PlanRollout below reads as their sequence) ----

// One pass over one running update: the objects, the record and what the steps find out.
struct Pass {
  const Objects& s;
  const kube::Deployment& d;
  const InProgress& r;
  const std::optional<InProgress>& record;      // r, as Abort takes it
  std::vector<const kube::ReplicaSet*> owned;   // controlled by the Deployment
  std::vector<const kube::ReplicaSet*> active;  // of those, the ones with replicas
  const kube::ReplicaSet* base = nullptr;       // the ReplicaSet the update works on
};

// The Deployment's live pods of `rs`, by name.
std::vector<const kube::Pod*> PodsOf(const Objects& s, const kube::ReplicaSet& rs) {
  std::vector<const kube::Pod*> pods;
  for (const kube::Pod* p : s.pods) {
    if (p->live() && p->controllerUid() == rs.uid()) pods.push_back(p);
  }
  std::sort(pods.begin(), pods.end(),
            [](const kube::Pod* a, const kube::Pod* b) { return a->name() < b->name(); });
  return pods;
}

// Step 1: what ends the update before anything else is read: the user's abort (unless a revert
// must finish first), an unpause that bypassed the webhook, strategy Recreate (an update an
// earlier version started, or a write that bypassed the webhook; unless a revert must finish
// first: the native rollout would leave its pods as they are).
std::optional<Plan> EndsBeforeStart(const Pass& run, bool abortDeferred) {
  if (run.d.annotation(keys::kAbortAnnotation) == keys::kTrue && !abortDeferred) {
    return Abort(run.s, run.d, run.record,
                 "requested by annotation " + std::string(keys::kAbortAnnotation) + "=true",
                 run.s.now);
  }
  if (!run.d.paused()) {
    return Abort(run.s, run.d, run.record,
                 "the Deployment was unpaused while the update ran (a write bypassed the "
                 "webhook); the native rollout takes over",
                 run.s.now);
  }
  if (run.d.recreate() && !RevertPending(run.s, run.d)) {
    return Abort(run.s, run.d, run.record,
                 "strategy Recreate never runs two templates at once; the native rollout "
                 "replaces every pod",
                 run.s.now);
  }
  return std::nullopt;
}

// Step 2: the ReplicaSet the update works on (DESIGN.md §3): exactly one with replicas, at the old
// template (or at the new one once the finish began), checked until pods start moving; once they
// moved, the newest matching one even if scaled to zero. Otherwise the plan that ends or holds
// the update.
std::optional<Plan> FindBase(Pass& run) {
  for (const kube::ReplicaSet* rs : run.s.replicaSets) {
    if (rs->controllerUid() == run.d.uid()) run.owned.push_back(rs);
  }
  for (const kube::ReplicaSet* rs : run.owned) {
    if (rs->replicas() > 0) run.active.push_back(rs);
  }
  bool moved = false;
  for (const kube::ReplicaSet* rs : run.owned) {
    for (const kube::Pod* p : PodsOf(run.s, *rs)) moved = moved || Moved(*p, run.r);
  }
  if (run.active.size() == 1 && MatchesRun(*run.active[0], run.r)) {
    run.base = run.active[0];
  } else if (run.active.empty() && moved) {  // scaled to zero mid-update
    for (const kube::ReplicaSet* rs : run.owned) {
      if (MatchesRun(*rs, run.r) &&
          (run.base == nullptr || rs->revision() > run.base->revision())) {
        run.base = rs;
      }
    }
  }
  if (run.base != nullptr) return std::nullopt;
  if (!moved) {
    if (run.active.size() != 1) {
      return Abort(run.s, run.d, run.record,
                   "an in-place update needs exactly one ReplicaSet with replicas, found " +
                       std::to_string(run.active.size()),
                   run.s.now);
    }
    return Abort(run.s, run.d, run.record,
                 "the active ReplicaSet " + std::string(run.active[0]->name()) + " has template " +
                     TemplateHash(run.active[0]->podTemplate()) + ", not the template " +
                     run.r.from + " the update started from",
                 run.s.now);
  }
  Plan blocked;
  blocked.phase = Phase::kBlocked;
  blocked.message = "no single ReplicaSet with replicas matches the update (found " +
                    std::to_string(run.active.size()) + " with replicas); waiting";
  blocked.requeueAfter = kBlockedPoll;
  return blocked;
}

// Step 3: the Events that say the update started (once per record, until the first pod reaches
// the new revision) or that an abort waits for a revert.
void AddStartEvents(Plan& p, const Pass& run, const pod_update::Target& target,
                    const std::vector<const kube::Pod*>& pods, bool abortDeferred, bool finishBegun,
                    int limit) {
  const kube::Deployment& d = run.d;
  const InProgress& r = run.r;
  if (abortDeferred) {
    p.actions.push_back(DeploymentEvent(
        d, "Warning", "InPlaceAbortDeferred",
        "abort waits: pods of ReplicaSet " + std::string(run.base->name()) +
            " still carry another template than the one it and the Deployment hold (a revert "
            "in progress), which the native rollout would leave as they are; they return in "
            "place first, then the update ends",
        run.s.now, DedupEventName(d.name(), "abort-deferred/" + r.to + "/" + r.startedAt)));
  }
  int pending = 0;
  bool anyAtTo = false;
  for (const kube::Pod* pod : pods) {
    std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pod);
    anyAtTo = anyAtTo || (us && us->revision == r.to);
    if (!pod_update::AtTarget(target, *pod)) ++pending;
  }
  // A user's pause holds the update: it has not started while held.
  if (anyAtTo || finishBegun || r.from == r.to || !r.pausedByUs) return;
  p.actions.push_back(
      DeploymentEvent(d, "Normal", "InPlaceUpdateStarted",
                      "in-place update from template " + r.from + " to " + r.to + ": " +
                          std::to_string(pending) + " of " + std::to_string(pods.size()) +
                          " pods to update, at most " + std::to_string(limit) + " at a time",
                      run.s.now, DedupEventName(d.name(), "started/" + r.to + "/" + r.startedAt),
                      Metric::kRolloutStarted));
}

// Step 3b: cpu/memory is changed in place only where the nodes act on a resize (DESIGN.md §3.1):
// a pod the update still has to resize, on a kubelet that cannot (pod_update::ResizeUnsupported),
// hands the whole change to the native rollout, as an abort does, before any further write (on
// the first pass, before any pod is touched). nullopt: every such pod's kubelet can.
std::optional<std::string> ResizeNotPossible(const pod_update::Target& target,
                                             const std::vector<const kube::Pod*>& pods) {
  for (const kube::Pod* pod : pods) {
    if (!pod_update::ResizePending(target, *pod)) continue;
    if (std::optional<std::string> why = pod_update::ResizeUnsupported(*pod)) {
      return "cpu/memory cannot change in place: " + *why + "; the native rollout makes the change";
    }
  }
  return std::nullopt;
}

// A pod whose opt-in label was removed is not the loop's to write (the chart's policy, DESIGN.md
// §9.5) unless an update holds it: a state other than Normal or the gate False, which the policy
// keeps ours (and the label on the pod) until the loop has brought it back.
bool NotOptedIn(const kube::Pod& pod) {
  return pod.label(keys::kEnabledLabel) != keys::kTrue &&
         pod_update::StateOf(pod) == pod_update::PodState::kNormal &&
         pod_update::GateStatus(pod) != false;
}

// Step 4: one step per pod within the budget. Returns whether every pod is done: Normal, at the
// target and, if this update wrote it, available again (a pod it never touched and that is not
// Ready is not the update's to wait for).
bool StepPods(Plan& p, const Pass& run, const pod_update::Target& target,
              const pod_update::Rules& rules, const std::vector<const kube::Pod*>& pods,
              int limit) {
  const Clock::time_point now = run.s.now;
  // Available as the Deployment controller counts it: Ready for minReadySeconds (DESIGN.md
  // §8.4). A pod that is Ready but not yet available wakes the loop when it becomes so.
  const int minReady = run.d.minReadySeconds();
  auto available = [&](const kube::Pod& pod) { return budget::IsAvailable(pod, minReady, now); };
  int unavailable = 0, inFlight = 0, onTheirWay = 0;
  std::vector<char> onItsWay;  // per pod, in the order of `pods`
  onItsWay.reserve(pods.size());
  for (const kube::Pod* pod : pods) {
    if (!available(*pod)) ++unavailable;
    if (pod_update::StateOf(*pod) != pod_update::PodState::kNormal) ++inFlight;
    onItsWay.push_back(pod_update::OnItsWay(target, rules, *pod) ? 1 : 0);
    onTheirWay += onItsWay.back();
    if (auto at = budget::AvailableAt(*pod, minReady); at && *at > now) {
      if (!p.requeueAfter || *at - now < *p.requeueAfter) p.requeueAfter = *at - now;
    }
  }
  // A user's pause (pausedByUs false: the user paused the Deployment, or asked with the pause
  // annotation) holds the update: no pod starts; pods already in it go on (DESIGN.md §8.5).
  const bool held = !run.r.pausedByUs;
  budget::Allowance allowance(limit, unavailable, inFlight);
  bool settled = true;
  int atTarget = 0;
  std::vector<std::string_view> leftOut;
  std::string firstWait;  // the first pod held by something other than its turn, in words
  for (size_t i = 0; i < pods.size(); ++i) {
    const kube::Pod* pod = pods[i];
    if (NotOptedIn(*pod) && !pod_update::AtTarget(target, *pod)) {
      ++p.podsByState[std::string(pod_update::StateName(pod_update::StateOf(*pod)))];
      leftOut.push_back(pod->name());
      settled = false;
      continue;
    }
    const bool mayStart =
        pod_update::WantsStart(target, *pod) && !held && allowance.TryStart(available(*pod));
    // A pod whose change is done goes back in service with the rest of its step (DESIGN.md §4a).
    const bool stepBusy = onTheirWay > onItsWay[i];
    pod_update::Step step = pod_update::Decide(target, rules, *pod, mayStart, now, stepBusy);
    ++p.podsByState[std::string(pod_update::StateName(pod_update::StateOf(*pod)))];
    if (std::string_view wait = pod_update::WaitName(step.wait.on); !wait.empty()) {
      ++p.podsByWait[std::string(wait)];
      if (firstWait.empty() && step.wait.on != pod_update::PodWait::On::kTurn) {
        firstWait =
            "pod " + std::string(pod->name()) + " waits on " + pod_update::Describe(step.wait, now);
      }
    }
    const bool here = pod_update::AtTarget(target, *pod);
    if (here) ++atTarget;
    std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pod);
    settled = settled && pod_update::StateOf(*pod) == pod_update::PodState::kNormal && here &&
              (!us || us->revision != run.r.to || available(*pod));
    AddPodStep(p, run.d, *pod, std::move(step));
  }
  p.podsAtTarget = atTarget;
  p.podsTotal = static_cast<int>(pods.size());
  p.target = run.r.to;
  const int pending = p.podsTotal - atTarget;
  if (!leftOut.empty()) {
    std::string names;
    for (std::string_view n : leftOut) names += (names.empty() ? "" : ", ") + std::string(n);
    const std::string why = (leftOut.size() == 1 ? "pod " : "pods ") + names + " without label " +
                            std::string(keys::kEnabledLabel) + "=" + std::string(keys::kTrue) +
                            " (removed): left as " + (leftOut.size() == 1 ? "it is" : "they are") +
                            "; label again to go on in place, or abort the update";
    if (p.waitingMessage.empty()) p.waitingMessage = why;
    // Nothing else to wait for: stuck until the user acts, said at once.
    if (pending == static_cast<int>(leftOut.size()) && p.stuckReason.empty()) {
      p.stuckReason = std::string(progress::kReasonNotOptedIn);
      p.stuckMessage = why;
    }
  }
  // A stall's message names what a pod waits on (an image, a hook) when nothing says more.
  if (p.waitingMessage.empty()) p.waitingMessage = firstWait;
  p.message = std::to_string(atTarget) + "/" + std::to_string(pods.size()) + " pods at template " +
              run.r.to;
  if (held && pending > 0) {
    p.message += "; paused by the user: no further pod starts until kubectl rollout resume";
    p.actions.push_back(DeploymentEvent(
        run.d, "Normal", "InPlaceUpdatePaused",
        "in-place update to template " + run.r.to +
            " held by your pause: " + std::to_string(pending) + " of " +
            std::to_string(pods.size()) + " pods wait; kubectl rollout resume deploy/" +
            std::string(run.d.name()) + " continues it in place",
        now, DedupEventName(run.d.name(), "paused/" + run.r.to + "/" + run.r.startedAt)));
  }
  return settled;
}

// Step 5: the finish (DESIGN.md §8.1) once every pod is done: the ReplicaSets as a native rollout
// leaves them, then, once the Deployment controller adopted them, the final Deployment patch.
void Finish(Plan& p, const Pass& run, bool finishBegun, size_t pods) {
  const kube::Deployment& d = run.d;
  const kube::ReplicaSet& base = *run.base;
  const InProgress& r = run.r;
  if (!finishBegun) {
    p.phase = Phase::kFinishing;
    FinishReplicaSets(p, d, base, run.owned, r);
    p.message =
        "all pods at template " + r.to + "; writing it into ReplicaSet " + std::string(base.name());
    return;
  }
  // The controller gives the new ReplicaSet the newest revision in the same pass that adopts it.
  int newestOther = 0;
  for (const kube::ReplicaSet* rs : run.owned) {
    if (rs != &base) newestOther = std::max(newestOther, rs->revision());
  }
  if (!d.ControllerCaughtUp() || base.revision() <= newestOther) {
    p.phase = Phase::kWaitingForController;
    p.message = "waiting for the Deployment controller to adopt ReplicaSet " +
                std::string(base.name()) + " (observedGeneration " +
                std::to_string(d.observedGeneration()) + "/" + std::to_string(d.generation()) +
                ", updatedReplicas " + std::to_string(d.updatedReplicas()) + "/" +
                std::to_string(d.statusReplicas()) + ", revision " +
                std::to_string(base.revision()) + " after " + std::to_string(newestOther) + ")";
    p.requeueAfter = kControllerPoll;
    return;
  }
  p.phase = Phase::kCompleted;
  double seconds = 0;
  if (auto started = rfc3339::Parse(r.startedAt)) {
    seconds = std::max(0.0, std::chrono::duration<double>(run.s.now - *started).count());
  }
  Action end = EndPatch(d, r.pausedByUs, "in-place update to " + r.to + " completed");
  end.metric = Metric::kRolloutCompleted;
  end.seconds = seconds;
  p.actions.push_back(std::move(end));
  p.actions.push_back(DeploymentEvent(
      d, "Normal", "InPlaceUpdateCompleted",
      "in-place update to template " + r.to + " completed: " + std::to_string(pods) + " pods in " +
          Duration(seconds) + (r.pausedByUs ? "; Deployment unpaused" : ""),
      run.s.now));
  p.message = "completed";
}

// The running update's plan: the steps above in order, each able to end the pass.
Plan PlanRunning(Pass& run) {
  const bool abortDeferred =
      run.d.annotation(keys::kAbortAnnotation) == keys::kTrue && RevertPending(run.s, run.d);
  if (std::optional<Plan> ended = EndsBeforeStart(run, abortDeferred)) return *std::move(ended);
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(run.d);
  if (!settings.ok()) {
    return Abort(run.s, run.d, run.record, settings.status().message(), run.s.now);
  }
  if (std::optional<Plan> held = FindBase(run)) return *std::move(held);

  const kube::PodTemplate baseTemplate = BaseTemplate(*run.base, run.owned, run.r);
  if (run.d.annotation(keys::kUndoAnnotation) == keys::kTrue) {
    return Undo(run.d, baseTemplate, run.r, run.s.now);
  }
  StatusOr<pod_update::Target> target = pod_update::MakeTarget(
      baseTemplate, run.d.podTemplate(), settings->policy, run.r.from, run.r.to);
  if (!target.ok()) return Abort(run.s, run.d, run.record, target.status().message(), run.s.now);
  const pod_update::Rules rules = pod_update::MakeRules(*settings);
  const std::vector<const kube::Pod*> pods = PodsOf(run.s, *run.base);
  if (std::optional<std::string> why = ResizeNotPossible(*target, pods)) {
    return Abort(run.s, run.d, run.record, *why, run.s.now);
  }
  const bool finishBegun = TemplateHash(run.base->podTemplate()) == run.r.to;
  const int limit = budget::MaxUnavailable(run.d);

  Plan p;
  p.phase = Phase::kUpdating;
  AddStartEvents(p, run, *target, pods, abortDeferred, finishBegun, limit);
  const size_t before = p.actions.size();
  const bool settled = StepPods(p, run, *target, rules, pods, limit);
  if (!settled || p.actions.size() != before) return p;
  Finish(p, run, finishBegun, pods.size());
  return p;
}

}  // namespace

Plan PlanRollout(const Snapshot& snapshot) {
  Plan plan;
  if (snapshot.deployment == nullptr) return plan;
  Objects s;
  if (Status read = ReadObjects(snapshot, s); !read.ok()) {
    plan.phase = Phase::kBlocked;
    plan.message = "cannot read the objects of the update: " + read.message();
    plan.requeueAfter = kBlockedPoll;
    return plan;
  }
  const kube::Deployment& d = *s.deployment;
  if (d.deleting()) return plan;

  StatusOr<std::optional<InProgress>> read = ReadInProgress(d);
  if (!read.ok()) {
    return Abort(s, d, std::nullopt, "malformed in-progress record: " + read.status().message(),
                 s.now);
  }
  const std::optional<InProgress> record = *std::move(read);
  if (!record) {
    // No in-place update; pods it left out of service when it ended without us (the webhook ends
    // an abort no loop acted on, DESIGN.md §9.8) go back in service.
    ReleasePods(plan, s, d, "update ended without the loop");
    progress::AddEndedWithoutLoop(plan, d, s.now);
    return plan;
  }
  Pass run{s, d, *record, record, {}, {}, nullptr};
  Plan out = PlanRunning(run);
  if (out.target.empty()) out.target = record->to;
  progress::AddProgress(out, d, s.now);  // last: its write carries no resourceVersion
  StampEvents(out, s.now);
  return out;
}

std::vector<Action> PlanNewPodGates(const std::vector<const json::Value*>& pods,
                                    Clock::time_point now) {
  std::vector<Action> out;
  for (const Value* raw : pods) {
    if (raw == nullptr) continue;
    StatusOr<kube::Pod> pod = kube::Pod::From(*raw, "pod");
    if (!pod.ok() || !pod->live() || !pod_update::HasGate(*pod)) continue;
    if (pod_update::GateStatus(*pod).has_value()) continue;
    if (pod_update::StateOf(*pod) != pod_update::PodState::kNormal) continue;
    Action a = Write(WriteKind::kPodStatusPatch, *pod, pod_update::GatePatch(*pod, true, now),
                     "readiness gate set True on a new pod");
    a.stampTransition = true;  // the gate's change, as every gate change: when it is sent
    a.pod = std::string(pod->name());
    out.push_back(std::move(a));
  }
  return out;
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
  return Write(WriteKind::kReplicaSetPatch, rs, patch.Take(),
               "ReplicaSet " + std::string(rs.name()) +
                   ": in-place bookkeeping removed, settings as the Deployment has them");
}

}  // namespace iw::rollout
