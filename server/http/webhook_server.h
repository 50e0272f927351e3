// The process's two listeners: HTTPS for AdmissionReviews (the routes of hooks/) and plain
// HTTP for probes and metrics, both served by http::Server. Owns the certificate store and the
// TLS context.
//
// Thread safety: Start() once and Shutdown() (idempotent; the destructor calls it) from the
// owner's thread, never from a request. Reviews and probes are served on the worker threads of
// both listeners at once: options.loopAlive, askHold, holdz and notReady are called there,
// concurrently, and must be thread-safe and quick. Ready() from any thread; Port(), ProbePort() and
// (with a webhook port) Certificates(), a thread-safe store, once Start() has returned. Start()
// adds collectors to `metrics` that point into this server: the registry must not render once the
// server is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "hooks/admission.h"
#include "lib/status.h"
#include "server/http/tls_certificates.h"
#include "server/process/metrics.h"

namespace iw::http {
class ByteBudget;
class Server;
struct Request;
struct Response;
}  // namespace iw::http

namespace iw::server {

struct WebhookServerOptions {
  std::string bindAddress = "0.0.0.0";
  int port = 8443;       // 0: any free port (tests)
  int probePort = 8080;  // 0: any free port; -1: no probe listener
  std::string certFile, keyFile, clientCaFile;
  size_t maxRequestBytes = 7 * 1024 * 1024;
  size_t maxConnections = 256;
  size_t maxProbeConnections = 64;
  // Request bytes all connections of both ports may hold beyond 64 KiB each (http::ByteBudget).
  size_t maxInflightRequestBytes = 64 * 1024 * 1024;
  size_t workerThreads = 0;  // 0: one per CPU, at most 4
  int firstRequestTimeoutSeconds = 5;
  int headerTimeoutSeconds = 2;  // a request head must be whole this long after its first byte
  int readTimeoutSeconds = 10;
  int idleTimeoutSeconds = 90;
  // Shutdown: how long requests under way when the listener closes may take to be answered.
  std::chrono::milliseconds shutdownGrace{30000};
  std::chrono::milliseconds certCheckInterval{1000};
  // Start without the certificate files (--tls-wait-for-files): /readyz fails and handshakes fail
  // until they appear (a Secret the certificate controller fills after the pod started).
  bool waitForCertificate = false;
  std::chrono::seconds ticketKeyRotation{3600};  // session ticket keys (§9.7)
  std::string controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
  std::string statefulSetControllerUser =
      "system:serviceaccount:kube-system:statefulset-controller";
  // admission::Context::resize for each review; absent: nothing in place (--pod-resize).
  std::function<resize_support::Support()> resizeSupport;
  // admission::Context::loopAlive for each review; absent: false (no loop known to run).
  std::function<bool()> loopAlive;
  // admission::Context::askHold for each review (thread-safe; bounded in time); absent: never
  // asked, every pod DELETE goes through.
  std::function<std::optional<statefulset_hold::Answer>(const statefulset_hold::PodFacts&)> askHold;
  // /holdz on the probe port (DESIGN.md §4.8): the status and body for the request's query;
  // absent: 404 (a process without the loop's API client).
  std::function<std::pair<int, std::string>(std::string_view query)> holdz;
  // Why this process is not ready beyond its listeners ("" or absent: nothing): the loop's
  // identity check (DESIGN.md §9.6). /readyz answers 503 with it.
  std::function<std::string()> notReady;
};

class WebhookServer {
 public:
  WebhookServer(WebhookServerOptions options, metrics::Registry& metrics);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Loads the certificate, binds both ports and starts serving on background threads.
  // Failure: CertificateStore::LoadInitial's or ConfigureContext's, IOError when the TLS context
  // cannot be made, or http::Server::Start's (prefixed "probes: " for the probe port); Shutdown()
  // (or the destructor) then stops whatever did start.
  Status Start();

  // Graceful stop: /readyz turns false, then after `drainDelay` (for endpoints to notice) the
  // HTTPS listener stops accepting, reviews under way get their answer for up to
  // `options.shutdownGrace` (and not past `deadline`, when given), and the threads are joined.
  void Shutdown(std::chrono::milliseconds drainDelay,
                std::chrono::steady_clock::time_point deadline = {});

  int Port() const { return port_; }
  int ProbePort() const { return probePort_; }
  bool Ready() const { return ready_.load(); }
  tls::CertificateStore& Certificates() { return *certs_; }

 private:
  void ServeReview(const http::Request& req, http::Response& res);
  void ServeProbe(const http::Request& req, http::Response& res);
  void Refuse(int status, std::string_view message, std::string_view path, http::Response& res);
  // Connection closings, shed requests and the byte budget, for /metrics.
  void RenderProtectionMetrics(std::string& out) const;

  WebhookServerOptions options_;
  metrics::Registry& metrics_;
  std::unique_ptr<tls::CertificateStore> certs_;
  struct TlsContextFree {
    void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  };
  std::unique_ptr<SSL_CTX, TlsContextFree> tls_;
  std::unique_ptr<http::ByteBudget> budget_;  // shared by both listeners; outlives them
  std::unique_ptr<http::Server> https_;
  std::unique_ptr<http::Server> probes_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> shuttingDown_{false};
  std::atomic<uint64_t> shedTooManyValues_{0};
  int port_ = 0, probePort_ = 0;
};

}  // namespace iw::server
