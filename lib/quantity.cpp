#include "lib/quantity.h"

#include <cmath>

namespace iw::quantity {

namespace {

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// The multiplier of a suffix as (base, exponent): 10^e or 2^e.
std::optional<std::pair<int, int>> Suffix(std::string_view s) {
  if (s.empty()) return std::pair{10, 0};
  if (s == "n") return std::pair{10, -9};
  if (s == "u") return std::pair{10, -6};
  if (s == "m") return std::pair{10, -3};
  if (s == "k") return std::pair{10, 3};
  if (s == "M") return std::pair{10, 6};
  if (s == "G") return std::pair{10, 9};
  if (s == "T") return std::pair{10, 12};
  if (s == "P") return std::pair{10, 15};
  if (s == "E") return std::pair{10, 18};
  if (s == "Ki") return std::pair{2, 10};
  if (s == "Mi") return std::pair{2, 20};
  if (s == "Gi") return std::pair{2, 30};
  if (s == "Ti") return std::pair{2, 40};
  if (s == "Pi") return std::pair{2, 50};
  if (s == "Ei") return std::pair{2, 60};
  if (s[0] == 'e' || s[0] == 'E') {  // decimal exponent: e3, E-2
    std::string_view e = s.substr(1);
    bool neg = false;
    if (!e.empty() && (e[0] == '+' || e[0] == '-')) {
      neg = e[0] == '-';
      e.remove_prefix(1);
    }
    if (e.empty() || e.size() > 3) return std::nullopt;
    int v = 0;
    for (char c : e) {
      if (!IsDigit(c)) return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return std::pair{10, neg ? -v : v};
  }
  return std::nullopt;
}

}  // namespace

std::optional<long long> ParseMilli(std::string_view text) {
  using Wide = __int128;
  constexpr Wide kMax = Wide(9'200'000'000'000'000'000LL);
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  // digits [. digits], as an integer mantissa and the count of fraction digits.
  size_t i = 0;
  Wide mantissa = 0;
  int fractionDigits = 0;
  bool seenPoint = false;
  bool any = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (IsDigit(c)) {
      any = true;
      if (mantissa > kMax) return std::nullopt;
      mantissa = mantissa * 10 + (c - '0');
      if (seenPoint) ++fractionDigits;
    } else if (c == '.' && !seenPoint) {
      seenPoint = true;
    } else {
      break;
    }
  }
  if (!any) return std::nullopt;
  std::optional<std::pair<int, int>> suffix = Suffix(s.substr(i));
  if (!suffix) return std::nullopt;
  // milli-value = mantissa * 10^(3 - fractionDigits [+ e]) * 2^e', rounded up, exactly.
  int tenExp = 3 - fractionDigits;
  int twoExp = 0;
  (suffix->first == 10 ? tenExp : twoExp) += suffix->second;
  Wide v = mantissa;
  for (int k = 0; k < twoExp; ++k) {
    v *= 2;
    if (v > kMax) return std::nullopt;
  }
  for (int k = 0; k < tenExp; ++k) {
    v *= 10;
    if (v > kMax) return std::nullopt;
  }
  for (int k = 0; k > tenExp && v != 0; --k) {
    v = v / 10 + (v % 10 != 0 ? 1 : 0);  // rounds up at every step: the same as once at the end
  }
  if (v > kMax) return std::nullopt;
  const long long out = static_cast<long long>(v);
  return negative ? -out : out;
}

std::optional<long long> MilliOf(const json::Value* value) {
  if (value == nullptr) return std::nullopt;
  if (value->IsString()) return ParseMilli(json::View(*value));
  if (value->IsInt64()) {
    long long n = value->GetInt64();
    if (n > 9'200'000'000'000'000LL || n < -9'200'000'000'000'000LL) {
      return std::nullopt;
    }
    return n * 1000;
  }
  if (value->IsNumber()) {
    double d = value->GetDouble();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e15) return std::nullopt;
    return static_cast<long long>(std::ceil(d * 1000 - 1e-9));
  }
  return std::nullopt;
}

bool SameQuantity(const json::Value* a, const json::Value* b) {
  const bool absentA = a == nullptr || a->IsNull();
  const bool absentB = b == nullptr || b->IsNull();
  if (absentA || absentB) return absentA && absentB;
  std::optional<long long> x = MilliOf(a), y = MilliOf(b);
  if (!x || !y) return *a == *b;
  return *x == *y;
}

}  // namespace iw::quantity
