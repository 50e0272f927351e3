// The informer against the test API server: relist after compaction, cache equal to the server,
// handlers, server-side selectors, memory per cached pod.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include "server/kube/informer.h"
#include "server/loop/loop_projections.h"
#include "support.h"

using namespace iw;
using namespace iw::kube;
using iw::test::Control;

namespace {

// Forwards to a real client; watches wait while the gate is closed (so a test can make the
// informer fall behind on purpose).
class GatedApi : public WatchApi {
 public:
  explicit GatedApi(WatchApi& api) : api_(api) {}

  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  int Watches() {
    std::lock_guard lock(mu_);
    return watches_;
  }
  bool Waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }

  Result Get(std::string_view p) override { return api_.Get(p); }
  Result List(std::string_view p, const ListOptions& o) override { return api_.List(p, o); }
  Result ListPages(std::string_view p, const ListOptions& o, const PageHandler& h) override {
    return api_.ListPages(p, o, h);
  }
  Result Create(std::string_view p, const json::Value& v) override { return api_.Create(p, v); }
  Result Update(std::string_view p, const json::Value& v) override { return api_.Update(p, v); }
  Result Patch(std::string_view p, PatchType t, std::string_view b) override {
    return api_.Patch(p, t, b);
  }
  Result Delete(std::string_view p) override { return api_.Delete(p); }
  WatchResult Watch(std::string_view path, const WatchOptions& o, const WatchHandler& h,
                    std::stop_token stop) override {
    {
      std::unique_lock lock(mu_);
      waiting_ = !open_;
      cv_.wait(lock, stop, [this] { return open_; });
      waiting_ = false;
      if (stop.stop_requested()) {
        WatchResult r;
        r.stopped = true;
        return r;
      }
      ++watches_;
    }
    return api_.Watch(path, o, h, stop);
  }

 private:
  WatchApi& api_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool open_ = true;
  bool waiting_ = false;
  int watches_ = 0;
};

using State = std::map<std::string, std::string>;  // name -> resourceVersion

State ServerState(Client& client, const std::string& ns) {
  Result r = client.List(PodsPath(ns), {});
  REQUIRE(r.Ok());
  State s;
  for (const auto& item : json::Find(&r.object, "items")->GetArray()) {
    const json::Value* meta = json::Find(&item, "metadata");
    s[std::string(json::StringOr(meta, "name"))] =
        std::string(json::StringOr(meta, "resourceVersion"));
  }
  return s;
}

State CacheState(const Informer& informer) {
  State s;
  for (const auto& o : informer.List())
    s[std::string(o->Name())] = std::string(o->ResourceVersion());
  return s;
}

}  // namespace

TEST_CASE(
    "Informer relists after a closed watch meets a compacted history, ending equal to the server") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-informer";
  for (int i = 0; i < 5; ++i) {
    REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p" + std::to_string(i))).Ok());
  }
  // Every watch the server starts from now on closes after one event.
  control.Faults(R"({"closeWatchAfterEvents":1})");

  GatedApi gated(*client);
  std::mutex mu;
  State seen;  // what the handlers reported, applied in order
  int adds = 0, updates = 0, deletes = 0;
  InformerOptions options;
  options.name = "pods";
  options.path = PodsPath(ns);
  options.pageSize = 2;
  options.projection = loop::PodProjection();
  options.backoffInitial = std::chrono::milliseconds(20);
  options.backoffMax = std::chrono::milliseconds(200);
  options.handlers.onAdd = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    ++adds;
    seen[std::string(o->Name())] = std::string(o->ResourceVersion());
  };
  options.handlers.onUpdate = [&](const ObjectPtr& old, const ObjectPtr& now) {
    std::lock_guard lock(mu);
    ++updates;
    CHECK(seen[std::string(old->Name())] == std::string(old->ResourceVersion()));
    seen[std::string(now->Name())] = std::string(now->ResourceVersion());
  };
  options.handlers.onDelete = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    ++deletes;
    seen.erase(std::string(o->Name()));
  };

  Informer informer(gated, options);
  REQUIRE(informer.WaitForSync(std::chrono::seconds(20)));
  CHECK(informer.Size() == 5);
  REQUIRE(test::Eventually([&] { return gated.Watches() >= 1; }));

  // One change: the watch delivers it and the server closes the stream; the informer's resume
  // then waits at the gate while the history moves on and is compacted.
  gated.Close();
  REQUIRE(
      client->Patch(PodPath(ns, "p0"), PatchType::kMerge, R"({"metadata":{"labels":{"v":"1"}}})")
          .Ok());
  REQUIRE(test::Eventually([&] { return gated.Waiting(); }));
  CHECK(informer.Get(ns, "p0") != nullptr);
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p5")).Ok());
  REQUIRE(client->Delete(PodPath(ns, "p1")).Ok());
  REQUIRE(
      client->Patch(PodPath(ns, "p2"), PatchType::kMerge, R"({"metadata":{"labels":{"v":"2"}}})")
          .Ok());
  control.Compact();
  control.ClearFaults();
  gated.Open();

  // The simulated kubelet keeps writing pod status for a moment: compare with fresh lists.
  State server;
  CHECK(test::Eventually([&] {
    server = ServerState(*client, ns);
    return CacheState(informer) == server;
  }));
  CHECK(CacheState(informer) == server);
  CHECK(informer.GetStats().gone >= 1);
  CHECK(informer.GetStats().lists >= 2);
  CHECK(test::Eventually([&] {
    std::lock_guard lock(mu);
    return seen == CacheState(informer);
  }));
  {
    std::lock_guard lock(mu);
    CHECK(adds == 6);
    CHECK(deletes == 1);
    CHECK(updates >= 2);
  }
  // The projection kept what the loop reads and nothing else.
  ObjectPtr p0 = informer.Get(ns, "p0");
  REQUIRE(p0);
  CHECK(json::StringOr(json::Path(&p0->Value(), {"metadata", "labels"}), "v") == "1");
  CHECK(json::Path(&p0->Value(), {"spec", "containers"}) != nullptr);
  CHECK(json::Path(&p0->Value(), {"metadata", "managedFields"}) == nullptr);

  // Later changes keep flowing through the resumed watch.
  REQUIRE(client->Delete(PodPath(ns, "p3")).Ok());
  CHECK(test::Eventually([&] { return informer.Get(ns, "p3") == nullptr; }));
}

TEST_CASE("Informer with a label selector caches only the matching objects") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-informer-sel";
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "web", R"({"app":"web"})")).Ok());
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "db", R"({"app":"db"})")).Ok());
  InformerOptions options;
  options.name = "web-pods";
  options.path = PodsPath(ns);
  options.labelSelector = "app=web";
  Informer informer(*client, options);
  REQUIRE(informer.WaitForSync(std::chrono::seconds(20)));
  CHECK(CacheState(informer).size() == 1);
  CHECK(informer.Get(ns, "web") != nullptr);
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "web2", R"({"app":"web"})")).Ok());
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "db2", R"({"app":"db"})")).Ok());
  CHECK(test::Eventually([&] { return informer.Get(ns, "web2") != nullptr; }));
  std::string names;
  for (const auto& [name, rv] : CacheState(informer)) names += name + " ";
  INFO("cached: " << names);
  CHECK(informer.Get(ns, "db2") == nullptr);
  CHECK(informer.Size() == 2);
}

TEST_CASE("Informer memory per cached pod, projected and whole") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-memory";
  constexpr int kPods = 200;
  for (int i = 0; i < kPods; ++i) {
    std::string name = "web-7d9f8b6c5-" + std::to_string(10000 + i);
    json::Document pod = test::ParseJson(R"({
      "apiVersion":"v1","kind":"Pod",
      "metadata":{"name":")" + name + R"(","namespace":"t-memory",
        "labels":{"app":"web","pod-template-hash":"7d9f8b6c5","inplace-webhook.io/enabled":"true",
                  "inplace-webhook.io/state":"Normal"},
        "annotations":{"inplace-webhook.io/state-timestamp":"2024-01-01T00:00:00Z",
                       "prometheus.io/scrape":"true"},
        "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8b6c5",
          "uid":"6f1c2b1e-0000-4000-8000-000000000001","controller":true,"blockOwnerDeletion":true}]},
      "spec":{
        "containers":[
          {"name":"app","image":"registry.example.com/team/web:1.27.3",
           "ports":[{"containerPort":8080,"name":"http","protocol":"TCP"}],
           "env":[{"name":"MODE","value":"production"},{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
           "resources":{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"256Mi"}},
           "readinessProbe":{"httpGet":{"path":"/ready","port":8080},"periodSeconds":5},
           "volumeMounts":[{"name":"config","mountPath":"/etc/web"},
                           {"name":"kube-api-access","mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}]},
          {"name":"proxy","image":"envoyproxy/envoy:v1.30.1","args":["--config-path","/etc/envoy/envoy.yaml"]}],
        "readinessGates":[{"conditionType":"inplace-webhook.io/ready"}],
        "volumes":[{"name":"config","configMap":{"name":"web-config"}},
                   {"name":"kube-api-access","projected":{"sources":[{"serviceAccountToken":{"path":"token","expirationSeconds":3607}}]}}],
        "serviceAccountName":"web","nodeName":"node-1","terminationGracePeriodSeconds":30,
        "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]}})");
    Result r = client->Create(PodsPath(ns), pod);
    REQUIRE_MESSAGE(r.Ok(), r.message);
  }
  InformerOptions projected;
  projected.name = "pods-projected";
  projected.path = PodsPath(ns);
  projected.projection = loop::PodProjection();
  InformerOptions whole = projected;
  whole.name = "pods-whole";
  whole.projection = nullptr;

  Informer a(*client, projected);
  Informer b(*client, whole);
  REQUIRE(a.WaitForSync(std::chrono::seconds(30)));
  REQUIRE(b.WaitForSync(std::chrono::seconds(30)));
  REQUIRE(a.Size() == kPods);
  REQUIRE(b.Size() == kPods);
  size_t perPodProjected = a.ApproxBytes() / a.Size();
  size_t perPodWhole = b.ApproxBytes() / b.Size();
  MESSAGE("informer memory per cached pod: "
          << perPodProjected << " bytes projected (the loop's PodProjection; JSON text "
          << json::Serialize(a.List().front()->Value()).size() << " bytes), " << perPodWhole
          << " bytes whole (JSON text " << json::Serialize(b.List().front()->Value()).size()
          << " bytes)");
  CHECK(perPodProjected < perPodWhole);
  // The JSON text of one projected pod is a lower bound of what holding it can cost.
  size_t text = json::Serialize(a.List().front()->Value()).size();
  CHECK(perPodProjected >= text / 2);
  CHECK(perPodProjected < 8 * 1024);
}

namespace {

// Forwards to a real client and counts the pages its ListPages hands over. With `ghost`, the
// first list starts with a page holding one object that is not on the server, then starts over
// (what an expired continue token does): the informer must drop what that page gave.
class PageCountingApi : public GatedApi {
 public:
  PageCountingApi(WatchApi& api, bool ghost) : GatedApi(api), ghost_(ghost) {}
  Result ListPages(std::string_view p, const ListOptions& o, const PageHandler& h) override {
    if (ghost_.exchange(false)) {
      json::Document ghost;
      ghost.Parse(R"({"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"ghost",)"
                  R"("namespace":"t-informer-pages","uid":"g","resourceVersion":"1"}}]})");
      if (!h(ghost, true)) return {};
    }
    return GatedApi::ListPages(p, o, [&](json::Document& page, bool restart) {
      std::lock_guard lock(mu);
      ++pages;
      maxItems = std::max<size_t>(maxItems, json::Find(&page, "items")->Size());
      return h(page, restart);
    });
  }
  std::mutex mu;
  int pages = 0;
  size_t maxItems = 0;

 private:
  std::atomic<bool> ghost_;
};

}  // namespace

TEST_CASE("Informer lists page by page: every page is seen, each projected, a restart dropped") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-informer-pages";
  constexpr int kPods = 25;
  for (int i = 0; i < kPods; ++i) {
    REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p" + std::to_string(i))).Ok());
  }
  for (bool ghost : {false, true}) {
    CAPTURE(ghost);
    PageCountingApi api(*client, ghost);
    InformerOptions options;
    options.name = "pods";
    options.path = PodsPath(ns);
    options.pageSize = 4;
    options.projection = KeepFields({"metadata.name", "metadata.namespace", "metadata.uid",
                                     "metadata.resourceVersion", "spec.containers[].image"});
    int adds = 0;
    options.handlers.onAdd = [&adds](const ObjectPtr&) { ++adds; };
    Informer informer(api, options);
    REQUIRE(informer.WaitForSync(std::chrono::seconds(20)));
    {
      std::lock_guard lock(api.mu);
      CHECK(api.pages == (kPods + 3) / 4);  // 7 pages: 6 of 4, 1 of 1
      CHECK(api.maxItems == 4);
    }
    CHECK(informer.Size() == kPods);
    CHECK(adds == kPods);  // the ghost page was dropped before the cache was swapped in
    CHECK(informer.Get(ns, "ghost") == nullptr);
    // The simulated kubelet may still be writing the pods' status: the watch catches up.
    CHECK(test::Eventually([&] { return CacheState(informer) == ServerState(*client, ns); }));
    CHECK_FALSE(informer.ResourceVersion().empty());
    for (const ObjectPtr& o : informer.List()) {
      CHECK(json::Path(&o->Value(), {"spec", "containers"}) != nullptr);
      CHECK(json::Path(&o->Value(), {"metadata", "labels"}) == nullptr);
      CHECK(json::Path(&o->Value(), {"metadata", "managedFields"}) == nullptr);
      CHECK(json::Find(&o->Value(), "status") == nullptr);
    }
  }
}
