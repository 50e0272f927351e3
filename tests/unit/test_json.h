// Test helper shared by the unit tests: parses JSON text the way the server does, failing the
// current test (with the text as message) when it does not parse.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "hooks/json.h"

namespace iw::test {

inline json::Document Parse(std::string_view text) {
  json::Document d;
  auto err = json::ParseUntrusted(text, d);
  REQUIRE_MESSAGE(!err.has_value(), std::string(text));
  return d;
}

}  // namespace iw::test
