#include "server/loop/writer.h"

#include <cstdio>
#include <map>

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

// The gate's change is stamped with the time it is sent: the drain is measured from it.
void StampTransitions(json::Document& body, Clock::time_point now) {
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

WriteResult Writer::Apply(std::string_view workload, std::vector<rollout::Action>& actions,
                          std::vector<Expectation>* expectations, bool cached) {
  // How the logs name the workload: {"deployment", "ns/name"} or {"statefulset", "ns/name"}.
  const bool set = workload.starts_with(kStatefulSetKeyPrefix);
  const std::string who(set ? "statefulset" : "deployment");
  const std::string name(set ? workload.substr(kStatefulSetKeyPrefix.size()) : workload);
  WriteResult res;
  std::map<std::string, std::string> versions;  // object path → resourceVersion after our write
  std::map<std::string, size_t> expected;       // object path → index in `expectations`
  for (rollout::Action& a : actions) {
    if (a.kind == rollout::WriteKind::kEvent) {
      CreateEvent(a);
      continue;
    }
    const std::string path = a.Path();
    if (a.kind == rollout::WriteKind::kReplicaSetCreate ||
        a.kind == rollout::WriteKind::kReplicaSetDelete) {
      // Whole-object writes of the finish; the next pass sees their result in the caches (an
      // AlreadyExists or NotFound is the state they were making).
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
    const std::string object = a.kind == rollout::WriteKind::kPodStatusPatch ||
                                       a.kind == rollout::WriteKind::kPodResizePatch
                                   ? kube::PodPath(a.ns, a.name)
                                   : path;
    auto v = versions.find(object);
    const std::string rv = v != versions.end() ? v->second : a.resourceVersion;
    if (!rv.empty()) {
      auto& alloc = a.body.GetAllocator();
      json::SetString(json::EnsureObject(a.body, "metadata", alloc), "resourceVersion", rv, alloc);
    }
    if (a.stampTransition) StampTransitions(a.body, Clock::now());
    kube::Result r = api_.Patch(path, a.PatchType(), json::Serialize(a.body));
    const CacheKind kind = a.kind == rollout::WriteKind::kDeploymentPatch ||
                                   a.kind == rollout::WriteKind::kDeploymentStatusPatch
                               ? CacheKind::kDeployments
                           : a.kind == rollout::WriteKind::kReplicaSetPatch
                               ? CacheKind::kReplicaSets
                               : CacheKind::kPods;
    const auto deadline =
        Steady::now() + (r.Conflict() ? options_.conflictTimeout : options_.expectationTimeout);
    if (!r.Ok()) {
      res.status = Status::IOError(path + ": " + Describe(r));
      res.conflict = r.Conflict();
      const bool resize = a.kind == rollout::WriteKind::kPodResizePatch;
      if ((a.kind == rollout::WriteKind::kPodPatch && progress::IsRefusal(r.code)) ||
          (resize && progress::IsResizeRefusal(r.code, r.message, a.name))) {
        res.refusedPod = a.pod.empty() ? a.name : a.pod;
        res.refusal = r.message.empty() ? Describe(r) : r.message;
        res.refusedResize = resize;
        res.refusalCode = r.code;
      }
      if (options_.metrics != nullptr) {
        (r.Conflict() ? options_.metrics->conflicts : options_.metrics->errors).fetch_add(1);
      }
      (r.Conflict() ? log::Debug : log::Warn)(
          "in-place write failed; will re-read and retry",
          {{who, name}, {"pod", a.pod}, {"error", res.status.message()}});
      if (expectations != nullptr && r.Conflict() && !rv.empty() && !expected.contains(object)) {
        // The cache was behind: wait until it holds a newer version than the one refused.
        expectations->push_back({kind, a.ns, a.name, rv, "", deadline});
      }
      break;
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
        expectations->push_back({kind, a.ns, a.name, cached ? rv : "", after, deadline});
      }
    }
    if (options_.metrics != nullptr) options_.metrics->Count(a.metric, a.seconds);
    log::Info(a.summary, {{who, name}, {"pod", a.pod}});
  }
  return res;
}

}  // namespace iw::loop
