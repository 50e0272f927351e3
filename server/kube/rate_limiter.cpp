#include "server/kube/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace iw::kube {

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps),
      burst_(std::max(1, burst)),
      tokens_(std::max(1, burst)),
      last_(std::chrono::steady_clock::now()) {}

std::chrono::nanoseconds RateLimiter::Acquire() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  std::chrono::nanoseconds wait(0);
  {
    std::lock_guard lock(mu_);
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    tokens_ -= 1;  // reserve; a negative balance is the queue of waiters
    if (tokens_ < 0) {
      wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(-tokens_ / qps_));
    }
  }
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  return wait;
}

bool RateLimiter::TryAcquire() {
  if (qps_ <= 0) return true;
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

}  // namespace iw::kube
