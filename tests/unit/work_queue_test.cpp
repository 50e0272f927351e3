// server/loop/work_queue: the loop's per-lane delaying queue.
#include "server/loop/work_queue.h"

#include <doctest/doctest.h>

using iw::loop::DelayQueue;
using std::chrono::milliseconds;

namespace {
const DelayQueue::TimePoint kT0 = DelayQueue::TimePoint() + std::chrono::hours(1);
}

TEST_CASE("work queue: keys come out earliest due first, equal times in key order") {
  DelayQueue q;
  CHECK(q.Add("ns/c", kT0 + milliseconds(30)));
  CHECK(q.Add("ns/a", kT0 + milliseconds(20)));
  CHECK(q.Add("ns/b", kT0 + milliseconds(10)));
  CHECK(q.Add("ns/d", kT0 + milliseconds(10)));
  CHECK(q.Add("ns/e", kT0 + milliseconds(50)));
  CHECK(q.NextDue() == kT0 + milliseconds(10));
  CHECK(q.TakeDue(kT0) == std::vector<std::string>{});
  CHECK(q.TakeDue(kT0 + milliseconds(30)) ==
        std::vector<std::string>{"ns/b", "ns/d", "ns/a", "ns/c"});
  CHECK(q.Size() == 1);
  CHECK(q.NextDue() == kT0 + milliseconds(50));
  CHECK(q.TakeDue(kT0 + milliseconds(50)) == std::vector<std::string>{"ns/e"});
  CHECK_FALSE(q.NextDue().has_value());
}

TEST_CASE("work queue: a key is queued once, at the earlier of its times") {
  DelayQueue q;
  CHECK(q.Add("ns/a", kT0 + milliseconds(100)));
  CHECK_FALSE(q.Add("ns/a", kT0 + milliseconds(200)));  // later: no change
  CHECK(q.NextDue() == kT0 + milliseconds(100));
  CHECK(q.Add("ns/a", kT0 + milliseconds(40)));  // earlier: moved
  CHECK(q.Size() == 1);
  CHECK(q.TakeDue(kT0 + milliseconds(40)) == std::vector<std::string>{"ns/a"});
  CHECK_FALSE(q.Contains("ns/a"));
  CHECK(q.Add("ns/a", kT0 + milliseconds(500)));  // taken: queued anew
  q.Clear();
  CHECK(q.Size() == 0);
}
