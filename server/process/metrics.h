// Prometheus metrics of the webhook server, rendered in the text exposition format (0.0.4).
// Counters and gauges are lock-free on the hot path except the per-(route, code) counter map.
//
// Thread safety: every method from any thread. `mu_` guards the per-route maps (their
// histograms included) and the collectors; the public counters are atomic. Render() runs the
// collectors on the caller's thread (a probe worker) with `mu_` held, so recording waits for
// them: a collector must be thread-safe and quick, and must not call back into the registry.
// Collectors are never removed: what one points to must outlive the last Render().
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace iw::metrics {

// A histogram with fixed buckets (seconds).
class Histogram {
 public:
  static constexpr std::array<double, 14> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  void Observe(double seconds);
  // Appends `name_bucket{labels,le=...}`, `_sum`, `_count` lines.
  void Render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  // Per bucket, not cumulative (one increment per observation); Render sums them.
  std::array<std::atomic<uint64_t>, kBuckets.size()> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sumNanos_{0};
};

class Registry {
 public:
  // Admission requests.
  void RecordRequest(std::string_view route, int httpCode, double seconds);
  void RecordHandlerError(std::string_view route);
  // Starts the route's handler-error counter and latency histogram at 0, so that their series
  // exist before the first request or error (alerts and dashboards read them; DESIGN.md §5).
  void DeclareRoute(std::string_view route);
  std::atomic<int64_t> inFlight{0};

  // TLS certificate reloads.
  std::atomic<uint64_t> certificateReloads{0};
  std::atomic<uint64_t> certificateReloadErrors{0};

  // Other components (the loop, the API client) add their own lines at render time.
  void AddCollector(std::function<void(std::string&)> collector);

  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, uint64_t> handlerErrors_;
  std::map<std::string, Histogram, std::less<>> latency_;
  std::vector<std::function<void(std::string&)>> collectors_;
};

// Escapes a label value for the exposition format.
std::string EscapeLabel(std::string_view value);

}  // namespace iw::metrics
