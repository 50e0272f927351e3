#include "server/loop/leader_election.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <exception>
#include <random>

#include "server/process/log.h"

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

}  // namespace

Status CheckTiming(const Timing& t) {
  if (t.retryPeriod.count() <= 0 || t.writeMargin.count() < 0) {
    return Status::InvalidArgument(
        "the retry period must be positive and the write margin not negative");
  }
  if (t.retryPeriod >= t.renewDeadline) {
    return Status::InvalidArgument("the retry period (" + std::to_string(t.retryPeriod.count()) +
                                   " ms) must be shorter than the renew deadline (" +
                                   std::to_string(t.renewDeadline.count()) + " ms)");
  }
  if (t.renewDeadline >= t.leaseDuration - t.writeMargin) {
    return Status::InvalidArgument(
        "the renew deadline (" + std::to_string(t.renewDeadline.count()) +
        " ms) must be shorter than the lease duration (" + std::to_string(t.leaseDuration.count()) +
        " ms) less the write margin (" + std::to_string(t.writeMargin.count()) + " ms)");
  }
  return Status::Ok();
}

std::optional<Steady::time_point> WriteDeadline(std::optional<Steady::time_point> lastRenew,
                                                Steady::time_point now, const Timing& t,
                                                std::chrono::milliseconds callTimeout) {
  if (!lastRenew || now >= *lastRenew + t.renewDeadline) return std::nullopt;
  return std::min(now + callTimeout, *lastRenew + t.leaseDuration - t.writeMargin);
}

Steady::time_point RenewAttemptDeadline(bool leading, Steady::time_point lastRenew,
                                        Steady::time_point now, const Timing& t) {
  return (leading ? lastRenew : now) + t.renewDeadline;
}

void Fence::Open(Steady::time_point renewStarted) {
  std::lock_guard lock(mu_);
  if (!lastRenew_ || renewStarted > *lastRenew_) lastRenew_ = renewStarted;
}

void Fence::Close() {
  std::lock_guard lock(mu_);
  lastRenew_.reset();
}

std::optional<Steady::time_point> Fence::Deadline(Steady::time_point now,
                                                  std::chrono::milliseconds callTimeout) const {
  std::lock_guard lock(mu_);
  return WriteDeadline(lastRenew_, now, timing_, callTimeout);
}

template <typename F>
kube::Result FencedApi::Write(std::string_view verb, std::string_view path, F&& call) {
  const Steady::time_point now = Steady::now();
  std::optional<Steady::time_point> deadline =
      fence_ != nullptr ? fence_->Deadline(now, callTimeout_) : now + callTimeout_;
  if (!deadline) {
    ++refused_;
    kube::Result r;
    r.reason = "NotLeading";
    r.message = std::string(verb) + " " + std::string(path) +
                ": not sent, this replica cannot be sure it still holds the leader Lease";
    return r;
  }
  kube::DeadlineScope scope(*deadline);
  return call();
}

kube::Result FencedApi::Create(std::string_view path, const json::Value& object) {
  return Write("create", path, [&] { return api_.Create(path, object); });
}
kube::Result FencedApi::Update(std::string_view path, const json::Value& object) {
  return Write("update", path, [&] { return api_.Update(path, object); });
}
kube::Result FencedApi::Patch(std::string_view path, kube::PatchType type, std::string_view body) {
  return Write("patch", path, [&] { return api_.Patch(path, type, body); });
}
kube::Result FencedApi::Delete(std::string_view path) {
  return Write("delete", path, [&] { return api_.Delete(path); });
}

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
      identity_(options_.identity.empty() ? DefaultIdentity() : options_.identity),
      fence_(options_.timing) {}

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
         now < observedTime_ + options_.timing.renewDeadline;
}

bool LeaderElector::TryAcquireOrRenew(std::chrono::steady_clock::time_point now) {
  const std::string path = kube::LeasePath(options_.namespaceName, options_.name);
  const std::string ts = Now();
  const long long durationSeconds = std::max<long long>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.timing.leaseDuration).count());
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
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.0, 1.2);  // client-go JitterFactor 1.2
  const Timing& t = options_.timing;
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
  // One attempt timed from before its Get, cut at its deadline (the renew deadline of the term).
  bool leading = false;
  Steady::time_point lastRenew{};
  auto attempt = [&](Steady::time_point now) {
    kube::DeadlineScope scope(RenewAttemptDeadline(leading, lastRenew, now, t));
    try {
      return TryAcquireOrRenew(now);
    } catch (...) {
      return false;
    }
  };
  // The loop stops first (its writes still bounded by the fence), then the fence closes, and only
  // then is the Lease released: a successor never runs beside a loop still writing.
  auto stepDown = [&] {
    callback(options_.onStoppedLeading, "onStoppedLeading");
    fence_.Close();
    bool released = false;
    {
      kube::DeadlineScope scope(Steady::now() + t.renewDeadline);
      try {
        released = Release();
      } catch (...) {
      }
    }
    {
      std::lock_guard lock(mu_);
      leading_ = false;
    }
    log::Info(released ? "leader election: loop stopped, released the lease"
                       : "leader election: loop stopped, could not release the lease",
              {{"identity", identity_}});
  };
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    if (!leading) {
      if (!MayLead()) {  // a replica that cannot act does not campaign (DESIGN.md §9.8)
        if (!Sleep(t.retryPeriod)) break;
        continue;
      }
      const Steady::time_point now = Steady::now();
      if (attempt(now)) {
        leading = true;
        lastRenew = now;
        fence_.Open(now);
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
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(t.retryPeriod *
                                                                              (1.0 + jitter(rng)));
      if (!Sleep(wait)) break;
      continue;
    }
    if (!Sleep(t.retryPeriod)) break;
    if (!MayLead()) {
      log::Warn("leader election: this replica cannot act, stepping down",
                {{"identity", identity_}});
      stepDown();
      leading = false;
      continue;
    }
    const Steady::time_point now = Steady::now();
    bool lost = false;
    if (attempt(now)) {
      lastRenew = now;
      fence_.Open(now);
    } else {
      std::lock_guard lock(mu_);
      // Another holder took it, or the renew deadline passed (the fence closed by itself then).
      lost = (!observedHolder_.empty() && observedHolder_ != identity_) ||
             Steady::now() >= lastRenew + t.renewDeadline;
    }
    if (lost) {
      fence_.Close();
      leading = false;
      {
        std::lock_guard lock(mu_);
        leading_ = false;
      }
      log::Warn("leader election: lost the lease, stopping the loop", {{"identity", identity_}});
      callback(options_.onStoppedLeading, "onStoppedLeading");
    }
  }
  if (leading) stepDown();
}

bool LeaderElector::MayLead() const {
  if (!options_.mayLead) return true;
  try {
    return options_.mayLead();
  } catch (...) {
    return false;
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
