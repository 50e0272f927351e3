// The webhook role's view of the loop (DESIGN.md §9.4): polls the controller Service's /loopz
// over plain HTTP (no credentials) and answers "is a loop known to run" from the last answer; and
// asks the same Service's /holdz, when a review needs it, whether the StatefulSet controller's pod
// DELETE is held (§4.8).
//
// Thread safety: Start() and Stop() (joins; idempotent; the destructor calls it) from the owner's
// thread; a Start() after Stop() polls again. Alive() and RenderMetrics() from any thread: `mu_`
// guards stop_ and the last alive answer, the poll counters are atomic. Polls run on the poller's
// thread; Stop() waits for the one under way (connect and answer are bounded by `timeout`, the
// name lookup is not). AskHold() from any thread, concurrently (reviews' threads): it reads only
// what the constructor set and atomic counters.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "hooks/loop_signal.h"
#include "hooks/statefulset_hold.h"
#include "lib/status.h"

namespace iw::server {

// The Service address the kubelet puts in a pod's environment for `host`'s first DNS label
// ("inplace-webhook-controller.ns.svc" -> $INPLACE_WEBHOOK_CONTROLLER_SERVICE_HOST), or "": the
// poller's fallback when the name does not resolve (a cluster without DNS, as the test cluster).
std::string ServiceHostFromEnv(const std::string& host);

class LoopStatusPoller {
 public:
  struct Options {
    std::string url;  // http://HOST[:PORT]/PATH (no TLS: the answer is one bit, and not secret)
    std::chrono::milliseconds period{1000};
    std::chrono::milliseconds timeout{1000};  // connect + request + answer
    std::chrono::milliseconds staleAfter{3000};
    // One /holdz question, connect to answer: within the API server's wait for the review (the
    // chart's timeoutSeconds), so that an unanswered question lets the DELETE through in time.
    std::chrono::milliseconds holdTimeout{2000};
  };
  // Whether `url` is http://HOST[:PORT]/PATH (--loop-status-url); failure: InvalidArgument.
  static Status Validate(const std::string& url);

  explicit LoopStatusPoller(Options options);
  ~LoopStatusPoller();
  LoopStatusPoller(const LoopStatusPoller&) = delete;
  LoopStatusPoller& operator=(const LoopStatusPoller&) = delete;

  void Start();  // polls on a background thread until Stop()
  void Stop();
  // loop_signal::Alive over the last "alive" answer.
  bool Alive() const;
  // The controller's /holdz answer on `facts` (same host and port as the url, path /holdz),
  // asked now; nullopt: no answer, or not one of /holdz's (the DELETE then goes through).
  std::optional<statefulset_hold::Answer> AskHold(const statefulset_hold::PodFacts& facts) const;
  // inplace_webhook_loop_status_polls_total{result="alive|no_loop|error"},
  // inplace_webhook_hold_questions_total{answer="hold|release|error"}.
  void RenderMetrics(std::string& out) const;

 private:
  void Run();
  struct PlainAnswer {
    int status = 0;
    std::string body;
  };
  // One plain HTTP GET of `path` on the url's host and port: the status and body (at most 4 KiB
  // read), or nullopt (no answer in `timeout`, or not HTTP).
  std::optional<PlainAnswer> Get(const std::string& path, std::chrono::milliseconds timeout) const;
  // One GET: the parsed answer, or nullopt (no answer, or not one of /loopz's).
  std::optional<bool> PollOnce() const;

  Options options_;
  std::string host_, port_, path_, holdPath_ = "/holdz";
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<loop_signal::Clock::time_point> lastAlive_;
  std::atomic<unsigned long long> alive_{0}, noLoop_{0}, errors_{0};
  mutable std::atomic<unsigned long long> holds_{0}, releases_{0}, holdErrors_{0};
  std::thread thread_;
};

}  // namespace iw::server
