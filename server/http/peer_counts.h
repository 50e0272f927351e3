// Open connections per peer address, for the choice of which idle connection makes room at the
// connection limit: a peer that holds many connections loses its idle ones before a peer that
// holds few (nginx's limit_conn keyed by $binary_remote_addr, applied only when the server is
// full). A flood from one pod cannot then push out the kubelet's probe or the API server's review,
// which arrive from addresses of their own; a flood spread over many addresses meets the age
// order alone, as before.
//
// Thread safety: Join from any thread (the acceptor); a Hold is released by its destructor on any
// thread and read (Count) on its owner's; `mu_` guards the table, a peer's count is an atomic.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace iw::http {

class PeerCounts {
 public:
  // One open connection of a peer: counted from Join until destroyed. Movable.
  class Hold {
   public:
    Hold() = default;
    ~Hold() { Release(); }
    Hold(Hold&& o) noexcept : count_(std::move(o.count_)) {}
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        Release();
        count_ = std::move(o.count_);
      }
      return *this;
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

    // The peer's open connections, this one included (0 for an empty Hold).
    size_t Count() const { return count_ ? count_->load(std::memory_order_relaxed) : 0; }

   private:
    friend class PeerCounts;
    explicit Hold(std::shared_ptr<std::atomic<size_t>> count) : count_(std::move(count)) {}
    void Release() {
      if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
      count_.reset();
    }
    std::shared_ptr<std::atomic<size_t>> count_;
  };

  // Counts one more connection of the peer `address` ("ip:port" or "[ipv6]:port"; the port is
  // not part of the peer).
  Hold Join(std::string_view address);

  // Peers in the table (some may hold no connection until the next sweep). For tests.
  size_t Peers() const;

  // The peer part of an address: without the port.
  static std::string_view Host(std::string_view address);

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<std::atomic<size_t>>> table_;
  size_t nextSweep_ = 64;  // the table's size at which peers without connections are dropped
};

}  // namespace iw::http
