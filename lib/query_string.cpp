#include "lib/query_string.h"

#include <cctype>

namespace iw::kube {

std::string QueryEscape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void AppendQuery(std::string& q, std::string_view key, std::string_view value) {
  if (!q.empty()) q += '&';
  q += key;
  q += '=';
  q += QueryEscape(value);
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<std::string> QueryValue(std::string_view q, std::string_view key) {
  while (!q.empty()) {
    const std::size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view{} : q.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key) continue;
    const std::string_view raw = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    std::string out;
    out.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        out += ' ';
      } else if (raw[i] != '%') {
        out += raw[i];
      } else {
        if (i + 2 >= raw.size()) return std::nullopt;
        const int hi = HexValue(raw[i + 1]), lo = HexValue(raw[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace iw::kube
