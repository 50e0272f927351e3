#include "server/leader_election.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <exception>
#include <random>

#include "server/log.h"

namespace iw::leader {

namespace {

using json::Value;

// metav1.MicroTime: RFC 3339 with microseconds, UTC.
std::string MicroTime(std::chrono::system_clock::time_point t) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%06lldZ", static_cast<long long>(micros % 1000000));
  return buf;
}

long long IntOr(const Value* object, std::string_view key, long long fallback) {
  const Value* v = json::Find(object, key);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : fallback;
}

std::string Describe(const kube::Result& r) {
  return "HTTP " + std::to_string(r.code) + (r.message.empty() ? "" : ": " + r.message);
}

}  // namespace

std::string DefaultIdentity() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "inplace-webhook");
  }
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(rd()));
  return std::string(host) + "_" + suffix;
}

LeaderElector::LeaderElector(kube::Api& api, Options options)
    : api_(api),
      options_(std::move(options)),
      identity_(options_.identity.empty() ? DefaultIdentity() : options_.identity) {}

LeaderElector::~LeaderElector() {
  Stop();
}

std::string LeaderElector::Now() const {
  return MicroTime(options_.clock ? options_.clock() : std::chrono::system_clock::now());
}

bool LeaderElector::IsLeader() const {
  std::lock_guard lock(mu_);
  return leading_;
}

bool LeaderElector::LeaderKnownAlive(std::chrono::steady_clock::time_point now) const {
  std::lock_guard lock(mu_);
  if (leading_) return true;
  return !observedHolder_.empty() && observedHolder_ != identity_ &&
         now < observedTime_ + options_.renewDeadline;
}

bool LeaderElector::TryAcquireOrRenew(std::chrono::steady_clock::time_point now) {
  const std::string path = kube::LeasePath(options_.namespaceName, options_.name);
  const std::string ts = Now();
  const long long durationSeconds = std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.leaseDuration).count());
  auto fillSpec = [&](Value& spec, json::Allocator& a, const std::string& acquireTime,
                      long long transitions) {
    json::SetString(spec, "holderIdentity", identity_, a);
    json::Set(spec, "leaseDurationSeconds", Value(static_cast<int64_t>(durationSeconds)), a);
    json::SetString(spec, "acquireTime", acquireTime, a);
    json::SetString(spec, "renewTime", ts, a);
    json::Set(spec, "leaseTransitions", Value(static_cast<int64_t>(transitions)), a);
  };

  kube::Result got = api_.Get(path);
  if (got.NotFound()) {
    json::Document lease(rapidjson::kObjectType);
    auto& a = lease.GetAllocator();
    lease.AddMember("apiVersion", "coordination.k8s.io/v1", a);
    lease.AddMember("kind", "Lease", a);
    Value& meta = json::EnsureObject(lease, "metadata", a);
    json::SetString(meta, "name", options_.name, a);
    json::SetString(meta, "namespace", options_.namespaceName, a);
    fillSpec(json::EnsureObject(lease, "spec", a), a, ts, 0);
    kube::Result created = api_.Create(kube::LeasesPath(options_.namespaceName), lease);
    if (!created.Ok()) {
      log::Debug("leader election: create Lease failed", {{"error", Describe(created)}});
      return false;
    }
    std::lock_guard lock(mu_);
    observedRecord_ = json::Serialize(*json::Find(&created.object, "spec"));
    observedHolder_ = identity_;
    observedTime_ = now;
    return true;
  }
  if (!got.Ok()) {
    log::Debug("leader election: get Lease failed", {{"error", Describe(got)}});
    return false;
  }

  const Value* spec = json::Find(&got.object, "spec");
  const std::string record = spec != nullptr ? json::Serialize(*spec) : "";
  const std::string holder(json::StringOr(spec, "holderIdentity"));
  bool wasHolder;
  {
    std::lock_guard lock(mu_);
    if (record != observedRecord_) {
      observedRecord_ = record;
      observedHolder_ = holder;
      observedTime_ = now;
    }
    const long long observedDuration = IntOr(spec, "leaseDurationSeconds", durationSeconds);
    const bool valid = now < observedTime_ + std::chrono::seconds(observedDuration);
    wasHolder = holder == identity_;
    if (!holder.empty() && !wasHolder && valid) return false;  // someone else holds it
  }

  json::Document lease;
  lease.CopyFrom(got.object, lease.GetAllocator());
  auto& a = lease.GetAllocator();
  const long long transitions = IntOr(spec, "leaseTransitions", 0);
  const std::string acquireTime =
      wasHolder ? std::string(json::StringOr(spec, "acquireTime", ts)) : ts;
  fillSpec(json::EnsureObject(lease, "spec", a), a, acquireTime,
           wasHolder ? transitions : transitions + 1);
  kube::Result updated = api_.Update(path, lease);  // carries the resourceVersion read above
  if (!updated.Ok()) {
    log::Debug("leader election: update Lease failed", {{"error", Describe(updated)}});
    return false;
  }
  std::lock_guard lock(mu_);
  observedRecord_ = json::Serialize(*json::Find(&updated.object, "spec"));
  observedHolder_ = identity_;
  observedTime_ = now;
  return true;
}

bool LeaderElector::Release() {
  const std::string path = kube::LeasePath(options_.namespaceName, options_.name);
  kube::Result got = api_.Get(path);
  if (got.NotFound()) return true;
  if (!got.Ok()) return false;
  const Value* spec = json::Find(&got.object, "spec");
  if (json::StringOr(spec, "holderIdentity") != identity_) return true;
  json::Document lease;
  lease.CopyFrom(got.object, lease.GetAllocator());
  auto& a = lease.GetAllocator();
  Value& s = json::EnsureObject(lease, "spec", a);
  // client-go's release: empty holder, lease of 1 s, times now, transitions unchanged.
  json::SetString(s, "holderIdentity", "", a);
  json::Set(s, "leaseDurationSeconds", Value(1), a);
  const std::string ts = Now();
  json::SetString(s, "acquireTime", ts, a);
  json::SetString(s, "renewTime", ts, a);
  kube::Result updated = api_.Update(path, lease);
  if (!updated.Ok()) {
    log::Warn("leader election: release failed", {{"error", Describe(updated)}});
    return false;
  }
  std::lock_guard lock(mu_);
  observedRecord_ = json::Serialize(*json::Find(&updated.object, "spec"));
  observedHolder_.clear();
  return true;
}

void LeaderElector::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread(&LeaderElector::Run, this);
}

void LeaderElector::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool LeaderElector::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stop_; });
  return !stop_;
}

void LeaderElector::Run() {
  using Steady = std::chrono::steady_clock;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.0, 1.2);  // client-go JitterFactor 1.2
  auto callback = [](const std::function<void()>& f, std::string_view what) {
    if (!f) return;
    try {
      f();
    } catch (const std::exception& e) {
      log::Error("leader election callback failed",
                 {{"callback", std::string(what)}, {"error", e.what()}});
    } catch (...) {
      log::Error("leader election callback failed", {{"callback", std::string(what)}});
    }
  };
  auto attempt = [this](Steady::time_point now) {
    try {
      return TryAcquireOrRenew(now);
    } catch (...) {
      return false;
    }
  };
  bool leading = false;
  Steady::time_point lastRenew{};
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    if (!leading) {
      if (attempt(Steady::now())) {
        leading = true;
        lastRenew = Steady::now();
        {
          std::lock_guard lock(mu_);
          leading_ = true;
        }
        log::Info(
            "leader election: leading",
            {{"identity", identity_}, {"lease", options_.namespaceName + "/" + options_.name}});
        callback(options_.onStartedLeading, "onStartedLeading");
        continue;
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(options_.retryPeriod *
                                                                              (1.0 + jitter(rng)));
      if (!Sleep(wait)) break;
      continue;
    }
    if (!Sleep(options_.retryPeriod)) break;
    const Steady::time_point now = Steady::now();
    bool lost = false;
    if (attempt(now)) {
      lastRenew = now;
    } else {
      std::lock_guard lock(mu_);
      // Another holder took it, or we could not renew within the deadline.
      lost = (!observedHolder_.empty() && observedHolder_ != identity_) ||
             now - lastRenew >= options_.renewDeadline;
    }
    if (lost) {
      leading = false;
      {
        std::lock_guard lock(mu_);
        leading_ = false;
      }
      log::Warn("leader election: lost the lease", {{"identity", identity_}});
      callback(options_.onStoppedLeading, "onStoppedLeading");
    }
  }
  if (leading) {
    try {
      Release();
    } catch (...) {
    }
    {
      std::lock_guard lock(mu_);
      leading_ = false;
    }
    log::Info("leader election: released the lease", {{"identity", identity_}});
    callback(options_.onStoppedLeading, "onStoppedLeading");
  }
}

void LeaderElector::RenderMetrics(std::string& out) const {
  std::string id;
  for (char c : identity_) {
    if (c == '"' || c == '\\') id += '\\';
    id += c;
  }
  out += "# HELP inplace_webhook_leader Whether this process holds the leader Lease.\n";
  out += "# TYPE inplace_webhook_leader gauge\n";
  out += "inplace_webhook_leader{identity=\"" + id + "\"} " + (IsLeader() ? "1" : "0") + "\n";
}

}  // namespace iw::leader
