// The plugin's only I/O: running the user's kubectl (found on PATH, or $KUBECTL) with
// posix_spawn and capturing what it prints. Every request to the cluster goes through kubectl,
// so kubeconfig, contexts, auth plugins and impersonation are kubectl's own (DESIGN.md §8.13).
#pragma once

#include <string>
#include <vector>

#include "lib/status.h"

namespace iw::plugin {

struct KubectlResult {
  int exitCode = 0;  // kubectl's exit status; 128 + N when it was killed by signal N
  std::string out;
  std::string err;
};

// The kubectl to run: $KUBECTL when set and non-empty, else "kubectl" (looked up on PATH).
std::string KubectlPath();

// Runs kubectl with `args` (without argv[0]) and no stdin, waits for it and returns what it
// printed. IOError when it cannot be started (not found, not executable) or read.
StatusOr<KubectlResult> RunKubectl(const std::vector<std::string>& args);

}  // namespace iw::plugin
