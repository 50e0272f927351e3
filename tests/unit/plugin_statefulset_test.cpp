// kubectl-inplace on a StatefulSet (DESIGN.md §4.8, §8.13): the status report from the
// StatefulSet, its pods and its current ControllerRevision (plugin/status_report.h), the progress
// report it keeps in an annotation, what --watch concludes, and explain's verdict from its
// ControllerRevisions (plugin/explain.h).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "lib/rfc3339.h"
#include "plugin/explain.h"
#include "plugin/status_report.h"
#include "tests/unit/test_json.h"

using namespace iw;
using namespace iw::plugin;

namespace {

using test::Parse;

// The pod template of the StatefulSet `web` with `image` (and an env value, for a change that is
// not made in place).
std::string Template(const std::string& image, const std::string& env = "1") {
  return R"({"metadata":{"labels":{"app":"web","inplace-webhook.io/enabled":"true"}},
             "spec":{"containers":[{"name":"app","image":")" +
         image + R"(","env":[{"name":"E","value":")" + env + R"("}]}]}})";
}

std::string Hash(const std::string& image, const std::string& env = "1") {
  json::Document t = Parse(Template(image, env));
  return TemplateHash(test::AsTemplate(t));
}

// `key`=`value` among the annotations of `object`.
void Annotate(json::Document& object, std::string_view key, const std::string& value) {
  auto& a = object.GetAllocator();
  json::SetString(json::EnsureObject(json::EnsureObject(object, "metadata", a), "annotations", a),
                  key, value, a);
}

// The running update's record, from -> to.
std::string Record(const std::string& from, const std::string& to) {
  return R"({"from":")" + from + R"(","to":")" + to +
         R"(","pausedByUs":true,"startedAt":"2026-12-02T09:59:00Z"})";
}

// The opted-in StatefulSet db/web (uid sts-uid), 4 replicas at template `image` with `partition`,
// a pre-update hook (a finalizer) and a post-update hook (a label); its controller observed it at
// update revision web-new over current revision `current`.
json::Document Set(const std::string& image, int partition, const std::string& current = "web-old",
                   const std::string& update = "web-new") {
  json::Document d = Parse(
      R"({"apiVersion":"apps/v1","kind":"StatefulSet",
          "metadata":{"name":"web","namespace":"db","uid":"sts-uid","generation":7,
                      "labels":{"inplace-webhook.io/enabled":"true"}},
          "spec":{"replicas":4,"serviceName":"web","selector":{"matchLabels":{"app":"web"}},
                  "updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":)" +
      std::to_string(partition) + R"(}},"template":)" + Template(image) + R"(},
          "status":{"observedGeneration":7,"replicas":4,"readyReplicas":4,"currentReplicas":3,
                    "updatedReplicas":1,"currentRevision":")" +
      current + R"(","updateRevision":")" + update + R"("}})");
  Annotate(d, "inplace-webhook.io/lifecycle",
           R"({"preUpdate":{"finalizersHandler":["lb.example.com/registered"]},)"
           R"("postUpdate":{"labelsHandler":{"lb":"up"}}})");
  return d;
}

// A pod of the StatefulSet (`owner` its controller's uid) at `image` and `revision`, in `state`.
std::string Pod(const std::string& name, const std::string& image, const std::string& revision,
                const std::string& state, const std::string& extraMeta = "",
                const std::string& owner = "sts-uid") {
  return R"({"metadata":{"name":")" + name +
         R"(","labels":{"app":"web","inplace-webhook.io/enabled":"true",
             "controller-revision-hash":")" +
         revision + R"(","inplace-webhook.io/state":")" + state + R"("},
             "annotations":{"inplace-webhook.io/state-timestamp":"2026-12-02T10:00:00Z"},
             "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web",
                                 "uid":")" +
         owner + R"(","controller":true}])" + extraMeta + R"(},
          "spec":{"containers":[{"name":"app","image":")" +
         image + R"(","env":[{"name":"E","value":"1"}]}]},
          "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}})";
}

// A ControllerRevision of the StatefulSet, as the controller stores it (its template a strategic
// merge patch with "$patch":"replace").
std::string Revision(const std::string& name, int revision, const std::string& image,
                     const std::string& env = "1", const std::string& owner = "sts-uid") {
  json::Document t = Parse(Template(image, env));
  t.AddMember("$patch", "replace", t.GetAllocator());
  return R"({"apiVersion":"apps/v1","kind":"ControllerRevision",
             "metadata":{"name":")" +
         name + R"(","namespace":"db","labels":{"app":"web"},
                         "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet",
                                             "name":"web","uid":")" +
         owner + R"(","controller":true}]},
             "revision":)" +
         std::to_string(revision) + R"(,"data":{"spec":{"template":)" + json::Serialize(t) + "}}}";
}

// The loop's progress report as it stores it in the StatefulSet's annotation.
std::string Progress(const std::string& status, const std::string& reason,
                     const std::string& message = "m") {
  return R"({"type":"inplace-webhook.io/Progressing","status":")" + status + R"(","reason":")" +
         reason + R"(","message":")" + message +
         R"(","lastUpdateTime":"2026-12-02T10:00:30Z","lastTransitionTime":"2026-12-02T09:59:00Z"})";
}

const auto kNow = *rfc3339::Parse("2026-12-02T10:01:05Z");

}  // namespace

TEST_CASE("plugin status sts: the pods of the update, a hook's wait, and the partition's hold") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document set = Set("v2", /*partition=*/1);
  Annotate(set, "inplace-webhook.io/in-progress", Record(from, to));
  Annotate(set, keys::kProgressAnnotation,
           Progress("True", "InPlaceUpdateProgressing", "1/3 pods updated to template " + to));
  // web-3 moved in place (its revision with it); web-2 waits on the pre-update hook; web-1 waits
  // its turn; web-0 is below the partition; web-9 is another owner's.
  json::Document pods = Parse(
      "{\"items\":[" + Pod("web-0", "v1", "web-old", "Normal") + "," +
      Pod("web-2", "v1", "web-old", "PreparingUpdate",
          R"(,"finalizers":["lb.example.com/registered"])") +
      "," +
      Pod("web-3", "v2", "web-new", "Normal", R"(,"finalizers":["lb.example.com/registered"])") +
      "," + Pod("web-1", "v1", "web-old", "Normal") + "," +
      Pod("web-9", "v1", "web-old", "Normal", "", "other-uid") + "]}");
  pods["items"][2]["metadata"]["labels"].AddMember("lb", "up", pods.GetAllocator());
  json::Document revision = Parse(Revision("web-old", 1, "v1"));

  StatusOr<StatusReport> r = BuildStatefulSetStatus(set, pods, &revision, kNow);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->kind == WorkloadKind::kStatefulSet);
  REQUIRE(r->record.has_value());
  CHECK(r->record->from == from);
  CHECK(!r->userPaused);
  CHECK(r->conditionStatus == "True");
  CHECK(r->conditionReason == "InPlaceUpdateProgressing");
  CHECK(r->conditionMessage == "1/3 pods updated to template " + to);
  CHECK(r->controllerReason.empty());
  CHECK(r->partition == 1);
  CHECK(r->belowPartition == 1);
  CHECK(r->total == 3);  // web-1, web-2, web-3: the ordinals at or above the partition
  CHECK(r->updated == 1);
  REQUIRE(r->pods.size() == 4);  // by ordinal; web-9 is not its pod
  CHECK(r->pods[0].name == "web-0");
  CHECK(!r->pods[0].inUpdate);
  CHECK(r->pods[0].waitsOn == "held: below partition 1");
  CHECK(r->pods[1].name == "web-1");
  CHECK(r->pods[1].waitsOn == "its turn");
  CHECK(r->pods[2].name == "web-2");
  CHECK(r->pods[2].state == pod_update::PodState::kPreparingUpdate);
  CHECK(r->pods[2].waitsOn == "pre-update hook: finalizer lb.example.com/registered");
  REQUIRE(r->pods[2].inStateFor.has_value());
  CHECK(r->pods[2].inStateFor->count() == 65);
  CHECK(r->pods[3].name == "web-3");
  CHECK(r->pods[3].updated);
  CHECK(r->pods[3].waitsOn == "");
  CHECK(Phase(*r) == "updating");
  CHECK(Judge(*r, false) == WatchVerdict::kRunning);

  const std::string text = RenderStatus(*r);
  CHECK(text.find("sts/web (namespace db): in-place update " + from + " -> " + to +
                  ", started 2026-12-02T09:59:00Z\n  phase: updating   paused by user: no   "
                  "abort requested: no\n") == 0);
  CHECK(text.find("  progress: True InPlaceUpdateProgressing: 1/3 pods updated") !=
        std::string::npos);
  CHECK(text.find("  partition 1: the update works on the pods at or above it (3 pods); the pods "
                  "below it (1 pod) keep their revision until it is lowered\n") !=
        std::string::npos);
  CHECK(text.find("[##########--------------------] 1/3 pods updated") != std::string::npos);
  CHECK(text.find("held: below partition 1") != std::string::npos);

  // A pod below the partition that is already at the target is shown updated, not counted.
  json::Document updated0 = Parse(Pod("web-0", "v2", "web-new", "Normal"));
  pods["items"][0].CopyFrom(updated0, pods.GetAllocator());
  StatusOr<StatusReport> below = BuildStatefulSetStatus(set, pods, &revision, kNow);
  REQUIRE(below.ok());
  CHECK(below->pods[0].updated);
  CHECK(below->pods[0].waitsOn == "");
  CHECK(below->updated == 1);
  CHECK(below->total == 3);
}

TEST_CASE("plugin status sts: without the update's base revision the rows say why") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document set = Set("v2", 0);
  Annotate(set, "inplace-webhook.io/in-progress", Record(from, to));
  json::Document pods = Parse("{\"items\":[" + Pod("web-3", "v1", "web-old", "Normal") + "]}");
  auto waits = [&](const json::Value& s, const json::Value* rev) {
    StatusOr<StatusReport> r = BuildStatefulSetStatus(s, pods, rev, kNow);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    REQUIRE(r->pods.size() == 1);
    return r->pods[0].waitsOn;
  };
  CHECK(waits(set, nullptr) == "unknown: ControllerRevision web-old (the update's base) not read");
  json::Document other = Parse(Revision("web-older", 1, "v1"));
  CHECK(waits(set, &other) == "unknown: ControllerRevision web-old (the update's base) not read");
  json::Document changed = Parse(Revision("web-old", 1, "v0"));
  CHECK(waits(set, &changed) ==
        "unknown: ControllerRevision web-old holds another template than the update started "
        "from (" +
            from + "): the loop aborts the update");
  json::Document unobserved = Set("v2", 0);
  Annotate(unobserved, "inplace-webhook.io/in-progress", Record(from, to));
  unobserved["metadata"]["generation"].SetInt64(8);
  json::Document revision = Parse(Revision("web-old", 1, "v1"));
  CHECK(waits(unobserved, &revision) ==
        "unknown: the StatefulSet controller has not observed generation 8 yet");
  CHECK(waits(set, &revision) == "its turn");
}

TEST_CASE("plugin status sts: the progress annotation, valid or malformed") {
  std::optional<ProgressReport> p =
      progress::ParseReport(Progress("False", "ProgressDeadlineExceeded", "stalled"));
  REQUIRE(p.has_value());
  CHECK(p->status == "False");
  CHECK(p->reason == "ProgressDeadlineExceeded");
  CHECK(p->message == "stalled");
  CHECK(p->lastUpdateTime == "2026-12-02T10:00:30Z");
  CHECK(p->lastTransitionTime == "2026-12-02T09:59:00Z");
  // Without a type, or with a message of a wrong type (read as empty): still a report.
  CHECK(
      progress::ParseReport(R"({"status":"True","reason":"InPlaceUpdateCompleted"})").has_value());
  CHECK(progress::ParseReport(R"({"status":"True","reason":"R","message":5})")->message == "");
  for (const char* bad :
       {"", "not json", "[]", "\"text\"", "{\"status\":\"True\"", R"({"status":"True"})",
        R"({"reason":"R"})", R"({"status":1,"reason":"R"})", R"({"status":"True","reason":""})",
        R"({"type":"Progressing","status":"True","reason":"R"})",
        R"({"type":7,"status":"True","reason":"R"})"}) {
    CHECK_MESSAGE(!progress::ParseReport(std::string_view(bad)).has_value(), bad);
  }
  CHECK(!progress::ParseReport(std::nullopt).has_value());

  // A malformed annotation on the StatefulSet reads as no report, nothing more.
  json::Document set = Set("v2", 0);
  Annotate(set, "inplace-webhook.io/in-progress", Record(Hash("v1"), Hash("v2")));
  Annotate(set, keys::kProgressAnnotation, "{\"status\":");
  json::Document pods = Parse("{\"items\":[]}");
  StatusOr<StatusReport> r = BuildStatefulSetStatus(set, pods, nullptr, kNow);
  REQUIRE(r.ok());
  CHECK(r->conditionReason.empty());
  CHECK(r->conditionStatus.empty());
  CHECK(Judge(*r, true) == WatchVerdict::kRunning);
  CHECK(RenderStatus(*r).find("progress:") == std::string::npos);
}

TEST_CASE("plugin status sts --watch: completed, stalled, refused, aborted, settling") {
  json::Document pods = Parse("{\"items\":[]}");
  const std::string rec = Record("a", "b");
  auto report = [&](const std::string& record, const std::string& progress) {
    json::Document set = Set("v2", 0);
    if (!record.empty()) Annotate(set, "inplace-webhook.io/in-progress", record);
    if (!progress.empty()) Annotate(set, keys::kProgressAnnotation, progress);
    StatusOr<StatusReport> r = BuildStatefulSetStatus(set, pods, nullptr, kNow);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return *r;
  };
  CHECK(Judge(report("", ""), false) == WatchVerdict::kDone);
  CHECK(RenderStatus(report("", "")).find("sts/web (namespace db): no in-place update runs\n") ==
        0);
  CHECK(Judge(report(rec, Progress("True", "InPlaceUpdateProgressing")), true) ==
        WatchVerdict::kRunning);
  // Stalled: no progress for the progress-deadline-seconds annotation, or a refused pod write.
  const StatusReport stalled = report(rec, Progress("False", "ProgressDeadlineExceeded"));
  CHECK(Judge(stalled, true) == WatchVerdict::kStuck);
  CHECK(Phase(stalled) == "stuck");
  CHECK(Judge(report(rec, Progress("False", "PodUpdateRefused")), true) == WatchVerdict::kStuck);
  CHECK(Judge(report(rec, Progress("False", "PodResizeRefused")), false) == WatchVerdict::kStuck);
  // The end: completed, aborted, or not yet reported (the record goes before the last report).
  CHECK(Judge(report("", Progress("True", "InPlaceUpdateCompleted")), true) == WatchVerdict::kDone);
  CHECK(Judge(report("", Progress("False", "InPlaceUpdateAborted")), true) ==
        WatchVerdict::kAborted);
  CHECK(Judge(report("", Progress("False", "InPlaceUpdateAborted")), false) == WatchVerdict::kDone);
  CHECK(Judge(report("", Progress("True", "InPlaceUpdateProgressing")), false) ==
        WatchVerdict::kSettling);
  CHECK(RenderStatus(report("", Progress("True", "InPlaceUpdateCompleted", "3/3 pods")))
            .find("  last in-place update: True InPlaceUpdateCompleted: 3/3 pods\n") !=
        std::string::npos);
  // An abort requested shows in the phase.
  json::Document set = Set("v2", 0);
  Annotate(set, "inplace-webhook.io/in-progress", rec);
  Annotate(set, "inplace-webhook.io/abort", "true");
  StatusOr<StatusReport> aborting = BuildStatefulSetStatus(set, pods, nullptr, kNow);
  REQUIRE(aborting.ok());
  CHECK(Phase(*aborting) == "aborting");
  CHECK(RenderStatus(*aborting).find(
            "phase: aborting   paused by user: no   abort requested: yes") != std::string::npos);
}

TEST_CASE("plugin status sts: every pod at or above the partition updated: held by it") {
  const std::string from = Hash("v1"), to = Hash("v2");
  json::Document set = Set("v2", /*partition=*/3);
  Annotate(set, "inplace-webhook.io/in-progress", Record(from, to));
  json::Document pods = Parse(
      "{\"items\":[" + Pod("web-2", "v1", "web-old", "Normal") + "," +
      Pod("web-3", "v2", "web-new", "Normal", R"(,"finalizers":["lb.example.com/registered"])") +
      "]}");
  pods["items"][1]["metadata"]["labels"].AddMember("lb", "up", pods.GetAllocator());
  json::Document revision = Parse(Revision("web-old", 1, "v1"));
  StatusOr<StatusReport> r = BuildStatefulSetStatus(set, pods, &revision, kNow);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->total == 1);
  CHECK(r->updated == 1);
  CHECK(r->pods[0].waitsOn == "held: below partition 3");
  CHECK(Phase(*r) == "held");
  CHECK(Judge(*r, true) == WatchVerdict::kRunning);
  // The partition lowered to 0: the rest follow.
  json::Document lowered = Set("v2", 0);
  Annotate(lowered, "inplace-webhook.io/in-progress", Record(from, to));
  StatusOr<StatusReport> go = BuildStatefulSetStatus(lowered, pods, &revision, kNow);
  REQUIRE(go.ok());
  CHECK(go->total == 2);
  CHECK(go->pods[0].waitsOn == "its turn");
  CHECK(Phase(*go) == "updating");
}

TEST_CASE("plugin explain sts: an image change is made in place, an env change natively") {
  // Revisions 1 (v0), 2 (v1) and 3, the current template (v2); one of another owner.
  json::Document set = Set("v2", 0, "web-3", "web-3");
  json::Document revs =
      Parse("{\"items\":[" + Revision("web-1", 1, "v0") + "," + Revision("web-2", 2, "v1") + "," +
            Revision("web-3", 3, "v2") + "," + Revision("web-x", 2, "v9", "1", "other-uid") + "]}");
  StatusOr<Explanation> e = ExplainStatefulSet(set, revs);
  REQUIRE_MESSAGE(e.ok(), e.status().message());
  CHECK(e->kind == Explanation::Kind::kInPlace);
  CHECK(e->workload == WorkloadKind::kStatefulSet);
  CHECK(e->from == "revision 2 (template " + Hash("v1") + ")");
  CHECK(e->to == "revision 3 (current, template " + Hash("v2") + ")");
  CHECK(e->plan.images == std::map<std::string, std::string>{{"app", "v2"}});
  CHECK(e->decisionReason == "in-place update started: " + Hash("v1") + " -> " + Hash("v2"));
  const std::string text = RenderExplanation(*e);
  CHECK(text.find("sts/web: the last template change, revision 2") == 0);
  CHECK(text.find("is made IN PLACE") != std::string::npos);
  CHECK(text.find("image of app -> v2") != std::string::npos);

  // The env of revision 3 differs from revision 2's: a rolling update.
  json::Document envSet = Set("v1", 0, "web-3", "web-3");
  envSet["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"].SetString("2");
  json::Document envRevs = Parse("{\"items\":[" + Revision("web-2", 2, "v1") + "," +
                                 Revision("web-3", 3, "v1", "2") + "]}");
  StatusOr<Explanation> native = ExplainStatefulSet(envSet, envRevs);
  REQUIRE_MESSAGE(native.ok(), native.status().message());
  CHECK(native->kind == Explanation::Kind::kNative);
  CHECK(native->blockingPath == "spec.template.spec.containers[0].env");
  CHECK(!native->reason.empty());
  CHECK(native->decisionReason ==
        "no in-place update: spec.template.spec.containers[0].env changed");
  const std::string nativeText = RenderExplanation(*native);
  CHECK(nativeText.find("is NOT made in place") != std::string::npos);
  CHECK(nativeText.find("blocking path: spec.template.spec.containers[0].env") !=
        std::string::npos);
}

TEST_CASE("plugin explain sts: while an update runs, from its start; no history; not opted in") {
  // An update from revision 1 (v1) to revision 2 (v2) runs; revision 1 is current.
  json::Document set = Set("v2", 0, "web-1", "web-2");
  Annotate(set, "inplace-webhook.io/in-progress", Record(Hash("v1"), Hash("v2")));
  Annotate(set, "inplace-webhook.io/abort", "true");
  json::Document revs =
      Parse("{\"items\":[" + Revision("web-1", 1, "v1") + "," + Revision("web-2", 2, "v2") + "]}");
  StatusOr<Explanation> e = ExplainStatefulSet(set, revs);
  REQUIRE_MESSAGE(e.ok(), e.status().message());
  CHECK(e->kind == Explanation::Kind::kInPlace);
  CHECK(e->from == "template " + Hash("v1") + " (where the running update started, revision 1)");
  CHECK(e->plan.images == std::map<std::string, std::string>{{"app", "v2"}});

  json::Document single = Parse("{\"items\":[" + Revision("web-2", 2, "v2") + "]}");
  json::Document idle = Set("v2", 0, "web-2", "web-2");
  CHECK(ExplainStatefulSet(idle, single).value().kind == Explanation::Kind::kNoHistory);
  json::Document same =
      Parse("{\"items\":[" + Revision("web-1", 1, "v2") + "," + Revision("web-2", 2, "v2") + "]}");
  CHECK(ExplainStatefulSet(idle, same).value().kind == Explanation::Kind::kNoChange);
  json::Document out = Set("v2", 0, "web-2", "web-2");
  out["metadata"]["labels"]["inplace-webhook.io/enabled"].SetString("false");
  StatusOr<Explanation> notIn = ExplainStatefulSet(out, revs);
  REQUIRE(notIn.ok());
  CHECK(notIn->kind == Explanation::Kind::kNotOptedIn);
  CHECK(RenderExplanation(*notIn) ==
        "sts/web: not opted in (label inplace-webhook.io/enabled=true on the StatefulSet and its "
        "pod template): every change is a native rollout\n");
}
