#include "lib/rfc3339.h"

#include <charconv>
#include <ctime>
#include <system_error>

namespace iw::rfc3339 {

std::string Format(Clock::time_point t) {
  std::time_t secs = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  const int year = tm.tm_year + 1900;
  if (year < 0 || year > 9999) {  // strftime writes such years with other widths
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
  std::string out = "0000-00-00T00:00:00Z";
  auto put = [&out](std::size_t end, int value) {  // right-aligned digits ending before `end`
    for (std::size_t i = end; value > 0; value /= 10)
      out[--i] = static_cast<char>('0' + value % 10);
  };
  put(4, year);
  put(7, tm.tm_mon + 1);
  put(10, tm.tm_mday);
  put(13, tm.tm_hour);
  put(16, tm.tm_min);
  put(19, tm.tm_sec);
  return out;
}

std::string FormatMillis(Clock::time_point t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
  std::string out = Format(Clock::time_point(secs));
  const char frac[] = {'.', static_cast<char>('0' + ms / 100),
                       static_cast<char>('0' + ms / 10 % 10), static_cast<char>('0' + ms % 10)};
  out.insert(out.size() - 1, frac, sizeof frac);
  return out;
}

std::optional<Clock::time_point> Parse(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  auto num = [&s](size_t pos, size_t len, int& out) {
    if (pos + len > s.size()) return false;
    auto [end, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, out);
    return ec == std::errc() && end == s.data() + pos + len;
  };
  int year, month, day, hour, minute, second;
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
      s[13] != ':' || s[16] != ':' || !num(0, 4, year) || !num(5, 2, month) || !num(8, 2, day) ||
      !num(11, 2, hour) || !num(14, 2, minute) || !num(17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  // Clock counts nanoseconds in 64 bits: about 1677-09-21 to 2262-04-11 (whole years inside,
  // offsets included).
  if (year < 1678 || year > 2261) return std::nullopt;
  size_t pos = 19;
  long long nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    size_t digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 9) nanos = nanos * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (size_t i = digits; i < 9; ++i) nanos *= 10;
  }
  long long offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (pos + 6 != s.size() || s[pos + 3] != ':' || !num(pos + 1, 2, oh) || !num(pos + 4, 2, om)) {
      return std::nullopt;
    }
    offset = (oh * 3600LL + om * 60LL) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t t = timegm(&tm);
  return Clock::from_time_t(t - offset) +
         std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(nanos));
}

bool IsCanonical(std::string_view s) {
  constexpr std::string_view kForm = "dddd-dd-ddTdd:dd:ddZ";
  if (s.size() != kForm.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool ok = kForm[i] == 'd' ? (s[i] >= '0' && s[i] <= '9') : s[i] == kForm[i];
    if (!ok) return false;
  }
  return true;
}

}  // namespace iw::rfc3339
