// Metrics of the in-place rollout loop: plain atomic counters, two histograms and a pods-by-state
// gauge, rendered as Prometheus text lines (the /metrics handler appends them, e.g. through
// metrics::Registry::AddCollector).
//
// Thread safety: every method from any thread (the loop's thread writes, /metrics reads). The
// counters and histogram buckets are atomics read one at a time, so a scrape racing an Observe()
// may see a bucket ahead of _count; `mu_` guards the pods-by-state map.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "hooks/rollout_plan.h"

namespace iw::loop {

// A histogram with fixed buckets in seconds, sized for pod restarts and whole rollouts.
class DurationHistogram {
 public:
  static constexpr std::array<double, 11> kBuckets = {1,   5,   10,   30,   60,  120,
                                                      300, 600, 1800, 3600, 7200};
  void Observe(double seconds);
  void Render(std::string& out, std::string_view name, std::string_view help) const;

 private:
  std::array<std::atomic<uint64_t>, kBuckets.size()> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sumMillis_{0};
};

class LoopMetrics {
 public:
  // Counts what a successfully applied action stands for.
  void Count(rollout::Metric metric, double seconds = 0);
  uint64_t Value(rollout::Metric metric) const;

  // The pods of one Deployment by state (an empty map forgets the Deployment).
  void SetPodsByState(const std::string& deployment, const std::map<std::string, int>& counts);
  std::map<std::string, int> PodsByState() const;  // summed over Deployments

  std::atomic<uint64_t> reconciles{0};
  std::atomic<uint64_t> conflicts{0};  // writes answered 409 (retried on the next pass)
  std::atomic<uint64_t> errors{0};     // other failed calls

  // Appends the loop's metrics (names start with inplace_webhook_).
  void Render(std::string& out) const;

 private:
  std::array<std::atomic<uint64_t>, 7> counters_{};
  DurationHistogram podUpdate_;
  DurationHistogram rollout_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, int>> podsByState_;
};

}  // namespace iw::loop
