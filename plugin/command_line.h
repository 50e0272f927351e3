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
#include "plugin/workload_kind.h"

namespace iw::plugin {

struct Invocation {
  std::string command;  // status, abort, pause, resume, undo, explain, version, help
  WorkloadKind kind = WorkloadKind::kDeployment;  // from the reference's kind (ParseWorkloadRef)
  std::string name;                               // the workload's name
  std::vector<std::string> kubectlFlags;          // the global flags, as given
  bool watch = false;
  std::optional<std::chrono::seconds> timeout;
  std::optional<long long> toRevision;
};

// Parses the arguments after `kubectl inplace`. InvalidArgument (for a usage error, exit 1) names
// what is wrong. `--help`/`-h` anywhere, or no command, gives command "help".
StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args);

struct WorkloadRef {
  WorkloadKind kind = WorkloadKind::kDeployment;
  std::string name;
};
// A workload reference as kubectl spells it: "deploy/web", "deployment/web", "deployments/web",
// "deployment.apps/web", "deployments.apps/web" or a bare "web" → Deployment web; "sts/web",
// "statefulset/web", "statefulsets/web", "statefulset.apps/web", "statefulsets.apps/web" →
// StatefulSet web. InvalidArgument for another kind (naming the two that are updated in place) or
// a name that is empty or has a "/".
StatusOr<WorkloadRef> ParseWorkloadRef(std::string_view ref);

// "90", "90s", "5m", "1h30m" → seconds.
StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

std::string Usage();

// The kubectl command lines (without "kubectl"), the global flags first.
std::vector<std::string> GetDeployment(const Invocation& inv);
std::vector<std::string> GetStatefulSet(const Invocation& inv);
// The workload `inv` names (GetDeployment or GetStatefulSet).
std::vector<std::string> GetWorkload(const Invocation& inv);
std::vector<std::string> GetPods(const Invocation& inv, const std::string& selector);
std::vector<std::string> GetReplicaSets(const Invocation& inv, const std::string& selector);
// One ControllerRevision by name (a StatefulSet's status.currentRevision), and those of a
// StatefulSet's selector (the controller labels each with the template's labels).
std::vector<std::string> GetControllerRevision(const Invocation& inv, const std::string& name);
std::vector<std::string> GetControllerRevisions(const Invocation& inv, const std::string& selector);
// kubectl get --raw PATH (discovery: /api/v1, /version).
std::vector<std::string> GetRaw(const Invocation& inv, const std::string& path);
// kubectl annotate --overwrite of `key`=`value` on the workload `inv` names.
std::vector<std::string> Annotate(const Invocation& inv, std::string_view key,
                                  std::string_view value = "true");
std::vector<std::string> RolloutResume(const Invocation& inv);
// kubectl rollout undo of the workload `inv` names [--to-revision=N].
std::vector<std::string> RolloutUndo(const Invocation& inv);

}  // namespace iw::plugin
