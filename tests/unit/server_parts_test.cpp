#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/http/webhook_server.h"
#include "server/loop/loop_status.h"
#include "server/process/metrics.h"
#include "server/process/options.h"

using namespace iw;

TEST_CASE("metrics render in the Prometheus text format") {
  metrics::Registry r;
  r.RecordRequest("/mutate/pods", 200, 0.0004);
  r.RecordRequest("/mutate/pods", 200, 0.002);
  r.RecordRequest("/mutate/pods", 400, 0.001);
  r.RecordHandlerError("/mutate/pods");
  r.certificateReloads = 2;
  r.AddCollector([](std::string& out) { out += "extra_metric 1\n"; });
  std::string text = r.Render();
  CHECK(text.find("inplace_webhook_requests_total{route=\"/mutate/pods\",code=\"200\"} 2\n") !=
        std::string::npos);
  CHECK(text.find("inplace_webhook_requests_total{route=\"/mutate/pods\",code=\"400\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("inplace_webhook_request_duration_seconds_bucket{route=\"/mutate/"
                  "pods\",le=\"0.0005\"} 1\n") != std::string::npos);
  // Buckets are cumulative: 0.0004 <= 0.001 and 0.001 <= 0.001; all three <= 0.0025.
  CHECK(text.find("inplace_webhook_request_duration_seconds_bucket{route=\"/mutate/"
                  "pods\",le=\"0.001\"} 2\n") != std::string::npos);
  CHECK(text.find("inplace_webhook_request_duration_seconds_bucket{route=\"/mutate/"
                  "pods\",le=\"0.0025\"} 3\n") != std::string::npos);
  CHECK(text.find("inplace_webhook_request_duration_seconds_bucket{route=\"/mutate/"
                  "pods\",le=\"2.5\"} 3\n") != std::string::npos);
  CHECK(text.find("inplace_webhook_request_duration_seconds_bucket{route=\"/mutate/"
                  "pods\",le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(text.find("inplace_webhook_request_duration_seconds_count{route=\"/mutate/pods\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("inplace_webhook_handler_errors_total{route=\"/mutate/pods\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("inplace_webhook_certificate_reloads_total 2\n") != std::string::npos);
  CHECK(text.find("extra_metric 1\n") != std::string::npos);
  CHECK(metrics::EscapeLabel("a\"b\\c\n") == "a\\\"b\\\\c\\n");
}

namespace {
cli::Parsed ParseArgs(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return cli::Parse(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("serve flags") {
  auto p = ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k",
                      "--port", "9443", "--max-connections", "64", "--log-format", "text",
                      "--controller-user", "u"});
  REQUIRE_FALSE(p.exitCode.has_value());
  CHECK(p.serve.server.port == 9443);
  CHECK(p.serve.server.probePort == 8080);
  CHECK(p.serve.server.maxConnections == 64);
  CHECK(p.serve.server.maxRequestBytes == 7340032);
  CHECK(p.serve.server.idleTimeoutSeconds == 90);
  CHECK(p.serve.server.controllerUser == "u");
  CHECK(p.serve.logFormat == log::Format::kText);

  CHECK(ParseArgs({"iw", "serve"}).exitCode == 2);  // no certificate
  CHECK(ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k",
                   "--log-level", "loud"})
            .exitCode == 2);
  CHECK(*log::ParseLevel("warning") == log::Level::kWarn);
  CHECK(*log::ParseLevel("debug") == log::Level::kDebug);
  CHECK(log::ParseLevel("loud").status().message() ==
        "--log-level must be debug, info, warn or error");
  CHECK(ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k",
                   "--leader-elect", "maybe"})
            .exitCode == 2);
  CHECK(ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k", "stray"})
            .exitCode == 2);
  CHECK(ParseArgs({"iw", "serve", "--help"}).exitCode == 0);
  CHECK(ParseArgs({"iw", "frobnicate"}).exitCode == 2);
  CHECK(ParseArgs({"iw", "review", "--path", "/mutate/pods"}).review.path == "/mutate/pods");
}

TEST_CASE("serve --role: webhook needs a certificate, controller has no webhook listener") {
  struct Row {
    std::vector<std::string> args;
    std::optional<int> exit;
    std::string role;
    int port;  // -1: no webhook listener
  };
  const std::vector<std::string> tls = {"--tls-cert-file", "c", "--tls-private-key-file", "k"};
  auto with = [&](std::vector<std::string> a, bool cert) {
    std::vector<std::string> out = {"iw", "serve"};
    out.insert(out.end(), a.begin(), a.end());
    if (cert) out.insert(out.end(), tls.begin(), tls.end());
    return out;
  };
  const Row rows[] = {
      {with({}, true), std::nullopt, "all", 8443},
      {with({"--role=webhook", "--loop-status-url=http://c.ns.svc:8080/loopz"}, true), std::nullopt,
       "webhook", 8443},
      {with({"--role=webhook"}, false), 2, "", 0},  // the webhook serves TLS
      {with({"--role=controller"}, false), std::nullopt, "controller", -1},
      {with({"--role=controller", "--probe-port=-1"}, false), 2, "", 0},  // /loopz needs it
      {with({"--role=controller", "--loop-status-url=http://x/loopz"}, false), 2, "", 0},
      {with({"--loop-status-url=http://x/loopz"}, true), 2, "", 0},  // only for role webhook
      {with({"--role=both"}, true), 2, "", 0},
  };
  for (const Row& r : rows) {
    CAPTURE(r.args.size());
    cli::Parsed p = ParseArgs(r.args);
    CHECK(p.exitCode == r.exit);
    if (r.exit) continue;
    CHECK(p.serve.role == r.role);
    CHECK(p.serve.server.port == r.port);
  }
}

TEST_CASE(
    "controller role: /loopz on the probe port, polled by the webhook role's LoopStatusPoller") {
  std::atomic<bool> alive{false};
  metrics::Registry registry;
  server::WebhookServerOptions o;
  o.bindAddress = "127.0.0.1";
  o.port = -1;  // --role=controller: no webhook listener, no certificate
  o.probePort = 0;
  o.loopAlive = [&alive] { return alive.load(); };
  server::WebhookServer controller(std::move(o), registry);
  Status started = controller.Start();
  REQUIRE_MESSAGE(started.ok(), started.message());
  CHECK(controller.Port() == 0);
  server::LoopStatusPoller::Options po;
  po.url = "http://127.0.0.1:" + std::to_string(controller.ProbePort()) + "/loopz";
  po.period = std::chrono::milliseconds(20);
  po.staleAfter = std::chrono::milliseconds(200);
  CHECK(server::LoopStatusPoller::Validate(po.url).ok());
  Status bad = server::LoopStatusPoller::Validate("https://x/loopz");
  CHECK(bad.code() == Status::Code::kInvalidArgument);
  CHECK(bad.message() ==
        "--loop-status-url must be http://HOST[:PORT]/PATH, got \"https://x/loopz\"");
  server::LoopStatusPoller poller(po);
  poller.Start();
  auto eventually = [&poller](bool want) {
    for (int i = 0; i < 200; ++i) {
      if (poller.Alive() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  CHECK(eventually(false));
  alive = true;
  CHECK(eventually(true));
  alive = false;
  CHECK(eventually(false));  // "no loop" clears it at once
  alive = true;
  CHECK(eventually(true));
  controller.Shutdown(std::chrono::milliseconds(0));  // no answer: false within staleAfter
  CHECK(eventually(false));
  std::string text;
  poller.RenderMetrics(text);
  CHECK(text.find("inplace_webhook_loop_status_polls_total{result=\"error\"}") !=
        std::string::npos);
  poller.Stop();
}

TEST_CASE("loop status: the Service's address from the environment when DNS has no answer") {
  ::setenv("IW_TEST_CONTROLLER_SERVICE_HOST", "10.96.0.7", 1);
  CHECK(server::ServiceHostFromEnv("iw-test-controller.inplace-webhook.svc") == "10.96.0.7");
  CHECK(server::ServiceHostFromEnv("iw-test-controller") == "10.96.0.7");
  CHECK(server::ServiceHostFromEnv("no-such-service.ns.svc").empty());
  ::unsetenv("IW_TEST_CONTROLLER_SERVICE_HOST");
}
