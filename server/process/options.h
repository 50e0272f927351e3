// Command-line interface: `inplace-webhook serve|review|version`, parsed with cxxopts.
#pragma once

#include <optional>
#include <string>

#include "hooks/resize_support.h"
#include "server/http/webhook_server.h"
#include "server/process/log.h"

namespace iw::cli {

struct ServeOptions {
  server::WebhookServerOptions server;
  log::Level logLevel = log::Level::kInfo;
  log::Format logFormat = log::Format::kJson;
  // all: webhook and loop in one process (development, the e2e double); webhook: admission only,
  // no API credentials, the loop's liveness from --loop-status-url; controller: the loop and the
  // probe port only, no webhook listener (DESIGN.md §9.4).
  std::string role = "all";
  std::string loopStatusUrl;  // role webhook: the controller Service's /loopz
  // --pod-resize: nullopt is auto (ask the API server; without API credentials, off).
  std::optional<resize_support::Support> podResize;
  // The loop.
  std::string leaderElect = "auto";  // auto: on when running in a cluster
  std::string leaderElectionNamespace;
  std::string apiServer, tokenFile, certificateAuthority;
  bool disableLoop = false;
  int loopResyncPeriodMs = 300000;  // safety resync from the caches
  double kubeApiQps = 200;          // the API client's token bucket (kube::ClientConfig)
  int kubeApiBurst = 400;
  int shutdownGraceSeconds = 30;
  int shutdownDelaySeconds = 3;
  // --manage-certificates (DESIGN.md §9.7): the certificate controller (needs API credentials).
  struct ManagedCertificates {
    bool enabled = false;
    std::string namespaceName;  // default: the pod's namespace
    std::string secretName, serviceName, webhookConfiguration;
    long long caValiditySeconds = 10LL * 365 * 86400, caRenewBeforeSeconds = 365LL * 86400;
    long long validitySeconds = 365LL * 86400, renewBeforeSeconds = 30LL * 86400;
    long long overlapSeconds = 3600;
    int checkIntervalSeconds = 60;
  } managedCertificates;
};

struct ReviewOptions {
  std::string path = "/mutate/deployments";
  std::string controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
  resize_support::Support resize;  // --pod-resize (off or a version)
};

// Parse results: on --help or an error, `exitCode` is set and `output` holds what to print
// (stdout for help, stderr for errors).
struct Parsed {
  std::string command;  // serve, review, version
  ServeOptions serve;
  ReviewOptions review;
  std::optional<int> exitCode;
  std::string output;
};

Parsed Parse(int argc, char** argv);

}  // namespace iw::cli
