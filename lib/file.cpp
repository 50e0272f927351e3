#include "lib/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/unique_fd.h"

namespace iw {

StatusOr<std::string> ReadFile(const std::string& path) {
  auto failed = [&path] {
    return Status::IOError("cannot read " + path + ": " + std::strerror(errno));
  };
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return failed();
  std::string out;
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      return failed();
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace iw
