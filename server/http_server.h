// A small HTTP/1.1 server over epoll and (optionally) OpenSSL, for the webhook and probe ports.
//
// One acceptor thread and a few worker threads, each with its own epoll set: a connection lives
// on one worker, which drives its TLS handshake, reads, the handler call and the write without
// blocking, so idle keep-alive connections cost a buffer each and no thread, and a request costs
// one read and one write (one TLS record for a small answer). The handler runs on the worker
// thread and must not block. Connections beyond `maxConnections` wait in the listen backlog.
//
// Deadlines: `requestTimeout` for a TLS handshake, for a request from its first byte to its last,
// and for writing the answer; `idleTimeout` between requests. A connection past its deadline is
// closed.
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

#include "server/http_message.h"

namespace iw::http {

struct ServerOptions {
  std::string name = "http";  // in log lines
  std::string bindAddress = "0.0.0.0";
  int port = 0;              // 0: any free port
  SSL_CTX* tls = nullptr;    // null: plain HTTP; not owned, must outlive the server
  size_t workerThreads = 0;  // 0: one per CPU this process may run on, at most 4
  size_t maxConnections = 256;
  std::chrono::milliseconds requestTimeout{10000};
  std::chrono::milliseconds idleTimeout{90000};
  Limits limits;
};

// Answers one request. Runs on a worker thread; must be thread-safe and must not block.
using Handler = std::function<void(const Request&, Response&)>;
// Fills the answer to a request the server refuses itself: 400/413/431/501/505 for a malformed
// or oversized request, 500 when the handler threw. `path` is "" when the request line was not
// understood.
using ErrorResponder =
    std::function<void(int status, std::string_view message, std::string_view path, Response&)>;

class Server {
 public:
  Server(ServerOptions options, Handler handler, ErrorResponder onError);
  ~Server();  // Shutdown(0) if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts the threads. Returns an error message, or "" on success.
  std::string Start();

  // Stops accepting (the port refuses connections), closes idle connections at once, lets
  // requests already started get their answer (with `Connection: close`) for up to `grace`,
  // then closes whatever is left and joins the threads.
  void Shutdown(std::chrono::milliseconds grace);

  int Port() const { return port_; }
  bool Accepting() const { return accepting_.load(); }
  size_t OpenConnections() const { return open_.load(); }

 private:
  class Worker;  // one epoll loop; defined in http_server.cpp

  void AcceptLoop();
  void ConnectionClosed();

  ServerOptions options_;
  Handler handler_;
  ErrorResponder onError_;
  int listenFd_ = -1;
  int stopFd_ = -1;  // eventfd that wakes the acceptor
  int port_ = 0;
  std::atomic<bool> accepting_{false};
  std::atomic<bool> draining_{false};  // Shutdown has begun
  std::atomic<size_t> open_{0};
  std::mutex capacityMu_;
  std::condition_variable capacityCv_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::thread acceptor_;
};

}  // namespace iw::http
