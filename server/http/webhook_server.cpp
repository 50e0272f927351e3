#include "server/http/webhook_server.h"

#include <openssl/err.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "lib/clip.h"
#include "server/http/http_server.h"
#include "server/http/review_codec.h"
#include "server/process/log.h"

namespace iw::server {

namespace {

using Clock = std::chrono::steady_clock;

void SendReply(http::Response& res, review::Reply&& reply) {
  res.status = reply.httpStatus;
  res.contentType = "application/json";
  res.body = std::move(reply.body);
}

void SendText(http::Response& res, int status, std::string body) {
  res.status = status;
  res.contentType = "text/plain; charset=utf-8";
  res.body = std::move(body);
}

}  // namespace

WebhookServer::WebhookServer(WebhookServerOptions options, metrics::Registry& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

WebhookServer::~WebhookServer() {
  Shutdown(std::chrono::milliseconds(0));
}

Status WebhookServer::Start() {
  budget_ = std::make_unique<http::ByteBudget>(options_.maxInflightRequestBytes);
  // port -1 (--role=controller): no webhook listener, no certificate; the probe port only.
  if (options_.port >= 0) {
    certs_ = std::make_unique<tls::CertificateStore>(options_.certFile, options_.keyFile, metrics_);
    if (Status err = certs_->LoadInitial(options_.waitForCertificate); !err.ok()) return err;
    tls_.reset(SSL_CTX_new(TLS_server_method()));
    if (!tls_) {
      ERR_clear_error();
      return Status::IOError("cannot create the TLS context");
    }
    if (Status err =
            certs_->ConfigureContext(*tls_, options_.clientCaFile, options_.ticketKeyRotation);
        !err.ok()) {
      return err;
    }

    http::ServerOptions https;
    https.name = "webhook";
    https.budget = budget_.get();
    https.firstRequestTimeout = std::chrono::seconds(options_.firstRequestTimeoutSeconds);
    https.headerTimeout = std::chrono::seconds(options_.headerTimeoutSeconds);
    https.bindAddress = options_.bindAddress;
    https.port = options_.port;
    https.tls = tls_.get();
    https.workerThreads = options_.workerThreads;
    https.maxConnections = options_.maxConnections;
    https.requestTimeout = std::chrono::seconds(options_.readTimeoutSeconds);
    https.idleTimeout = std::chrono::seconds(options_.idleTimeoutSeconds);
    https.limits.maxBodyBytes = options_.maxRequestBytes;
    https_ = std::make_unique<http::Server>(
        https, [this](const http::Request& req, http::Response& res) { ServeReview(req, res); },
        [this](int status, std::string_view message, std::string_view path, http::Response& res) {
          Refuse(status, message, path, res);
        });
    if (Status err = https_->Start(); !err.ok()) return err;
    port_ = https_->Port();
    for (const admission::Route& r : admission::Routes()) metrics_.DeclareRoute(r.path);
    metrics_.AddCollector([server = https_.get()](std::string& out) {
      out += "# HELP inplace_webhook_open_connections Connections open on the webhook port.\n";
      out += "# TYPE inplace_webhook_open_connections gauge\n";
      out += "inplace_webhook_open_connections " + std::to_string(server->OpenConnections()) + "\n";
    });
  }

  if (options_.probePort >= 0) {
    http::ServerOptions plain;
    plain.name = "probes";
    plain.bindAddress = options_.bindAddress;
    plain.port = options_.probePort;
    plain.workerThreads = 1;
    plain.maxConnections = options_.maxProbeConnections;
    plain.budget = budget_.get();
    plain.firstRequestTimeout = std::chrono::seconds(options_.firstRequestTimeoutSeconds);
    plain.headerTimeout = std::chrono::seconds(options_.headerTimeoutSeconds);
    plain.requestTimeout = std::chrono::seconds(options_.readTimeoutSeconds);
    plain.idleTimeout = std::chrono::seconds(options_.idleTimeoutSeconds);
    plain.limits.maxBodyBytes = 64 * 1024;
    probes_ = std::make_unique<http::Server>(
        plain, [this](const http::Request& req, http::Response& res) { ServeProbe(req, res); },
        [](int status, std::string_view message, std::string_view, http::Response& res) {
          SendText(res, status, std::string(message) + "\n");
        });
    if (Status err = probes_->Start(); !err.ok()) return err.Prefixed("probes");
    probePort_ = probes_->Port();
  }
  metrics_.AddCollector([this](std::string& out) { RenderProtectionMetrics(out); });
  metrics_.AddCollector([](std::string& out) { log::RenderSuppressedMetrics(out); });
  if (certs_) certs_->StartWatching(options_.certCheckInterval);
  ready_ = true;
  return Status::Ok();
}

void WebhookServer::ServeReview(const http::Request& req, http::Response& res) {
  const admission::Route* route = admission::FindRoute(req.path);
  if (route == nullptr) {
    Refuse(404, "no webhook at " + std::string(req.path) + "; routes: " + admission::RoutePaths(),
           req.path, res);
    return;
  }
  if (req.method != "POST") {
    SendReply(res,
              review::PlainError(405, "method " + std::string(req.method) + " not allowed on " +
                                          std::string(req.path) + "; use POST"));
    res.headers.emplace_back("Allow", "POST");
    metrics_.RecordRequest(route->path, 405, 0);
    return;
  }
  auto start = Clock::now();
  metrics_.inFlight.fetch_add(1);
  admission::Context ctx;
  ctx.controllerUser = options_.controllerUser;
  ctx.statefulSetControllerUser = options_.statefulSetControllerUser;
  ctx.now = std::chrono::system_clock::now();
  ctx.loopAlive = options_.loopAlive && options_.loopAlive();
  ctx.askHold = options_.askHold;
  if (options_.resizeSupport) ctx.resize = options_.resizeSupport();
  review::Reply reply = review::Answer(*route, req.body, req.HeaderValue("Content-Type"), ctx);
  metrics_.inFlight.fetch_sub(1);
  if (reply.tooManyValues) shedTooManyValues_.fetch_add(1);
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.RecordRequest(route->path, reply.httpStatus, secs);
  if (reply.handlerError) {
    metrics_.RecordHandlerError(route->path);
    log::Limited(
        log::Level::kError, "admission_handler_failed", "admission handler failed",
        {{"route", std::string(route->path)}, {"uid", reply.uid}, {"error", reply.message}});
  } else if (!reply.decided) {
    log::Limited(log::Level::kWarn, "bad_admission_request", "bad admission request",
                 {{"route", std::string(route->path)},
                  {"status", std::to_string(reply.httpStatus)},
                  {"error", Clip(reply.message, 4 * kClipBytes)},
                  {"remote", std::string(req.remoteAddress)}});
  } else if (log::Enabled(log::Level::kDebug)) {
    log::Debug("admission", {{"route", std::string(route->path)},
                             {"uid", reply.uid},
                             {"allowed", reply.allowed ? "true" : "false"},
                             {"patched", reply.patched ? "true" : "false"},
                             {"message", reply.message}});
  }
  SendReply(res, std::move(reply));
}

// Requests refused before any route saw them (malformed, oversized, unknown path) and handler
// exceptions: a metav1.Status body, counted under the route when the path names one.
void WebhookServer::Refuse(int status, std::string_view message, std::string_view path,
                           http::Response& res) {
  const admission::Route* route = admission::FindRoute(path);
  std::string_view label = route != nullptr ? route->path : "other";  // never a client's string
  if (status == 500) metrics_.RecordHandlerError(label);
  metrics_.RecordRequest(label, status, 0);
  if (status != 404 && status != 500) {
    log::Limited(log::Level::kWarn, "bad_http_request", "bad HTTP request",
                 {{"status", std::to_string(status)},
                  {"path", Clip(path)},
                  {"error", Clip(message, 4 * kClipBytes)}});
  }
  SendReply(res, review::PlainError(status, Clip(message, 4 * kClipBytes)));
}

void WebhookServer::RenderProtectionMetrics(std::string& out) const {
  out +=
      "# HELP inplace_webhook_connections_closed_total Connections the server closed to protect "
      "itself: evicted_idle (idle, to make room at the connection limit), first_request_timeout "
      "(no request within --first-request-timeout-seconds), header_timeout (a request head not "
      "whole within --header-timeout-seconds).\n";
  out += "# TYPE inplace_webhook_connections_closed_total counter\n";
  uint64_t overBudget = 0;
  uint64_t answersOverBudget = 0;
  for (auto [name, server] : {std::pair{"webhook", https_.get()}, {"probes", probes_.get()}}) {
    if (server == nullptr) continue;
    const http::ServerStats& st = server->Stats();
    overBudget += st.shedOverBudget.load();
    answersOverBudget += st.shedAnswers.load();
    out += std::string("inplace_webhook_connections_closed_total{port=\"") + name +
           "\",reason=\"evicted_idle\"} " + std::to_string(st.evictedIdle.load()) + "\n";
    out += std::string("inplace_webhook_connections_closed_total{port=\"") + name +
           "\",reason=\"first_request_timeout\"} " +
           std::to_string(st.firstRequestTimeouts.load()) + "\n";
    out += std::string("inplace_webhook_connections_closed_total{port=\"") + name +
           "\",reason=\"header_timeout\"} " + std::to_string(st.headerTimeouts.load()) + "\n";
  }
  out +=
      "# HELP inplace_webhook_requests_shed_total Requests refused to bound memory: memory_budget "
      "(503, request bytes in flight over --max-inflight-request-bytes), answer_memory_budget "
      "(an answer replaced by a 503 and the connection closed: the answer's bytes, held until the "
      "client reads them, over the same budget), too_many_json_values (413, a review over the "
      "parser's value bound).\n";
  out += "# TYPE inplace_webhook_requests_shed_total counter\n";
  out += "inplace_webhook_requests_shed_total{reason=\"memory_budget\"} " +
         std::to_string(overBudget) + "\n";
  out += "inplace_webhook_requests_shed_total{reason=\"answer_memory_budget\"} " +
         std::to_string(answersOverBudget) + "\n";
  out += "inplace_webhook_requests_shed_total{reason=\"too_many_json_values\"} " +
         std::to_string(shedTooManyValues_.load()) + "\n";
  out +=
      "# HELP inplace_webhook_request_bytes_in_flight Request and answer bytes held beyond each "
      "connection's free 64 KiB, against --max-inflight-request-bytes.\n";
  out += "# TYPE inplace_webhook_request_bytes_in_flight gauge\n";
  out += "inplace_webhook_request_bytes_in_flight " + std::to_string(budget_->Used()) + "\n";
}

void WebhookServer::ServeProbe(const http::Request& req, http::Response& res) {
  bool known = req.path == "/healthz" || req.path == "/readyz" || req.path == "/metrics" ||
               req.path == "/loopz" || (req.path == "/holdz" && options_.holdz);
  if (!known) return SendText(res, 404, "not found\n");
  if (req.method != "GET") {
    SendText(res, 405, "use GET\n");
    res.headers.emplace_back("Allow", "GET");
    return;
  }
  if (req.path == "/healthz") return SendText(res, 200, "ok");
  // Whether a loop is known to run (loop_signal::ParseAnswer reads this): what the credential-free
  // webhook pods poll on the controller Service (DESIGN.md §9.4).
  if (req.path == "/loopz") {
    return options_.loopAlive && options_.loopAlive() ? SendText(res, 200, "alive\n")
                                                      : SendText(res, 503, "no loop\n");
  }
  // The StatefulSet hold's answer (DESIGN.md §4.8), for the webhook pods' pod-DELETE reviews.
  if (req.path == "/holdz") {
    const std::size_t q = req.target.find('?');
    auto [status, body] =
        options_.holdz(q == std::string_view::npos ? std::string_view{} : req.target.substr(q + 1));
    return SendText(res, status, body);
  }
  if (req.path == "/readyz") {
    if (std::string why = options_.notReady ? options_.notReady() : ""; !why.empty()) {
      return SendText(res, 503, why);
    }
    if (ready_.load() && !shuttingDown_.load() &&
        (options_.port < 0 || (https_ && https_->Accepting() && certs_->HasCertificate()))) {
      return SendText(res, 200, "ok");
    }
    if (options_.port >= 0 && certs_ && !certs_->HasCertificate())
      return SendText(res, 503, "no serving certificate yet");
    return SendText(res, 503,
                    shuttingDown_.load() ? "shutting down" : "webhook listener not accepting yet");
  }
  SendText(res, 200, metrics_.Render());
  res.contentType = "text/plain; version=0.0.4; charset=utf-8";
}

void WebhookServer::Shutdown(std::chrono::milliseconds drainDelay, Clock::time_point deadline) {
  if (shuttingDown_.exchange(true)) return;
  ready_ = false;
  if (https_ && drainDelay.count() > 0) std::this_thread::sleep_for(drainDelay);
  // The listener closes; idle keep-alive connections close at once; reviews under way get their
  // answer for up to the grace (and not past the caller's deadline).
  auto grace = options_.shutdownGrace;
  if (deadline != Clock::time_point()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    grace = std::clamp(left, std::chrono::milliseconds(0), grace);
  }
  if (https_) https_->Shutdown(grace);
  if (certs_) certs_->StopWatching();
  if (probes_) probes_->Shutdown(std::chrono::milliseconds(0));
}

}  // namespace iw::server
