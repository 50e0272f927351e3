#include "server/kube/query_string.h"

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

}  // namespace iw::kube
