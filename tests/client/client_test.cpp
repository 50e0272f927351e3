// kube::Client against the test API server: status mapping, lists, patches, conflicts,
// subresources, events, leases, token rotation, retries and watches.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "support.h"

using namespace iw;
using namespace iw::kube;
using iw::test::Control;

namespace {

size_t CountPath(const std::vector<Control::Logged>& log, const std::string& method) {
  return static_cast<size_t>(
      std::count_if(log.begin(), log.end(), [&](const auto& l) { return l.method == method; }));
}

std::string Rv(const json::Value& obj) {
  return std::string(json::StringOr(json::Find(&obj, "metadata"), "resourceVersion"));
}

}  // namespace

TEST_CASE("GET returns the object, a missing one the API's 404 Status") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  control.ClearRequests();

  Result created = client->Create(PodsPath("t-get"), test::PodManifest("t-get", "p1"));
  REQUIRE_MESSAGE(created.Ok(), created.message);
  CHECK(created.code == 201);

  Result got = client->Get(PodPath("t-get", "p1"));
  REQUIRE(got.Ok());
  CHECK(json::StringOr(json::Find(&got.object, "metadata"), "name") == "p1");

  Result missing = client->Get(PodPath("t-get", "nope"));
  CHECK(missing.code == 404);
  CHECK(missing.NotFound());
  CHECK(missing.reason == "NotFound");
  CHECK(missing.message.find("nope") != std::string::npos);
  CHECK_FALSE(missing.Ok());

  auto log = control.Requests(PodPath("t-get", "p1"));
  REQUIRE_FALSE(log.empty());
  CHECK(log.back().userAgent.starts_with("inplace-webhook/"));
  // A 404 is final: exactly one request.
  CHECK(control.Requests(PodPath("t-get", "nope")).size() == 1);
}

TEST_CASE("LIST concatenates every page and applies label and field selectors") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-list";
  for (int i = 0; i < 7; ++i) {
    std::string labels =
        i < 5 ? (i < 2 ? R"({"app":"web","tier":"a"})" : R"({"app":"web"})") : R"({"app":"db"})";
    Result r = client->Create(PodsPath(ns), test::PodManifest(ns, "p" + std::to_string(i), labels));
    REQUIRE_MESSAGE(r.Ok(), r.message);
  }
  control.ClearRequests();

  ListOptions paged;
  paged.limit = 2;
  Result all = client->List(PodsPath(ns), paged);
  REQUIRE_MESSAGE(all.Ok(), all.message);
  const json::Value* items = json::Find(&all.object, "items");
  REQUIRE(items);
  REQUIRE(items->IsArray());
  std::set<std::string> names;
  for (const auto& item : items->GetArray()) {
    names.insert(std::string(json::StringOr(json::Find(&item, "metadata"), "name")));
  }
  CHECK(names == std::set<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"});
  CHECK(items->Size() == 7);
  CHECK_FALSE(Rv(all.object).empty());
  CHECK(json::Path(&all.object, {"metadata", "continue"}) == nullptr);
  auto log = control.Requests(PodsPath(ns));
  CHECK(CountPath(log, "GET") == 4);  // pages of 2, 2, 2, 1
  CHECK(std::count_if(log.begin(), log.end(), [](const auto& l) {
          return l.query.find("continue=") != std::string::npos;
        }) == 3);

  struct Case {
    std::string label, field;
    size_t count;
  } cases[] = {
      {"app=web", "", 5},
      {"app=web,tier in (a)", "", 2},
      {"app!=web", "", 2},
      {"", "metadata.name=p3", 1},
      {"app=db", "metadata.name=p3", 0},
      {"app=db", "metadata.name!=p5", 1},
  };
  for (const auto& c : cases) {
    CAPTURE(c.label);
    CAPTURE(c.field);
    ListOptions o;
    o.labelSelector = c.label;
    o.fieldSelector = c.field;
    o.limit = 1;
    Result r = client->List(PodsPath(ns), o);
    REQUIRE_MESSAGE(r.Ok(), r.message);
    CHECK(json::Find(&r.object, "items")->Size() == c.count);
  }
}

TEST_CASE("ListPages hands over one page at a time; a handler's false stops the list") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-list-pages";
  for (int i = 0; i < 7; ++i) {
    REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p" + std::to_string(i))).Ok());
  }
  control.ClearRequests();
  ListOptions o;
  o.limit = 2;
  std::vector<size_t> sizes;
  std::vector<bool> restarts;
  std::set<std::string> names;
  Result r = client->ListPages(PodsPath(ns), o, [&](json::Document& page, bool restart) {
    sizes.push_back(json::Find(&page, "items")->Size());
    restarts.push_back(restart);
    for (const auto& item : json::Find(&page, "items")->GetArray()) {
      names.insert(std::string(json::StringOr(json::Find(&item, "metadata"), "name")));
    }
    CHECK_FALSE(Rv(page).empty());
    return true;
  });
  REQUIRE_MESSAGE(r.Ok(), r.message);
  CHECK(sizes == std::vector<size_t>{2, 2, 2, 1});
  CHECK(restarts == std::vector<bool>{true, false, false, false});
  CHECK(names == std::set<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"});

  control.ClearRequests();
  int pages = 0;
  Result stopped = client->ListPages(PodsPath(ns), o, [&](json::Document&, bool) {
    ++pages;
    return false;
  });
  CHECK_FALSE(stopped.Ok());
  CHECK(stopped.reason == "Stopped");
  CHECK(pages == 1);
  control.Settle();
  CHECK(control.Requests(PodsPath(ns)).size() == 1);
}

TEST_CASE("LIST starts over, paged, when its continue token expires; unpaged the second time") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-list-expired";
  for (int i = 0; i < 8; ++i) {
    REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p" + std::to_string(i))).Ok());
  }
  control.ClearRequests();
  // Each page takes 200 ms (a pass of 8 pages 1.6 s); the history moves on and is compacted
  // while the first pass is being read (at 0.5 s), and again during the second (at 1.5 s).
  control.Faults(R"({"latencyMs":200,"matchMethods":["LIST"],"matchPath":"/t-list-expired/"})");
  Result all;
  std::vector<bool> restarts;
  {
    std::jthread lister([&] {
      ListOptions o;
      o.limit = 1;
      std::set<std::string> names;
      all = client->ListPages(PodsPath(ns), o, [&](json::Document& page, bool restart) {
        restarts.push_back(restart);
        if (restart) names.clear();
        for (const auto& item : json::Find(&page, "items")->GetArray()) {
          names.insert(std::string(json::StringOr(json::Find(&item, "metadata"), "name")));
        }
        return true;
      });
      CHECK(names.size() == 8);
    });
    auto other = test::MakeClient(env);
    for (int round = 0; round < 2; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 500 : 1000));
      // A write after the list's snapshot, then compaction up to it: the snapshot is gone.
      REQUIRE(other
                  ->Create(PodsPath("t-list-expired-other"),
                           test::PodManifest("t-list-expired-other", "x" + std::to_string(round)))
                  .Ok());
      control.Compact();
    }
  }
  control.ClearFaults();
  REQUIRE_MESSAGE(all.Ok(), all.message);
  control.Settle();
  auto log = control.Requests(PodsPath(ns));
  REQUIRE_FALSE(log.empty());
  CHECK(std::count_if(log.begin(), log.end(), [](const auto& l) { return l.code == 410; }) == 2);
  // After the first 410 the list starts over, paged, without a continue token.
  auto first410 = std::find_if(log.begin(), log.end(), [](const auto& l) { return l.code == 410; });
  REQUIRE(first410 + 1 != log.end());
  CHECK((first410 + 1)->query.find("limit=1") != std::string::npos);
  CHECK((first410 + 1)->query.find("continue") == std::string::npos);
  CHECK(log.back().code == 200);
  CHECK(log.back().query.find("limit") == std::string::npos);  // the last resort: unpaged
  CHECK(std::count(restarts.begin(), restarts.end(), true) == 3);
  // List (the pages concatenated) follows the same rules and ends with every item once.
  control.ClearRequests();
  ListOptions o;
  o.limit = 3;
  Result combined = client->List(PodsPath(ns), o);
  REQUIRE(combined.Ok());
  CHECK(json::Find(&combined.object, "items")->Size() == 8);
  CHECK(json::Path(&combined.object, {"metadata", "continue"}) == nullptr);
}

TEST_CASE("PATCH sends merge, JSON and strategic-merge bodies with their content types") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-patch";
  REQUIRE(client
              ->Create(PodsPath(ns), test::PodManifest(ns, "p", R"({"app":"web"})",
                                                       {"a=nginx:1.25", "b=envoy:1"}))
              .Ok());
  control.ClearRequests();
  const std::string path = PodPath(ns, "p");

  Result merge = client->Patch(path, PatchType::kMerge, R"({"metadata":{"labels":{"x":"1"}}})");
  REQUIRE_MESSAGE(merge.Ok(), merge.message);
  CHECK(json::StringOr(json::Path(&merge.object, {"metadata", "labels"}), "x") == "1");

  Result jsonPatch = client->Patch(path, PatchType::kJson,
                                   R"([{"op":"add","path":"/metadata/annotations","value":{}},
          {"op":"add","path":"/metadata/annotations/inplace-webhook.io~1state-timestamp","value":"t"}])");
  REQUIRE_MESSAGE(jsonPatch.Ok(), jsonPatch.message);
  CHECK(json::StringOr(json::Path(&jsonPatch.object, {"metadata", "annotations"}),
                       "inplace-webhook.io/state-timestamp") == "t");

  Result smp = client->Patch(path, PatchType::kStrategicMerge,
                             R"({"spec":{"containers":[{"name":"b","image":"envoy:2"}]}})");
  REQUIRE_MESSAGE(smp.Ok(), smp.message);
  const json::Value* containers = json::Path(&smp.object, {"spec", "containers"});
  REQUIRE(containers);
  REQUIRE(containers->Size() == 2);  // merged by name, not replaced
  CHECK(json::StringOr(&(*containers)[0], "image") == "nginx:1.25");
  CHECK(json::StringOr(&(*containers)[1], "image") == "envoy:2");

  auto log = control.Requests(path);
  REQUIRE(log.size() == 3);
  CHECK(log[0].contentType == "application/merge-patch+json");
  CHECK(log[1].contentType == "application/json-patch+json");
  CHECK(log[2].contentType == "application/strategic-merge-patch+json");

  // A patch the server rejects (a JSON patch test that fails) is a 4xx, never retried.
  control.ClearRequests();
  Result bad = client->Patch(path, PatchType::kJson,
                             R"([{"op":"test","path":"/metadata/name","value":"other"}])");
  CHECK(bad.code >= 400);
  CHECK(bad.code < 500);
  CHECK_FALSE(bad.reason.empty());
  CHECK(control.Requests(path).size() == 1);
}

TEST_CASE("A stale resourceVersion comes back as a Conflict, without retries") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-conflict";
  const std::string path = PodPath(ns, "p");
  Result created = client->Create(PodsPath(ns), test::PodManifest(ns, "p"));
  REQUIRE(created.Ok());
  std::string staleRv = Rv(created.object);
  REQUIRE(client->Patch(path, PatchType::kMerge, R"({"metadata":{"labels":{"v":"2"}}})").Ok());
  control.ClearRequests();

  json::Document stale;
  stale.CopyFrom(created.object, stale.GetAllocator());
  json::SetString(json::EnsureObject(stale, "metadata", stale.GetAllocator()), "resourceVersion",
                  staleRv, stale.GetAllocator());
  Result put = client->Update(path, stale);
  CHECK(put.code == 409);
  CHECK(put.Conflict());
  CHECK(put.reason == "Conflict");

  Result patch =
      client->Patch(path, PatchType::kMerge,
                    R"({"metadata":{"resourceVersion":")" + staleRv + R"(","labels":{"v":"3"}}})");
  CHECK(patch.Conflict());
  CHECK(control.Requests(path).size() == 2);
}

TEST_CASE("pods/status is patched through its subresource path") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-status";
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p")).Ok());
  Result r = client->Patch(
      PodStatusPath(ns, "p"), PatchType::kStrategicMerge,
      R"({"status":{"conditions":[{"type":"inplace-webhook.io/ready","status":"False"}]}})");
  REQUIRE_MESSAGE(r.Ok(), r.message);
  Result got = client->Get(PodPath(ns, "p"));
  REQUIRE(got.Ok());
  const json::Value* conditions = json::Path(&got.object, {"status", "conditions"});
  REQUIRE(conditions);
  REQUIRE(conditions->IsArray());
  bool found = false;
  for (const auto& c : conditions->GetArray()) {
    if (json::StringOr(&c, "type") == "inplace-webhook.io/ready") {
      found = json::StringOr(&c, "status") == "False";
    }
  }
  CHECK(found);
}

TEST_CASE("Events are created and read back") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-events";
  json::Document event = test::ParseJson(R"({
    "apiVersion":"v1","kind":"Event",
    "metadata":{"name":"web.17a1","namespace":"t-events"},
    "involvedObject":{"apiVersion":"apps/v1","kind":"Deployment","name":"web","namespace":"t-events"},
    "reason":"InPlaceUpdateCompleted","message":"3 pods updated in place","type":"Normal",
    "source":{"component":"inplace-webhook"},"count":1,
    "firstTimestamp":"2024-01-01T00:00:00Z","lastTimestamp":"2024-01-01T00:00:00Z"})");
  Result r = client->Create(EventsPath(ns), event);
  REQUIRE_MESSAGE(r.Ok(), r.message);
  Result got = client->Get(EventsPath(ns) + "/web.17a1");
  REQUIRE(got.Ok());
  CHECK(json::StringOr(&got.object, "reason") == "InPlaceUpdateCompleted");
}

TEST_CASE("Leases are created, renewed with their resourceVersion, and conflict when stale") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-lease";
  json::Document lease = test::ParseJson(R"({
    "apiVersion":"coordination.k8s.io/v1","kind":"Lease",
    "metadata":{"name":"inplace-webhook","namespace":"t-lease"},
    "spec":{"holderIdentity":"pod-a","leaseDurationSeconds":15,
            "acquireTime":"2024-01-01T00:00:00.000000Z","renewTime":"2024-01-01T00:00:00.000000Z",
            "leaseTransitions":0}})");
  Result created = client->Create(LeasesPath(ns), lease);
  REQUIRE_MESSAGE(created.Ok(), created.message);
  Result again = client->Create(LeasesPath(ns), lease);
  CHECK(again.code == 409);
  CHECK(again.reason == "AlreadyExists");

  json::Document renewed;
  renewed.CopyFrom(created.object, renewed.GetAllocator());
  json::Value* spec = json::FindMutable(&renewed, "spec");
  json::SetString(*spec, "holderIdentity", "pod-b", renewed.GetAllocator());
  json::SetString(*spec, "renewTime", "2024-01-01T00:00:10.000000Z", renewed.GetAllocator());
  Result updated = client->Update(LeasePath(ns, "inplace-webhook"), renewed);
  REQUIRE_MESSAGE(updated.Ok(), updated.message);
  CHECK(json::StringOr(json::Find(&updated.object, "spec"), "holderIdentity") == "pod-b");
  CHECK(Rv(updated.object) != Rv(created.object));

  // The same write again carries the old resourceVersion: someone else renewed first.
  Result stale = client->Update(LeasePath(ns, "inplace-webhook"), renewed);
  CHECK(stale.Conflict());
}

TEST_CASE("A rotated token is picked up: on 401 at once, or by the periodic re-check") {
  IW_REQUIRE_SERVER(env);
  REQUIRE_FALSE(env.tokenFile.empty());
  Control control(env);
  // Never re-checks on its own: only the 401 makes it re-read the file.
  auto lazy =
      test::MakeClient(env, [](ClientConfig& c) { c.tokenRecheck = std::chrono::hours(1); });
  // Re-checks the file before every call.
  auto eager =
      test::MakeClient(env, [](ClientConfig& c) { c.tokenRecheck = std::chrono::milliseconds(0); });
  const std::string path = PodsPath("t-token");
  REQUIRE(lazy->List(path, {}).Ok());
  REQUIRE(eager->List(path, {}).Ok());

  test::RotateToken(env.tokenFile, "rotated-" + std::to_string(std::time(nullptr)));
  control.ClearRequests();
  Result r = lazy->List(path, {});
  CHECK_MESSAGE(r.Ok(), r.code << " " << r.message);
  auto log = control.Requests(path);
  REQUIRE(log.size() == 2);
  CHECK(log[0].code == 401);
  CHECK(log[1].code == 200);

  control.ClearRequests();
  r = eager->List(path, {});
  CHECK(r.Ok());
  log = control.Requests(path);
  REQUIRE(log.size() == 1);
  CHECK(log[0].code == 200);

  // A token nobody accepts: the 401 comes back (after one re-read), not a retry loop.
  auto wrong = test::MakeClient(env, [](ClientConfig& c) { c.tokenFile.clear(); });
  control.ClearRequests();
  r = wrong->List(path, {});
  CHECK(r.code == 401);
  CHECK(control.Requests(path).size() == 1);
}

TEST_CASE("Retries: reads on 5xx/429, writes only when the server asks, never on 4xx") {
  IW_REQUIRE_SERVER(env);
  // Retry-After is capped to 0 here to keep the table fast; the next block honours it.
  auto client = test::MakeClient(env, [](ClientConfig& c) {
    c.maxRetries = 2;
    c.maxRetryAfter = std::chrono::seconds(0);
  });
  Control control(env);
  const std::string ns = "t-retry";
  const std::string path = PodPath(ns, "p");
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p")).Ok());
  const std::string match = R"("matchPath":"^/api/v1/namespaces/t-retry/pods/p$")";

  struct Case {
    std::string name, faults, method;
    int code;
    size_t requests;
  } cases[] = {
      {"GET on 500: every attempt", R"({"errorRate":1,"errorCode":500,)" + match + "}", "GET", 500,
       3},
      {"GET on 429 with Retry-After",
       R"({"errorRate":1,"errorCode":429,"retryAfterSeconds":1,)" + match + "}", "GET", 429, 3},
      {"PATCH on 500: may have been applied, not retried",
       R"({"errorRate":1,"errorCode":500,"matchMethods":["PATCH"],)" + match + "}", "PATCH", 500,
       1},
      {"PATCH on 429: rejected before running, retried",
       R"({"errorRate":1,"errorCode":429,"retryAfterSeconds":1,"matchMethods":["PATCH"],)" + match +
           "}",
       "PATCH", 429, 3},
      {"PATCH on 503 with Retry-After: the server asks, retried",
       R"({"errorRate":1,"errorCode":503,"retryAfterSeconds":1,"matchMethods":["PATCH"],)" + match +
           "}",
       "PATCH", 503, 3},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    control.ClearFaults();
    control.ClearRequests();
    control.Faults(c.faults);
    Result r = c.method == "GET"
                   ? client->Get(path)
                   : client->Patch(path, PatchType::kMerge, R"({"metadata":{"labels":{"r":"1"}}})");
    CHECK(r.code == c.code);
    CHECK_FALSE(r.Ok());
    CHECK(CountPath(control.Requests(path), c.method) == c.requests);
  }

  // Retry-After is honoured: a 1 s Retry-After delays the retry by at least that.
  control.ClearFaults();
  control.ClearRequests();
  control.Faults(R"({"errorRate":1,"errorCode":429,"retryAfterSeconds":1,)" + match + "}");
  auto began = std::chrono::steady_clock::now();
  auto one = test::MakeClient(env, [](ClientConfig& c) { c.maxRetries = 1; });
  CHECK(one->Get(path).code == 429);
  CHECK(std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(900));
  CHECK(control.Requests(path).size() == 2);

  // Intermittent errors are absorbed.
  control.ClearFaults();
  control.Faults(R"({"errorRate":0.5,"errorCode":500,"seed":7,)" + match + "}");
  auto patient = test::MakeClient(env, [](ClientConfig& c) { c.maxRetries = 12; });
  for (int i = 0; i < 5; ++i) CHECK(patient->Get(path).Ok());
  control.ClearFaults();
  CHECK(patient->Retries() > 0);
}

TEST_CASE("Transport errors come back as code 0; a dead server is retried for reads only") {
  // Nothing listens on port 1 of loopback.
  auto cfg = ClientConfig::FromUrl("http://127.0.0.1:1", "", "");
  REQUIRE(cfg.ok());
  cfg->maxRetries = 2;
  cfg->retryBaseDelay = std::chrono::milliseconds(1);
  Client client(*cfg);
  Result r = client.Get("/api/v1/pods");
  CHECK(r.code == 0);
  CHECK(r.reason == "TransportError");
  CHECK_FALSE(r.message.empty());
  // Connection refused means the request never left: a write is retried too.
  Result w = client.Patch("/api/v1/namespaces/a/pods/b", PatchType::kMerge, "{}");
  CHECK(w.code == 0);
  uint64_t attempts = 0;
  for (const auto& c : client.CallCounts()) {
    CHECK(c.code == 0);
    attempts += c.count;
  }
  CHECK(attempts == 6);
  CHECK(client.Retries() == 4);
}

TEST_CASE("Watch delivers ADDED, MODIFIED and DELETED in order, and ends when told") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-watch";
  Result list = client->List(PodsPath(ns), {});
  REQUIRE(list.Ok());
  std::string rv = Rv(list.object);

  std::mutex mu;
  std::vector<std::string> events;
  WatchResult result;
  std::jthread watcher([&](std::stop_token stop) {
    WatchOptions o;
    o.resourceVersion = rv;
    o.timeoutSeconds = 60;
    result = client->Watch(
        PodsPath(ns), o,
        [&](WatchEvent& e) {
          std::lock_guard lock(mu);
          if (e.type != "BOOKMARK") {
            events.push_back(
                e.type + " " +
                std::string(json::StringOr(json::Find(&e.object, "metadata"), "name")));
          }
          return e.type != "DELETED";
        },
        stop);
  });
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "w")).Ok());
  REQUIRE(client->Patch(PodPath(ns, "w"), PatchType::kMerge, R"({"metadata":{"labels":{"x":"y"}}})")
              .Ok());
  REQUIRE(client->Delete(PodPath(ns, "w")).Ok());
  watcher.join();
  CHECK(result.stopped);  // the handler ended it at DELETED
  std::string seen;
  for (const auto& e : events) seen += e + "; ";
  INFO("events: " << seen);
  // The simulated kubelet may add MODIFIED events of its own: compare without repeats.
  events.erase(std::unique(events.begin(), events.end()), events.end());
  CHECK(events == std::vector<std::string>{"ADDED w", "MODIFIED w", "DELETED w"});

  // An idle watch returns promptly once its stop token fires.
  WatchResult idle;
  std::jthread idler([&](std::stop_token stop) {
    WatchOptions o;
    o.timeoutSeconds = 300;
    idle = client->Watch(
        PodsPath("t-watch-idle"), o, [](WatchEvent&) { return true; }, stop);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  idler.request_stop();
  idler.join();
  CHECK(idle.stopped);
}

TEST_CASE("Watch ends normally at timeoutSeconds; bookmarks carry a resourceVersion") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-bookmark";
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "b")).Ok());
  Result list = client->List(PodsPath(ns), {});
  REQUIRE(list.Ok());
  WatchOptions o;
  o.resourceVersion = Rv(list.object);
  o.timeoutSeconds = 2;
  std::vector<std::string> bookmarks;
  WatchResult r = client->Watch(PodsPath(ns), o,
                                [&](WatchEvent& e) {
                                  if (e.type == "BOOKMARK") bookmarks.emplace_back(Rv(e.object));
                                  return true;
                                },
                                {});
  CHECK(r.Ok());
  CHECK_FALSE(r.stopped);
  for (const auto& b : bookmarks) CHECK_FALSE(b.empty());
  MESSAGE("bookmarks received in a 2 s idle watch: " << bookmarks.size());
}

TEST_CASE("A watch from a compacted resourceVersion is Gone (410)") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-gone";
  Result list = client->List(PodsPath(ns), {});
  REQUIRE(list.Ok());
  std::string old = Rv(list.object);
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "g1")).Ok());
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "g2")).Ok());
  control.Compact();
  WatchOptions o;
  o.resourceVersion = old;
  o.timeoutSeconds = 5;
  WatchResult r = client->Watch(PodsPath(ns), o, [](WatchEvent&) { return true; }, {});
  CHECK(r.Gone());
  CHECK(r.events == 0);
}

TEST_CASE("WatchFrom resumes after the server closes the stream, from the last version seen") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  Control control(env);
  const std::string ns = "t-resume";
  Result list = client->List(PodsPath(ns), {});
  REQUIRE(list.Ok());
  std::string rv = Rv(list.object);
  control.ClearRequests();
  control.Faults(R"({"closeWatchAfterEvents":1})");

  std::mutex mu;
  std::vector<std::string> added;
  WatchResult result;
  std::jthread watcher([&](std::stop_token stop) {
    WatchOptions o;
    o.timeoutSeconds = 60;
    result = WatchFrom(
        *client, PodsPath(ns), o, rv,
        [&](WatchEvent& e) {
          std::lock_guard lock(mu);
          if (e.type == "ADDED") {
            added.emplace_back(json::StringOr(json::Find(&e.object, "metadata"), "name"));
          }
          return added.size() < 3;
        },
        stop, std::chrono::milliseconds(10), std::chrono::milliseconds(100));
  });
  for (int i = 0; i < 3; ++i) {
    REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "r" + std::to_string(i))).Ok());
  }
  REQUIRE(test::Eventually([&] {
    std::lock_guard lock(mu);
    return added.size() >= 3;
  }));
  watcher.join();
  control.ClearFaults();
  CHECK(added == std::vector<std::string>{"r0", "r1", "r2"});
  auto watches = control.Requests(PodsPath(ns));
  watches.erase(std::remove_if(watches.begin(), watches.end(),
                               [](const auto& l) { return l.method != "GET"; }),
                watches.end());
  CHECK(watches.size() >= 3);  // one per event at least: each stream closed after one
  std::set<std::string> from;
  for (const auto& w : watches) from.insert(w.query);
  CHECK(from.size() == watches.size());  // every resume asked for a newer resourceVersion
}

TEST_CASE("Concurrent calls from many threads share the client safely; calls are counted") {
  IW_REQUIRE_SERVER(env);
  auto client = test::MakeClient(env);
  const std::string ns = "t-threads";
  REQUIRE(client->Create(PodsPath(ns), test::PodManifest(ns, "p")).Ok());
  std::atomic<int> ok{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 15; ++i) {
          if (client->Get(PodPath(ns, "p")).Ok()) ++ok;
        }
      });
    }
  }
  CHECK(ok == 120);
  uint64_t gets = 0;
  for (const auto& c : client->CallCounts()) {
    if (c.verb == "get" && c.code == 200) gets = c.count;
  }
  CHECK(gets == 120);
  std::string metrics;
  client->RenderMetrics(metrics);
  CHECK(metrics.find("inplace_webhook_kube_api_requests_total{verb=\"get\",code=\"200\"} 120") !=
        std::string::npos);
  CHECK(metrics.find("inplace_webhook_kube_api_requests_total{verb=\"create\",code=\"201\"} 1") !=
        std::string::npos);
}

TEST_CASE("HTTPS: the server certificate is verified against the configured CA") {
  IW_REQUIRE_SERVER(env);
  const char* url = std::getenv("IW_TEST_APISERVER_TLS");
  const char* ca = std::getenv("IW_TEST_CA_FILE");
  const char* otherCa = std::getenv("IW_TEST_OTHER_CA_FILE");
  REQUIRE(url != nullptr);
  REQUIRE(ca != nullptr);
  REQUIRE(otherCa != nullptr);
  auto cfg = ClientConfig::FromUrl(url, env.tokenFile, ca);
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().message());
  cfg->retryBaseDelay = std::chrono::milliseconds(1);
  Client client(*cfg);
  const std::string ns = "t-tls";
  Result created = client.Create(PodsPath(ns), test::PodManifest(ns, "p"));
  REQUIRE_MESSAGE(created.Ok(), created.code << " " << created.message);
  CHECK(client.Get(PodPath(ns, "p")).Ok());

  // A watch over TLS delivers events and stops on its token.
  WatchResult watched;
  std::atomic<int> events{0};
  std::jthread watcher([&](std::stop_token stop) {
    WatchOptions o;
    o.timeoutSeconds = 300;
    watched = client.Watch(
        PodsPath(ns), o,
        [&](WatchEvent& e) {
          if (e.type == "ADDED") ++events;
          return true;
        },
        stop);
  });
  CHECK(test::Eventually([&] { return events.load() >= 1; }));  // the initial state
  watcher.request_stop();
  watcher.join();
  CHECK(watched.stopped);

  // The same server behind a CA that did not sign it: refused, and not retried.
  auto wrong = ClientConfig::FromUrl(url, env.tokenFile, otherCa);
  REQUIRE_MESSAGE(wrong.ok(), wrong.status().message());
  Client untrusting(*wrong);
  Result r = untrusting.Get(PodPath(ns, "p"));
  CHECK(r.code == 0);
  CHECK(r.message.find("SSL") != std::string::npos);
  CHECK(untrusting.Retries() == 0);
}

// For an in-process httplib::Server under TSan. Debian's libcpp-httplib (not built with TSan)
// keeps Server::parse_request_line's method names in a function-local `static const std::set`:
// the first request builds it under the static-init guard, later threads take the guard's fast
// path inside the uninstrumented library, and TSan, which cannot see that acquire, reports their
// lookups as racing with the build (once a request on one connection is still in its handler
// while another connection's request is parsed). This supplies the order TSan cannot see: each
// request's routing (after its parse) releases `parsed_`, each connection's task acquires it
// before it runs, so every connection accepted after a request was routed is ordered after the
// set was built. Install before listening.
class ParseOrderedQueue {
 public:
  void Install(httplib::Server& server) {
    server.set_pre_routing_handler([this](const httplib::Request&, httplib::Response&) {
      std::lock_guard lock(parsed_);
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server.new_task_queue = [this]() -> httplib::TaskQueue* {
      // httplib owns (and deletes) the queue it is given.
      return std::make_unique<Queue>(parsed_).release();
    };
  }

 private:
  class Queue : public httplib::ThreadPool {
   public:
    explicit Queue(std::mutex& parsed) : httplib::ThreadPool(8), parsed_(parsed) {}
    void enqueue(std::function<void()> fn) override {
      httplib::ThreadPool::enqueue([this, fn = std::move(fn)] {
        { std::lock_guard lock(parsed_); }
        fn();
      });
    }

   private:
    std::mutex& parsed_;
  };
  std::mutex parsed_;
};

TEST_CASE(
    "A call under a DeadlineScope ends at its deadline, hung or retried, and tells the server") {
  // A local server that holds PATCHes until released, answers GET with 503 + Retry-After: 5.
  httplib::Server server;
  ParseOrderedQueue ordered;
  ordered.Install(server);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::string> timeouts;
  server.Patch("/api/v1/namespaces/a/pods/b",
               [&](const httplib::Request& req, httplib::Response& res) {
                 std::unique_lock lock(mu);
                 timeouts.push_back(req.get_param_value("timeout"));
                 cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
                 res.set_content("{}", "application/json");
               });
  server.Get("/api/v1/namespaces/a/pods/b", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_header("Retry-After", "5");
    res.set_content("{}", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  auto cfg = ClientConfig::FromUrl("http://127.0.0.1:" + std::to_string(port), "", "");
  REQUIRE(cfg.ok());
  Client client(*cfg);
  using std::chrono::milliseconds;
  using Steady = std::chrono::steady_clock;

  struct Case {
    std::string name;
    milliseconds budget;
    milliseconds atLeast;  // how long the call must have taken (cut at the deadline)
    std::function<Result()> call;
  } cases[] = {
      {"a hung write is cut at the deadline", milliseconds(300), milliseconds(300),
       [&] { return client.Patch("/api/v1/namespaces/a/pods/b", PatchType::kMerge, "{}"); }},
      {"a retry due after the deadline is not waited for", milliseconds(300), milliseconds(0),
       [&] { return client.Get("/api/v1/namespaces/a/pods/b"); }},
      {"a deadline already passed sends nothing", milliseconds(0), milliseconds(0),
       [&] { return client.Patch("/api/v1/namespaces/a/pods/b", PatchType::kMerge, "{}"); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto began = Steady::now();
    Result r;
    {
      kube::DeadlineScope scope(began + c.budget);
      r = c.call();
    }
    const auto took = Steady::now() - began;
    CHECK(r.code == 0);
    CHECK(r.reason == "Timeout");
    CHECK(took >= c.atLeast);
    CHECK(took < c.budget + milliseconds(400));
  }
  {
    std::lock_guard lock(mu);
    REQUIRE(timeouts.size() == 1);  // the third case never reached the server
    // The API server is asked to give up at the same moment (a Go duration).
    CHECK(timeouts[0].ends_with("ms"));
    CHECK(std::stoi(timeouts[0]) <= 300);
    CHECK(std::stoi(timeouts[0]) > 200);
  }
  // Scopes nest: the earliest deadline wins; outside any scope nothing is bounded by them.
  CHECK_FALSE(kube::DeadlineScope::Current().has_value());
  {
    kube::DeadlineScope outer(Steady::now() + std::chrono::seconds(5));
    kube::DeadlineScope inner(Steady::now() + std::chrono::seconds(50));
    CHECK(*kube::DeadlineScope::Current() < Steady::now() + std::chrono::seconds(6));
  }
  CHECK_FALSE(kube::DeadlineScope::Current().has_value());
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  server.stop();
  serving.join();
}
