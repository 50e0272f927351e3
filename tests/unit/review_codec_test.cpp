#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "lib/clip.h"
#include "lib/json.h"
#include "server/http/review_codec.h"
#include "tests/unit/test_json.h"

using namespace iw;

namespace {

using test::Parse;

const char* kPodCreate = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
  "uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},
  "resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE",
  "userInfo":{"username":"alice"},"object":{"metadata":{"name":"p"}},"oldObject":null}})";

admission::Route RouteOf(bool mutating, admission::Handler h) {
  return {"/test", mutating, std::move(h)};
}

// A mutating handler that adds a label.
admission::Response AddLabel(const admission::Request& r, const admission::Context&) {
  json::Document copy;
  copy.CopyFrom(*r.object, copy.GetAllocator());
  json::SetString(json::EnsureObject(json::EnsureObject(copy, "metadata", copy.GetAllocator()),
                                     "labels", copy.GetAllocator()),
                  "a/b", "c", copy.GetAllocator());
  return admission::Patched(*r.object, copy, {"a warning"});
}

}  // namespace

TEST_CASE("a decided review echoes uid and version, HTTP 200") {
  admission::Context ctx;
  auto reply = review::Answer(RouteOf(true, AddLabel), kPodCreate, "application/json", ctx);
  CHECK(reply.httpStatus == 200);
  auto d = Parse(reply.body);
  CHECK(json::StringOr(&d, "apiVersion") == "admission.k8s.io/v1");
  CHECK(json::StringOr(&d, "kind") == "AdmissionReview");
  const auto* resp = json::Find(&d, "response");
  CHECK(json::StringOr(resp, "uid") == "u-1");
  CHECK(json::Find(resp, "allowed")->GetBool());
  CHECK(json::StringOr(resp, "patchType") == "JSONPatch");
  // Standard base64 of [{"op":"add","path":"/metadata/labels","value":{"a/b":"c"}}].
  CHECK(json::StringOr(resp, "patch") ==
        review::Base64(R"([{"op":"add","path":"/metadata/labels","value":{"a/b":"c"}}])"));
  CHECK(json::Find(resp, "warnings")->Size() == 1);
}

TEST_CASE("v1beta1 is answered as v1beta1") {
  std::string body = kPodCreate;
  body.replace(body.find("admission.k8s.io/v1"), 19, "admission.k8s.io/v1beta1");
  auto reply = review::Answer(RouteOf(false, [](auto&, auto&) { return admission::Allowed(); }),
                              body, "application/json", {});
  auto d = Parse(reply.body);
  CHECK(json::StringOr(&d, "apiVersion") == "admission.k8s.io/v1beta1");
}

TEST_CASE("no patch and no patchType when nothing changes") {
  auto reply =
      review::Answer(RouteOf(true, [](const admission::Request& r,
                                      auto&) { return admission::Patched(*r.object, *r.object); }),
                     kPodCreate, "application/json", {});
  CHECK(reply.body.find("patch") == std::string::npos);
}

TEST_CASE("a validating route never answers with a patch") {
  auto reply = review::Answer(RouteOf(false, AddLabel), kPodCreate, "application/json", {});
  auto d = Parse(reply.body);
  const auto* resp = json::Find(&d, "response");
  CHECK_FALSE(json::Find(resp, "allowed")->GetBool());
  CHECK(json::Find(resp, "patch") == nullptr);
  CHECK(reply.handlerError);
}

TEST_CASE("a handler that throws becomes an in-review 500") {
  auto reply = review::Answer(
      RouteOf(true, [](auto&, auto&) -> admission::Response { throw std::runtime_error("boom"); }),
      kPodCreate, "application/json", {});
  CHECK(reply.httpStatus == 200);
  CHECK(reply.handlerError);
  auto d = Parse(reply.body);
  const auto* status = json::Path(&d, {"response", "status"});
  CHECK(json::Find(status, "code")->GetInt() == 500);
  CHECK(json::StringOr(status, "message").find("boom") != std::string_view::npos);
  CHECK(json::StringOr(json::Find(&d, "response"), "uid") == "u-1");
}

TEST_CASE("denials carry status Failure, code and reason") {
  auto reply = review::Answer(RouteOf(false, [](auto&, auto&) { return admission::Denied("no"); }),
                              kPodCreate, "application/json", {});
  auto d = Parse(reply.body);
  const auto* status = json::Path(&d, {"response", "status"});
  CHECK(json::StringOr(status, "status") == "Failure");
  CHECK(json::Find(status, "code")->GetInt() == 403);
  CHECK(json::StringOr(status, "reason") == "Forbidden");
  CHECK(json::StringOr(status, "message") == "no");
}

TEST_CASE("request quirks of old and odd API servers are accepted") {
  auto allow = RouteOf(true, [](const admission::Request& r, auto&) {
    CHECK(r.name.empty());
    CHECK(r.namespaceName.empty());
    CHECK_FALSE(r.dryRun);
    return admission::Allowed();
  });
  // No name, namespace, dryRun, options, requestKind, apiVersion/kind of the review or the object.
  const char* minimal =
      R"({"request":{"uid":"x","kind":{"group":"apps","version":"v1","kind":"Deployment"},
    "operation":"CREATE","object":{"metadata":{"generateName":"web-"}}}})";
  auto reply = review::Answer(allow, minimal, "application/json", {});
  CHECK(reply.decided);
  CHECK(reply.allowed);
  auto d = Parse(reply.body);
  CHECK(json::StringOr(&d, "apiVersion") == "admission.k8s.io/v1");
  // DELETE with object null and oldObject set.
  const char* del =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"y",
    "kind":{"group":"","version":"v1","kind":"Pod"},"operation":"DELETE","object":null,
    "oldObject":{"metadata":{"name":"p"}},"options":null}})";
  CHECK(review::Answer(RouteOf(true, [](auto&, auto&) { return admission::Allowed(); }), del,
                       "application/json", {})
            .allowed);
}

TEST_CASE("malformed reviews: plain errors before the uid is known, in-review after") {
  auto allow = RouteOf(true, [](auto&, auto&) { return admission::Allowed(); });
  struct Row {
    const char* body;
    const char* contentType;
    int http;
    const char* fragment;
  } rows[] = {
      {"", "application/json", 400, "empty"},
      {"{", "application/json", 400, "not valid JSON"},
      {"{}", "text/plain", 415, "expected application/json"},
      {"[]", "application/json", 400, "not a JSON object"},
      {R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"a"}})",
       "application/json", 400, "unsupported"},
      {R"({"kind":"Pod"})", "application/json", 400, "kind AdmissionReview"},
      {R"({"kind":"AdmissionReview"})", "application/json", 400, "no request"},
      {R"({"request":{"uid":5}})", "application/json", 400, "no uid"},
      {R"({"request":{"uid":""}})", "application/json", 400, "no uid"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.body);
    auto reply = review::Answer(allow, row.body, row.contentType, {});
    CHECK(reply.httpStatus == row.http);
    CHECK_FALSE(reply.decided);
    CHECK(reply.message.find(row.fragment) != std::string::npos);
  }
  const char* inReview[] = {
      R"({"request":{"uid":"a","operation":"CREATE","object":{}}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"MAKE","object":{}}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE","object":[]}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE"}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"UPDATE","object":{}}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"labels":[]}}}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"annotations":{"k":1}}}}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE","object":{},"dryRun":"yes"}})",
      R"({"request":{"uid":"a","kind":{"kind":"Pod"},"operation":"CREATE","object":{},"userInfo":{"groups":[1]}}})",
  };
  for (const char* body : inReview) {
    CAPTURE(body);
    auto reply = review::Answer(allow, body, "application/json", {});
    CHECK(reply.httpStatus == 200);
    CHECK(reply.decided);
    CHECK_FALSE(reply.allowed);
    auto d = Parse(reply.body);
    CHECK(json::Find(json::Path(&d, {"response", "status"}), "code")->GetInt() == 400);
  }
}

TEST_CASE("values a client sent are cut to 256 bytes in answers; a uid over 256 bytes is refused") {
  auto allow = RouteOf(true, [](auto&, auto&) { return admission::Allowed(); });
  const std::string big(1 << 20, 'k');
  const std::string bigKind = R"({"kind":")" + big + R"("})";
  const std::string bigVersion = R"({"kind":"AdmissionReview","apiVersion":")" + big + R"("})";
  const std::string bigUid = R"({"kind":"AdmissionReview","request":{"uid":")" + big + R"("}})";
  struct Row {
    std::string body;
    std::string contentType;
    const char* fragment;
  } rows[] = {
      {bigKind, "application/json", "request body is a kkkk"},
      {bigVersion, "application/json", "unsupported AdmissionReview apiVersion \"kkkk"},
      {"{}", "text/" + big, "contentType=text/kkkk"},
      {bigUid, "application/json", "uid is 1048576 bytes, at most 256"},
  };
  for (const auto& row : rows) {
    auto reply = review::Answer(allow, row.body, row.contentType, {});
    CHECK(reply.httpStatus >= 400);
    CHECK_FALSE(reply.decided);
    CAPTURE(reply.message.substr(0, 300));
    CHECK(reply.message.find(row.fragment) != std::string::npos);
    CHECK(reply.message.size() < 600);
    CHECK(reply.body.size() < 1000);
  }
  CHECK(Clip(std::string(300, 'a')) == std::string(256, 'a') + "...(300 bytes)");
  CHECK(Clip("short") == "short");
  // A cut never splits a UTF-8 sequence: "é" is two bytes, the 256th byte would be its first.
  CHECK(Clip(std::string(255, 'a') + "\xc3\xa9" + std::string(10, 'b')) ==
        std::string(255, 'a') + "...(267 bytes)");
}

TEST_CASE("a review of more JSON values than the parser's bound is a 413, whatever its size") {
  auto allow = RouteOf(true, [](auto&, auto&) { return admission::Allowed(); });
  // A small object in a body of ~1 MiB made of json::kMaxValues tiny values.
  std::string body = R"({"kind":"AdmissionReview","request":{"uid":"a","pad":[)";
  for (std::size_t i = 0; i < json::kMaxValues; ++i) body += i == 0 ? "0" : ",0";
  body += "]}}";
  auto reply = review::Answer(allow, body, "application/json", {});
  CHECK(reply.httpStatus == 413);
  CHECK(reply.tooManyValues);
  CHECK_FALSE(reply.decided);
  CHECK(reply.message.find("more than 500000 values") != std::string::npos);
  auto d = Parse(reply.body);
  CHECK(json::StringOr(&d, "kind") == "Status");
  CHECK(json::Find(&d, "code")->GetInt() == 413);
}

TEST_CASE("content types") {
  CHECK(review::IsJsonContentType("application/json"));
  CHECK(review::IsJsonContentType("application/json; charset=utf-8"));
  CHECK(review::IsJsonContentType("Application/JSON"));
  CHECK_FALSE(review::IsJsonContentType("application/jsonx"));
  CHECK_FALSE(review::IsJsonContentType("text/json"));
  CHECK_FALSE(review::IsJsonContentType(""));
}

TEST_CASE("base64 is standard and padded") {
  CHECK(review::Base64("") == "");
  CHECK(review::Base64("f") == "Zg==");
  CHECK(review::Base64("fo") == "Zm8=");
  CHECK(review::Base64("foo") == "Zm9v");
  CHECK(review::Base64("\xff\xfe") == "//4=");
}
