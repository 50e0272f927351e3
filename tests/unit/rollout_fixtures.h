// Builders for the Deployments, ReplicaSets and pods of the loop's unit tests: small JSON texts
// with the fields the loop reads, and setters for the fields a test varies.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hooks/admission.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "lib/json.h"
#include "lib/rfc3339.h"
#include "tests/unit/test_json.h"

namespace iw::fixtures {

using Clock = std::chrono::system_clock;
using Images = std::vector<std::pair<std::string, std::string>>;
using Strings = std::map<std::string, std::string>;

// A fixed "now" for pure tests: 2026-03-01T12:00:00Z.
inline Clock::time_point T0() {
  return Clock::from_time_t(1772366400);
}
inline std::string Ts(Clock::time_point t) {
  return rfc3339::Format(t);
}

inline json::Document Parse(std::string_view text) {
  json::Document d;
  if (Status err = json::ParseUntrusted(text, d); !err.ok()) {
    throw std::runtime_error("bad fixture JSON: " + err.message() + ": " + std::string(text));
  }
  return d;
}

inline std::string Quote(std::string_view s) {
  json::Value v(json::Ref(s));
  return json::Serialize(v);
}

inline std::string ObjectOf(const Strings& m) {
  std::string out = "{";
  for (const auto& [k, v] : m) {
    if (out.size() > 1) out += ",";
    out += Quote(k) + ":" + Quote(v);
  }
  return out + "}";
}

// A pod template. `gate` declares the readiness gate inplace-webhook.io/ready.
inline std::string Template(const Strings& labels, const Images& images,
                            const Strings& annotations = {}, bool gate = false) {
  std::string containers;
  for (const auto& [name, image] : images) {
    if (!containers.empty()) containers += ",";
    containers += R"({"name":)" + Quote(name) + R"(,"image":)" + Quote(image) + "}";
  }
  std::string t = R"({"metadata":{"creationTimestamp":null,"labels":)" + ObjectOf(labels);
  if (!annotations.empty()) t += R"(,"annotations":)" + ObjectOf(annotations);
  t += R"(},"spec":{"containers":[)" + containers + "]";
  if (gate) t += R"(,"readinessGates":[{"conditionType":"inplace-webhook.io/ready"}])";
  return t + "}}";
}

inline std::string Hash(const std::string& templateJson) {
  return TemplateHash(test::AsTemplate(Parse(templateJson)));
}

struct DeploymentSpec {
  std::string name = "web";
  std::string ns = "default";
  std::string uid = "uid-web";
  int replicas = 3;
  std::string strategy = R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}})";
  std::string templateJson;
  bool paused = true;
  std::optional<InProgress> inProgress;
  std::string lifecycle;  // annotation text, "" = absent
  std::string policy;
  std::string abort;
  bool undo = false;  // the undo command annotation
  long long generation = 2;
  std::string status;  // "" = controller caught up: observedGeneration = generation, all updated
};

inline std::string DeploymentJson(const DeploymentSpec& s) {
  Strings annotations;
  if (s.inProgress)
    annotations[std::string(keys::kInProgressAnnotation)] = SerializeInProgress(*s.inProgress);
  if (!s.lifecycle.empty()) annotations[std::string(keys::kLifecycleAnnotation)] = s.lifecycle;
  if (!s.policy.empty()) annotations[std::string(keys::kPolicyAnnotation)] = s.policy;
  if (!s.abort.empty()) annotations[std::string(keys::kAbortAnnotation)] = s.abort;
  if (s.undo) annotations[std::string(keys::kUndoAnnotation)] = "true";
  std::string status = s.status.empty()
                           ? R"({"observedGeneration":)" + std::to_string(s.generation) +
                                 R"(,"replicas":)" + std::to_string(s.replicas) +
                                 R"(,"updatedReplicas":)" + std::to_string(s.replicas) + "}"
                           : s.status;
  return R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":)" + Quote(s.name) +
         R"(,"namespace":)" + Quote(s.ns) + R"(,"uid":)" + Quote(s.uid) +
         R"(,"resourceVersion":"10","generation":)" + std::to_string(s.generation) +
         R"(,"labels":{"inplace-webhook.io/enabled":"true"},"annotations":)" +
         ObjectOf(annotations) + R"(},"spec":{"replicas":)" + std::to_string(s.replicas) +
         R"(,"paused":)" + (s.paused ? "true" : "false") +
         R"(,"selector":{"matchLabels":{"app":"web"}},"strategy":)" + s.strategy +
         R"(,"template":)" + s.templateJson + R"(},"status":)" + status + "}";
}

// A ReplicaSet of Deployment `owner` with `templateJson` plus pod-template-hash `hash`.
inline std::string ReplicaSetJson(const std::string& name, const std::string& uid,
                                  const std::string& ownerUid, int replicas,
                                  const std::string& templateJson, const std::string& hash,
                                  const Strings& annotations = {},
                                  const std::string& created = "2026-01-01T00:00:00Z") {
  json::Document t = Parse(templateJson);
  auto& a = t.GetAllocator();
  json::SetString(json::EnsureObject(json::EnsureObject(t, "metadata", a), "labels", a),
                  keys::kPodTemplateHashLabel, hash, a);
  return R"({"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":)" + Quote(name) +
         R"(,"namespace":"default","uid":)" + Quote(uid) +
         R"(,"resourceVersion":"20","creationTimestamp":)" + Quote(created) +
         R"(,"labels":{"app":"web","inplace-webhook.io/enabled":"true","pod-template-hash":)" +
         Quote(hash) + R"(},"annotations":)" + ObjectOf(annotations) +
         R"(,"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":)" +
         Quote(ownerUid) + R"(,"controller":true}]},"spec":{"replicas":)" +
         std::to_string(replicas) +
         R"(,"selector":{"matchLabels":{"app":"web","pod-template-hash":)" + Quote(hash) +
         R"(}},"template":)" + json::Serialize(t) + "}}";
}

// A running, Ready pod of ReplicaSet `rsUid` created from `templateJson` (labels, images, gate),
// opted in as every pod of an opted-in template is (the label whatever the fixture's template
// says). Container statuses: imageID "<image>@sha256:old-<name>", containerID
// "containerd://<pod>-<name>".
inline json::Document Pod(const std::string& name, const std::string& rsUid,
                          const std::string& templateJson, const std::string& hash = "h1") {
  json::Document t = Parse(templateJson);
  json::Document p(rapidjson::kObjectType);
  auto& a = p.GetAllocator();
  json::Value meta(rapidjson::kObjectType);
  meta.CopyFrom(t["metadata"], a);
  json::Remove(meta, "creationTimestamp");
  json::SetString(meta, "name", name, a);
  json::SetString(meta, "namespace", "default", a);
  json::SetString(meta, "uid", "uid-" + name, a);
  json::SetString(meta, "resourceVersion", "30", a);
  json::SetString(json::EnsureObject(meta, "labels", a), keys::kPodTemplateHashLabel, hash, a);
  json::SetString(json::EnsureObject(meta, "labels", a), keys::kEnabledLabel, keys::kTrue, a);
  json::Document refs = Parse(R"([{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":)" +
                              Quote(rsUid) + R"(,"controller":true}])");
  json::Set(meta, "ownerReferences", refs, a);
  p.AddMember("metadata", meta, a);
  json::Value spec(t["spec"], a);
  p.AddMember("spec", spec, a);
  std::string statuses;
  for (const auto& c : t["spec"]["containers"].GetArray()) {
    std::string cn(json::StringOr(&c, "name")), image(json::StringOr(&c, "image"));
    if (!statuses.empty()) statuses += ",";
    statuses += R"({"name":)" + Quote(cn) + R"(,"image":)" + Quote(image) + R"(,"imageID":)" +
                Quote(image + "@sha256:old-" + cn) + R"(,"containerID":)" +
                Quote("containerd://" + name + "-" + cn) + R"(,"restartCount":0,"ready":true})";
  }
  const bool gate = json::Path(&t, {"spec", "readinessGates"}) != nullptr;
  std::string conditions =
      R"([{"type":"ContainersReady","status":"True"},{"type":"Ready","status":"True"})";
  if (gate) {
    conditions +=
        R"(,{"type":"inplace-webhook.io/ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"})";
  }
  conditions += "]";
  json::Document status = Parse(R"({"phase":"Running","conditions":)" + conditions +
                                R"(,"containerStatuses":[)" + statuses + "]}");
  p.AddMember("status", json::Value(status, a), a);
  return p;
}

inline void SetLabel(json::Document& o, std::string_view k, std::optional<std::string> v) {
  auto& a = o.GetAllocator();
  json::Value& labels = json::EnsureObject(json::EnsureObject(o, "metadata", a), "labels", a);
  if (v) {
    json::SetString(labels, k, *v, a);
  } else {
    json::Remove(labels, k);
  }
}

inline void SetAnnotation(json::Document& o, std::string_view k, std::optional<std::string> v) {
  auto& a = o.GetAllocator();
  json::Value& ann = json::EnsureObject(json::EnsureObject(o, "metadata", a), "annotations", a);
  if (v) {
    json::SetString(ann, k, *v, a);
  } else {
    json::Remove(ann, k);
  }
}

inline std::optional<std::string> Label(const json::Value& o, std::string_view k) {
  const json::Value* v = json::Find(json::Path(&o, {"metadata", "labels"}), k);
  if (v == nullptr || v->IsNull()) return std::nullopt;
  return std::string(json::View(*v));
}

inline std::optional<std::string> Annotation(const json::Value& o, std::string_view k) {
  const json::Value* v = json::Find(json::Path(&o, {"metadata", "annotations"}), k);
  if (v == nullptr || v->IsNull()) return std::nullopt;
  return std::string(json::View(*v));
}

// Sets (or adds) a condition with its lastTransitionTime.
inline void SetCondition(json::Document& pod, std::string_view type, std::string_view status,
                         std::string_view transition = "2026-01-01T00:00:00Z") {
  auto& a = pod.GetAllocator();
  json::Value& st = json::EnsureObject(pod, "status", a);
  if (!json::FindMutable(&st, "conditions"))
    json::Set(st, "conditions", json::Value(rapidjson::kArrayType), a);
  json::Value& cs = *json::FindMutable(&st, "conditions");
  for (auto& c : cs.GetArray()) {
    if (json::StringOr(&c, "type") == type) {
      json::SetString(c, "status", status, a);
      json::SetString(c, "lastTransitionTime", transition, a);
      return;
    }
  }
  json::Value c(rapidjson::kObjectType);
  c.AddMember("type", json::Value(std::string(type).c_str(), a), a);
  c.AddMember("status", json::Value(std::string(status).c_str(), a), a);
  c.AddMember("lastTransitionTime", json::Value(std::string(transition).c_str(), a), a);
  cs.PushBack(c, a);
}

inline void RemoveCondition(json::Document& pod, std::string_view type) {
  json::Value* cs = json::FindMutable(json::FindMutable(&pod, "status"), "conditions");
  if (cs == nullptr) return;
  for (auto it = cs->Begin(); it != cs->End(); ++it) {
    if (json::StringOr(&*it, "type") == type) {
      cs->Erase(it);
      return;
    }
  }
}

// Container status fields of container `name`.
inline void SetContainerStatus(json::Document& pod, std::string_view name, std::string_view image,
                               std::string_view imageID, std::string_view containerID) {
  auto& a = pod.GetAllocator();
  for (auto& c : pod["status"]["containerStatuses"].GetArray()) {
    if (json::StringOr(&c, "name") != name) continue;
    json::SetString(c, "image", image, a);
    json::SetString(c, "imageID", imageID, a);
    json::SetString(c, "containerID", containerID, a);
  }
}

inline void SetSpecImage(json::Document& pod, std::string_view name, std::string_view image) {
  auto& a = pod.GetAllocator();
  for (auto& c : pod["spec"]["containers"].GetArray()) {
    if (json::StringOr(&c, "name") == name) json::SetString(c, "image", image, a);
  }
}

inline std::string_view StatusImageID(const json::Value& pod, std::string_view name) {
  for (const auto& c : pod["status"]["containerStatuses"].GetArray()) {
    if (json::StringOr(&c, "name") == name) return json::StringOr(&c, "imageID");
  }
  return {};
}

}  // namespace iw::fixtures
