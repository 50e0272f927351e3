// What the caches must show of the loop's own writes before a Deployment is planned from them
// again (controller-runtime's expectations, client-go's ControllerExpectations): per Deployment
// key, each object written and the resourceVersion it must leave or reach, with a deadline after
// which the next pass reads through the API instead (DESIGN.md §4.5).
//
// Thread safety: none. The loop's thread only (or RunOnce's caller).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iw::loop {

// The loop's three caches.
enum class CacheKind { kDeployments, kReplicaSets, kPods };

// A write (or a refused one) the caches must show before the Deployment is planned again.
struct Expectation {
  CacheKind kind = CacheKind::kPods;
  std::string ns, name;
  std::string leave;  // met once the cached resourceVersion differs from this ("" = unused)
  std::string reach;  // met once the cache holds this resourceVersion or a later one
  std::chrono::steady_clock::time_point deadline;
};

class Expectations {
 public:
  enum class Verdict { kMet, kPending, kExpired };
  // The resourceVersion the cache of `kind` holds for ns/name; nullopt when it holds no such
  // object (not listed yet, or deleted: not known to show the write).
  using Lookup = std::function<std::optional<std::string>(CacheKind, const std::string& ns,
                                                          const std::string& name)>;

  // The list of `key`, for the writer to add to.
  std::vector<Expectation>& Of(const std::string& key) { return byKey_[key]; }

  // Drops what the caches show. kMet when nothing is left for `key`; kExpired when one is past its
  // deadline at `now` (the rest are forgotten too: the next pass reads through the API); else
  // kPending.
  Verdict Check(const std::string& key, const Lookup& cached,
                std::chrono::steady_clock::time_point now);

  // Whether any write of `key` is still expected (Check may drop it).
  bool Has(const std::string& key) const { return byKey_.contains(key); }

  // The earliest deadline pending for `key`; time_point::max() when none.
  std::chrono::steady_clock::time_point FirstDeadline(const std::string& key) const;

  void Forget(const std::string& key) { byKey_.erase(key); }
  void Clear() { byKey_.clear(); }

 private:
  std::map<std::string, std::vector<Expectation>> byKey_;
};

// Whether resourceVersion `have` is `want` or, both being decimal numbers (etcd revisions, as
// every API server uses), a later one.
bool AtLeast(std::string_view have, std::string_view want);

}  // namespace iw::loop
