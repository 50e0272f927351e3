// The Kubernetes API client: iw::kube::Api over HTTP(S) with cpp-httplib, plus watches.
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
// destroyed. RateLimiter and TokenFile are thread-safe; a JsonStreamSplitter serves one stream.
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
#include "lib/status.h"

namespace httplib {
class ClientImpl;
}

namespace iw::kube {

// Directory of the mounted service-account credentials in a pod.
inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

// "inplace-webhook/<version>" (IW_VERSION when the build defines it).
std::string DefaultUserAgent();

struct ClientConfig {
  std::string scheme = "https";  // "http" or "https"
  std::string host;              // name or IP (IPv6 without brackets)
  int port = 443;
  std::string basePath;       // prefix of every request path ("" or e.g. "/k8s/clusters/c-1")
  std::string tokenFile;      // bearer token, re-read as it rotates; empty: no Authorization header
  std::string caFile;         // https: CA bundle to verify the server; empty: the system store
  std::string namespaceName;  // in-cluster: the pod's namespace (service-account file), else ""
  std::string userAgent = DefaultUserAgent();

  // Client-side rate limit (token bucket; qps <= 0 disables it). client-go's 5/10 is meant for
  // kubectl-like tools: a controller that starts several informers, renews a Lease every few
  // seconds and patches pods in bursts during a rollout would queue behind it, and the API
  // server already protects itself with priority and fairness. 50/100 keeps a runaway loop from
  // flooding the server while never being the bottleneck of a normal rollout.
  double qps = 50;
  int burst = 100;

  std::chrono::milliseconds connectTimeout{5000};
  std::chrono::milliseconds requestTimeout{30000};  // read/write inactivity of one attempt
  int maxRetries = 5;                               // attempts after the first
  std::chrono::milliseconds retryBaseDelay{200};    // first backoff; doubles per attempt
  std::chrono::milliseconds retryMaxDelay{8000};    // backoff cap
  std::chrono::seconds maxRetryAfter{30};           // cap on a server's Retry-After
  std::chrono::milliseconds tokenRecheck{5000};     // token file stat() at most this often
  size_t maxIdleConnections = 8;

  // In a pod: KUBERNETES_SERVICE_HOST/PORT, and ca.crt, token and namespace from
  // kServiceAccountDir. Failure: InvalidArgument when the variables are unset, empty or not a
  // host and port; IOError when the token cannot be read or is empty, or the CA bundle cannot be
  // read (the namespace file is optional).
  static StatusOr<ClientConfig> InCluster();
  // The same from explicit values (tests).
  static StatusOr<ClientConfig> InClusterFrom(std::string_view host, std::string_view port,
                                              std::string_view serviceAccountDir);
  // `url` is http://HOST[:PORT][/prefix] or https://...; `tokenFile` and `caFile` may be empty.
  // Failure: InvalidArgument when `url` is not such a URL or a CA file is given for http://;
  // IOError when a given file cannot be read. The message names the flag (--api-server,
  // --token-file, --certificate-authority).
  static StatusOr<ClientConfig> FromUrl(std::string_view url, std::string_view tokenFile,
                                        std::string_view caFile);

  // "https://host:port" (brackets around IPv6, no basePath), for logs.
  std::string Url() const;
};

// One watch event: type ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and its object (a
// metav1.Status for ERROR).
struct WatchEvent {
  std::string type;
  json::Document object;
};

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;  // start after this version ("" = server's choice)
  int timeoutSeconds = 300;     // the server ends the watch after this long
  bool allowBookmarks = true;
};

// The outcome of one watch request.
struct WatchResult {
  int code = 0;  // 200 when the stream ended normally; the Status code of an HTTP error or of an
                 // ERROR event (410 = the resourceVersion is too old: relist); 0 on transport error
  std::string reason;
  std::string message;
  bool stopped = false;  // the stop token fired or the handler returned false
  size_t events = 0;     // events delivered to the handler (bookmarks included)

  bool Ok() const { return code == 200; }
  bool Gone() const { return code == 410; }
};

// Called once per event (not for ERROR: that ends the watch with its Status in WatchResult).
// Return false to end the watch.
using WatchHandler = std::function<bool(WatchEvent&)>;

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
// (server/leader_election.h).
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

// Blocking token bucket: `qps` tokens a second, at most `burst` stored. Thread-safe.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst);
  // Takes one token, sleeping until one is available; returns the time waited.
  std::chrono::nanoseconds Acquire();

 private:
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point last_;
};

// A bearer token read from a file, re-read when the file's inode, size or mtime changed (checked
// at most every `recheck`, or on Reload). A read error keeps the previous token. Thread-safe.
class TokenFile {
 public:
  TokenFile(std::string path, std::chrono::milliseconds recheck);
  // The current token ("" when the file was never readable).
  std::string Token();
  // Stats the file now and re-reads it if it changed; returns whether the token changed.
  bool Reload();

 private:
  bool ReloadLocked();

  const std::string path_;
  const std::chrono::milliseconds recheck_;
  std::mutex mu_;
  std::string token_;
  std::chrono::steady_clock::time_point checked_{};
  uint64_t inode_ = 0, size_ = 0;
  int64_t mtimeNs_ = -1;
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

// Watches `path` starting after `resourceVersion` and keeps watching: after a normal end of the
// stream it resumes from the last resourceVersion seen (events and bookmarks move it, so it is
// updated in place), after other errors it backs off (exponential with jitter, `backoffInitial`
// up to `backoffMax`) and resumes. Each watch asks for a timeout in [t, 2t) with t =
// options.timeoutSeconds (client-go spreads reconnects the same way). Returns on `stop`, when the
// handler returns false, or when the resourceVersion is gone (HTTP 410 or an ERROR event with
// code 410: result.Gone(); the caller must relist).
WatchResult WatchFrom(WatchApi& api, std::string_view path, WatchOptions options,
                      std::string& resourceVersion, const WatchHandler& handler,
                      std::stop_token stop,
                      std::chrono::milliseconds backoffInitial = std::chrono::milliseconds(800),
                      std::chrono::milliseconds backoffMax = std::chrono::seconds(30));

// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string QueryEscape(std::string_view value);

// Maps an HTTP error answer to a Result: the metav1.Status fields when `body` is one, else a
// reason derived from the code (NotFound, Conflict, ...) and the body text (shortened).
Result ErrorResult(int code, std::string_view body);

// Splits a watch stream into its top-level JSON values (objects separated by newlines or by
// nothing at all), across arbitrary chunk boundaries.
class JsonStreamSplitter {
 public:
  explicit JsonStreamSplitter(size_t maxValueBytes) : max_(maxValueBytes) {}
  // Appends `data`; calls `value` for every complete value (return false to stop). Returns false
  // when stopped or when a value exceeds the limit (error() says which).
  bool Feed(std::string_view data, const std::function<bool(std::string_view)>& value);
  const std::string& error() const { return error_; }

 private:
  const size_t max_;
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ already scanned
  int depth_ = 0;
  bool inString_ = false;
  bool escaped_ = false;
  std::string error_;
};

// A duration to wait before retry `attempt` (0-based): base * 2^attempt capped at `max`, then
// jittered into [d/2, d].
std::chrono::milliseconds Backoff(int attempt, std::chrono::milliseconds base,
                                  std::chrono::milliseconds max);

}  // namespace iw::kube
