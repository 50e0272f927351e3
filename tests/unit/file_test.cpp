// lib/file.h: a whole file's bytes, or IOError naming the path and the system's reason.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lib/file.h"

TEST_CASE("ReadFile: every byte, or IOError with the path and the reason") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("iw-file-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "data").string();
  std::string bytes(40000, 'x');  // more than one read
  bytes[0] = '\0';
  bytes.back() = '\n';
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  iw::StatusOr<std::string> read = iw::ReadFile(path);
  REQUIRE(read.ok());
  CHECK(*read == bytes);

  iw::StatusOr<std::string> missing = iw::ReadFile((dir / "none").string());
  CHECK(missing.status().code() == iw::Status::Code::kIOError);
  CHECK(missing.status().message() ==
        "cannot read " + (dir / "none").string() + ": No such file or directory");
  // A directory opens but cannot be read.
  CHECK(iw::ReadFile(dir.string()).status().message() ==
        "cannot read " + dir.string() + ": Is a directory");
  std::filesystem::remove_all(dir);
}
