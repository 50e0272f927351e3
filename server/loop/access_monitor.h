// Asks the API server, every `interval`, whether this process may make the calls the loop cannot
// work without (hooks/access_check: SelfSubjectAccessReviews), and keeps the verdict (DESIGN.md
// §9.8). The leader elector consults Able() before campaigning and at every renewal: a replica
// that cannot act does not lead.
//
// Thread safety: Start() and Stop() from the owner's thread (Stop() joins; idempotent). CheckNow()
// from one thread at a time (the owner before Start(), then only the monitor's thread). Able(),
// Known(), Problem() and RenderMetrics() from any thread; `mu_` guards the verdict.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hooks/access_check.h"
#include "hooks/kube_api.h"

namespace iw::server {

class AccessMonitor {
 public:
  struct Options {
    std::chrono::milliseconds interval{15000};
    std::chrono::milliseconds callTimeout{10000};  // one round's deadline
    // Called (on the checking thread) when a round finds a permission refused that the round
    // before did not: the log line and the pod Event. `problem` is access::Problem.
    std::function<void(const std::string& problem)> onRefused;
  };

  AccessMonitor(kube::Api& api, Options options);
  ~AccessMonitor();
  AccessMonitor(const AccessMonitor&) = delete;
  AccessMonitor& operator=(const AccessMonitor&) = delete;

  // One round: every access::LoopNeeds() permission asked. A round in which some answer could not
  // be read (no answer, an error status) leaves the verdict as it was: an API server that does
  // not answer is not a lost permission. True when the round completed.
  bool CheckNow();
  void Start();  // a round every interval on a background thread
  void Stop();

  // A completed round has given a verdict.
  bool Known() const;
  // The last completed round found every permission granted.
  bool Able() const;
  // access::Problem of the last completed round ("" when able or not known yet).
  std::string Problem() const;
  // inplace_webhook_controller_permissions_refused (gauge) and
  // inplace_webhook_access_checks_total{result="able|refused|error"}.
  void RenderMetrics(std::string& out) const;

 private:
  void Run(std::stop_token stop);

  kube::Api& api_;
  const Options options_;
  mutable std::mutex mu_;
  bool known_ = false;
  std::vector<access::Permission> refused_;
  std::atomic<unsigned long long> able_{0}, refusedRounds_{0}, errors_{0};
  std::jthread thread_;
};

}  // namespace iw::server
