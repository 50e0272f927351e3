// Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection package:
// the same record (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
// leaseTransitions), the same defaults (lease 15 s, renew deadline 10 s, retry period 2 s), the
// same rule for taking over (the record has not changed for a lease duration as observed on OUR
// clock, so clock skew between replicas does not matter), writes pinned to the Lease's
// resourceVersion, and release on stop (holderIdentity cleared) so a successor need not wait.
//
// Only the leader runs the rollout loop: onStartedLeading starts it, onStoppedLeading stops it.
// Callbacks run on the elector's thread and must not call Stop() on the elector.
//
// Thread safety: Start() and Stop() from one thread at a time, never from a callback (Stop()
// joins; idempotent; the destructor calls it). Stop() waits for the attempt under way (cut at its
// renew deadline), then, when leading, for onStoppedLeading and the release. onStartedLeading,
// onStoppedLeading, mayLead and clock run on the elector's thread; so do TryAcquireOrRenew() and
// Release() while it runs (tests call them unstarted). IsLeader(), LeaderKnownAlive(),
// RenderMetrics() and the Fence from any thread: `mu_` guards stop_, leading_ and the observed
// record, the Fence its own `mu_`. FencedApi takes calls from any thread, as the api it wraps
// does; a write's deadline is a DeadlineScope on the calling thread.
//
// One loop at a time (DESIGN.md §9.3), which client-go does not promise (it has no fencing and
// releases the Lease while OnStartedLeading's work may still run): every renewal is timed from
// before its Get (`r`), and every other replica can take the Lease over no earlier than
// r + leaseDuration on its own clock. So the leader's Fence lets the loop START a write only
// before r + renewDeadline and gives every write a deadline (kube::DeadlineScope) at
// r + leaseDuration - writeMargin; a renewal is itself cut at r + renewDeadline. A leader that
// cannot renew has stopped writing before anyone can lead, whatever its thread is doing. On
// Stop the loop is stopped first, the fence closed, and only then the Lease released.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "hooks/kube_api.h"
#include "lib/status.h"
#include "server/kube/kube_client.h"

namespace iw::leader {

inline constexpr std::string_view kLeaseName = "inplace-webhook";

using Steady = std::chrono::steady_clock;

// The durations the fence is built from (client-go's defaults, plus the write margin).
struct Timing {
  std::chrono::milliseconds leaseDuration{15000};
  std::chrono::milliseconds renewDeadline{10000};
  std::chrono::milliseconds retryPeriod{2000};
  // How long before another replica could take over every write has ended: covers the rate
  // difference of the replicas' monotonic clocks and the API server noticing the closed
  // connection.
  std::chrono::milliseconds writeMargin{1000};
};

// Whether `t` can keep one loop at a time: retryPeriod > 0, writeMargin >= 0, retryPeriod <
// renewDeadline (the leader gets more than one try per deadline) and renewDeadline <
// leaseDuration - writeMargin (a write started just before the renew deadline still has time
// before it must have ended). Failure: InvalidArgument saying which rule `t` breaks.
Status CheckTiming(const Timing& t);

// The deadline of a write starting at `now`, or nullopt when none may start: `lastRenew` is when
// the last successful renewal started (nullopt: not leading). A write may start while
// now < lastRenew + renewDeadline; it must end by min(now + callTimeout, lastRenew +
// leaseDuration - writeMargin).
std::optional<Steady::time_point> WriteDeadline(std::optional<Steady::time_point> lastRenew,
                                                Steady::time_point now, const Timing& t,
                                                std::chrono::milliseconds callTimeout);

// The deadline of the renewal attempt starting at `now`: lastRenew + renewDeadline while leading
// (client-go cancels its renew at RenewDeadline), now + renewDeadline for a candidate.
Steady::time_point RenewAttemptDeadline(bool leading, Steady::time_point lastRenew,
                                        Steady::time_point now, const Timing& t);

// The leader's write fence: open from a successful renewal (Open(r)) until Close(); it closes by
// itself at r + renewDeadline when no renewal follows. Thread-safe.
class Fence {
 public:
  explicit Fence(Timing timing) : timing_(timing) {}
  void Open(Steady::time_point renewStarted);
  void Close();
  // WriteDeadline at `now` for the fence's state.
  std::optional<Steady::time_point> Deadline(Steady::time_point now,
                                             std::chrono::milliseconds callTimeout) const;

 private:
  const Timing timing_;
  mutable std::mutex mu_;
  std::optional<Steady::time_point> lastRenew_;
};

// The loop's API: writes (create, update, patch, delete) pass only through the fence, each under
// its deadline (refused with reason "NotLeading" when none may start); without a fence (no
// election) each write still has a deadline of `callTimeout`. Reads and watches pass through
// (they cannot land a write; the client's own timeouts bound them).
class FencedApi : public kube::WatchApi {
 public:
  FencedApi(kube::WatchApi& api, const Fence* fence, std::chrono::milliseconds callTimeout)
      : api_(api), fence_(fence), callTimeout_(callTimeout) {}
  kube::Result Get(std::string_view path) override { return api_.Get(path); }
  kube::Result List(std::string_view path, const kube::ListOptions& options) override {
    return api_.List(path, options);
  }
  // Forwarded as such: the informers' lists stay paged (WatchApi's default would concatenate).
  kube::Result ListPages(std::string_view path, const kube::ListOptions& options,
                         const kube::PageHandler& page) override {
    return api_.ListPages(path, options, page);
  }
  kube::Result Create(std::string_view path, const json::Value& object) override;
  kube::Result Update(std::string_view path, const json::Value& object) override;
  kube::Result Patch(std::string_view path, kube::PatchType type, std::string_view body) override;
  kube::Result Delete(std::string_view path) override;
  kube::WatchResult Watch(std::string_view path, const kube::WatchOptions& options,
                          const kube::WatchHandler& handler, std::stop_token stop) override {
    return api_.Watch(path, options, handler, stop);
  }
  // Writes refused because the fence was closed.
  uint64_t Refused() const { return refused_.load(); }

 private:
  template <typename F>
  kube::Result Write(std::string_view verb, std::string_view path, F&& call);

  kube::WatchApi& api_;
  const Fence* fence_;
  const std::chrono::milliseconds callTimeout_;
  std::atomic<uint64_t> refused_{0};
};

struct Options {
  std::string namespaceName;  // where the Lease lives (the pod's own namespace)
  std::string name = std::string(kLeaseName);
  std::string identity;  // default: DefaultIdentity()
  Timing timing;
  std::function<void()> onStartedLeading;
  std::function<void()> onStoppedLeading;
  // Whether this replica may lead now (absent: always). Asked before each campaign attempt and
  // before each renewal, on the elector's thread: false means do not campaign, and a leader steps
  // down (loop stopped, fence closed, Lease released) so an able replica can take over.
  std::function<bool()> mayLead;
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
  // The fence the loop's writes go through (FencedApi).
  const Fence& WriteFence() const { return fence_; }
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
  bool MayLead() const;
  // Sleeps up to `d`; false when stopping.
  bool Sleep(std::chrono::milliseconds d);
  std::string Now() const;

  kube::Api& api_;
  const Options options_;
  const std::string identity_;
  Fence fence_;

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
