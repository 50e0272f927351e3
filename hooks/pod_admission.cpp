#include "hooks/pod_admission.h"
#include "lib/rfc3339.h"

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"

namespace iw::admission {

namespace {

// The pod keys only the controller writes, and where they live.
struct StateKey {
  std::string_view map;  // "labels" or "annotations"
  std::string_view key;
};
constexpr StateKey kStateKeys[] = {
    {"labels", keys::kStateLabel},
    {"annotations", keys::kStateTimestampAnnotation},
    {"annotations", keys::kUpdateStateAnnotation},
    {"annotations", keys::kHookTimeoutAnnotation},  // the loop's record of a hook that timed out
    {"annotations", keys::kGateSentAnnotation},     // when the drain's gate write was sent
};

std::optional<std::string_view> StateValue(const kube::ObjectView& pod, const StateKey& k) {
  return k.map == "labels" ? pod.label(k.key) : pod.annotation(k.key);
}

// The request's pods as metadata views (the checks here read labels and annotations only).
using Pods = RequestObjects<kube::ObjectView>;

// Appends to `r.patch` the JSON Patch operation that adds the readiness gate
// inplace-webhook.io/ready to spec.readinessGates, unless the pod declares it already (its
// template does) or spec/readinessGates have a shape the API server refuses anyway.
void AddReadinessGate(const json::Value& pod, Response& r) {
  const json::Value* spec = json::Find(&pod, "spec");
  if (spec == nullptr || !spec->IsObject()) return;
  const json::Value* gates = json::Find(spec, "readinessGates");
  const bool none = gates == nullptr || gates->IsNull();
  if (!none && !gates->IsArray()) return;
  if (json::FindNamed(gates, "conditionType", keys::kReadyCondition) != nullptr) return;
  json::Document op(rapidjson::kObjectType);
  auto& a = op.GetAllocator();
  json::Value gate(rapidjson::kObjectType);
  json::SetString(gate, "conditionType", keys::kReadyCondition, a);
  json::SetString(op, "op", "add", a);
  if (none) {
    json::SetString(op, "path", "/spec/readinessGates", a);
    json::Value list(rapidjson::kArrayType);
    list.PushBack(gate, a);
    json::Set(op, "value", list, a);
  } else {
    json::SetString(op, "path", "/spec/readinessGates/-", a);
    json::Set(op, "value", gate, a);
  }
  const std::string text = json::Serialize(op);
  if (r.patch.empty()) {
    r.patch = "[" + text + "]";
  } else {  // a non-empty array: "[...]"
    r.patch.insert(r.patch.size() - 1, "," + text);
  }
}

}  // namespace

Response MutatePod(const Request& req, const Context& ctx) {
  if (!req.subResource.empty() || req.operation != Operation::kCreate) return Allowed();
  StatusOr<Pods> read = ReadObjects<kube::ObjectView>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  const kube::ObjectView& pod = *read->object;
  if (!deployment::IsOptedIn(pod)) return Allowed();
  // Only metadata changes: copy and diff that subtree (an object: IsOptedIn read its labels).
  const json::Value& meta = *json::Find(&pod.json(), "metadata");
  json::Document mutated(req.scratch);
  auto& alloc = mutated.GetAllocator();
  static_cast<json::Value&>(mutated) = json::CopySharingStrings(meta, alloc);  // moves
  // A new pod has no update behind it: a state of ours it was created with (copied from a pod, or
  // set in its template) is dropped, so the loop never acts on a record it did not write.
  const std::string forged = deployment::ForgedStateKeys(pod);
  if (!forged.empty()) {
    if (rapidjson::Value* a = json::FindMutable(&mutated, "annotations");
        a != nullptr && a->IsObject()) {
      a->RemoveMember(rapidjson::StringRef(keys::kUpdateStateAnnotation.data(),
                                           keys::kUpdateStateAnnotation.size()));
      a->RemoveMember(rapidjson::StringRef(keys::kHookTimeoutAnnotation.data(),
                                           keys::kHookTimeoutAnnotation.size()));
    }
  }
  const bool hasState = pod.label(keys::kStateLabel).has_value();
  if (!hasState || !forged.empty()) {
    json::SetString(json::EnsureObject(mutated, "labels", alloc), keys::kStateLabel,
                    keys::kStateNormal, alloc);
  }
  if (!hasState || !forged.empty() || !pod.annotation(keys::kStateTimestampAnnotation)) {
    json::SetString(json::EnsureObject(mutated, "annotations", alloc),
                    keys::kStateTimestampAnnotation, rfc3339::Format(ctx.now), alloc);
  }
  std::vector<std::string> warnings;
  if (!forged.empty()) {
    std::string names =
        forged;  // the keys without their prefix: a warning is 120 characters at most
    for (size_t at; (at = names.find(keys::kPrefix)) != std::string::npos;) {
      names.erase(at, keys::kPrefix.size());
    }
    warnings.push_back("dropped " + std::string(keys::kPrefix) + " " + names +
                       " from the new pod: it starts Normal (the controller's keys)");
  }
  Response r = PatchedAt("/metadata", meta, mutated, std::move(warnings));
  if (ctx.loopAlive) AddReadinessGate(pod.json(), r);
  return r;
}

Response ValidatePod(const Request& req, const Context& ctx) {
  if (!req.subResource.empty()) return Allowed();
  if (req.operation != Operation::kCreate && req.operation != Operation::kUpdate) return Allowed();
  if (req.username == ctx.controllerUser) return Allowed();
  StatusOr<Pods> read = ReadObjects<kube::ObjectView>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  const kube::ObjectView& pod = *read->object;
  if (req.operation == Operation::kCreate) {
    if (const std::string forged = deployment::ForgedStateKeys(pod); !forged.empty()) {
      return Denied("a pod may be created only with " + std::string(keys::kStateLabel) + "=" +
                    std::string(keys::kStateNormal) + " or without it, and without " +
                    std::string(keys::kUpdateStateAnnotation) + " or " +
                    std::string(keys::kHookTimeoutAnnotation) + " (it carries " + forged +
                    "): the state is written by the inplace-webhook controller (" +
                    ctx.controllerUser + ") only");
    }
    return Allowed();
  }
  std::string changed;
  for (const StateKey& k : kStateKeys) {
    if (StateValue(pod, k) == StateValue(*read->old, k)) continue;
    if (!changed.empty()) changed += ", ";
    changed += std::string(k.map == "labels" ? "label " : "annotation ") + std::string(k.key);
  }
  if (changed.empty()) return Allowed();
  return Denied(changed + " may be changed only by the inplace-webhook controller (" +
                ctx.controllerUser + "), not by " +
                (req.username.empty() ? std::string("this user") : req.username));
}

Response HoldPodDeletion(const Request& req, const Context& ctx) {
  if (req.operation != Operation::kDelete || !req.subResource.empty()) return Allowed();
  if (req.oldObject == nullptr || !ctx.askHold) return Allowed();
  StatusOr<kube::Pod> pod = kube::Pod::From(*req.oldObject, "request.oldObject");
  if (!pod.ok()) return Allowed();
  const std::optional<statefulset_hold::PodFacts> facts =
      statefulset_hold::FactsOf(*pod, req.username, ctx.statefulSetControllerUser);
  if (!facts) return Allowed();
  const std::optional<statefulset_hold::Answer> answer = ctx.askHold(*facts);
  if (!answer || !answer->hold) return Allowed();
  return Denied(answer->reason);
}

}  // namespace iw::admission
