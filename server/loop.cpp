#include "server/loop.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "hooks/keys.h"
#include "server/log.h"

namespace iw::loop {

namespace {

using Steady = std::chrono::steady_clock;
using json::Value;

constexpr size_t kMaxRememberedEvents = 10000;
constexpr auto kConflictRetry = std::chrono::milliseconds(200);
constexpr auto kMinRequeue = std::chrono::milliseconds(100);

std::string_view Meta(const Value& o, std::string_view k) {
  return json::StringOr(json::Find(&o, "metadata"), k);
}

std::vector<const Value*> Items(const json::Document& list) {
  std::vector<const Value*> out;
  const Value* items = json::Find(&list, "items");
  if (items == nullptr || !items->IsArray()) return out;
  for (const auto& item : items->GetArray()) out.push_back(&item);
  return out;
}

std::string Describe(const kube::Result& r) {
  std::string out = "HTTP " + std::to_string(r.code);
  if (!r.reason.empty()) out += " " + r.reason;
  if (!r.message.empty()) out += ": " + r.message;
  return out;
}

bool Terminal(rollout::Phase p) {
  return p == rollout::Phase::kIdle || p == rollout::Phase::kCompleted ||
         p == rollout::Phase::kAborted;
}

}  // namespace

std::pair<std::string, std::string> SplitKey(std::string_view key) {
  size_t slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

Loop::Loop(kube::Api& api, Options options) : api_(api), options_(std::move(options)) {}

Loop::~Loop() {
  Stop();
}

Clock::time_point Loop::Now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

void Loop::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread(&Loop::Run, this);
}

void Loop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

bool Loop::Running() const {
  std::lock_guard lock(mu_);
  return thread_.joinable() && !stop_;
}

void Loop::Enqueue(std::string_view ns, std::string_view name) {
  {
    std::lock_guard lock(mu_);
    due_[std::string(ns) + "/" + std::string(name)] = Steady::now();
  }
  cv_.notify_all();
}

void Loop::Schedule(const std::string& key, Steady::time_point due) {
  auto it = due_.find(key);
  if (it == due_.end() || due < it->second) due_[key] = due;
}

bool Loop::CreateEvent(rollout::Action& a) {
  const bool dedup = !a.name.empty();
  const std::string key = a.ns + "/" + a.name;
  if (dedup && createdEvents_.contains(key)) return true;
  auto& alloc = a.body.GetAllocator();
  Value& meta = json::EnsureObject(a.body, "metadata", alloc);
  std::string name = a.name;
  if (name.empty()) {
    // client-go names Events <object>.<unix nanos in hex>; a sequence keeps ours unique.
    const auto nanos =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    char hex[24];
    std::snprintf(
        hex, sizeof hex, "%llx",
        static_cast<unsigned long long>(nanos) + static_cast<unsigned long long>(eventSeq_++));
    std::string involved(json::StringOr(json::Find(&a.body, "involvedObject"), "name"));
    name = involved.substr(0, 200) + "." + hex;
  }
  json::SetString(meta, "name", name, alloc);
  if (!options_.instance.empty()) {
    json::SetString(a.body, "reportingInstance", options_.instance, alloc);
  }
  kube::Result r = api_.Create(kube::EventsPath(a.ns), a.body);
  if (r.Ok() || (dedup && r.Conflict())) {
    if (dedup) {
      if (createdEvents_.size() >= kMaxRememberedEvents) createdEvents_.clear();
      createdEvents_.insert(key);
    }
    if (r.Ok() && options_.metrics != nullptr) options_.metrics->Count(a.metric, a.seconds);
    return true;
  }
  if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
  log::Warn("could not create Event", {{"namespace", a.ns},
                                       {"reason", std::string(json::StringOr(&a.body, "reason"))},
                                       {"error", Describe(r)}});
  return false;
}

ReconcileResult Loop::Apply(std::string_view deployment, std::vector<rollout::Action>& actions) {
  ReconcileResult res;
  std::map<std::string, std::string> versions;  // object path → resourceVersion after our write
  for (rollout::Action& a : actions) {
    if (a.kind == rollout::WriteKind::kEvent) {
      CreateEvent(a);
      continue;
    }
    const std::string path = a.Path();
    const std::string object =
        a.kind == rollout::WriteKind::kPodStatusPatch ? kube::PodPath(a.ns, a.name) : path;
    auto v = versions.find(object);
    const std::string rv = v != versions.end() ? v->second : a.resourceVersion;
    if (!rv.empty()) {
      auto& alloc = a.body.GetAllocator();
      json::SetString(json::EnsureObject(a.body, "metadata", alloc), "resourceVersion", rv, alloc);
    }
    kube::Result r = api_.Patch(path, a.PatchType(), json::Serialize(a.body));
    if (!r.Ok()) {
      res.ok = false;
      res.conflict = r.Conflict();
      res.error = path + ": " + Describe(r);
      if (options_.metrics != nullptr) {
        (r.Conflict() ? options_.metrics->conflicts : options_.metrics->errors).fetch_add(1);
      }
      (r.Conflict() ? log::Debug : log::Warn)(
          "in-place write failed; will re-read and retry",
          {{"deployment", std::string(deployment)}, {"pod", a.pod}, {"error", res.error}});
      break;
    }
    versions[object] = std::string(Meta(r.object, "resourceVersion"));
    ++res.writes;
    if (options_.metrics != nullptr) options_.metrics->Count(a.metric, a.seconds);
    log::Info(a.summary, {{"deployment", std::string(deployment)}, {"pod", a.pod}});
  }
  return res;
}

ReconcileResult Loop::Reconcile(std::string_view ns, std::string_view name) {
  const std::string key = std::string(ns) + "/" + std::string(name);
  ReconcileResult res;
  if (options_.metrics != nullptr) options_.metrics->reconciles.fetch_add(1);
  auto fail = [&](const kube::Result& r, std::string_view what) {
    res.ok = false;
    res.error = std::string(what) + ": " + Describe(r);
    if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
    log::Warn("in-place update: read failed", {{"deployment", key}, {"error", res.error}});
    return res;
  };
  kube::Result d = api_.Get(kube::DeploymentPath(ns, name));
  if (d.NotFound() || (d.Ok() && json::Find(json::Path(&d.object, {"metadata", "annotations"}),
                                            keys::kInProgressAnnotation) == nullptr)) {
    if (options_.metrics != nullptr) options_.metrics->SetPodsByState(key, {});
    lastPhase_.erase(key);
    return res;
  }
  if (!d.Ok()) return fail(d, "get Deployment");
  kube::ListOptions list;
  if (const Value* selector = json::Path(&d.object, {"spec", "selector"})) {
    list.labelSelector = rollout::LabelSelector(*selector);
  }
  kube::Result rs = api_.List(kube::ReplicaSetsPath(ns), list);
  if (!rs.Ok()) return fail(rs, "list ReplicaSets");
  kube::Result pods = api_.List(kube::PodsPath(ns), list);
  if (!pods.Ok()) return fail(pods, "list pods");

  rollout::Snapshot snapshot;
  snapshot.deployment = &d.object;
  snapshot.replicaSets = Items(rs.object);
  snapshot.pods = Items(pods.object);
  snapshot.now = Now();
  rollout::Plan plan = rollout::PlanRollout(snapshot);

  const std::string phase(rollout::PhaseName(plan.phase));
  std::string& last = lastPhase_[key];
  if (last != phase + plan.message) {
    last = phase + plan.message;
    (plan.phase == rollout::Phase::kBlocked || plan.phase == rollout::Phase::kAborted ? log::Warn
                                                                                      : log::Info)(
        "in-place update", {{"deployment", key}, {"phase", phase}, {"message", plan.message}});
  }
  if (options_.metrics != nullptr) {
    options_.metrics->SetPodsByState(
        key, Terminal(plan.phase) ? std::map<std::string, int>{} : plan.podsByState);
  }
  res = Apply(key, plan.actions);
  res.phase = plan.phase;
  if (plan.requeueAfter) {
    res.requeueAfter = std::chrono::duration_cast<std::chrono::milliseconds>(*plan.requeueAfter);
  }
  if (Terminal(plan.phase)) lastPhase_.erase(key);
  return res;
}

std::optional<std::vector<std::string>> Loop::Resync() {
  const std::string& ns = options_.namespaceName;
  kube::Result deployments = api_.List(kube::DeploymentsPath(ns), {});
  if (!deployments.Ok()) {
    if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
    log::Warn("in-place loop: cannot list Deployments", {{"error", Describe(deployments)}});
    return std::nullopt;
  }
  std::vector<std::string> inProgress;
  std::map<std::string, const Value*, std::less<>> byUid;
  for (const Value* d : Items(deployments.object)) {
    byUid[std::string(Meta(*d, "uid"))] = d;
    if (json::Find(json::Path(d, {"metadata", "annotations"}), keys::kInProgressAnnotation)) {
      inProgress.push_back(std::string(Meta(*d, "namespace")) + "/" +
                           std::string(Meta(*d, "name")));
    }
  }
  kube::ListOptions optedIn;
  optedIn.labelSelector = std::string(keys::kEnabledLabel) + "=" + std::string(keys::kTrue);

  auto listFailed = [this](std::string_view what, const kube::Result& r) {
    if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
    log::Warn("in-place loop: list failed", {{"what", std::string(what)}, {"error", Describe(r)}});
  };
  kube::Result replicaSets = api_.List(kube::ReplicaSetsPath(ns), optedIn);
  if (!replicaSets.Ok()) listFailed("opted-in ReplicaSets", replicaSets);
  if (replicaSets.Ok()) {
    for (const Value* rs : Items(replicaSets.object)) {
      auto owner = byUid.find(rollout::ControllerUid(*rs));
      if (owner == byUid.end()) continue;
      if (std::optional<rollout::Action> a = rollout::PlanReplicaSetCleanup(*owner->second, *rs)) {
        std::vector<rollout::Action> one;
        one.push_back(std::move(*a));
        Apply(std::string(Meta(*owner->second, "namespace")) + "/" +
                  std::string(Meta(*owner->second, "name")),
              one);
      }
    }
  }
  kube::Result pods = api_.List(kube::PodsPath(ns), optedIn);
  if (!pods.Ok()) listFailed("opted-in pods", pods);
  if (pods.Ok()) {
    for (rollout::Action& a : rollout::PlanNewPodGates(Items(pods.object), Now())) {
      std::vector<rollout::Action> one;
      one.push_back(std::move(a));
      Apply("", one);  // a conflict only delays this pod to the next resync
    }
  }
  return inProgress;
}

std::map<std::string, ReconcileResult> Loop::RunOnce() {
  std::map<std::string, ReconcileResult> out;
  std::optional<std::vector<std::string>> keys = Resync();
  if (!keys) return out;
  for (const std::string& key : *keys) {
    auto [ns, name] = SplitKey(key);
    out[key] = Reconcile(ns, name);
  }
  return out;
}

void Loop::Run() {
  Steady::time_point nextResync = Steady::now();
  std::unique_lock lock(mu_);
  while (!stop_) {
    Steady::time_point wake = nextResync;
    for (const auto& [key, due] : due_) wake = std::min(wake, due);
    if (wake > Steady::now()) {
      cv_.wait_until(lock, wake);
      continue;  // re-evaluate: stop, new work, or time
    }
    const Steady::time_point now = Steady::now();
    if (now >= nextResync) {
      nextResync = now + options_.resyncPeriod;
      lock.unlock();
      std::optional<std::vector<std::string>> keys;
      try {
        keys = Resync();
      } catch (const std::exception& e) {
        log::Error("in-place loop: resync failed", {{"error", e.what()}});
      } catch (...) {
        log::Error("in-place loop: resync failed", {{"error", "unknown exception"}});
      }
      lock.lock();
      if (keys) {
        for (const std::string& key : *keys) Schedule(key, now);
      }
      continue;
    }
    std::vector<std::string> ready;
    for (auto it = due_.begin(); it != due_.end();) {
      if (it->second <= now) {
        ready.push_back(it->first);
        it = due_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (const std::string& key : ready) {
      ReconcileResult r;
      try {
        auto [ns, name] = SplitKey(key);
        r = Reconcile(ns, name);
      } catch (const std::exception& e) {
        r.ok = false;
        r.error = e.what();
        log::Error("in-place loop: reconcile failed", {{"deployment", key}, {"error", e.what()}});
      } catch (...) {
        r.ok = false;
        r.error = "unknown exception";
        log::Error("in-place loop: reconcile failed", {{"deployment", key}});
      }
      std::lock_guard relock(mu_);
      if (r.ok) failures_.erase(key);
      if (r.ok && r.phase == rollout::Phase::kIdle) continue;  // nothing running: drop the key
      std::chrono::milliseconds delay = options_.activePeriod;
      if (!r.ok) {
        int n = ++failures_[key];
        delay = r.conflict && n == 1
                    ? std::chrono::milliseconds(kConflictRetry)
                    : std::min(options_.maxBackoff,
                               std::chrono::milliseconds(500L << std::min(n - 1, 8)));
      } else if (r.requeueAfter) {
        delay = std::clamp(*r.requeueAfter + std::chrono::milliseconds(50),
                           std::chrono::milliseconds(kMinRequeue), options_.activePeriod);
      }
      Schedule(key, Steady::now() + delay);
    }
    lock.lock();
  }
}

}  // namespace iw::loop
