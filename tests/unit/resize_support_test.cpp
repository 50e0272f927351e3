// What the API server lets in-place resizing do (hooks/resize_support.h): from a version, from
// discovery, from the --pod-resize flag.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "hooks/resize_support.h"
#include "lib/json.h"
#include "tests/unit/test_json.h"

using namespace iw;
using resize_support::Support;

namespace {

using test::Parse;

constexpr Support kNone{false, false};
constexpr Support kResizeOnly{true, false};  // 1.33: no memory limit decrease without a restart
constexpr Support kBoth{true, true};

struct VersionCase {
  std::string version;
  std::optional<Support> want;  // nullopt: InvalidArgument
};

const std::vector<VersionCase>& VersionCases() {
  static const std::vector<VersionCase> cases = {
      {"v1.32.9", kNone},
      {"v1.30.0", kNone},
      {"v1.33.0", kResizeOnly},
      {"v1.33.4", kResizeOnly},
      {"1.33", kResizeOnly},
      {"v1.33+", kResizeOnly},  // as some servers print the minor
      {"v1.33.5-eks-1234567", kResizeOnly},
      {"v1.34.0", kBoth},
      {"1.34", kBoth},
      {"v1.34.1", kBoth},
      {"V1.34.1", kBoth},
      {"v1.35.0-gke.100", kBoth},
      {"v1.37.2+k3s1", kBoth},
      {"v1.100.0", kBoth},
      {"v2.0", kBoth},
      {"v0.99", kNone},
      {"", std::nullopt},
      {"v", std::nullopt},
      {"garbage", std::nullopt},
      {"1", std::nullopt},
      {"v1", std::nullopt},
      {"v1.", std::nullopt},
      {"v.34", std::nullopt},
      {"1.34x", std::nullopt},
      {"1,34", std::nullopt},
      {" v1.34", std::nullopt},
      {"vv1.34", std::nullopt},
      {"v99999999999.1", std::nullopt},
  };
  return cases;
}

}  // namespace

TEST_CASE("FromVersion: pods/resize from 1.33, memory limit decreases from 1.34") {
  for (const VersionCase& c : VersionCases()) {
    CAPTURE(c.version);
    StatusOr<Support> s = resize_support::FromVersion(c.version);
    REQUIRE(s.ok() == c.want.has_value());
    if (c.want) {
      CHECK(*s == *c.want);
    } else {
      CHECK(s.status().code() == Status::Code::kInvalidArgument);
      CHECK(s.status().message().find("\"" + c.version + "\"") != std::string::npos);
    }
  }
}

// std::from_chars reads a leading '-': a negative major or minor must still not pass for a
// version (resize_support.h promises InvalidArgument "when it is not a version").
TEST_CASE("FromVersion refuses negative numbers") {
  for (const std::string v : {"-1.34", "v1.-34", "v-2.0"}) {
    CAPTURE(v);
    CHECK_FALSE(resize_support::FromVersion(v).ok());
  }
}

TEST_CASE("FromDiscovery: the subresource decides resizing, the version memory decreases") {
  struct Case {
    bool served;
    const char* gitVersion;
    Support want;
  };
  const Case cases[] = {
      {false, "v1.35.0", kNone},  // not served (feature gate off): nothing, whatever the version
      {false, "v1.32.9", kNone},
      {true, "v1.33.4", kResizeOnly},
      {true, "v1.34.0", kBoth},
      {true, "v1.35.0-gke.100", kBoth},
      {true, "garbage", kResizeOnly},  // unreadable: the
                                       // stricter 1.33 rules
      {true, "", kResizeOnly},
      {true, "v1.32.9", kResizeOnly},  // served: the subresource,
                                       // not the version, decides
  };
  for (const Case& c : cases) {
    const std::string gitVersion = c.gitVersion;
    CAPTURE(c.served);
    CAPTURE(gitVersion);
    CHECK(resize_support::FromDiscovery(c.served, c.gitVersion) == c.want);
  }
}

TEST_CASE("FromDiscoveryAnswers reads GET /api/v1 and GET /version") {
  constexpr const char* kWithResize = R"({"kind":"APIResourceList","groupVersion":"v1",
      "resources":[{"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list"]},
                   {"name":"pods/status","namespaced":true,"kind":"Pod","verbs":["get","patch"]},
                   {"name":"pods/resize","namespaced":true,"kind":"Pod","verbs":["get","patch","update"]}]})";
  constexpr const char* kWithoutResize = R"({"kind":"APIResourceList","groupVersion":"v1",
      "resources":[{"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list"]},
                   {"name":"pods/status","namespaced":true,"kind":"Pod","verbs":["get","patch"]},
                   {"name":"resize","namespaced":true,"kind":"Pod","verbs":["get"]},
                   {"name":"pods/resize/x"},{"kind":"pods/resize"},"pods/resize"]})";
  struct Case {
    const char* name;
    const char* apiV1;
    const char* version;
    std::optional<Support> want;  // nullopt: InvalidArgument
    const char* message;          // part of the error message
  };
  const Case cases[] = {
      {"1.33 serving pods/resize", kWithResize,
       R"({"major":"1","minor":"33","gitVersion":"v1.33.4"})", kResizeOnly, ""},
      {"1.34 serving pods/resize", kWithResize,
       R"({"major":"1","minor":"34","gitVersion":"v1.34.2"})", kBoth, ""},
      {"1.35 without pods/resize (only look-alikes)", kWithoutResize, R"({"gitVersion":"v1.35.0"})",
       kNone, ""},
      {"pods/resize, unreadable version", kWithResize, R"({"gitVersion":"unknown"})", kResizeOnly,
       ""},
      {"an empty resource list", R"({"resources":[]})", R"({"gitVersion":"v1.35.0"})", kNone, ""},
      {"no gitVersion", kWithResize, R"({"major":"1","minor":"34"})", std::nullopt, "gitVersion"},
      {"gitVersion not a string", kWithResize, R"({"gitVersion":134})", std::nullopt, "gitVersion"},
      {"/version not an object", kWithResize, R"(["v1.34.0"])", std::nullopt, "gitVersion"},
      {"no resources", R"({"kind":"APIResourceList"})", R"({"gitVersion":"v1.34.0"})", std::nullopt,
       "/api/v1"},
      {"resources not a list", R"({"resources":{"name":"pods/resize"}})",
       R"({"gitVersion":"v1.34.0"})", std::nullopt, "/api/v1"},
      {"/api/v1 not an object", R"([])", R"({"gitVersion":"v1.34.0"})", std::nullopt, "/api/v1"},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    json::Document apiV1 = Parse(c.apiV1);
    json::Document version = Parse(c.version);
    StatusOr<Support> s = resize_support::FromDiscoveryAnswers(apiV1, version);
    REQUIRE(s.ok() == c.want.has_value());
    if (c.want) {
      CHECK(*s == *c.want);
    } else {
      CHECK(s.status().code() == Status::Code::kInvalidArgument);
      CHECK(s.status().message().find(c.message) != std::string::npos);
    }
  }
}

TEST_CASE("ParseFlag: --pod-resize is auto, off or a version") {
  {
    StatusOr<std::optional<Support>> s = resize_support::ParseFlag("auto");
    REQUIRE(s.ok());
    CHECK_FALSE(s->has_value());
  }
  {
    StatusOr<std::optional<Support>> s = resize_support::ParseFlag("off");
    REQUIRE(s.ok());
    REQUIRE(s->has_value());
    CHECK(**s == kNone);
  }
  // A version: as FromVersion reads it.
  for (const VersionCase& c : VersionCases()) {
    CAPTURE(c.version);
    StatusOr<std::optional<Support>> s = resize_support::ParseFlag(c.version);
    REQUIRE(s.ok() == c.want.has_value());
    if (c.want) {
      REQUIRE(s->has_value());
      CHECK(**s == *c.want);
    }
  }
  // Anything else names the flag, the choices and the value.
  for (const char* bad : {"bogus", "", "AUTO", "Off", "on", "true", " auto"}) {
    const std::string flag = bad;
    CAPTURE(flag);
    StatusOr<std::optional<Support>> s = resize_support::ParseFlag(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == Status::Code::kInvalidArgument);
    const std::string& m = s.status().message();
    CHECK(m.find("--pod-resize") != std::string::npos);
    CHECK(m.find("auto, off or a Kubernetes version") != std::string::npos);
    CHECK(m.find("\"" + flag + "\"") != std::string::npos);
  }
}
