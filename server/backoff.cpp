#include "server/backoff.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/text_util.h"

namespace iw::kube {

std::chrono::milliseconds Backoff(int attempt, std::chrono::milliseconds base,
                                  std::chrono::milliseconds max) {
  if (base.count() <= 0) return std::chrono::milliseconds(0);
  int64_t d = base.count();
  for (int i = 0; i < attempt && d < max.count(); ++i) d *= 2;
  d = std::min<int64_t>(d, std::max<int64_t>(max.count(), base.count()));
  std::uniform_int_distribution<int64_t> jitter(d / 2, d);
  return std::chrono::milliseconds(jitter(JitterRng()));
}

std::mt19937_64& JitterRng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

std::optional<int> RetryAfterSeconds(std::string_view value) {
  std::string v = Trim(value);
  int seconds = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc() || p != v.data() + v.size() || seconds < 0) return std::nullopt;
  return seconds;
}

bool SleepUnlessStopped(std::chrono::milliseconds delay, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

}  // namespace iw::kube
