// inplace-webhook: the process. `serve` runs the HTTPS webhook (and the loop); `review` answers
// one AdmissionReview offline through the same codec and handlers.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "hooks/admission.h"
#include "lib/status.h"
#include "server/http/review_codec.h"
#include "server/http/webhook_server.h"
#include "server/kube/resize_discovery.h"
#include "server/loop/loop_status.h"
#include "server/process/log.h"
#include "server/process/loop_runtime.h"
#include "server/process/metrics.h"
#include "server/process/options.h"

namespace {

int Review(const iw::cli::ReviewOptions& o) {
  const iw::admission::Route* route = iw::admission::FindRoute(o.path);
  if (route == nullptr) {
    std::cerr << "unknown --path " << o.path << "; routes: " << iw::admission::RoutePaths() << "\n";
    return 2;
  }
  std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  iw::admission::Context ctx;
  ctx.controllerUser = o.controllerUser;
  ctx.resize = o.resize;
  iw::review::Reply reply = iw::review::Answer(*route, body, "application/json", ctx);
  std::cout << reply.body << "\n";
  if (!reply.decided) {
    std::cerr << "HTTP " << reply.httpStatus << ": " << reply.message << "\n";
    return 2;
  }
  return reply.allowed ? 0 : 1;
}

int Serve(const iw::cli::ServeOptions& o) {
  iw::log::Configure(o.logLevel, o.logFormat);
  // SIGTERM/SIGINT are taken by sigwait below; SIGPIPE (a peer gone mid-write) is ignored.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  iw::metrics::Registry metrics;
  iw::StatusOr<std::unique_ptr<iw::process::LoopRuntime>> created =
      iw::process::LoopRuntime::Create(o, metrics);
  if (!created.ok()) {
    iw::log::Error("cannot start the in-place loop", {{"error", created.status().message()}});
    return 1;
  }
  std::unique_ptr<iw::process::LoopRuntime> loop = std::move(*created);
  if (o.managedCertificates.enabled && !loop) {
    iw::log::Error("cannot start",
                   {{"error", "--manage-certificates needs the API client (an API server)"}});
    return 1;
  }
  // The pod webhook injects the readiness gate only while a loop is known to set it (§8.6): this
  // process's own knowledge (role all or controller, which also answers /loopz), or, in the
  // credential-free webhook role, the controller's /loopz answer (§9.4).
  std::unique_ptr<iw::server::LoopStatusPoller> poller;
  if (!o.loopStatusUrl.empty()) {
    if (iw::Status err = iw::server::LoopStatusPoller::Validate(o.loopStatusUrl); !err.ok()) {
      iw::log::Error("cannot start", {{"error", err.message()}});
      return 1;
    }
    poller = std::make_unique<iw::server::LoopStatusPoller>(
        iw::server::LoopStatusPoller::Options{.url = o.loopStatusUrl});
    metrics.AddCollector([p = poller.get()](std::string& out) { p->RenderMetrics(out); });
  }
  // --pod-resize (DESIGN.md §3.1): given, or asked of the API server by the process that has
  // credentials; the controller role answers no reviews.
  std::unique_ptr<iw::server::ResizeDiscovery> discovery;
  iw::resize_support::Support fixedResize;
  if (o.podResize) {
    fixedResize = *o.podResize;
  } else if (loop && o.role != "controller") {
    discovery = std::make_unique<iw::server::ResizeDiscovery>(
        loop->ApiClient(), iw::server::ResizeDiscovery::Options{});
  } else if (o.role != "controller") {
    iw::log::Warn(
        "--pod-resize=auto without API credentials: cpu/memory changes take the native rollout "
        "(give --pod-resize with the cluster's Kubernetes version)");
  }
  iw::server::WebhookServerOptions serverOptions = o.server;
  if (discovery) {
    serverOptions.resizeSupport = [d = discovery.get()] { return d->Current(); };
    metrics.AddCollector([d = discovery.get()](std::string& out) { d->RenderMetrics(out); });
  } else {
    serverOptions.resizeSupport = [fixedResize] { return fixedResize; };
    metrics.AddCollector([fixedResize, known = o.podResize.has_value()](std::string& out) {
      iw::server::RenderResizeMetrics(out, fixedResize, known);
    });
  }
  const iw::process::LoopRuntime* runtime = loop.get();
  const iw::server::LoopStatusPoller* status = poller.get();
  auto loopAlive = [runtime, status] {
    if (status != nullptr) return status->Alive();
    return runtime != nullptr && runtime->LoopAlive();
  };
  serverOptions.loopAlive = loopAlive;
  // The StatefulSet hold (DESIGN.md §4.8): a credential-free webhook asks the controller's
  // /holdz; a process with the loop's client answers itself, and serves /holdz.
  if (poller) {
    serverOptions.askHold = [p = poller.get()](const iw::statefulset_hold::PodFacts& facts) {
      return p->AskHold(facts);
    };
  } else if (loop) {
    serverOptions.askHold = [h = &loop->Hold()](const iw::statefulset_hold::PodFacts& facts) {
      return h->Ask(facts);
    };
  }
  if (loop) {
    serverOptions.holdz = [h = &loop->Hold()](std::string_view query) { return h->Serve(query); };
  }
  serverOptions.notReady = [runtime] { return runtime != nullptr ? runtime->NotReady() : ""; };
  metrics.AddCollector([loopAlive](std::string& out) {
    out +=
        "# HELP inplace_webhook_loop_alive Whether this replica knows a loop to be running (it "
        "leads, saw the leader Lease renewed within the renew deadline, or, --role=webhook, the "
        "controller's /loopz answered alive within 3 s); 0: new pods get no readiness gate.\n";
    out += "# TYPE inplace_webhook_loop_alive gauge\n";
    out += std::string("inplace_webhook_loop_alive ") + (loopAlive() ? "1" : "0") + "\n";
  });
  // Asked once before the first review (each GET bounded by 5 s), then in the background.
  if (discovery) discovery->Start();
  iw::server::WebhookServer server(std::move(serverOptions), metrics);
  if (iw::Status err = server.Start(); !err.ok()) {
    iw::log::Error("cannot start", {{"error", err.message()}});
    return 1;
  }
  if (o.server.port >= 0) {
    iw::log::Info("serving admission", {{"address", o.server.bindAddress},
                                        {"port", std::to_string(server.Port())},
                                        {"probePort", std::to_string(server.ProbePort())},
                                        {"certificate", server.Certificates().Fingerprint()},
                                        {"role", o.role},
                                        {"version", IW_VERSION}});
  } else {
    iw::log::Info("controller: probe port only, no webhook listener",
                  {{"address", o.server.bindAddress},
                   {"probePort", std::to_string(server.ProbePort())},
                   {"version", IW_VERSION}});
  }
  if (poller) poller->Start();
  if (loop) loop->Start();
  int sig = 0;
  sigwait(&set, &sig);
  iw::log::Info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // --shutdown-delay-seconds + --shutdown-grace-seconds bound the whole shutdown: reviews under
  // way are answered until then, and whatever still runs a moment later (a loop stuck on the API
  // server) ends with the process.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(o.shutdownDelaySeconds + o.shutdownGraceSeconds);
  std::thread([deadline] {
    std::this_thread::sleep_until(deadline + std::chrono::milliseconds(200));
    iw::log::Error(
        "shutdown took longer than --shutdown-delay-seconds + --shutdown-grace-seconds; exiting");
    std::_Exit(1);
  }).detach();
  if (poller) poller->Stop();
  if (discovery) discovery->Stop();
  if (loop) loop->Stop();
  server.Shutdown(std::chrono::seconds(o.shutdownDelaySeconds), deadline);
  iw::log::Info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    iw::cli::Parsed p = iw::cli::Parse(argc, argv);
    if (p.exitCode) {
      (*p.exitCode == 0 ? std::cout : std::cerr)
          << p.output << (p.output.ends_with('\n') ? "" : "\n");
      return *p.exitCode;
    }
    if (p.command == "version") {
      std::cout << "inplace-webhook " << IW_VERSION << "\n";
      return 0;
    }
    if (p.command == "review") return Review(p.review);
    return Serve(p.serve);
  } catch (const std::exception& e) {
    std::cerr << "inplace-webhook: " << e.what() << "\n";
    return 1;
  }
}
