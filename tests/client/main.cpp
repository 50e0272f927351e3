#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

#include "server/process/log.h"

int main(int argc, char** argv) {
  // A peer closing a TLS connection must not kill the test process (the binary does the same).
  std::signal(SIGPIPE, SIG_IGN);
  iw::log::Configure(iw::log::Level::kWarn, iw::log::Format::kText);
  doctest::Context context(argc, argv);
  return context.run();
}
