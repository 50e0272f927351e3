#include <doctest/doctest.h>

#include <string>

#include "lib/json.h"

using namespace iw;

TEST_CASE("ParseUntrusted accepts objects and rejects what is not JSON") {
  json::Document d;
  CHECK(json::ParseUntrusted(R"({"a":[1,2,{"b":"c"}]})", d).ok());
  CHECK_FALSE(json::ParseUntrusted("", d).ok());
  CHECK_FALSE(json::ParseUntrusted("{\"a\":", d).ok());
  CHECK_FALSE(json::ParseUntrusted("{} trailing", d).ok());
  CHECK_FALSE(json::ParseUntrusted("not json", d).ok());
}

TEST_CASE("ParseUntrusted rejects deep nesting without recursing") {
  json::Document d;
  std::string deep(200000, '[');
  Status err = json::ParseUntrusted(deep, d);
  REQUIRE_FALSE(err.ok());
  CHECK(err.code() == Status::Code::kInvalidArgument);
  CHECK(err.message().find("nested deeper") != std::string::npos);
  // Brackets inside strings do not count.
  std::string quoted = "{\"k\":\"" + std::string(100000, '[') + "\"}";
  CHECK(json::ParseUntrusted(quoted, d).ok());
}

TEST_CASE("ParseUntrusted rejects invalid UTF-8") {
  json::Document d;
  CHECK_FALSE(json::ParseUntrusted("{\"a\":\"\xff\xfe\"}", d).ok());
  CHECK(json::ParseUntrusted("{\"a\":\"caf\xc3\xa9\"}", d).ok());
}

TEST_CASE("pointer tokens escape ~ and / per RFC 6901") {
  CHECK(json::EscapePointerToken("inplace-webhook.io/state") == "inplace-webhook.io~1state");
  CHECK(json::EscapePointerToken("a~b/c") == "a~0b~1c");
  CHECK(json::UnescapePointerToken("a~0b~1c") == "a~b/c");
  CHECK(json::UnescapePointerToken("~01") == "~1");
}

TEST_CASE("SerializeCanonical sorts keys at every level") {
  json::Document a, b;
  REQUIRE(json::ParseUntrusted(R"({"b":1,"a":{"y":[1,{"q":1,"p":2}],"x":null}})", a).ok());
  REQUIRE(json::ParseUntrusted(R"({"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1})", b).ok());
  CHECK(json::SerializeCanonical(a) == json::SerializeCanonical(b));
  CHECK(json::SerializeCanonical(a) == R"({"a":{"x":null,"y":[1,{"p":2,"q":1}]},"b":1})");
}

TEST_CASE("ParseUntrusted bounds the number of values, member names included") {
  struct Case {
    std::string text;
    std::size_t maxValues;
    Status::Code code;
  };
  std::string manyZeros = "[";
  for (int i = 0; i < 1000; ++i) manyZeros += i == 0 ? "0" : ",0";
  manyZeros += "]";
  for (const Case& c : {
           Case{"1", 1, Status::Code::kOk},
           Case{"[]", 1, Status::Code::kOk},
           Case{"[1]", 1, Status::Code::kTooLarge},
           Case{"[1]", 2, Status::Code::kOk},
           Case{R"({"a":1})", 2, Status::Code::kTooLarge},  // object, name, value
           Case{R"({"a":1})", 3, Status::Code::kOk},
           Case{R"({"a":[1,2],"b":{}})", 6, Status::Code::kTooLarge},
           Case{R"({"a":[1,2],"b":{}})", 7, Status::Code::kOk},
           Case{manyZeros, 1000, Status::Code::kTooLarge},
           Case{manyZeros, 1001, Status::Code::kOk},
           Case{"[1,", 10, Status::Code::kInvalidArgument},
       }) {
    CAPTURE(c.text.substr(0, 40));
    CAPTURE(c.maxValues);
    for (bool borrow : {false, true}) {
      json::Document d;
      d.SetString("previous");
      Status err = borrow ? json::ParseUntrustedBorrowing(c.text, d, c.maxValues)
                          : json::ParseUntrusted(c.text, d, c.maxValues);
      CHECK(err.code() == c.code);
      if (c.code == Status::Code::kTooLarge) {
        CHECK(err.message().find("more than " + std::to_string(c.maxValues) + " values") !=
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
  Status err = json::ParseUntrusted(hostile, d);
  CHECK(err.IsTooLarge());
}
