// How many pods of a Deployment an in-place update may hold out of service at once (DESIGN.md
// §4a "Budget"): the Deployment's own maxUnavailable, resolved as the Deployment controller does.
#pragma once

#include <chrono>
#include <optional>

#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::budget {

// Resolves an IntOrString against `total` like intstr.GetScaledValueFromIntOrPercent: an integer
// as is; "N%" (N a whole number) → N*total/100, rounded down, or up when `roundUp`. Anything else
// (negative, "N" without %, "1.5%", not a number or string) → nullopt.
std::optional<int> ResolveIntOrPercent(const json::Value& value, int total, bool roundUp);

// How many pods may be unavailable at once, as the Deployment controller resolves maxUnavailable
// (ResolveFenceposts): spec.strategy.rollingUpdate.maxUnavailable (default 25%) resolved against
// spec.replicas, an integer as is, a percentage rounded down. Strategy Recreate → spec.replicas
// (all at once). A malformed value → 0. maxSurge is ignored: in-place never surges.
int ResolveMaxUnavailable(const kube::Deployment& deployment);

// The number of pods an in-place update may have unavailable at once: ResolveMaxUnavailable,
// where a result of 0 (the common `maxUnavailable: 0`, or an invalid value) is 1: one pod at a
// time.
int MaxUnavailable(const kube::Deployment& deployment);

// The pod's Ready condition is True.
bool IsReady(const kube::Pod& pod);

// When a Ready pod counts as available for the Deployment controller (podutil.IsPodAvailable):
// its Ready condition's lastTransitionTime + minReadySeconds, plus a second of margin so that the
// controller, which compares the same whole-second timestamp, has counted it by then. With
// minReadySeconds 0: the epoch (at once). nullopt when the pod is not Ready, or when
// minReadySeconds > 0 and Ready has no readable lastTransitionTime (never counted by the controller
// either).
std::optional<std::chrono::system_clock::time_point> AvailableAt(const kube::Pod& pod,
                                                                 int minReadySeconds);

// A pod is available when it is not in an update (state label Normal, absent, or not one of
// PreparingUpdate / Updating / Updated) and available as the Deployment controller counts it at
// `now`: Ready for minReadySeconds (AvailableAt <= now).
bool IsAvailable(const kube::Pod& pod, int minReadySeconds,
                 std::chrono::system_clock::time_point now);

// Hands out starts of pod updates within the budget. `unavailable` counts the pods that are
// unavailable now (updating, waiting in hooks, or not Ready); `inFlight` those already in an
// update (state not Normal). Starting an available pod uses one unit of the budget; starting a
// pod that is already unavailable costs no availability (so a crash-looping pod can still be
// fixed in place) but still counts towards the pods updating at once.
class Allowance {
 public:
  Allowance(int limit, int unavailable, int inFlight)
      : limit_(limit), unavailable_(unavailable), inFlight_(inFlight) {}

  // Whether a pod (available or not) may start its update now; records the start if so.
  bool TryStart(bool podAvailable);

  int limit() const { return limit_; }

 private:
  int limit_;
  int unavailable_;
  int inFlight_;
};

}  // namespace iw::budget
