// The loop's side of the StatefulSet hold (DESIGN.md §4.8): the answer to "may the StatefulSet
// controller delete this pod?", from the StatefulSet as the API server stores it now (one GET, so
// that an update admitted a moment ago is seen even before the loop's caches show it), decided by
// statefulset_hold::Decide. Serves /holdz on the probe port for the credential-free webhook pods,
// and the webhook in the same process directly.
//
// Thread safety: Ask() and Serve() from any thread, concurrently (the probe listener's and the
// review listener's workers); the budget is a thread-safe kube::RateLimiter, the counters atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hooks/kube_api.h"
#include "hooks/statefulset_hold.h"
#include "server/kube/rate_limiter.h"

namespace iw::loop {

class HoldAnswerer {
 public:
  struct Options {
    // Questions answered a second (burst twice that): beyond it a question gets no answer and the
    // DELETE goes through, so that a flood of /holdz cannot spend the API budget the loop writes
    // with. The StatefulSet controller asks about one pod per sync of a set.
    double perSecond = 20;
    // The GET's deadline: within the webhook's 2 s wait for the answer.
    std::chrono::milliseconds timeout{1500};
  };
  HoldAnswerer(kube::Api& api, Options options);

  // The answer for `facts`; nullopt when the StatefulSet could not be read (an error other than
  // 404) or the budget is spent.
  std::optional<statefulset_hold::Answer> Ask(const statefulset_hold::PodFacts& facts);

  // /holdz?QUERY: 200 with statefulset_hold::RenderAnswer, 400 for a query DecodeQuery refuses,
  // 503 when Ask has no answer.
  std::pair<int, std::string> Serve(std::string_view query);

  // inplace_webhook_hold_answers_total{answer="hold|release|error"}.
  void RenderMetrics(std::string& out) const;

 private:
  kube::Api& api_;
  const Options options_;
  kube::RateLimiter budget_;
  std::atomic<unsigned long long> holds_{0}, releases_{0}, errors_{0};
};

}  // namespace iw::loop
