// Metrics of the in-place rollout loop: plain atomic counters, histograms (pod updates, rollouts,
// hook waits) and per-update gauges (pods by state, updates in progress, stalled updates),
// rendered as Prometheus text lines (the /metrics handler appends them, e.g. through
// metrics::Registry::AddCollector). Every family is rendered with HELP and TYPE from the start,
// before any event, so rules and dashboards can be checked against a fresh process.
//
// Thread safety: every method from any thread (the loop's thread writes, /metrics reads). The
// counters and histogram buckets are atomics read one at a time, so a scrape racing an Observe()
// may see a bucket ahead of _count; `mu_` guards the per-update map.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/plan.h"

namespace iw::loop {

// A histogram with fixed buckets in seconds: by default sized for pod restarts and whole
// rollouts; kLatencyBuckets for sub-second latencies (a new pod's readiness gate).
class DurationHistogram {
 public:
  static constexpr std::array<double, 11> kBuckets = {1,   5,   10,   30,   60,  120,
                                                      300, 600, 1800, 3600, 7200};
  static constexpr std::array<double, 10> kLatencyBuckets = {0.05, 0.1, 0.25, 0.5, 1,
                                                             2,    5,   10,   30,  60};
  DurationHistogram() = default;
  // `buckets`: static storage, ascending, at most kMaxBuckets.
  explicit DurationHistogram(std::span<const double> buckets) : buckets_(buckets) {}
  void Observe(double seconds);
  // HELP, TYPE and the series (no labels).
  void Render(std::string& out, std::string_view name, std::string_view help) const;
  // The series only, each with `labels` (`key="value"`, escaped; "" for none) before `le`.
  void RenderSeries(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  static constexpr size_t kMaxBuckets = 16;
  std::span<const double> buckets_ = kBuckets;
  std::array<std::atomic<uint64_t>, kMaxBuckets> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sumMillis_{0};
};

// The key a StatefulSet's update is recorded under: this prefix and "namespace/name" (a
// Deployment's is "namespace/name"). StatefulSets count in the pods and waits gauges and the
// updates in progress, not in update_stalled (they have no progress deadline).
inline constexpr std::string_view kStatefulSetKeyPrefix = "sts:";

class LoopMetrics {
 public:
  // Counts what a successfully applied action stands for.
  void Count(rollout::Metric metric, double seconds = 0);
  uint64_t Value(rollout::Metric metric) const;
  // A new pod's readiness gate written True, `seconds` after the event that queued it.
  void ObserveGate(double seconds) { gate_.Observe(seconds); }

  // Records the in-progress update of `deployment` ("namespace/name", or kStatefulSetKeyPrefix and
  // that for a StatefulSet): its pods by state and whether it is stalled (no progress for the
  // Deployment's spec.progressDeadlineSeconds or the StatefulSet's
  // inplace-webhook.io/progress-deadline-seconds, reported as ProgressDeadlineExceeded; a refused
  // resize). Each kind's stalls are their own family. Replaces what was recorded for it before.
  // `podsByWait`: by pod_update::WaitName.
  void SetUpdate(const std::string& deployment, const std::map<std::string, int>& podsByState,
                 const std::map<std::string, int>& podsByWait, bool stalled);
  // Forgets one Deployment (its update ended, or it is gone) or all of them (the loop stopped: a
  // replica that no longer leads reports no update).
  void ForgetUpdate(const std::string& deployment);
  void ForgetUpdates();
  std::map<std::string, int> PodsByState() const;  // summed over Deployments
  std::map<std::string, int> PodsByWait() const;   // summed over Deployments
  int UpdatesInProgress() const;
  std::vector<std::string> StalledUpdates() const;  // "namespace/name", sorted

  std::atomic<uint64_t> reconciles{0};
  std::atomic<uint64_t> conflicts{0};  // writes answered 409 (retried on the next pass)
  std::atomic<uint64_t> errors{0};     // other failed calls

  // Appends the loop's metrics (names start with inplace_webhook_).
  void Render(std::string& out) const;

 private:
  struct Update {
    std::map<std::string, int> podsByState;
    std::map<std::string, int> podsByWait;
    bool stalled = false;
  };
  // One count of every Update, summed over Deployments.
  std::map<std::string, int> Sum(std::map<std::string, int> Update::*counts) const;
  std::array<std::atomic<uint64_t>, 9> counters_{};
  DurationHistogram podUpdate_;
  DurationHistogram rollout_;
  DurationHistogram preUpdateWait_;   // hook="preUpdate": time in PreparingUpdate
  DurationHistogram postUpdateWait_;  // hook="postUpdate": time in Updated
  DurationHistogram gate_{DurationHistogram::kLatencyBuckets};  // the gate lane (DESIGN §4.3.1)
  mutable std::mutex mu_;
  std::map<std::string, Update> updates_;  // by "namespace/name"
};

}  // namespace iw::loop
