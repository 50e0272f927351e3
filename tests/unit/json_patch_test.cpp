#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lib/json.h"
#include "lib/json_patch.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::Parse;

// Applies `patchText` to `docText`; returns the canonical result, or "ERROR: <message>".
std::string ApplyText(std::string_view docText, std::string_view patchText) {
  json::Document doc = Parse(docText);
  json::Document patch = Parse(patchText);
  Status err = json_patch::Apply(patch, doc);
  if (!err.ok()) return "ERROR: " + err.message();
  return json::SerializeCanonical(doc);
}

std::string Canonical(std::string_view text) {
  return json::SerializeCanonical(Parse(text));
}

std::string DiffText(std::string_view from, std::string_view to) {
  json::Document a = Parse(from);
  json::Document b = Parse(to);
  json::Document scratch;
  return json::Serialize(json_patch::Diff(a, b, scratch.GetAllocator()));
}

struct ApplyCase {
  const char* name;
  const char* doc;
  const char* patch;
  const char* expected;  // nullptr: the patch must fail
  const char* error;     // substring of the error when it fails
};

// RFC 6902 Appendix A, every example in order.
const ApplyCase kRfcAppendixA[] = {
    {"A.1 adding an object member", R"({"foo":"bar"})",
     R"([{"op":"add","path":"/baz","value":"qux"}])", R"({"baz":"qux","foo":"bar"})", nullptr},
    {"A.2 adding an array element", R"({"foo":["bar","baz"]})",
     R"([{"op":"add","path":"/foo/1","value":"qux"}])", R"({"foo":["bar","qux","baz"]})", nullptr},
    {"A.3 removing an object member", R"({"baz":"qux","foo":"bar"})",
     R"([{"op":"remove","path":"/baz"}])", R"({"foo":"bar"})", nullptr},
    {"A.4 removing an array element", R"({"foo":["bar","qux","baz"]})",
     R"([{"op":"remove","path":"/foo/1"}])", R"({"foo":["bar","baz"]})", nullptr},
    {"A.5 replacing a value", R"({"baz":"qux","foo":"bar"})",
     R"([{"op":"replace","path":"/baz","value":"boo"}])", R"({"baz":"boo","foo":"bar"})", nullptr},
    {"A.6 moving a value", R"({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}})",
     R"([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])",
     R"({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})", nullptr},
    {"A.7 moving an array element", R"({"foo":["all","grass","cows","eat"]})",
     R"([{"op":"move","from":"/foo/1","path":"/foo/3"}])",
     R"({"foo":["all","cows","eat","grass"]})", nullptr},
    {"A.8 testing a value: success", R"({"baz":"qux","foo":["a",2,"c"]})",
     R"([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}])",
     R"({"baz":"qux","foo":["a",2,"c"]})", nullptr},
    {"A.9 testing a value: error", R"({"baz":"qux"})",
     R"([{"op":"test","path":"/baz","value":"bar"}])", nullptr,
     "operation 0 (test at \"/baz\"): test failed"},
    {"A.10 adding a nested member object", R"({"foo":"bar"})",
     R"([{"op":"add","path":"/child","value":{"grandchild":{}}}])",
     R"({"foo":"bar","child":{"grandchild":{}}})", nullptr},
    {"A.11 ignoring unrecognized elements", R"({"foo":"bar"})",
     R"([{"op":"add","path":"/baz","value":"qux","xyz":123}])", R"({"foo":"bar","baz":"qux"})",
     nullptr},
    {"A.12 adding to a nonexistent target", R"({"foo":"bar"})",
     R"([{"op":"add","path":"/baz/bat","value":"qux"}])", nullptr,
     "operation 0 (add at \"/baz/bat\"): member \"baz\" does not exist"},
    {"A.13 invalid JSON Patch document", R"({"foo":"bar"})",
     R"([{"op":"add","path":"/baz","value":"qux","op":"remove"}])", nullptr,
     "operation 0: member \"op\" is given more than once"},
    {"A.14 ~ escape ordering", R"({"/":9,"~1":10})", R"([{"op":"test","path":"/~01","value":10}])",
     R"({"/":9,"~1":10})", nullptr},
    {"A.15 comparing strings and numbers", R"({"/":9,"~1":10})",
     R"([{"op":"test","path":"/~01","value":"10"}])", nullptr, "test failed"},
    {"A.16 adding an array value", R"({"foo":["bar"]})",
     R"([{"op":"add","path":"/foo/-","value":["abc","def"]}])", R"({"foo":["bar",["abc","def"]]})",
     nullptr},
};

// Pointer edge cases and malformed operations (RFC 6901, RFC 6902 §4-5).
const ApplyCase kEdgeCases[] = {
    {"add replaces an existing member", R"({"a":1})", R"([{"op":"add","path":"/a","value":2}])",
     R"({"a":2})", nullptr},
    {"add at the root replaces the document", R"({"a":1})",
     R"([{"op":"add","path":"","value":[1]}])", "[1]", nullptr},
    {"replace at the root", R"({"a":1})", R"([{"op":"replace","path":"","value":"x"}])", R"("x")",
     nullptr},
    {"add at index == size appends", R"([1,2])", R"([{"op":"add","path":"/2","value":3}])",
     "[1,2,3]", nullptr},
    {"add at index 0 prepends", R"([1,2])", R"([{"op":"add","path":"/0","value":0}])", "[0,1,2]",
     nullptr},
    {"add past the end", R"([1,2])", R"([{"op":"add","path":"/3","value":3}])", nullptr,
     "not valid for inserting into an array of 2 elements"},
    {"index with a leading zero", R"({"foo":[1,2]})", R"([{"op":"remove","path":"/foo/01"}])",
     nullptr, "array index \"01\" is not valid"},
    {"index that is not a number", R"({"foo":[1,2]})",
     R"([{"op":"replace","path":"/foo/1e0","value":0}])", nullptr, "array index \"1e0\""},
    {"negative index", R"([1,2])", R"([{"op":"remove","path":"/-1"}])", nullptr,
     "array index \"-1\""},
    {"huge index", R"([1,2])", R"([{"op":"remove","path":"/99999999999999999999"}])", nullptr,
     "array index"},
    {"'-' is only for add", R"([1,2])", R"([{"op":"remove","path":"/-"}])", nullptr,
     "array index \"-\""},
    {"'-' in the middle of a path", R"([[1]])", R"([{"op":"add","path":"/-/0","value":2}])",
     nullptr, "array index \"-\""},
    {"remove an absent member", R"({"a":1})", R"([{"op":"remove","path":"/b"}])", nullptr,
     "operation 0 (remove at \"/b\"): member \"b\" does not exist"},
    {"replace an absent member", R"({"a":1})", R"([{"op":"replace","path":"/b","value":1}])",
     nullptr, "member \"b\" does not exist"},
    {"remove the root", R"({"a":1})", R"([{"op":"remove","path":""}])", nullptr,
     "cannot remove the whole document"},
    {"descend into a scalar", R"({"a":1})", R"([{"op":"add","path":"/a/b","value":1}])", nullptr,
     "not an object or an array"},
    {"empty key is a member name", R"({"":1})", R"([{"op":"replace","path":"/","value":2}])",
     R"({"":2})", nullptr},
    {"copy", R"({"a":{"b":[1]}})", R"([{"op":"copy","from":"/a/b","path":"/c"}])",
     R"({"a":{"b":[1]},"c":[1]})", nullptr},
    {"copy from an absent path", R"({"a":1})", R"([{"op":"copy","from":"/x","path":"/c"}])",
     nullptr, "member \"x\" does not exist"},
    {"move onto itself is a no-op", R"({"a":{"b":1}})",
     R"([{"op":"move","from":"/a","path":"/a"}])", R"({"a":{"b":1}})", nullptr},
    {"move into its own child", R"({"a":{"b":1}})",
     R"([{"op":"move","from":"/a","path":"/a/b/c"}])", nullptr,
     "cannot move a value into one of its own children"},
    {"move replaces an existing member", R"({"a":1,"b":2})",
     R"([{"op":"move","from":"/a","path":"/b"}])", R"({"b":1})", nullptr},
    {"test numbers numerically", R"({"a":1})", R"([{"op":"test","path":"/a","value":1.0}])",
     R"({"a":1})", nullptr},
    {"test does not confuse -1 with 2^64-1", R"({"a":-1})",
     R"([{"op":"test","path":"/a","value":18446744073709551615}])", nullptr, "test failed"},
    {"test objects regardless of member order", R"({"a":{"x":1,"y":[true,null]}})",
     R"([{"op":"test","path":"/a","value":{"y":[true,null],"x":1}}])",
     R"({"a":{"x":1,"y":[true,null]}})", nullptr},
    {"test arrays in order", R"({"a":[1,2]})", R"([{"op":"test","path":"/a","value":[2,1]}])",
     nullptr, "test failed"},
    {"test true against false", R"({"a":true})", R"([{"op":"test","path":"/a","value":false}])",
     nullptr, "test failed"},
    {"empty patch", R"({"a":1})", "[]", R"({"a":1})", nullptr},
    {"patch is not an array", R"({"a":1})", R"({"op":"remove","path":"/a"})", nullptr,
     "must be an array"},
    {"operation is not an object", R"({"a":1})", R"(["remove"])", nullptr,
     "operation 0: is not an object"},
    {"unknown op", R"({"a":1})", R"([{"op":"delete","path":"/a"}])", nullptr,
     "unknown op \"delete\""},
    {"op missing", R"({"a":1})", R"([{"path":"/a"}])", nullptr, "\"op\" must be a string"},
    {"op not a string", R"({"a":1})", R"([{"op":1,"path":"/a"}])", nullptr,
     "\"op\" must be a string"},
    {"path missing", R"({"a":1})", R"([{"op":"remove"}])", nullptr, "\"path\" must be a string"},
    {"path not a string", R"({"a":1})", R"([{"op":"remove","path":["a"]}])", nullptr,
     "\"path\" must be a string"},
    {"path without a leading slash", R"({"a":1})", R"([{"op":"remove","path":"a"}])", nullptr,
     "\"path\" \"a\" is not a JSON pointer"},
    {"bad escape ~2", R"({"a":1})", R"([{"op":"remove","path":"/a~2"}])", nullptr,
     "is not a JSON pointer"},
    {"trailing ~", R"({"a":1})", R"([{"op":"remove","path":"/a~"}])", nullptr,
     "is not a JSON pointer"},
    {"value missing for add", R"({"a":1})", R"([{"op":"add","path":"/b"}])", nullptr,
     "operation 0 (add at \"/b\"): \"value\" is missing"},
    {"value missing for test", R"({"a":1})", R"([{"op":"test","path":"/a"}])", nullptr,
     "\"value\" is missing"},
    {"null is a value", R"({"a":1})", R"([{"op":"replace","path":"/a","value":null}])",
     R"({"a":null})", nullptr},
    {"from missing for move", R"({"a":1})", R"([{"op":"move","path":"/b"}])", nullptr,
     "\"from\" must be a string"},
    {"from not a pointer for copy", R"({"a":1})", R"([{"op":"copy","from":"a","path":"/b"}])",
     nullptr, "\"from\" \"a\" is not a JSON pointer"},
    {"malformed op after good ones names its index", R"({"a":1})",
     R"([{"op":"test","path":"/a","value":1},{"op":"remove","path":"/a","path":"/b"}])", nullptr,
     "operation 1: member \"path\" is given more than once"},
};

void CheckCase(const ApplyCase& c) {
  CAPTURE(c.name);
  std::string got = ApplyText(c.doc, c.patch);
  if (c.expected != nullptr) {
    CHECK(got == Canonical(c.expected));
  } else {
    REQUIRE(got.rfind("ERROR: ", 0) == 0);
    CHECK_MESSAGE(got.find(c.error) != std::string::npos, got);
  }
}

}  // namespace

TEST_CASE("Apply: every example of RFC 6902 Appendix A") {
  for (const auto& c : kRfcAppendixA) CheckCase(c);
}

TEST_CASE("Apply: pointer edge cases and malformed operations") {
  for (const auto& c : kEdgeCases) CheckCase(c);
}

TEST_CASE("Apply: keys with '/' and '~' are reached through ~1 and ~0") {
  const ApplyCase cases[] = {
      {"add an annotation key", R"({"metadata":{"labels":{}}})",
       R"([{"op":"add","path":"/metadata/labels/inplace-webhook.io~1state","value":"Updating"}])",
       R"({"metadata":{"labels":{"inplace-webhook.io/state":"Updating"}}})", nullptr},
      {"tilde key", R"({"a~b":1})", R"([{"op":"replace","path":"/a~0b","value":2}])",
       R"({"a~b":2})", nullptr},
      {"~01 is the key ~1, not /", R"({"~1":1,"/":2})", R"([{"op":"remove","path":"/~01"}])",
       R"({"/":2})", nullptr},
      {"unescaped slash is a separator", R"({"a/b":1})", R"([{"op":"remove","path":"/a/b"}])",
       nullptr, "member \"a\" does not exist"},
      {"move between escaped keys", R"({"x/y":{"a~b":1}})",
       R"([{"op":"move","from":"/x~1y/a~0b","path":"/~0~1"}])", R"({"x/y":{},"~/":1})", nullptr},
  };
  for (const auto& c : cases) CheckCase(c);
}

TEST_CASE("Apply is atomic: a failing operation leaves the document unchanged") {
  json::Document doc = Parse(R"({"a":[1,2,3],"b":{"c":"d"}})");
  const std::string before = json::Serialize(doc);
  json::Document patch = Parse(R"([
    {"op":"add","path":"/a/-","value":4},
    {"op":"remove","path":"/b/c"},
    {"op":"replace","path":"","value":{}},
    {"op":"add","path":"/new","value":1},
    {"op":"remove","path":"/b/missing"}
  ])");
  Status err = json_patch::Apply(patch, doc);
  REQUIRE_FALSE(err.ok());
  CHECK(err.message().find("operation 4 (remove at \"/b/missing\")") != std::string::npos);
  CHECK(json::Serialize(doc) == before);
}

TEST_CASE("Apply keeps a patch allocated in the document's allocator valid") {
  json::Document doc = Parse(R"({"a":1})");
  json::Document target = Parse(R"({"a":2,"b":[true]})");
  json::Value patch = json_patch::Diff(doc, target, doc.GetAllocator());
  const std::string patchText = json::Serialize(patch);
  REQUIRE(json_patch::Apply(patch, doc).ok());
  CHECK(json::Serialize(patch) == patchText);
  CHECK(json::SerializeCanonical(doc) == json::SerializeCanonical(target));
}

TEST_CASE("Apply bounds what an untrusted patch can build") {
  SUBCASE("copy cannot grow the document exponentially") {
    json::Document doc = Parse(R"({"a":{"b":[1,2,3,4,5,6,7,8]}})");
    std::string ops = "[";
    for (int i = 0; i < 40; ++i) {
      if (i > 0) ops += ",";
      ops += R"({"op":"copy","from":"/a","path":"/a/c)" + std::to_string(i) + "\"}";
    }
    ops += "]";
    json::Document patch = Parse(ops);
    const std::string before = json::Serialize(doc);
    Status err = json_patch::Apply(patch, doc);
    REQUIRE_FALSE(err.ok());
    CHECK(err.message().find("copy operations would duplicate") != std::string::npos);
    CHECK(json::Serialize(doc) == before);
  }
  SUBCASE("nesting stays within json::kMaxDepth") {
    // 500 nested objects {"a":{"a":...{}}}: the innermost object sits at depth 500.
    std::string text;
    std::string path;
    for (int i = 0; i < 500; ++i) {
      text += R"({"a":)";
      path += "/a";
    }
    text += "{}";
    text += std::string(500, '}');
    auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
    // A value of depth d placed under 501 tokens reaches 501 + d.
    json::Document fits = Parse(text);
    json::Document ok = Parse(R"([{"op":"add","path":")" + path + R"(/x","value":)" +
                              nested(json::kMaxDepth - 501) + "}]");
    CHECK(json_patch::Apply(ok, fits).ok());
    json::Document tooDeep = Parse(text);
    json::Document bad = Parse(R"([{"op":"add","path":")" + path + R"(/x","value":)" +
                               nested(json::kMaxDepth - 500) + "}]");
    Status err = json_patch::Apply(bad, tooDeep);
    REQUIRE_FALSE(err.ok());
    CHECK(err.message().find("nested deeper than 512") != std::string::npos);
  }
}

TEST_CASE("Diff: exact, deterministic operations") {
  struct Case {
    const char* name;
    const char* from;
    const char* to;
    const char* patch;
  };
  const Case cases[] = {
      {"equal objects", R"({"a":[1,{"b":null}]})", R"({"a":[1,{"b":null}]})", "[]"},
      {"equal regardless of member order", R"({"a":1,"b":2})", R"({"b":2,"a":1})", "[]"},
      {"equal scalars", "3", "3", "[]"},
      {"removes in from's order, then adds and replaces in to's order",
       R"({"a":1,"b":2,"c":3,"z":0})", R"({"d":4,"c":30,"a":1,"e":5})",
       R"([{"op":"remove","path":"/b"},{"op":"remove","path":"/z"},)"
       R"({"op":"add","path":"/d","value":4},{"op":"replace","path":"/c","value":30},)"
       R"({"op":"add","path":"/e","value":5}])"},
      {"nested member", R"({"a":{"b":{"c":1}}})", R"({"a":{"b":{"c":2}}})",
       R"([{"op":"replace","path":"/a/b/c","value":2}])"},
      {"escaped keys", R"({"m":{"a/b":1,"c~d":1}})", R"({"m":{"a/b":2,"e~/":1}})",
       R"([{"op":"remove","path":"/m/c~0d"},{"op":"replace","path":"/m/a~1b","value":2},)"
       R"({"op":"add","path":"/m/e~0~1","value":1}])"},
      {"array shrinks: removes from the end backwards", "[1,2,3,4]", "[1,9]",
       R"([{"op":"replace","path":"/1","value":9},{"op":"remove","path":"/3"},)"
       R"({"op":"remove","path":"/2"}])"},
      {"array grows: adds at the end", "[1]", "[1,2,3]",
       R"([{"op":"add","path":"/1","value":2},{"op":"add","path":"/2","value":3}])"},
      {"elements diffed in place", R"([{"a":1},{"b":1}])", R"([{"a":1},{"b":2}])",
       R"([{"op":"replace","path":"/1/b","value":2}])"},
      {"type change is one replace", R"({"a":{"b":1}})", R"({"a":[1]})",
       R"([{"op":"replace","path":"/a","value":[1]}])"},
      {"type change at the root", R"({"a":1})", "[1]",
       R"([{"op":"replace","path":"","value":[1]}])"},
      {"true to false", R"({"a":true})", R"({"a":false})",
       R"([{"op":"replace","path":"/a","value":false}])"},
      {"1 and 1.0 are written differently", R"({"a":1})", R"({"a":1.0})",
       R"([{"op":"replace","path":"/a","value":1.0}])"},
      {"-1 is not 2^64-1", "[-1]", "[18446744073709551615]",
       R"([{"op":"replace","path":"/0","value":18446744073709551615}])"},
      {"duplicate member names: the object is replaced whole", R"({"a":{"x":1,"x":2}})",
       R"({"a":{"x":1,"x":3}})", R"([{"op":"replace","path":"/a","value":{"x":1,"x":3}}])"},
      {"null to object", R"({"a":null})", R"({"a":{}})",
       R"([{"op":"replace","path":"/a","value":{}}])"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(DiffText(c.from, c.to) == c.patch);
    CHECK(DiffText(c.from, c.to) == DiffText(c.from, c.to));
  }
}

// ---------------------------------------------------------------------------------------------
// Round trip over the recorded fixtures and systematic mutations of them.

namespace {

using test::ReadFile;

std::vector<std::filesystem::path> RecordedFixtures() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path dir =
      std::filesystem::path(IW_SOURCE_DIR) / "tests/fixtures/recorded";
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

using Tokens = std::vector<std::string>;

json::Value* At(json::Value& root, const Tokens& tokens) {
  json::Value* v = &root;
  for (const auto& t : tokens) {
    v = v->IsArray() ? &(*v)[static_cast<rapidjson::SizeType>(std::stoul(t))]
                     : json::FindMutable(v, t);
    REQUIRE(v != nullptr);
  }
  return v;
}

std::string Pointer(const Tokens& tokens) {
  std::string out;
  for (const auto& t : tokens) out += "/" + json::EscapePointerToken(t);
  return out;
}

// Every location in `v` (the root included), depth first.
void Locations(const json::Value& v, Tokens& here, std::vector<Tokens>& out) {
  out.push_back(here);
  if (v.IsObject()) {
    for (const auto& m : v.GetObject()) {
      here.emplace_back(json::View(m.name));
      Locations(m.value, here, out);
      here.pop_back();
    }
  } else if (v.IsArray()) {
    for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
      here.push_back(std::to_string(i));
      Locations(v[i], here, out);
      here.pop_back();
    }
  }
}

// A mutation of a copy of the document, and the single operation Diff must give for it
// (op empty: any non-empty patch).
struct Mutation {
  std::string what;
  std::function<void(json::Document&)> apply;
  std::string op;
  std::string path;
};

// Checks Apply(Diff(a, b), a) == b and Apply(Diff(b, a), b) == a.
void CheckRoundTrip(const json::Value& a, const json::Value& b) {
  json::Document scratch;
  for (int direction = 0; direction < 2; ++direction) {
    const json::Value& from = direction == 0 ? a : b;
    const json::Value& to = direction == 0 ? b : a;
    json::Value patch = json_patch::Diff(from, to, scratch.GetAllocator());
    json::Document doc;
    doc.CopyFrom(from, doc.GetAllocator());
    Status err = json_patch::Apply(patch, doc);
    REQUIRE_MESSAGE(err.ok(), err.message());
    REQUIRE(json::SerializeCanonical(doc) == json::SerializeCanonical(to));
  }
}

std::vector<Mutation> MutationsOf(json::Value& root) {
  std::vector<Mutation> out;
  std::vector<Tokens> locations;
  Tokens here;
  Locations(root, here, locations);
  for (const auto& loc : locations) {
    const json::Value* v = At(root, loc);
    const std::string p = Pointer(loc);
    if (!loc.empty() && At(root, Tokens(loc.begin(), loc.end() - 1))->IsObject()) {
      const Tokens parent(loc.begin(), loc.end() - 1);
      const std::string key = loc.back();
      out.push_back({"remove " + p,
                     [parent, key](json::Document& d) { json::Remove(*At(d, parent), key); },
                     "remove", p});
      const bool isString = v->IsString();
      out.push_back({"retype " + p,
                     [loc, isString](json::Document& d) {
                       json::Value* t = At(d, loc);
                       if (isString) {
                         t->SetInt(42);
                       } else {
                         t->SetString("changed", d.GetAllocator());
                       }
                     },
                     "replace", p});
      const std::string sibling = key + "/x~y";
      out.push_back({"add sibling of " + p,
                     [parent, sibling](json::Document& d) {
                       json::SetString(*At(d, parent), sibling, "v", d.GetAllocator());
                     },
                     "add", Pointer(parent) + "/" + json::EscapePointerToken(sibling)});
    }
    if (v->IsArray()) {
      const rapidjson::SizeType n = v->Size();
      out.push_back({"append to " + p,
                     [loc](json::Document& d) {
                       At(d, loc)->PushBack(json::Value("appended/~"), d.GetAllocator());
                     },
                     "add", p + "/" + std::to_string(n)});
      if (n > 0) {
        out.push_back({"drop last of " + p, [loc](json::Document& d) { At(d, loc)->PopBack(); },
                       "remove", p + "/" + std::to_string(n - 1)});
      }
      if (n > 1 && !((*v)[0] == (*v)[n - 1])) {
        out.push_back({"swap ends of " + p,
                       [loc, n](json::Document& d) {
                         json::Value* arr = At(d, loc);
                         (*arr)[0].Swap((*arr)[n - 1]);
                       },
                       "", ""});
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("Diff/Apply round trip over recorded fixtures and their mutations") {
  const auto files = RecordedFixtures();
  REQUIRE(files.size() >= 5);
  std::size_t mutations = 0;
  for (const auto& file : files) {
    CAPTURE(file.filename().string());
    json::Document a = Parse(ReadFile(file));

    json::Document scratch;
    CHECK(json::Serialize(json_patch::Diff(a, a, scratch.GetAllocator())) == "[]");
    CheckRoundTrip(a, a);

    // The recorded UPDATE requests: oldObject -> object and back.
    const json::Value* oldObject = json::Path(&a, {"request", "oldObject"});
    const json::Value* object = json::Path(&a, {"request", "object"});
    if (oldObject != nullptr && object != nullptr && oldObject->IsObject()) {
      CheckRoundTrip(*oldObject, *object);
      CHECK(json::Serialize(json_patch::Diff(*oldObject, *object, scratch.GetAllocator())) != "[]");
    }

    for (const auto& m : MutationsOf(a)) {
      CAPTURE(m.what);
      json::Document b;
      b.CopyFrom(a, b.GetAllocator());
      m.apply(b);
      CheckRoundTrip(a, b);
      json::Value patch = json_patch::Diff(a, b, scratch.GetAllocator());
      if (m.op.empty()) {
        CHECK(patch.Size() > 0);
      } else {
        REQUIRE(patch.Size() == 1);
        CHECK(json::StringOr(&patch[0], "op") == m.op);
        CHECK(json::StringOr(&patch[0], "path") == m.path);
      }
      ++mutations;
    }
  }
  CHECK(mutations > 1000);
}

TEST_CASE("Diff of a pure label change on a Deployment is one operation at an escaped path") {
  const auto path = std::filesystem::path(IW_SOURCE_DIR) /
                    "tests/fixtures/recorded/kubewarden-deployment-create.json";
  json::Document review = Parse(ReadFile(path));
  const json::Value* object = json::Path(&review, {"request", "object"});
  REQUIRE(object != nullptr);
  REQUIRE(json::Path(object, {"spec", "template", "metadata", "labels", "app"}) != nullptr);

  json::Document before;
  before.CopyFrom(*object, before.GetAllocator());
  json::Document scratch;

  SUBCASE("new label") {
    json::Document after;
    after.CopyFrom(before, after.GetAllocator());
    json::SetString(*At(after, {"spec", "template", "metadata", "labels"}),
                    "inplace-webhook.io/state", "Updating", after.GetAllocator());
    CHECK(json::Serialize(json_patch::Diff(before, after, scratch.GetAllocator())) ==
          R"([{"op":"add","path":"/spec/template/metadata/labels/inplace-webhook.io~1state",)"
          R"("value":"Updating"}])");
  }
  SUBCASE("changed label") {
    json::Document after;
    after.CopyFrom(before, after.GetAllocator());
    json::SetString(*At(after, {"spec", "template", "metadata", "labels"}), "app", "nginx-v2",
                    after.GetAllocator());
    CHECK(json::Serialize(json_patch::Diff(before, after, scratch.GetAllocator())) ==
          R"([{"op":"replace","path":"/spec/template/metadata/labels/app","value":"nginx-v2"}])");
  }
}
