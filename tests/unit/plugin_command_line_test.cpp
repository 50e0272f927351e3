// kubectl-inplace's command line and the kubectl command lines it maps to (plugin/command_line.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hooks/keys.h"
#include "plugin/command_line.h"

using namespace iw;
using namespace iw::plugin;
using Args = std::vector<std::string>;

TEST_CASE("plugin: the Deployment and StatefulSet reference forms kubectl accepts") {
  struct Case {
    const char* ref;
    WorkloadKind kind;
  };
  for (const Case& c :
       {Case{"deploy/web", WorkloadKind::kDeployment},
        Case{"deployment/web", WorkloadKind::kDeployment},
        Case{"deployments/web", WorkloadKind::kDeployment},
        Case{"deployment.apps/web", WorkloadKind::kDeployment},
        Case{"deployments.apps/web", WorkloadKind::kDeployment},
        Case{"web", WorkloadKind::kDeployment}, Case{"sts/web", WorkloadKind::kStatefulSet},
        Case{"statefulset/web", WorkloadKind::kStatefulSet},
        Case{"statefulsets/web", WorkloadKind::kStatefulSet},
        Case{"statefulset.apps/web", WorkloadKind::kStatefulSet},
        Case{"statefulsets.apps/web", WorkloadKind::kStatefulSet}}) {
    StatusOr<WorkloadRef> r = ParseWorkloadRef(c.ref);
    REQUIRE_MESSAGE(r.ok(), c.ref);
    CHECK_MESSAGE(r->kind == c.kind, c.ref);
    CHECK(r->name == "web");
  }
  // Another kind is refused, naming the two that are updated in place.
  for (const char* bad : {"daemonset/web", "ds/web", "rs/web", "pod/web", "sts.apps.v1/web"}) {
    StatusOr<WorkloadRef> r = ParseWorkloadRef(bad);
    REQUIRE_MESSAGE(!r.ok(), bad);
    CHECK(r.status().message() == "only Deployments and StatefulSets are updated in place: " +
                                      std::string(bad) + " (use deploy/NAME or sts/NAME)");
  }
  for (const char* bad : {"deploy/", "sts/", "deploy/a/b", "sts/a/b", ""}) {
    StatusOr<WorkloadRef> r = ParseWorkloadRef(bad);
    REQUIRE_MESSAGE(!r.ok(), bad);
    CHECK(r.status().message().find("not a Deployment or StatefulSet name") == 0);
  }
  // The command line carries the kind.
  StatusOr<Invocation> inv = ParseCommandLine({"status", "statefulsets.apps/db", "-n", "shop"});
  REQUIRE(inv.ok());
  CHECK(inv->kind == WorkloadKind::kStatefulSet);
  CHECK(inv->name == "db");
  inv = ParseCommandLine({"status", "db"});
  REQUIRE(inv.ok());
  CHECK(inv->kind == WorkloadKind::kDeployment);
  CHECK(ParseCommandLine({"abort", "daemonset/web"}).status().message() ==
        "only Deployments and StatefulSets are updated in place: daemonset/web (use deploy/NAME "
        "or sts/NAME)");
}

TEST_CASE("plugin: kubectl's global flags pass through from before and after the command") {
  StatusOr<Invocation> inv = ParseCommandLine(
      {"-n", "shop", "--context=prod", "status", "deploy/web", "--as", "alice", "--as-group=dev",
       "-w", "--timeout=2m", "--kubeconfig", "/k", "--request-timeout=5s", "-s", "https://x",
       "--token=t", "--insecure-skip-tls-verify"});
  REQUIRE_MESSAGE(inv.ok(), inv.status().message());
  CHECK(inv->command == "status");
  CHECK(inv->name == "web");
  CHECK(inv->watch);
  REQUIRE(inv->timeout.has_value());
  CHECK(inv->timeout->count() == 120);
  CHECK(inv->kubectlFlags == Args{"-n", "shop", "--context=prod", "--as", "alice", "--as-group=dev",
                                  "--kubeconfig", "/k", "--request-timeout=5s", "-s", "https://x",
                                  "--token=t", "--insecure-skip-tls-verify"});
  CHECK(GetDeployment(*inv) == Args{"-n", "shop", "--context=prod", "--as", "alice",
                                    "--as-group=dev", "--kubeconfig", "/k", "--request-timeout=5s",
                                    "-s", "https://x", "--token=t", "--insecure-skip-tls-verify",
                                    "get", "deployment.apps/web", "-o", "json"});
}

TEST_CASE("plugin: each command maps to the product's command annotation or kubectl rollout") {
  StatusOr<Invocation> inv = ParseCommandLine({"abort", "deploy/web", "-nshop"});
  REQUIRE(inv.ok());
  CHECK(Annotate(*inv, "inplace-webhook.io/abort") == Args{"-nshop", "annotate", "--overwrite",
                                                           "deployment.apps/web",
                                                           "inplace-webhook.io/abort=true"});
  inv = ParseCommandLine({"undo", "web", "--to-revision", "3"});
  REQUIRE(inv.ok());
  CHECK(RolloutUndo(*inv) == Args{"rollout", "undo", "deployment.apps/web", "--to-revision=3"});
  CHECK(RolloutResume(*inv) == Args{"rollout", "resume", "deployment.apps/web"});
  CHECK(GetPods(*inv, "app=web") == Args{"get", "pods", "-l", "app=web", "-o", "json"});
}

TEST_CASE("plugin: a StatefulSet's commands map to its kubectl command lines") {
  StatusOr<Invocation> inv = ParseCommandLine({"abort", "sts/db", "-nshop", "--context=prod"});
  REQUIRE_MESSAGE(inv.ok(), inv.status().message());
  CHECK(GetWorkload(*inv) ==
        Args{"-nshop", "--context=prod", "get", "statefulset.apps/db", "-o", "json"});
  CHECK(GetStatefulSet(*inv) == GetWorkload(*inv));
  CHECK(Annotate(*inv, "inplace-webhook.io/abort") == Args{"-nshop", "--context=prod", "annotate",
                                                           "--overwrite", "statefulset.apps/db",
                                                           "inplace-webhook.io/abort=true"});
  CHECK(GetControllerRevision(*inv, "db-7f9c") ==
        Args{"-nshop", "--context=prod", "get", "controllerrevision.apps/db-7f9c", "-o", "json"});
  CHECK(GetControllerRevisions(*inv, "app=db") == Args{"-nshop", "--context=prod", "get",
                                                       "controllerrevisions.apps", "-l", "app=db",
                                                       "-o", "json"});
  inv = ParseCommandLine({"undo", "statefulset/db", "--to-revision=2"});
  REQUIRE(inv.ok());
  CHECK(RolloutUndo(*inv) == Args{"rollout", "undo", "statefulset.apps/db", "--to-revision=2"});
  inv = ParseCommandLine({"undo", "sts/db"});
  REQUIRE(inv.ok());
  CHECK(RolloutUndo(*inv) == Args{"rollout", "undo", "statefulset.apps/db"});
  // A Deployment's stay as they were.
  inv = ParseCommandLine({"status", "deploy/web"});
  REQUIRE(inv.ok());
  CHECK(GetWorkload(*inv) == Args{"get", "deployment.apps/web", "-o", "json"});
}

TEST_CASE("plugin: pause and resume of a StatefulSet are its pause command") {
  StatusOr<Invocation> pause = ParseCommandLine({"pause", "sts/db", "-n", "shop"});
  REQUIRE(pause.ok());
  CHECK(Annotate(*pause, keys::kPauseAnnotation) == Args{"-n", "shop", "annotate", "--overwrite",
                                                         "statefulset.apps/db",
                                                         "inplace-webhook.io/pause=true"});
  StatusOr<Invocation> resume = ParseCommandLine({"resume", "statefulsets/db"});
  REQUIRE(resume.ok());
  CHECK(Annotate(*resume, keys::kPauseAnnotation, "false") ==
        Args{"annotate", "--overwrite", "statefulset.apps/db", "inplace-webhook.io/pause=false"});
}

TEST_CASE("plugin: usage errors are named") {
  auto err = [](Args a) {
    StatusOr<Invocation> inv = ParseCommandLine(a);
    REQUIRE(!inv.ok());
    return inv.status().message();
  };
  CHECK(err({"frobnicate", "deploy/web"}) == "unknown command \"frobnicate\"");
  CHECK(err({"status"}) ==
        "status needs exactly one Deployment or StatefulSet (deploy/NAME or sts/NAME)");
  CHECK(err({"status", "sts/web", "--timeout=5s"}) == "--timeout needs --watch");
  CHECK(err({"pause", "sts/web", "--to-revision=2"}) == "--to-revision is a flag of undo only");
  CHECK(err({"status", "deploy/web", "--bogus"}) == "unknown flag --bogus");
  CHECK(err({"abort", "deploy/web", "-w"}) == "--watch is a flag of status only");
  CHECK(err({"status", "deploy/web", "--timeout=5s"}) == "--timeout needs --watch");
  CHECK(err({"status", "deploy/web", "-n"}) == "flag -n needs a value");
  CHECK(err({"pause", "deploy/web", "--to-revision=2"}) == "--to-revision is a flag of undo only");
  CHECK(err({"undo", "deploy/web", "--to-revision=x"}) == "--to-revision wants a number: x");
  CHECK(ParseCommandLine({}).value().command == "help");
  CHECK(ParseCommandLine({"status", "--help"}).value().command == "help");
  CHECK(ParseCommandLine({"version"}).value().command == "version");
}

TEST_CASE("plugin: durations") {
  CHECK(ParseDuration("90").value().count() == 90);
  CHECK(ParseDuration("90s").value().count() == 90);
  CHECK(ParseDuration("1h30m").value().count() == 5400);
  CHECK(!ParseDuration("5x").ok());
  CHECK(!ParseDuration("m").ok());
  CHECK(!ParseDuration("").ok());
}
