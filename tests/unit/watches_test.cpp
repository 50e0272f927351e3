// server/loop/watches: the loop's three informers over the in-memory API (watches that deliver
// nothing: only the LISTs fill the caches), and the work their handlers and the safety resync
// queue.
#include "server/loop/watches.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "hooks/keys.h"
#include "hooks/kube_api.h"
#include "lib/kube_objects.h"
#include "tests/unit/fake_api.h"

using namespace iw;
using loop::WorkKind;
using Steady = std::chrono::steady_clock;

namespace {

constexpr std::chrono::hours kDelay{1};  // the batch delay: far from "now" to tell them apart

// The in-memory API whose watches deliver no event and end at stop. Records each LIST.
class QuietWatches : public kube::WatchApi {
 public:
  explicit QuietWatches(fake::FakeApi& api) : api_(api) {}
  kube::Result Get(std::string_view path) override { return api_.Get(path); }
  kube::Result List(std::string_view path, const kube::ListOptions& options) override {
    {
      std::lock_guard lock(mu_);
      lists_.push_back(std::string(path) + "?" + options.labelSelector);
    }
    return api_.List(path, options);
  }
  kube::Result Create(std::string_view path, const json::Value& object) override {
    return api_.Create(path, object);
  }
  kube::Result Update(std::string_view path, const json::Value& object) override {
    return api_.Update(path, object);
  }
  kube::Result Patch(std::string_view path, kube::PatchType type, std::string_view body) override {
    return api_.Patch(path, type, body);
  }
  kube::Result Delete(std::string_view path) override { return api_.Delete(path); }
  kube::WatchResult Watch(std::string_view, const kube::WatchOptions&, const kube::WatchHandler&,
                          std::stop_token stop) override {
    while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    kube::WatchResult res;
    res.code = 200;
    res.stopped = true;
    return res;
  }
  std::vector<std::string> Lists() {
    std::lock_guard lock(mu_);
    return lists_;
  }

 private:
  fake::FakeApi& api_;
  std::mutex mu_;
  std::vector<std::string> lists_;
};

// What the watches queued, in order.
struct Queued {
  std::mutex mu;
  std::vector<std::tuple<WorkKind, std::string, Steady::time_point>> work;

  loop::Watches::Queue Fn() {
    return [this](WorkKind kind, std::string key, Steady::time_point due) {
      std::lock_guard lock(mu);
      work.emplace_back(kind, std::move(key), due);
    };
  }
  std::vector<std::pair<WorkKind, std::string>> Take() {
    std::lock_guard lock(mu);
    std::vector<std::pair<WorkKind, std::string>> out;
    for (const auto& [kind, key, due] : work) out.emplace_back(kind, key);
    work.clear();
    return out;
  }
};

std::string Deployment(std::string_view name, std::string_view uid, bool inProgress) {
  std::string annotations =
      inProgress ? "\"" + std::string(keys::kInProgressAnnotation) + "\":\"{}\"" : "";
  return R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":")" + std::string(name) +
         R"(","namespace":"ns","uid":")" + std::string(uid) + R"(","annotations":{)" + annotations +
         R"(}},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"a"}},"template":{}}})";
}

std::string ReplicaSet(std::string_view name, std::string_view uid, std::string_view owner,
                       std::string_view ownerUid, std::string_view annotation) {
  std::string annotations = annotation.empty() ? "" : "\"" + std::string(annotation) + "\":\"{}\"";
  return R"({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":")" + std::string(name) +
         R"(","namespace":"ns","uid":")" + std::string(uid) + R"(","annotations":{)" + annotations +
         R"(},"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":")" +
         std::string(owner) + R"(","uid":")" + std::string(ownerUid) +
         R"(","controller":true}]},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"a"}}}})";
}

std::string Pod(std::string_view name, std::string_view rs, std::string_view rsUid, bool optedIn,
                bool gate) {
  const std::string enabled =
      optedIn ? ",\"" + std::string(keys::kEnabledLabel) + "\":\"true\"" : "";
  const std::string gates = gate ? R"(,"readinessGates":[{"conditionType":")" +
                                       std::string(keys::kReadyCondition) + "\"}]"
                                 : "";
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + std::string(name) +
         R"(","namespace":"ns","labels":{"app":"a")" + enabled +
         R"(},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":")" +
         std::string(rs) + R"(","uid":")" + std::string(rsUid) +
         R"(","controller":true}]},"spec":{"containers":[{"name":"app","image":"nginx:1"}])" +
         gates + R"(},"status":{"phase":"Running"}})";
}

struct Fixture {
  fake::FakeApi api;
  QuietWatches watchApi{api};
  Queued queued;

  Fixture() {
    api.Put(kube::DeploymentsPath("ns"), Deployment("web", "d-web", true));
    api.Put(kube::DeploymentsPath("ns"), Deployment("idle", "d-idle", false));
    api.Put(kube::ReplicaSetsPath("ns"), ReplicaSet("web-1", "rs-web-1", "web", "d-web", ""));
    api.Put(kube::ReplicaSetsPath("ns"), ReplicaSet("idle-1", "rs-idle-1", "idle", "d-idle", ""));
    // A copy of our annotation the Deployment controller left: to clean, though idle.
    api.Put(kube::ReplicaSetsPath("ns"),
            ReplicaSet("idle-2", "rs-idle-2", "idle", "d-idle", keys::kAbortAnnotation));
    api.Put(kube::PodsPath("ns"), Pod("web-1-a", "web-1", "rs-web-1", true, true));
    api.Put(kube::PodsPath("ns"), Pod("idle-1-a", "idle-1", "rs-idle-1", true, false));
    api.Put(kube::PodsPath("ns"), Pod("other", "web-1", "rs-web-1", false, true));  // not opted in
  }
};

void WaitSynced(const loop::Watches& w) {
  const auto end = Steady::now() + std::chrono::seconds(10);
  while (!w.Synced() && Steady::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(w.Synced());
}

}  // namespace

TEST_CASE("watches: four informers, the opted-in pods only; the ReplicaSet uid index") {
  Fixture f;
  loop::Watches w(f.watchApi, {"ns", kDelay, std::chrono::seconds(300)}, f.queued.Fn());
  WaitSynced(w);
  w.statefulSets().WaitForSync(std::chrono::seconds(10));  // not part of Synced()
  CHECK(w.deployments().Size() == 2);
  CHECK(w.replicaSets().Size() == 3);
  CHECK(w.pods().Size() == 2);
  CHECK(w.statefulSets().HasSynced());
  CHECK(w.Lists() == 4);
  CHECK(w.Cache(loop::CacheKind::kDeployments) == &w.deployments());
  CHECK(w.Cache(loop::CacheKind::kReplicaSets) == &w.replicaSets());
  CHECK(w.Cache(loop::CacheKind::kPods) == &w.pods());
  const std::vector<std::string> lists = f.watchApi.Lists();
  CHECK(std::find(lists.begin(), lists.end(),
                  kube::PodsPath("ns") + "?" + std::string(keys::kEnabledLabel) + "=true") !=
        lists.end());
  kube::ObjectPtr rs = w.ReplicaSetByUid("rs-web-1");
  REQUIRE(rs != nullptr);
  CHECK(rs->Name() == "web-1");
  CHECK(w.ReplicaSetByUid("rs-none") == nullptr);
}

TEST_CASE(
    "watches: the list's events queue the in-progress Deployment, the annotation copy's "
    "owner and the new pod's gate, each after the batch delay") {
  Fixture f;
  const auto before = Steady::now();
  loop::Watches w(f.watchApi, {"ns", kDelay, std::chrono::seconds(300)}, f.queued.Fn());
  WaitSynced(w);
  const auto after = Steady::now();
  std::set<std::pair<WorkKind, std::string>> keys, ifWaiting;
  {
    std::lock_guard lock(f.queued.mu);
    for (const auto& [kind, key, due] : f.queued.work) {
      (kind == WorkKind::kDeploymentIfWaiting ? ifWaiting : keys).emplace(kind, key);
      CHECK(due >= before + kDelay);
      CHECK(due <= after + kDelay);
    }
  }
  // The ReplicaSet and pod events of web may come before the Deployment cache holds it: the
  // Deployment's own event queues it in any case.
  CHECK(keys == std::set<std::pair<WorkKind, std::string>>{{WorkKind::kDeployment, "ns/web"},
                                                           {WorkKind::kDeployment, "ns/idle"},
                                                           {WorkKind::kPodGate, "ns/web-1-a"}});
  // Every other event asks for its Deployment in case a pass waits on it: idle's own, idle-1's,
  // idle-1-a's (web's ReplicaSet and pod too while the Deployment cache does not hold web yet).
  CHECK(ifWaiting.contains({WorkKind::kDeploymentIfWaiting, "ns/idle"}));
  for (const auto& [kind, key] : ifWaiting) CHECK((key == "ns/idle" || key == "ns/web"));
}

TEST_CASE(
    "watches: the safety resync queues in-progress Deployments at once, then what each "
    "cached ReplicaSet and pod asks, after the batch delay") {
  Fixture f;
  loop::Watches w(f.watchApi, {"ns", kDelay, std::chrono::seconds(300)}, f.queued.Fn());
  WaitSynced(w);
  f.queued.Take();
  const auto before = Steady::now();
  w.Resync();
  std::vector<Steady::time_point> dues;
  {
    std::lock_guard lock(f.queued.mu);
    for (const auto& entry : f.queued.work) dues.push_back(std::get<2>(entry));
  }
  using Work = std::vector<std::pair<WorkKind, std::string>>;
  CHECK(f.queued.Take() == Work{
                               {WorkKind::kDeployment, "ns/web"},            // the Deployment
                               {WorkKind::kDeploymentIfWaiting, "ns/idle"},  // idle-1
                               {WorkKind::kDeployment, "ns/idle"},           // idle-2's copy
                               {WorkKind::kDeployment, "ns/web"},            // web-1
                               {WorkKind::kDeploymentIfWaiting, "ns/idle"},  // idle-1-a
                               {WorkKind::kDeployment, "ns/web"},            // web-1-a
                               {WorkKind::kPodGate, "ns/web-1-a"},           // web-1-a's gate
                           });
  REQUIRE(dues.size() == 7);
  CHECK(dues[0] < before + kDelay);
  for (size_t i = 1; i < dues.size(); ++i) CHECK(dues[i] >= before + kDelay);
}

TEST_CASE("watches: an opted-in StatefulSet with an update, and its pods' events, queue it") {
  Fixture f;
  auto set = [](std::string_view name, std::string_view uid, bool inProgress) {
    std::string s = Deployment(name, uid, inProgress);
    s.replace(s.find("\"kind\":\"Deployment\""), 19, "\"kind\":\"StatefulSet\"");
    s.replace(s.find("\"annotations\""), 0,
              "\"labels\":{\"" + std::string(keys::kEnabledLabel) + "\":\"true\"},");
    return s;
  };
  f.api.Put(kube::StatefulSetsPath("ns"), set("db", "s-db", true));
  f.api.Put(kube::StatefulSetsPath("ns"), set("cache", "s-cache", false));
  std::string pod = Pod("db-0", "db", "s-db", true, false);
  pod.replace(pod.find("\"kind\":\"ReplicaSet\""), 19, "\"kind\":\"StatefulSet\"");
  f.api.Put(kube::PodsPath("ns"), pod);
  loop::Watches w(f.watchApi, {"ns", kDelay, std::chrono::seconds(300)}, f.queued.Fn());
  WaitSynced(w);
  REQUIRE(w.statefulSets().WaitForSync(std::chrono::seconds(10)));
  // Only what the loop reads of a StatefulSet is cached: its identity and the record.
  kube::ObjectPtr db = w.statefulSets().Get("ns", "db");
  REQUIRE(db != nullptr);
  CHECK(json::Find(&db->Value(), "spec") == nullptr);
  CHECK(kube::AnnotationOf(db->Value(), keys::kInProgressAnnotation) == "{}");
  f.queued.Take();
  w.Resync();
  using Work = std::vector<std::pair<WorkKind, std::string>>;
  const Work work = f.queued.Take();
  // The StatefulSet at once; db-0's event asks for it again (the idle one is not queued).
  CHECK(std::count(work.begin(), work.end(),
                   std::pair{WorkKind::kStatefulSet, std::string("ns/db")}) == 2);
  for (const auto& [kind, key] : work) CHECK(key != "ns/cache");
}
