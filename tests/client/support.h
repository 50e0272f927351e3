// Helpers for the tests that run against the test API server (tests/apiserver/server.py), whose
// address and token file come from IW_TEST_APISERVER / IW_TEST_TOKEN_FILE (tests/client/run.sh).
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lib/json.h"
#include "server/kube/kube_client.h"

namespace iw::test {

struct ServerEnv {
  std::string url;
  std::string tokenFile;
};

inline std::optional<ServerEnv> Server() {
  const char* url = std::getenv("IW_TEST_APISERVER");
  const char* token = std::getenv("IW_TEST_TOKEN_FILE");
  if (url == nullptr || *url == '\0') return std::nullopt;
  return ServerEnv{url, token == nullptr ? "" : token};
}

// Skips the rest of a test case when no test API server is configured.
#define IW_REQUIRE_SERVER(env)                                            \
  auto env##_opt = ::iw::test::Server();                                  \
  if (!env##_opt) {                                                       \
    MESSAGE("IW_TEST_APISERVER is not set (run through ctest): skipped"); \
    return;                                                               \
  }                                                                       \
  const ::iw::test::ServerEnv& env = *env##_opt

inline std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  std::string t;
  std::getline(in, t);
  return t;
}

// Replaces the token file atomically (as kubelet does for projected tokens).
inline void RotateToken(const std::string& path, const std::string& token) {
  std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::trunc) << token << "\n";
  std::filesystem::rename(tmp, path);
}

// A client with fast retries for tests; `tweak` adjusts the configuration.
inline std::unique_ptr<kube::Client> MakeClient(
    const ServerEnv& env, const std::function<void(kube::ClientConfig&)>& tweak = {}) {
  StatusOr<kube::ClientConfig> cfg = kube::ClientConfig::FromUrl(env.url, env.tokenFile, "");
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().message());
  cfg->retryBaseDelay = std::chrono::milliseconds(10);
  cfg->retryMaxDelay = std::chrono::milliseconds(100);
  if (tweak) tweak(*cfg);
  return std::make_unique<kube::Client>(*cfg);
}

// The test server's /_test/ control endpoints, called with a separate plain HTTP client so they
// never show up in the client's counters.
class Control {
 public:
  explicit Control(const ServerEnv& env) : env_(env), http_(env.url) {
    http_.set_read_timeout(std::chrono::seconds(30));
  }

  json::Document Call(const std::string& method, const std::string& path,
                      const std::string& body = "") {
    httplib::Headers h = {{"Authorization", "Bearer " + ReadToken(env_.tokenFile)}};
    httplib::Result r = method == "POST"     ? http_.Post(path, h, body, "application/json")
                        : method == "DELETE" ? http_.Delete(path, h)
                                             : http_.Get(path, h);
    REQUIRE_MESSAGE(r, method << " " << path << ": " << httplib::to_string(r.error()));
    INFO(method << " " << path << " -> " << r->status << " " << r->body);
    REQUIRE(r->status < 300);
    json::Document d;
    if (!r->body.empty()) REQUIRE(json::ParseUntrusted(r->body, d).ok());
    return d;
  }
  void Faults(const std::string& json) { Call("POST", "/_test/faults", json); }
  void ClearFaults() { Call("DELETE", "/_test/faults"); }
  void Compact() { Call("POST", "/_test/compact", "{}"); }
  // The server appends a request to its log after answering it, so a log read right after a
  // call can miss that call: wait until the log stops growing (50 ms apart, at most 2 s).
  void Settle() {
    size_t last = Count();
    for (int i = 0; i < 40; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      size_t now = Count();
      if (now == last) return;
      last = now;
    }
  }
  void ClearRequests() {
    Settle();
    Call("DELETE", "/_test/requests");
  }

  struct Logged {
    std::string method, path, query, contentType, userAgent;
    int code = 0;
  };
  // The request log, oldest first, optionally only entries whose path is `path`.
  std::vector<Logged> Requests(const std::string& path = "") {
    Settle();
    json::Document d = Call("GET", "/_test/requests");
    const json::Value* items = d.IsArray() ? &d : json::Find(&d, "items");
    if (items == nullptr) items = json::Find(&d, "requests");
    REQUIRE_MESSAGE((items != nullptr && items->IsArray()), "unexpected /_test/requests answer");
    std::vector<Logged> out;
    for (const auto& e : items->GetArray()) {
      Logged l;
      l.method = std::string(json::StringOr(&e, "method"));
      l.path = std::string(json::StringOr(&e, "path"));
      l.query = std::string(json::StringOr(&e, "query"));
      l.contentType = std::string(json::StringOr(&e, "contentType"));
      l.userAgent = std::string(json::StringOr(&e, "userAgent"));
      for (const char* k : {"code", "status", "statusCode"}) {
        if (const json::Value* c = json::Find(&e, k); c && c->IsInt()) l.code = c->GetInt();
      }
      if (path.empty() || l.path == path) out.push_back(std::move(l));
    }
    return out;
  }

 private:
  size_t Count() {
    json::Document d = Call("GET", "/_test/requests");
    const json::Value* items = json::Find(&d, "items");
    return items != nullptr && items->IsArray() ? items->Size() : 0;
  }

  ServerEnv env_;
  httplib::Client http_;
};

inline json::Document ParseJson(std::string_view text) {
  json::Document d;
  Status err = json::ParseUntrusted(text, d);
  REQUIRE_MESSAGE(err.ok(), err.message());
  return d;
}

// A pod manifest with one container per image ("name=image").
inline json::Document PodManifest(const std::string& ns, const std::string& name,
                                  const std::string& labelsJson = R"({"app":"web"})",
                                  const std::vector<std::string>& containers = {"app=nginx:1.25"}) {
  std::string c;
  for (const auto& spec : containers) {
    auto eq = spec.find('=');
    if (!c.empty()) c += ',';
    c += R"({"name":")" + spec.substr(0, eq) + R"(","image":")" + spec.substr(eq + 1) + R"("})";
  }
  return ParseJson(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                   R"(","namespace":")" + ns + R"(","labels":)" + labelsJson +
                   R"(},"spec":{"containers":[)" + c + "]}}");
}

// Polls `done` every 20 ms for up to `limit`; returns its last answer.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace iw::test
