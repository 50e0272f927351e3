// A small HTTP/1.1 server over epoll and (optionally) OpenSSL, for the webhook and probe ports.
//
// One acceptor thread and a few worker threads, each with its own epoll set: a connection lives
// on one worker, which drives its TLS handshake, reads, the handler call and the write without
// blocking, so idle keep-alive connections cost a buffer each and no thread, and a request costs
// one read and one write (one TLS record for a small answer). The handler runs on the worker
// thread and must not block.
//
// Connections: at most `maxConnections` open. When a new one waits at the limit, the server makes
// room by closing an idle connection (no request under way: a TLS handshake not finished, nothing
// received since the last answer, or only part of a request's head for longer than the eviction
// grace): one that never had an answer before one that had, then one of the peer address holding
// the most connections (PeerCounts), then the one that has waited longest (since its acceptance,
// the last step of its TLS handshake or its last answer); under a flood (room wanted again within
// 20 ms) a round closes more at once, doubling up to maxConnections / 8, so that the backlog
// drains at accept speed. Only when none is idle does the new one wait in the listen backlog, for
// a request to finish.
//
// Deadlines: `firstRequestTimeout` from accepting a connection to the first byte of its first
// request (the TLS handshake included); `headerTimeout` from a request's first byte to the end of
// its head (nginx's client_header_timeout, Go's ReadHeaderTimeout); `requestTimeout` for a request
// from its first byte to its last, and for writing the answer; `idleTimeout` between requests. A
// connection past its deadline is closed. A connection holding a partial head is as evictable as
// an idle one, and goes first (with the never-served), so half-sent heads cannot hold the slots.
//
// Memory: each connection's buffers (received bytes, a decoded chunked body) up to
// kFreeBufferBytes are its own; beyond that they are charged to `budget`, shared by every server
// of the process. A request that would take the budget over its limit is refused with 503 and
// `Retry-After` (the client's further bytes are read and dropped). An answer's bytes are charged
// with its request's until written: one that would go over the limit (clients that send and do not
// read) is replaced by a 503 and the connection closed after it. So the bytes held at once stay
// within maxConnections * kFreeBufferBytes + the budget's limit.
//
// Thread safety: Start() once, then Shutdown() (idempotent; the destructor calls it), both from
// the owner's thread and never from a handler (Shutdown() joins the workers). Port() once Start()
// has returned; Accepting(), OpenConnections() and Stats() from any thread (atomics). The handler
// and the error responder run on the worker threads, several at once: they must be thread-safe
// and must not block. Inside, a connection belongs to one worker (a worker's `mu_` guards only
// the sockets handed to it); `capacityMu_` guards offers_ and stopping_ and orders open_'s
// decrements with the acceptor's wait; evictBatch_ and lastEviction_ are the acceptor's.
// ByteBudget is lock-free and shared by every server of the process.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/status.h"
#include "server/http/http_message.h"
#include "server/http/peer_counts.h"

namespace iw::http {

// Buffer bytes every connection may hold without charging the budget: small requests (every
// admission review of ordinary objects) are never refused for memory.
inline constexpr size_t kFreeBufferBytes = 64 * 1024;

// A process-wide bound on request bytes held in connection buffers. Thread-safe.
class ByteBudget {
 public:
  explicit ByteBudget(size_t limit) : limit_(limit) {}
  // Takes `bytes` if they fit under the limit; false (nothing taken) otherwise.
  bool TryAcquire(size_t bytes);
  void Release(size_t bytes) { used_.fetch_sub(bytes); }
  size_t Used() const { return used_.load(); }
  size_t Limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

// What a server did to protect itself, for /metrics.
struct ServerStats {
  std::atomic<uint64_t> evictedIdle{0};           // closed to make room at maxConnections
  std::atomic<uint64_t> firstRequestTimeouts{0};  // closed: no request within firstRequestTimeout
  std::atomic<uint64_t> headerTimeouts{0};  // closed: a request head not whole in headerTimeout
  std::atomic<uint64_t> shedOverBudget{0};  // requests refused with 503: budget spent
  std::atomic<uint64_t> shedAnswers{0};  // answers replaced by a 503: their bytes over the budget
};

struct ServerOptions {
  std::string name = "http";  // in log lines
  std::string bindAddress = "0.0.0.0";
  int port = 0;              // 0: any free port
  SSL_CTX* tls = nullptr;    // null: plain HTTP; not owned, must outlive the server
  size_t workerThreads = 0;  // 0: one per CPU this process may run on, at most 4
  size_t maxConnections = 256;
  std::chrono::milliseconds firstRequestTimeout{5000};
  std::chrono::milliseconds headerTimeout{2000};  // first byte of a request to the end of its head
  std::chrono::milliseconds requestTimeout{10000};
  std::chrono::milliseconds idleTimeout{90000};
  Limits limits;
  ByteBudget* budget =
      nullptr;  // null: no bound beyond `limits`; not owned, must outlive the server
};

// Answers one request. Runs on a worker thread; must be thread-safe and must not block.
using Handler = std::function<void(const Request&, Response&)>;
// Fills the answer to a request the server refuses itself: 400/413/431/501/505 for a malformed
// or oversized request, 503 when the byte budget is spent (the server adds `Retry-After`), 500 when
// the handler threw. `path` is "" when the request line was not understood (or not yet read).
using ErrorResponder =
    std::function<void(int status, std::string_view message, std::string_view path, Response&)>;

class Server {
 public:
  Server(ServerOptions options, Handler handler, ErrorResponder onError);
  ~Server();  // Shutdown(0) if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts the threads. Failure: IOError when the address does not resolve or a
  // socket, bind, listen, epoll or eventfd call fails (the message names the address and the
  // system's error); nothing is left running then.
  Status Start();

  // Stops accepting (the port refuses connections), closes idle connections at once, lets
  // requests already started get their answer (with `Connection: close`) for up to `grace`,
  // then closes whatever is left and joins the threads.
  void Shutdown(std::chrono::milliseconds grace);

  int Port() const { return port_; }
  bool Accepting() const { return accepting_.load(); }
  size_t OpenConnections() const { return open_.load(); }
  const ServerStats& Stats() const { return stats_; }

 private:
  class Worker;  // one epoll loop; defined in http_server.cpp

  void AcceptLoop();
  // Waits until a connection may be opened, asking the workers to close an idle one while the
  // server is full. False when stopping, or when none was freed within 5 ms (all busy, or all
  // within their eviction grace): the caller tries again.
  bool MakeRoom();
  void ConnectionClosed();
  void OfferMade();

  ServerOptions options_;
  Handler handler_;
  ErrorResponder onError_;
  int listenFd_ = -1;
  int stopFd_ = -1;  // eventfd that wakes the acceptor
  int port_ = 0;
  std::atomic<bool> accepting_{false};
  std::atomic<bool> draining_{false};  // Shutdown has begun
  std::atomic<size_t> open_{0};
  std::atomic<uint64_t> evictRound_{0};  // a new value asks every worker for an eviction offer
  size_t offers_ = 0;                    // offers made in this round; guarded by capacityMu_
  size_t evictBatch_ = 1;                // connections closed per round; acceptor thread only
  std::chrono::steady_clock::time_point lastEviction_;
  ServerStats stats_;
  PeerCounts peers_;  // the acceptor joins, a connection's Hold leaves
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::mutex capacityMu_;
  std::condition_variable capacityCv_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread acceptor_;
};

}  // namespace iw::http
