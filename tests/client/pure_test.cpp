// Parts of the client and the informer that need no server.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "server/kube/informer.h"
#include "server/kube/kube_client.h"

using namespace iw;
using namespace iw::kube;

namespace {

json::Document Parse(std::string_view text) {
  json::Document d;
  REQUIRE(json::ParseUntrusted(text, d).ok());
  return d;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "iw-client-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string Write(const std::string& name, const std::string& content) const {
    auto p = path / name;
    std::ofstream(p, std::ios::trunc) << content;
    return p.string();
  }
};

}  // namespace

TEST_CASE("QueryEscape keeps unreserved characters and escapes selectors") {
  struct Case {
    std::string in, out;
  } cases[] = {
      {"app=web", "app%3Dweb"},
      {"a in (x,y),!b", "a%20in%20%28x%2Cy%29%2C%21b"},
      {"inplace-webhook.io/state=Normal", "inplace-webhook.io%2Fstate%3DNormal"},
      {"AZaz09-_.~", "AZaz09-_.~"},
      {"", ""},
  };
  for (const auto& c : cases) CHECK(QueryEscape(c.in) == c.out);
}

TEST_CASE("ErrorResult maps a metav1.Status body, and anything else by its code") {
  Result r = ErrorResult(404, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
      "message":"pods \"x\" not found","reason":"NotFound","code":404})");
  CHECK(r.code == 404);
  CHECK(r.NotFound());
  CHECK(r.reason == "NotFound");
  CHECK(r.message == "pods \"x\" not found");

  r = ErrorResult(409, "");
  CHECK(r.Conflict());
  CHECK(r.reason == "Conflict");
  CHECK(r.message.find("409") != std::string::npos);

  r = ErrorResult(503, "upstream connect error\n");
  CHECK(r.reason == "ServiceUnavailable");
  CHECK(r.message == "upstream connect error");

  r = ErrorResult(422, R"({"kind":"NotAStatus","reason":"x"})");
  CHECK(r.reason == "Invalid");
}

TEST_CASE("JsonStreamSplitter cuts a watch stream into events across any chunking") {
  const std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"a\":\"}{\\\"\"}}\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"b\":[1,{\"c\":\"]\"}]}}\n"
      "  {\"type\":\"DELETED\",\"object\":{}}{\"type\":\"BOOKMARK\",\"object\":{}}\r\n";
  const std::vector<std::string> expected = {
      "{\"type\":\"ADDED\",\"object\":{\"a\":\"}{\\\"\"}}",
      "{\"type\":\"MODIFIED\",\"object\":{\"b\":[1,{\"c\":\"]\"}]}}",
      "{\"type\":\"DELETED\",\"object\":{}}",
      "{\"type\":\"BOOKMARK\",\"object\":{}}",
  };
  for (size_t chunk : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(64), stream.size()}) {
    CAPTURE(chunk);
    JsonStreamSplitter s(1 << 20);
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += chunk) {
      REQUIRE(s.Feed(std::string_view(stream).substr(i, chunk), [&](std::string_view v) {
        got.emplace_back(v);
        return true;
      }));
    }
    CHECK(got == expected);
  }
}

TEST_CASE("JsonStreamSplitter rejects garbage and oversized events, and stops on request") {
  JsonStreamSplitter garbage(1024);
  CHECK_FALSE(garbage.Feed("{} nope", [](std::string_view) { return true; }));
  CHECK(garbage.error().find("unexpected") != std::string::npos);

  JsonStreamSplitter small(16);
  CHECK_FALSE(small.Feed("{\"a\":\"0123456789abcdef\"", [](std::string_view) { return true; }));
  CHECK(small.error().find("larger") != std::string::npos);

  JsonStreamSplitter stopping(1024);
  int seen = 0;
  CHECK_FALSE(stopping.Feed("{}{}{}", [&](std::string_view) { return ++seen < 2; }));
  CHECK(seen == 2);
}

TEST_CASE("ClientConfig::FromUrl accepts http(s) URLs and rejects the rest") {
  struct Case {
    std::string url;
    bool ok;
    std::string scheme, host;
    int port;
    std::string base;
  } cases[] = {
      {"http://127.0.0.1:8001", true, "http", "127.0.0.1", 8001, ""},
      {"https://kubernetes.default.svc", true, "https", "kubernetes.default.svc", 443, ""},
      {"http://localhost", true, "http", "localhost", 80, ""},
      {"https://[fd00::1]:6443/", true, "https", "fd00::1", 6443, ""},
      {"https://rancher.example/k8s/clusters/c-1/", true, "https", "rancher.example", 443,
       "/k8s/clusters/c-1"},
      {"ftp://x", false, "", "", 0, ""},
      {"127.0.0.1:8001", false, "", "", 0, ""},
      {"http://:8001", false, "", "", 0, ""},
      {"http://host:0", false, "", "", 0, ""},
      {"http://host:99999", false, "", "", 0, ""},
      {"http://host:", false, "", "", 0, ""},
      {"http://host/?a=b", false, "", "", 0, ""},
      {"https://[fd00::1", false, "", "", 0, ""},
      {"http://user@host", false, "", "", 0, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.url);
    iw::StatusOr<ClientConfig> cfg = ClientConfig::FromUrl(c.url, "", "");
    CHECK(cfg.ok() == c.ok);
    if (!cfg.ok()) {
      CHECK(cfg.status().code() == iw::Status::Code::kInvalidArgument);
      CHECK(cfg.status().message().starts_with("--api-server "));
      continue;
    }
    CHECK(cfg->scheme == c.scheme);
    CHECK(cfg->host == c.host);
    CHECK(cfg->port == c.port);
    CHECK(cfg->basePath == c.base);
  }
  iw::StatusOr<ClientConfig> noToken = ClientConfig::FromUrl("http://h", "/nonexistent/token", "");
  REQUIRE_FALSE(noToken.ok());
  CHECK(noToken.status().code() == iw::Status::Code::kIOError);
  CHECK(noToken.status().message() ==
        "--token-file: cannot read /nonexistent/token: No such file or directory");
  iw::StatusOr<ClientConfig> plainCa = ClientConfig::FromUrl("http://h", "", "/nonexistent/ca.crt");
  REQUIRE_FALSE(plainCa.ok());
  CHECK(plainCa.status().code() == iw::Status::Code::kInvalidArgument);
  CHECK(plainCa.status().message() == "--certificate-authority needs an https:// --api-server");
  iw::StatusOr<ClientConfig> noCa = ClientConfig::FromUrl("https://h", "", "/nonexistent/ca.crt");
  REQUIRE_FALSE(noCa.ok());
  CHECK(noCa.status().code() == iw::Status::Code::kIOError);
  CHECK(noCa.status().message() ==
        "--certificate-authority: cannot read /nonexistent/ca.crt: No such file or directory");
}

TEST_CASE("ClientConfig::InClusterFrom reads the service-account directory") {
  TempDir dir;
  iw::StatusOr<ClientConfig> noToken =
      ClientConfig::InClusterFrom("10.0.0.1", "443", dir.path.string());
  REQUIRE_FALSE(noToken.ok());
  CHECK(noToken.status().code() == iw::Status::Code::kIOError);
  CHECK(noToken.status().message().find("token") != std::string::npos);
  dir.Write("token", " \n");
  CHECK(ClientConfig::InClusterFrom("10.0.0.1", "443", dir.path.string()).status().message() ==
        "the service-account token: " + (dir.path / "token").string() + " is empty");

  dir.Write("token", "abc\n");
  iw::StatusOr<ClientConfig> noCa =
      ClientConfig::InClusterFrom("10.0.0.1", "443", dir.path.string());
  REQUIRE_FALSE(noCa.ok());
  CHECK(noCa.status().code() == iw::Status::Code::kIOError);
  CHECK(noCa.status().message().find("ca.crt") != std::string::npos);

  dir.Write("ca.crt", "-----BEGIN CERTIFICATE-----\n");
  dir.Write("namespace", "team-a\n");
  iw::StatusOr<ClientConfig> cfg =
      ClientConfig::InClusterFrom("fd00::1", "6443", dir.path.string());
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().message());
  CHECK(cfg->scheme == "https");
  CHECK(cfg->host == "fd00::1");
  CHECK(cfg->port == 6443);
  CHECK(cfg->namespaceName == "team-a");
  CHECK(cfg->tokenFile == (dir.path / "token").string());
  CHECK(cfg->caFile == (dir.path / "ca.crt").string());
  CHECK(cfg->Url() == "https://[fd00::1]:6443");

  iw::StatusOr<ClientConfig> badPort =
      ClientConfig::InClusterFrom("10.0.0.1", "https", dir.path.string());
  REQUIRE_FALSE(badPort.ok());
  CHECK(badPort.status().code() == iw::Status::Code::kInvalidArgument);
  CHECK(badPort.status().message() == "KUBERNETES_SERVICE_PORT is not a port number: https");
}

TEST_CASE("TokenFile re-reads the file only when it changed") {
  TempDir dir;
  std::string path = dir.Write("token", "first\n");
  TokenFile token(path, std::chrono::hours(1));
  CHECK(token.Token() == "first");
  CHECK_FALSE(token.Reload());  // unchanged
  // Kubelet swaps projected tokens by renaming a new file into place.
  dir.Write("token.new", "second");
  std::filesystem::rename(dir.path / "token.new", path);
  CHECK(token.Token() == "first");  // not rechecked yet (1 h)
  CHECK(token.Reload());
  CHECK(token.Token() == "second");
  // An unreadable or empty file keeps the last good token.
  dir.Write("token", "");
  CHECK_FALSE(token.Reload());
  CHECK(token.Token() == "second");
}

TEST_CASE("Backoff doubles up to the cap, jittered into [d/2, d]") {
  using ms = std::chrono::milliseconds;
  struct Case {
    int attempt;
    int64_t lo, hi;
  } cases[] = {{0, 50, 100}, {1, 100, 200}, {3, 400, 800}, {10, 500, 1000}, {60, 500, 1000}};
  for (const auto& c : cases) {
    for (int i = 0; i < 20; ++i) {
      auto d = Backoff(c.attempt, ms(100), ms(1000)).count();
      CHECK(d >= c.lo);
      CHECK(d <= c.hi);
    }
  }
  CHECK(Backoff(3, ms(0), ms(1000)).count() == 0);
}

TEST_CASE("RateLimiter lets a burst through and then makes callers wait") {
  RateLimiter limiter(100, 3);
  for (int i = 0; i < 3; ++i) CHECK(limiter.Acquire().count() == 0);
  CHECK(limiter.Acquire().count() > 0);
  RateLimiter unlimited(0, 1);
  for (int i = 0; i < 10; ++i) CHECK(unlimited.Acquire().count() == 0);
}

TEST_CASE("RateLimiter::TryAcquire takes a token only when one is there, and never queues") {
  RateLimiter limiter(1, 2);
  CHECK(limiter.TryAcquire());
  CHECK(limiter.TryAcquire());
  CHECK_FALSE(limiter.TryAcquire());  // empty: refused at once, no debt left behind
  CHECK_FALSE(limiter.TryAcquire());
  RateLimiter unlimited(0, 1);
  for (int i = 0; i < 10; ++i) CHECK(unlimited.TryAcquire());
}

TEST_CASE("LabelSelector parses the query syntax and matches like the API server") {
  json::Document labels =
      Parse(R"({"app":"web","tier":"front","inplace-webhook.io/state":"Normal"})");
  struct Case {
    std::string selector;
    bool matches;
  } cases[] = {
      {"", true},
      {"app=web", true},
      {"app==web", true},
      {"app = web , tier=front", true},
      {"app=db", false},
      {"app!=db", true},
      {"missing!=x", true},
      {"app in (db, web)", true},
      {"app in (db)", false},
      {"app notin (db)", true},
      {"missing notin (db)", true},
      {"app notin (web)", false},
      {"tier", true},
      {"missing", false},
      {"!missing", true},
      {"!app", false},
      {"inplace-webhook.io/state=Normal", true},
      {"inplace-webhook.io/state in (Updating,Updated)", false},
      {"missing=", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.selector);
    StatusOr<LabelSelector> s = LabelSelector::Parse(c.selector);
    REQUIRE_MESSAGE(s.ok(), s.status().message());
    CHECK(s->Matches(&labels) == c.matches);
  }
  for (std::string bad : {"=x", "a in x", "a in (x", "a b", "a,", "a < 3", "a=b)"}) {
    CAPTURE(bad);
    const Status s = LabelSelector::Parse(bad).status();
    CHECK_FALSE(s.ok());
    CHECK_FALSE(s.message().empty());
  }
  StatusOr<LabelSelector> s = LabelSelector::Parse("app=web");
  REQUIRE(s.ok());
  CHECK_FALSE(s->Matches(nullptr));
  CHECK(LabelSelector().Matches(nullptr));
}

TEST_CASE("LabelSelector::FromJson reads metav1.LabelSelector") {
  json::Document labels = Parse(R"({"app":"web","tier":"front"})");
  struct Case {
    std::string selector;
    bool valid, matches;
  } cases[] = {
      {R"({})", true, true},
      {R"({"matchLabels":{"app":"web"}})", true, true},
      {R"({"matchLabels":{"app":"web","tier":"back"}})", true, false},
      {R"({"matchExpressions":[{"key":"tier","operator":"In","values":["front","x"]}]})", true,
       true},
      {R"({"matchExpressions":[{"key":"tier","operator":"NotIn","values":["front"]}]})", true,
       false},
      {R"({"matchExpressions":[{"key":"app","operator":"Exists"}]})", true, true},
      {R"({"matchExpressions":[{"key":"x","operator":"DoesNotExist"}]})", true, true},
      {R"({"matchExpressions":[{"key":"x","operator":"In","values":[]}]})", false, false},
      {R"({"matchExpressions":[{"key":"x","operator":"Exists","values":["a"]}]})", false, false},
      {R"({"matchExpressions":[{"key":"x","operator":"Gt","values":["1"]}]})", false, false},
      {R"({"matchLabels":{"app":1}})", false, false},
      {R"([])", false, false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.selector);
    json::Document d = Parse(c.selector);
    StatusOr<LabelSelector> s = LabelSelector::FromJson(d);
    CHECK(s.ok() == c.valid);
    if (s.ok()) CHECK(s->Matches(&labels) == c.matches);
  }
}

namespace {
constexpr std::string_view kPod = R"({
  "apiVersion":"v1","kind":"Pod",
  "metadata":{"name":"web-1","namespace":"default","uid":"u1","resourceVersion":"7",
    "labels":{"app":"web"},"annotations":{"a":"b"},
    "managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],
    "ownerReferences":[{"kind":"ReplicaSet","name":"web-abc","uid":"rs-1"}]},
  "spec":{"containers":[
      {"name":"app","image":"nginx:1.27","env":[{"name":"A","value":"1"}],"resources":{}},
      {"name":"side","image":"envoy:1"}],
    "readinessGates":[{"conditionType":"inplace-webhook.io/ready"}],
    "volumes":[{"name":"v","emptyDir":{}}]},
  "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
    "containerStatuses":[{"name":"app","image":"nginx:1.27","imageID":"sha256:1",
      "containerID":"containerd://c1","restartCount":0,"ready":true,
      "state":{"running":{"startedAt":"2024-01-01T00:00:00Z"}}}]}
})";
}  // namespace

TEST_CASE("KeepFields keeps exactly the listed paths, through arrays, merging shared prefixes") {
  json::Document pod = Parse(kPod);
  json::Document out;
  KeepFields({"metadata.name",
              "metadata.namespace",
              "metadata.uid",
              "metadata.resourceVersion",
              "metadata.creationTimestamp",
              "metadata.labels",
              "metadata.annotations",
              "metadata.finalizers",
              "metadata.ownerReferences",
              "metadata.deletionTimestamp",
              "spec.containers[].name",
              "spec.containers[].image",
              "spec.containers[].resources",
              "spec.readinessGates",
              "status.phase",
              "status.conditions",
              "status.containerStatuses[].name",
              "status.containerStatuses[].image",
              "status.containerStatuses[].imageID",
              "status.containerStatuses[].containerID",
              "status.containerStatuses[].restartCount",
              "status.containerStatuses[].resources",
              "status.containerStatuses[].ready"})(pod, out, out.GetAllocator());
  json::Document expected = Parse(R"({
    "metadata":{"name":"web-1","namespace":"default","uid":"u1","resourceVersion":"7",
      "labels":{"app":"web"},"annotations":{"a":"b"},
      "ownerReferences":[{"kind":"ReplicaSet","name":"web-abc","uid":"rs-1"}]},
    "spec":{"containers":[{"name":"app","image":"nginx:1.27","resources":{}},{"name":"side","image":"envoy:1"}],
      "readinessGates":[{"conditionType":"inplace-webhook.io/ready"}]},
    "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
      "containerStatuses":[{"name":"app","image":"nginx:1.27","imageID":"sha256:1",
        "containerID":"containerd://c1","restartCount":0,"ready":true}]}
  })");
  CHECK(json::SerializeCanonical(out) == json::SerializeCanonical(expected));
}

TEST_CASE("Object::Make copies every string and sizes its pool to the object") {
  ObjectPtr obj;
  std::string expected;
  {
    json::Document source = Parse(kPod);
    // A value that references (does not own) a string that dies with this scope.
    std::string owned = "short-lived-string-longer-than-sso-buffer";
    json::Value ref(json::Ref(owned));
    json::Set(source, "extra", ref, source.GetAllocator());
    expected = json::SerializeCanonical(source);
    obj = Object::Make(source);
    owned.assign(owned.size(), 'X');
  }
  CHECK(json::SerializeCanonical(obj->Value()) == expected);
  CHECK(obj->Name() == "web-1");
  CHECK(obj->Namespace() == "default");
  CHECK(obj->Uid() == "u1");
  CHECK(obj->ResourceVersion() == "7");
  REQUIRE(obj->Labels());
  // Far below RapidJSON's default 64 KiB first chunk, and at least the text it holds.
  CHECK(obj->ApproxBytes() < 8 * 1024);
  CHECK(obj->ApproxBytes() > 400);
}

namespace {

// A scripted WatchApi: List answers the current `items`; each Watch plays the next script entry.
class FakeApi : public WatchApi {
 public:
  struct Step {
    std::vector<std::pair<std::string, std::string>> events;  // type, object JSON
    int endCode = 200;                                        // 410: Gone
  };
  std::mutex mu;
  std::vector<std::string> listAnswers;  // the n-th List answers the n-th (the last repeats)
  std::vector<Step> steps;
  size_t next = 0;
  int lists = 0;
  std::vector<std::string> watchedFrom;

  Result Get(std::string_view) override { return {}; }
  Result List(std::string_view, const ListOptions&) override {
    std::lock_guard lock(mu);
    Result r;
    r.code = 200;
    r.object.Parse(listAnswers[std::min<size_t>(lists, listAnswers.size() - 1)].c_str());
    ++lists;
    return r;
  }
  Result Create(std::string_view, const json::Value&) override { return {}; }
  Result Update(std::string_view, const json::Value&) override { return {}; }
  Result Patch(std::string_view, PatchType, std::string_view) override { return {}; }
  Result Delete(std::string_view) override { return {}; }
  WatchResult Watch(std::string_view, const WatchOptions& o, const WatchHandler& handler,
                    std::stop_token stop) override {
    Step step;
    {
      std::lock_guard lock(mu);
      watchedFrom.push_back(o.resourceVersion);
      if (next < steps.size()) step = steps[next++];
    }
    if (step.events.empty() && step.endCode == 200) {
      // Script exhausted: block like an idle watch until stopped.
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
      WatchResult r;
      r.stopped = true;
      return r;
    }
    WatchResult r;
    for (auto& [type, obj] : step.events) {
      WatchEvent e;
      e.type = type;
      e.object.Parse(obj.c_str());
      ++r.events;
      handler(e);
    }
    r.code = step.endCode;
    return r;
  }
};

std::string PodJson(std::string name, std::string rv, std::string app = "web") {
  return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" + rv +
         R"(","labels":{"app":")" + app + R"("},"ownerReferences":[{"uid":"rs-)" + app + R"("}]}})";
}

}  // namespace

TEST_CASE("Informer resumes after a normal close and reconciles on relist after 410") {
  FakeApi api;
  api.listAnswers = {
      R"({"metadata":{"resourceVersion":"10"},"items":[)" + PodJson("a", "5") + "," +
          PodJson("b", "6") + "]}",
      // After the 410: a is gone, b unchanged, c changed, d is new.
      R"({"metadata":{"resourceVersion":"30"},"items":[)" + PodJson("b", "11") + "," +
          PodJson("c", "20", "db") + "," + PodJson("d", "21") + "]}",
  };
  api.steps = {
      // Watch 1 (from 10): b modified, c added, a bookmark; ends normally.
      {{{"MODIFIED", PodJson("b", "11")},
        {"ADDED", PodJson("c", "12", "db")},
        {"BOOKMARK", R"({"metadata":{"resourceVersion":"15"}})"}},
       200},
      // Watch 2 must resume from the bookmark; it ends with 410 Gone.
      {{}, 410},
      // Watch 3 (after the relist) idles until the informer stops.
  };
  std::mutex mu;
  std::vector<std::string> seen;
  InformerOptions options;
  options.name = "pods";
  options.path = "/api/v1/pods";
  options.backoffInitial = std::chrono::milliseconds(1);
  options.handlers.onAdd = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    seen.push_back("add " + std::string(o->Name()));
  };
  options.handlers.onUpdate = [&](const ObjectPtr& old, const ObjectPtr& now) {
    std::lock_guard lock(mu);
    seen.push_back("update " + std::string(now->Name()) + " " +
                   std::string(old->ResourceVersion()) + "->" +
                   std::string(now->ResourceVersion()));
  };
  options.handlers.onDelete = [&](const ObjectPtr& o) {
    std::lock_guard lock(mu);
    seen.push_back("delete " + std::string(o->Name()));
  };
  {
    Informer informer(api, options);
    REQUIRE(informer.WaitForSync(std::chrono::seconds(10)));
    for (int i = 0; i < 1000 && informer.GetStats().lists < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE(informer.GetStats().lists >= 2);
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard lock(api.mu);
        if (api.watchedFrom.size() >= 3) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(informer.GetStats().gone == 1);
    CHECK(informer.Size() == 3);
    CHECK(informer.Get("ns", "a") == nullptr);
    REQUIRE(informer.Get("ns", "c"));
    CHECK(informer.Get("ns", "c")->ResourceVersion() == "20");
    CHECK(informer.ResourceVersion() == "30");
    StatusOr<LabelSelector> web = LabelSelector::Parse("app=web");
    REQUIRE(web.ok());
    CHECK(informer.List("ns", *web).size() == 2);
    CHECK(informer.List("other", *web).empty());
    CHECK(informer.ListOwnedBy("ns", "rs-db").size() == 1);
    CHECK(informer.ListOwnedBy("", "rs-web").size() == 2);
  }
  std::lock_guard lock(api.mu);
  REQUIRE(api.watchedFrom.size() >= 3);
  CHECK(api.watchedFrom[0] == "10");
  CHECK(api.watchedFrom[1] == "15");  // resumed from the bookmark, no relist
  CHECK(api.watchedFrom[2] == "30");  // after the relist
  CHECK(seen == std::vector<std::string>{"add a", "add b", "update b 6->11", "add c",
                                         "update c 12->20", "add d", "delete a"});
}

TEST_CASE(
    "Informer survives throwing handlers, resyncs periodically, and stops while backing off") {
  FakeApi api;
  api.listAnswers = {R"({"metadata":{"resourceVersion":"3"},"items":[)" + PodJson("a", "1") + "," +
                     PodJson("b", "2") + "]}"};
  std::atomic<int> adds{0}, resyncs{0};
  InformerOptions options;
  options.name = "pods";
  options.path = "/api/v1/pods";
  options.resyncPeriod = std::chrono::milliseconds(20);
  options.handlers.onAdd = [&](const ObjectPtr&) {
    ++adds;
    throw std::runtime_error("handler bug");
  };
  options.handlers.onResync = [&](const ObjectPtr&) { ++resyncs; };
  {
    Informer informer(api, options);
    REQUIRE(informer.WaitForSync(std::chrono::seconds(10)));
    for (int i = 0; i < 500 && resyncs.load() < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(adds == 2);     // both delivered although the first one threw
    CHECK(resyncs >= 4);  // two objects, at least two periods
    CHECK(informer.Size() == 2);
  }

  // A LIST that keeps failing backs off; the destructor still returns at once.
  class FailingApi : public FakeApi {
   public:
    std::atomic<int> calls{0};
    Result List(std::string_view, const ListOptions&) override {
      ++calls;
      Result r;
      r.code = 503;
      r.reason = "ServiceUnavailable";
      return r;
    }
  } failing;
  InformerOptions slow;
  slow.name = "failing";
  slow.path = "/api/v1/pods";
  slow.backoffInitial = std::chrono::seconds(60);
  slow.backoffMax = std::chrono::seconds(60);
  auto began = std::chrono::steady_clock::now();
  {
    Informer informer(failing, slow);
    CHECK_FALSE(informer.WaitForSync(std::chrono::milliseconds(50)));
  }
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(30));
  CHECK(failing.calls == 1);
}
