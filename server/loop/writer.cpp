#include "server/loop/writer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <thread>

#include "hooks/keys.h"
#include "hooks/progress.h"
#include "lib/json.h"
#include "lib/rfc3339.h"
#include "server/process/log.h"

namespace iw::loop {

namespace {

using Steady = std::chrono::steady_clock;
using Clock = std::chrono::system_clock;
using json::Value;

constexpr size_t kMaxRememberedEvents = 10000;

// The gate's change is stamped with the time it is sent, and so is its gate-sent record (to the
// millisecond) where the write sets one: the drain is measured from them.
void StampTransitions(json::Document& body, Clock::time_point now) {
  Value* annotations = json::FindMutable(json::FindMutable(&body, "metadata"), "annotations");
  Value* sent = json::FindMutable(annotations, keys::kGateSentAnnotation);
  if (sent != nullptr && sent->IsString()) {
    json::SetString(*annotations, keys::kGateSentAnnotation, rfc3339::FormatMillis(now),
                    body.GetAllocator());
  }
  Value* conditions = json::FindMutable(json::FindMutable(&body, "status"), "conditions");
  if (conditions == nullptr || !conditions->IsArray()) return;
  const std::string ts = rfc3339::Format(now);
  for (Value& c : conditions->GetArray()) {
    if (c.IsObject()) json::SetString(c, "lastTransitionTime", ts, body.GetAllocator());
  }
}

}  // namespace

bool Writer::CreateEvent(rollout::Action& a) {
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

namespace {

bool IsPodWrite(rollout::WriteKind k) {
  return k == rollout::WriteKind::kPodPatch || k == rollout::WriteKind::kPodStatusPatch ||
         k == rollout::WriteKind::kPodResizePatch;
}

// The object a patch changes: a pod's subresource writes change the pod.
std::string ObjectOf(const rollout::Action& a) {
  return IsPodWrite(a.kind) ? kube::PodPath(a.ns, a.name) : a.Path();
}

// The end of the run of pod writes from `begin` whose pods are all different: these may be sent
// at once, since none's precondition depends on another's answer.
size_t PodRunEnd(const std::vector<rollout::Action>& actions, size_t begin) {
  std::set<std::string> pods;
  size_t end = begin;
  while (end < actions.size() && IsPodWrite(actions[end].kind) &&
         pods.insert(ObjectOf(actions[end])).second) {
    ++end;
  }
  return end;
}

}  // namespace

kube::Result Writer::Send(rollout::Action& a) {
  // Apply sends the whole-object writes and the Events itself.
  if (a.kind == rollout::WriteKind::kEvent || a.kind == rollout::WriteKind::kReplicaSetCreate ||
      a.kind == rollout::WriteKind::kReplicaSetDelete)
    return kube::Result{0, "ClientError", "not a patch", {}};
  if (a.stampTransition) StampTransitions(a.body, Clock::now());
  return api_.Patch(a.Path(), a.PatchType(), json::Serialize(a.body));
}

void Writer::SendAll(std::vector<rollout::Action>& actions, size_t begin, size_t end,
                     std::vector<kube::Result>& results) {
  const size_t n = end - begin;
  results.clear();
  results.resize(n);
  const size_t senders = std::min(n, std::max<size_t>(options_.concurrentWrites, 1));
  if (senders <= 1) {
    for (size_t i = 0; i < n; ++i) results[i] = Send(actions[begin + i]);
    return;
  }
  std::atomic<size_t> next{0};
  auto send = [&] {  // a sending thread's edge: no exception leaves it
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        results[i] = Send(actions[begin + i]);
      } catch (const std::exception& e) {
        results[i] = kube::Result{0, "ClientError", e.what(), {}};
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(senders - 1);
    for (size_t t = 1; t < senders; ++t) helpers.emplace_back(send);
    send();
  }  // (the helpers are joined here)
}

WriteResult Writer::Apply(std::string_view workload, std::vector<rollout::Action>& actions,
                          std::vector<Expectation>* expectations, bool cached) {
  // How the logs name the workload: {"deployment", "ns/name"} or {"statefulset", "ns/name"}.
  const bool set = workload.starts_with(kStatefulSetKeyPrefix);
  const std::string who(set ? "statefulset" : "deployment");
  const std::string name(set ? workload.substr(kStatefulSetKeyPrefix.size()) : workload);
  WriteResult res;
  std::map<std::string, std::string> versions;  // object path → resourceVersion after our write
  std::map<std::string, size_t> expected;       // object path → index in `expectations`
  std::vector<kube::Result> results;
  std::vector<std::string> planned;  // each sent patch's resourceVersion precondition
  for (size_t i = 0; i < actions.size() && res.status.ok();) {
    rollout::Action& a = actions[i];
    if (a.kind == rollout::WriteKind::kEvent) {
      CreateEvent(a);
      ++i;
      continue;
    }
    if (a.kind == rollout::WriteKind::kReplicaSetCreate ||
        a.kind == rollout::WriteKind::kReplicaSetDelete) {
      // Whole-object writes of the finish; the next pass sees their result in the caches (an
      // AlreadyExists or NotFound is the state they were making).
      ++i;
      const std::string path = a.Path();
      const bool create = a.kind == rollout::WriteKind::kReplicaSetCreate;
      kube::Result r = create ? api_.Create(kube::ReplicaSetsPath(a.ns), a.body)
                              : api_.Delete(kube::ReplicaSetPath(a.ns, a.name));
      if (!r.Ok() && !(create ? r.Conflict() : r.NotFound())) {
        res.status = Status::IOError(path + ": " + Describe(r));
        if (options_.metrics != nullptr) options_.metrics->errors.fetch_add(1);
        log::Warn("in-place write failed; will re-read and retry",
                  {{who, name}, {"error", res.status.message()}});
        break;
      }
      ++res.writes;
      if (expectations != nullptr && r.Ok() && create) {  // (a deleted one may linger: harmless)
        expectations->push_back({CacheKind::kReplicaSets, a.ns, a.name, "",
                                 std::string(kube::MetaOf(r.object, "resourceVersion")),
                                 Steady::now() + options_.expectationTimeout});
      }
      log::Info(a.summary, {{who, name}});
      continue;
    }
    // Patches: a run of pod writes to different pods goes out at once (a step's pods move
    // together); any other patch alone. Each carries the version it was planned from, or the one
    // this pass's earlier write of the same object returned.
    const size_t begin = i;
    const size_t end = IsPodWrite(a.kind) ? PodRunEnd(actions, begin) : begin + 1;
    planned.assign(end - begin, "");
    for (size_t k = begin; k < end; ++k) {
      rollout::Action& p = actions[k];
      auto v = versions.find(ObjectOf(p));
      std::string& rv = planned[k - begin];
      rv = v != versions.end() ? v->second : p.resourceVersion;
      if (!rv.empty()) {
        auto& alloc = p.body.GetAllocator();
        json::SetString(json::EnsureObject(p.body, "metadata", alloc), "resourceVersion", rv,
                        alloc);
      }
    }
    SendAll(actions, begin, end, results);
    // The answers in the plan's order: every write applied is counted and expected in the caches
    // (those after a failed one in the same run too); the first failure ends the pass.
    for (size_t k = begin; k < end; ++k) {
      rollout::Action& p = actions[k];
      kube::Result& r = results[k - begin];
      const std::string& rv = planned[k - begin];
      const std::string object = ObjectOf(p);
      const CacheKind kind = p.kind == rollout::WriteKind::kDeploymentPatch ||
                                     p.kind == rollout::WriteKind::kDeploymentStatusPatch
                                 ? CacheKind::kDeployments
                             : p.kind == rollout::WriteKind::kReplicaSetPatch
                                 ? CacheKind::kReplicaSets
                                 : CacheKind::kPods;
      const auto deadline =
          Steady::now() + (r.Conflict() ? options_.conflictTimeout : options_.expectationTimeout);
      if (!r.Ok()) {
        const Status failed = Status::IOError(p.Path() + ": " + Describe(r));
        if (res.status.ok()) {
          res.status = failed;
          res.conflict = r.Conflict();
          const bool resize = p.kind == rollout::WriteKind::kPodResizePatch;
          if ((p.kind == rollout::WriteKind::kPodPatch && progress::IsRefusal(r.code)) ||
              (resize && progress::IsResizeRefusal(r.code, r.message, p.name))) {
            res.refusedPod = p.pod.empty() ? p.name : p.pod;
            res.refusal = r.message.empty() ? Describe(r) : r.message;
            res.refusedResize = resize;
            res.refusalCode = r.code;
          }
        }
        if (options_.metrics != nullptr) {
          (r.Conflict() ? options_.metrics->conflicts : options_.metrics->errors).fetch_add(1);
        }
        (r.Conflict() ? log::Debug : log::Warn)(
            "in-place write failed; will re-read and retry",
            {{who, name}, {"pod", p.pod}, {"error", failed.message()}});
        if (expectations != nullptr && r.Conflict() && !rv.empty() && !expected.contains(object)) {
          // The cache was behind: wait until it holds a newer version than the one refused.
          expectations->push_back({kind, p.ns, p.name, rv, "", deadline});
        }
        continue;
      }
      const std::string after(kube::MetaOf(r.object, "resourceVersion"));
      versions[object] = after;
      ++res.writes;
      if (expectations != nullptr && !after.empty() && after != rv) {
        auto e = expected.find(object);
        if (e != expected.end()) {
          (*expectations)[e->second].reach = after;
        } else {
          expected[object] = expectations->size();
          expectations->push_back({kind, p.ns, p.name, cached ? rv : "", after, deadline});
        }
      }
      if (options_.metrics != nullptr) options_.metrics->Count(p.metric, p.seconds);
      log::Info(p.summary, {{who, name}, {"pod", p.pod}});
    }
    i = end;
  }
  return res;
}

}  // namespace iw::loop
