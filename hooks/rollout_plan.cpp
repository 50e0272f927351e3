#include "hooks/rollout_plan.h"
#include "lib/rfc3339.h"

#include <algorithm>
#include <cstdio>

#include "hooks/budget.h"
#include "hooks/deployment_workload.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "hooks/statefulset_workload.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

namespace {

using json::Value;

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

void AddPodStep(Plan& plan, const Workload& w, const kube::Pod& pod, pod_update::Step step);

// Pods of the workload left out of Normal by the update (in a hook, draining with the gate False,
// restarting) would stay out of service for good once the update is gone: each goes back to Normal
// with its gate True, before the workload's end patch (DESIGN.md §8.11).
void ReleasePods(Plan& plan, const Workload& w, Clock::time_point now, std::string_view why) {
  for (const kube::Pod* pod : w.Pods()) {
    pod_update::Step step = pod_update::Release(*pod, now);
    if (step.ops.empty()) continue;
    step.summary = std::string(why) + ": " + step.summary;
    AddPodStep(plan, w, *pod, std::move(step));
  }
}

Plan Abort(const Workload& w, const std::optional<InProgress>& record, std::string why,
           Clock::time_point now) {
  Plan plan;
  plan.phase = Phase::kAborted;
  plan.message = why;
  ReleasePods(plan, w, now, "abort");
  // Unknown record (malformed): leave the hold as it is rather than guess who set it.
  const bool release = record && record->pausedByUs && w.Held();
  Action patch = w.EndPatch(release, "abort: " + why);
  patch.metric = Metric::kRolloutAborted;
  plan.actions.push_back(std::move(patch));
  std::string message = "in-place update aborted: " + why +
                        ". Pods keep their content; any in an update step are back in service; ";
  message += w.ReleaseWords(release);
  plan.actions.push_back(w.Event("Warning", "InPlaceUpdateAborted", message, now));
  return plan;
}

void AddPodStep(Plan& plan, const Workload& w, const kube::Pod& pod, pod_update::Step step) {
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
        std::string dName = e.dedupKey.empty() ? "" : DedupEventName(w.object().name(), e.dedupKey);
        Action dev = w.Event(e.type, e.reason, e.message, Clock::time_point{}, dName);
        dev.pod = podName;
        plan.actions.push_back(std::move(dev));
      }
      continue;
    }
    const WriteKind kind = op.kind == pod_update::PodOp::Kind::kPatch ? WriteKind::kPodPatch
                           : op.kind == pod_update::PodOp::Kind::kResizePatch
                               ? WriteKind::kPodResizePatch
                               : WriteKind::kPodStatusPatch;
    Action write = WriteAction(kind, pod, std::move(op.body), step.summary);
    write.pod = podName;
    write.stampTransition = op.stampTransition;
    // (On the step's first write but a resize: a drain without a hook starts with the gate's.)
    if (!metricPlaced && kind != WriteKind::kPodResizePatch) {
      metricPlaced = true;
      if (step.started) {
        write.metric = Metric::kPodUpdateStarted;
      } else if (step.completed) {
        write.metric = Metric::kPodUpdateCompleted;
        write.seconds = step.updateSeconds;
      } else if (step.timedOut) {
        write.metric = Metric::kHookTimeout;
      } else if (step.waitEnded != pod_update::Step::Wait::kNone) {
        write.metric = step.waitEnded == pod_update::Step::Wait::kPreparingUpdate
                           ? Metric::kPreUpdateWaitEnded
                           : Metric::kPostUpdateWaitEnded;
        write.seconds = step.waitSeconds;
      }
    }
    plan.actions.push_back(std::move(write));
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

// ---- the planner's steps (PlanRollout below reads as their sequence) ----

// One pass over one running update: the workload, the record and the time.
struct Pass {
  Workload& w;  // FindBase remembers the base for Undo and Finish
  const InProgress& r;
  const std::optional<InProgress>& record;  // r, as Abort takes it
  Clock::time_point now;
};

// Step 1: what ends the update before anything else is read: the user's abort (unless a revert
// must finish first), and the workload's own reasons (Workload::EndReason).
std::optional<Plan> EndsBeforeStart(const Pass& run, bool abortDeferred) {
  if (run.w.object().annotation(keys::kAbortAnnotation) == keys::kTrue && !abortDeferred) {
    return Abort(run.w, run.record,
                 "requested by annotation " + std::string(keys::kAbortAnnotation) + "=true",
                 run.now);
  }
  if (std::optional<std::string> why = run.w.EndReason()) {
    return Abort(run.w, run.record, *std::move(why), run.now);
  }
  return std::nullopt;
}

// Step 3: the Events that say the update started (once per record, until the first pod reaches
// the new revision) or that an abort waits for a revert.
void AddStartEvents(Plan& p, const Pass& run, const pod_update::Target& target, const RunBase& base,
                    bool abortDeferred, int limit) {
  const Workload& w = run.w;
  const InProgress& r = run.r;
  const std::vector<const kube::Pod*>& pods = base.pods;
  const std::string_view name = w.object().name();
  if (abortDeferred) {
    p.actions.push_back(w.Event(
        "Warning", "InPlaceAbortDeferred",
        "abort waits: pods of " + base.owner + " still carry another template than the one it " +
            "and the " + std::string(w.kind()) +
            " hold (a revert in progress), which the native rollout would leave as they are; "
            "they return in place first, then the update ends",
        run.now, DedupEventName(name, "abort-deferred/" + r.to + "/" + r.startedAt)));
  }
  int pending = 0;
  bool anyAtTo = false;
  for (const kube::Pod* pod : pods) {
    std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pod);
    anyAtTo = anyAtTo || (us && us->revision == r.to);
    if (!pod_update::AtTarget(target, *pod)) ++pending;
  }
  // A user's pause holds the update: it has not started while held.
  if (anyAtTo || base.finishBegun || r.from == r.to || !r.pausedByUs) return;
  p.actions.push_back(w.Event("Normal", "InPlaceUpdateStarted",
                              "in-place update from template " + r.from + " to " + r.to + ": " +
                                  std::to_string(pending) + " of " + std::to_string(pods.size()) +
                                  " pods to update, at most " + std::to_string(limit) +
                                  " at a time",
                              run.now, DedupEventName(name, "started/" + r.to + "/" + r.startedAt),
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
  const Clock::time_point now = run.now;
  // Available as the Deployment controller counts it: Ready for minReadySeconds (DESIGN.md
  // §8.4). A pod that is Ready but not yet available wakes the loop when it becomes so.
  const int minReady = run.w.minReadySeconds();
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
    AddPodStep(p, run.w, *pod, std::move(step));
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
    p.actions.push_back(run.w.Event(
        "Normal", "InPlaceUpdatePaused",
        "in-place update to template " + run.r.to + " held by your pause: " +
            std::to_string(pending) + " of " + std::to_string(pods.size()) +
            " pods wait; kubectl rollout resume " + run.w.Ref() + " continues it in place",
        now, DedupEventName(run.w.object().name(), "paused/" + run.r.to + "/" + run.r.startedAt)));
  }
  return settled;
}

// Step 5: the end once the workload's finish is done: the end patch, releasing the native
// controller if we held it, and the Event that says how long it took.
void Complete(Plan& p, const Pass& run, size_t pods) {
  const InProgress& r = run.r;
  p.phase = Phase::kCompleted;
  double seconds = 0;
  if (auto started = rfc3339::Parse(r.startedAt)) {
    seconds = std::max(0.0, std::chrono::duration<double>(run.now - *started).count());
  }
  Action end = run.w.EndPatch(r.pausedByUs, "in-place update to " + r.to + " completed");
  end.metric = Metric::kRolloutCompleted;
  end.seconds = seconds;
  p.actions.push_back(std::move(end));
  p.actions.push_back(run.w.Event(
      "Normal", "InPlaceUpdateCompleted",
      "in-place update to template " + r.to + " completed: " + std::to_string(pods) + " pods in " +
          Duration(seconds) + (r.pausedByUs ? "; " + std::string(run.w.ReleasedNote()) : ""),
      run.now));
  p.message = "completed";
}

// The running update's plan: the steps above in order, each able to end the pass.
Plan PlanRunning(const Pass& run) {
  Workload& w = run.w;
  const bool abortDeferred =
      w.object().annotation(keys::kAbortAnnotation) == keys::kTrue && w.RevertPending();
  if (std::optional<Plan> ended = EndsBeforeStart(run, abortDeferred)) return *std::move(ended);
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(w.object());
  if (!settings.ok()) return Abort(w, run.record, settings.status().message(), run.now);
  // Step 2: the pods the update works on (DESIGN.md §3), or what ends or holds it.
  std::variant<RunBase, NoBase> found = w.FindBase(run.r);
  if (const NoBase* none = std::get_if<NoBase>(&found)) {
    if (none->abort) return Abort(w, run.record, none->why, run.now);
    Plan blocked;
    blocked.phase = Phase::kBlocked;
    blocked.message = none->why;
    blocked.requeueAfter = kBlockedPoll;
    return blocked;
  }
  const RunBase& base = std::get<RunBase>(found);
  if (w.UndoRequested()) return w.Undo(base, run.r, run.now);
  StatusOr<pod_update::Target> target =
      pod_update::MakeTarget(base.from, w.podTemplate(), settings->policy, run.r.from, run.r.to);
  if (!target.ok()) return Abort(w, run.record, target.status().message(), run.now);
  const pod_update::Rules rules = pod_update::MakeRules(*settings);
  if (std::optional<std::string> why = ResizeNotPossible(*target, base.pods)) {
    return Abort(w, run.record, *why, run.now);
  }
  const int limit = w.MaxUnavailable();

  Plan p;
  p.phase = Phase::kUpdating;
  AddStartEvents(p, run, *target, base, abortDeferred, limit);
  const size_t before = p.actions.size();
  const bool settled = StepPods(p, run, *target, rules, base.pods, limit);
  if (!settled || p.actions.size() != before) return p;
  if (w.Finish(p, base, run.r)) Complete(p, run, base.pods.size());
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
  DeploymentWorkload w(d, s.replicaSets, s.pods);

  StatusOr<std::optional<InProgress>> read = ReadInProgress(d);
  if (!read.ok()) {
    return Abort(w, std::nullopt, "malformed in-progress record: " + read.status().message(),
                 s.now);
  }
  const std::optional<InProgress> record = *std::move(read);
  if (!record) {
    // No in-place update; pods it left out of service when it ended without us (the webhook ends
    // an abort no loop acted on, DESIGN.md §9.8) go back in service.
    ReleasePods(plan, w, s.now, "update ended without the loop");
    w.AddEndedWithoutLoop(plan, s.now);
    return plan;
  }
  return PlanUpdate(w, *record, s.now);
}

std::optional<json::Document> RevisionTemplate(const json::Value& controllerRevision) {
  const Value* templ = json::Path(&controllerRevision, {"data", "spec", "template"});
  if (templ == nullptr || !templ->IsObject()) return std::nullopt;
  json::Document out;
  out.CopyFrom(*templ, out.GetAllocator());
  json::Remove(out, "$patch");
  return out;
}

Plan PlanStatefulSetRollout(const StatefulSetSnapshot& snapshot) {
  Plan plan;
  if (snapshot.statefulSet == nullptr) return plan;
  auto cannotRead = [&plan](const Status& s) {
    plan.phase = Phase::kBlocked;
    plan.message = "cannot read the objects of the update: " + s.message();
    plan.requeueAfter = kBlockedPoll;
    return std::move(plan);
  };
  StatusOr<kube::StatefulSet> set = kube::StatefulSet::From(*snapshot.statefulSet, "statefulSet");
  if (!set.ok()) return cannotRead(set.status());
  if (set->deleting()) return plan;
  std::vector<kube::Pod> podStore;
  std::vector<const kube::Pod*> pods;
  if (Status s = ReadViews(snapshot.pods, "pod", podStore, pods); !s.ok()) return cannotRead(s);
  // The current revision's template, when the revision read is the one the status names.
  std::optional<json::Document> revisionDoc;
  std::optional<kube::PodTemplate> revision;
  if (snapshot.currentRevision != nullptr &&
      kube::MetaOf(*snapshot.currentRevision, "name") == set->currentRevision()) {
    revisionDoc = RevisionTemplate(*snapshot.currentRevision);
    if (revisionDoc) {
      StatusOr<kube::PodTemplate> t = kube::PodTemplate::From(*revisionDoc, "revision template");
      if (!t.ok())
        return cannotRead(
            t.status().Prefixed("ControllerRevision " + std::string(set->currentRevision())));
      revision = *t;
    }
  }
  StatefulSetWorkload w(*set, pods, revision ? &*revision : nullptr);
  StatusOr<std::optional<InProgress>> read = ReadInProgress(*set);
  if (!read.ok()) {
    return Abort(w, std::nullopt, "malformed in-progress record: " + read.status().message(),
                 snapshot.now);
  }
  if (!*read) {
    ReleasePods(plan, w, snapshot.now, "update ended without the loop");
    return plan;
  }
  return PlanUpdate(w, **read, snapshot.now);
}

Plan PlanUpdate(Workload& workload, const InProgress& record, Clock::time_point now) {
  const std::optional<InProgress> stored = record;
  Plan out = PlanRunning(Pass{workload, record, stored, now});
  if (out.target.empty()) out.target = record.to;
  workload.AddProgress(out, now);  // last: its write carries no resourceVersion
  StampEvents(out, now);
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
    Action a = WriteAction(WriteKind::kPodStatusPatch, *pod, pod_update::GatePatch(*pod, true, now),
                           "readiness gate set True on a new pod");
    a.stampTransition = true;  // the gate's change, as every gate change: when it is sent
    a.pod = std::string(pod->name());
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace iw::rollout
