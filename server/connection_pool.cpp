#include "server/connection_pool.h"

#include <algorithm>

#include "server/log.h"

namespace iw::server {

ConnectionPool::ConnectionPool(size_t minThreads, size_t maxThreads, std::chrono::seconds idleExit)
    : min_(std::min(minThreads, maxThreads)),
      max_(std::max<size_t>(1, maxThreads)),
      idleExit_(idleExit) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < min_; ++i) threads_.emplace_back([this] { Work(); });
}

ConnectionPool::~ConnectionPool() {
  shutdown();
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  jobs_.push_back(std::move(fn));
  ReapFinishedLocked();
  if (idle_ < jobs_.size() && threads_.size() < max_) {
    threads_.emplace_back([this] { Work(); });
  }
  cv_.notify_one();
}

void ConnectionPool::ReapFinishedLocked() {
  for (auto id : finished_) {
    auto it =
        std::find_if(threads_.begin(), threads_.end(), [&](auto& t) { return t.get_id() == id; });
    if (it != threads_.end()) {
      it->join();  // already returned from Work(): joins at once
      threads_.erase(it);
    }
  }
  finished_.clear();
}

void ConnectionPool::Work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    bool woke = cv_.wait_for(lock, idleExit_, [this] { return shutdown_ || !jobs_.empty(); });
    --idle_;
    if (!woke) {
      if (threads_.size() - finished_.size() > min_) break;  // surplus and idle: exit
      continue;
    }
    if (jobs_.empty()) break;  // shutdown with nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      job();
    } catch (const std::exception& e) {
      log::Error("connection task failed", {{"error", e.what()}});
    } catch (...) {
      log::Error("connection task failed");
    }
    lock.lock();
    --busy_;
  }
  finished_.push_back(std::this_thread::get_id());
}

void ConnectionPool::shutdown() {
  std::list<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
    cv_.notify_all();
  }
  // Workers drain the queue, then exit; join outside the lock.
  {
    std::unique_lock lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  std::lock_guard lock(mu_);
  finished_.clear();
}

size_t ConnectionPool::Threads() const {
  std::lock_guard lock(mu_);
  return threads_.size() - finished_.size();
}
size_t ConnectionPool::Busy() const {
  std::lock_guard lock(mu_);
  return busy_;
}
size_t ConnectionPool::Queued() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace iw::server
