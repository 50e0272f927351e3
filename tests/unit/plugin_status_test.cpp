// kubectl-inplace status: the report from a Deployment, its pods and ReplicaSets
// (plugin/status_report.h), and what --watch concludes from it.
#include <doctest/doctest.h>

#include <string>

#include "hooks/in_progress.h"
#include "lib/rfc3339.h"
#include "plugin/status_report.h"
#include "tests/unit/test_json.h"

using namespace iw;
using namespace iw::plugin;

namespace {

using test::Parse;

std::string Template(const std::string& image) {
  return R"({"metadata":{"labels":{"app":"web","inplace-webhook.io/enabled":"true"}},
             "spec":{"containers":[{"name":"app","image":")" +
         image + R"("},{"name":"sidecar","image":"pause:1"}]}})";
}

std::string Hash(const std::string& image) {
  json::Document t = Parse(Template(image));
  return TemplateHash(test::AsTemplate(t));
}

// The in-progress record of an update from -> to, started at 09:59:00.
std::string Record(const std::string& from, const std::string& to, bool pausedByUs) {
  return R"({"from":")" + from + R"(","to":")" + to + R"(","pausedByUs":)" +
         (pausedByUs ? "true" : "false") + R"(,"startedAt":"2026-12-02T09:59:00Z"})";
}

std::string Deployment(const std::string& inProgress, const std::string& conditions) {
  std::string ann =
      R"("inplace-webhook.io/lifecycle":"{\"preUpdate\":{\"finalizersHandler\":[\"lb.example.com/registered\"]},\"postUpdate\":{\"labelsHandler\":{\"lb\":\"up\"}}}")";
  if (!inProgress.empty()) {
    json::Document rec;
    rec.SetString(json::Ref(inProgress), rec.GetAllocator());
    ann += R"(,"inplace-webhook.io/in-progress":)" + json::Serialize(rec);
  }
  return R"({"metadata":{"name":"web","namespace":"shop","labels":{"inplace-webhook.io/enabled":"true"},
             "annotations":{)" +
         ann + R"(}},
          "spec":{"replicas":4,"paused":true,"selector":{"matchLabels":{"app":"web"}},"template":)" +
         Template("v2") + R"(},
          "status":{"conditions":[)" +
         conditions + "]}}";
}

std::string Pod(const std::string& name, const std::string& image, const std::string& state,
                const std::string& extraMeta, const std::string& updateRevision) {
  std::string ann = R"("inplace-webhook.io/state-timestamp":"2026-12-02T10:00:00Z")";
  if (!updateRevision.empty()) {
    ann +=
        R"(,"inplace-webhook.io/update-state":"{\"revision\":\")" + updateRevision +
        R"(\",\"updateTimestamp\":\"2026-12-02T10:00:00Z\",\"lastContainerStatuses\":{\"app\":{\"imageID\":\"i\",\"containerID\":\"c\",\"restartCount\":0}}}")";
  }
  return R"({"metadata":{"name":")" + name +
         R"(","labels":{"app":"web","inplace-webhook.io/enabled":"true","inplace-webhook.io/state":")" +
         state + R"("},"annotations":{)" + ann + "}" + extraMeta + R"(},
          "spec":{"containers":[{"name":"app","image":")" +
         image + R"("},{"name":"sidecar","image":"pause:1"}]},
          "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}})";
}

const auto kNow = *rfc3339::Parse("2026-12-02T10:01:05Z");

}  // namespace

TEST_CASE("plugin status: rows say which hook each waiting pod waits on, and for how long") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document d = Parse(Deployment(
      Record(from, to, /*pausedByUs=*/true),
      R"({"type":"inplace-webhook.io/Progressing","status":"True","reason":"InPlaceUpdateProgressing","message":"1/4 pods updated to template )" +
          to + R"x( (1 PreparingUpdate, 1 Updating)"})x"));
  json::Document pods = Parse(
      "{\"items\":[" + Pod("web-a", "v2", "Normal", "", to) + "," +
      Pod("web-b", "v1", "PreparingUpdate", R"(,"finalizers":["lb.example.com/registered"])", "") +
      "," + Pod("web-c", "v2", "Updating", "", to) + "," +
      Pod("web-d", "v1", "Normal", R"(,"finalizers":["lb.example.com/registered"])", "") + "," +
      Pod("other", "v1", "Normal", "", "") + "]}");
  // `other` must be dropped by the selector: give it another app label.
  {
    json::Value& other = pods["items"][4];
    other["metadata"]["labels"]["app"].SetString("db");
  }
  json::Document rss = Parse(
      "{\"items\":[{\"metadata\":{\"name\":\"web-1\"},\"spec\":{\"template\":" + Template("v1") +
      "}}]}");
  StatusOr<StatusReport> r = BuildStatus(d, pods, rss, kNow);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  REQUIRE(r->record.has_value());
  CHECK(r->record->from == from);
  CHECK(!r->userPaused);
  CHECK(r->conditionReason == "InPlaceUpdateProgressing");
  CHECK(r->total == 4);
  CHECK(r->updated == 2);  // web-a, and web-c whose content is already the target's
  REQUIRE(r->pods.size() == 4);
  CHECK(r->pods[0].name == "web-a");
  CHECK(r->pods[0].updated);
  CHECK(r->pods[0].waitsOn == "");
  CHECK(r->pods[1].state == pod_update::PodState::kPreparingUpdate);
  CHECK(r->pods[1].waitsOn == "pre-update hook: finalizer lb.example.com/registered");
  REQUIRE(r->pods[1].inStateFor.has_value());
  CHECK(r->pods[1].inStateFor->count() == 65);
  CHECK(r->pods[2].waitsOn == "containers restarting: app");
  CHECK(r->pods[3].waitsOn == "its turn");
  CHECK(!r->pods[3].inStateFor.has_value());

  const std::string text = RenderStatus(*r);
  CHECK(text.find("Deployment shop/web: in-place update " + from + " -> " + to) == 0);
  CHECK(text.find("[###############---------------] 2/4 pods updated") != std::string::npos);
  CHECK(text.find("pre-update hook: finalizer lb.example.com/registered  1m05s") !=
        std::string::npos);
  CHECK(Judge(*r, false) == WatchVerdict::kRunning);
  CHECK(Phase(*r) == "updating");
  CHECK(text.find("  phase: updating   paused by user: no   abort requested: no\n") !=
        std::string::npos);
}

TEST_CASE("plugin status: post-update hook, drain, and a paused update") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document d = Parse(Deployment(Record(from, to, /*pausedByUs=*/false), ""));
  json::Document pods = Parse("{\"items\":[" + Pod("web-a", "v2", "Updated", "", to) + "," +
                              Pod("web-b", "v1", "Normal", "", "") + "," +
                              Pod("web-c", "v1", "PreparingUpdate", "", "") + "]}");
  // web-c declares the readiness gate, already False: the drain (3 s default) from 10:01:04.
  pods["items"][2]["metadata"]["annotations"]["inplace-webhook.io/state-timestamp"].SetString(
      "2026-12-02T10:01:04Z");
  json::Document gate =
      Parse(R"({"readinessGates":[{"conditionType":"inplace-webhook.io/ready"}]})");
  pods["items"][2]["spec"].AddMember("readinessGates", gate["readinessGates"], pods.GetAllocator());
  json::Document cond = Parse(R"({"type":"inplace-webhook.io/ready","status":"False"})");
  pods["items"][2]["status"]["conditions"].PushBack(cond.Move(), pods.GetAllocator());
  // Without the update's base ReplicaSet the loop cannot decide (it aborts): nor can status.
  json::Document none = Parse("{\"items\":[]}");
  StatusOr<StatusReport> lost = BuildStatus(d, pods, none, kNow);
  REQUIRE_MESSAGE(lost.ok(), lost.status().message());
  CHECK(lost->pods[0].waitsOn == "unknown: no ReplicaSet has the update's base template " + from);
  CHECK(lost->pods[1].waitsOn == "held: the update is paused");
  json::Document rss = Parse(
      "{\"items\":[{\"metadata\":{\"name\":\"web-1\"},\"spec\":{\"template\":" + Template("v1") +
      "}}]}");
  StatusOr<StatusReport> r = BuildStatus(d, pods, rss, kNow);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->userPaused);
  CHECK(r->pods[0].waitsOn == "post-update hook: label lb=up");
  CHECK(r->pods[1].waitsOn == "held: the update is paused");
  CHECK(r->pods[2].waitsOn == "drain grace 3s (4s left)");  // 3.5 s, 1.5 s of slack
  CHECK(RenderStatus(*r).find("phase: held   paused by user: yes") != std::string::npos);

  // The gate went False long after the pod entered PreparingUpdate (its pre-update hook held it):
  // the drain runs from the gate's change, as the loop measures it (pod_update::DrainEnd), not from
  // the state timestamp alone.
  pods["items"][2]["metadata"]["annotations"]["inplace-webhook.io/state-timestamp"].SetString(
      "2026-12-02T09:50:00Z");
  json::Document late = Parse(
      R"({"type":"inplace-webhook.io/ready","status":"False","lastTransitionTime":"2026-12-02T10:01:05Z"})");
  pods["items"][2]["status"]["conditions"][pods["items"][2]["status"]["conditions"].Size() - 1] =
      late.Move();
  StatusOr<StatusReport> again = BuildStatus(d, pods, rss, kNow);
  REQUIRE_MESSAGE(again.ok(), again.status().message());
  CHECK(again->pods[2].waitsOn == "drain grace 3s (5s left)");
}

TEST_CASE("plugin status --watch: done, stuck, aborted, and the end not yet reported") {
  json::Document rss = Parse("{\"items\":[]}");
  json::Document pods = Parse("{\"items\":[]}");
  auto report = [&](const std::string& record, const std::string& cond) {
    json::Document d = Parse(Deployment(record, cond));
    StatusOr<StatusReport> r = BuildStatus(d, pods, rss, kNow);
    REQUIRE(r.ok());
    return *r;
  };
  const std::string rec = Record("a", "b", /*pausedByUs=*/true);
  auto ours = [](const char* status, const char* reason) {
    return std::string(R"({"type":"inplace-webhook.io/Progressing","status":")") + status +
           R"(","reason":")" + reason + R"(","message":"m"})";
  };
  CHECK(Judge(report("", ""), false) == WatchVerdict::kDone);
  CHECK(Phase(report("", "")) == "");
  CHECK(Phase(report(rec, ours("False", "ProgressDeadlineExceeded"))) == "stuck");
  CHECK(Judge(report("", ours("False", "InPlaceUpdateAborted")), false) == WatchVerdict::kDone);
  CHECK(Judge(report(rec, ours("False", "ProgressDeadlineExceeded")), true) ==
        WatchVerdict::kStuck);
  CHECK(Judge(report(rec, ours("False", "PodUpdateRefused")), true) == WatchVerdict::kStuck);
  CHECK(Judge(report(rec, ours("False", "PodResizeRefused")), true) == WatchVerdict::kStuck);
  CHECK(Judge(report(rec, ours("False", "PodNotOptedIn")), true) == WatchVerdict::kStuck);
  CHECK(Judge(report(
                  rec,
                  R"({"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"})"),
              true) == WatchVerdict::kStuck);
  CHECK(Judge(report(rec, ours("True", "InPlaceUpdateProgressing")), true) ==
        WatchVerdict::kRunning);
  CHECK(Judge(report("", ours("True", "InPlaceUpdateCompleted")), true) == WatchVerdict::kDone);
  CHECK(Judge(report("", ours("False", "InPlaceUpdateAborted")), true) == WatchVerdict::kAborted);
  CHECK(Judge(report("", ours("True", "InPlaceUpdateProgressing")), true) ==
        WatchVerdict::kSettling);
  // The watch started after the record was removed but before the end's condition was written (CI
  // saw it: the plugin said "no in-place update runs" for an update that was completing): it
  // settles too.
  CHECK(Judge(report("", ours("True", "InPlaceUpdateProgressing")), false) ==
        WatchVerdict::kSettling);
  CHECK(Judge(report("", ours("True", "InPlaceUpdateCompleted")), false) == WatchVerdict::kDone);
}

TEST_CASE("plugin status: durations and the bar") {
  CHECK(FormatDuration(std::chrono::seconds(5)) == "5s");
  CHECK(FormatDuration(std::chrono::seconds(192)) == "3m12s");
  CHECK(FormatDuration(std::chrono::seconds(3720)) == "1h02m");
  CHECK(ProgressBar(2, 3, 14) == "[#########-----] 2/3 pods updated");
  CHECK(ProgressBar(0, 0, 4) == "[----] 0/0 pods updated");
}

TEST_CASE("plugin status: a pod image another webhook rewrote, and one the kubelet cannot pull") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document d = Parse(Deployment(Record(from, to, /*pausedByUs=*/true), ""));
  auto pod = [&](const std::string& name, const std::string& got, const std::string& waiting) {
    const std::string state =
        R"(\"revision\":\")" + to +
        R"(\",\"updateTimestamp\":\"2026-12-02T10:00:00Z\",\"lastContainerStatuses\":{\"app\":{\"imageID\":\"i\",\"containerID\":\"c\",\"restartCount\":0}},\"images\":{\"app\":{\"asked\":\"v2\",)" +
        (got.empty() ? "" : R"(\"got\":\")" + got + R"(\",)") + R"(\"before\":\"mirror/v1\"}})";
    return R"({"metadata":{"name":")" + name +
           R"(","labels":{"app":"web","inplace-webhook.io/state":"Updating"},"annotations":{"inplace-webhook.io/update-state":"{)" +
           state +
           R"(}"}},"spec":{"containers":[{"name":"app","image":"mirror/v2"},{"name":"sidecar","image":"pause:1"}]},
           "status":{"phase":"Running","containerStatuses":[{"name":"app","image":"","imageID":"","containerID":"",
           "state":{"waiting":{"reason":")" +
           waiting + R"(","message":"failed to pull"}}}]}})";
  };
  json::Document pods = Parse("{\"items\":[" + pod("web-a", "mirror/v2", "ContainerCreating") +
                              "," + pod("web-b", "", "ImagePullBackOff") + "]}");
  json::Document rss = Parse(
      "{\"items\":[{\"metadata\":{\"name\":\"web-1\"},\"spec\":{\"template\":" + Template("v1") +
      "}}]}");
  StatusOr<StatusReport> r = BuildStatus(d, pods, rss, kNow);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  REQUIRE(r->pods.size() == 2);
  // The stored reference is the target: both count as updated (their containers restart).
  CHECK(r->updated == 2);
  CHECK(r->pods[0].waitsOn == "containers restarting: app (image mirror/v2, rewritten from v2)");
  CHECK(r->pods[1].waitsOn ==
        "pod web-b container app: asked for image v2, the API server stored mirror/v2 (rewritten "
        "by admission), which the kubelet cannot pull (ImagePullBackOff)");
  CHECK(RenderStatus(*r).find("asked for image v2, the API server stored mirror/v2") !=
        std::string::npos);
}
