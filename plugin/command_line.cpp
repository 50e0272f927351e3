#include "plugin/command_line.h"

#include <array>
#include <cctype>

namespace iw::plugin {
namespace {

// kubectl's global flags that take a value (`--flag value` or `--flag=value`).
constexpr std::array<std::string_view, 24> kValueFlags = {"--namespace",
                                                          "--context",
                                                          "--kubeconfig",
                                                          "--as",
                                                          "--as-group",
                                                          "--as-uid",
                                                          "--request-timeout",
                                                          "--server",
                                                          "--token",
                                                          "--user",
                                                          "--cluster",
                                                          "--certificate-authority",
                                                          "--client-certificate",
                                                          "--client-key",
                                                          "--tls-server-name",
                                                          "--cache-dir",
                                                          "--username",
                                                          "--password",
                                                          "--v",
                                                          "--vmodule",
                                                          "--log-flush-frequency",
                                                          "--profile",
                                                          "--profile-output",
                                                          "--kuberc"};
// Short forms that take a value: -n NS, -nNS, -s URL, -v N.
constexpr std::array<std::string_view, 3> kShortValueFlags = {"-n", "-s", "-v"};
// kubectl's boolean global flags (also as --flag=true|false).
constexpr std::array<std::string_view, 4> kBoolFlags = {
    "--insecure-skip-tls-verify", "--match-server-version", "--warnings-as-errors",
    "--disable-compression"};
// The kinds kubectl takes for a Deployment and for a StatefulSet (short name, singular, plural,
// each with its group).
constexpr std::array<std::string_view, 5> kDeploymentKinds = {
    "deploy", "deployment", "deployments", "deployment.apps", "deployments.apps"};
constexpr std::array<std::string_view, 5> kStatefulSetKinds = {
    "sts", "statefulset", "statefulsets", "statefulset.apps", "statefulsets.apps"};

template <size_t N>
bool In(const std::array<std::string_view, N>& set, std::string_view s) {
  for (std::string_view x : set) {
    if (x == s) return true;
  }
  return false;
}

bool ParseInt(std::string_view s, long long& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

std::vector<std::string> WithFlags(const Invocation& inv, std::vector<std::string> rest) {
  std::vector<std::string> out = inv.kubectlFlags;
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace

StatusOr<std::chrono::seconds> ParseDuration(std::string_view text) {
  long long total = 0;
  long long n = 0;
  bool digits = false;
  if (text.empty()) return Status::InvalidArgument("empty duration");
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (n > 100000000) return Status::InvalidArgument("duration too long: " + std::string(text));
      n = n * 10 + (c - '0');
      digits = true;
      continue;
    }
    if (!digits) return Status::InvalidArgument("bad duration: " + std::string(text));
    if (c == 's') {
      total += n;
    } else if (c == 'm') {
      total += n * 60;
    } else if (c == 'h') {
      total += n * 3600;
    } else {
      return Status::InvalidArgument("bad duration (use e.g. 90s, 5m, 1h): " + std::string(text));
    }
    n = 0;
    digits = false;
  }
  if (digits) total += n;  // a bare number: seconds
  return std::chrono::seconds(total);
}

StatusOr<WorkloadRef> ParseWorkloadRef(std::string_view ref) {
  WorkloadRef out;
  std::string_view name = ref;
  if (size_t slash = ref.find('/'); slash != std::string_view::npos) {
    const std::string_view kind = ref.substr(0, slash);
    if (In(kDeploymentKinds, kind)) {
      out.kind = WorkloadKind::kDeployment;
    } else if (In(kStatefulSetKinds, kind)) {
      out.kind = WorkloadKind::kStatefulSet;
    } else {
      return Status::InvalidArgument("only Deployments and StatefulSets are updated in place: " +
                                     std::string(ref) + " (use deploy/NAME or sts/NAME)");
    }
    name = ref.substr(slash + 1);
  }
  if (name.empty() || name.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("not a Deployment or StatefulSet name: " + std::string(ref) +
                                   " (use deploy/NAME or sts/NAME)");
  }
  out.name = std::string(name);
  return out;
}

StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args) {
  Invocation inv;
  std::vector<std::string> positional;
  bool help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string_view flag) -> StatusOr<std::string> {
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument("flag " + std::string(flag) + " needs a value");
      }
      return args[++i];
    };
    const size_t eq = a.find('=');
    const std::string_view flag = std::string_view(a).substr(0, eq);
    if (a == "-h" || a == "--help") {
      help = true;
    } else if (a == "-w" || a == "--watch") {
      inv.watch = true;
    } else if (flag == "--watch") {
      const std::string v = a.substr(eq + 1);
      if (v != "true" && v != "false") return Status::InvalidArgument("bad value in " + a);
      inv.watch = v == "true";
    } else if (flag == "--timeout" || flag == "--to-revision") {
      std::string v;
      if (eq != std::string::npos) {
        v = a.substr(eq + 1);
      } else {
        StatusOr<std::string> next = value(flag);
        if (!next.ok()) return next.status();
        v = *next;
      }
      if (flag == "--timeout") {
        StatusOr<std::chrono::seconds> d = ParseDuration(v);
        if (!d.ok()) return d.status().Prefixed("--timeout");
        inv.timeout = *d;
      } else {
        long long n = 0;
        if (!ParseInt(v, n)) return Status::InvalidArgument("--to-revision wants a number: " + v);
        inv.toRevision = n;
      }
    } else if (In(kValueFlags, flag)) {
      inv.kubectlFlags.push_back(a);
      if (eq == std::string::npos) {
        StatusOr<std::string> next = value(flag);
        if (!next.ok()) return next.status();
        inv.kubectlFlags.push_back(*next);
      }
    } else if (a.size() >= 2 && In(kShortValueFlags, std::string_view(a).substr(0, 2))) {
      inv.kubectlFlags.push_back(a);
      if (a.size() == 2) {
        StatusOr<std::string> next = value(a);
        if (!next.ok()) return next.status();
        inv.kubectlFlags.push_back(*next);
      }
    } else if (In(kBoolFlags, flag)) {
      inv.kubectlFlags.push_back(a);
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return Status::InvalidArgument("unknown flag " + a);
    } else {
      positional.push_back(a);
    }
  }
  if (help || positional.empty()) {
    inv.command = "help";
    return inv;
  }
  inv.command = positional[0];
  static constexpr std::array<std::string_view, 8> kCommands = {
      "status", "abort", "pause", "resume", "undo", "explain", "version", "help"};
  if (!In(kCommands, inv.command)) {
    return Status::InvalidArgument("unknown command \"" + inv.command + "\"");
  }
  if (inv.command == "version" || inv.command == "help") {
    if (positional.size() > 1) {
      return Status::InvalidArgument(inv.command + " takes no arguments");
    }
    return inv;
  }
  if (positional.size() != 2) {
    return Status::InvalidArgument(inv.command +
                                   " needs exactly one Deployment or StatefulSet (deploy/NAME or "
                                   "sts/NAME)");
  }
  StatusOr<WorkloadRef> ref = ParseWorkloadRef(positional[1]);
  if (!ref.ok()) return ref.status();
  inv.kind = ref->kind;
  inv.name = ref->name;
  if (inv.watch && inv.command != "status") {
    return Status::InvalidArgument("--watch is a flag of status only");
  }
  if (inv.timeout && !inv.watch) {
    return Status::InvalidArgument("--timeout needs --watch");
  }
  if (inv.toRevision && inv.command != "undo") {
    return Status::InvalidArgument("--to-revision is a flag of undo only");
  }
  return inv;
}

std::string Usage() {
  return R"(kubectl inplace: watch and steer in-place updates of Deployments and StatefulSets
(inplace-webhook)

Usage:
  kubectl inplace status WORKLOAD [-w|--watch [--timeout=DURATION]]
  kubectl inplace abort WORKLOAD
  kubectl inplace pause WORKLOAD
  kubectl inplace resume WORKLOAD
  kubectl inplace undo WORKLOAD [--to-revision=N]
  kubectl inplace explain WORKLOAD
  kubectl inplace version

WORKLOAD is deploy/NAME (also deployment/, deployments/, deployments.apps/, or a bare NAME) or
sts/NAME (also statefulset/, statefulsets/, statefulsets.apps/).

Commands:
  status   The running in-place update: template hashes, phase, pause and abort, the loop's
           progress report (a Deployment's inplace-webhook.io/Progressing condition, a
           StatefulSet's inplace-webhook.io/progress annotation), a progress bar, and per pod its
           state, what it waits on (a hook's label or finalizer, the drain, restarting containers,
           a StatefulSet's partition) and for how long. --watch polls every second until the
           update ends. For a StatefulSet the bar counts the pods at or above its partition; the
           pods below it are listed as held by the partition.
  abort    End the running update (inplace-webhook.io/abort=true); the native rollout takes over.
  pause    Hold the running update (inplace-webhook.io/pause=true): pods in flight finish, no
           further pod starts. (A StatefulSet's partition stages an update the same way natively.)
  resume   Continue a held update: a Deployment's by kubectl rollout resume, a StatefulSet's by
           inplace-webhook.io/pause=false; it goes on in place.
  undo     Deployment, while an update runs: move every pod back to the template it started from,
           in place (inplace-webhook.io/undo=true; kubectl rollout undo refuses a paused
           Deployment). Otherwise, and for a StatefulSet always: kubectl rollout undo
           [--to-revision=N] (the webhook then updates the pods to that template in place).
  explain  Whether the last template change (from the previous revision, or from where the
           running update started) is made in place, and if not the first path that blocks it.

Exit status of status --watch:
  0  the update completed (or no in-place update runs)
  1  the update is stuck: progress False with ProgressDeadlineExceeded, PodUpdateRefused,
     PodResizeRefused or PodNotOptedIn
  2  the update ended without completing (aborted, or ended by the webhook)
  3  --timeout reached
  4  kubectl could not read the workload, its pods, ReplicaSets or ControllerRevisions (5 tries,
     a second apart; also for status without --watch)
Other commands exit 0 on success and 1 on failure (nothing to abort, pause or resume; kubectl
failed). Usage errors exit 1.

kubectl's global flags (-n, --context, --kubeconfig, --as, --as-group, --token, --server,
--request-timeout, ...) may be given anywhere and are passed to every kubectl the plugin runs:
your kubeconfig and credentials are used exactly as kubectl uses them. The kubectl run is the one
on PATH, or $KUBECTL.
)";
}

std::vector<std::string> GetDeployment(const Invocation& inv) {
  return WithFlags(inv, {"get", ResourceOf(WorkloadKind::kDeployment, inv.name), "-o", "json"});
}
std::vector<std::string> GetStatefulSet(const Invocation& inv) {
  return WithFlags(inv, {"get", ResourceOf(WorkloadKind::kStatefulSet, inv.name), "-o", "json"});
}
std::vector<std::string> GetWorkload(const Invocation& inv) {
  return WithFlags(inv, {"get", ResourceOf(inv.kind, inv.name), "-o", "json"});
}
std::vector<std::string> GetPods(const Invocation& inv, const std::string& selector) {
  return WithFlags(inv, {"get", "pods", "-l", selector, "-o", "json"});
}
std::vector<std::string> GetReplicaSets(const Invocation& inv, const std::string& selector) {
  return WithFlags(inv, {"get", "replicasets.apps", "-l", selector, "-o", "json"});
}
std::vector<std::string> GetControllerRevision(const Invocation& inv, const std::string& name) {
  return WithFlags(inv, {"get", "controllerrevision.apps/" + name, "-o", "json"});
}
std::vector<std::string> GetControllerRevisions(const Invocation& inv,
                                                const std::string& selector) {
  return WithFlags(inv, {"get", "controllerrevisions.apps", "-l", selector, "-o", "json"});
}
std::vector<std::string> GetRaw(const Invocation& inv, const std::string& path) {
  return WithFlags(inv, {"get", "--raw", path});
}
std::vector<std::string> Annotate(const Invocation& inv, std::string_view key,
                                  std::string_view value) {
  return WithFlags(inv, {"annotate", "--overwrite", ResourceOf(inv.kind, inv.name),
                         std::string(key) + "=" + std::string(value)});
}
std::vector<std::string> RolloutResume(const Invocation& inv) {
  return WithFlags(inv, {"rollout", "resume", ResourceOf(inv.kind, inv.name)});
}
std::vector<std::string> RolloutUndo(const Invocation& inv) {
  std::vector<std::string> rest = {"rollout", "undo", ResourceOf(inv.kind, inv.name)};
  if (inv.toRevision) rest.push_back("--to-revision=" + std::to_string(*inv.toRevision));
  return WithFlags(inv, rest);
}

}  // namespace iw::plugin
