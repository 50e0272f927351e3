#include "server/kube/backoff.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>

#include "server/kube/text_util.h"

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

}  // namespace iw::kube
