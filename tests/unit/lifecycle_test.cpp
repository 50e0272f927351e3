// The lifecycle and policy annotations and the hook predicates (DESIGN.md §2, §4a "Hooks").
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/lifecycle.h"
#include "lib/json.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::AsDeployment;
using test::AsPod;
using namespace iw::lifecycle;

namespace {

using test::Parse;

}  // namespace

TEST_CASE("ParseLifecycle reads the Kruise hook shape plus timeoutSeconds") {
  auto l = ParseLifecycle(
      R"({"inPlaceUpdate":{"labelsHandler":{"lb.example.com/registered":"true","b":"2"},
          "finalizersHandler":["lb.example.com/drain"],"markPodNotReady":true,"timeoutSeconds":600}})");
  REQUIRE_MESSAGE(l.ok(), l.status().message());
  REQUIRE(l->inPlaceUpdate.has_value());
  const Hook& h = *l->inPlaceUpdate;
  CHECK(h.labelsHandler ==
        std::map<std::string, std::string>{{"lb.example.com/registered", "true"}, {"b", "2"}});
  CHECK(h.finalizersHandler == std::vector<std::string>{"lb.example.com/drain"});
  CHECK(h.markPodNotReady);
  CHECK(h.timeoutSeconds == 600);
  CHECK_FALSE(h.Empty());
  // inPlaceUpdate serves both phases.
  CHECK(l->PreHook() == &*l->inPlaceUpdate);
  CHECK(l->PostHook() == &*l->inPlaceUpdate);
}

TEST_CASE("preUpdate and postUpdate override one phase each; no hook means straight through") {
  auto l = ParseLifecycle(R"({"inPlaceUpdate":{"labelsHandler":{"a":"1"}},
                              "postUpdate":{"finalizersHandler":["f"]}})");
  REQUIRE(l.ok());
  CHECK(l->PreHook() == &*l->inPlaceUpdate);
  CHECK(l->PostHook() == &*l->postUpdate);

  auto pre = ParseLifecycle(R"({"preUpdate":{"labelsHandler":{"a":"1"}}})");
  REQUIRE(pre.ok());
  CHECK(pre->PreHook() == &*pre->preUpdate);
  CHECK(pre->PostHook() == nullptr);

  auto none = ParseLifecycle(R"({})");
  REQUIRE(none.ok());
  CHECK(none->PreHook() == nullptr);
  CHECK(none->PostHook() == nullptr);

  auto nulls = ParseLifecycle(R"({"inPlaceUpdate":null,"preUpdate":{"labelsHandler":null}})");
  REQUIRE(nulls.ok());
  CHECK_FALSE(nulls->inPlaceUpdate.has_value());
  CHECK(nulls->preUpdate->Empty());
  CHECK_FALSE(nulls->preUpdate->timeoutSeconds.has_value());
}

TEST_CASE("ParseLifecycle names the field and the expected shape on every malformed input") {
  struct Row {
    const char* text;
    const char* messageContains;
  };
  const std::vector<Row> rows = {
      {"not json", "inplace-webhook.io/lifecycle: not valid JSON"},
      {"", "not valid JSON"},
      {R"(["inPlaceUpdate"])", "must be a JSON object; expected {\"inPlaceUpdate\""},
      {R"({"inPlaceUpdates":{}})", "unknown field inPlaceUpdates"},
      {R"({"preDelete":{}})", "unknown field preDelete"},
      {R"({"inPlaceUpdate":[]})", "inPlaceUpdate must be an object"},
      {R"({"inPlaceUpdate":{"labelsHandler":["a"]}})",
       "inplace-webhook.io/lifecycle: inPlaceUpdate.labelsHandler must be an object of string "
       "values"},
      {R"({"inPlaceUpdate":{"labelsHandler":{"a":true}}})",
       "inPlaceUpdate.labelsHandler must be an object of string values"},
      {R"({"preUpdate":{"finalizersHandler":"f"}})",
       "preUpdate.finalizersHandler must be an array of strings"},
      {R"({"postUpdate":{"finalizersHandler":[""]}})",
       "postUpdate.finalizersHandler must be an array of non-empty strings"},
      {R"({"inPlaceUpdate":{"markPodNotReady":"yes"}})",
       "inPlaceUpdate.markPodNotReady must be true or false"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":0}})",
       "inPlaceUpdate.timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":-5}})", "timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":"600"}})",
       "timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":1.5}})", "timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":1e300}})",
       "timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":86401}})",
       "inPlaceUpdate.timeoutSeconds must be at most 86400 (one day)"},
      {R"({"postUpdate":{"timeoutSeconds":9223372036854775807}})",
       "postUpdate.timeoutSeconds must be at most 86400"},
      {R"({"inPlaceUpdate":{"timeoutSeconds":9223372036854775808}})",
       "timeoutSeconds must be a positive integer"},
      {R"({"inPlaceUpdate":{"labelHandler":{}}})", "unknown field inPlaceUpdate.labelHandler"},
  };
  for (const Row& row : rows) {
    const std::string text = row.text;
    CAPTURE(text);
    const Status st = ParseLifecycle(text).status();
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find(row.messageContains) != std::string::npos, st.message());
  }
  auto whole = ParseLifecycle(R"({"inPlaceUpdate":{"timeoutSeconds":60.0}})");
  REQUIRE(whole.ok());
  CHECK(whole->inPlaceUpdate->timeoutSeconds == 60);
  auto longest = ParseLifecycle(R"({"preUpdate":{"timeoutSeconds":86400}})");
  REQUIRE(longest.ok());
  CHECK(longest->preUpdate->timeoutSeconds == kMaxDurationSeconds);
}

TEST_CASE("ParsePolicy reads the annotation allow-list and the grace period") {
  auto p =
      ParsePolicy(R"({"annotations":["example.com/*","exact.io/key"],"gracePeriodSeconds":5})");
  REQUIRE_MESSAGE(p.ok(), p.status().message());
  CHECK(p->annotations == std::vector<std::string>{"example.com/*", "exact.io/key"});
  CHECK(p->gracePeriodSeconds == 5);
  auto day = ParsePolicy(R"({"gracePeriodSeconds":86400})");
  REQUIRE(day.ok());
  CHECK(day->gracePeriodSeconds == kMaxDurationSeconds);
  auto empty = ParsePolicy("{}");
  REQUIRE(empty.ok());
  CHECK(empty->annotations.empty());
  CHECK_FALSE(empty->gracePeriodSeconds.has_value());  // unset: the default drain

  struct Row {
    const char* text;
    const char* messageContains;
  };
  const std::vector<Row> rows = {
      {"{", "inplace-webhook.io/policy: not valid JSON"},
      {"[]", "inplace-webhook.io/policy: must be a JSON object; expected {\"annotations\""},
      {R"({"annotations":"a/*"})", "annotations must be an array"},
      {R"({"annotations":[1]})", "annotations must be an array of non-empty strings"},
      {R"({"annotations":[""]})", "annotations must be an array of non-empty strings"},
      {R"({"annotations":["a*b"]})", "only a trailing * is supported"},
      {R"({"annotations":["**"]})", "only a trailing * is supported"},
      {R"({"gracePeriodSeconds":-1})", "gracePeriodSeconds must be an integer >= 0"},
      {R"({"gracePeriodSeconds":"5"})", "gracePeriodSeconds must be an integer >= 0"},
      {R"({"gracePeriodSeconds":86401})", "gracePeriodSeconds must be at most 86400 (one day)"},
      {R"({"gracePeriodSeconds":9223372036854775807})", "gracePeriodSeconds must be at most 86400"},
      {R"({"gracePeriodSeconds":18446744073709551615})",
       "gracePeriodSeconds must be an integer >= 0"},
      {R"({"grace":5})", "unknown field grace"},
  };
  for (const Row& row : rows) {
    const std::string text = row.text;
    CAPTURE(text);
    const Status st = ParsePolicy(text).status();
    CHECK_FALSE(st.ok());
    CHECK_MESSAGE(st.message().find(row.messageContains) != std::string::npos, st.message());
  }
}

TEST_CASE("Policy::AllowsAnnotation: exact keys and trailing-star prefixes, never restartedAt") {
  Policy p;
  p.annotations = {"example.com/*", "exact.io/key", "team-"};
  struct Row {
    const char* key;
    bool allowed;
  };
  const std::vector<Row> rows = {
      {"example.com/owner", true},
      {"example.com/", true},
      {"example.co/owner", false},
      {"exact.io/key", true},
      {"exact.io/key2", false},
      {"exact.io/ke", false},
      {"team-", true},
      {"team-a", false},
      {"kubectl.kubernetes.io/restartedAt", false},
  };
  for (const Row& row : rows) {
    const std::string key = row.key;
    CAPTURE(key);
    CHECK(p.AllowsAnnotation(key) == row.allowed);
  }
  Policy all;
  all.annotations = {"*"};
  CHECK(all.AllowsAnnotation("anything/at-all"));
  CHECK_FALSE(all.AllowsAnnotation("kubectl.kubernetes.io/restartedAt"));
  CHECK_FALSE(Policy{}.AllowsAnnotation("example.com/owner"));  // default: none
}

TEST_CASE(
    "ReadSettings: absent annotations give defaults, malformed ones an error naming the key") {
  auto none = ReadSettings(AsDeployment(Parse(R"({"metadata":{"name":"web"}})")));
  REQUIRE(none.ok());
  CHECK_FALSE(none->lifecycle.inPlaceUpdate.has_value());
  CHECK(none->policy.annotations.empty());

  auto both = ReadSettings(AsDeployment(Parse(R"({"metadata":{"annotations":{
      "inplace-webhook.io/lifecycle":"{\"inPlaceUpdate\":{\"labelsHandler\":{\"a\":\"1\"}}}",
      "inplace-webhook.io/policy":"{\"gracePeriodSeconds\":3}"}}})")));
  REQUIRE_MESSAGE(both.ok(), both.status().message());
  CHECK(both->lifecycle.inPlaceUpdate->labelsHandler.at("a") == "1");
  CHECK(both->policy.gracePeriodSeconds == 3);

  const Status badLifecycle =
      ReadSettings(AsDeployment(Parse(
                       R"({"metadata":{"annotations":{"inplace-webhook.io/lifecycle":"{"}}})")))
          .status();
  CHECK_FALSE(badLifecycle.ok());
  CHECK(badLifecycle.message().starts_with("inplace-webhook.io/lifecycle: "));
  const Status badPolicy =
      ReadSettings(
          AsDeployment(Parse(R"({"metadata":{"annotations":{"inplace-webhook.io/policy":"[]"}}})")))
          .status();
  CHECK_FALSE(badPolicy.ok());
  CHECK(badPolicy.message().starts_with("inplace-webhook.io/policy: "));
}

// Kruise's IsPodHooked / IsPodAllHooked tables (pkg/util/lifecycle), the asymmetric rule: a
// pre-hook holds while ANY handler matches; a post-hook releases only when ALL match.
TEST_CASE("IsPodHooked and IsPodAllHooked") {
  Hook labels;
  labels.labelsHandler = {{"a", "1"}, {"b", "2"}};
  Hook finalizers;
  finalizers.finalizersHandler = {"f1", "f2"};
  Hook mixed;
  mixed.labelsHandler = {{"a", "1"}};
  mixed.finalizersHandler = {"f1"};
  const Hook empty;
  struct Row {
    const char* name;
    const Hook* hook;
    const char* pod;
    bool hooked, allHooked;
  };
  const std::vector<Row> rows = {
      {"empty hook, empty pod", &empty, R"({"metadata":{}})", false, true},
      {"empty hook, pod with labels", &empty, R"({"metadata":{"labels":{"a":"1"}}})", false, true},
      {"labels: none present", &labels, R"({"metadata":{"labels":{"x":"1"}}})", false, false},
      {"labels: one present", &labels, R"({"metadata":{"labels":{"a":"1"}}})", true, false},
      {"labels: all present", &labels, R"({"metadata":{"labels":{"a":"1","b":"2","c":"3"}}})", true,
       true},
      {"labels: key present, value differs", &labels,
       R"({"metadata":{"labels":{"a":"0","b":"2"}}})", true, false},
      {"finalizers: one present", &finalizers, R"({"metadata":{"finalizers":["f2"]}})", true,
       false},
      {"finalizers: all present", &finalizers, R"({"metadata":{"finalizers":["f2","x","f1"]}})",
       true, true},
      {"mixed: finalizer only", &mixed, R"({"metadata":{"finalizers":["f1"]}})", true, false},
      {"mixed: both", &mixed, R"({"metadata":{"labels":{"a":"1"},"finalizers":["f1"]}})", true,
       true},
      {"mixed: pod without metadata", &mixed, R"({})", false, false},
  };
  for (const Row& row : rows) {
    const std::string name = row.name;
    CAPTURE(name);
    json::Document pod = Parse(row.pod);
    CHECK(IsPodHooked(*row.hook, AsPod(pod)) == row.hooked);
    CHECK(IsPodAllHooked(*row.hook, AsPod(pod)) == row.allHooked);
  }
}
