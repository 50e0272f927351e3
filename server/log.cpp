#include "server/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace iw::log {

namespace {

std::atomic<int> gMinLevel{static_cast<int>(Level::kInfo)};
std::atomic<Format> gFormat{Format::kJson};

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

void Configure(Level minLevel, Format format) {
  gMinLevel = static_cast<int>(minLevel);
  gFormat = format;
}

bool ParseLevel(std::string_view text, Level& out) {
  if (text == "debug")
    out = Level::kDebug;
  else if (text == "info")
    out = Level::kInfo;
  else if (text == "warn" || text == "warning")
    out = Level::kWarn;
  else if (text == "error")
    out = Level::kError;
  else
    return false;
  return true;
}

bool Enabled(Level level) {
  return static_cast<int>(level) >= gMinLevel.load();
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (!Enabled(level)) return;
  std::string line;
  line.reserve(128);
  if (gFormat.load() == Format::kJson) {
    line += "{\"ts\":\"" + Timestamp() + "\",\"level\":\"" + LevelName(level) + "\",\"msg\":";
    AppendJsonString(line, message);
    for (const auto& [k, v] : fields) {
      line += ',';
      AppendJsonString(line, k);
      line += ':';
      AppendJsonString(line, v);
    }
    line += "}\n";
  } else {
    line += Timestamp() + " " + LevelName(level) + " " + std::string(message);
    for (const auto& [k, v] : fields) {
      line += ' ';
      line += k;
      line += '=';
      bool quote = v.find_first_of(" \"=") != std::string::npos || v.empty();
      if (quote)
        AppendJsonString(line, v);
      else
        line += v;
    }
    line += '\n';
  }
  // One write per line; a short write to stderr is not worth retrying for a log line.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace iw::log
