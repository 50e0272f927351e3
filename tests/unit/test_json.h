// Helpers shared by the unit tests: JSON text parsed the way the server does, and fixture files.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "lib/json.h"

namespace iw::test {

// Parses `text`, failing the current test (with the text as message) when it does not parse.
inline json::Document Parse(std::string_view text) {
  json::Document d;
  Status err = json::ParseUntrusted(text, d);
  REQUIRE_MESSAGE(err.ok(), std::string(text));
  return d;
}

// The bytes of the file at `path` ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace iw::test
