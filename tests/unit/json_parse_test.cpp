// The untrusted-input parser, the serialiser and the copies of lib/json.h: what they accept,
// what they build, and that they agree with RapidJSON's own parser and writer byte for byte.
#include <doctest/doctest.h>

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "lib/json.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::ReadFile;

std::vector<std::string> RecordedFixtures() {
  std::vector<std::string> out;
  const auto dir = std::filesystem::path(IW_SOURCE_DIR) / "tests/fixtures/recorded";
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) out.push_back(ReadFile(p));
  return out;
}

// RapidJSON's Writer output for `v`: the reference the serialiser must match.
std::string WriterText(const json::Value& v) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

// RapidJSON's own verdict on `text` (iterative, validating), or "" when it accepts it.
std::string ReferenceError(const std::string& text, json::Document& out) {
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
  out.Parse<kFlags>(text.data(), text.size());
  if (!out.HasParseError()) return "";
  return std::string(rapidjson::GetParseError_En(out.GetParseError())) + " at offset " +
         std::to_string(out.GetErrorOffset());
}

// A small deterministic generator (the tests must not depend on the standard library's).
struct Lcg {
  std::uint64_t state;
  std::uint32_t Next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(state >> 33);
  }
};

// `depth` containers, arrays and objects in turn, around a 0: [{"k":[0]}] for 3.
std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += i % 2 == 0 ? "[" : "{\"k\":";
  s += "0";
  for (int i = depth - 1; i >= 0; --i) s += i % 2 == 0 ? "]" : "}";
  return s;
}

}  // namespace

TEST_CASE("ParseUntrusted: what it accepts and the error it gives otherwise") {
  struct Case {
    const char* name;
    std::string text;
    std::string result;  // Serialize of the document, or the error message
  };
  const Case cases[] = {
      {"object", R"( {"a" : [1, -2, 3.5, true, false, null, "s"]} )",
       R"({"a":[1,-2,3.5,true,false,null,"s"]})"},
      {"all whitespace kinds", "\t\r\n [ 1 ,\n2 ] \n", "[1,2]"},
      {"scalar root", "\"x\"", "\"x\""},
      {"escapes decode", R"(["\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00"])",
       "[\"\\\"\\\\/\\b\\f\\n\\r\\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]"},
      {"NUL escape kept inside a string", R"(["a\u0000b"])", "[\"a\\u0000b\"]"},
      {"raw UTF-8", "[\"caf\xc3\xa9 \xf0\x9f\x98\x80\"]", "[\"caf\xc3\xa9 \xf0\x9f\x98\x80\"]"},
      {"numbers keep their kind",
       "[0,-0,18446744073709551615,-9223372036854775808,1.0,1e2,-1.5E-3]",
       "[0,0,18446744073709551615,-9223372036854775808,1.0,100.0,-0.0015]"},
      {"a UTF-8 byte order mark first", "\xEF\xBB\xBF {\"a\":1}", R"({"a":1})"},
      {"part of a byte order mark", "\xEF\xBB[1]", "Invalid value. at offset 0"},
      {"empty text", "", "The document is empty. at offset 0"},
      {"only whitespace", "  \n", "The document is empty. at offset 3"},
      {"two roots", "{} {}", "The document root must not be followed by other values. at offset 3"},
      {"text after a NUL", std::string("{}\0{}", 5),
       "The document root must not be followed by other values. at offset 2"},
      {"missing value", R"({"a":})", "Invalid value. at offset 5"},
      {"trailing comma in array", "[1,]", "Invalid value. at offset 3"},
      {"trailing comma in object", R"({"a":1,})", "Missing a name for object member. at offset 7"},
      {"missing colon", R"({"a" 1})", "Missing a colon after a name of object member. at offset 5"},
      {"missing comma", R"({"a":1 "b":2})",
       "Missing a comma or '}' after an object member. at offset 7"},
      {"unclosed array", "[1", "Missing a comma or ']' after an array element. at offset 2"},
      {"misspelt literal", "[tru]", "Invalid value. at offset 4"},
      {"leading zero", "[01]", "Missing a comma or ']' after an array element. at offset 2"},
      {"bare minus", "[-]", "Invalid value. at offset 2"},
      {"missing fraction", "[1.]", "Miss fraction part in number. at offset 3"},
      {"missing exponent", "[1e]", "Miss exponent in number. at offset 3"},
      {"number too big", "[1e400]", "Number too big to be stored in double. at offset 1"},
      {"unterminated string", "[\"abc", "Missing a closing quotation mark in string. at offset 5"},
      {"raw newline in a string", "[\"a\nb\"]", "Invalid escape character in string. at offset 3"},
      {"raw NUL in a string", std::string("[\"a\0b\"]", 7),
       "Missing a closing quotation mark in string. at offset 3"},
      {"unknown escape", R"(["a\x"])", "Invalid escape character in string. at offset 3"},
      {"short unicode escape", R"(["\u12"])",
       "Incorrect hex digit after \\u escape in string. at offset 2"},
      {"lone high surrogate", R"(["\ud800x"])",
       "The surrogate pair in string is invalid. at offset 2"},
      {"high surrogate then not a low one", R"(["\ud800\u0041"])",
       "The surrogate pair in string is invalid. at offset 2"},
      {"lone low surrogate (its UTF-8 would be invalid)", R"(["\udc00"])",
       "The surrogate pair in string is invalid. at offset 2"},
      {"invalid UTF-8 byte", "[\"\xff\"]", "Invalid encoding in string. at offset 2"},
      {"overlong UTF-8", "[\"\xc0\xaf\"]", "Invalid encoding in string. at offset 2"},
      {"UTF-8 surrogate", "[\"\xed\xa0\x80\"]", "Invalid encoding in string. at offset 2"},
      {"UTF-8 above U+10FFFF", "[\"\xf4\x90\x80\x80\"]", "Invalid encoding in string. at offset 2"},
      {"truncated UTF-8", "[\"\xe2\x82", "Invalid encoding in string. at offset 2"},
      {"non-ASCII outside a string", "[\xc3\xa9]", "Invalid value. at offset 1"},
      {"512 levels", Nested(512), Nested(512)},
      {"513 levels", Nested(513), "JSON nested deeper than 512 levels"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    json::Document d;
    Status err = json::ParseUntrusted(c.text, d);
    CHECK((err.ok() ? json::Serialize(d) : err.message()) == c.result);
  }
}

TEST_CASE("ParseUntrusted rejects nesting past the bound however the rest of the text looks") {
  json::Document d;
  for (const std::string& text :
       {std::string(300000, '['), std::string(600, '[') + "1" + std::string(600, ']'),
        std::string(513, '[') + "garbage", "{\"a\":" + Nested(600) + "}"}) {
    Status err = json::ParseUntrusted(text, d);
    REQUIRE_FALSE(err.ok());
    CHECK(err.message() == "JSON nested deeper than 512 levels");
  }
  // Brackets inside strings are text.
  CHECK(json::ParseUntrusted("[\"" + std::string(1000, '[') + "\"]", d).ok());
}

TEST_CASE("ParseUntrusted agrees with RapidJSON's parser on fixtures and their corruptions") {
  // Byte-level corruptions of the recorded reviews: deletions, insertions of JSON fragments,
  // random bytes, truncations. Both parsers must accept the same texts and build the same values;
  // where both reject, the messages agree too. Deliberate differences are excluded: RapidJSON 1.1
  // reads a NUL as the end of the text, decodes a lone \udc00 to invalid UTF-8, and skips stray
  // byte order mark bytes at the start.
  const char* fragments[] = {"\"",
                             "\\",
                             "\\u",
                             "\\ud800",
                             "\\udbff\\udfff",
                             "{",
                             "}",
                             "[",
                             "]",
                             ",",
                             ":",
                             "-",
                             "0",
                             "1e",
                             "1.5",
                             "1e400",
                             "01",
                             "true",
                             "nul",
                             "\xff",
                             "\xc3\xa9",
                             "\xed\xa0\x80",
                             "\xf0\x9f\x98\x80",
                             " ",
                             "\x01",
                             "\\x",
                             "18446744073709551616",
                             "-9223372036854775809"};
  const std::vector<std::string> seeds = RecordedFixtures();
  REQUIRE(seeds.size() >= 5);
  Lcg rng{42};
  int compared = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = seeds[rng.Next() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng.Next() % 3); edits > 0; --edits) {
      const std::size_t at = rng.Next() % text.size();
      switch (rng.Next() % 4) {
        case 0:
          text.erase(at, 1 + rng.Next() % 3);
          break;
        case 1:
          text.insert(at, fragments[rng.Next() % std::size(fragments)]);
          break;
        case 2:
          text[at] = static_cast<char>(rng.Next());
          break;
        default:
          text.resize(at);
          break;
      }
      if (text.empty()) text = "x";
    }
    // RapidJSON also drops any of the three byte order mark bytes from the start, alone.
    const int first = text[0] & 0xFF;
    const bool partialBom =
        (first == 0xEF || first == 0xBB || first == 0xBF) && text.rfind("\xEF\xBB\xBF", 0) != 0;
    if (text.find('\0') != std::string::npos || partialBom) continue;
    json::Document ours, theirs;
    Status err = json::ParseUntrusted(text, ours);
    const std::string reference = ReferenceError(text, theirs);
    if (!err.ok() && err.message() != reference &&
        err.message().find("surrogate") != std::string::npos) {
      continue;
    }
    CAPTURE(text);
    REQUIRE(err.ok() == reference.empty());
    if (!err.ok()) {
      CHECK(err.message() == reference);
    } else {
      CHECK(json::Serialize(ours) == WriterText(theirs));
    }
    ++compared;
  }
  CHECK(compared > 3500);
}

TEST_CASE("ParseUntrustedBorrowing builds the same document, pointing into the text") {
  for (const std::string& text : RecordedFixtures()) {
    json::Document copied, borrowed;
    REQUIRE(json::ParseUntrusted(text, copied).ok());
    REQUIRE(json::ParseUntrustedBorrowing(text, borrowed).ok());
    CHECK(json::Serialize(borrowed) == json::Serialize(copied));
  }
  const std::string text = R"({"plain":"abc","escaped":"a\"b"})";
  json::Document d;
  REQUIRE(json::ParseUntrustedBorrowing(text, d).ok());
  auto inText = [&](const json::Value* v) {
    return v->GetString() >= text.data() && v->GetString() < text.data() + text.size();
  };
  CHECK(inText(json::Find(&d, "plain")));
  CHECK_FALSE(inText(json::Find(&d, "escaped")));  // decoded: a copy
  CHECK(json::StringOr(&d, "escaped") == "a\"b");
  // Errors are the same as ParseUntrusted's.
  CHECK(json::ParseUntrustedBorrowing("[\"\xff\"]", d) == json::ParseUntrusted("[\"\xff\"]", d));
}

TEST_CASE("Serialize and SerializeCanonical write what RapidJSON's Writer writes") {
  std::string everyByte = "[\"";
  for (int c = 1; c < 256; ++c) {
    if (c == '"' || c == '\\') everyByte += '\\';
    if (c < 0x20 || c >= 0x80) continue;  // added below as escapes / valid UTF-8
    everyByte += static_cast<char>(c);
  }
  everyByte += "\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\u007f\xc3\xa9\"]";
  std::vector<std::string> texts = {
      everyByte,
      R"([0,-1,2147483648,4294967296,-2147483649,18446744073709551615,-9223372036854775808])",
      R"([0.1,1e-7,1.0,-0.0,1e300,2.5E+10,123456789.125])",
      R"({"b":{"z":[1,{"y":null,"x":true}],"a":"\u00e9"},"a":[],"":{}})",
      "\"" + std::string(100, 'x') + "\\\"" + std::string(33, 'y') + "\\n\"",
  };
  for (const std::string& fixture : RecordedFixtures()) texts.push_back(fixture);
  for (const std::string& text : texts) {
    json::Document d;
    REQUIRE(json::ParseUntrusted(text, d).ok());
    CHECK(json::Serialize(d) == WriterText(d));
    // Canonical text is the Writer's text of the same document with members sorted.
    json::Document sorted;
    REQUIRE(json::ParseUntrusted(json::SerializeCanonical(d), sorted).ok());
    CHECK(json::SerializeCanonical(d) == WriterText(sorted));
    CHECK(json::SerializeCanonical(sorted) == json::SerializeCanonical(d));
  }
  std::string out = "x:";
  json::AppendString(out, "a\"\\\n\x01\xc3\xa9");
  CHECK(out == "x:\"a\\\"\\\\\\n\\u0001\xc3\xa9\"");
}

TEST_CASE("Copy and CopySharingStrings copy the structure; only the latter shares strings") {
  json::Document d;
  REQUIRE(json::ParseUntrusted(
              R"({"m":{"labels":{"a":"1","long-key-for-a-heap-string":"v"}},"n":[1,2.5,null]})", d)
              .ok());
  json::Document deep, shared;
  static_cast<json::Value&>(deep) = json::Copy(d, deep.GetAllocator());
  static_cast<json::Value&>(shared) = json::CopySharingStrings(d, shared.GetAllocator());
  CHECK(json::Serialize(deep) == json::Serialize(d));
  CHECK(json::Serialize(shared) == json::Serialize(d));
  const json::Value* original = json::Path(&d, {"m", "labels", "long-key-for-a-heap-string"});
  CHECK(json::Path(&shared, {"m", "labels", "long-key-for-a-heap-string"})->GetString() ==
        original->GetString());
  CHECK(json::Path(&deep, {"m", "labels", "long-key-for-a-heap-string"})->GetString() !=
        original->GetString());
  // Changing the copy leaves the original alone.
  json::SetString(*json::FindMutable(json::FindMutable(&shared, "m"), "labels"), "a", "2",
                  shared.GetAllocator());
  CHECK(json::StringOr(json::Path(&d, {"m", "labels"}), "a") == "1");
}

TEST_CASE("CopyAlong copies the objects along its paths one level each and shares the rest") {
  json::Document d;
  REQUIRE(
      json::ParseUntrusted(
          R"({"metadata":{"name":"web","labels":{"app":"web"},"annotations":{"a":"1"}},)"
          R"("spec":{"paused":false,"template":{"metadata":{"labels":{"app":"web"}},)"
          R"("spec":{"containers":[{"name":"app","image":"nginx"}]}}},"status":{"replicas":3}})",
          d)
          .ok());
  const std::string before = json::Serialize(d);
  json::Document copy;
  static_cast<json::Value&>(copy) = json::CopyAlong(
      d, {{"metadata", "annotations"}, {"spec", "template", "metadata", "annotations"}},
      copy.GetAllocator());
  CHECK(json::Serialize(copy) == before);
  auto members = [](const json::Value& v, std::initializer_list<std::string_view> path) {
    return json::Path(&v, path)->MemberBegin();
  };
  // Copied: the top level and every object along a path that exists.
  CHECK(copy.MemberBegin() != d.MemberBegin());
  CHECK(members(copy, {"metadata"}) != members(d, {"metadata"}));
  CHECK(members(copy, {"metadata", "annotations"}) != members(d, {"metadata", "annotations"}));
  CHECK(members(copy, {"spec"}) != members(d, {"spec"}));
  CHECK(members(copy, {"spec", "template", "metadata"}) !=
        members(d, {"spec", "template", "metadata"}));
  // Shared: everything else (the path's missing end, "annotations" of the template, is not made).
  CHECK(members(copy, {"metadata", "labels"}) == members(d, {"metadata", "labels"}));
  CHECK(members(copy, {"status"}) == members(d, {"status"}));
  CHECK(members(copy, {"spec", "template", "spec"}) == members(d, {"spec", "template", "spec"}));
  CHECK(json::Path(&copy, {"spec", "template", "metadata", "annotations"}) == nullptr);
  // What a handler may do to the copied objects leaves the original as it was.
  json::Allocator& a = copy.GetAllocator();
  json::Value& meta = *json::FindMutable(&copy, "metadata");
  json::SetString(*json::FindMutable(&meta, "annotations"), "a", "2", a);
  json::SetString(*json::FindMutable(&meta, "annotations"), "b", "3", a);
  json::Remove(meta, "name");
  json::Value& spec = *json::FindMutable(&copy, "spec");
  json::Set(spec, "paused", json::Value(true), a);
  json::Value& tmeta = *json::FindMutable(json::FindMutable(&spec, "template"), "metadata");
  json::SetString(json::EnsureObject(tmeta, "annotations", a), "r", "now", a);
  CHECK(json::Serialize(d) == before);
  CHECK(json::Serialize(copy) ==
        R"({"metadata":{"labels":{"app":"web"},"annotations":{"a":"2","b":"3"}},)"
        R"("spec":{"paused":true,"template":{"metadata":{"labels":{"app":"web"},)"
        R"("annotations":{"r":"now"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}},)"
        R"("status":{"replicas":3}})");
  // Not an object: nothing to copy, and a scalar is copied as itself.
  json::Document scalar;
  REQUIRE(json::ParseUntrusted(R"("text")", scalar).ok());
  CHECK(json::Serialize(json::CopyAlong(scalar, {{"metadata"}}, copy.GetAllocator())) ==
        R"("text")");
}

TEST_CASE("RequestArena: documents of consecutive and nested arenas stay intact") {
  const std::vector<std::string> fixtures = RecordedFixtures();
  std::string big = "[";
  for (int i = 0; i < 20000; ++i) big += (i ? ",\"" : "\"") + std::to_string(i) + "-entry\"";
  big += "]";
  for (int round = 0; round < 3; ++round) {
    for (const std::string& text : {fixtures[0], big, fixtures[1]}) {
      json::RequestArena outer;
      json::Document a(&outer.allocator());
      REQUIRE(json::ParseUntrusted(text, a).ok());
      {
        json::RequestArena nested;  // the thread's buffer is taken: plain chunks
        json::Document b(&nested.allocator());
        REQUIRE(json::ParseUntrusted(text, b).ok());
        CHECK(json::Serialize(b) == json::Serialize(a));
      }
      json::Document fresh;
      REQUIRE(json::ParseUntrusted(text, fresh).ok());
      CHECK(json::Serialize(a) == json::Serialize(fresh));
    }
  }
}
