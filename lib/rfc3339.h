// RFC 3339 timestamps as Kubernetes writes them (metav1.Time: UTC, second precision) and reads them
// (fractions and offsets accepted).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace iw::rfc3339 {

using Clock = std::chrono::system_clock;

// Formats `t` in UTC with second precision: 2026-11-29T17:48:57Z.
std::string Format(Clock::time_point t);

// Formats `t` in UTC with millisecond precision: 2026-11-29T17:48:57.042Z (`t` truncated).
std::string FormatMillis(Clock::time_point t);

// Parses `2026-11-29T17:48:57Z`, with an optional fraction and a `Z` or `±HH:MM` offset; nullopt
// for anything else, and for years outside 1678–2261, which the clock (64-bit nanoseconds since
// 1970) cannot hold: a forged annotation's year 9999 is refused, never wrapped.
std::optional<Clock::time_point> Parse(std::string_view text);

// Exactly the form Format writes (`dddd-dd-ddTdd:dd:ddZ`).
bool IsCanonical(std::string_view text);

}  // namespace iw::rfc3339
