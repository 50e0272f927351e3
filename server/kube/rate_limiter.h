// The client-side rate limit of API calls (ClientConfig::qps / burst): every attempt of a call,
// retries included, takes a token from the bucket and waits for one when it is empty.
//
// Thread safety: Acquire from any thread, concurrently; `mu_` guards the bucket, and a caller
// that must wait sleeps outside it (its token is reserved: a negative balance is the queue).
#pragma once

#include <chrono>
#include <mutex>

namespace iw::kube {

// Blocking token bucket: `qps` tokens a second, at most `burst` stored; qps <= 0 disables it.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst);
  // Takes one token, sleeping until one is available; returns the time waited.
  std::chrono::nanoseconds Acquire();
  // Takes one token only if one is there now (never waits, never queues): false when the bucket
  // is empty.
  bool TryAcquire();

 private:
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace iw::kube
