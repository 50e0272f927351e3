// The in-place rollout loop's driver (DESIGN.md §4 steps 3–5): gathers a snapshot of a Deployment
// (the Deployment, its ReplicaSets, their pods), asks hooks/rollout_plan what to write, and
// applies those writes in order with resourceVersion preconditions. A 409 or any failed write
// ends that Deployment's pass; it is looked at again with newer data. Events are best effort.
//
// Event-driven (Start): the watches (server/loop/watches: three informers that cache every
// Deployment and ReplicaSet and the opted-in pods, label inplace-webhook.io/enabled=true, each
// trimmed to the fields the plan reads) queue a Deployment on a change of it while it has an
// in-place update, of one of its ReplicaSets or of one of its pods (pod → ReplicaSet → Deployment
// through controller ownerReferences, in the caches); a plan's own deadline (a grace period, a
// hook timeout, the wait for the Deployment controller) queues it at that time; a long safety
// resync queues every in-progress one. Between those the thread sleeps: no API call and no work.
//
// Snapshots come from the caches (no API read), with two guards that keep a stale cache from ever
// causing a wrong step:
// - Own writes: after a write the Deployment is not planned again until the caches hold the
//   version our write produced (or a later one) of every object written. Otherwise a pod we just
//   moved out of Normal would look available and the budget could be exceeded, though each write
//   is conditional on its own object's resourceVersion.
// - Conflicts: a 409 means the cache was behind another writer; the Deployment waits until the
//   cache holds a newer version of that object than the one refused.
// Either wait not over within `expectationTimeout` (a watch that stalls) makes the next pass read
// the snapshot through the API instead; so does a Deployment whose pods the pod cache cannot
// hold (a template without the opt-in label). Every write still carries the resourceVersion it
// was planned from, so an object changed meanwhile is never overwritten.
//
// StatefulSets (DESIGN.md §4.8) are planned on the same thread from API reads (the StatefulSet,
// its pods by its selector, its current ControllerRevision), never from the caches: a pass costs
// three reads, the caches only say when to make one (the watches queue a StatefulSet on its
// in-progress record and on its pods' events), and a fresh read needs no expectations of our
// own writes.
//
// Besides in-place updates, the thread sets the readiness gate True on new opted-in pods that
// declare it and removes stale in-place annotations the Deployment controller copied to
// ReplicaSets, both on the events that make them necessary.
//
// RunOnce() and Reconcile() are the same decisions on the caller's thread, reading through the
// API (tests and one-shot use). Run the thread only while leading (server/loop/leader_election).
//
// Lanes (DESIGN.md §4.3.1): two worker threads, each draining its own queue
// (server/loop/work_queue): the loop's thread plans Deployments (and runs the safety resync and
// memory trims); the gate thread only sets readiness gates of new pods, so a new pod never waits
// behind an update's backlog. Both call through the one API client, whose token bucket serves
// callers in arrival order: each lane has at most one call waiting, so neither lane nor the Lease
// renewal waits for more than a token or two of the other.
//
// Thread safety: Start() and Stop() from any thread but the workers (serialized by
// `lifecycleMu_`; Stop() joins both workers, then drops the watches, joining the informers).
// Enqueue(), GetCacheStats(), RenderMetrics() and Running() from any thread (Running() reads
// `started_` and `stop_` under `mu_`, never the threads, which Stop() joins outside it).
// RunOnce(), Reconcile() and Resync() from one thread at a time, and only while the workers do
// not run: they share the loop thread's expectation, Event and phase state, which no lock guards.
// The watches' handlers run on the informers' threads and only read the caches and queue work.
// `mu_` guards stop_, the queues (`deployments_`, `statefulSets_`, `gates_`), gateSince_,
// failures_ and awaiting_; `cv_` wakes
// the loop's thread, `gateCv_` the gate thread. `watchesMu_` guards the watches pointer for other
// threads (the workers read it unlocked: it changes only while they do not run).
// gateWritten_ and gateSweep_ are the gate thread's alone; expectations_, freshNext_,
// lastPhase_ and the writer's Event names the loop thread's (gate writes create no Event). The
// pass counters are atomic. `options.clock` is called from both workers (or RunOnce's caller) and
// must be safe to call concurrently; `options.metrics` is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hooks/deployment_workload.h"
#include "hooks/kube_api.h"
#include "hooks/rollout_plan.h"
#include "server/kube/informer.h"
#include "server/loop/expectations.h"
#include "server/loop/loop_metrics.h"
#include "server/loop/loop_projections.h"
#include "server/loop/watches.h"
#include "server/loop/work_queue.h"
#include "server/loop/writer.h"

namespace iw::loop {

using Clock = std::chrono::system_clock;

struct Options {
  std::string namespaceName;  // "" = every namespace
  // Safety net: every in-progress Deployment, new pod and ReplicaSet is looked at again this
  // often, from the caches (no API call).
  std::chrono::milliseconds resyncPeriod{std::chrono::minutes(5)};
  // A change waits this long for others before its Deployment is planned (a burst of pod events
  // makes one pass, not one per event).
  std::chrono::milliseconds batchDelay{50};
  // How long the caches may take to show our own write or a version newer than a refused one
  // before the Deployment is read through the API instead.
  std::chrono::milliseconds expectationTimeout{std::chrono::seconds(15)};
  // After a 409 the newer version normally reaches the cache within milliseconds; past this
  // the Deployment is read through the API (a conflict says the cache is behind, so do not wait
  // as long as for our own writes).
  std::chrono::milliseconds conflictTimeout{std::chrono::seconds(2)};
  std::chrono::milliseconds maxBackoff{30000};  // after repeated errors on one Deployment
  std::chrono::seconds watchTimeout{300};       // each informer watch lasts [t, 2t)
  std::string instance;                         // Event reportingInstance (e.g. the pod name)
  LoopMetrics* metrics = nullptr;               // optional
  size_t concurrentWrites = 8;                  // pod writes of one step in flight at once
  std::function<Clock::time_point()> clock;     // default: system_clock::now
};

// One pass over a Deployment: what its writes did (ok also means the snapshot was read), and
// what the pass decided.
struct ReconcileResult : WriteResult {
  rollout::Phase phase = rollout::Phase::kIdle;
  bool waiting = false;  // not planned: the caches do not show our last writes yet
  bool fresh = false;    // the snapshot was read through the API, not from the caches
  std::optional<std::chrono::milliseconds> requeueAfter;
};

// What the caches hold, for metrics and tests.
struct CacheStats {
  struct Kind {
    std::string name;  // deployments, replicasets, pods, statefulsets
    size_t objects = 0;
    size_t bytes = 0;  // Informer::ApproxBytes
    kube::Informer::Stats informer;
  };
  bool running = false;  // informers exist (the thread runs)
  bool synced = false;   // all three listed
  std::vector<Kind> kinds;
  uint64_t cachedPasses = 0;  // plans made from the caches
  uint64_t freshPasses = 0;   // plans made from API reads
  uint64_t waits = 0;         // passes skipped until the caches show our writes
  size_t awaiting = 0;        // Deployments whose last pass waits so (awaiting_)
};

class Loop {
 public:
  // One-shot use: RunOnce and Reconcile through `api`. Start() needs watches (next constructor)
  // and only logs an error here.
  Loop(kube::Api& api, Options options);
  // Event-driven: Start() runs informers through `api` and the thread.
  Loop(kube::WatchApi& api, Options options);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Starts the informers and the thread (no-op when running). Stop() stops and joins the thread
  // and drops the caches. Both are idempotent; they may be called from any thread but the loop's.
  void Start();
  void Stop();
  bool Running() const;

  // Asks for a look at a Deployment soon (e.g. after the webhook admitted a change to it).
  void Enqueue(std::string_view ns, std::string_view name);

  // One pass on the caller's thread, reading through the API: a resync (list every Deployment,
  // set gates on new pods, clean ReplicaSet annotations), then one reconcile of every in-progress
  // Deployment. Returns the reconcile results by "namespace/name". For tests and one-shot use; do
  // not call while the thread runs.
  std::map<std::string, ReconcileResult> RunOnce();

  // Reads one Deployment's snapshot through the API, plans and applies. One caller at a time.
  // A Deployment with no update running is skipped unless `ended`: an update that ended without
  // the loop left pods or our condition to put right (rollout::PlanRollout's idle plan).
  ReconcileResult Reconcile(std::string_view ns, std::string_view name, bool ended = false);

  // Reads one StatefulSet (its pods, its current ControllerRevision) through the API, plans
  // (rollout::PlanStatefulSetRollout) and applies. One caller at a time, as Reconcile.
  ReconcileResult ReconcileStatefulSet(std::string_view ns, std::string_view name);

  // Lists Deployments through the API and returns the "namespace/name" of those with an in-place
  // update running; on the way sets gates on new pods and cleans ReplicaSet annotations. nullopt
  // if the list fails.
  std::optional<std::vector<std::string>> Resync();

  CacheStats GetCacheStats() const;
  // Appends Prometheus text: inplace_webhook_informer_objects / _bytes / _events_total /
  // _lists_total / _relists_total {resource}, inplace_webhook_loop_passes_total {source}.
  void RenderMetrics(std::string& out) const;

 private:
  Clock::time_point Now() const;
  // Plans one snapshot and applies it. `cached`: the snapshot came from the caches.
  ReconcileResult PlanAndApply(const std::string& key, const rollout::Snapshot& snapshot,
                               bool cached);
  // Applies the actions in order; returns the result of this pass. With `expectations`, records
  // what the caches must show afterwards (`cached`: the plan was made from them).
  ReconcileResult Apply(std::string_view workload, std::vector<rollout::Action>& actions,
                        std::vector<Expectation>* expectations = nullptr, bool cached = false);
  // Reports a pod write the API server refused in `res` (its Events and the workload's progress
  // report; a refused resize counts as stalled). `key`: the Deployment's "namespace/name" (its
  // writes are expected in the caches), or kStatefulSetKeyPrefix and that of a StatefulSet.
  // `Workload`: kube::Deployment or kube::StatefulSet.
  template <class Workload>
  void ReportRefusal(const std::string& key, const Workload& workload, const rollout::Plan& plan,
                     const std::vector<const json::Value*>& pods, const ReconcileResult& res,
                     bool cached);

  // The thread's side: Run waits for the caches, then, until Stop, sleeps until the next due
  // work, memory trim or safety resync and runs it.
  struct Timers {
    std::chrono::steady_clock::time_point nextResync, trimAt;
    uint64_t listsTrimmed = 0;  // caches' LIST count at the last trim
  };
  void Run();
  bool WaitForCaches();  // false: stopped first
  void TrimMemory(Timers& timers);
  void RunResync(Timers& timers, std::chrono::steady_clock::time_point now);
  // The gate thread: until Stop, sets the gates of the pods due in `gates_`.
  void RunGates();
  void RunGate(const std::string& podKey);
  // Plans one Deployment from the caches (one StatefulSet from the API) and queues it again as
  // its result asks.
  void RunDeployment(const std::string& key);
  void RunStatefulSet(const std::string& key);
  // Runs one pass, turning an exception into an Internal status logged under `kind`
  // ("deployment"): none leaves the loop's thread.
  ReconcileResult Guarded(std::string_view kind, const std::string& key,
                          const std::function<ReconcileResult()>& pass);
  // Keeps the count of consecutive failed passes of `failureKey` after `r` (a conflict neither
  // counts nor clears it) and returns it; 0 after a success. Under `mu_`.
  int CountFailure(const std::string& failureKey, const ReconcileResult& r);
  // A pass that could not read its objects: counted, logged under `kind` ("deployment"), failed.
  ReconcileResult ReadFailed(std::string_view kind, const std::string& key, Status status);
  // What a plan of a running update reports: a change of its phase logged (`key` names the kind
  // too), its pods in the metrics; both forgotten once the phase is terminal.
  void Report(const std::string& key, const rollout::Plan& plan);
  // When a Deployment is looked at again after `r` (`failures`: consecutive failed passes):
  // exponential backoff after errors, the conflict timeout after a 409, the plan's own wait
  // otherwise; nullopt: at its next change.
  std::optional<std::chrono::milliseconds> RequeueDelay(const ReconcileResult& r,
                                                        int failures) const;
  ReconcileResult ReconcileCached(const std::string& key);
  // Adds `key` to awaiting_ or removes it (takes mu_).
  void Await(const std::string& key, bool awaiting);
  void SetGate(const std::string& podKey);
  // The pod's gate needs no more work: its wait, from the event that queued it, is observed when
  // `timed` (the gate is True), and forgotten. Takes mu_.
  void EndGateWait(const std::string& podKey, bool timed);
  // Queues work on its lane and wakes the lane's thread (any thread: the watches' handlers,
  // Enqueue's caller).
  void Queue(WorkKind kind, std::string key, std::chrono::steady_clock::time_point due);

  kube::Api& api_;
  kube::WatchApi* watchApi_ = nullptr;
  const Options options_;
  Writer writer_;  // after options_: made from them

  std::mutex lifecycleMu_;  // Start/Stop
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;  // Start() launched thread_ (with !stop_: Running())
  std::condition_variable gateCv_;
  std::thread thread_;       // the loop's thread: Deployments, resync, trims
  std::thread gateThread_;   // the gate lane
  DelayQueue deployments_;   // Deployment keys → when to plan them
  DelayQueue statefulSets_;  // StatefulSet keys → when to plan them
  DelayQueue gates_;         // pod keys → when to set their gate
  // Pod key → when its gate was first queued (inplace_webhook_gate_latency_seconds).
  std::map<std::string, std::chrono::steady_clock::time_point> gateSince_;
  // Consecutive failed passes, by Deployment key (kStatefulSetKeyPrefix + a StatefulSet's).
  std::map<std::string, int> failures_;
  // Deployments whose pass waits for the caches to show the loop's writes: any event of theirs
  // queues them (WorkKind::kDeploymentIfWaiting), though the update may have ended. A key enters
  // before its expectations are checked, so an event that lands between the check and the wait
  // is not lost (the informer stores an object before its handlers run).
  std::set<std::string, std::less<>> awaiting_;

  mutable std::mutex watchesMu_;  // the pointer (metrics read it from other threads)
  std::unique_ptr<Watches> watches_;

  // Only for the loop's thread (or RunOnce's caller).
  Expectations expectations_;
  std::map<std::string, std::string> lastPhase_;  // for logging changes only
  std::set<std::string> freshNext_;               // Deployments whose next pass reads the API
  // The gate thread's alone. Pod gate writes made, by "namespace/name": the resourceVersion the
  // pod had before, and until when to wait for the cache to show a newer one. The pod is not
  // written again while the cache still shows that version. Like freshNext_, cleared by Stop().
  std::map<std::string, std::pair<std::string, std::chrono::steady_clock::time_point>> gateWritten_;
  std::chrono::steady_clock::time_point gateSweep_{};  // next gateWritten_ sweep
  std::atomic<uint64_t> cachedPasses_{0}, freshPasses_{0}, waits_{0};
};

// "namespace/name" → {namespace, name}.
std::pair<std::string, std::string> SplitKey(std::string_view key);

}  // namespace iw::loop
