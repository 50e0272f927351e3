// The unit tests' main: doctest's, with the product's log lines sent to a file ($TMPDIR, else
// the working directory: unit-tests.log), so that a failing check's report, which doctest prints
// on stdout, stands alone in ctest's output instead of among thousands of the loop's lines.
// IW_UNIT_LOG=stderr keeps them on stderr; IW_UNIT_LOG_LEVEL=debug logs the loop's debug lines too.
// Sanitizer reports are untouched (their own files, or stderr for UBSan). A test case that fails
// has its own last log lines printed after its report (CI keeps ctest's output, not the file): what
// the loop did when a wait ran out.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <string_view>

#include "lib/unique_fd.h"
#include "server/process/log.h"

namespace {

// The log file and where the running test case's lines begin in it.
int gLogFd = -1;
std::string gLogPath;
off_t gCaseStart = 0;

constexpr size_t kTailLines = 120;  // a failing test case's last lines, printed
constexpr size_t kLineCut = 600;    // characters of each

// Prints the lines the product logged since the failing test case began (its last kTailLines).
void PrintCaseLog() {
  iw::UniqueFd in(::open(gLogPath.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0 || ::lseek(in.get(), gCaseStart, SEEK_SET) < 0) return;
  std::deque<std::string> tail;
  std::string line;
  size_t dropped = 0;
  char buf[8192];
  for (ssize_t n; (n = ::read(in.get(), buf, sizeof buf)) > 0;) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (line.size() < kLineCut) line.push_back(buf[i]);
        continue;
      }
      tail.push_back(std::move(line));
      line.clear();
      if (tail.size() > kTailLines) {
        tail.pop_front();
        ++dropped;
      }
    }
  }
  std::printf(
      "[unit] the product's last %zu log lines of this test case (%zu earlier ones in %s):\n",
      tail.size(), dropped, gLogPath.c_str());
  for (const std::string& l : tail) std::printf("[log] %s\n", l.c_str());
  std::fflush(stdout);
}

// A listener: remembers where each test case's log lines begin, prints them if it fails.
struct CaseLog : doctest::IReporter {
  explicit CaseLog(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {
    if (gLogFd >= 0) gCaseStart = ::lseek(gLogFd, 0, SEEK_CUR);
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    if (gLogFd >= 0 && !stats.testCaseSuccess) PrintCaseLog();
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("case-log", 1, CaseLog);

}  // namespace

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
      gLogFd = logFile.get();
      gLogPath = path;
    } else {
      std::fprintf(stderr, "cannot open %s; the product's log stays on stderr\n", path.c_str());
    }
  }
  if (const char* level = std::getenv("IW_UNIT_LOG_LEVEL"); level != nullptr) {
    iw::StatusOr<iw::log::Level> parsed = iw::log::ParseLevel(level);
    if (!parsed.ok()) {
      std::fprintf(stderr, "IW_UNIT_LOG_LEVEL: %s\n", parsed.status().message().c_str());
      return 2;
    }
    iw::log::Configure(*parsed, iw::log::Format::kJson);
  }
  doctest::Context context(argc, argv);
  const int rc = context.run();
  iw::log::SetOutput(STDERR_FILENO);
  gLogFd = -1;
  if (rc != 0 && logFile.get() >= 0) {
    std::printf("[unit] the product's log lines of this run: %s\n", path.c_str());
  }
  return rc;
}
