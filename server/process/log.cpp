#include "server/process/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

namespace iw::log {

namespace {

std::atomic<int> gMinLevel{static_cast<int>(Level::kInfo)};
std::atomic<Format> gFormat{Format::kJson};
std::atomic<int> gOutput{STDERR_FILENO};

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

}  // namespace

void SetOutput(int fd) {
  gOutput.store(fd, std::memory_order_relaxed);
}

void Configure(Level minLevel, Format format) {
  gMinLevel = static_cast<int>(minLevel);
  gFormat = format;
}

StatusOr<Level> ParseLevel(std::string_view text) {
  if (text == "debug") return Level::kDebug;
  if (text == "info") return Level::kInfo;
  if (text == "warn" || text == "warning") return Level::kWarn;
  if (text == "error") return Level::kError;
  return Status::InvalidArgument("--log-level must be debug, info, warn or error");
}

bool Enabled(Level level) {
  return static_cast<int>(level) >= gMinLevel.load();
}

namespace {

void WriteLine(Level level, std::string_view message, std::initializer_list<Field> fields,
               const Field* extra) {
  std::string line;
  line.reserve(128);
  if (gFormat.load() == Format::kJson) {
    line += "{\"ts\":\"" + Timestamp() + "\",\"level\":\"" + LevelName(level) + "\",\"msg\":";
    AppendJsonString(line, message);
    auto add = [&line](const Field& f) {
      line += ',';
      AppendJsonString(line, f.first);
      line += ':';
      AppendJsonString(line, f.second);
    };
    for (const auto& f : fields) add(f);
    if (extra != nullptr) add(*extra);
    line += "}\n";
  } else {
    line += Timestamp() + " " + LevelName(level) + " " + std::string(message);
    auto add = [&line](const Field& f) {
      const auto& [k, v] = f;
      line += ' ';
      line += k;
      line += '=';
      bool quote = v.find_first_of(" \"=") != std::string::npos || v.empty();
      if (quote)
        AppendJsonString(line, v);
      else
        line += v;
    };
    for (const auto& f : fields) add(f);
    if (extra != nullptr) add(*extra);
    line += '\n';
  }
  // One write per line; a short write is not worth retrying for a log line.
  [[maybe_unused]] auto n =
      ::write(gOutput.load(std::memory_order_relaxed), line.data(), line.size());
}

RateLimiter& ProcessLimiter() {
  static RateLimiter limiter;
  return limiter;
}

}  // namespace

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  WriteLine(level, message, fields, nullptr);
}

bool RateLimiter::Admit(std::string_view kind, Clock::time_point now, uint64_t& suppressed) {
  std::lock_guard lock(mu_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) {
    it = kinds_.emplace(std::string(kind), Kind{}).first;
    it->second.windowStart = now;
  }
  Kind& k = it->second;
  if (now - k.windowStart >= interval_) {
    k.windowStart = now;
    k.written = 0;
  }
  if (k.written >= burst_) {
    ++k.pending;
    ++k.total;
    return false;
  }
  ++k.written;
  suppressed = k.pending;
  k.pending = 0;
  return true;
}

std::vector<std::pair<std::string, uint64_t>> RateLimiter::SuppressedTotals() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(kinds_.size());
  for (const auto& [kind, k] : kinds_) out.emplace_back(kind, k.total);
  return out;
}

void Limited(Level level, std::string_view kind, std::string_view message,
             std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  uint64_t suppressed = 0;
  if (!ProcessLimiter().Admit(kind, RateLimiter::Clock::now(), suppressed)) return;
  if (suppressed == 0) {
    WriteLine(level, message, fields, nullptr);
  } else {
    Field extra{"suppressed", std::to_string(suppressed)};
    WriteLine(level, message, fields, &extra);
  }
}

void RenderSuppressedMetrics(std::string& out) {
  out +=
      "# HELP inplace_webhook_log_suppressed_total Log lines of one kind (per request or per "
      "connection) not written because more than 5 came within 10 s.\n"
      "# TYPE inplace_webhook_log_suppressed_total counter\n";
  for (const auto& [kind, total] : ProcessLimiter().SuppressedTotals()) {
    out += "inplace_webhook_log_suppressed_total{kind=\"" + kind + "\"} " + std::to_string(total) +
           "\n";
  }
}

}  // namespace iw::log
