// The in-place loop's work queues (server/loop/loop): keys ("namespace/name") each due at a time,
// in the style of client-go's delaying workqueue. A key is queued once: queueing it again keeps the
// earlier of the two times, so a burst of events makes one unit of work. The loop keeps one queue
// per lane (DESIGN.md §4.3.1): Deployment passes, and the readiness gates of new pods, each
// drained by its own worker thread.
//
// Thread safety: none of its own. The owner guards each queue with its mutex (server/loop/loop:
// `mu_`).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace iw::loop {

class DelayQueue {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Queues `key` at `due`; a key already queued keeps the earlier time. Returns whether the queue
  // changed (a worker may have to wake sooner).
  bool Add(const std::string& key, TimePoint due);
  // Removes and returns the keys due at `now`, earliest due first (equal times in key order).
  std::vector<std::string> TakeDue(TimePoint now);
  // The earliest due time; nullopt when empty.
  std::optional<TimePoint> NextDue() const;
  bool Contains(const std::string& key) const { return due_.contains(key); }
  size_t Size() const { return due_.size(); }
  void Clear() { due_.clear(); }

 private:
  std::map<std::string, TimePoint> due_;
};

}  // namespace iw::loop
