// --pod-resize=auto (DESIGN.md §3.1): asks the API server whether it serves pods/resize (the
// resources of GET /api/v1) and which version it runs (GET /version), and keeps the answer for
// the admission handlers. Until the first answer, and while the API server does not serve the
// subresource, resource changes take the native rollout. Re-asked every `period` (an API server
// upgraded under a running webhook is seen without a restart); a failed question is retried after
// `retry`, keeping the last answer.
//
// Thread safety: Start() and Stop() (joins; idempotent; the destructor calls it) from the owner's
// thread. Current() and RenderMetrics() from any thread (one atomic). DiscoverOnce() runs on the
// caller's thread (Start() calls it once before the background thread starts).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "hooks/kube_api.h"
#include "hooks/resize_support.h"
#include "lib/status.h"

namespace iw::server {

// The two gauges below, for a value --pod-resize gave (answered) or the current discovery.
void RenderResizeMetrics(std::string& out, resize_support::Support s, bool answered);

class ResizeDiscovery {
 public:
  struct Options {
    std::chrono::milliseconds period{std::chrono::minutes(10)};
    std::chrono::milliseconds retry{std::chrono::seconds(30)};
    std::chrono::milliseconds timeout{std::chrono::seconds(5)};  // each GET
  };
  ResizeDiscovery(kube::Api& api, Options options);
  ~ResizeDiscovery();
  ResizeDiscovery(const ResizeDiscovery&) = delete;
  ResizeDiscovery& operator=(const ResizeDiscovery&) = delete;

  // Asks once (synchronously), then again on the background thread until Stop().
  void Start();
  void Stop();
  // One question: the new answer is kept and logged when it changes. Failure: the GET's.
  Status DiscoverOnce();
  resize_support::Support Current() const;
  // inplace_webhook_pod_resize_supported (1: resource changes can be in place) and
  // inplace_webhook_pod_resize_discovered (0 until the API server first answered).
  void RenderMetrics(std::string& out) const;

 private:
  kube::Api& api_;
  const Options options_;
  // Bit 0: podResize, bit 1: memoryLimitDecrease, bit 2: answered at least once.
  std::atomic<unsigned> bits_{0};
  std::jthread thread_;
};

}  // namespace iw::server
