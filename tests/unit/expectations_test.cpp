#include "server/loop/expectations.h"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using iw::loop::AtLeast;
using iw::loop::CacheKind;
using iw::loop::Expectation;
using iw::loop::Expectations;
using Steady = std::chrono::steady_clock;
using Verdict = Expectations::Verdict;

namespace {

// A cache of pods by name: their resourceVersions.
Expectations::Lookup PodsCache(const std::map<std::string, std::string>& pods) {
  return [pods](CacheKind kind, const std::string&, const std::string& name) {
    auto it = pods.find(name);
    if (kind != CacheKind::kPods || it == pods.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  };
}

}  // namespace

TEST_CASE("expectations: resourceVersions compare as etcd revisions, else only as equal") {
  CHECK(AtLeast("12", "12"));
  CHECK(AtLeast("13", "12"));
  CHECK_FALSE(AtLeast("9", "12"));
  CHECK(AtLeast("opaque", "opaque"));
  CHECK_FALSE(AtLeast("opaque", "12"));
  CHECK_FALSE(AtLeast("12a", "12"));
}

TEST_CASE("expectations: met by leaving a version or reaching one, pending, then expired") {
  const auto t0 = Steady::now();
  Expectations e;
  CHECK(e.Check("ns/web", PodsCache({}), t0) == Verdict::kMet);  // nothing expected
  e.Of("ns/web").push_back({CacheKind::kPods, "ns", "a", "5", "", t0 + std::chrono::seconds(5)});
  e.Of("ns/web").push_back({CacheKind::kPods, "ns", "b", "", "20", t0 + std::chrono::seconds(3)});
  CHECK(e.FirstDeadline("ns/web") == t0 + std::chrono::seconds(3));
  // a still at 5, b behind: pending.
  CHECK(e.Check("ns/web", PodsCache({{"a", "5"}, {"b", "19"}}), t0) == Verdict::kPending);
  // a left 5 (met, dropped); b absent from the cache: not known to show the write.
  CHECK(e.Check("ns/web", PodsCache({{"a", "7"}}), t0) == Verdict::kPending);
  CHECK(e.FirstDeadline("ns/web") == t0 + std::chrono::seconds(3));
  // Past b's deadline: expired, and forgotten (the next pass reads through the API).
  CHECK(e.Check("ns/web", PodsCache({{"b", "19"}}), t0 + std::chrono::seconds(3)) ==
        Verdict::kExpired);
  CHECK(e.Check("ns/web", PodsCache({}), t0) == Verdict::kMet);
  CHECK(e.FirstDeadline("ns/web") == Steady::time_point::max());
  // Reached (a later revision counts): met.
  e.Of("ns/web").push_back({CacheKind::kPods, "ns", "b", "", "20", t0 + std::chrono::seconds(3)});
  CHECK(e.Check("ns/web", PodsCache({{"b", "21"}}), t0) == Verdict::kMet);
  // Another key is its own; Forget and Clear drop them.
  e.Of("ns/api").push_back({CacheKind::kPods, "ns", "c", "1", "", t0 + std::chrono::seconds(1)});
  CHECK(e.Check("ns/web", PodsCache({}), t0) == Verdict::kMet);
  CHECK(e.Check("ns/api", PodsCache({{"c", "1"}}), t0) == Verdict::kPending);
  e.Forget("ns/api");
  CHECK(e.Check("ns/api", PodsCache({{"c", "1"}}), t0) == Verdict::kMet);
}
