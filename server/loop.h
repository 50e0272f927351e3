// The in-place rollout loop's driver (DESIGN.md §4 steps 3–5): finds Deployments with an
// `in-progress` record, reads a snapshot of each (Deployment, its ReplicaSets, their pods) through
// kube::Api, asks hooks/rollout_plan what to write, and applies those writes in order with
// resourceVersion preconditions. A 409 or any failed write ends that Deployment's pass; it is
// re-read and retried on the next one. Events are best effort. Every resync also sets the
// readiness gate True on new pods and removes stale annotation copies from ReplicaSets.
//
// Runs on its own thread with a small work queue (per-Deployment due times) and a periodic
// resync; Stop() (and the destructor) stops and joins it. No exception leaves the thread.
// Run it only while leading (server/leader_election).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hooks/kube_api.h"
#include "hooks/rollout_plan.h"
#include "server/loop_metrics.h"

namespace iw::loop {

using Clock = std::chrono::system_clock;

struct Options {
  std::string namespaceName;                      // "" = every namespace
  std::chrono::milliseconds activePeriod{2000};   // an in-progress Deployment is re-read this often
  std::chrono::milliseconds resyncPeriod{15000};  // list every Deployment, new pods, ReplicaSets
  std::chrono::milliseconds maxBackoff{30000};    // after repeated errors on one Deployment
  std::string instance;                           // Event reportingInstance (e.g. the pod name)
  LoopMetrics* metrics = nullptr;                 // optional
  std::function<Clock::time_point()> clock;       // default: system_clock::now
};

struct ReconcileResult {
  rollout::Phase phase = rollout::Phase::kIdle;
  bool ok = true;         // the snapshot was read and every write applied
  bool conflict = false;  // a write was answered 409
  std::string error;      // what failed, when !ok
  size_t writes = 0;      // writes applied (Events not counted)
  std::optional<std::chrono::milliseconds> requeueAfter;
};

class Loop {
 public:
  Loop(kube::Api& api, Options options);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Starts the thread (no-op when running). Stop() stops and joins it; both are idempotent.
  void Start();
  void Stop();
  bool Running() const;

  // Asks for a look at a Deployment soon (e.g. after the webhook admitted a change to it).
  void Enqueue(std::string_view ns, std::string_view name);

  // One pass on the caller's thread: a resync, then one reconcile of every in-progress
  // Deployment. Returns the reconcile results by "namespace/name". For tests and one-shot use;
  // do not call while the thread runs.
  std::map<std::string, ReconcileResult> RunOnce();

  // Reads one Deployment's snapshot, plans and applies. Thread-compatible (one caller at a time).
  ReconcileResult Reconcile(std::string_view ns, std::string_view name);

  // Lists Deployments and returns the "namespace/name" of those with an in-place update running;
  // on the way sets gates on new pods and cleans ReplicaSet annotations. nullopt if the list fails.
  std::optional<std::vector<std::string>> Resync();

 private:
  Clock::time_point Now() const;
  // Applies the actions in order; returns the result of this pass.
  ReconcileResult Apply(std::string_view deployment, std::vector<rollout::Action>& actions);
  bool CreateEvent(rollout::Action& action);
  void Run();
  void Schedule(const std::string& key, std::chrono::steady_clock::time_point due);

  kube::Api& api_;
  const Options options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::map<std::string, std::chrono::steady_clock::time_point> due_;  // by "namespace/name"
  std::map<std::string, int> failures_;                               // consecutive, by key

  // Only for the loop's thread (or RunOnce's caller).
  std::set<std::string> createdEvents_;           // deterministic Event names already created
  std::map<std::string, std::string> lastPhase_;  // for logging changes only
  uint64_t eventSeq_ = 0;
};

// "namespace/name" → {namespace, name}.
std::pair<std::string, std::string> SplitKey(std::string_view key);

}  // namespace iw::loop
