// The Kubernetes API client: iw::kube::Api over HTTP(S) with cpp-httplib, plus watches. Its
// configuration (client_config.h), rate limiter (rate_limiter.h), token file (token_file.h),
// watch stream and WatchFrom (watch_stream.h) and backoff (backoff.h) each have a file of their
// own; this header includes them.
//
// Behaviour a caller relies on (client-go's rest client is the reference):
// - Every call has a connect timeout and a read/write inactivity timeout; a watch's read timeout
//   is its server-side `timeoutSeconds` plus a margin.
// - Retries with exponential backoff and jitter, honouring `Retry-After` (integer seconds, capped):
//   * GET and LIST: on network errors, 429 and 5xx except 501.
//   * writes (POST, PUT, PATCH, DELETE): only when the request cannot have been applied: the
//     connection could not be opened (connect/TLS handshake failure), a 429 (rejected before
//     execution by max-in-flight or priority-and-fairness), or a 5xx that carries `Retry-After`
//     (the server asks for a retry; client-go retries every verb on such answers). A 500/504
//     without it may have been applied, so it comes back to the caller; writes that carry a
//     resourceVersion make a blind retry harmless anyway, the others must not be repeated.
//   * never any other 4xx. A 401 re-reads the token file and, if the token changed, repeats the
//     call once (the server rejected it at authentication, nothing ran).
// - A client-side token bucket (ClientConfig::qps / burst) limits every attempt, retries included.
// - Results: API errors as the metav1.Status code/reason/message, transport errors as code 0 with
//   a message; never an exception.
// - Idle keep-alive connections are pooled.
//
// Thread safety: a Client's calls, Shutdown() and its metrics from any thread, concurrently; a
// call blocks its caller (rate-limit and retry sleeps included), and a page or watch handler runs
// on the calling thread. A watch is cancelled from any thread through its stop token. A
// DeadlineScope is per thread: it governs the calls of the thread that made it, which must also
// destroy it. A watchdog thread, started by the constructor and joined by the destructor, shuts
// down connections past their deadline (`cutMu_` guards the attempts in flight); `poolMu_` guards
// the idle connections, `countMu_` the call counts, `shutdownMu_` the shutdown flag. Shutdown()
// ends retry sleeps at once and fails later calls; an attempt, a rate-limit wait or a watch under
// way runs on (a watch until its stop token). No call may be in progress when the Client is
// destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "hooks/kube_api.h"
#include "server/kube/client_config.h"
#include "server/kube/rate_limiter.h"
#include "server/kube/token_file.h"
#include "server/kube/watch_stream.h"
// Not needed by the declarations below: included so that this header still declares Backoff,
// ErrorResult and QueryEscape for its users, as it did before they moved to these files.
#include "lib/query_string.h"
#include "server/kube/backoff.h"
#include "server/kube/error_result.h"

namespace httplib {
class ClientImpl;
}

namespace iw::kube {

// Called once per page of a paged LIST with that page's list object (its items and metadata:
// resourceVersion, continue); the page is freed when it returns, before the next is fetched.
// `restart` is true on the first page, and again when the list starts over (an expired continue
// token): what earlier pages gave is then to be discarded. Return false to stop the list.
using PageHandler = std::function<bool(json::Document& page, bool restart)>;

// The API surface plus watches: what the informer needs (tests may fake it).
class WatchApi : public Api {
 public:
  // A LIST delivered page by page (limit + continue, as client-go's pager), so that no more than
  // one page of whole objects is held at once. The result carries the code (200 when every page
  // was handled) or the error; its object is empty. A handler returning false ends it with code
  // 0 and reason "Stopped". This default hands List()'s concatenated answer over as one page.
  virtual Result ListPages(std::string_view path, const ListOptions& options,
                           const PageHandler& page);
  virtual WatchResult Watch(std::string_view path, const WatchOptions& options,
                            const WatchHandler& handler, std::stop_token stop) = 0;
};

// API calls counted by verb (get, list, watch, create, update, patch, delete) and HTTP code
// (0 = no answer). Every attempt counts, retries included.
struct CallCount {
  std::string verb;
  int code = 0;
  uint64_t count = 0;
};

// A deadline for the API calls (not watches) this thread makes while the scope lives; scopes nest
// and the earliest deadline wins. Under a deadline a call starts no attempt at or after it (the
// client-side rate limiter included), cuts its retry sleeps to it, asks the API server to give up
// at it (the `timeout` query parameter, as client-go's Request.Timeout), clamps the connect, read
// and write timeouts to it, and shuts its connection down when the deadline passes before the
// answer arrived: the call then returns code 0, reason "Timeout", and the API server sees the
// client gone (its request context is cancelled). The leader's write fence is built on this
// (server/loop/leader_election.h).
class DeadlineScope {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit DeadlineScope(TimePoint deadline);
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;
  // The deadline in force on this thread, if any.
  static std::optional<TimePoint> Current();

 private:
  std::optional<TimePoint> previous_;
};

class Client : public WatchApi {
 public:
  explicit Client(ClientConfig config);
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result Get(std::string_view path) override;
  // All pages concatenated (ListPages collecting them).
  Result List(std::string_view path, const ListOptions& options) override;
  // `limit` per page; an expired continue token (410) starts the list over, still paged, on a
  // new snapshot; a second expiry within the call lists once without `limit` (client-go's pager
  // falls back to that at once, which holds the whole list in memory: here the last resort).
  Result ListPages(std::string_view path, const ListOptions& options,
                   const PageHandler& page) override;
  Result Create(std::string_view path, const json::Value& object) override;
  Result Update(std::string_view path, const json::Value& object) override;
  Result Patch(std::string_view path, PatchType type, std::string_view body) override;
  Result Delete(std::string_view path) override;

  // One watch request: delivers events until the server ends the stream, an ERROR event, a
  // transport error, the handler returning false, or `stop`. Not retried (see WatchFrom).
  // Defined in watch_stream.cpp, with the steps of reading the stream.
  WatchResult Watch(std::string_view path, const WatchOptions& options, const WatchHandler& handler,
                    std::stop_token stop) override;

  // Makes retry sleeps return at once and fails later calls (process shutdown).
  void Shutdown();

  const ClientConfig& Config() const { return config_; }

  std::vector<CallCount> CallCounts() const;
  uint64_t Retries() const { return retries_.load(); }
  // Appends Prometheus text lines: inplace_webhook_kube_api_requests_total{verb,code},
  // inplace_webhook_kube_api_retries_total, inplace_webhook_kube_api_rate_limit_wait_seconds_total.
  void RenderMetrics(std::string& out) const;

 private:
  struct Request;
  Result Do(const Request& request);
  std::unique_ptr<httplib::ClientImpl> NewConnection(std::chrono::milliseconds readTimeout) const;
  std::unique_ptr<httplib::ClientImpl> Acquire();
  void Release(std::unique_ptr<httplib::ClientImpl> connection);
  void Count(std::string_view verb, int code);
  void Throttle();
  // Whether Shutdown() was called.
  bool IsShutDown();
  // Sleeps `delay` unless Shutdown() is called; returns false when shut down.
  bool Sleep(std::chrono::milliseconds delay);
  // The deadline watchdog: shuts down the connections of attempts whose deadline passed.
  struct InFlight;
  std::list<InFlight>::iterator Watch(httplib::ClientImpl* connection,
                                      std::chrono::steady_clock::time_point deadline);
  // Forgets the attempt; true when the watchdog cut its connection.
  bool Unwatch(std::list<InFlight>::iterator it);
  void RunWatchdog();
  std::string Target(std::string_view path, std::string_view query) const;

  const ClientConfig config_;
  TokenFile token_;
  RateLimiter limiter_;

  std::mutex poolMu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_;

  mutable std::mutex countMu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> throttledNanos_{0};

  std::mutex shutdownMu_;
  std::condition_variable shutdownCv_;
  bool shutdown_ = false;

  std::mutex cutMu_;
  std::condition_variable cutCv_;
  std::list<InFlight> inFlight_;
  bool watchdogStop_ = false;
  std::thread watchdog_;  // last member: started in the constructor, joined in the destructor
};

}  // namespace iw::kube
