// The plugin's command line, and the kubectl command lines it maps to. Pure. kubectl's own global
// flags (-n, --context, --kubeconfig, --as, --token, ...) may appear anywhere and are passed
// through to every kubectl the plugin runs, unchanged: authentication is kubectl's alone.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/status.h"

namespace iw::plugin {

struct Invocation {
  std::string command;  // status, abort, pause, resume, undo, explain, version, help
  std::string name;     // the Deployment's name (from deploy/NAME, deployment/NAME or NAME)
  std::vector<std::string> kubectlFlags;  // the global flags, as given
  bool watch = false;
  std::optional<std::chrono::seconds> timeout;
  std::optional<long long> toRevision;
};

// Parses the arguments after `kubectl inplace`. InvalidArgument (for a usage error, exit 1) names
// what is wrong. `--help`/`-h` anywhere, or no command, gives command "help".
StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args);

// "deploy/web", "deployment/web", "deployments/web", "deployments.apps/web" or "web" → "web".
StatusOr<std::string> DeploymentName(std::string_view ref);

// "90", "90s", "5m", "1h30m" → seconds.
StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

std::string Usage();

// The kubectl command lines (without "kubectl"), the global flags first.
std::vector<std::string> GetDeployment(const Invocation& inv);
std::vector<std::string> GetPods(const Invocation& inv, const std::string& selector);
std::vector<std::string> GetReplicaSets(const Invocation& inv, const std::string& selector);
// kubectl get --raw PATH (discovery: /api/v1, /version).
std::vector<std::string> GetRaw(const Invocation& inv, const std::string& path);
std::vector<std::string> Annotate(const Invocation& inv, std::string_view key);
std::vector<std::string> RolloutResume(const Invocation& inv);
std::vector<std::string> RolloutUndo(const Invocation& inv);

}  // namespace iw::plugin
