#include "server/loop/loop.h"
#include "server/loop/loop_projections.h"

#include "lib/kube_objects.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <exception>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/pod_state.h"
#include "hooks/progress.h"
#include "server/process/log.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace iw::loop {

namespace {

using Steady = std::chrono::steady_clock;
using json::Value;

constexpr auto kMinRequeue = std::chrono::milliseconds(100);
constexpr auto kRequeueMargin = std::chrono::milliseconds(50);
constexpr auto kGateRetry = std::chrono::seconds(1);
constexpr auto kGateConflictRetry = std::chrono::milliseconds(200);
constexpr auto kSyncPoll = std::chrono::milliseconds(200);
constexpr auto kTrimDelay = std::chrono::seconds(1);

std::vector<const Value*> Items(const json::Document& list) {
  std::vector<const Value*> out;
  const Value* items = json::Find(&list, "items");
  if (items == nullptr || !items->IsArray()) return out;
  for (const auto& item : items->GetArray()) out.push_back(&item);
  return out;
}

std::vector<const Value*> Values(const std::vector<kube::ObjectPtr>& objects) {
  std::vector<const Value*> out;
  out.reserve(objects.size());
  for (const auto& o : objects) out.push_back(&o->Value());
  return out;
}

bool Terminal(rollout::Phase p) {
  return p == rollout::Phase::kIdle || p == rollout::Phase::kCompleted ||
         p == rollout::Phase::kAborted;
}

bool HasAnnotation(const Value& o, std::string_view key) {
  return kube::AnnotationOf(o, key).has_value();
}

// What a pass decided, into its result: the phase and when the plan asks to be looked at again.
void Decided(ReconcileResult& res, const rollout::Plan& plan) {
  res.phase = plan.phase;
  if (plan.requeueAfter) {
    res.requeueAfter = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.requeueAfter);
  }
}

// The LIST options that select `workload`'s pods (and ReplicaSets): its spec.selector as a label
// selector (none: every object of the namespace, as the API server would select). An unreadable
// selector is InvalidArgument, prefixed "spec.selector".
StatusOr<kube::ListOptions> SelectorOf(const Value& workload) {
  kube::ListOptions list;
  if (const Value* selector = json::Path(&workload, {"spec", "selector"})) {
    StatusOr<kube::LabelSelector> parsed = kube::LabelSelector::FromJson(*selector);
    if (!parsed.ok()) return parsed.status().Prefixed("spec.selector");
    list.labelSelector = parsed->ToString();
  }
  return list;
}

}  // namespace

std::pair<std::string, std::string> SplitKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

// ---------------------------------------------------------------------------------------------
// Loop

namespace {

WriterOptions WriterOf(const Options& o) {
  return {o.expectationTimeout, o.conflictTimeout, o.instance, o.metrics, o.concurrentWrites};
}

}  // namespace

Loop::Loop(kube::Api& api, Options options)
    : api_(api), options_(std::move(options)), writer_(api_, WriterOf(options_)) {}

Loop::Loop(kube::WatchApi& api, Options options)
    : api_(api), watchApi_(&api), options_(std::move(options)), writer_(api_, WriterOf(options_)) {}

Loop::~Loop() {
  Stop();
}

Clock::time_point Loop::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

void Loop::Start() {
  std::lock_guard life(lifecycleMu_);
  {
    std::lock_guard lock(mu_);
    if (thread_.joinable()) return;
  }
  if (watchApi_ == nullptr) {
    log::Error("in-place loop cannot start: its API client has no watches");
    return;
  }
  auto watches = std::make_unique<Watches>(
      *watchApi_,
      WatchesOptions{options_.namespaceName, options_.batchDelay, options_.watchTimeout},
      [this](WorkKind kind, std::string key, Steady::time_point due) {
        Queue(kind, std::move(key), due);
      },
      [metrics = options_.metrics](double seconds) {
        if (metrics != nullptr) metrics->Count(rollout::Metric::kPodUpdateCompleted, seconds);
      });
  {
    std::lock_guard lock(watchesMu_);
    watches_ = std::move(watches);
  }
  std::lock_guard lock(mu_);
  stop_ = false;
  started_ = true;
  thread_ = std::thread(&Loop::Run, this);
  gateThread_ = std::thread(&Loop::RunGates, this);
}

void Loop::Stop() {
  std::lock_guard life(lifecycleMu_);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  gateCv_.notify_all();
  const bool ran = thread_.joinable();
  for (std::thread* t : {&thread_, &gateThread_}) {
    if (t->joinable() && t->get_id() != std::this_thread::get_id()) t->join();
  }
  std::unique_ptr<Watches> watches;
  {
    std::lock_guard lock(watchesMu_);
    watches = std::move(watches_);
  }
  watches.reset();  // stops the informers (their handlers may still queue work: dropped below)
  // The workers' own state, of the caches just dropped (no worker runs now).
  gateWritten_.clear();
  freshNext_.clear();
  std::lock_guard lock(mu_);
  deployments_.Clear();
  statefulSets_.Clear();
  gates_.Clear();
  gateSince_.clear();
  failures_.clear();
  awaiting_.clear();
  expectations_.Clear();
  // A loop that ran (and stops: it no longer leads) reports no updates; RunOnce() keeps them.
  if (ran && options_.metrics != nullptr) options_.metrics->ForgetUpdates();
}

bool Loop::Running() const {
  std::lock_guard lock(mu_);
  return started_ && !stop_;  // not thread_: Stop() joins it outside mu_
}

void Loop::Queue(WorkKind kind, std::string key, Steady::time_point due) {
  const bool gate = kind == WorkKind::kPodGate;
  {
    std::lock_guard lock(mu_);
    if (kind == WorkKind::kDeploymentIfWaiting && !awaiting_.contains(key)) return;
    if (gate) gateSince_.try_emplace(key, Steady::now());
    DelayQueue& queue = gate                             ? gates_
                        : kind == WorkKind::kStatefulSet ? statefulSets_
                                                         : deployments_;
    if (!queue.Add(key, due)) return;
  }
  (gate ? gateCv_ : cv_).notify_all();
}

void Loop::Enqueue(std::string_view ns, std::string_view name) {
  Queue(WorkKind::kDeployment, kube::ObjectKey(ns, name), Steady::now());
}

// --- events and writes ----------------------------------------------------------------------

ReconcileResult Loop::Apply(std::string_view workload, std::vector<rollout::Action>& actions,
                            std::vector<Expectation>* expectations, bool cached) {
  ReconcileResult res;
  static_cast<WriteResult&>(res) = writer_.Apply(workload, actions, expectations, cached);
  return res;
}

ReconcileResult Loop::PlanAndApply(const std::string& key, const rollout::Snapshot& snapshot,
                                   bool cached) {
  (cached ? cachedPasses_ : freshPasses_).fetch_add(1);
  rollout::Plan plan = rollout::PlanRollout(snapshot);
  if (cached &&
      (plan.phase == rollout::Phase::kFinishing || plan.phase == rollout::Phase::kCompleted)) {
    // The finish reads the pods through the API first: the pod cache holds opted-in pods only, and
    // a pod of the ReplicaSet whose opt-in label was removed must reach the target too (DESIGN.md
    // §8.11).
    auto [ns, name] = SplitKey(key);
    return Reconcile(ns, name);
  }
  Report(key, plan);
  ReconcileResult res =
      Apply(key, plan.actions, watches_ ? &expectations_.Of(key) : nullptr, cached);
  if (!res.refusedPod.empty() && snapshot.deployment != nullptr) {
    // The plan read the Deployment through the same check.
    if (StatusOr<kube::Deployment> d = kube::Deployment::From(*snapshot.deployment, "deployment");
        d.ok()) {
      ReportRefusal(key, *d, plan, snapshot.pods, res, cached);
    }
  }
  Decided(res, plan);
  res.fresh = !cached;
  return res;
}

template <class Workload>
void Loop::ReportRefusal(const std::string& key, const Workload& workload,
                         const rollout::Plan& plan, const std::vector<const Value*>& pods,
                         const ReconcileResult& res, bool cached) {
  // Refused by the API server (an admission policy, say): report it at once (DESIGN.md §8.12),
  // a refused resize as a stall (§3.1); the write is retried with the usual backoff.
  std::optional<kube::Pod> pod;
  for (const Value* p : pods) {
    if (p != nullptr && kube::MetaOf(*p, "name") == res.refusedPod) {
      if (StatusOr<kube::Pod> v = kube::Pod::From(*p, "pod"); v.ok()) pod = *v;
    }
  }
  std::vector<rollout::Action> report = progress::PlanRefusal(
      workload, pod ? &*pod : nullptr, res.refusedPod,
      progress::ProgressText(plan.podsAtTarget, plan.podsTotal, plan.target, plan.podsByState),
      res.refusal, Now(),
      res.refusedResize ? progress::Refused::kResize : progress::Refused::kPodWrite,
      res.refusalCode);
  // A Deployment's writes are expected in the caches; a StatefulSet is read through the API.
  constexpr bool kCached = std::is_same_v<Workload, kube::Deployment>;
  Apply(key, report, kCached && watches_ ? &expectations_.Of(key) : nullptr, cached);
  if (res.refusedResize && options_.metrics != nullptr) {
    options_.metrics->SetUpdate(key, plan.podsByState, plan.podsByWait, /*stalled=*/true);
  }
}

void Loop::Report(const std::string& key, const rollout::Plan& plan) {
  const std::string phase(rollout::PhaseName(plan.phase));
  std::string& last = lastPhase_[key];
  if (last != phase + plan.message) {
    last = phase + plan.message;
    const bool set = key.starts_with(kStatefulSetKeyPrefix);
    (plan.phase == rollout::Phase::kBlocked || plan.phase == rollout::Phase::kAborted ? log::Warn
                                                                                      : log::Info)(
        "in-place update",
        {{set ? "statefulset" : "deployment", set ? key.substr(kStatefulSetKeyPrefix.size()) : key},
         {"phase", phase},
         {"message", plan.message}});
  }
  const bool terminal = Terminal(plan.phase);
  if (terminal) lastPhase_.erase(key);
  if (options_.metrics == nullptr) return;
  if (terminal) {
    options_.metrics->ForgetUpdate(key);
  } else {
    options_.metrics->SetUpdate(key, plan.podsByState, plan.podsByWait, plan.stalled);
  }
}

ReconcileResult Loop::ReadFailed(std::string_view kind, const std::string& key, Status status) {
  if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
  log::Warn("in-place update: read failed",
            {{std::string(kind), key}, {"error", status.message()}});
  ReconcileResult res;
  res.fresh = true;
  res.status = std::move(status);
  return res;
}

ReconcileResult Loop::ReconcileStatefulSet(std::string_view ns, std::string_view name) {
  const std::string key = kube::ObjectKey(ns, name);
  const std::string phaseKey = std::string(kStatefulSetKeyPrefix) + key;
  ReconcileResult res;
  res.fresh = true;
  auto fail = [&](const kube::Result& r, std::string_view what) {
    return ReadFailed("statefulset", key, Status::IOError(std::string(what) + ": " + Describe(r)));
  };
  kube::Result set = api_.Get(kube::StatefulSetPath(ns, name));
  const bool running = set.Ok() && HasAnnotation(set.object, keys::kInProgressAnnotation);
  if (set.NotFound() || (set.Ok() && !running)) {
    // No update (or it ended): pods one that ended without the loop left out of service go back.
    lastPhase_.erase(phaseKey);
    if (options_.metrics != nullptr) options_.metrics->ForgetUpdate(phaseKey);
    if (set.NotFound()) return res;
  }
  if (!set.Ok()) return fail(set, "get StatefulSet");
  StatusOr<kube::ListOptions> list = SelectorOf(set.object);
  if (!list.ok()) return ReadFailed("statefulset", key, list.status());
  kube::Result pods = api_.List(kube::PodsPath(ns), *list);
  if (!pods.Ok()) return fail(pods, "list pods");
  kube::Result revision;
  const std::string_view current =
      json::StringOr(json::Path(&set.object, {"status"}), "currentRevision");
  if (!current.empty()) {
    revision = api_.Get(kube::ControllerRevisionPath(ns, current));
    if (!revision.Ok() && !revision.NotFound()) return fail(revision, "get ControllerRevision");
  }
  rollout::StatefulSetSnapshot snapshot;
  snapshot.statefulSet = &set.object;
  snapshot.pods = Items(pods.object);
  snapshot.currentRevision = revision.Ok() ? &revision.object : nullptr;
  snapshot.now = Now();
  freshPasses_.fetch_add(1);
  rollout::Plan plan = rollout::PlanStatefulSetRollout(snapshot);
  if (running) Report(phaseKey, plan);
  res = Apply(phaseKey, plan.actions);
  if (!res.refusedPod.empty()) {
    // The plan read the StatefulSet through the same check.
    if (StatusOr<kube::StatefulSet> v = kube::StatefulSet::From(set.object, "statefulSet");
        v.ok()) {
      ReportRefusal(phaseKey, *v, plan, snapshot.pods, res, /*cached=*/false);
    }
  }
  Decided(res, plan);
  res.fresh = true;
  return res;
}

ReconcileResult Loop::Reconcile(std::string_view ns, std::string_view name, bool ended) {
  const std::string key = kube::ObjectKey(ns, name);
  ReconcileResult res;
  res.fresh = true;
  if (options_.metrics != nullptr) options_.metrics->reconciles.fetch_add(1);
  auto fail = [&](const kube::Result& r, std::string_view what) {
    return ReadFailed("deployment", key, Status::IOError(std::string(what) + ": " + Describe(r)));
  };
  kube::Result d = api_.Get(kube::DeploymentPath(ns, name));
  if (d.NotFound() || (d.Ok() && !ended && !HasAnnotation(d.object, keys::kInProgressAnnotation))) {
    if (options_.metrics != nullptr) options_.metrics->ForgetUpdate(key);
    lastPhase_.erase(key);
    return res;
  }
  if (!d.Ok()) return fail(d, "get Deployment");
  StatusOr<kube::ListOptions> list = SelectorOf(d.object);
  if (!list.ok()) return ReadFailed("deployment", key, list.status());
  kube::Result rs = api_.List(kube::ReplicaSetsPath(ns), *list);
  if (!rs.Ok()) return fail(rs, "list ReplicaSets");
  kube::Result pods = api_.List(kube::PodsPath(ns), *list);
  if (!pods.Ok()) return fail(pods, "list pods");

  rollout::Snapshot snapshot;
  snapshot.deployment = &d.object;
  snapshot.replicaSets = Items(rs.object);
  snapshot.pods = Items(pods.object);
  snapshot.now = Now();
  return PlanAndApply(key, snapshot, /*cached=*/false);
}

std::optional<std::vector<std::string>> Loop::Resync() {
  const std::string& ns = options_.namespaceName;
  kube::Result deployments = api_.List(kube::DeploymentsPath(ns), {});
  if (!deployments.Ok()) {
    if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
    log::Warn("in-place loop: cannot list Deployments", {{"error", Describe(deployments)}});
    return std::nullopt;
  }
  std::vector<std::string> inProgress;
  std::map<std::string, const Value*, std::less<>> byUid;
  for (const Value* d : Items(deployments.object)) {
    byUid[std::string(kube::MetaOf(*d, "uid"))] = d;
    if (HasAnnotation(*d, keys::kInProgressAnnotation)) {
      inProgress.push_back(
          kube::ObjectKey(kube::MetaOf(*d, "namespace"), kube::MetaOf(*d, "name")));
    }
  }
  kube::ListOptions optedIn;
  optedIn.labelSelector = std::string(keys::kEnabledLabel) + "=" + std::string(keys::kTrue);

  auto listFailed = [this](std::string_view what, const kube::Result& r) {
    if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
    log::Warn("in-place loop: list failed", {{"what", std::string(what)}, {"error", Describe(r)}});
  };
  kube::Result replicaSets = api_.List(kube::ReplicaSetsPath(ns), optedIn);
  if (!replicaSets.Ok()) listFailed("opted-in ReplicaSets", replicaSets);
  if (replicaSets.Ok()) {
    for (const Value* rs : Items(replicaSets.object)) {
      StatusOr<kube::ReplicaSet> view = kube::ReplicaSet::From(*rs, "replicaSet");
      if (!view.ok()) continue;  // not ours to clean: PlanReplicaSetCleanup reads it the same way
      auto owner = byUid.find(view->controllerUid());
      if (owner == byUid.end()) continue;
      StatusOr<kube::Deployment> deployment = kube::Deployment::From(*owner->second, "deployment");
      if (!deployment.ok()) continue;  // the planner refuses it the same way
      if (std::optional<rollout::Action> a = rollout::PlanReplicaSetCleanup(*deployment, *view)) {
        std::vector<rollout::Action> one;
        one.push_back(std::move(*a));
        Apply(kube::ObjectKey(kube::MetaOf(*owner->second, "namespace"),
                              kube::MetaOf(*owner->second, "name")),
              one);
      }
    }
  }
  kube::Result pods = api_.List(kube::PodsPath(ns), optedIn);
  if (!pods.Ok()) listFailed("opted-in pods", pods);
  if (pods.Ok()) {
    for (rollout::Action& a : rollout::PlanNewPodGates(Items(pods.object), Now())) {
      std::vector<rollout::Action> one;
      one.push_back(std::move(a));
      Apply("", one);  // a conflict only delays this pod to the next resync
    }
  }
  return inProgress;
}

std::map<std::string, ReconcileResult> Loop::RunOnce() {
  std::map<std::string, ReconcileResult> out;
  std::optional<std::vector<std::string>> keys = Resync();
  if (!keys) return out;
  for (const std::string& key : *keys) {
    auto [ns, name] = SplitKey(key);
    out[key] = Reconcile(ns, name);
  }
  return out;
}

// --- the thread's side ----------------------------------------------------------------------

ReconcileResult Loop::ReconcileCached(const std::string& key) {
  auto [ns, name] = SplitKey(key);
  kube::ObjectPtr d = watches_->deployments().Get(ns, name);
  if (!d) {
    expectations_.Forget(key);
    Await(key, false);
    freshNext_.erase(key);
    lastPhase_.erase(key);
    if (options_.metrics != nullptr) options_.metrics->ForgetUpdate(key);
    return {};
  }
  auto cached = [this](CacheKind kind, const std::string& ns,
                       const std::string& name) -> std::optional<std::string> {
    kube::ObjectPtr o = watches_->Cache(kind)->Get(ns, name);
    if (!o) return std::nullopt;
    return std::string(o->ResourceVersion());
  };
  // Awaited before the check: an event after it queues the Deployment; one before it is in the
  // caches the check reads.
  const bool expecting = expectations_.Has(key);
  if (expecting) Await(key, true);
  const Expectations::Verdict verdict = expectations_.Check(key, cached, Steady::now());
  if (expecting && verdict != Expectations::Verdict::kPending) Await(key, false);
  switch (verdict) {
    case Expectations::Verdict::kMet:
      break;
    case Expectations::Verdict::kPending: {
      ReconcileResult res;
      res.phase = rollout::Phase::kUpdating;
      res.waiting = true;
      res.requeueAfter = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(expectations_.FirstDeadline(key) - Steady::now(), Steady::duration::zero()));
      waits_.fetch_add(1);
      return res;
    }
    case Expectations::Verdict::kExpired:
      freshNext_.insert(key);
      break;
  }
  const std::string_view uid = d->Uid();
  std::vector<kube::ObjectPtr> owned = watches_->replicaSets().ListOwnedBy(ns, uid);
  std::erase_if(owned, [uid](const kube::ObjectPtr& rs) {
    StatusOr<kube::ReplicaSet> view = kube::ReplicaSet::From(rs->Value(), "replicaSet");
    return !view.ok() || view->controllerUid() != uid;  // a malformed one: the planner's to report
  });
  // A selector that does not read is left to the fresh read, which reports it.
  std::optional<kube::LabelSelector> selector;
  if (const Value* s = json::Path(&d->Value(), {"spec", "selector"})) {
    if (StatusOr<kube::LabelSelector> parsed = kube::LabelSelector::FromJson(*s); parsed.ok()) {
      selector = *std::move(parsed);
    }
  }
  // The cached pods of the Deployment's selector, with its ReplicaSets, as the planner reads them.
  const std::vector<const Value*> replicaSets = Values(owned);
  std::vector<kube::ObjectPtr> pods;
  auto cachedSnapshot = [&] {
    pods = watches_->pods().List(ns, *selector);
    rollout::Snapshot snapshot;
    snapshot.deployment = &d->Value();
    snapshot.replicaSets = replicaSets;
    snapshot.pods = Values(pods);
    snapshot.now = Now();
    return snapshot;
  };
  if (!HasUpdateInProgress(d)) {
    // Ended: remove the annotation copies the Deployment controller left on its ReplicaSets.
    freshNext_.erase(key);
    lastPhase_.erase(key);
    if (options_.metrics != nullptr) options_.metrics->ForgetUpdate(key);
    ReconcileResult res;
    StatusOr<kube::Deployment> deployment = kube::Deployment::From(d->Value(), "deployment");
    for (const kube::ObjectPtr& rs : owned) {
      StatusOr<kube::ReplicaSet> view = kube::ReplicaSet::From(rs->Value(), "replicaSet");
      if (!deployment.ok() || !view.ok()) continue;
      if (std::optional<rollout::Action> a = rollout::PlanReplicaSetCleanup(*deployment, *view)) {
        std::vector<rollout::Action> one;
        one.push_back(std::move(*a));
        ReconcileResult r = Apply(key, one, &expectations_.Of(key), /*cached=*/true);
        res.writes += r.writes;
        if (!r.status.ok()) return r;
      }
    }
    // Pods an update that ended without the loop left out of service: released from a fresh read
    // (the cache may still show our own earlier release).
    if (selector && !rollout::PlanRollout(cachedSnapshot()).actions.empty()) {
      return Reconcile(ns, name, /*ended=*/true);
    }
    return res;
  }
  if (freshNext_.erase(key) > 0 || !selector || !PodsCacheable(d->Value(), replicaSets)) {
    return Reconcile(ns, name);
  }
  if (options_.metrics != nullptr) options_.metrics->reconciles.fetch_add(1);
  return PlanAndApply(key, cachedSnapshot(), /*cached=*/true);
}

void Loop::Await(const std::string& key, bool awaiting) {
  std::lock_guard lock(mu_);
  if (awaiting) {
    awaiting_.insert(key);
  } else {
    awaiting_.erase(key);
  }
}

void Loop::SetGate(const std::string& podKey) {
  auto [ns, name] = SplitKey(podKey);
  kube::ObjectPtr pod = watches_->pods().Get(ns, name);
  auto written = gateWritten_.find(podKey);
  if (written != gateWritten_.end()) {
    if (pod && pod->ResourceVersion() == written->second.first &&
        written->second.second > Steady::now()) {
      return;  // our write is not in the cache yet; its event brings the pod back here
    }
    gateWritten_.erase(written);
  }
  std::vector<rollout::Action> actions;
  if (pod) actions = rollout::PlanNewPodGates({&pod->Value()}, Now());
  if (actions.empty()) {
    // Nothing to write. If the gate is True, a Deployment's pass set it first: that is when the
    // pod's wait ended, as far as this lane can tell (its write reached the cache by now).
    bool gated = false;
    if (pod) {
      StatusOr<kube::Pod> view = kube::Pod::From(pod->Value(), "pod");
      gated = view.ok() && pod_update::GateStatus(*view) == true;
    }
    EndGateWait(podKey, gated);
    return;
  }
  ReconcileResult r = Apply("", actions);
  if (r.status.ok()) {
    gateWritten_[podKey] = {std::string(pod->ResourceVersion()),
                            Steady::now() + options_.expectationTimeout};
    EndGateWait(podKey, /*timed=*/true);
  } else {
    // A conflict: the pod changed and the cache is behind. Its event brings it back here while
    // it still needs the gate; if a Deployment's pass set the gate, no event does, so look again
    // soon (the gate's wait is timed then).
    std::lock_guard lock(mu_);  // the gate thread's own queue: no wake needed
    gates_.Add(podKey, Steady::now() + (r.conflict ? kGateConflictRetry : kGateRetry));
  }
}

void Loop::EndGateWait(const std::string& podKey, bool timed) {
  std::lock_guard lock(mu_);
  auto since = gateSince_.find(podKey);
  if (since == gateSince_.end()) return;
  if (timed && options_.metrics != nullptr) {
    options_.metrics->ObserveGate(
        std::chrono::duration<double>(Steady::now() - since->second).count());
  }
  gateSince_.erase(since);
}

bool Loop::WaitForCaches() {
  // Events queue work meanwhile.
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return false;
    }
    if (watches_->Synced()) break;
    watches_->deployments().WaitForSync(kSyncPoll);
    watches_->replicaSets().WaitForSync(kSyncPoll);
    watches_->pods().WaitForSync(kSyncPoll);
  }
  log::Info("in-place loop: caches synced",
            {{"deployments", std::to_string(watches_->deployments().Size())},
             {"replicaSets", std::to_string(watches_->replicaSets().Size())},
             {"pods", std::to_string(watches_->pods().Size())}});
  return true;
}

void Loop::TrimMemory(Timers& timers) {
  timers.trimAt = Steady::time_point::max();
  timers.listsTrimmed = watches_->Lists();
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void Loop::RunResync(Timers& timers, Steady::time_point now) {
  // A relist since the last trim left LIST responses freed but held: trim again after it.
  if (watches_->Lists() != timers.listsTrimmed) timers.trimAt = now + kTrimDelay;
  timers.nextResync = now + options_.resyncPeriod;
  try {
    watches_->Resync();
  } catch (const std::exception& e) {
    log::Error("in-place loop: resync failed", {{"error", e.what()}});
  } catch (...) {
    log::Error("in-place loop: resync failed", {{"error", "unknown exception"}});
  }
}

void Loop::RunGates() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const std::optional<Steady::time_point> next = gates_.NextDue();
    const Steady::time_point now = Steady::now();
    if (!next) {
      gateCv_.wait(lock);
      continue;
    }
    if (*next > now) {
      gateCv_.wait_until(lock, *next);
      continue;  // re-evaluate: stop, new work, or time
    }
    const std::vector<std::string> ready = gates_.TakeDue(now);
    if (now >= gateSweep_) {
      // Pods whose gate never came (deleted first) are not timed.
      std::erase_if(gateSince_, [&](const auto& entry) {
        return entry.second + options_.resyncPeriod <= now && !gates_.Contains(entry.first);
      });
    }
    lock.unlock();
    if (now >= gateSweep_) {  // forget gate writes whose wait is over (the cache missed them)
      gateSweep_ = now + options_.resyncPeriod;
      std::erase_if(gateWritten_, [now](const auto& entry) { return entry.second.second <= now; });
    }
    for (const std::string& key : ready) RunGate(key);
    lock.lock();
  }
}

void Loop::RunGate(const std::string& podKey) {
  try {
    SetGate(podKey);
  } catch (const std::exception& e) {
    log::Error("in-place loop: readiness gate failed", {{"pod", podKey}, {"error", e.what()}});
  } catch (...) {
    log::Error("in-place loop: readiness gate failed", {{"pod", podKey}});
  }
}

std::optional<std::chrono::milliseconds> Loop::RequeueDelay(const ReconcileResult& r,
                                                            int failures) const {
  if (!r.status.ok() && !r.conflict) {
    return std::min(options_.maxBackoff,
                    std::chrono::milliseconds(500L << std::min(failures - 1, 8)));
  }
  if (r.conflict) return options_.conflictTimeout;  // the cache's next version of it comes first
  if (r.waiting) return std::max(*r.requeueAfter, std::chrono::milliseconds(kMinRequeue));
  if (r.requeueAfter) {
    return std::clamp(*r.requeueAfter + kRequeueMargin, std::chrono::milliseconds(kMinRequeue),
                      options_.resyncPeriod);
  }
  // Otherwise the next change of the Deployment, its ReplicaSets or pods brings it back.
  return std::nullopt;
}

ReconcileResult Loop::Guarded(std::string_view kind, const std::string& key,
                              const std::function<ReconcileResult()>& pass) {
  ReconcileResult r;
  try {
    r = pass();
  } catch (const std::exception& e) {
    r.status = Status::Internal(e.what());
    log::Error("in-place loop: reconcile failed", {{std::string(kind), key}, {"error", e.what()}});
  } catch (...) {
    r.status = Status::Internal("unknown exception");
    log::Error("in-place loop: reconcile failed", {{std::string(kind), key}});
  }
  return r;
}

int Loop::CountFailure(const std::string& failureKey, const ReconcileResult& r) {
  if (r.status.ok()) {
    failures_.erase(failureKey);
    return 0;
  }
  return r.conflict ? 0 : ++failures_[failureKey];
}

void Loop::RunStatefulSet(const std::string& key) {
  auto [ns, name] = SplitKey(key);
  const ReconcileResult r = Guarded(
      "statefulset", key, [&, ns = ns, name = name] { return ReconcileStatefulSet(ns, name); });
  std::lock_guard lock(mu_);
  const int failures = CountFailure(std::string(kStatefulSetKeyPrefix) + key, r);
  // A conflict: the object changed; read again soon (a fresh read needs no cache to catch up).
  if (std::optional<std::chrono::milliseconds> delay =
          r.conflict ? std::optional<std::chrono::milliseconds>(kMinRequeue)
                     : RequeueDelay(r, failures)) {
    statefulSets_.Add(key, Steady::now() + *delay);
  }
}

void Loop::RunDeployment(const std::string& key) {
  const ReconcileResult r = Guarded("deployment", key, [&] { return ReconcileCached(key); });
  // A write that failed otherwise than by a conflict may have been applied: read through the API
  // next time rather than wait for a version we do not know.
  if (!r.status.ok() && !r.conflict && watches_) freshNext_.insert(key);
  std::lock_guard lock(mu_);
  const int failures = CountFailure(key, r);
  if (std::optional<std::chrono::milliseconds> delay = RequeueDelay(r, failures)) {
    deployments_.Add(key, Steady::now() + *delay);
  }
}

void Loop::Run() {
  if (!WaitForCaches()) return;
  // The LIST responses are gone once the informers have applied them: their memory goes back to
  // the system (glibc keeps freed heap otherwise) a moment after the first sync and after any
  // relist.
  Timers timers{Steady::now(), Steady::now() + kTrimDelay, 0};
  std::unique_lock lock(mu_);
  while (!stop_) {
    Steady::time_point wake = std::min(timers.nextResync, timers.trimAt);
    for (const DelayQueue* queue : {&deployments_, &statefulSets_}) {
      if (std::optional<Steady::time_point> next = queue->NextDue()) wake = std::min(wake, *next);
    }
    if (wake > Steady::now()) {
      cv_.wait_until(lock, wake);
      continue;  // re-evaluate: stop, new work, or time
    }
    const Steady::time_point now = Steady::now();
    if (now >= timers.trimAt) {
      lock.unlock();
      TrimMemory(timers);
      lock.lock();
      continue;
    }
    if (now >= timers.nextResync) {
      lock.unlock();
      RunResync(timers, now);
      lock.lock();
      continue;
    }
    const std::vector<std::string> ready = deployments_.TakeDue(now);
    const std::vector<std::string> readySets = statefulSets_.TakeDue(now);
    lock.unlock();
    for (const std::string& key : ready) RunDeployment(key);
    for (const std::string& key : readySets) RunStatefulSet(key);
    lock.lock();
  }
}

// --- observability --------------------------------------------------------------------------

CacheStats Loop::GetCacheStats() const {
  CacheStats out;
  out.cachedPasses = cachedPasses_.load();
  out.freshPasses = freshPasses_.load();
  out.waits = waits_.load();
  {
    std::lock_guard lock(mu_);
    out.awaiting = awaiting_.size();
  }
  std::lock_guard lock(watchesMu_);
  if (!watches_) return out;
  out.running = true;
  out.synced = watches_->Synced();
  auto add = [&out](std::string name, const kube::Informer& i) {
    CacheStats::Kind k;
    k.name = std::move(name);
    k.objects = i.Size();
    k.bytes = i.ApproxBytes();
    k.informer = i.GetStats();
    out.kinds.push_back(std::move(k));
  };
  add("deployments", watches_->deployments());
  add("replicasets", watches_->replicaSets());
  add("pods", watches_->pods());
  add("statefulsets", watches_->statefulSets());
  return out;
}

void Loop::RenderMetrics(std::string& out) const {
  const CacheStats s = GetCacheStats();
  auto family = [&out](std::string_view name, std::string_view type, std::string_view help) {
    out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
    out += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  };
  auto each = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    if (s.kinds.empty()) return;
    family(name, type, help);
    for (const CacheStats::Kind& k : s.kinds) {
      out += std::string(name) + "{resource=\"" + k.name + "\"} " + std::to_string(value(k)) + "\n";
    }
  };
  each("inplace_webhook_informer_objects", "gauge", "Objects held by the loop's caches.",
       [](const CacheStats::Kind& k) { return k.objects; });
  each("inplace_webhook_informer_bytes", "gauge",
       "Approximate heap bytes held by the loop's caches.",
       [](const CacheStats::Kind& k) { return k.bytes; });
  each("inplace_webhook_informer_events_total", "counter",
       "Watch events applied to the loop's caches.",
       [](const CacheStats::Kind& k) { return k.informer.events; });
  each("inplace_webhook_informer_lists_total", "counter", "LISTs that filled the loop's caches.",
       [](const CacheStats::Kind& k) { return k.informer.lists; });
  each("inplace_webhook_informer_relists_total", "counter",
       "Relists forced by an expired resourceVersion (410 Gone).",
       [](const CacheStats::Kind& k) { return k.informer.gone; });
  family("inplace_webhook_loop_passes_total", "counter",
         "Plans of in-progress Deployments by snapshot source, and passes deferred until the "
         "caches showed the loop's own writes.");
  out += "inplace_webhook_loop_passes_total{source=\"cache\"} " + std::to_string(s.cachedPasses) +
         "\n";
  out +=
      "inplace_webhook_loop_passes_total{source=\"api\"} " + std::to_string(s.freshPasses) + "\n";
  out += "inplace_webhook_loop_passes_total{source=\"deferred\"} " + std::to_string(s.waits) + "\n";
}

}  // namespace iw::loop
