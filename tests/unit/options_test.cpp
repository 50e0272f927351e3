// The serve command's flags: the loop's client rate limit (--kube-api-qps, --kube-api-burst).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "server/process/options.h"

using namespace iw;

namespace {

// Parses `serve` with a TLS pair (required) and `flags`.
cli::Parsed Serve(std::vector<std::string> flags) {
  std::vector<std::string> args = {"inplace-webhook", "serve", "--tls-cert-file=c",
                                   "--tls-private-key-file=k"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return cli::Parse(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("serve: the loop's API rate limit is a flag, 200/400 by default, bounded") {
  cli::Parsed defaults = Serve({});
  REQUIRE_MESSAGE(!defaults.exitCode, defaults.output);
  CHECK(defaults.serve.kubeApiQps == 200);
  CHECK(defaults.serve.kubeApiBurst == 400);

  cli::Parsed set = Serve({"--kube-api-qps=50", "--kube-api-burst=100"});
  REQUIRE_MESSAGE(!set.exitCode, set.output);
  CHECK(set.serve.kubeApiQps == 50);
  CHECK(set.serve.kubeApiBurst == 100);

  struct Bad {
    const char* flag;
    const char* message;
  };
  for (const Bad& b : {Bad{"--kube-api-qps=0", "--kube-api-qps must be 1..10000"},
                       Bad{"--kube-api-qps=-5", "--kube-api-qps must be 1..10000"},
                       Bad{"--kube-api-qps=nan", "failed to parse"},
                       Bad{"--kube-api-qps=20000", "--kube-api-qps must be 1..10000"},
                       Bad{"--kube-api-burst=0", "--kube-api-burst must be 1..10000"}}) {
    CAPTURE(b.flag);
    cli::Parsed p = Serve({b.flag});
    REQUIRE(p.exitCode.has_value());
    CHECK(*p.exitCode != 0);
    CHECK(p.output.find(b.message) != std::string::npos);
  }
}
