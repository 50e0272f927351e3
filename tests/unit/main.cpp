// The unit tests' main: doctest's, with the product's log lines sent to a file ($TMPDIR, else
// the working directory: unit-tests.log), so that a failing check's report, which doctest prints
// on stdout, stands alone in ctest's output instead of among thousands of the loop's lines.
// IW_UNIT_LOG=stderr keeps them on stderr. Sanitizer reports are untouched (their own files, or
// stderr for UBSan).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lib/unique_fd.h"
#include "server/process/log.h"

int main(int argc, char** argv) {
  const char* mode = std::getenv("IW_UNIT_LOG");
  iw::UniqueFd logFile;
  std::string path;
  if (mode == nullptr || std::string_view(mode) != "stderr") {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir != nullptr && *dir != '\0' ? dir : ".") + "/unit-tests.log";
    logFile = iw::UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (logFile.get() >= 0) {
      iw::log::SetOutput(logFile.get());
    } else {
      std::fprintf(stderr, "cannot open %s; the product's log stays on stderr\n", path.c_str());
    }
  }
  doctest::Context context(argc, argv);
  const int rc = context.run();
  iw::log::SetOutput(STDERR_FILENO);
  if (rc != 0 && logFile.get() >= 0) {
    std::printf("[unit] the product's log lines of this run: %s\n", path.c_str());
  }
  return rc;
}
