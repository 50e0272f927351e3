#include "server/loop/expectations.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "server/process/log.h"

namespace iw::loop {

namespace {

bool Met(const Expectation& e, const Expectations::Lookup& cached) {
  std::optional<std::string> rv = cached(e.kind, e.ns, e.name);
  if (!rv) return false;  // the deadline settles it (a read through the API)
  if (!e.leave.empty() && *rv != e.leave) return true;
  return !e.reach.empty() && AtLeast(*rv, e.reach);
}

}  // namespace

Expectations::Verdict Expectations::Check(const std::string& key, const Lookup& cached,
                                          std::chrono::steady_clock::time_point now) {
  auto it = byKey_.find(key);
  if (it == byKey_.end()) return Verdict::kMet;
  std::vector<Expectation>& list = it->second;
  std::erase_if(list, [&cached](const Expectation& e) { return Met(e, cached); });
  if (list.empty()) {
    byKey_.erase(it);
    return Verdict::kMet;
  }
  for (const Expectation& e : list) {
    if (e.deadline <= now) {
      log::Warn("in-place loop: the caches do not show a write in time; reading through the API",
                {{"deployment", key}, {"object", e.ns + "/" + e.name}});
      byKey_.erase(it);
      return Verdict::kExpired;
    }
  }
  return Verdict::kPending;
}

std::chrono::steady_clock::time_point Expectations::FirstDeadline(const std::string& key) const {
  auto first = std::chrono::steady_clock::time_point::max();
  if (auto it = byKey_.find(key); it != byKey_.end()) {
    for (const Expectation& e : it->second) first = std::min(first, e.deadline);
  }
  return first;
}

bool AtLeast(std::string_view have, std::string_view want) {
  if (have == want) return true;
  uint64_t h = 0, w = 0;
  auto ph = std::from_chars(have.data(), have.data() + have.size(), h);
  auto pw = std::from_chars(want.data(), want.data() + want.size(), w);
  if (ph.ec != std::errc() || ph.ptr != have.data() + have.size() || pw.ec != std::errc() ||
      pw.ptr != want.data() + want.size()) {
    return false;
  }
  return h >= w;
}

}  // namespace iw::loop
