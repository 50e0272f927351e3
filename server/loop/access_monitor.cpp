#include "server/loop/access_monitor.h"

#include "lib/stop_sleep.h"

#include <condition_variable>
#include <exception>

#include "server/kube/kube_client.h"
#include "server/process/log.h"

namespace iw::server {

AccessMonitor::AccessMonitor(kube::Api& api, Options options)
    : api_(api), options_(std::move(options)) {}

AccessMonitor::~AccessMonitor() {
  Stop();
}

bool AccessMonitor::CheckNow() {
  std::vector<access::Permission> refused;
  {
    kube::DeadlineScope scope(std::chrono::steady_clock::now() + options_.callTimeout);
    for (const access::Permission& p : access::LoopNeeds()) {
      kube::Result r = api_.Create(access::kSelfSubjectAccessReviewsPath, access::Review(p));
      if (!r.Ok()) {
        ++errors_;
        log::Warn("cannot ask the API server what the loop may do (SelfSubjectAccessReview)",
                  {{"permission", access::Describe(p)},
                   {"code", std::to_string(r.code)},
                   {"error", r.message}});
        return false;
      }
      if (!access::Allowed(r.object)) refused.push_back(p);
    }
  }
  bool newlyRefused = false;
  {
    std::lock_guard lock(mu_);
    for (const access::Permission& p : refused) {
      bool before = false;
      for (const access::Permission& q : refused_) {
        before = before || access::Describe(q) == access::Describe(p);
      }
      newlyRefused = newlyRefused || !before;
    }
    if (known_ && !refused_.empty() && refused.empty()) {
      log::Info("the loop may act again: every permission it needs is granted");
    }
    refused_ = refused;
    known_ = true;
  }
  ++(refused.empty() ? able_ : refusedRounds_);
  if (newlyRefused) {
    const std::string problem = access::Problem(refused);
    log::Error(problem);
    if (options_.onRefused) {
      try {
        options_.onRefused(problem);
      } catch (const std::exception& e) {
        log::Error("access monitor callback failed", {{"error", e.what()}});
      }
    }
  }
  return true;
}

void AccessMonitor::Start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
}

void AccessMonitor::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void AccessMonitor::Run(std::stop_token stop) {
  while (SleepUnlessStopped(options_.interval, stop)) {
    try {
      CheckNow();
    } catch (const std::exception& e) {
      ++errors_;
      log::Error("access check failed", {{"error", e.what()}});
    }
  }
}

bool AccessMonitor::Known() const {
  std::lock_guard lock(mu_);
  return known_;
}

bool AccessMonitor::Able() const {
  std::lock_guard lock(mu_);
  return known_ && refused_.empty();
}

std::string AccessMonitor::Problem() const {
  std::lock_guard lock(mu_);
  return access::Problem(refused_);
}

void AccessMonitor::RenderMetrics(std::string& out) const {
  size_t refused = 0;
  {
    std::lock_guard lock(mu_);
    refused = refused_.size();
  }
  out +=
      "# HELP inplace_webhook_controller_permissions_refused Permissions the loop needs that the "
      "API server refused at the last access check (SelfSubjectAccessReview); above 0 this "
      "replica does not lead.\n";
  out += "# TYPE inplace_webhook_controller_permissions_refused gauge\n";
  out += "inplace_webhook_controller_permissions_refused " + std::to_string(refused) + "\n";
  out +=
      "# HELP inplace_webhook_access_checks_total Access checks by result (error: an answer "
      "could not be read; the verdict before it stands).\n";
  out += "# TYPE inplace_webhook_access_checks_total counter\n";
  out +=
      "inplace_webhook_access_checks_total{result=\"able\"} " + std::to_string(able_.load()) + "\n";
  out += "inplace_webhook_access_checks_total{result=\"refused\"} " +
         std::to_string(refusedRounds_.load()) + "\n";
  out += "inplace_webhook_access_checks_total{result=\"error\"} " + std::to_string(errors_.load()) +
         "\n";
}

}  // namespace iw::server
