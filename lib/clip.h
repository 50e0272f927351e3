// Clip: a value a client sent, cut to a bounded length before it is echoed in an answer or written
// to a log, so that a request cannot make either grow with its own size. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace iw {

// Bytes of a client's value kept in answers and logs.
inline constexpr size_t kClipBytes = 256;

// `s` itself when it has at most `max` bytes; else its first `max` bytes (fewer, so as not to cut a
// UTF-8 sequence) followed by "...(N bytes)", N being the whole length.
inline std::string Clip(std::string_view s, size_t max = kClipBytes) {
  if (s.size() <= max) return std::string(s);
  size_t end = max;
  // Back up over continuation bytes (10xxxxxx) to the start of the sequence that was cut.
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end)) + "...(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace iw
