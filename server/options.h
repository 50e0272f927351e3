// Command-line interface: `inplace-webhook serve|review|version`, parsed with cxxopts.
#pragma once

#include <optional>
#include <string>

#include "server/log.h"
#include "server/webhook_server.h"

namespace iw::cli {

struct ServeOptions {
  server::WebhookServerOptions server;
  log::Level logLevel = log::Level::kInfo;
  log::Format logFormat = log::Format::kJson;
  // The loop.
  std::string leaderElect = "auto";  // auto: on when running in a cluster
  std::string leaderElectionNamespace;
  std::string apiServer, tokenFile, certificateAuthority;
  bool disableLoop = false;
  int loopResyncPeriodMs = 300000;  // safety resync from the caches
  int shutdownGraceSeconds = 30;
  int shutdownDelaySeconds = 3;
};

struct ReviewOptions {
  std::string path = "/mutate/deployments";
  std::string controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
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
