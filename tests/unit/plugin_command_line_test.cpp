// kubectl-inplace's command line and the kubectl command lines it maps to (plugin/command_line.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "plugin/command_line.h"

using namespace iw;
using namespace iw::plugin;
using Args = std::vector<std::string>;

TEST_CASE("plugin: the Deployment reference forms kubectl accepts") {
  for (const char* ref :
       {"deploy/web", "deployment/web", "deployments/web", "deployments.apps/web", "web"}) {
    StatusOr<std::string> n = DeploymentName(ref);
    REQUIRE_MESSAGE(n.ok(), ref);
    CHECK(*n == "web");
  }
  // A StatefulSet: not read by the plugin yet; the error says where its update shows and how to end
  // it.
  CHECK(DeploymentName("sts/web").status().message().find(
            "kubectl rollout status sts/web and the StatefulSet's Events; to end it: kubectl "
            "annotate sts/web inplace-webhook.io/abort=true") != std::string::npos);
  CHECK(DeploymentName("daemonset/web")
            .status()
            .message()
            .find("only Deployments and StatefulSets are updated in place") != std::string::npos);
  CHECK(!DeploymentName("deploy/").ok());
  CHECK(!DeploymentName("deploy/a/b").ok());
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

TEST_CASE("plugin: usage errors are named") {
  auto err = [](Args a) {
    StatusOr<Invocation> inv = ParseCommandLine(a);
    REQUIRE(!inv.ok());
    return inv.status().message();
  };
  CHECK(err({"frobnicate", "deploy/web"}) == "unknown command \"frobnicate\"");
  CHECK(err({"status"}) == "status needs exactly one Deployment (deploy/NAME)");
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
