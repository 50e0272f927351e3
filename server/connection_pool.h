// The worker pool behind the HTTPS listener. cpp-httplib gives each connection one task for its
// whole keep-alive life, so a fixed pool of N threads serves at most N connections and starves
// the rest. This pool starts a thread per connection on demand, up to `maxThreads`, keeps
// `minThreads` warm, and lets surplus threads exit after `idleExit` without work. Connections
// beyond `maxThreads` wait in a queue until a connection closes.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace iw::server {

class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(size_t minThreads, size_t maxThreads, std::chrono::seconds idleExit);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs queued tasks, then joins every thread

  size_t Threads() const;
  size_t Busy() const;
  size_t Queued() const;

 private:
  void Work();
  void ReapFinishedLocked();

  const size_t min_, max_;
  const std::chrono::seconds idleExit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> threads_;
  std::vector<std::thread::id> finished_;
  size_t idle_ = 0;
  size_t busy_ = 0;
  bool shutdown_ = false;
};

}  // namespace iw::server
