// The bearer token of the API client, from a file the kubelet rotates (a projected
// service-account token): the Client sends the current one with every request and reloads it
// after a 401. An unreadable or empty file keeps the previous token and logs a warning; an empty
// path means no token.
//
// Thread safety: Token and Reload from any thread, concurrently; `mu_` guards the token and the
// file's identity, and a reload stats and reads the file under it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace iw::kube {

// A bearer token read from a file, re-read when the file's inode, size or mtime changed (checked
// at most every `recheck`, or on Reload). A read error keeps the previous token.
class TokenFile {
 public:
  TokenFile(std::string path, std::chrono::milliseconds recheck);
  // The current token ("" when the file was never readable).
  std::string Token();
  // Stats the file now and re-reads it if it changed; returns whether the token changed.
  bool Reload();

 private:
  bool ReloadLocked();

  const std::string path_;
  const std::chrono::milliseconds recheck_;
  std::mutex mu_;
  std::string token_;
  std::chrono::steady_clock::time_point checked_{};
  uint64_t inode_ = 0, size_ = 0;
  int64_t mtimeNs_ = -1;
};

}  // namespace iw::kube
