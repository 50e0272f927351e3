// inplace-webhook: the process. `serve` runs the HTTPS webhook (and the loop); `review` answers
// one AdmissionReview offline through the same codec and handlers.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "hooks/admission.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/review_codec.h"
#include "server/webhook_server.h"

#ifndef IW_VERSION
#define IW_VERSION "0.1.0"
#endif

namespace {

int Review(const iw::cli::ReviewOptions& o) {
  const iw::admission::Route* route = iw::admission::FindRoute(o.path);
  if (route == nullptr) {
    std::cerr
        << "unknown --path " << o.path
        << "; routes: /mutate/deployments, /validate/deployments, /mutate/pods, /validate/pods\n";
    return 2;
  }
  std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  iw::admission::Context ctx;
  ctx.controllerUser = o.controllerUser;
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
  iw::server::WebhookServer server(o.server, metrics);
  if (std::string err = server.Start(); !err.empty()) {
    iw::log::Error("cannot start", {{"error", err}});
    return 1;
  }
  iw::log::Info("serving admission", {{"address", o.server.bindAddress},
                                      {"port", std::to_string(server.Port())},
                                      {"probePort", std::to_string(server.ProbePort())},
                                      {"certificate", server.Certificates().Fingerprint()},
                                      {"version", IW_VERSION}});
  int sig = 0;
  sigwait(&set, &sig);
  iw::log::Info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  server.Shutdown(std::chrono::seconds(o.shutdownDelaySeconds));
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
