// server/loop/loop's StatefulSet passes (DESIGN.md §4.8) against the in-memory API: each pass reads
// the StatefulSet, its pods and its current ControllerRevision, plans and writes; a fake kubelet
// restarts changed containers and a fake StatefulSet controller counts the pods by their
// controller-revision-hash, as the real one does. The update moves every pod in place, highest
// ordinal first, and ends on the controller's own count.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hooks/budget.h"
#include "hooks/keys.h"
#include "hooks/kube_api.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "server/loop/loop.h"
#include "tests/unit/fake_api.h"
#include "tests/unit/rollout_fixtures.h"
#include "tests/unit/test_json.h"

using namespace iw;
using namespace iw::fixtures;

namespace {

constexpr std::string_view kNs = "default";
const std::string kFrom = Template({{"app", "db"}}, {{"app", "db:1"}});
const std::string kTo = Template({{"app", "db"}}, {{"app", "db:2"}});

// The image of container `app` as the pod's spec says.
std::string AppImage(const json::Document& pod) {
  const json::Value* containers = json::Path(&pod, {"spec", "containers"});
  for (const auto& c : containers->GetArray()) {
    if (json::StringOr(&c, "name") == "app") return std::string(json::StringOr(&c, "image"));
  }
  return "";
}

std::string SetJson(const std::string& record) {
  return R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"web","namespace":"default",
             "uid":"sts-uid","generation":4,"labels":{"inplace-webhook.io/enabled":"true"},
             "annotations":{"inplace-webhook.io/in-progress":)" +
         Quote(record) + R"(}},
             "spec":{"replicas":3,"selector":{"matchLabels":{"app":"db"}},"template":)" +
         kTo + R"(},"status":{"observedGeneration":4,"replicas":3,"readyReplicas":3,
             "currentReplicas":3,"updatedReplicas":0,"currentRevision":"web-old","updateRevision":"web-new"}})";
}

// The StatefulSet controller as the loop sees it: updatedReplicas and currentReplicas counted from
// each pod's controller-revision-hash, readyReplicas from Ready, currentRevision moved once every
// replica is updated and ready (completeUpdate).
void StatefulSetControllerSync(fake::FakeApi& api) {
  int updated = 0, current = 0, ready = 0;
  json::Document set = api.Object(kube::StatefulSetPath(kNs, "web"));
  const std::string update(json::StringOr(json::Find(&set, "status"), "updateRevision"));
  const std::string was(json::StringOr(json::Find(&set, "status"), "currentRevision"));
  for (const std::string& path : api.Paths(kube::PodsPath(kNs))) {
    json::Document p = api.Object(path);
    const std::optional<std::string> rev = Label(p, keys::kControllerRevisionHashLabel);
    updated += rev == update ? 1 : 0;
    current += rev == was ? 1 : 0;
    ready += budget::IsReady(test::AsPod(p)) ? 1 : 0;
  }
  api.Mutate(kube::StatefulSetPath(kNs, "web"), [&](json::Document& d) {
    auto& a = d.GetAllocator();
    json::Value& st = json::EnsureObject(d, "status", a);
    json::Set(st, "updatedReplicas", json::Value(updated), a);
    json::Set(st, "currentReplicas", json::Value(current), a);
    json::Set(st, "readyReplicas", json::Value(ready), a);
    if (updated == 3 && ready == 3) {
      json::SetString(st, "currentRevision", update, a);
      json::Set(st, "currentReplicas", json::Value(updated), a);
    }
  });
}

}  // namespace

TEST_CASE(
    "loop: a StatefulSet's passes move its pods in place, highest ordinal first, to the end") {
  fake::FakeApi api;
  const InProgress record{Hash(kFrom), Hash(kTo), /*pausedByUs=*/true, "2026-01-01T00:00:00Z", ""};
  api.Put(kube::StatefulSetsPath(kNs), SetJson(SerializeInProgress(record)));
  // The current revision as the controller stores it: the template with "$patch":"replace".
  for (const auto& [name, templ] : {std::pair{"web-old", kFrom}, std::pair{"web-new", kTo}}) {
    std::string stored = templ;
    stored.insert(stored.find('{') + 1, R"("$patch":"replace",)");
    api.Put("/apis/apps/v1/namespaces/default/controllerrevisions",
            R"({"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"name":")" +
                std::string(name) + R"(","namespace":"default"},"data":{"spec":{"template":)" +
                stored + "}}}");
  }
  for (int i = 0; i < 3; ++i) {
    json::Document p = Pod("web-" + std::to_string(i), "sts-uid", kFrom);
    SetLabel(p, keys::kControllerRevisionHashLabel, "web-old");
    SetLabel(p, keys::kPodTemplateHashLabel, std::nullopt);
    api.Put(kube::PodsPath(kNs), json::Serialize(p));
  }
  loop::LoopMetrics metrics;
  loop::Options options;
  options.expectationTimeout = std::chrono::seconds(1);
  options.metrics = &metrics;
  loop::Loop l(api, options);

  std::vector<std::string> order;  // pods in the order the loop wrote their new image
  int passes = 0;
  for (; passes < 60; ++passes) {
    loop::ReconcileResult r = l.ReconcileStatefulSet(kNs, "web");
    REQUIRE(r.status.ok());
    if (passes == 0) {
      // The update counts in the loop's gauges (its pods by state), never as a Deployment's stall.
      CHECK(metrics.UpdatesInProgress() == 1);
      std::string rendered;
      metrics.Render(rendered);
      CHECK(rendered.find("inplace_webhook_pods{state=\"Normal\"} 3\n") != std::string::npos);
      CHECK(rendered.find("sts:") == std::string::npos);
    }
    for (int i = 0; i < 3; ++i) {
      const std::string name = "web-" + std::to_string(i);
      if (AppImage(api.Object(kube::PodPath(kNs, name))) == "db:2" &&
          std::find(order.begin(), order.end(), name) == order.end()) {
        order.push_back(name);
      }
    }
    fake::KubeletSync(api, kNs);
    StatefulSetControllerSync(api);
    if (!Annotation(api.Object(kube::StatefulSetPath(kNs, "web")), keys::kInProgressAnnotation)) {
      break;
    }
  }
  CHECK(passes < 60);
  CHECK(order == std::vector<std::string>{"web-2", "web-1", "web-0"});
  for (int i = 0; i < 3; ++i) {
    json::Document p = api.Object(kube::PodPath(kNs, "web-" + std::to_string(i)));
    CHECK(Label(p, keys::kControllerRevisionHashLabel) == "web-new");
    CHECK(pod_update::StateOf(test::AsPod(p)) == pod_update::PodState::kNormal);
    CHECK(json::StringOr(json::Find(&p, "metadata"), "uid") == "uid-web-" + std::to_string(i));
  }
  // The StatefulSet's writes: the end (the record dropped) and the progress reports in its
  // annotation (at most one every 2 s of progress, and the completion); never its status, nothing
  // else of it changed.
  CHECK(api.CountWrites("PATCH /apis/apps/v1/namespaces/default/statefulsets/web") >= 2);
  CHECK(api.CountWrites("PATCH /apis/apps/v1/namespaces/default/statefulsets/web/status") == 0);
  CHECK(api.CountWrites("DELETE") == 0);
  json::Document set = api.Object(kube::StatefulSetPath(kNs, "web"));
  CHECK(json::Serialize(*json::Path(&set, {"spec", "template"})) == json::Serialize(Parse(kTo)));
  StatusOr<kube::StatefulSet> view = kube::StatefulSet::From(set, "statefulSet");
  REQUIRE(view.ok());
  const std::optional<progress::Report> report = progress::StoredReport(*view);
  REQUIRE(report);
  CHECK(report->reason == "InPlaceUpdateCompleted");
  CHECK(report->message.starts_with("3/3 pods updated to template "));
  const json::Value* annotations = json::Path(&set, {"metadata", "annotations"});
  REQUIRE(annotations != nullptr);
  CHECK(annotations->MemberCount() == 1);  // the report alone: the record is gone
  // With no record, a pass reads the StatefulSet and stops there (its pods are Normal).
  CHECK(l.ReconcileStatefulSet(kNs, "web").writes == 0);
  CHECK(metrics.UpdatesInProgress() == 0);
}
