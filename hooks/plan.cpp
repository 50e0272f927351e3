#include "hooks/plan.h"

#include <cstdint>
#include <cstdio>

#include "lib/kube_objects.h"
#include "lib/rfc3339.h"

namespace iw::rollout {

namespace {

// An Event's message is cut to this many bytes.
constexpr size_t kMaxEventMessage = 1024;

std::string Truncate(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  s.resize(cut);
  return s + "...";
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

kube::PatchType Action::PatchType() const {
  return (kind == WriteKind::kPodPatch || kind == WriteKind::kPodStatusPatch ||
          kind == WriteKind::kPodResizePatch || kind == WriteKind::kDeploymentStatusPatch)
             ? kube::PatchType::kStrategicMerge
             : kube::PatchType::kMerge;
}

std::string Action::Path() const {
  switch (kind) {
    case WriteKind::kPodPatch:
      return kube::PodPath(ns, name);
    case WriteKind::kPodStatusPatch:
      return kube::PodStatusPath(ns, name);
    case WriteKind::kPodResizePatch:
      return kube::PodResizePath(ns, name);
    case WriteKind::kReplicaSetPatch:
    case WriteKind::kReplicaSetDelete:
      return kube::ReplicaSetPath(ns, name);
    case WriteKind::kReplicaSetCreate:
      return kube::ReplicaSetsPath(ns);
    case WriteKind::kDeploymentPatch:
      return kube::DeploymentPath(ns, name);
    case WriteKind::kDeploymentStatusPatch:
      return kube::DeploymentStatusPath(ns, name);
    case WriteKind::kStatefulSetPatch:
      return kube::StatefulSetPath(ns, name);
    case WriteKind::kEvent:
      return kube::EventsPath(ns);
  }
  return {};
}

std::string_view PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kIdle:
      return "idle";
    case Phase::kUpdating:
      return "updating";
    case Phase::kFinishing:
      return "finishing";
    case Phase::kWaitingForController:
      return "waiting-for-controller";
    case Phase::kCompleted:
      return "completed";
    case Phase::kAborted:
      return "aborted";
    case Phase::kBlocked:
      return "blocked";
  }
  return "unknown";
}

json::Document MakeEvent(const kube::ObjectView& involved, std::string_view apiVersion,
                         std::string_view kind, std::string_view type, std::string_view reason,
                         std::string_view message, Clock::time_point now, std::string_view name) {
  json::Document e(rapidjson::kObjectType);
  auto& a = e.GetAllocator();
  const std::string ts = rfc3339::Format(now);
  json::SetString(e, "apiVersion", "v1", a);
  json::SetString(e, "kind", "Event", a);
  json::Value& meta = json::EnsureObject(e, "metadata", a);
  if (!name.empty()) json::SetString(meta, "name", name, a);
  json::SetString(meta, "namespace", involved.ns(), a);
  json::Value& obj = json::EnsureObject(e, "involvedObject", a);
  json::SetString(obj, "apiVersion", apiVersion, a);
  json::SetString(obj, "kind", kind, a);
  json::SetString(obj, "namespace", involved.ns(), a);
  json::SetString(obj, "name", involved.name(), a);
  json::SetString(obj, "uid", involved.uid(), a);
  json::SetString(obj, "resourceVersion", involved.resourceVersion(), a);
  json::SetString(e, "reason", reason, a);
  json::SetString(e, "message", Truncate(std::string(message), kMaxEventMessage), a);
  json::SetString(e, "type", type, a);
  json::SetString(e, "firstTimestamp", ts, a);
  json::SetString(e, "lastTimestamp", ts, a);
  e.AddMember("count", 1, a);
  json::SetString(json::EnsureObject(e, "source", a), "component", kComponent, a);
  json::SetString(e, "reportingComponent", kComponent, a);
  json::SetString(e, "reportingInstance", "", a);
  return e;
}

Action EventAction(const kube::ObjectView& involved, std::string_view apiVersion,
                   std::string_view kind, std::string_view type, std::string_view reason,
                   std::string_view message, Clock::time_point now, std::string name,
                   Metric metric) {
  Action act;
  act.kind = WriteKind::kEvent;
  act.ns = std::string(involved.ns());
  act.name = name;
  act.body = MakeEvent(involved, apiVersion, kind, type, reason, message, now, name);
  act.metric = metric;
  act.summary = std::string(reason) + ": " + std::string(message);
  return act;
}

Action WriteAction(WriteKind kind, const kube::ObjectView& object, json::Document body,
                   std::string summary) {
  Action act;
  act.kind = kind;
  act.ns = std::string(object.ns());
  act.name = std::string(object.name());
  act.resourceVersion = std::string(object.resourceVersion());
  act.body = std::move(body);
  act.summary = std::move(summary);
  return act;
}

std::string DedupEventName(std::string_view involvedName, std::string_view key) {
  char hex[17];
  std::snprintf(
      hex, sizeof hex, "%016llx",
      static_cast<unsigned long long>(Fnv1a(std::string(involvedName) + "\n" + std::string(key))));
  std::string prefix(involvedName.substr(0, 253 - 17));
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  return prefix + "." + hex;
}

}  // namespace iw::rollout
