// Structured logging to stderr (or the descriptor SetOutput names): one line per event, JSON
// (default) or text, with key/value fields.
//
// Thread safety: every function from any thread; a line is written with one write(2), so lines
// from different threads never interleave. A RateLimiter is thread-safe (its mutex guards the
// per-kind map); the process-wide one behind Limited() lives for the whole process. Configure()
// sets the level and the format as two separate atomics: call it at startup, before other threads
// log (a line racing it may pair the old level with the new format). SetOutput() is an atomic too:
// a line racing it goes to the old descriptor or the new one.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/status.h"

namespace iw::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class Format { kJson, kText };

void Configure(Level minLevel, Format format);
// Where lines are written: stderr unless set. The unit tests send them to a file, so that a
// failing check's report is not lost among them. The caller keeps `fd` open while lines may be
// written.
void SetOutput(int fd);
// Parses "debug", "info", "warn" (or "warning"), "error"; InvalidArgument for anything else.
StatusOr<Level> ParseLevel(std::string_view text);
bool Enabled(Level level);

using Field = std::pair<std::string_view, std::string>;
void Write(Level level, std::string_view message, std::initializer_list<Field> fields = {});

inline void Debug(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kDebug, m, f);
}
inline void Info(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kInfo, m, f);
}
inline void Warn(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kWarn, m, f);
}
inline void Error(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kError, m, f);
}

// Rate limit for lines logged per request or per connection, so a flood of bad requests cannot
// flood the log: at most `burst` lines of one kind per `interval` (a fixed window per kind); the
// others are counted, and the next line of that kind written carries `suppressed=<count>`.
// Kinds are fixed strings of the code, never a client's value, so the map stays small.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kBurst = 5;
  static constexpr Clock::duration kInterval = std::chrono::seconds(10);

  explicit RateLimiter(int burst = kBurst, Clock::duration interval = kInterval)
      : burst_(burst), interval_(interval) {}
  // True when a line of `kind` may be written at `now`; then `suppressed` is how many lines of
  // that kind were dropped since the last one written (0 when none).
  bool Admit(std::string_view kind, Clock::time_point now, uint64_t& suppressed);
  // Lines dropped so far, per kind, sorted by kind.
  std::vector<std::pair<std::string, uint64_t>> SuppressedTotals() const;

 private:
  struct Kind {
    Clock::time_point windowStart{};
    int written = 0;
    uint64_t pending = 0;  // dropped since the last line written
    uint64_t total = 0;
  };
  const int burst_;
  const Clock::duration interval_;
  mutable std::mutex mu_;
  std::map<std::string, Kind, std::less<>> kinds_;
};

// Write() through the process-wide RateLimiter under `kind` (a line below the level is neither
// written nor counted).
void Limited(Level level, std::string_view kind, std::string_view message,
             std::initializer_list<Field> fields = {});
// Appends `inplace_webhook_log_suppressed_total{kind="..."}` for the process-wide limiter.
void RenderSuppressedMetrics(std::string& out);

}  // namespace iw::log
