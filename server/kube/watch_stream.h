// Watches: one watch request's options, events and outcome; the splitter that cuts its answer, a
// stream of JSON values, into events; and WatchFrom, which keeps watching across the server's
// ends of the stream and errors. Client::Watch, the one request over HTTP, is declared with the
// Client (server/kube/kube_client.h) and defined in watch_stream.cpp.
//
// Thread safety: a JsonStreamSplitter serves one stream, on one thread at a time. WatchFrom
// blocks its caller and runs the handler on that thread; its stop token cancels it from any
// thread, a sleep between watches included.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "lib/json.h"

namespace iw::kube {

class WatchApi;  // server/kube/kube_client.h

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

}  // namespace iw::kube
