// The process's two listeners: HTTPS for AdmissionReviews (the four routes of hooks/) and plain
// HTTP for probes and metrics. Owns the certificate store and the worker pool.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "hooks/admission.h"
#include "server/metrics.h"
#include "server/tls_certificates.h"

namespace httplib {
class SSLServer;
class Server;
}  // namespace httplib

namespace iw::server {

struct WebhookServerOptions {
  std::string bindAddress = "0.0.0.0";
  int port = 8443;       // 0: any free port (tests)
  int probePort = 8080;  // 0: any free port; -1: no probe listener
  std::string certFile, keyFile, clientCaFile;
  size_t maxRequestBytes = 7 * 1024 * 1024;
  size_t maxConnections = 256;
  int readTimeoutSeconds = 10;
  int idleTimeoutSeconds = 90;
  std::chrono::milliseconds certCheckInterval{1000};
  std::string controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
};

class WebhookServer {
 public:
  WebhookServer(WebhookServerOptions options, metrics::Registry& metrics);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Loads the certificate, binds both ports and starts serving on background threads.
  // Returns an error message, or "" on success.
  std::string Start();

  // Graceful stop: /readyz turns false, then after `drainDelay` (for endpoints to notice) the
  // HTTPS listener stops accepting, in-flight reviews finish, and the threads are joined.
  void Shutdown(std::chrono::milliseconds drainDelay);

  int Port() const { return port_; }
  int ProbePort() const { return probePort_; }
  bool Ready() const { return ready_.load(); }
  tls::CertificateStore& Certificates() { return *certs_; }

 private:
  void InstallWebhookRoutes();
  void InstallProbeRoutes();

  WebhookServerOptions options_;
  metrics::Registry& metrics_;
  std::unique_ptr<tls::CertificateStore> certs_;
  std::unique_ptr<httplib::SSLServer> https_;
  std::unique_ptr<httplib::Server> probes_;
  std::thread httpsThread_, probeThread_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> shuttingDown_{false};
  int port_ = 0, probePort_ = 0;
};

}  // namespace iw::server
