#include "server/loop/work_queue.h"

#include <algorithm>

namespace iw::loop {

bool DelayQueue::Add(const std::string& key, TimePoint due) {
  auto [it, added] = due_.try_emplace(key, due);
  if (added) return true;
  if (it->second <= due) return false;
  it->second = due;
  return true;
}

std::vector<std::string> DelayQueue::TakeDue(TimePoint now) {
  std::vector<std::pair<TimePoint, std::string>> ready;
  for (auto it = due_.begin(); it != due_.end();) {
    if (it->second <= now) {
      ready.emplace_back(it->second, it->first);
      it = due_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(ready.begin(), ready.end());
  std::vector<std::string> out;
  out.reserve(ready.size());
  for (auto& [due, key] : ready) out.push_back(std::move(key));
  return out;
}

std::optional<DelayQueue::TimePoint> DelayQueue::NextDue() const {
  std::optional<TimePoint> first;
  for (const auto& [key, due] : due_) {
    if (!first || due < *first) first = due;
  }
  return first;
}

}  // namespace iw::loop
