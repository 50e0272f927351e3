// Structured logging to stderr: one line per event, JSON (default) or text, with key/value fields.
//
// Thread safety: every function from any thread; a line is written with one write(2), so lines
// from different threads never interleave. Configure() sets the level and the format as two
// separate atomics: call it at startup, before other threads log (a line racing it may pair the
// old level with the new format).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace iw::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class Format { kJson, kText };

void Configure(Level minLevel, Format format);
// Parses "debug", "info", "warn", "error"; returns false for anything else.
bool ParseLevel(std::string_view text, Level& out);
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

}  // namespace iw::log
