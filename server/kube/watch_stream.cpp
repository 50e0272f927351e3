#include "server/kube/watch_stream.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <random>
#include <utility>

#include "lib/query_string.h"
#include "lib/stop_sleep.h"
#include "server/kube/backoff.h"
#include "server/kube/error_result.h"
#include "server/kube/kube_client.h"
#include "server/kube/transport_error.h"
#include "server/process/log.h"

namespace iw::kube {

namespace {

using Clock = std::chrono::steady_clock;

// Largest single watch event accepted (etcd caps objects at 1.5 MiB; JSON framing adds little).
constexpr size_t kMaxWatchEventBytes = 16u << 20;
// Largest error body kept from a failed watch request.
constexpr size_t kMaxErrorBody = 1u << 20;
// Read-timeout margin of a watch beyond its server-side timeoutSeconds.
constexpr auto kWatchReadMargin = std::chrono::seconds(30);

}  // namespace

// ---------------------------------------------------------------------------------------------
// JsonStreamSplitter

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
// Client::Watch: one watch request, as its steps

namespace {

// The result of a watch stopped before its request was sent (or, in WatchFrom, between two).
WatchResult Stopped() {
  WatchResult r;
  r.stopped = true;
  return r;
}

// The result of a watch the client refuses because it is shut down.
WatchResult ShuttingDown() {
  WatchResult r;
  r.reason = "ShuttingDown";
  r.message = "the API client is shut down";
  return r;
}

// The query of a watch request: watch=1, then each of `options` that is set.
std::string WatchQuery(const WatchOptions& options) {
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
  return q;
}

// A watch connection's read timeout: timeoutSeconds + kWatchReadMargin, at least `requestTimeout`.
std::chrono::milliseconds WatchReadTimeout(const WatchOptions& options,
                                           std::chrono::milliseconds requestTimeout) {
  return std::max<std::chrono::milliseconds>(
      requestTimeout, std::chrono::seconds(std::max(options.timeoutSeconds, 0)) +
                          std::chrono::duration_cast<std::chrono::seconds>(kWatchReadMargin));
}

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

// Readies a new watch connection: no keep-alive (it is never pooled), its socket to `canceller`.
void PrepareWatchConnection(httplib::ClientImpl& conn, Canceller& canceller) {
  conn.set_keep_alive(false);
  conn.set_socket_options([&canceller](socket_t sock) { canceller.OnSocket(sock); });
}

// One watch request's answer as it arrives, and the watch's outcome: the response head's status;
// the body of an error answer (its first kMaxErrorBody bytes); a 200 answer split into events,
// decoded and delivered until the stream, an ERROR event, a failure or the handler ends it.
class WatchReader {
 public:
  explicit WatchReader(const WatchHandler& handler)
      : handler_(handler), splitter_(kMaxWatchEventBytes) {}

  // The HTTP status of the answer (0 until its head arrived, or when none did).
  int status() const { return status_; }

  // The response head: records its status; the body is read whatever it is.
  bool OnHead(int status) {
    status_ = status;
    return true;
  }

  // A chunk of the body: kept for an error answer, else split into events; false ends the watch.
  bool OnBody(std::string_view data) {
    if (status_ != 200) {
      KeepErrorBody(data);
      return true;
    }
    return SplitEvents(data);
  }

  // The outcome once the request returned, first match wins: stopped (the handler or `stop`), a
  // failure in the stream, an HTTP error, a transport error (naming `request`), else a normal end.
  WatchResult Finish(const httplib::Result& res, bool stopRequested, std::string_view request) {
    if (handlerStopped_ || stopRequested) return EndStopped();
    if (failed_) return std::move(out_);
    if (status_ != 0 && status_ != 200) return EndWithHttpError();
    if (!res) return EndWithTransportError(res.error(), request);
    out_.code = 200;  // the server ended the stream (timeoutSeconds or its own shutdown)
    return std::move(out_);
  }

 private:
  // Keeps the start of an error answer's body, for ErrorResult.
  void KeepErrorBody(std::string_view data) {
    if (errorBody_.size() < kMaxErrorBody) {
      errorBody_.append(data.data(), std::min(data.size(), kMaxErrorBody));
    }
  }

  // Splits a 200 answer's chunk into values for OnEvent; false ends it (a bad stream: Fail).
  bool SplitEvents(std::string_view data) {
    if (splitter_.Feed(data, [this](std::string_view text) { return OnEvent(text); })) {
      return true;
    }
    if (!failed_ && !handlerStopped_) Fail("InvalidWatchEvent", splitter_.error());
    return false;
  }

  // One value of the stream: decoded, then an ERROR ends the watch, any other event is delivered.
  bool OnEvent(std::string_view text) {
    WatchEvent event;
    if (!Decode(text, event)) return false;
    if (event.type == "ERROR") {
      EndWithStatus(event.object);
      return false;
    }
    ++out_.events;
    return Deliver(event);
  }

  // Parses an event's envelope into `event` (its type, its object unwrapped); false if undecodable.
  bool Decode(std::string_view text, WatchEvent& event) {
    json::Document doc;
    if (Status err = json::ParseUntrusted(text, doc); !err.ok()) {
      Fail("InvalidWatchEvent", "undecodable watch event: " + err.message());
      return false;
    }
    event.type = std::string(json::StringOr(&doc, "type"));
    json::Value envelope;
    envelope.Swap(doc);  // doc keeps the allocator; the envelope moves out of the root
    if (json::Value* obj = json::FindMutable(&envelope, "object")) {
      static_cast<json::Value&>(doc).Swap(*obj);
    }
    event.object.Swap(doc);
    return true;
  }

  // Hands `event` to the handler; false when it returns false (stopped) or throws (HandlerError).
  bool Deliver(WatchEvent& event) {
    try {
      if (!handler_(event)) {
        handlerStopped_ = true;
        return false;
      }
    } catch (const std::exception& e) {
      Fail("HandlerError", std::string("watch handler threw: ") + e.what());
      return false;
    } catch (...) {
      Fail("HandlerError", "watch handler threw");
      return false;
    }
    return true;
  }

  // The watch failed in its stream: code 0, `reason` and `message`.
  void Fail(std::string reason, std::string message) {
    out_.code = 0;
    out_.reason = std::move(reason);
    out_.message = std::move(message);
    failed_ = true;
  }

  // An ERROR event ends the watch with its Status: its code (else 500), reason (else the code's).
  void EndWithStatus(const json::Value& status) {
    out_.code = status.IsObject() && json::Find(&status, "code") && status["code"].IsInt()
                    ? status["code"].GetInt()
                    : 500;
    out_.reason = std::string(json::StringOr(&status, "reason"));
    out_.message = std::string(json::StringOr(&status, "message"));
    if (out_.reason.empty()) out_.reason = ReasonForCode(out_.code);
    failed_ = true;
  }

  // Stopped: code 200 if the answer was a sound 200 so far, else a stream failure's code, or 0.
  WatchResult EndStopped() {
    out_.stopped = true;
    if (status_ == 200 && !failed_) out_.code = 200;
    return std::move(out_);
  }

  // An HTTP error answer (410: the resourceVersion is gone): its Status, through ErrorResult.
  WatchResult EndWithHttpError() {
    Result r = ErrorResult(status_, errorBody_);
    out_.code = r.code;
    out_.reason = std::move(r.reason);
    out_.message = std::move(r.message);
    return std::move(out_);
  }

  // No answer, or the stream broke off before the server ended it: code 0, TransportError.
  WatchResult EndWithTransportError(httplib::Error error, std::string_view request) {
    out_.code = 0;
    out_.reason = "TransportError";
    out_.message = std::string(request) + ": " + DescribeTransportError(error);
    return std::move(out_);
  }

  const WatchHandler& handler_;
  JsonStreamSplitter splitter_;
  WatchResult out_;
  int status_ = 0;
  std::string errorBody_;
  bool handlerStopped_ = false;
  bool failed_ = false;  // ERROR event, undecodable event or a throwing handler: `out_` says
};

// The GET of a watch at `target`, its answer's head and body handed to `reader` as they arrive.
httplib::Request WatchRequest(const std::string& target, const std::string& userAgent,
                              const std::string& token, WatchReader& reader) {
  httplib::Request req;
  req.method = "GET";
  req.path = target;
  req.headers = {{"Accept", "application/json"}, {"User-Agent", userAgent}};
  if (!token.empty()) req.headers.emplace("Authorization", "Bearer " + token);
  req.response_handler = [&reader](const httplib::Response& r) { return reader.OnHead(r.status); };
  req.content_receiver = [&reader](const char* data, size_t n, uint64_t, uint64_t) {
    return reader.OnBody(std::string_view(data, n));
  };
  return req;
}

}  // namespace

WatchResult Client::Watch(std::string_view path, const WatchOptions& options,
                          const WatchHandler& handler, std::stop_token stop) {
  if (stop.stop_requested()) return Stopped();
  if (IsShutDown()) return ShuttingDown();
  const std::string target = Target(path, WatchQuery(options));

  Throttle();
  Canceller canceller;
  auto conn = NewConnection(WatchReadTimeout(options, config_.requestTimeout));
  PrepareWatchConnection(*conn, canceller);
  std::stop_callback onStop(stop, [&canceller] { canceller.Cancel(); });

  WatchReader reader(handler);
  httplib::Result res = conn->send(WatchRequest(target, config_.userAgent, token_.Token(), reader));
  canceller.Done();
  Count("watch", reader.status());

  WatchResult out = reader.Finish(res, stop.stop_requested(), "GET " + config_.Url() + target);
  // Rejected at authentication: re-read the token, in case it rotated, for the next watch.
  if (reader.status() == 401 && !out.stopped) token_.Reload();
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
    if (stop.stop_requested()) return Stopped();
    WatchOptions o = options;
    o.resourceVersion = resourceVersion;
    if (base > 0) {
      o.timeoutSeconds = base + std::uniform_int_distribution<int>(0, base - 1)(JitterRng());
    }
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
    if (!SleepUnlessStopped(delay, stop)) return Stopped();
  }
}

}  // namespace iw::kube
