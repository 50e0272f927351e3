// Kubernetes resource quantities reduced to milli-units (lib/quantity.h). The expected values are
// those of k8s.io/apimachinery v0.37.2 resource.ParseQuantity(s).MilliValue() (checked against it),
// except where the comment says the value is beyond the documented range.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/json.h"
#include "lib/quantity.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::Parse;

struct MilliCase {
  std::string text;
  std::optional<long long> want;  // nullopt: not a quantity (or out of range)
};

// "nullopt" or the number, for readable failures.
std::string Show(std::optional<long long> v) {
  return v ? std::to_string(*v) : "nullopt";
}

void CheckParseMilli(const std::vector<MilliCase>& cases) {
  for (const MilliCase& c : cases) {
    CAPTURE(c.text);
    CHECK(Show(quantity::ParseMilli(c.text)) == Show(c.want));
  }
}

}  // namespace

TEST_CASE("ParseMilli reads Kubernetes quantities as milli-units") {
  CheckParseMilli({
      // Decimal numbers.
      {"0", 0},
      {"00", 0},
      {"1", 1000},
      {"1.5", 1500},
      {"0.1", 100},
      {".5", 500},
      {"1.", 1000},
      {"+1", 1000},
      // Decimal SI suffixes.
      {"100m", 100},
      {"1m", 1},
      {"1000m", 1000},
      {"1k", 1'000'000},
      {"1M", 1'000'000'000},
      {"1G", 1'000'000'000'000},
      {"1.G", 1'000'000'000'000},
      {"1T", 1'000'000'000'000'000},
      {"1P", 1'000'000'000'000'000'000},
      // Binary SI suffixes.
      {"1Ki", 1'024'000},
      {"128Mi", 134'217'728'000},
      {"1024Mi", 1'073'741'824'000},
      {"2Gi", 2'147'483'648'000},
      {"1.5Gi", 1'610'612'736'000},
      {"0.5Gi", 536'870'912'000},
      {"1Ti", 1'099'511'627'776'000},
      {"1Pi", 1'125'899'906'842'624'000},
      // Decimal exponents, either case, signed.
      {"1e3", 1'000'000},
      {"1E3", 1'000'000},
      {"1e+3", 1'000'000},
      {"1e03", 1'000'000},
      {"1.5e3", 1'500'000},
      {"1e-2", 10},
      {"1e-3", 1},
      {"1e15", 1'000'000'000'000'000'000},
      // Rounded up to the next milli-unit, as MilliValue rounds.
      {"0.0001", 1},
      {"1.0001m", 2},
      {"1.23456789m", 2},
      {"1e-4", 1},
      // Negative quantities parse (validation, not parsing, refuses them in resources).
      {"-1", -1000},
      {"-100m", -100},
      {"-0.5", -500},
      {"-2Gi", -2'147'483'648'000},
  });
}

TEST_CASE("ParseMilli refuses what is not a quantity and what is beyond its range") {
  CheckParseMilli({
      {"", std::nullopt},
      {"abc", std::nullopt},
      {"1.2.3", std::nullopt},
      {"1Zi", std::nullopt},
      {" 1", std::nullopt},  // ParseQuantity does not trim (only Quantity's UnmarshalJSON does)
      {"1 ", std::nullopt},
      {"1K", std::nullopt},  // kilo is lowercase
      {"1ki", std::nullopt},
      {"1Mii", std::nullopt},
      {"1mi", std::nullopt},
      {"1k1", std::nullopt},
      {"1e", std::nullopt},
      {"1ee3", std::nullopt},
      {"1e3.5", std::nullopt},
      {"1e9n", std::nullopt},
      {"0x10", std::nullopt},
      {"1_000", std::nullopt},
      {"--1", std::nullopt},
      // The range: |value| up to 9.2e15 units (9.2e18 milli-units). ParseQuantity takes all of
      // these; its MilliValue overflows int64 for the larger ones.
      {"9200000000000000", 9'200'000'000'000'000'000},
      {"-9200000000000000", -9'200'000'000'000'000'000},
      {"9200000000000001", std::nullopt},
      {"9223372036854775807", std::nullopt},
      {"1e16", std::nullopt},
      {"1e1000", std::nullopt},
      {"1E", std::nullopt},  // exa: 1e18 units
      {"1Ei", std::nullopt},
      {"8Ei", std::nullopt},
  });
}

// k8s.io/apimachinery/pkg/api/resource/suffix.go (v0.37.2) fastLookup
// interpret: `case "n": return 10, -9, DecimalSI, true` and `case "u": return 10, -6, ...`.
// The API server itself writes them: a cpu of "0.1505" is stored canonically as "150500u".
TEST_CASE("ParseMilli takes the n and u suffixes") {
  CheckParseMilli({
      {"1n", 1},
      {"1u", 1},
      {"500u", 1},
      {"150500u", 151},
      {"1000000000n", 1000},
  });
}

// Divergences from upstream, kept: of no consequence for objects the API server sends (it stores
// these as "0" and "1e3"). parseQuantityString (quantity.go, v0.37.2) takes an empty number as zero
// ("if we stripped all numerator positions, always return 0": a bare sign, a lone ".", a bare
// suffix), and suffixHandler.interpret reads an exponent of any length with strconv.ParseInt;
// ParseMilli refuses both (so a change holding one is not made in place). The rows give ours, the
// comments upstream's.
TEST_CASE("ParseMilli refuses an empty number and long exponents, which upstream reads") {
  CheckParseMilli({
      {"-", std::nullopt},       // upstream 0
      {"+", std::nullopt},       // upstream 0
      {".", std::nullopt},       // upstream 0
      {"m", std::nullopt},       // upstream 0
      {"Gi", std::nullopt},      // upstream 0
      {"1e0003", std::nullopt},  // upstream 1000000
  });
}

TEST_CASE("MilliOf reads JSON strings and numbers") {
  struct Case {
    std::string json;
    std::optional<long long> want;
  };
  const Case cases[] = {
      {R"("100m")", 100},
      {R"("1Gi")", 1'073'741'824'000},
      {"1", 1000},
      {"0", 0},
      {"-2", -2000},
      {"0.5", 500},
      {"1e3", 1'000'000},  // a JSON number, parsed as a double
      {"0.0001", 1},       // rounded up
      {"1.0001", 1001},
      {"2.5e-3", 3},
      {"9200000000000", 9'200'000'000'000'000},
      {R"("abc")", std::nullopt},
      {R"("")", std::nullopt},
      {"null", std::nullopt},
      {"true", std::nullopt},
      {"{}", std::nullopt},
      {"[1]", std::nullopt},
      {"1e300", std::nullopt},  // beyond the range
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    json::Document d = Parse(R"({"q":)" + c.json + "}");
    CHECK(Show(quantity::MilliOf(json::Find(&d, "q"))) == Show(c.want));
  }
  CHECK(quantity::MilliOf(nullptr) == std::nullopt);
}

// A JSON integer is bounded at 9.2e15 units as a string is: a memory of 10Ti written as a JSON
// integer is a quantity as "10995116277760" is.
TEST_CASE("MilliOf takes JSON integers up to 9.2e15 units") {
  for (const std::string text : {R"({"q":10995116277760})", R"({"q":9200000000000000})"}) {
    CAPTURE(text);
    json::Document d = Parse(text);
    json::Document s = Parse(R"({"q":")" + json::Serialize(d["q"]) + R"("})");
    REQUIRE(quantity::MilliOf(json::Find(&s, "q")).has_value());
    CHECK(Show(quantity::MilliOf(json::Find(&d, "q"))) ==
          Show(quantity::MilliOf(json::Find(&s, "q"))));
  }
}

TEST_CASE("SameQuantity compares values, not spellings; absent and null are alike") {
  struct Case {
    const char* a;  // JSON text of member "q", or nullptr for no member
    const char* b;
    bool same;
  };
  const Case cases[] = {
      {R"("1")", R"("1000m")", true},
      {R"("1Gi")", R"("1073741824")", true},
      {R"("1Gi")", R"("1024Mi")", true},
      {R"("0.5")", R"("500m")", true},
      {R"("100m")", R"("0.1")", true},
      {R"("1e3")", R"("1k")", true},
      {R"("128Mi")", R"("0.125Gi")", true},
      {"1", R"("1")", true},  // the API takes numbers too
      {"0.5", R"("500m")", true},
      {R"("1")", R"("2")", false},
      {R"("100m")", R"("101m")", false},
      {R"("1Gi")", R"("1G")", false},
      {R"("128Mi")", R"("128M")", false},
      {R"("-1")", R"("1")", false},
      {"1", R"("2")", false},
      // Absent, null: the same; a zero is not absent (adding or removing a request is a change).
      {nullptr, nullptr, true},
      {"null", nullptr, true},
      {"null", "null", true},
      {nullptr, R"("0")", false},
      {"null", R"("100m")", false},
      // What is not a quantity compares as JSON.
      {R"("abc")", R"("abc")", true},
      {R"("abc")", R"("abd")", false},
      {R"("abc")", R"("1")", false},
      {R"({"x":1})", R"({"x":1})", true},
  };
  for (const Case& c : cases) {
    const std::string a = c.a ? c.a : "(absent)", b = c.b ? c.b : "(absent)";
    CAPTURE(a);
    CAPTURE(b);
    json::Document da = Parse(c.a ? R"({"q":)" + std::string(c.a) + "}" : "{}");
    json::Document db = Parse(c.b ? R"({"q":)" + std::string(c.b) + "}" : "{}");
    CHECK(quantity::SameQuantity(json::Find(&da, "q"), json::Find(&db, "q")) == c.same);
    CHECK(quantity::SameQuantity(json::Find(&db, "q"), json::Find(&da, "q")) == c.same);
  }
}
