#include "server/kube/kube_client.h"

#include <httplib.h>

#include <algorithm>

#include "lib/query_string.h"
#include "server/kube/backoff.h"
#include "server/kube/error_result.h"
#include "server/kube/transport_error.h"
#include "server/process/log.h"

namespace iw::kube {

namespace {

using Clock = std::chrono::steady_clock;

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

bool Client::IsShutDown() {
  std::lock_guard lock(shutdownMu_);
  return shutdown_;
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
    if (IsShutDown()) {
      Result r;
      r.reason = "ShuttingDown";
      r.message = "the API client is shut down";
      return r;
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
      r.message = rq.method + " " + config_.Url() + rq.target + ": " + DescribeTransportError(err);
      bool retryable = (rq.idempotent || NotSent(err)) && !Permanent(err);
      if (!retryable || attempt >= config_.maxRetries) return r;
      delay = Backoff(attempt, config_.retryBaseDelay, config_.retryMaxDelay);
      log::Warn("API request failed, retrying", {{"method", rq.method},
                                                 {"path", rq.target},
                                                 {"error", DescribeTransportError(err)},
                                                 {"attempt", std::to_string(attempt + 1)},
                                                 {"delayMs", std::to_string(delay.count())}});
    } else {
      int code = res->status;
      Count(rq.verb, code);
      std::optional<int> retryAfter = RetryAfterSeconds(res->get_header_value("Retry-After"));
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

}  // namespace iw::kube
