#include "server/webhook_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <mutex>
#include <set>

#include "server/connection_pool.h"
#include "server/log.h"
#include "server/review_codec.h"

namespace iw::server {

namespace {

using Clock = std::chrono::steady_clock;

void SendReply(httplib::Response& res, const review::Reply& reply) {
  res.status = reply.httpStatus;
  res.set_content(reply.body, "application/json");
}

// Applies the settings that make cpp-httplib fit a webhook (DESIGN §7): keep-alive for as long as
// the API server keeps idle connections, no small cap on requests per connection, Nagle off.
void Tune(httplib::Server& s, const WebhookServerOptions& o) {
  s.set_keep_alive_max_count(std::numeric_limits<size_t>::max());
  s.set_keep_alive_timeout(o.idleTimeoutSeconds);
  s.set_read_timeout(o.readTimeoutSeconds, 0);
  s.set_write_timeout(o.readTimeoutSeconds, 0);
  s.set_tcp_nodelay(true);
}

// The sockets of live TLS connections. cpp-httplib keeps an idle keep-alive connection open for
// the whole idle timeout (90 s) even after stop(); at shutdown we half-close them so their
// threads end at once. A socket is registered when its handshake starts and forgotten when its
// SSL object is freed, which cpp-httplib does before closing the socket, so a registered
// descriptor is never a reused one.
class LiveConnections {
 public:
  static LiveConnections& Instance() {
    static LiveConnections live;
    return live;
  }
  void Install(SSL_CTX& ctx) { SSL_CTX_set_info_callback(&ctx, &LiveConnections::OnInfo); }
  void ShutdownReads() {
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RD);
  }

 private:
  LiveConnections() {
    index_ = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &LiveConnections::OnFree);
  }
  static void OnInfo(const SSL* ssl, int where, int) {
    if ((where & SSL_CB_HANDSHAKE_START) == 0) return;
    auto& self = Instance();
    SSL* s = const_cast<SSL*>(ssl);
    if (SSL_get_ex_data(s, self.index_) != nullptr) return;
    int fd = SSL_get_fd(s);
    if (fd < 0) return;
    // Stored as fd+1 so that descriptor 0 is not a null pointer.
    SSL_set_ex_data(s, self.index_, reinterpret_cast<void*>(static_cast<intptr_t>(fd) + 1));
    std::lock_guard lock(self.mu_);
    self.fds_.insert(fd);
  }
  static void OnFree(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
    if (ptr == nullptr) return;
    auto& self = Instance();
    std::lock_guard lock(self.mu_);
    self.fds_.erase(static_cast<int>(reinterpret_cast<intptr_t>(ptr) - 1));
  }

  int index_ = -1;
  std::mutex mu_;
  std::set<int> fds_;
};

}  // namespace

WebhookServer::WebhookServer(WebhookServerOptions options, metrics::Registry& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

WebhookServer::~WebhookServer() {
  Shutdown(std::chrono::milliseconds(0));
}

std::string WebhookServer::Start() {
  certs_ = std::make_unique<tls::CertificateStore>(options_.certFile, options_.keyFile, metrics_);
  if (std::string err = certs_->LoadInitial(); !err.empty()) return err;
  std::string tlsError;
  https_ = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
    tlsError = certs_->ConfigureContext(ctx, options_.clientCaFile);
    LiveConnections::Instance().Install(ctx);
    return tlsError.empty();
  });
  if (!https_->is_valid()) return tlsError.empty() ? "cannot create the TLS context" : tlsError;

  Tune(*https_, options_);
  https_->set_payload_max_length(options_.maxRequestBytes);
  size_t maxThreads = options_.maxConnections;
  https_->new_task_queue = [maxThreads] {
    // cpp-httplib takes ownership of the queue it is handed (it deletes it on stop).
    return std::make_unique<ConnectionPool>(std::min<size_t>(4, maxThreads), maxThreads,
                                            std::chrono::seconds(60))
        .release();
  };
  InstallWebhookRoutes();

  if (options_.port == 0) {
    port_ = https_->bind_to_any_port(options_.bindAddress);
    if (port_ <= 0) return "cannot listen on " + options_.bindAddress;
  } else {
    if (!https_->bind_to_port(options_.bindAddress, options_.port)) {
      return "cannot listen on " + options_.bindAddress + ":" + std::to_string(options_.port);
    }
    port_ = options_.port;
  }
  if (options_.probePort >= 0) {
    probes_ = std::make_unique<httplib::Server>();
    Tune(*probes_, options_);
    probes_->new_task_queue = [] {
      return std::make_unique<ConnectionPool>(1, 8, std::chrono::seconds(60)).release();
    };
    InstallProbeRoutes();
    if (options_.probePort == 0) {
      probePort_ = probes_->bind_to_any_port(options_.bindAddress);
      if (probePort_ <= 0) return "cannot listen for probes on " + options_.bindAddress;
    } else {
      if (!probes_->bind_to_port(options_.bindAddress, options_.probePort)) {
        return "cannot listen for probes on " + options_.bindAddress + ":" +
               std::to_string(options_.probePort);
      }
      probePort_ = options_.probePort;
    }
    probeThread_ = std::thread([this] {
      try {
        probes_->listen_after_bind();
      } catch (const std::exception& e) {
        log::Error("probe listener failed", {{"error", e.what()}});
      }
    });
  }
  httpsThread_ = std::thread([this] {
    try {
      https_->listen_after_bind();
    } catch (const std::exception& e) {
      log::Error("webhook listener failed", {{"error", e.what()}});
    }
  });
  while (!https_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  certs_->StartWatching(options_.certCheckInterval);
  ready_ = true;
  return {};
}

void WebhookServer::InstallWebhookRoutes() {
  for (const admission::Route& route : admission::Routes()) {
    https_->Post(std::string(route.path), [this, &route](const httplib::Request& req,
                                                         httplib::Response& res) {
      auto start = Clock::now();
      metrics_.inFlight.fetch_add(1);
      admission::Context ctx;
      ctx.controllerUser = options_.controllerUser;
      ctx.now = std::chrono::system_clock::now();
      review::Reply reply =
          review::Answer(route, req.body, req.get_header_value("Content-Type"), ctx);
      SendReply(res, reply);
      metrics_.inFlight.fetch_sub(1);
      double secs = std::chrono::duration<double>(Clock::now() - start).count();
      metrics_.RecordRequest(route.path, reply.httpStatus, secs);
      if (reply.handlerError) {
        metrics_.RecordHandlerError(route.path);
        log::Error(
            "admission handler failed",
            {{"route", std::string(route.path)}, {"uid", reply.uid}, {"error", reply.message}});
      } else if (!reply.decided) {
        log::Warn("bad admission request", {{"route", std::string(route.path)},
                                            {"status", std::to_string(reply.httpStatus)},
                                            {"error", reply.message},
                                            {"remote", req.remote_addr}});
      } else if (log::Enabled(log::Level::kDebug)) {
        log::Debug("admission", {{"route", std::string(route.path)},
                                 {"uid", reply.uid},
                                 {"allowed", reply.allowed ? "true" : "false"},
                                 {"patched", reply.patched ? "true" : "false"},
                                 {"message", reply.message}});
      }
    });
  }
  // Anything that is not POST to a known route, and every error httplib raises itself (413 for
  // a body over the limit, 400 for a malformed request line), gets a Status body.
  https_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (admission::FindRoute(req.path) != nullptr && req.method != "POST") {
      SendReply(res, review::PlainError(405, "method " + req.method + " not allowed on " +
                                                 req.path + "; use POST"));
      res.set_header("Allow", "POST");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  https_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route already answered with its own body
    std::string message;
    switch (res.status) {
      case 404:
        message =
            "no webhook at " + req.path +
            "; routes: /mutate/deployments, /validate/deployments, /mutate/pods, /validate/pods";
        break;
      case 413:
        message = "request entity is too large; limit is " +
                  std::to_string(options_.maxRequestBytes) + " bytes";
        break;
      default:
        message = "bad request";
    }
    int status = res.status;
    SendReply(res, review::PlainError(status, message));
    metrics_.RecordRequest(admission::FindRoute(req.path) ? req.path : "other", status, 0);
  });
  https_->set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        SendReply(res, review::PlainError(500, "internal error"));
        metrics_.RecordHandlerError(req.path);
      });
}

void WebhookServer::InstallProbeRoutes() {
  probes_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  probes_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.load() && !shuttingDown_.load() && https_ && https_->is_running()) {
      res.set_content("ok", "text/plain");
    } else {
      res.status = 503;
      res.set_content(shuttingDown_.load() ? "shutting down" : "webhook listener not accepting yet",
                      "text/plain");
    }
  });
  probes_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

void WebhookServer::Shutdown(std::chrono::milliseconds drainDelay) {
  if (shuttingDown_.exchange(true)) return;
  ready_ = false;
  if (https_ && drainDelay.count() > 0) std::this_thread::sleep_for(drainDelay);
  // stop() closes the listening socket; the pool's shutdown then lets in-flight requests finish
  // and idle keep-alive connections close.
  if (https_) https_->stop();
  // Let reviews being answered finish (bounded), then end idle keep-alive connections.
  auto deadline = Clock::now() + std::chrono::seconds(options_.idleTimeoutSeconds);
  while (metrics_.inFlight.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  LiveConnections::Instance().ShutdownReads();
  if (httpsThread_.joinable()) httpsThread_.join();
  if (certs_) certs_->StopWatching();
  if (probes_) probes_->stop();
  if (probeThread_.joinable()) probeThread_.join();
}

}  // namespace iw::server
