// Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection package:
// the same record (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
// leaseTransitions), the same defaults (lease 15 s, renew deadline 10 s, retry period 2 s), the
// same rule for taking over (the record has not changed for a lease duration as observed on OUR
// clock, so clock skew between replicas does not matter), writes pinned to the Lease's
// resourceVersion, and release on stop (holderIdentity cleared) so a successor need not wait.
//
// Only the leader runs the rollout loop: onStartedLeading starts it, onStoppedLeading stops it.
// Callbacks run on the elector's thread and must not call Stop() on the elector.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hooks/kube_api.h"

namespace iw::leader {

inline constexpr std::string_view kLeaseName = "inplace-webhook";

struct Options {
  std::string namespaceName;  // where the Lease lives (the pod's own namespace)
  std::string name = std::string(kLeaseName);
  std::string identity;  // default: DefaultIdentity()
  std::chrono::milliseconds leaseDuration{15000};
  std::chrono::milliseconds renewDeadline{10000};
  std::chrono::milliseconds retryPeriod{2000};
  std::function<void()> onStartedLeading;
  std::function<void()> onStoppedLeading;
  // Wall clock for the record's timestamps (default system_clock::now).
  std::function<std::chrono::system_clock::time_point()> clock;
};

// "<hostname>_<8 random hex digits>": unique per process even when pods share a hostname.
std::string DefaultIdentity();

class LeaderElector {
 public:
  LeaderElector(kube::Api& api, Options options);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts campaigning on a thread (no-op when running). Stop() releases the Lease if held,
  // calls onStoppedLeading if it was leading, and joins. Both idempotent.
  void Start();
  void Stop();

  bool IsLeader() const;
  // Whether some process is known to run the loop at `now`: we lead, or another holder's record was
  // seen to change less than renewDeadline ago (a holder that cannot renew within it stops leading
  // by itself), on OUR clock. False once the Lease was released (empty holder).
  bool LeaderKnownAlive(std::chrono::steady_clock::time_point now) const;
  const std::string& Identity() const { return identity_; }

  // One attempt, the unit of the algorithm (client-go tryAcquireOrRenew): Get the Lease; create
  // it if absent; leave it if another holder's record changed less than leaseDuration ago (as
  // observed at `now`, a monotonic time); otherwise write our record (renewal keeps acquireTime,
  // a takeover increments leaseTransitions) with the resourceVersion read. True when we hold it.
  bool TryAcquireOrRenew(std::chrono::steady_clock::time_point now);
  // Clears holderIdentity if we hold the Lease. True on success (or nothing to release).
  bool Release();

  // Appends `inplace_webhook_leader{identity="..."} 0|1`.
  void RenderMetrics(std::string& out) const;

 private:
  void Run();
  // Sleeps up to `d`; false when stopping.
  bool Sleep(std::chrono::milliseconds d);
  std::string Now() const;

  kube::Api& api_;
  const Options options_;
  const std::string identity_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool leading_ = false;
  std::thread thread_;

  // The last record seen (serialised spec) and when we saw it change (monotonic).
  std::string observedRecord_;
  std::string observedHolder_;
  std::chrono::steady_clock::time_point observedTime_{};
};

}  // namespace iw::leader
