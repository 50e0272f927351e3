#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/metrics.h"
#include "server/options.h"

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
  CHECK(ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k",
                   "--leader-elect", "maybe"})
            .exitCode == 2);
  CHECK(ParseArgs({"iw", "serve", "--tls-cert-file", "c", "--tls-private-key-file", "k", "stray"})
            .exitCode == 2);
  CHECK(ParseArgs({"iw", "serve", "--help"}).exitCode == 0);
  CHECK(ParseArgs({"iw", "frobnicate"}).exitCode == 2);
  CHECK(ParseArgs({"iw", "review", "--path", "/mutate/pods"}).review.path == "/mutate/pods");
}
