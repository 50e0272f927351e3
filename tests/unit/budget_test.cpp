#include <doctest/doctest.h>

#include <string>

#include "hooks/budget.h"
#include "hooks/pod_update.h"
#include "lib/rfc3339.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using fixtures::Parse;

namespace {

json::Document DeploymentWith(int replicas, const std::string& strategy) {
  std::string text = R"({"spec":{"replicas":)" + std::to_string(replicas);
  if (!strategy.empty()) text += R"(,"strategy":)" + strategy;
  return Parse(text + "}}");
}

}  // namespace

TEST_CASE("maxUnavailable resolves like the Deployment controller, rounded down, never 0") {
  struct Case {
    int replicas;
    std::string strategy;
    int expected;
  };
  const Case cases[] = {
      {4, R"({"rollingUpdate":{"maxUnavailable":0}})", 1},               // 0 means one at a time
      {4, R"({"rollingUpdate":{"maxUnavailable":0,"maxSurge":2}})", 1},  // maxSurge ignored
      {4, R"({"rollingUpdate":{"maxUnavailable":"25%"}})", 1},
      {10, R"({"rollingUpdate":{"maxUnavailable":"25%"}})", 2},  // 2.5 rounds down
      {3, R"({"rollingUpdate":{"maxUnavailable":"25%"}})", 1},   // 0.75 → 0 → 1
      {10, R"({"rollingUpdate":{"maxUnavailable":2}})", 2},
      {3, R"({"rollingUpdate":{"maxUnavailable":"100%"}})", 3},
      {8, "", 2},  // default 25%
      {8, R"({"type":"RollingUpdate"})", 2},
      {5, R"({"type":"Recreate"})", 5},                         // everything at once
      {6, R"({"rollingUpdate":{"maxUnavailable":"abc"}})", 1},  // invalid → safest
      {6, R"({"rollingUpdate":{"maxUnavailable":"50"}})", 1},   // a string needs %
      {6, R"({"rollingUpdate":{"maxUnavailable":"1.5%"}})", 1},
      {6, R"({"rollingUpdate":{"maxUnavailable":-1}})", 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.replicas);
    CAPTURE(c.strategy);
    CHECK(budget::MaxUnavailable(test::AsDeployment(DeploymentWith(c.replicas, c.strategy))) ==
          c.expected);
  }
}

TEST_CASE("spec.replicas defaults to 1") {
  CHECK(test::AsDeployment(Parse(R"({"spec":{}})")).replicas() == 1);
  CHECK(test::AsDeployment(Parse(R"({"spec":{"replicas":0}})")).replicas() == 0);
}

TEST_CASE("ResolveIntOrPercent rounds as asked") {
  CHECK(budget::ResolveIntOrPercent(Parse(R"("25%")"), 10, false) == 2);
  CHECK(budget::ResolveIntOrPercent(Parse(R"("25%")"), 10, true) == 3);
  CHECK(budget::ResolveIntOrPercent(Parse("7"), 10, false) == 7);
  CHECK_FALSE(budget::ResolveIntOrPercent(Parse("true"), 10, false).has_value());
  CHECK_FALSE(budget::ResolveIntOrPercent(Parse(R"("%")"), 10, false).has_value());
}

TEST_CASE("a pod is available when Normal (or unlabelled) and Ready") {
  struct Case {
    std::string labels;
    std::string conditions;
    bool available;
  };
  const Case cases[] = {
      {R"({"inplace-webhook.io/state":"Normal"})", R"([{"type":"Ready","status":"True"}])", true},
      {R"({})", R"([{"type":"Ready","status":"True"}])", true},
      {R"({"inplace-webhook.io/state":"PreparingUpdate"})", R"([{"type":"Ready","status":"True"}])",
       false},
      {R"({"inplace-webhook.io/state":"Updating"})", R"([{"type":"Ready","status":"True"}])",
       false},
      {R"({"inplace-webhook.io/state":"Updated"})", R"([{"type":"Ready","status":"True"}])", false},
      {R"({"inplace-webhook.io/state":"Normal"})", R"([{"type":"Ready","status":"False"}])", false},
      {R"({"inplace-webhook.io/state":"Normal"})", R"([])", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.labels);
    CAPTURE(c.conditions);
    json::Document pod = Parse(R"({"metadata":{"labels":)" + c.labels +
                               R"(},"status":{"conditions":)" + c.conditions + "}}");
    CHECK(budget::IsAvailable(test::AsPod(pod), 0, std::chrono::system_clock::now()) ==
          c.available);
  }
}

TEST_CASE(
    "availability counts minReadySeconds from Ready's lastTransitionTime, as the controller") {
  using std::chrono::seconds;
  const auto t0 = *rfc3339::Parse("2026-05-01T10:00:00Z");
  struct Case {
    const char* what;
    std::string conditions;
    int minReady;
    long long afterSeconds;  // now = t0 + this
    bool available;
  };
  const std::string ready =
      R"([{"type":"Ready","status":"True","lastTransitionTime":"2026-05-01T10:00:00Z"}])";
  const Case cases[] = {
      {"minReadySeconds 0: Ready is enough", ready, 0, 0, true},
      {"Ready for less than minReadySeconds", ready, 5, 3, false},
      {"exactly minReadySeconds: the margin second not yet passed", ready, 5, 5, false},
      {"minReadySeconds and the margin passed", ready, 5, 6, true},
      {"long Ready", ready, 5, 3600, true},
      {"not Ready, however long",
       R"([{"type":"Ready","status":"False","lastTransitionTime":"2026-05-01T09:00:00Z"}])", 5,
       3600, false},
      {"Ready without lastTransitionTime and minReadySeconds > 0: never (as the controller)",
       R"([{"type":"Ready","status":"True"}])", 5, 3600, false},
      {"Ready without lastTransitionTime, minReadySeconds 0",
       R"([{"type":"Ready","status":"True"}])", 0, 0, true},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    json::Document pod =
        Parse(R"({"metadata":{"labels":{}},"status":{"conditions":)" + c.conditions + "}}");
    CHECK(budget::IsAvailable(test::AsPod(pod), c.minReady, t0 + seconds(c.afterSeconds)) ==
          c.available);
  }
  json::Document pod = Parse(R"({"status":{"conditions":)" + ready + "}}");
  CHECK(budget::AvailableAt(test::AsPod(pod), 5) == t0 + seconds(6));
  CHECK(test::AsDeployment(Parse(R"({"spec":{"minReadySeconds":7}})")).minReadySeconds() == 7);
  CHECK(test::AsDeployment(Parse(R"({"spec":{}})")).minReadySeconds() == 0);
  CHECK(test::AsDeployment(Parse(R"({"spec":{"minReadySeconds":-1}})")).minReadySeconds() == 0);
}

TEST_CASE("the allowance spends the budget on available pods and caps pods updating at once") {
  SUBCASE("one at a time") {
    budget::Allowance a(1, 0, 0);
    CHECK(a.TryStart(true));
    CHECK_FALSE(a.TryStart(true));
    CHECK_FALSE(a.TryStart(false));
  }
  SUBCASE("a pod already in an update holds the only slot") {
    budget::Allowance a(1, 1, 1);
    CHECK_FALSE(a.TryStart(true));
    CHECK_FALSE(a.TryStart(false));
  }
  SUBCASE("an unready pod uses the budget of available pods, yet can itself be fixed in place") {
    budget::Allowance a(1, 1, 0);  // one crash-looping pod, nothing in an update
    CHECK_FALSE(a.TryStart(true));
    CHECK(a.TryStart(false));
    CHECK_FALSE(a.TryStart(false));
  }
  SUBCASE("two at a time") {
    budget::Allowance a(2, 0, 0);
    CHECK(a.TryStart(true));
    CHECK(a.TryStart(true));
    CHECK_FALSE(a.TryStart(true));
  }
}
