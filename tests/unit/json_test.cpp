#include <doctest/doctest.h>

#include <string>

#include "hooks/json.h"

using namespace iw;

TEST_CASE("ParseUntrusted accepts objects and rejects what is not JSON") {
  json::Document d;
  CHECK_FALSE(json::ParseUntrusted(R"({"a":[1,2,{"b":"c"}]})", d).has_value());
  CHECK(json::ParseUntrusted("", d).has_value());
  CHECK(json::ParseUntrusted("{\"a\":", d).has_value());
  CHECK(json::ParseUntrusted("{} trailing", d).has_value());
  CHECK(json::ParseUntrusted("not json", d).has_value());
}

TEST_CASE("ParseUntrusted rejects deep nesting without recursing") {
  json::Document d;
  std::string deep(200000, '[');
  auto err = json::ParseUntrusted(deep, d);
  REQUIRE(err.has_value());
  CHECK(err->find("nested deeper") != std::string::npos);
  // Brackets inside strings do not count.
  std::string quoted = "{\"k\":\"" + std::string(100000, '[') + "\"}";
  CHECK_FALSE(json::ParseUntrusted(quoted, d).has_value());
}

TEST_CASE("ParseUntrusted rejects invalid UTF-8") {
  json::Document d;
  CHECK(json::ParseUntrusted("{\"a\":\"\xff\xfe\"}", d).has_value());
  CHECK_FALSE(json::ParseUntrusted("{\"a\":\"caf\xc3\xa9\"}", d).has_value());
}

TEST_CASE("pointer tokens escape ~ and / per RFC 6901") {
  CHECK(json::EscapePointerToken("inplace-webhook.io/state") == "inplace-webhook.io~1state");
  CHECK(json::EscapePointerToken("a~b/c") == "a~0b~1c");
  CHECK(json::UnescapePointerToken("a~0b~1c") == "a~b/c");
  CHECK(json::UnescapePointerToken("~01") == "~1");
}

TEST_CASE("SerializeCanonical sorts keys at every level") {
  json::Document a, b;
  REQUIRE_FALSE(json::ParseUntrusted(R"({"b":1,"a":{"y":[1,{"q":1,"p":2}],"x":null}})", a));
  REQUIRE_FALSE(json::ParseUntrusted(R"({"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1})", b));
  CHECK(json::SerializeCanonical(a) == json::SerializeCanonical(b));
  CHECK(json::SerializeCanonical(a) == R"({"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1})");
}

TEST_CASE("ParseUntrusted bounds the number of values, member names included") {
  struct Case {
    std::string text;
    std::size_t maxValues;
    json::ParseFailure failure;
  };
  std::string manyZeros = "[";
  for (int i = 0; i < 1000; ++i) manyZeros += i == 0 ? "0" : ",0";
  manyZeros += "]";
  for (const Case& c : {
           Case{"1", 1, json::ParseFailure::kNone},
           Case{"[]", 1, json::ParseFailure::kNone},
           Case{"[1]", 1, json::ParseFailure::kTooManyValues},
           Case{"[1]", 2, json::ParseFailure::kNone},
           Case{R"({"a":1})", 2, json::ParseFailure::kTooManyValues},  // object, name, value
           Case{R"({"a":1})", 3, json::ParseFailure::kNone},
           Case{R"({"a":[1,2],"b":{}})", 6, json::ParseFailure::kTooManyValues},
           Case{R"({"a":[1,2],"b":{}})", 7, json::ParseFailure::kNone},
           Case{manyZeros, 1000, json::ParseFailure::kTooManyValues},
           Case{manyZeros, 1001, json::ParseFailure::kNone},
           Case{"[1,", 10, json::ParseFailure::kSyntax},
       }) {
    CAPTURE(c.text.substr(0, 40));
    CAPTURE(c.maxValues);
    for (bool borrow : {false, true}) {
      json::Document d;
      d.SetString("previous");
      json::ParseFailure got = json::ParseFailure::kSyntax;
      auto err = borrow ? json::ParseUntrustedBorrowing(c.text, d, &got, c.maxValues)
                        : json::ParseUntrusted(c.text, d, &got, c.maxValues);
      CHECK(got == c.failure);
      CHECK(err.has_value() == (c.failure != json::ParseFailure::kNone));
      if (c.failure == json::ParseFailure::kTooManyValues) {
        CHECK(err->find("more than " + std::to_string(c.maxValues) + " values") !=
              std::string::npos);
        CHECK(d.IsString());  // the previous value is kept
      }
    }
  }
  // The default bound: a size-legal body of millions of tiny values is refused.
  std::string hostile = "[";
  hostile.reserve(3 * json::kMaxValues);
  for (std::size_t i = 0; i <= json::kMaxValues; ++i) hostile += "0,";
  hostile += "0]";
  json::Document d;
  json::ParseFailure got = json::ParseFailure::kNone;
  CHECK(json::ParseUntrusted(hostile, d, &got).has_value());
  CHECK(got == json::ParseFailure::kTooManyValues);
}
