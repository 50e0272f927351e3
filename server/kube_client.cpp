#include "server/kube_client.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "server/log.h"

#ifndef IW_VERSION
#define IW_VERSION "0.1.0"
#endif

namespace iw::kube {

namespace {

using Clock = std::chrono::steady_clock;

// Largest single watch event accepted (etcd caps objects at 1.5 MiB; JSON framing adds little).
constexpr size_t kMaxWatchEventBytes = 16u << 20;
// Largest error body kept from a failed watch request.
constexpr size_t kMaxErrorBody = 1u << 20;
// Read-timeout margin of a watch beyond its server-side timeoutSeconds.
constexpr auto kWatchReadMargin = std::chrono::seconds(30);

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

std::optional<int> ParsePort(std::string_view text) {
  int port = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || p != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

// The Status reason for an answer that carried none: client-go says Unknown for codes without one.
std::string ReasonForCode(int code) {
  std::string_view known = kube::StatusReason(code);
  return std::string(known.empty() ? "Unknown" : known);
}

// Seconds of a Retry-After header (integer form only, as client-go), or nullopt.
std::optional<int> RetryAfterSeconds(const httplib::Response& res) {
  if (!res.has_header("Retry-After")) return std::nullopt;
  std::string v = Trim(res.get_header_value("Retry-After"));
  int seconds = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc() || p != v.data() + v.size() || seconds < 0) return std::nullopt;
  return seconds;
}

// The connection was never established, so the request cannot have reached the server.
bool NotSent(httplib::Error error) {
  return error == httplib::Error::Connection || error == httplib::Error::SSLConnection ||
         error == httplib::Error::ConnectionTimeout;
}

// Errors that repeat identically on every attempt.
bool Permanent(httplib::Error error) {
  return error == httplib::Error::SSLServerVerification ||
         error == httplib::Error::SSLLoadingCerts || error == httplib::Error::BindIPAddress;
}

// A transport error in words, with httplib's name for it.
std::string Describe(httplib::Error error) {
  std::string_view what;
  switch (error) {
    case httplib::Error::Connection:
      what = "could not connect";
      break;
    case httplib::Error::ConnectionTimeout:
      what = "connect timed out";
      break;
    case httplib::Error::Read:
      what = "read failed or timed out";
      break;
    case httplib::Error::Write:
      what = "write failed or timed out";
      break;
    case httplib::Error::SSLConnection:
      what = "TLS handshake failed";
      break;
    case httplib::Error::SSLLoadingCerts:
      what = "cannot load the CA bundle";
      break;
    case httplib::Error::SSLServerVerification:
      what = "the server certificate did not verify against the CA bundle";
      break;
    case httplib::Error::Canceled:
      what = "canceled";
      break;
    default:
      what = "transport error";
      break;
  }
  return std::string(what) + " (" + httplib::to_string(error) + ")";
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// Sleeps `delay` unless `stop` fires; returns false when stopped.
bool SleepUnlessStopped(std::chrono::milliseconds delay, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

void AppendQuery(std::string& q, std::string_view key, std::string_view value) {
  if (!q.empty()) q += '&';
  q += key;
  q += '=';
  q += QueryEscape(value);
}

}  // namespace

std::string DefaultUserAgent() {
  return std::string("inplace-webhook/") + IW_VERSION;
}

// ---------------------------------------------------------------------------------------------
// Configuration

StatusOr<ClientConfig> ClientConfig::InCluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Status::InvalidArgument(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(or pass --api-server)");
  }
  return InClusterFrom(host, port, kServiceAccountDir);
}

StatusOr<ClientConfig> ClientConfig::InClusterFrom(std::string_view host, std::string_view port,
                                                   std::string_view serviceAccountDir) {
  ClientConfig c;
  c.scheme = "https";
  c.host = std::string(host);
  if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']') {
    c.host = c.host.substr(1, c.host.size() - 2);
  }
  if (c.host.empty()) {
    return Status::InvalidArgument("KUBERNETES_SERVICE_HOST is empty");
  }
  auto p = ParsePort(port);
  if (!p) {
    return Status::InvalidArgument("KUBERNETES_SERVICE_PORT is not a port number: " +
                                   std::string(port));
  }
  c.port = *p;
  std::string dir(serviceAccountDir);
  c.tokenFile = dir + "/token";
  c.caFile = dir + "/ca.crt";
  auto token = ReadFile(c.tokenFile);
  if (!token || Trim(*token).empty()) {
    return Status::IOError("cannot read the service-account token " + c.tokenFile);
  }
  if (!ReadFile(c.caFile)) {
    return Status::IOError("cannot read the service-account CA bundle " + c.caFile);
  }
  if (auto ns = ReadFile(dir + "/namespace")) c.namespaceName = Trim(*ns);
  return c;
}

StatusOr<ClientConfig> ClientConfig::FromUrl(std::string_view url, std::string_view tokenFile,
                                             std::string_view caFile) {
  ClientConfig c;
  std::string_view rest;
  if (url.starts_with("https://")) {
    c.scheme = "https";
    c.port = 443;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    c.scheme = "http";
    c.port = 80;
    rest = url.substr(7);
  } else {
    return Status::InvalidArgument("--api-server must start with http:// or https://: " +
                                   std::string(url));
  }
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos) {
    return Status::InvalidArgument("--api-server must not have a query or fragment: " +
                                   std::string(url));
  }
  std::string_view portText;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("--api-server has an unterminated IPv6 address: " +
                                     std::string(url));
    }
    c.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return Status::InvalidArgument("--api-server has junk after the IPv6 address: " +
                                       std::string(url));
      }
      portText = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    c.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) portText = authority.substr(colon + 1);
  }
  if (c.host.empty() || c.host.find('@') != std::string::npos) {
    return Status::InvalidArgument("--api-server has no usable host: " + std::string(url));
  }
  if (!portText.empty() || authority.ends_with(":")) {
    auto p = ParsePort(portText);
    if (!p) {
      return Status::InvalidArgument("--api-server has an invalid port: " + std::string(url));
    }
    c.port = *p;
  }
  while (path.ends_with("/")) path.remove_suffix(1);
  c.basePath = std::string(path);
  c.tokenFile = std::string(tokenFile);
  c.caFile = std::string(caFile);
  if (!c.tokenFile.empty() && !ReadFile(c.tokenFile)) {
    return Status::IOError("cannot read --token-file " + c.tokenFile);
  }
  if (!c.caFile.empty()) {
    if (c.scheme != "https") {
      return Status::InvalidArgument("--certificate-authority needs an https:// --api-server");
    }
    if (!ReadFile(c.caFile)) {
      return Status::IOError("cannot read --certificate-authority " + c.caFile);
    }
  }
  return c;
}

std::string ClientConfig::Url() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + ":" + std::to_string(port);
}

// ---------------------------------------------------------------------------------------------
// Small pieces

std::string QueryEscape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result ErrorResult(int code, std::string_view body) {
  Result r;
  r.code = code;
  json::Document d;
  if (!body.empty() && json::ParseUntrusted(body, d).ok() && d.IsObject() &&
      json::StringOr(&d, "kind") == "Status") {
    r.reason = std::string(json::StringOr(&d, "reason"));
    r.message = std::string(json::StringOr(&d, "message"));
    r.object.Swap(d);
  }
  if (r.reason.empty()) r.reason = ReasonForCode(code);
  if (r.message.empty()) {
    std::string text = Trim(body.substr(0, 512));
    r.message = text.empty() ? "the server responded with the status code " + std::to_string(code) +
                                   " but did not return more information"
                             : text;
  }
  return r;
}

std::chrono::milliseconds Backoff(int attempt, std::chrono::milliseconds base,
                                  std::chrono::milliseconds max) {
  if (base.count() <= 0) return std::chrono::milliseconds(0);
  int64_t d = base.count();
  for (int i = 0; i < attempt && d < max.count(); ++i) d *= 2;
  d = std::min<int64_t>(d, std::max<int64_t>(max.count(), base.count()));
  std::uniform_int_distribution<int64_t> jitter(d / 2, d);
  return std::chrono::milliseconds(jitter(Rng()));
}

bool JsonStreamSplitter::Feed(std::string_view data,
                              const std::function<bool(std::string_view)>& value) {
  if (!error_.empty()) return false;
  buffer_.append(data);
  size_t start = depth_ > 0 || inString_ ? 0 : std::string::npos;  // open value starts at 0
  size_t consumed = 0;
  bool keepGoing = true;
  size_t i = scanned_;
  for (; i < buffer_.size() && keepGoing; ++i) {
    char c = buffer_[i];
    if (inString_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        inString_ = false;
      }
      continue;
    }
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        consumed = i + 1;
        continue;
      }
      if (c != '{' && c != '[') {
        error_ = "unexpected character in the watch stream at byte " + std::to_string(i);
        return false;
      }
      start = i;
    }
    switch (c) {
      case '"':
        inString_ = true;
        break;
      case '{':
      case '[':
        ++depth_;
        break;
      case '}':
      case ']':
        if (--depth_ == 0) {
          keepGoing = value(std::string_view(buffer_).substr(start, i + 1 - start));
          consumed = i + 1;
          start = std::string::npos;
        }
        break;
      default:
        break;
    }
  }
  if (!keepGoing) {
    // Stopped: drop what was delivered; the rest stays for a later Feed.
    buffer_.erase(0, consumed);
    scanned_ = 0;
    depth_ = 0;
    inString_ = escaped_ = false;
    return false;
  }
  buffer_.erase(0, consumed);
  scanned_ = buffer_.size();
  if (buffer_.size() > max_) {
    error_ = "a watch event is larger than " + std::to_string(max_) + " bytes";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// RateLimiter, TokenFile

RateLimiter::RateLimiter(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(Clock::now()) {}

std::chrono::nanoseconds RateLimiter::Acquire() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  std::chrono::nanoseconds wait(0);
  {
    std::lock_guard lock(mu_);
    auto now = Clock::now();
    double elapsed = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    tokens_ -= 1;  // reserve; a negative balance is the queue of waiters
    if (tokens_ < 0) {
      wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(-tokens_ / qps_));
    }
  }
  if (wait.count() > 0) std::this_thread::sleep_for(wait);
  return wait;
}

TokenFile::TokenFile(std::string path, std::chrono::milliseconds recheck)
    : path_(std::move(path)), recheck_(recheck) {}

std::string TokenFile::Token() {
  if (path_.empty()) return {};
  std::lock_guard lock(mu_);
  auto now = Clock::now();
  if (checked_ == Clock::time_point{} || now - checked_ >= recheck_) ReloadLocked();
  return token_;
}

bool TokenFile::Reload() {
  if (path_.empty()) return false;
  std::lock_guard lock(mu_);
  return ReloadLocked();
}

bool TokenFile::ReloadLocked() {
  checked_ = Clock::now();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    log::Warn("cannot stat the token file; keeping the previous token", {{"path", path_}});
    return false;
  }
  int64_t mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_ino) == inode_ && static_cast<uint64_t>(st.st_size) == size_ &&
      mtimeNs == mtimeNs_) {
    return false;
  }
  auto text = ReadFile(path_);
  std::string token = text ? Trim(*text) : std::string();
  if (token.empty()) {
    log::Warn("cannot read the token file or it is empty; keeping the previous token",
              {{"path", path_}});
    return false;
  }
  inode_ = static_cast<uint64_t>(st.st_ino);
  size_ = static_cast<uint64_t>(st.st_size);
  mtimeNs_ = mtimeNs;
  bool changed = token != token_;
  if (changed && !token_.empty()) log::Info("API token reloaded", {{"path", path_}});
  token_ = std::move(token);
  return changed;
}

// ---------------------------------------------------------------------------------------------
// Client

namespace {
thread_local std::optional<DeadlineScope::TimePoint> tCallDeadline;
}  // namespace

DeadlineScope::DeadlineScope(TimePoint deadline) : previous_(tCallDeadline) {
  tCallDeadline = previous_ ? std::min(*previous_, deadline) : deadline;
}

DeadlineScope::~DeadlineScope() {
  tCallDeadline = previous_;
}

std::optional<DeadlineScope::TimePoint> DeadlineScope::Current() {
  return tCallDeadline;
}

struct Client::InFlight {
  httplib::ClientImpl* connection;
  Clock::time_point deadline;
  bool cut = false;
};

struct Client::Request {
  std::string_view verb;  // metrics: get, list, create, update, patch, delete
  std::string method;
  std::string target;
  std::string body;
  std::string_view contentType;
  bool idempotent = false;
};

Client::Client(ClientConfig config)
    : config_(std::move(config)),
      token_(config_.tokenFile, config_.tokenRecheck),
      limiter_(config_.qps, config_.burst),
      watchdog_(&Client::RunWatchdog, this) {}

Client::~Client() {
  Shutdown();
  {
    std::lock_guard lock(cutMu_);
    watchdogStop_ = true;
  }
  cutCv_.notify_all();
  watchdog_.join();
}

std::list<Client::InFlight>::iterator Client::Watch(httplib::ClientImpl* connection,
                                                    Clock::time_point deadline) {
  std::lock_guard lock(cutMu_);
  auto it = inFlight_.insert(inFlight_.end(), InFlight{connection, deadline});
  cutCv_.notify_all();
  return it;
}

bool Client::Unwatch(std::list<InFlight>::iterator it) {
  std::lock_guard lock(cutMu_);
  bool cut = it->cut;
  inFlight_.erase(it);
  return cut;
}

void Client::RunWatchdog() {
  std::unique_lock lock(cutMu_);
  while (!watchdogStop_) {
    std::optional<Clock::time_point> next;
    const Clock::time_point now = Clock::now();
    for (InFlight& f : inFlight_) {
      if (f.cut) continue;
      if (f.deadline <= now) {
        // Thread-safe in httplib: with a request in flight it only shuts the socket down, so the
        // sending thread's read or write fails at once.
        f.connection->stop();
        f.cut = true;
      } else if (!next || f.deadline < *next) {
        next = f.deadline;
      }
    }
    if (next) {
      cutCv_.wait_until(lock, *next);
    } else {
      cutCv_.wait(lock);
    }
  }
}

void Client::Shutdown() {
  {
    std::lock_guard lock(shutdownMu_);
    shutdown_ = true;
  }
  shutdownCv_.notify_all();
}

bool Client::Sleep(std::chrono::milliseconds delay) {
  std::unique_lock lock(shutdownMu_);
  return !shutdownCv_.wait_for(lock, delay, [this] { return shutdown_; });
}

std::string Client::Target(std::string_view path, std::string_view query) const {
  std::string t = config_.basePath;
  t += path;
  if (!query.empty()) {
    t += '?';
    t += query;
  }
  return t;
}

std::unique_ptr<httplib::ClientImpl> Client::NewConnection(
    std::chrono::milliseconds readTimeout) const {
  std::unique_ptr<httplib::ClientImpl> c;
  if (config_.scheme == "https") {
    auto s = std::make_unique<httplib::SSLClient>(config_.host, config_.port);
    if (!config_.caFile.empty()) s->set_ca_cert_path(config_.caFile);
    s->enable_server_certificate_verification(true);
    c = std::move(s);
  } else {
    c = std::make_unique<httplib::ClientImpl>(config_.host, config_.port);
  }
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_url_encode(false);
  c->set_follow_location(false);
  c->set_connection_timeout(config_.connectTimeout);
  c->set_read_timeout(readTimeout);
  c->set_write_timeout(config_.requestTimeout);
  return c;
}

std::unique_ptr<httplib::ClientImpl> Client::Acquire() {
  {
    std::lock_guard lock(poolMu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return NewConnection(config_.requestTimeout);
}

void Client::Release(std::unique_ptr<httplib::ClientImpl> connection) {
  std::lock_guard lock(poolMu_);
  if (idle_.size() < config_.maxIdleConnections) idle_.push_back(std::move(connection));
}

void Client::Count(std::string_view verb, int code) {
  std::lock_guard lock(countMu_);
  ++counts_[{std::string(verb), code}];
}

void Client::Throttle() {
  auto waited = limiter_.Acquire();
  throttledNanos_ += static_cast<uint64_t>(waited.count());
  if (waited > std::chrono::seconds(1)) {
    log::Info("waited for client-side throttling",
              {{"seconds", std::to_string(std::chrono::duration<double>(waited).count())}});
  }
}

std::vector<CallCount> Client::CallCounts() const {
  std::lock_guard lock(countMu_);
  std::vector<CallCount> out;
  out.reserve(counts_.size());
  for (const auto& [key, n] : counts_) out.push_back({key.first, key.second, n});
  return out;
}

void Client::RenderMetrics(std::string& out) const {
  out +=
      "# HELP inplace_webhook_kube_api_requests_total Kubernetes API requests by verb and HTTP "
      "code (0: no answer), retries included.\n"
      "# TYPE inplace_webhook_kube_api_requests_total counter\n";
  for (const auto& c : CallCounts()) {
    out += "inplace_webhook_kube_api_requests_total{verb=\"" + c.verb + "\",code=\"" +
           std::to_string(c.code) + "\"} " + std::to_string(c.count) + "\n";
  }
  out +=
      "# HELP inplace_webhook_kube_api_retries_total Kubernetes API request attempts repeated "
      "after an error.\n"
      "# TYPE inplace_webhook_kube_api_retries_total counter\n"
      "inplace_webhook_kube_api_retries_total " +
      std::to_string(retries_.load()) +
      "\n"
      "# HELP inplace_webhook_kube_api_rate_limit_wait_seconds_total Time spent waiting for the "
      "client-side rate limiter.\n"
      "# TYPE inplace_webhook_kube_api_rate_limit_wait_seconds_total counter\n"
      "inplace_webhook_kube_api_rate_limit_wait_seconds_total " +
      std::to_string(static_cast<double>(throttledNanos_.load()) / 1e9) + "\n";
}

Result Client::Do(const Request& rq) {
  bool tokenRetried = false;
  const std::optional<Clock::time_point> deadline = DeadlineScope::Current();
  auto timedOut = [&](std::string_view when) {
    Count(rq.verb, 0);
    Result r;
    r.reason = "Timeout";
    r.message = rq.method + " " + rq.target + ": the call's deadline passed " + std::string(when);
    return r;
  };
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard lock(shutdownMu_);
      if (shutdown_) {
        Result r;
        r.reason = "ShuttingDown";
        r.message = "the API client is shut down";
        return r;
      }
    }
    Throttle();
    std::chrono::milliseconds remaining{0};
    if (deadline) {
      remaining = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
      if (remaining.count() <= 0) return timedOut("before the request was sent");
    }
    auto conn = Acquire();
    httplib::Request req;
    req.method = rq.method;
    req.path = rq.target;
    if (deadline) {
      // The API server gives up at the deadline too (it parses a Go duration).
      req.path += rq.target.find('?') == std::string::npos ? '?' : '&';
      req.path += "timeout=" + std::to_string(remaining.count()) + "ms";
      conn->set_connection_timeout(std::min(config_.connectTimeout, remaining));
      conn->set_read_timeout(std::min(config_.requestTimeout, remaining));
      conn->set_write_timeout(std::min(config_.requestTimeout, remaining));
    }
    req.headers = {{"Accept", "application/json"}, {"User-Agent", config_.userAgent}};
    if (std::string token = token_.Token(); !token.empty()) {
      req.headers.emplace("Authorization", "Bearer " + token);
    }
    if (!rq.contentType.empty()) req.headers.emplace("Content-Type", std::string(rq.contentType));
    req.body = rq.body;
    bool cut = false;
    httplib::Result res = [&] {
      if (!deadline) return conn->send(req);
      auto watched = Watch(conn.get(), *deadline);
      httplib::Result sent = conn->send(req);
      cut = Unwatch(watched);
      // A pooled connection goes back with the client's own timeouts.
      conn->set_connection_timeout(config_.connectTimeout);
      conn->set_read_timeout(config_.requestTimeout);
      conn->set_write_timeout(config_.requestTimeout);
      return sent;
    }();
    if (cut || (!res && deadline && Clock::now() >= *deadline)) {
      return timedOut("before the answer arrived (connection shut down)");
    }

    std::chrono::milliseconds delay{0};
    if (!res) {
      httplib::Error err = res.error();
      Count(rq.verb, 0);
      // The connection is in an unknown state: drop it.
      Result r;
      r.reason = "TransportError";
      r.message = rq.method + " " + config_.Url() + rq.target + ": " + Describe(err);
      bool retryable = (rq.idempotent || NotSent(err)) && !Permanent(err);
      if (!retryable || attempt >= config_.maxRetries) return r;
      delay = Backoff(attempt, config_.retryBaseDelay, config_.retryMaxDelay);
      log::Warn("API request failed, retrying", {{"method", rq.method},
                                                 {"path", rq.target},
                                                 {"error", Describe(err)},
                                                 {"attempt", std::to_string(attempt + 1)},
                                                 {"delayMs", std::to_string(delay.count())}});
    } else {
      int code = res->status;
      Count(rq.verb, code);
      std::optional<int> retryAfter = RetryAfterSeconds(*res);
      std::string body = std::move(res->body);
      bool close = res->get_header_value("Connection") == "close";
      if (!close) Release(std::move(conn));
      if (code >= 200 && code < 300) {
        Result r;
        r.code = code;
        if (!body.empty()) {
          if (Status err = json::ParseUntrusted(body, r.object); !err.ok()) {
            r.code = 0;
            r.reason = "InvalidResponse";
            r.message = rq.method + " " + rq.target + ": undecodable answer (HTTP " +
                        std::to_string(code) + "): " + err.message();
            r.object.SetNull();
          }
        }
        return r;
      }
      if (code == 401 && !tokenRetried && token_.Reload()) {
        // Rejected at authentication with a token that has since rotated: nothing ran.
        tokenRetried = true;
        --attempt;
        continue;
      }
      bool retryable =
          code == 429 || (code >= 500 && code != 501 && (rq.idempotent || retryAfter.has_value()));
      if (!retryable || attempt >= config_.maxRetries) return ErrorResult(code, body);
      if (retryAfter) {
        delay = std::min<std::chrono::milliseconds>(std::chrono::seconds(*retryAfter),
                                                    config_.maxRetryAfter);
      } else {
        delay = Backoff(attempt, config_.retryBaseDelay, config_.retryMaxDelay);
      }
      log::Warn("API request answered with a retryable error, retrying",
                {{"method", rq.method},
                 {"path", rq.target},
                 {"code", std::to_string(code)},
                 {"attempt", std::to_string(attempt + 1)},
                 {"delayMs", std::to_string(delay.count())}});
    }
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (delay >= left) return timedOut("before the retry was due");
    }
    ++retries_;
    if (!Sleep(delay)) {
      Result r;
      r.reason = "ShuttingDown";
      r.message = "the API client is shut down";
      return r;
    }
  }
}

Result Client::Get(std::string_view path) {
  return Do({"get", "GET", Target(path, {}), {}, {}, true});
}

Result WatchApi::ListPages(std::string_view path, const ListOptions& options,
                           const PageHandler& page) {
  Result r = List(path, options);
  if (!r.Ok()) return r;
  if (!page(r.object, true)) {
    Result stopped;
    stopped.reason = "Stopped";
    stopped.message = "GET " + std::string(path) + ": stopped by its page handler";
    return stopped;
  }
  r.object.SetNull();
  return r;
}

Result Client::ListPages(std::string_view path, const ListOptions& options,
                         const PageHandler& handler) {
  int limit = options.limit;
  bool restarted = false;
  std::string cont;
  bool first = true;
  for (;;) {
    std::string q;
    if (!options.labelSelector.empty()) AppendQuery(q, "labelSelector", options.labelSelector);
    if (!options.fieldSelector.empty()) AppendQuery(q, "fieldSelector", options.fieldSelector);
    if (limit > 0) AppendQuery(q, "limit", std::to_string(limit));
    if (!cont.empty()) AppendQuery(q, "continue", cont);
    Result page = Do({"list", "GET", Target(path, q), {}, {}, true});
    if (!page.Ok()) {
      if (page.code == 410 && !cont.empty() && limit > 0) {
        // The continue token expired between pages (the snapshot was compacted away): start
        // over on a new snapshot, paged; the second time, at once.
        if (restarted) limit = 0;
        restarted = true;
        log::Info("list continuation expired, listing again",
                  {{"path", std::string(path)}, {"paged", limit > 0 ? "true" : "false"}});
        cont.clear();
        first = true;
        continue;
      }
      return page;
    }
    if (!page.object.IsObject()) {
      Result r;
      r.reason = "InvalidResponse";
      r.message = "GET " + std::string(path) + ": the list answer is not an object";
      return r;
    }
    std::string next(json::StringOr(json::Find(&page.object, "metadata"), "continue"));
    if (!handler(page.object, first)) {
      Result r;
      r.reason = "Stopped";
      r.message = "GET " + std::string(path) + ": stopped by its page handler";
      return r;
    }
    first = false;
    if (next.empty()) break;
    if (next == cont) {
      Result r;
      r.reason = "InvalidResponse";
      r.message = "GET " + std::string(path) + ": the server repeated a continue token";
      return r;
    }
    cont = std::move(next);
  }  // each page's document is freed here, before the next request
  Result done;
  done.code = 200;
  return done;
}

Result Client::List(std::string_view path, const ListOptions& options) {
  Result combined;
  Result r = ListPages(path, options, [&combined](json::Document& page, bool restart) {
    if (restart) {
      combined.object.SetNull();
      combined.object.Swap(page);
      if (!json::Find(&combined.object, "items") ||
          !json::Find(&combined.object, "items")->IsArray()) {
        json::Value empty(rapidjson::kArrayType);
        json::Set(combined.object, "items", empty, combined.object.GetAllocator());
      }
      return true;
    }
    auto& alloc = combined.object.GetAllocator();
    json::Value* items = json::FindMutable(&combined.object, "items");
    if (const json::Value* more = json::Find(&page, "items"); more && more->IsArray()) {
      items->Reserve(items->Size() + more->Size(), alloc);
      for (const auto& item : more->GetArray()) items->PushBack(json::Value(item, alloc), alloc);
    }
    std::string_view rv = json::StringOr(json::Find(&page, "metadata"), "resourceVersion");
    if (!rv.empty()) {
      json::SetString(json::EnsureObject(combined.object, "metadata", alloc), "resourceVersion", rv,
                      alloc);
    }
    return true;
  });
  if (!r.Ok()) return r;
  combined.code = r.code;
  if (json::Value* meta = json::FindMutable(&combined.object, "metadata")) {
    json::Remove(*meta, "continue");
    json::Remove(*meta, "remainingItemCount");
  }
  return combined;
}

Result Client::Create(std::string_view path, const json::Value& object) {
  return Do(
      {"create", "POST", Target(path, {}), json::Serialize(object), "application/json", false});
}

Result Client::Update(std::string_view path, const json::Value& object) {
  return Do(
      {"update", "PUT", Target(path, {}), json::Serialize(object), "application/json", false});
}

Result Client::Patch(std::string_view path, PatchType type, std::string_view body) {
  return Do({"patch", "PATCH", Target(path, {}), std::string(body), ContentType(type), false});
}

Result Client::Delete(std::string_view path) {
  return Do({"delete", "DELETE", Target(path, {}), {}, {}, false});
}

namespace {

// Cancels a blocking watch from another thread by shutting its socket down. The socket is
// captured as a dup()ed descriptor that this object owns, so a late cancel can never hit a
// descriptor number the OS has since handed to somebody else.
struct Canceller {
  std::mutex mu;
  int fd = -1;
  bool cancelled = false;

  void OnSocket(int sock) {
    std::lock_guard lock(mu);
    if (fd >= 0) ::close(fd);
    fd = ::dup(sock);
    if (cancelled) ::shutdown(sock, SHUT_RDWR);
  }
  void Cancel() {
    std::lock_guard lock(mu);
    cancelled = true;
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  void Done() {
    std::lock_guard lock(mu);
    cancelled = true;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

}  // namespace

WatchResult Client::Watch(std::string_view path, const WatchOptions& options,
                          const WatchHandler& handler, std::stop_token stop) {
  WatchResult out;
  if (stop.stop_requested()) {
    out.stopped = true;
    return out;
  }
  {
    std::lock_guard lock(shutdownMu_);
    if (shutdown_) {
      out.reason = "ShuttingDown";
      out.message = "the API client is shut down";
      return out;
    }
  }
  std::string q = "watch=1";
  if (!options.resourceVersion.empty()) {
    AppendQuery(q, "resourceVersion", options.resourceVersion);
  }
  if (options.allowBookmarks) AppendQuery(q, "allowWatchBookmarks", "true");
  if (options.timeoutSeconds > 0) {
    AppendQuery(q, "timeoutSeconds", std::to_string(options.timeoutSeconds));
  }
  if (!options.labelSelector.empty()) AppendQuery(q, "labelSelector", options.labelSelector);
  if (!options.fieldSelector.empty()) AppendQuery(q, "fieldSelector", options.fieldSelector);
  const std::string target = Target(path, q);

  Throttle();
  auto readTimeout = std::max<std::chrono::milliseconds>(
      config_.requestTimeout,
      std::chrono::seconds(std::max(options.timeoutSeconds, 0)) +
          std::chrono::duration_cast<std::chrono::seconds>(kWatchReadMargin));
  Canceller canceller;
  auto conn = NewConnection(readTimeout);
  conn->set_keep_alive(false);
  conn->set_socket_options([&canceller](socket_t sock) { canceller.OnSocket(sock); });
  std::stop_callback onStop(stop, [&canceller] { canceller.Cancel(); });

  httplib::Request req;
  req.method = "GET";
  req.path = target;
  req.headers = {{"Accept", "application/json"}, {"User-Agent", config_.userAgent}};
  if (std::string token = token_.Token(); !token.empty()) {
    req.headers.emplace("Authorization", "Bearer " + token);
  }

  int status = 0;
  std::string errorBody;
  bool handlerStopped = false;
  bool failed = false;  // ERROR event, undecodable event or a throwing handler: `out` says
  JsonStreamSplitter splitter(kMaxWatchEventBytes);

  auto onValue = [&](std::string_view text) -> bool {
    json::Document doc;
    if (Status err = json::ParseUntrusted(text, doc); !err.ok()) {
      out.code = 0;
      out.reason = "InvalidWatchEvent";
      out.message = "undecodable watch event: " + err.message();
      failed = true;
      return false;
    }
    WatchEvent event;
    event.type = std::string(json::StringOr(&doc, "type"));
    json::Value envelope;
    envelope.Swap(doc);  // doc keeps the allocator; the envelope moves out of the root
    if (json::Value* obj = json::FindMutable(&envelope, "object")) {
      static_cast<json::Value&>(doc).Swap(*obj);
    }
    if (event.type == "ERROR") {
      out.code = doc.IsObject() && json::Find(&doc, "code") && doc["code"].IsInt()
                     ? doc["code"].GetInt()
                     : 500;
      out.reason = std::string(json::StringOr(&doc, "reason"));
      out.message = std::string(json::StringOr(&doc, "message"));
      if (out.reason.empty()) out.reason = ReasonForCode(out.code);
      failed = true;
      return false;
    }
    event.object.Swap(doc);
    ++out.events;
    try {
      if (!handler(event)) {
        handlerStopped = true;
        return false;
      }
    } catch (const std::exception& e) {
      out.code = 0;
      out.reason = "HandlerError";
      out.message = std::string("watch handler threw: ") + e.what();
      failed = true;
      return false;
    } catch (...) {
      out.code = 0;
      out.reason = "HandlerError";
      out.message = "watch handler threw";
      failed = true;
      return false;
    }
    return true;
  };

  req.response_handler = [&status](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) -> bool {
    if (status != 200) {
      if (errorBody.size() < kMaxErrorBody) errorBody.append(data, std::min(n, kMaxErrorBody));
      return true;
    }
    if (!splitter.Feed(std::string_view(data, n), onValue)) {
      if (!failed && !handlerStopped) {
        out.code = 0;
        out.reason = "InvalidWatchEvent";
        out.message = splitter.error();
        failed = true;
      }
      return false;
    }
    return true;
  };

  httplib::Result res = conn->send(req);
  canceller.Done();
  Count("watch", status);

  if (handlerStopped || stop.stop_requested()) {
    out.stopped = true;
    if (status == 200 && !failed) out.code = 200;
    return out;
  }
  if (failed) return out;
  if (status != 0 && status != 200) {
    Result r = ErrorResult(status, errorBody);
    out.code = r.code;
    out.reason = std::move(r.reason);
    out.message = std::move(r.message);
    if (status == 401) token_.Reload();
    return out;
  }
  if (!res) {
    out.code = 0;
    out.reason = "TransportError";
    out.message = "GET " + config_.Url() + target + ": " + Describe(res.error());
    return out;
  }
  out.code = 200;  // the server ended the stream (timeoutSeconds or its own shutdown)
  return out;
}

// ---------------------------------------------------------------------------------------------
// WatchFrom

WatchResult WatchFrom(WatchApi& api, std::string_view path, WatchOptions options,
                      std::string& resourceVersion, const WatchHandler& handler,
                      std::stop_token stop, std::chrono::milliseconds backoffInitial,
                      std::chrono::milliseconds backoffMax) {
  int failures = 0;
  const int base = options.timeoutSeconds;
  for (;;) {
    if (stop.stop_requested()) {
      WatchResult r;
      r.stopped = true;
      return r;
    }
    WatchOptions o = options;
    o.resourceVersion = resourceVersion;
    if (base > 0) o.timeoutSeconds = base + std::uniform_int_distribution<int>(0, base - 1)(Rng());
    auto began = Clock::now();
    WatchResult r = api.Watch(
        path, o,
        [&](WatchEvent& e) {
          std::string_view rv =
              json::StringOr(json::Find(&e.object, "metadata"), "resourceVersion");
          if (!rv.empty()) resourceVersion = std::string(rv);
          return handler(e);
        },
        stop);
    if (r.stopped || r.Gone()) return r;
    bool healthy = r.Ok() && (r.events > 0 || Clock::now() - began >= std::chrono::seconds(1));
    if (healthy) {
      failures = 0;
      continue;
    }
    auto delay = Backoff(failures++, backoffInitial, backoffMax);
    log::Warn("watch failed, retrying", {{"path", std::string(path)},
                                         {"code", std::to_string(r.code)},
                                         {"reason", r.reason},
                                         {"message", r.message},
                                         {"resourceVersion", resourceVersion},
                                         {"delayMs", std::to_string(delay.count())}});
    if (!SleepUnlessStopped(delay, stop)) {
      WatchResult s;
      s.stopped = true;
      return s;
    }
  }
}

}  // namespace iw::kube
