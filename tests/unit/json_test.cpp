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
