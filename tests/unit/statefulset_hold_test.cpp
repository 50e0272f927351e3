// hooks/statefulset_hold: which pod DELETEs of the StatefulSet controller an in-place update
// refuses (DESIGN.md §4.8), one row per reason the controller has to delete a pod.
#include <doctest/doctest.h>

#include <string>

#include "hooks/statefulset_hold.h"
#include "lib/query_string.h"
#include "tests/unit/test_json.h"

using namespace iw;
using test::Parse;

namespace {

constexpr char kRecord[] =
    R"({\"from\":\"aaaaaaaaaa\",\"to\":\"bbbbbbbbbb\",\"pausedByUs\":true,\"startedAt\":\"2026-12-06T19:00:00Z\"})";

// A 3-replica StatefulSet `web` (uid u-web) whose update runs, with `spec` and `annotations`
// merged in as given.
std::string Set(std::string spec = R"("replicas":3)",
                std::string annotations = std::string(R"("inplace-webhook.io/in-progress":")") +
                                          kRecord + "\"",
                std::string meta = "") {
  if (meta.find("generation") == std::string::npos) meta += R"("generation":2,)";
  return R"({"metadata":{"name":"web","namespace":"db","uid":"u-web",)" + meta +
         R"("annotations":{)" + annotations + R"(}},"spec":{)" + spec +
         R"(},"status":{"observedGeneration":2,"currentRevision":"web-old","updateRevision":"web-new"}})";
}

statefulset_hold::PodFacts Pod(std::string name, std::string revision = "web-old") {
  return {"db", std::move(name), "u-pod", "web", "u-web", std::move(revision)};
}

}  // namespace

TEST_CASE("the hold refuses only the rolling update's delete of a pod the update moves") {
  struct Row {
    const char* what;
    std::string set;  // "" = not found
    statefulset_hold::PodFacts pod;
    bool hold;
    const char* reason;  // a part of the answer's reason
  };
  const Row rows[] = {
      {"the top pod, not yet at the update revision", Set(), Pod("web-2"), true,
       "pod web-2 is updated in place by inplace-webhook (sts/web in-progress since "
       "2026-12-06T19:00:00Z)"},
      {"the lowest pod of the replicas", Set(), Pod("web-0"), true, "kubectl annotate sts/web"},
      {"a pod already at the update revision: the controller's cache is behind the loop's write",
       Set(), Pod("web-2", "web-new"), true,
       "pod web-2 was updated in place to revision web-new by inplace-webhook (the controller's "
       "view of it is behind"},
      {"the controller's first sync after the change: its status still names the old revision",
       Set(R"("replicas":3)", std::string(R"("inplace-webhook.io/in-progress":")") + kRecord + "\"",
           R"("generation":3,)"),
       Pod("web-2", "web-new"), true, "updated in place"},
      {"no update runs", Set(R"("replicas":3)", R"("a":"b")"), Pod("web-2"), false,
       "no in-place update runs on sts/web"},
      {"a malformed record (the loop aborts it)",
       Set(R"("replicas":3)", R"("inplace-webhook.io/in-progress":"{")"), Pod("web-2"), false,
       "malformed in-progress record"},
      {"an abort stored: the native rollout takes over at once",
       Set(R"("replicas":3)", std::string(R"("inplace-webhook.io/in-progress":")") + kRecord +
                                  R"(","inplace-webhook.io/abort":"true")"),
       Pod("web-2"), false, "is aborted"},
      {"a scale-down (ordinal at or above the replicas)", Set(R"("replicas":2)"), Pod("web-2"),
       false, "a scale-down"},
      {"below the partition",
       Set(R"("replicas":3,"updateStrategy":{"rollingUpdate":{"partition":2}})"), Pod("web-1"),
       false, "below the partition"},
      {"at the partition",
       Set(R"("replicas":3,"updateStrategy":{"rollingUpdate":{"partition":2}})"), Pod("web-2"),
       true, "updated in place"},
      {"spec.ordinals.start moves the range", Set(R"("replicas":3,"ordinals":{"start":5})"),
       Pod("web-4"), false, "a scale-down"},
      {"spec.ordinals.start: the top of the range", Set(R"("replicas":3,"ordinals":{"start":5})"),
       Pod("web-7"), true, "updated in place"},
      {"OnDelete leaves pods to the user",
       Set(R"("replicas":3,"updateStrategy":{"type":"OnDelete"})"), Pod("web-2"), false,
       "updates OnDelete"},
      {"the StatefulSet is being deleted",
       Set(R"("replicas":3)", std::string(R"("inplace-webhook.io/in-progress":")") + kRecord + "\"",
           R"("deletionTimestamp":"2026-12-06T19:01:00Z",)"),
       Pod("web-2"), false, "is being deleted"},
      {"not found", "", Pod("web-2"), false, "sts/web not found"},
      {"another StatefulSet of that name (uid)", Set(),
       statefulset_hold::PodFacts{"db", "web-2", "u-pod", "web", "u-other", "web-old"}, false,
       "not the pod's controller"},
      {"a name without this StatefulSet's ordinal", Set(), Pod("web-x"), false, "no ordinal"},
      {"a name of another StatefulSet's pods", Set(), Pod("webby-2"), false, "no ordinal"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    std::optional<kube::StatefulSet> set;
    json::Document doc;
    if (!r.set.empty()) {
      doc = Parse(r.set);
      set = test::AsStatefulSet(doc);
    }
    const statefulset_hold::Answer a = statefulset_hold::Decide(set, r.pod);
    CHECK(a.hold == r.hold);
    CHECK_MESSAGE(a.reason.find(r.reason) != std::string::npos, a.reason);
  }
}

TEST_CASE("the webhook forwards only a live, opted-in StatefulSet pod deleted by its controller") {
  const std::string pod =
      R"({"metadata":{"name":"web-2","namespace":"db","uid":"u-pod",
          "labels":{"inplace-webhook.io/enabled":"true","controller-revision-hash":"web-old"},
          "ownerReferences":[{"kind":"StatefulSet","name":"web","uid":"u-web","controller":true}]},
          "status":{"phase":"Running"}})";
  const std::string controller = "system:serviceaccount:kube-system:statefulset-controller";
  json::Document d = Parse(pod);
  std::optional<statefulset_hold::PodFacts> facts =
      statefulset_hold::FactsOf(test::AsPod(d), controller, controller);
  REQUIRE(facts);
  CHECK(*facts == statefulset_hold::PodFacts{"db", "web-2", "u-pod", "web", "u-web", "web-old"});

  struct Row {
    const char* what;
    std::string from, to;
    std::string user;
  };
  for (const Row& r : {
           Row{"a user's delete is never judged", "", "", "alice"},
           Row{"another controller's", "", "",
               "system:serviceaccount:kube-system:replicaset-controller"},
           Row{"not opted in", R"("inplace-webhook.io/enabled":"true",)", "", controller},
           Row{"a Deployment's pod", R"("kind":"StatefulSet")", R"("kind":"ReplicaSet")",
               controller},
           Row{"not the controller owner", R"("controller":true)", R"("controller":false)",
               controller},
           Row{"terminal (the controller replaces it)", R"("phase":"Running")",
               R"("phase":"Failed")", controller},
           Row{"already terminating", R"("uid":"u-pod",)",
               R"("uid":"u-pod","deletionTimestamp":"2026-12-06T19:01:00Z",)", controller},
       }) {
    CAPTURE(r.what);
    std::string text = pod;
    if (!r.from.empty()) text.replace(text.find(r.from), r.from.size(), r.to);
    json::Document doc = Parse(text);
    CHECK_FALSE(statefulset_hold::FactsOf(test::AsPod(doc), r.user, controller));
  }
}

TEST_CASE("the facts and the answer survive their way to the loop and back") {
  const statefulset_hold::PodFacts facts{"db", "web-2", "u&1", "web", "u web", "web-7f9c%"};
  const std::string q = statefulset_hold::EncodeQuery(facts);
  StatusOr<statefulset_hold::PodFacts> back = statefulset_hold::DecodeQuery(q);
  REQUIRE(back.ok());
  CHECK(*back == facts);
  CHECK(statefulset_hold::DecodeQuery("namespace=db&pod=web-2").status().message() ==
        "query parameter uid is missing or malformed");
  CHECK(statefulset_hold::DecodeQuery("namespace=%zz&pod=a&uid=&statefulset=s&statefulsetUid=&"
                                      "revision=")
            .status()
            .message() == "query parameter namespace is missing or malformed");
  CHECK(statefulset_hold::DecodeQuery("namespace=&pod=a&uid=&statefulset=s&statefulsetUid=&"
                                      "revision=")
            .status()
            .message() == "namespace, pod and statefulset must not be empty");

  CHECK(statefulset_hold::DecodeQuery("namespace=..&pod=a&uid=&statefulset=s&statefulsetUid=&"
                                      "revision=")
            .status()
            .message() == "not a Kubernetes object name: ..");
  CHECK(statefulset_hold::DecodeQuery("namespace=db&pod=a&uid=&statefulset=s%2F..%2Fx&"
                                      "statefulsetUid=&revision=")
            .status()
            .message() == "not a Kubernetes object name: s%2F..%2Fx");
  for (const statefulset_hold::Answer& a :
       {statefulset_hold::Answer{true, "held: why"}, statefulset_hold::Answer{false, ""}}) {
    std::optional<statefulset_hold::Answer> parsed =
        statefulset_hold::ParseAnswer(statefulset_hold::RenderAnswer(a));
    REQUIRE(parsed);
    CHECK(parsed->hold == a.hold);
    CHECK(parsed->reason == a.reason);
  }
  CHECK_FALSE(statefulset_hold::ParseAnswer("<html>"));
  CHECK_FALSE(statefulset_hold::ParseAnswer(""));
}

TEST_CASE("a query value is percent-decoded, a malformed escape is no value") {
  CHECK(kube::QueryValue("a=1&b=x%20y+z", "b") == "x y z");
  CHECK(kube::QueryValue("a=1&a=2", "a") == "1");
  CHECK(kube::QueryValue("a", "a") == "");
  CHECK_FALSE(kube::QueryValue("a=1", "b"));
  CHECK_FALSE(kube::QueryValue("a=%4", "a"));
  CHECK_FALSE(kube::QueryValue("a=%g0", "a"));
  CHECK(kube::QueryValue(std::string("a=") + kube::QueryEscape("ü &=%"), "a") == "ü &=%");
}
