#include "server/kube/token_file.h"

#include <sys/stat.h>

#include <utility>

#include "lib/file.h"
#include "server/kube/text_util.h"
#include "server/process/log.h"

namespace iw::kube {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

TokenFile::TokenFile(std::string path, std::chrono::milliseconds recheck)
    : path_(std::move(path)), recheck_(recheck) {}

std::string TokenFile::Token() {
  if (path_.empty()) return {};
  std::lock_guard lock(mu_);
  auto now = Clock::now();
  if (checked_ == Clock::time_point{} || now - checked_ >= recheck_) ReloadLocked();
  return token_;
}

bool TokenFile::Reload() {
  if (path_.empty()) return false;
  std::lock_guard lock(mu_);
  return ReloadLocked();
}

bool TokenFile::ReloadLocked() {
  checked_ = Clock::now();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    log::Warn("cannot stat the token file; keeping the previous token", {{"path", path_}});
    return false;
  }
  int64_t mtimeNs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_ino) == inode_ && static_cast<uint64_t>(st.st_size) == size_ &&
      mtimeNs == mtimeNs_) {
    return false;
  }
  StatusOr<std::string> text = ReadFile(path_);
  if (!text.ok()) {
    log::Warn("cannot read the token file; keeping the previous token",
              {{"path", path_}, {"error", text.status().message()}});
    return false;
  }
  std::string token = Trim(*text);
  if (token.empty()) {
    log::Warn("the token file is empty; keeping the previous token", {{"path", path_}});
    return false;
  }
  inode_ = static_cast<uint64_t>(st.st_ino);
  size_ = static_cast<uint64_t>(st.st_size);
  mtimeNs_ = mtimeNs;
  bool changed = token != token_;
  if (changed && !token_.empty()) log::Info("API token reloaded", {{"path", path_}});
  token_ = std::move(token);
  return changed;
}

}  // namespace iw::kube
