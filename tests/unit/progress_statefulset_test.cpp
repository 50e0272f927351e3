// A StatefulSet's progress report (hooks/progress.h): the Deployment's rules, kept in the
// StatefulSet's annotation inplace-webhook.io/progress, its stall judged by
// inplace-webhook.io/progress-deadline-seconds.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "hooks/keys.h"
#include "hooks/progress.h"
#include "lib/rfc3339.h"
#include "tests/unit/test_json.h"

using namespace iw;
using rollout::Clock;

namespace {

const Clock::time_point kNow = *rfc3339::Parse("2026-01-01T00:10:00Z");

// A JSON string literal of `text` (quotes and backslashes escaped), for annotation values.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A StatefulSet under an in-place update, with `extra` annotations ("key": value pairs, JSON).
json::Document Set(const std::string& extra = "", bool pausedByUs = true) {
  const std::string ip = std::string(R"({"from":"a","to":"b","pausedByUs":)") +
                         (pausedByUs ? "true" : "false") +
                         R"(,"startedAt":"2026-01-01T00:00:00Z"})";
  return test::Parse(R"({"metadata":{"name":"web","namespace":"ns","uid":"u1","annotations":{")" +
                     std::string(keys::kInProgressAnnotation) + "\":" + Quoted(ip) +
                     (extra.empty() ? "" : "," + extra) +
                     R"(},"labels":{"inplace-webhook.io/enabled":"true"}},)"
                     R"("spec":{"replicas":3,"template":{"metadata":{"labels":{"app":"web"}},)"
                     R"("spec":{"containers":[{"name":"app","image":"x:2"}]}}}})");
}

std::string StoredAnnotation(const std::string& status, const std::string& reason,
                             const std::string& message, const std::string& lastUpdate) {
  const std::string report = R"({"type":"inplace-webhook.io/Progressing","status":")" + status +
                             R"(","reason":")" + reason + R"(","message":")" + message +
                             R"(","lastUpdateTime":")" + lastUpdate +
                             R"(","lastTransitionTime":"2026-01-01T00:00:00Z"})";
  return "\"" + std::string(keys::kProgressAnnotation) + "\":" + Quoted(report);
}

kube::StatefulSet View(const json::Document& doc) {
  StatusOr<kube::StatefulSet> v = kube::StatefulSet::From(doc, "statefulSet");
  REQUIRE(v.ok());
  return *v;
}

rollout::Plan Updating(int at, int total, std::map<std::string, int> states = {}) {
  rollout::Plan p;
  p.phase = rollout::Phase::kUpdating;
  p.podsAtTarget = at;
  p.podsTotal = total;
  p.target = "b";
  p.podsByState = std::move(states);
  return p;
}

// The report the plan writes (parsed from its annotation patch), or nullopt.
std::optional<progress::Report> Written(const rollout::Plan& p) {
  for (const rollout::Action& a : p.actions) {
    if (a.kind != rollout::WriteKind::kStatefulSetPatch) continue;
    const json::Value* v =
        json::Path(&a.body, {"metadata", "annotations", keys::kProgressAnnotation});
    if (v == nullptr || !v->IsString()) continue;
    CHECK(a.resourceVersion.empty());  // merges only the report
    json::Document doc;
    REQUIRE(json::ParseUntrusted(std::string_view(v->GetString(), v->GetStringLength()), doc).ok());
    CHECK(json::StringOr(&doc, "type") == keys::kProgressCondition);
    return progress::Report{std::string(json::StringOr(&doc, "status")),
                            std::string(json::StringOr(&doc, "reason")),
                            std::string(json::StringOr(&doc, "message")),
                            std::string(json::StringOr(&doc, "lastUpdateTime")),
                            std::string(json::StringOr(&doc, "lastTransitionTime"))};
  }
  return std::nullopt;
}

int Events(const rollout::Plan& p, std::string_view reason, std::string_view kind) {
  int n = 0;
  for (const rollout::Action& a : p.actions) {
    if (a.kind != rollout::WriteKind::kEvent) continue;
    if (json::StringOr(&a.body, "reason") == reason &&
        json::StringOr(json::Find(&a.body, "involvedObject"), "kind") == kind) {
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("a StatefulSet's stall deadline: its annotation, 600 s when absent") {
  struct Row {
    std::optional<std::string> value;
    bool ok;
    std::optional<int> deadline;
  };
  for (const Row& row : {Row{std::nullopt, true, 600}, Row{"30", true, 30}, Row{"1", true, 1},
                         Row{"2147483647", true, std::nullopt}, Row{"0", false, std::nullopt},
                         Row{"-5", false, std::nullopt}, Row{"30s", false, std::nullopt},
                         Row{"", false, std::nullopt}, Row{"2147483648", false, std::nullopt},
                         Row{"99999999999999999999", false, std::nullopt}}) {
    CAPTURE(row.value.value_or("(absent)"));
    const json::Document doc =
        Set(row.value
                ? "\"" + std::string(keys::kProgressDeadlineAnnotation) + "\":" + Quoted(*row.value)
                : "");
    const StatusOr<std::optional<int>> d = progress::ProgressDeadline(View(doc));
    CHECK(d.ok() == row.ok);
    if (d.ok()) CHECK(*d == row.deadline);
    if (!d.ok()) {
      CHECK(d.status().message().find(std::string(keys::kProgressDeadlineAnnotation)) !=
            std::string::npos);
    }
  }
}

TEST_CASE("a StatefulSet's stored report: absent or malformed reads as none") {
  CHECK_FALSE(progress::StoredReport(View(Set())));
  for (const std::string bad : {"not json", "[]", R"({"status":1,"reason":"x"})",
                                R"({"reason":"x"})", R"({"status":"True"})"}) {
    CAPTURE(bad);
    CHECK_FALSE(progress::StoredReport(
        View(Set("\"" + std::string(keys::kProgressAnnotation) + "\":" + Quoted(bad)))));
  }
  const json::Document ok =
      Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                           "2026-01-01T00:09:00Z"));
  const std::optional<progress::Report> r = progress::StoredReport(View(ok));
  REQUIRE(r);
  CHECK(r->status == "True");
  CHECK(r->reason == "InPlaceUpdateProgressing");
  CHECK(r->message == "1/3 pods updated to template b");
  CHECK(r->lastUpdateTime == "2026-01-01T00:09:00Z");
  CHECK(r->lastTransitionTime == "2026-01-01T00:00:00Z");
}

TEST_CASE("a StatefulSet's progress: the Deployment's rules, in its annotation") {
  SUBCASE("the first report of an update, then progress with one Event on the StatefulSet") {
    const json::Document set = Set();
    rollout::Plan p = Updating(0, 3, {{"PreparingUpdate", 1}, {"Normal", 2}});
    progress::AddProgress(p, View(set), kNow);
    const std::optional<progress::Report> w = Written(p);
    REQUIRE(w);
    CHECK(w->status == "True");
    CHECK(w->reason == "InPlaceUpdateProgressing");
    CHECK(w->message == "0/3 pods updated to template b (1 PreparingUpdate)");
    CHECK(w->lastUpdateTime == "2026-01-01T00:10:00Z");
    CHECK(w->lastTransitionTime == "2026-01-01T00:10:00Z");
    CHECK(Events(p, "InPlaceUpdateProgressing", "StatefulSet") == 0);  // the start has its own
    CHECK_FALSE(p.stalled);

    const json::Document later = Set(StoredAnnotation(
        "True", "InPlaceUpdateProgressing", "0/3 pods updated to template b (1 PreparingUpdate)",
        "2026-01-01T00:09:00Z"));
    rollout::Plan q = Updating(1, 3);
    progress::AddProgress(q, View(later), kNow);
    REQUIRE(Written(q));
    CHECK(Written(q)->message == "1/3 pods updated to template b");
    CHECK(Written(q)->lastTransitionTime == "2026-01-01T00:00:00Z");  // same status: kept
    CHECK(Events(q, "InPlaceUpdateProgressing", "StatefulSet") == 1);
    CHECK(Events(q, "InPlaceUpdateProgressing", "Deployment") == 0);
  }
  SUBCASE("no progress within the deadline: nothing written, a requeue when it falls due") {
    const json::Document set =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                             "2026-01-01T00:09:00Z"));
    rollout::Plan p = Updating(1, 3);
    progress::AddProgress(p, View(set), kNow);
    CHECK(p.actions.empty());
    REQUIRE(p.requeueAfter);
    CHECK(*p.requeueAfter == std::chrono::seconds(540));  // 600 s after 00:09:00
    CHECK_FALSE(p.stalled);
  }
  SUBCASE("no progress past the annotation's deadline: stalled, naming the annotation") {
    const json::Document set =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                             "2026-01-01T00:09:00Z") +
            ",\"" + std::string(keys::kProgressDeadlineAnnotation) + "\":\"30\"");
    rollout::Plan p = Updating(1, 3);
    p.waitingMessage = "pod web-1 waits on its pre-update hook";
    progress::AddProgress(p, View(set), kNow);
    CHECK(p.stalled);
    const std::optional<progress::Report> w = Written(p);
    REQUIRE(w);
    CHECK(w->status == "False");
    CHECK(w->reason == "ProgressDeadlineExceeded");
    CHECK(w->message ==
          "1/3 pods updated to template b; no progress for 30s "
          "(inplace-webhook.io/progress-deadline-seconds); pod web-1 waits on its pre-update hook");
    CHECK(w->lastUpdateTime == "2026-01-01T00:09:00Z");  // the last progress stays the anchor
    for (const rollout::Action& a : p.actions) {
      CHECK(a.kind != rollout::WriteKind::kDeploymentStatusPatch);  // no status of a StatefulSet
    }
  }
  SUBCASE("staged (a partition above every pod done): no deadline runs") {
    const json::Document set =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/1 pods updated to template b",
                             "2025-01-01T00:00:00Z"));
    rollout::Plan p = Updating(1, 1);
    p.phase = rollout::Phase::kBlocked;
    p.staged = true;
    progress::AddProgress(p, View(set), kNow);
    CHECK_FALSE(p.stalled);
    CHECK(p.actions.empty());
    p.staged = false;  // the same pass, not staged: long stalled
    progress::AddProgress(p, View(set), kNow);
    CHECK(p.stalled);
  }
  SUBCASE("paused by the user: no deadline runs") {
    const json::Document set =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                             "2025-01-01T00:00:00Z"),
            /*pausedByUs=*/false);
    rollout::Plan p = Updating(1, 3);
    progress::AddProgress(p, View(set), kNow);
    CHECK_FALSE(p.stalled);
    CHECK(p.actions.empty());
  }
  SUBCASE("2147483647: no deadline, never stalled") {
    const json::Document set =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                             "2025-01-01T00:00:00Z") +
            ",\"" + std::string(keys::kProgressDeadlineAnnotation) + "\":\"2147483647\"");
    rollout::Plan p = Updating(1, 3);
    progress::AddProgress(p, View(set), kNow);
    CHECK_FALSE(p.stalled);
    CHECK(p.actions.empty());
  }
  SUBCASE("progress after a stall: back to True") {
    const json::Document set = Set(StoredAnnotation(
        "False", "ProgressDeadlineExceeded", "1/3 pods updated to template b; no progress for 30s",
        "2026-01-01T00:00:00Z"));
    rollout::Plan p = Updating(2, 3);
    progress::AddProgress(p, View(set), kNow);
    CHECK_FALSE(p.stalled);
    REQUIRE(Written(p));
    CHECK(Written(p)->status == "True");
    CHECK(Written(p)->lastTransitionTime == "2026-01-01T00:10:00Z");
  }
  SUBCASE("completed and aborted") {
    rollout::Plan done;
    done.phase = rollout::Phase::kCompleted;
    done.podsTotal = 3;
    done.target = "b";
    progress::AddProgress(done, View(Set()), kNow);
    REQUIRE(Written(done));
    CHECK(Written(done)->reason == "InPlaceUpdateCompleted");
    CHECK(Written(done)->message == "3/3 pods updated to template b");

    const json::Document running =
        Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                             "2026-01-01T00:09:00Z"));
    rollout::Plan ab;
    ab.phase = rollout::Phase::kAborted;
    ab.message = "requested by annotation inplace-webhook.io/abort=true";
    progress::AddProgress(ab, View(running), kNow);
    REQUIRE(Written(ab));
    CHECK(Written(ab)->reason == "InPlaceUpdateAborted");
    CHECK(Written(ab)->status == "False");
  }
}

TEST_CASE("a StatefulSet's refused pod write: Events on the pod and the StatefulSet, the report") {
  const json::Document set =
      Set(StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                           "2026-01-01T00:09:00Z"));
  std::vector<rollout::Action> out = progress::PlanRefusal(
      View(set), nullptr, "web-1", "1/3 pods updated to template b", "denied by policy p", kNow);
  rollout::Plan p;
  p.actions = std::move(out);
  CHECK(Events(p, "PodUpdateRefused", "StatefulSet") == 1);
  const std::optional<progress::Report> w = Written(p);
  REQUIRE(w);
  CHECK(w->reason == "PodUpdateRefused");
  CHECK(w->message ==
        "1/3 pods updated to template b; pod web-1: update refused by the API server: denied by "
        "policy p");
  CHECK(w->lastUpdateTime == "2026-01-01T00:09:00Z");

  std::vector<rollout::Action> resize =
      progress::PlanRefusal(View(set), nullptr, "web-1", "1/3 pods updated to template b",
                            "forbidden", kNow, progress::Refused::kResize, 403);
  rollout::Plan r;
  r.actions = std::move(resize);
  REQUIRE(Written(r));
  CHECK(Written(r)->reason == "PodResizeRefused");
  bool namesKind = false;
  for (const rollout::Action& a : r.actions) {
    if (a.kind == rollout::WriteKind::kEvent &&
        json::StringOr(&a.body, "message").find("set the StatefulSet annotation") !=
            std::string_view::npos) {
      namesKind = true;
    }
  }
  CHECK(namesKind);
}

TEST_CASE("a StatefulSet's update the webhook ended: its report is closed, once") {
  // The record is gone (a change not made in place).
  json::Document set = test::Parse(
      R"({"metadata":{"name":"web","namespace":"ns","labels":{"inplace-webhook.io/enabled":"true"},)"
      R"("annotations":{)" +
      StoredAnnotation("True", "InPlaceUpdateProgressing", "1/3 pods updated to template b",
                       "2026-01-01T00:09:00Z") +
      R"(}},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"x:3"}]}}}})");
  rollout::Plan p;
  progress::AddEndedWithoutLoop(p, View(set), kNow);
  REQUIRE(Written(p));
  CHECK(Written(p)->reason == "InPlaceUpdateAborted");
  CHECK(Written(p)->message ==
        "in-place update ended by the webhook (a change not made in place); the StatefulSet "
        "controller's rollout takes over");

  json::Document closed =
      test::Parse(R"({"metadata":{"name":"web","namespace":"ns","annotations":{)" +
                  StoredAnnotation("False", "InPlaceUpdateAborted", "x", "2026-01-01T00:09:00Z") +
                  R"(}},"spec":{}})");
  rollout::Plan q;
  progress::AddEndedWithoutLoop(q, View(closed), kNow);
  CHECK(q.actions.empty());
}
