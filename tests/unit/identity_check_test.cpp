#include <doctest/doctest.h>

#include <string>

#include "hooks/identity_check.h"

using namespace iw;

TEST_CASE("identity check: the loop runs only as --controller-user (DESIGN.md 9.6)") {
  const std::string me = "system:serviceaccount:inplace-webhook:inplace-webhook";
  struct Case {
    const char* name;
    const char* answer;
    bool ok;
    const char* user;
    const char* mentions;  // in the message when not ok
  } cases[] = {
      {"the controller user",
       R"({"status":{"userInfo":{"username":"system:serviceaccount:inplace-webhook:inplace-webhook","groups":["system:serviceaccounts"]}}})",
       true, "system:serviceaccount:inplace-webhook:inplace-webhook", ""},
      {"another service account",
       R"({"status":{"userInfo":{"username":"system:serviceaccount:inplace-webhook:other"}}})",
       false, "system:serviceaccount:inplace-webhook:other", "not --controller-user"},
      {"a proxy's user", R"({"status":{"userInfo":{"username":"u-rancher-proxy"}}})", false,
       "u-rancher-proxy", "u-rancher-proxy"},
      {"no userInfo", R"({"status":{}})", false, "", "names no user"},
      {"no status", R"({})", false, "", "names no user"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    json::Document d;
    REQUIRE(json::ParseUntrusted(c.answer, d).ok());
    StatusOr<std::string> user = identity::Check(d, me);
    CHECK(user.ok() == c.ok);
    if (c.ok) {
      CHECK(*user == c.user);
    } else {
      CHECK(user.status().code() == Status::Code::kInvalidArgument);
      CHECK(user.status().message().find(c.mentions) != std::string::npos);
      CHECK(user.status().message().find(c.user) != std::string::npos);  // names whom it found
    }
  }
  json::Document body = identity::SelfSubjectReview();
  CHECK(json::StringOr(&body, "apiVersion") == "authentication.k8s.io/v1");
  CHECK(json::StringOr(&body, "kind") == "SelfSubjectReview");
}
