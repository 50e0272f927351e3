// The fast paths of patch computation: Diff over scratch copies that share strings, objects whose
// names line up or not, duplicate names, subtree patches (PatchedAt), and the encoding of reviews.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hooks/admission.h"
#include "lib/json.h"
#include "lib/json_patch.h"
#include "lib/rfc3339.h"
#include "server/http/review_codec.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::Parse;

std::string DiffText(const json::Value& from, const json::Value& to) {
  json::Document scratch;
  return json::Serialize(json_patch::Diff(from, to, scratch.GetAllocator()));
}

// Applies Diff(from, to) to a copy of `from`; returns the result's text.
std::string Applied(const json::Value& from, const json::Value& to) {
  json::Document scratch;
  json::Value patch = json_patch::Diff(from, to, scratch.GetAllocator());
  json::Document doc;
  static_cast<json::Value&>(doc) = json::Copy(from, doc.GetAllocator());
  Status err = json_patch::Apply(patch, doc);
  REQUIRE_MESSAGE(err.ok(), err.message());
  return json::Serialize(doc);
}

// An object of `n` members k000..k(n-1) with value "v<i>".
std::string Members(int n, int skip = -1) {
  std::string s = "{";
  for (int i = 0; i < n; ++i) {
    if (i == skip) continue;
    if (s.size() > 1) s += ',';
    char name[16];
    std::snprintf(name, sizeof name, "k%03d", i);
    s += "\"" + std::string(name) + "\":\"v" + std::to_string(i) + "\"";
  }
  return s + "}";
}

}  // namespace

TEST_CASE("Diff: a scratch copy sharing strings diffs like a full copy") {
  json::Document original =
      Parse(R"({"metadata":{"name":"p","labels":{"app":"web"},"annotations":{"a/b":"1","c~d":"2"},)"
            R"("managedFields":[{"manager":"kubectl","fieldsV1":{"f:metadata":{"f:labels":{}}}}]},)"
            R"("spec":{"containers":[{"name":"c","image":"nginx"}]}})");
  auto mutateBoth = [](json::Document& d) {
    auto& alloc = d.GetAllocator();
    json::Value& meta = json::EnsureObject(d, "metadata", alloc);
    json::SetString(json::EnsureObject(meta, "labels", alloc), "state", "Normal", alloc);
    json::Remove(json::EnsureObject(meta, "annotations", alloc), "a/b");
    json::SetString(json::EnsureObject(meta, "annotations", alloc), "c~d", "3", alloc);
  };
  json::Document full, shared;
  full.CopyFrom(original, full.GetAllocator());
  static_cast<json::Value&>(shared) = json::CopySharingStrings(original, shared.GetAllocator());
  mutateBoth(full);
  mutateBoth(shared);
  const std::string expected =
      R"([{"op":"add","path":"/metadata/labels/state","value":"Normal"},)"
      R"({"op":"remove","path":"/metadata/annotations/a~1b"},)"
      R"({"op":"replace","path":"/metadata/annotations/c~0d","value":"3"}])";
  CHECK(DiffText(original, full) == expected);
  CHECK(DiffText(original, shared) == expected);
  CHECK(Applied(original, shared) == json::Serialize(shared));
  CHECK(DiffText(original, json::CopySharingStrings(original, shared.GetAllocator())) == "[]");
  // The same with a copy sharing all but the objects the handler changes: the same patch.
  json::Document along;
  static_cast<json::Value&>(along) = json::CopyAlong(
      original, {{"metadata", "labels"}, {"metadata", "annotations"}}, along.GetAllocator());
  CHECK(DiffText(original, along) == "[]");
  mutateBoth(along);
  CHECK(DiffText(original, along) == expected);
  CHECK(json::Serialize(along) == json::Serialize(full));
}

TEST_CASE("Diff: member matching with many members, in or out of order") {
  struct Case {
    const char* name;
    std::string from, to;
  };
  std::string reversed = "{";
  for (int i = 39; i >= 0; --i) {
    char name[16];  // room for any int: GCC checks the bound at -O1 with sanitizers
    std::snprintf(name, sizeof name, "k%03d", i);
    reversed += std::string(reversed.size() > 1 ? "," : "") + "\"" + name + "\":\"v" +
                std::to_string(i == 7 ? 700 : i) + "\"";
  }
  reversed += ",\"new\":1}";
  const Case cases[] = {
      {"appended at the end", Members(40), Members(41)},
      {"removed from the end", Members(41), Members(40)},
      {"removed in the middle", Members(40), Members(40, 12)},
      {"added in the middle", Members(40, 12), Members(40)},
      {"reversed, one changed, one added", Members(40), reversed},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    json::Document from = Parse(c.from);
    json::Document to = Parse(c.to);
    // Member order is not kept (RFC 6902 objects are unordered): compare canonically.
    json::Document scratch;
    json::Value patch = json_patch::Diff(from, to, scratch.GetAllocator());
    json::Document applied;
    applied.CopyFrom(from, applied.GetAllocator());
    REQUIRE(json_patch::Apply(patch, applied).ok());
    CHECK(json::SerializeCanonical(applied) == json::SerializeCanonical(to));
  }
  // Exactly the operations needed: one remove, one add, one replace.
  json::Document from = Parse(Members(40));
  json::Document to = Parse(reversed);
  CHECK(DiffText(from, to) == R"([{"op":"replace","path":"/k007","value":"v700"},)"
                              R"({"op":"add","path":"/new","value":1}])");
  json::Document shorter = Parse(Members(40, 12));
  CHECK(DiffText(from, shorter) == R"([{"op":"remove","path":"/k012"}])");
}

TEST_CASE("Diff: objects with duplicate names are replaced whole when they differ") {
  struct Case {
    const char* name;
    const char* from;
    const char* to;
    const char* patch;
  };
  const Case cases[] = {
      {"same names, a value changes", R"({"a":{"x":1,"x":2}})", R"({"a":{"x":1,"x":3}})",
       R"([{"op":"replace","path":"/a","value":{"x":1,"x":3}}])"},
      {"a member appended", R"({"a":{"x":1,"x":2}})", R"({"a":{"x":1,"x":2,"y":3}})",
       R"([{"op":"replace","path":"/a","value":{"x":1,"x":2,"y":3}}])"},
      {"the appended name repeats an earlier one", R"({"a":{"x":1}})", R"({"a":{"x":1,"x":2}})",
       R"([{"op":"replace","path":"/a","value":{"x":1,"x":2}}])"},
      {"the last member removed", R"({"a":{"x":1,"y":2,"x":3}})", R"({"a":{"x":1,"y":2}})",
       R"([{"op":"replace","path":"/a","value":{"x":1,"y":2}}])"},
      {"equal: nothing to do", R"({"a":{"x":1,"x":2}})", R"({"a":{"x":1,"x":2}})", "[]"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    CHECK(DiffText(Parse(c.from), Parse(c.to)) == c.patch);
  }
  // Many members: duplicates are found through the hash index too.
  std::string many = Members(40);
  many.insert(many.size() - 1, R"(,"k005":"again")");
  std::string manyChanged = many;
  manyChanged.replace(manyChanged.find("\"v9\""), 4, "\"v900\"");
  const std::string patch = DiffText(Parse(many), Parse(manyChanged));
  CHECK(patch.rfind(R"([{"op":"replace","path":"","value":{)", 0) == 0);
}

TEST_CASE("PatchedAt: the operations of a subtree diff carry its pointer") {
  json::Document meta = Parse(R"({"labels":{"a":"1"},"annotations":{"x/y":"2"}})");
  json::Document mutated = Parse(R"({"labels":{"a":"1","b":"2"},"annotations":{}})");
  admission::Response r = admission::PatchedAt("/metadata", meta, mutated, {"w"});
  CHECK(r.allowed);
  CHECK(r.warnings == std::vector<std::string>{"w"});
  CHECK(r.patch == R"([{"op":"add","path":"/metadata/labels/b","value":"2"},)"
                   R"({"op":"remove","path":"/metadata/annotations/x~1y"}])");
  // A type change at the subtree root replaces the subtree itself.
  CHECK(admission::PatchedAt("/spec/paused", Parse("false"), Parse("[true]")).patch ==
        R"([{"op":"replace","path":"/spec/paused","value":[true]}])");
  // Equal subtrees: no patch. Patched is PatchedAt at the root.
  CHECK(admission::PatchedAt("/metadata", meta, meta).patch.empty());
  CHECK(
      admission::Patched(meta, mutated).patch ==
      R"([{"op":"add","path":"/labels/b","value":"2"},{"op":"remove","path":"/annotations/x~1y"}])");
}

TEST_CASE("rfc3339::Format writes UTC with second precision") {
  using std::chrono::seconds;
  using std::chrono::system_clock;
  struct Case {
    long long unixSeconds;
    const char* text;
  };
  const Case cases[] = {
      {0, "1970-01-01T00:00:00Z"},           {951782400, "2000-02-29T00:00:00Z"},
      {1795975200, "2026-11-29T18:00:00Z"},  {1798761599, "2026-12-31T23:59:59Z"},
      {9214646400, "2262-01-01T00:00:00Z"},  {-1, "1969-12-31T23:59:59Z"},
      {-5364662400, "1800-01-01T00:00:00Z"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.unixSeconds);
    CHECK(rfc3339::Format(system_clock::time_point(seconds(c.unixSeconds))) == c.text);
  }
}

TEST_CASE(
    "rfc3339::FormatMillis writes UTC with milliseconds, truncated, and Parse reads it back") {
  using std::chrono::milliseconds;
  using std::chrono::system_clock;
  struct Case {
    long long unixMillis;
    const char* text;
  };
  const Case cases[] = {
      {0, "1970-01-01T00:00:00.000Z"},
      {1795975200042, "2026-11-29T18:00:00.042Z"},
      {1798761599999, "2026-12-31T23:59:59.999Z"},
      {-1, "1969-12-31T23:59:59.999Z"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.unixMillis);
    const system_clock::time_point t(milliseconds(c.unixMillis));
    CHECK(rfc3339::FormatMillis(t) == c.text);
    CHECK(rfc3339::Parse(c.text) == t);
    CHECK(rfc3339::FormatMillis(t + std::chrono::microseconds(999)) == c.text);  // truncated
  }
}

TEST_CASE("a review answer escapes messages, reasons and warnings as JSON strings") {
  const std::string tricky = std::string("quote \" backslash \\ newline \n tab \t nul ") +
                             std::string(1, '\0') + " bell \x07 caf\xc3\xa9 </script>";
  admission::Route route{"/test", true, [&](const admission::Request&, const admission::Context&) {
                           admission::Response r = admission::Denied(tricky);
                           r.warnings = {tricky, "plain"};
                           return r;
                         }};
  const char* body = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
    "uid":"u\"1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE",
    "object":{"metadata":{"name":"p"}}}})";
  admission::Context ctx;
  review::Reply reply = review::Answer(route, body, "application/json", ctx);
  REQUIRE(reply.httpStatus == 200);
  json::Document d = Parse(reply.body);
  const json::Value* resp = json::Find(&d, "response");
  CHECK(json::StringOr(resp, "uid") == "u\"1");
  CHECK(json::StringOr(json::Find(resp, "status"), "message") == tricky);
  CHECK(json::StringOr(json::Find(resp, "status"), "reason") == "Forbidden");
  CHECK(json::Path(resp, {"status", "code"})->GetInt() == 403);
  REQUIRE(json::Find(resp, "warnings")->Size() == 2);
  CHECK(json::View((*json::Find(resp, "warnings"))[0]) == tricky);
  // The exact bytes RapidJSON's writer would produce for the message.
  CHECK(reply.body.find(R"("message":"quote \" backslash \\ newline \n tab \t nul \u0000 bell )"
                        R"(\u0007 caf)") != std::string::npos);
}
