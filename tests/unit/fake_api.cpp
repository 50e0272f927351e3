#include "tests/unit/fake_api.h"
#include <charconv>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "lib/image_ref.h"
#include "lib/json_patch.h"

namespace iw::fake {

namespace {

using json::Allocator;
using json::Value;

struct ParsedPath {
  std::string prefix;  // "/api/v1" or "/apis/<group>/<version>"
  std::string ns;
  std::string resource;
  std::string name;
  std::string sub;
  bool ok = false;
};

ParsedPath Parse(std::string_view path) {
  std::vector<std::string> t;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    t.emplace_back(path.substr(i, j - i));
    i = j;
  }
  ParsedPath p;
  size_t k = 0;
  if (t.size() >= 2 && t[0] == "api") {
    p.prefix = "/api/" + t[1];
    k = 2;
  } else if (t.size() >= 3 && t[0] == "apis") {
    p.prefix = "/apis/" + t[1] + "/" + t[2];
    k = 3;
  } else {
    return p;
  }
  if (k < t.size() && t[k] == "namespaces") {
    if (k + 2 >= t.size()) return p;  // a Namespace object: not supported
    p.ns = t[k + 1];
    k += 2;
  }
  if (k >= t.size()) return p;
  p.resource = t[k];
  if (k + 1 < t.size()) p.name = t[k + 1];
  if (k + 2 < t.size()) p.sub = t[k + 2];
  p.ok = k + 3 >= t.size();
  return p;
}

std::string ObjectPath(const ParsedPath& p, std::string_view name) {
  std::string out = p.prefix;
  if (!p.ns.empty()) out += "/namespaces/" + p.ns;
  out += "/" + p.resource + "/" + std::string(name);
  return out;
}

std::string_view MergeKeyFor(std::string_view field) {
  if (field == "containers" || field == "initContainers" || field == "ephemeralContainers" ||
      field == "volumes" || field == "env") {
    return "name";
  }
  if (field == "conditions") return "type";
  if (field == "readinessGates") return "conditionType";
  return {};
}

void StrategicMerge(Value& target, const Value& patch, Allocator& a);

void MergeList(Value& target, const Value& patch, std::string_view mergeKey, Allocator& a) {
  for (const auto& element : patch.GetArray()) {
    std::string_view key = json::StringOr(&element, mergeKey);
    Value* found = nullptr;
    for (auto& existing : target.GetArray()) {
      if (json::StringOr(&existing, mergeKey) == key) found = &existing;
    }
    if (found != nullptr && element.IsObject()) {
      StrategicMerge(*found, element, a);
    } else {
      target.PushBack(Value(element, a), a);
    }
  }
}

void StrategicMerge(Value& target, const Value& patch, Allocator& a) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, a);
    return;
  }
  if (!target.IsObject()) target.SetObject();
  for (const auto& m : patch.GetObject()) {
    std::string_view key = json::View(m.name);
    if (m.value.IsNull()) {
      json::Remove(target, key);
      continue;
    }
    Value* existing = json::FindMutable(&target, key);
    if (existing != nullptr && m.value.IsObject() && existing->IsObject()) {
      StrategicMerge(*existing, m.value, a);
    } else if (existing != nullptr && m.value.IsArray() && existing->IsArray() &&
               !MergeKeyFor(key).empty()) {
      MergeList(*existing, m.value, MergeKeyFor(key), a);
    } else {
      json::Set(target, key, m.value, a);
    }
  }
}

void Merge(Value& target, const Value& patch, Allocator& a) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, a);
    return;
  }
  if (!target.IsObject()) target.SetObject();
  for (const auto& m : patch.GetObject()) {
    std::string_view key = json::View(m.name);
    if (m.value.IsNull()) {
      json::Remove(target, key);
    } else if (Value* existing = json::FindMutable(&target, key);
               existing != nullptr && m.value.IsObject()) {
      Merge(*existing, m.value, a);
    } else {
      json::Set(target, key, m.value, a);
    }
  }
}

std::vector<std::string> SplitTerms(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(' ');
  size_t e = s.find_last_not_of(' ');
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> SetValues(std::string_view s) {
  std::vector<std::string> out;
  size_t open = s.find('('), close = s.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos) return out;
  for (const auto& v : SplitTerms(s.substr(open + 1, close - open - 1))) out.push_back(Trim(v));
  return out;
}

std::string Timestamp(long long n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "2026-01-01T%02lld:%02lld:%02lldZ", (n / 3600) % 24, (n / 60) % 60,
                n % 60);
  return buf;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t Fnv(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string_view Meta(const Value& o, std::string_view k) {
  return json::StringOr(json::Find(&o, "metadata"), k);
}

bool SameJson(const Value* a, const Value* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return *a == *b;
}

}  // namespace

void MergePatch(json::Value& target, const json::Value& patch, json::Allocator& alloc) {
  Merge(target, patch, alloc);
}

void StrategicMergePatch(json::Value& target, const json::Value& patch, json::Allocator& alloc) {
  StrategicMerge(target, patch, alloc);
}

bool MatchesSelector(const json::Value* labels, std::string_view selector) {
  for (const std::string& raw : SplitTerms(selector)) {
    const std::string term = Trim(raw);
    if (term.empty()) continue;
    auto label = [labels](const std::string& k) -> std::optional<std::string> {
      const Value* v = json::Find(labels, k);
      if (v == nullptr || !v->IsString()) return std::nullopt;
      return std::string(json::View(*v));
    };
    size_t sp;
    if ((sp = term.find(" notin ")) != std::string::npos) {
      auto v = label(Trim(term.substr(0, sp)));
      auto vals = SetValues(term);
      if (v && std::find(vals.begin(), vals.end(), *v) != vals.end()) return false;
    } else if ((sp = term.find(" in ")) != std::string::npos) {
      auto v = label(Trim(term.substr(0, sp)));
      auto vals = SetValues(term);
      if (!v || std::find(vals.begin(), vals.end(), *v) == vals.end()) return false;
    } else if ((sp = term.find("!=")) != std::string::npos) {
      auto v = label(Trim(term.substr(0, sp)));
      if (v && *v == Trim(term.substr(sp + 2))) return false;
    } else if ((sp = term.find("==")) != std::string::npos) {
      if (label(Trim(term.substr(0, sp))) != Trim(term.substr(sp + 2))) return false;
    } else if ((sp = term.find('=')) != std::string::npos) {
      if (label(Trim(term.substr(0, sp))) != Trim(term.substr(sp + 1))) return false;
    } else if (term[0] == '!') {
      if (label(Trim(term.substr(1)))) return false;
    } else if (!label(term)) {
      return false;
    }
  }
  return true;
}

kube::Result FakeApi::Error(int code, std::string reason, std::string message) const {
  kube::Result r;
  r.code = code;
  r.reason = std::move(reason);
  r.message = std::move(message);
  return r;
}

bool FakeApi::Injected(const std::string& path, kube::Result& out) {
  auto it = failures_.find(path);
  if (it == failures_.end() || it->second.empty()) return false;
  auto [code, message] = it->second.front();
  it->second.erase(it->second.begin());
  const std::string_view reason = kube::StatusReason(code);
  out = Error(code, reason.empty() ? "InternalError" : std::string(reason), std::move(message));
  return true;
}

kube::Result FakeApi::Get(std::string_view path) {
  std::lock_guard lock(mu_);
  ParsedPath p = Parse(path);
  std::string key = p.ok && !p.sub.empty() ? ObjectPath(p, p.name) : std::string(path);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Error(404, "NotFound", std::string(path) + " not found");
  kube::Result r;
  r.code = 200;
  r.object.CopyFrom(it->second, r.object.GetAllocator());
  return r;
}

kube::Result FakeApi::List(std::string_view path, const kube::ListOptions& options) {
  std::lock_guard lock(mu_);
  ParsedPath want = Parse(std::string(path) + "/x");
  kube::Result r;
  r.code = 200;
  r.object.SetObject();
  auto& a = r.object.GetAllocator();
  Value items(rapidjson::kArrayType);
  for (const auto& [p, obj] : objects_) {
    ParsedPath have = Parse(p);
    if (have.prefix != want.prefix || have.resource != want.resource) continue;
    if (!want.ns.empty() && have.ns != want.ns) continue;
    if (!options.labelSelector.empty() &&
        !MatchesSelector(json::Path(&obj, {"metadata", "labels"}), options.labelSelector)) {
      continue;
    }
    items.PushBack(Value(obj, a), a);
  }
  r.object.AddMember("items", items, a);
  Value meta(rapidjson::kObjectType);
  meta.AddMember("resourceVersion", Value(std::to_string(nextVersion_).c_str(), a), a);
  r.object.AddMember("metadata", meta, a);
  return r;
}

kube::Result FakeApi::Create(std::string_view path, const json::Value& object) {
  std::lock_guard lock(mu_);
  return CreateLocked(path, object, /*record=*/true);
}

kube::Result FakeApi::CreateLocked(std::string_view path, const json::Value& object, bool record) {
  ParsedPath p = Parse(std::string(path) + "/x");
  std::string name(Meta(object, "name"));
  if (name.empty()) return Error(422, "Invalid", "metadata.name required");
  std::string key = ObjectPath(p, name);
  kube::Result injected;
  if (Injected(key, injected)) return injected;
  if (objects_.count(key)) return Error(409, "AlreadyExists", key + " already exists");
  json::Document doc;
  doc.CopyFrom(object, doc.GetAllocator());
  auto& a = doc.GetAllocator();
  Value& meta = json::EnsureObject(doc, "metadata", a);
  if (!p.ns.empty()) json::SetString(meta, "namespace", p.ns, a);
  if (Meta(doc, "uid").empty()) json::SetString(meta, "uid", "uid-" + std::to_string(nextUid_), a);
  if (!json::Find(&meta, "creationTimestamp")) {
    json::SetString(meta, "creationTimestamp", Timestamp(nextUid_), a);
  }
  ++nextUid_;
  if ((p.resource == "deployments" || p.resource == "replicasets") &&
      !json::Find(&meta, "generation")) {
    json::Set(meta, "generation", Value(1), a);
  }
  json::SetString(meta, "resourceVersion", std::to_string(++nextVersion_), a);
  kube::Result r;
  r.code = 201;
  r.object.CopyFrom(doc, r.object.GetAllocator());
  objects_[key] = std::move(doc);
  if (record) writes_.push_back("CREATE " + key);
  return r;
}

kube::Result FakeApi::Store(const std::string& path, json::Document next, bool statusOnly) {
  auto it = objects_.find(path);
  json::Document& cur = it->second;
  auto& a = next.GetAllocator();
  ParsedPath p = Parse(path);
  // resourceVersion precondition.
  std::string_view sentRv = Meta(next, "resourceVersion");
  if (!sentRv.empty() && sentRv != Meta(cur, "resourceVersion")) {
    return Error(409, "Conflict",
                 "Operation cannot be fulfilled on " + p.resource + " \"" + p.name +
                     "\": the object has been modified; please apply your changes to the latest "
                     "version and try again");
  }
  const bool hasStatus =
      p.resource == "pods" || p.resource == "deployments" || p.resource == "replicasets";
  if (statusOnly) {
    json::Document merged;
    merged.CopyFrom(cur, merged.GetAllocator());
    const Value* st = json::Find(&next, "status");
    if (st != nullptr) json::Set(merged, "status", *st, merged.GetAllocator());
    // A pods/status write keeps its labels and annotations (the API server's pod status strategy
    // resets the spec, deletionTimestamp and ownerReferences only).
    if (p.resource == "pods") {
      Value& to = json::EnsureObject(merged, "metadata", merged.GetAllocator());
      for (std::string_view map : {"labels", "annotations"}) {
        if (const Value* from = json::Path(&next, {"metadata", map})) {
          json::Set(to, map, *from, merged.GetAllocator());
        } else {
          json::Remove(to, map);
        }
      }
    }
    next = std::move(merged);
  } else if (hasStatus) {
    const Value* st = json::Find(&cur, "status");
    if (st != nullptr) {
      json::Set(next, "status", *st, a);
    } else {
      json::Remove(next, "status");
    }
  }
  auto& na = next.GetAllocator();
  Value& meta = json::EnsureObject(next, "metadata", na);
  // Immutable identity.
  for (std::string_view k : {"uid", "name", "namespace", "creationTimestamp"}) {
    const Value* v = json::Path(&cur, {"metadata", k});
    if (v != nullptr) json::Set(meta, k, *v, na);
  }
  if (!statusOnly && p.resource == "pods") {
    json::Document a1, b1;
    const Value* os = json::Find(&cur, "spec");
    const Value* ns = json::Find(&next, "spec");
    if (os == nullptr || ns == nullptr) return Error(422, "Invalid", "spec required");
    a1.CopyFrom(*os, a1.GetAllocator());
    b1.CopyFrom(*ns, b1.GetAllocator());
    for (json::Document* d : {&a1, &b1}) {
      Value* cs = json::FindMutable(d, "containers");
      if (cs != nullptr && cs->IsArray()) {
        for (auto& c : cs->GetArray()) json::Remove(c, "image");
      }
    }
    if (!(a1 == b1)) {
      return Error(422, "Invalid",
                   "Pod \"" + p.name +
                       "\" is invalid: spec: Forbidden: pod updates may not change fields other "
                       "than `spec.containers[*].image`, ...");
    }
  }
  if (!statusOnly && (p.resource == "deployments" || p.resource == "replicasets")) {
    const bool specChanged = !SameJson(json::Find(&cur, "spec"), json::Find(&next, "spec"));
    const bool annotationsChanged =
        p.resource == "deployments" && !SameJson(json::Path(&cur, {"metadata", "annotations"}),
                                                 json::Path(&next, {"metadata", "annotations"}));
    const Value* g = json::Path(&cur, {"metadata", "generation"});
    long long gen = g != nullptr && g->IsInt64() ? g->GetInt64() : 1;
    if (specChanged || annotationsChanged) ++gen;
    json::Set(meta, "generation", Value(static_cast<int64_t>(gen)), na);
  }
  json::SetString(meta, "resourceVersion", std::to_string(++nextVersion_), na);
  kube::Result r;
  r.code = 200;
  r.object.CopyFrom(next, r.object.GetAllocator());
  cur = std::move(next);
  return r;
}

kube::Result FakeApi::Update(std::string_view path, const json::Value& object) {
  std::lock_guard lock(mu_);
  ParsedPath p = Parse(path);
  std::string key = p.sub.empty() ? std::string(path) : ObjectPath(p, p.name);
  kube::Result injected;
  if (Injected(std::string(path), injected)) return injected;
  if (!objects_.count(key)) return Error(404, "NotFound", key + " not found");
  json::Document next;
  next.CopyFrom(object, next.GetAllocator());
  kube::Result r = Store(key, std::move(next), p.sub == "status");
  if (r.Ok()) writes_.push_back("UPDATE " + std::string(path));
  return r;
}

kube::Result FakeApi::Patch(std::string_view path, kube::PatchType type, std::string_view body) {
  std::lock_guard lock(mu_);
  ParsedPath p = Parse(path);
  std::string key = p.sub.empty() ? std::string(path) : ObjectPath(p, p.name);
  kube::Result injected;
  if (Injected(std::string(path), injected)) return injected;
  auto it = objects_.find(key);
  if (it == objects_.end()) return Error(404, "NotFound", key + " not found");
  json::Document patch;
  if (!json::ParseUntrusted(body, patch).ok()) return Error(400, "BadRequest", "patch is not JSON");
  json::Document next;
  next.CopyFrom(it->second, next.GetAllocator());
  // The resourceVersion a patch carries is a precondition: apply it to a version-less copy.
  std::string sent;
  if (type == kube::PatchType::kJson) {
    if (Status err = json_patch::Apply(patch, next); !err.ok()) {
      return Error(422, "Invalid", err.message());
    }
  } else {
    sent = std::string(Meta(patch, "resourceVersion"));
    if (type == kube::PatchType::kMerge) {
      Merge(next, patch, next.GetAllocator());
    } else {
      StrategicMerge(next, patch, next.GetAllocator());
    }
    if (!sent.empty()) {
      json::SetString(json::EnsureObject(next, "metadata", next.GetAllocator()), "resourceVersion",
                      sent, next.GetAllocator());
    }
  }
  kube::Result r = Store(key, std::move(next), p.sub == "status");
  if (r.Ok()) writes_.push_back("PATCH " + std::string(path));
  return r;
}

kube::Result FakeApi::Delete(std::string_view path) {
  std::lock_guard lock(mu_);
  kube::Result injected;
  if (Injected(std::string(path), injected)) return injected;
  auto it = objects_.find(path);
  if (it == objects_.end()) return Error(404, "NotFound", std::string(path) + " not found");
  kube::Result r;
  r.code = 200;
  r.object.CopyFrom(it->second, r.object.GetAllocator());
  objects_.erase(it);
  ++nextVersion_;  // as etcd's revision: a deletion is a change a watch reports
  writes_.push_back("DELETE " + std::string(path));
  return r;
}

std::string FakeApi::Put(std::string_view collection, std::string_view objectJson) {
  json::Document doc;
  if (Status err = json::ParseUntrusted(objectJson, doc); !err.ok()) {
    throw std::runtime_error("FakeApi::Put: " + err.message() + " in " + std::string(objectJson));
  }
  // Setup is not a write of the code under test: not recorded, under the same lock as the
  // creation (a loop thread may write between two lockings).
  std::lock_guard lock(mu_);
  kube::Result r = CreateLocked(collection, doc, /*record=*/false);
  if (!r.Ok()) throw std::runtime_error("FakeApi::Put: " + r.message);
  return ObjectPath(Parse(std::string(collection) + "/x"), Meta(doc, "name"));
}

json::Document FakeApi::Object(std::string_view path) const {
  std::lock_guard lock(mu_);
  json::Document d;
  auto it = objects_.find(path);
  if (it != objects_.end()) d.CopyFrom(it->second, d.GetAllocator());
  return d;
}

std::vector<std::string> FakeApi::Paths(std::string_view collection) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  ParsedPath want = Parse(std::string(collection) + "/x");
  for (const auto& [p, obj] : objects_) {
    ParsedPath have = Parse(p);
    if (have.prefix == want.prefix && have.resource == want.resource &&
        (want.ns.empty() || have.ns == want.ns)) {
      out.push_back(p);
    }
  }
  return out;
}

long long FakeApi::Revision() const {
  std::lock_guard lock(mu_);
  return nextVersion_;
}

void FakeApi::Mutate(std::string_view path, const std::function<void(json::Document&)>& change) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return;
  json::Document before;
  before.CopyFrom(it->second, before.GetAllocator());
  change(it->second);
  if (it->second == before) return;  // as the API server: a write that changes nothing is a no-op
  auto& a = it->second.GetAllocator();
  json::SetString(json::EnsureObject(it->second, "metadata", a), "resourceVersion",
                  std::to_string(++nextVersion_), a);
}

void FakeApi::FailNext(std::string path, int code, int times, std::string message) {
  std::lock_guard lock(mu_);
  auto& v = failures_[std::move(path)];
  for (int i = 0; i < times; ++i) v.emplace_back(code, message);
}

std::vector<std::string> FakeApi::Writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

size_t FakeApi::CountWrites(std::string_view prefix) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(writes_.begin(), writes_.end(), [prefix](auto& w) {
    return std::string_view(w).starts_with(prefix);
  }));
}

std::string ImageIdFor(std::string_view image, const std::map<std::string, std::string>& digests) {
  auto it = digests.find(std::string(image));
  std::string normal = image_ref::NormalizeImage(image);
  std::string repo = normal.substr(0, normal.find_last_of(':'));
  if (it != digests.end()) return repo + "@" + it->second;
  return repo + "@sha256:" + Hex(Fnv(normal)) + Hex(Fnv(normal + "2")) + Hex(Fnv(normal + "3")) +
         Hex(Fnv(normal + "4"));
}

namespace {

Value Condition(std::string_view type, bool status, Allocator& a) {
  Value c(rapidjson::kObjectType);
  c.AddMember("type", Value(std::string(type).c_str(), a), a);
  c.AddMember("status", Value(status ? "True" : "False", a), a);
  c.AddMember("lastTransitionTime", "2026-01-01T00:00:00Z", a);
  return c;
}

bool ConditionTrue(const Value& pod, std::string_view type) {
  const Value* cs = json::Path(&pod, {"status", "conditions"});
  if (cs == nullptr || !cs->IsArray()) return false;
  for (const auto& c : cs->GetArray()) {
    if (json::StringOr(&c, "type") == type) return json::StringOr(&c, "status") == "True";
  }
  return false;
}

void SetCondition(json::Document& pod, std::string_view type, bool status) {
  auto& a = pod.GetAllocator();
  Value& st = json::EnsureObject(pod, "status", a);
  Value* cs = json::FindMutable(&st, "conditions");
  if (cs == nullptr || !cs->IsArray()) {
    json::Set(st, "conditions", Value(rapidjson::kArrayType), a);
    cs = json::FindMutable(&st, "conditions");
  }
  for (auto& c : cs->GetArray()) {
    if (json::StringOr(&c, "type") == type) {
      if ((json::StringOr(&c, "status") == "True") != status) {
        json::SetString(c, "status", status ? "True" : "False", a);
      }
      return;
    }
  }
  cs->PushBack(Condition(type, status, a), a);
}

}  // namespace

void KubeletSync(FakeApi& api, std::string_view ns,
                 const std::map<std::string, std::string>& digests,
                 const std::vector<std::string>& holdRestart) {
  static long long containerSeq = 0;
  for (const std::string& path : api.Paths(kube::PodsPath(ns))) {
    api.Mutate(path, [&](json::Document& pod) {
      auto& a = pod.GetAllocator();
      const std::string podName(Meta(pod, "name"));
      Value& status = json::EnsureObject(pod, "status", a);
      json::SetString(status, "phase", "Running", a);
      if (!json::FindMutable(&status, "containerStatuses")) {
        json::Set(status, "containerStatuses", Value(rapidjson::kArrayType), a);
      }
      Value& statuses = *json::FindMutable(&status, "containerStatuses");
      const Value* specs = json::Path(&pod, {"spec", "containers"});
      for (const auto& c : specs->GetArray()) {
        const std::string name(json::StringOr(&c, "name"));
        const std::string image(json::StringOr(&c, "image"));
        Value* st = nullptr;
        for (auto& s : statuses.GetArray()) {
          if (json::StringOr(&s, "name") == name) st = &s;
        }
        const bool held = std::find(holdRestart.begin(), holdRestart.end(), podName + "/" + name) !=
                          holdRestart.end();
        if (st == nullptr) {
          Value s(rapidjson::kObjectType);
          s.AddMember("name", Value(name.c_str(), a), a);
          s.AddMember("image", Value(image_ref::NormalizeImage(image).c_str(), a), a);
          s.AddMember("imageID", Value(ImageIdFor(image, digests).c_str(), a), a);
          s.AddMember("containerID",
                      Value(("containerd://c" + std::to_string(++containerSeq)).c_str(), a), a);
          s.AddMember("restartCount", 0, a);
          s.AddMember("ready", true, a);
          statuses.PushBack(s, a);
          continue;
        }
        if (held) continue;
        // The runtime reports the image it runs (normalised); restart if the spec differs.
        if (!image_ref::SameImage(json::StringOr(st, "image"), image)) {
          json::SetString(*st, "image", image_ref::NormalizeImage(image), a);
          json::SetString(*st, "imageID", ImageIdFor(image, digests), a);
          json::SetString(*st, "containerID", "containerd://c" + std::to_string(++containerSeq), a);
          Value* rc = json::FindMutable(st, "restartCount");
          json::Set(*st, "restartCount", Value(rc != nullptr ? rc->GetInt() + 1 : 1), a);
        }
      }
      SetCondition(pod, "ContainersReady", true);
      bool gatesOk = true;
      const Value* gates = json::Path(&pod, {"spec", "readinessGates"});
      if (gates != nullptr && gates->IsArray()) {
        for (const auto& g : gates->GetArray()) {
          gatesOk = gatesOk && ConditionTrue(pod, json::StringOr(&g, "conditionType"));
        }
      }
      SetCondition(pod, "Ready", gatesOk);
    });
  }
}

bool ControllerSync(FakeApi& api, std::string_view ns, std::string_view deployment) {
  const std::string dPath = kube::DeploymentPath(ns, deployment);
  json::Document d = api.Object(dPath);
  StatusOr<kube::Deployment> dv = kube::Deployment::From(d);
  if (!dv.ok()) return true;
  const std::string uid(Meta(d, "uid"));
  const std::string dHash = TemplateHash(dv->podTemplate());
  std::vector<json::Document> owned;
  for (const std::string& p : api.Paths(kube::ReplicaSetsPath(ns))) {
    json::Document rs = api.Object(p);
    const Value* refs = json::Path(&rs, {"metadata", "ownerReferences"});
    if (refs == nullptr || !refs->IsArray() || refs->Empty()) continue;
    if (json::StringOr(&(*refs)[0], "uid") != uid) continue;
    owned.push_back(std::move(rs));
  }
  std::sort(owned.begin(), owned.end(), [](const json::Document& a, const json::Document& b) {
    return std::pair(Meta(a, "creationTimestamp"), Meta(a, "name")) <
           std::pair(Meta(b, "creationTimestamp"), Meta(b, "name"));
  });
  const json::Document* newRs = nullptr;
  for (const auto& rs : owned) {
    StatusOr<kube::ReplicaSet> view = kube::ReplicaSet::From(rs);
    if (view.ok() && TemplateHash(view->podTemplate()) == dHash) {
      newRs = &rs;
      break;
    }
  }
  const Value* paused = json::Path(&d, {"spec", "paused"});
  if (newRs == nullptr && !(paused != nullptr && paused->GetBool())) return false;

  int replicas = 0, updated = 0;
  for (const auto& rs : owned) {
    const std::string rsUid(Meta(rs, "uid"));
    for (const std::string& p : api.Paths(kube::PodsPath(ns))) {
      json::Document pod = api.Object(p);
      const Value* refs = json::Path(&pod, {"metadata", "ownerReferences"});
      if (refs == nullptr || !refs->IsArray() || refs->Empty()) continue;
      if (json::StringOr(&(*refs)[0], "uid") != rsUid) continue;
      ++replicas;
      if (&rs == newRs) ++updated;
    }
  }
  if (newRs != nullptr) {
    // SetNewReplicaSetAnnotations: copy the Deployment's annotations (never removes any), and
    // the revision: max(old ReplicaSets' revisions) + 1 when the new one's is lower.
    auto revisionOf = [](const json::Value& rs) {
      std::string_view r =
          json::StringOr(json::Path(&rs, {"metadata", "annotations"}), keys::kRevisionAnnotation);
      long long n = 0;
      std::from_chars(r.data(), r.data() + r.size(), n);
      return n;
    };
    long long maxOld = 0;
    for (const auto& rs : owned) {
      if (&rs != newRs) maxOld = std::max(maxOld, revisionOf(rs));
    }
    const Value* dAnn = json::Path(&d, {"metadata", "annotations"});
    api.Mutate(kube::ReplicaSetPath(ns, Meta(*newRs, "name")), [&](json::Document& rs) {
      auto& a = rs.GetAllocator();
      Value& ann = json::EnsureObject(json::EnsureObject(rs, "metadata", a), "annotations", a);
      if (dAnn != nullptr && dAnn->IsObject()) {
        for (const auto& m : dAnn->GetObject()) {
          std::string_view k = json::View(m.name);
          if (k == keys::kRevisionAnnotation) continue;
          json::Set(ann, k, m.value, a);
        }
      }
      if (revisionOf(rs) < maxOld + 1) {
        json::SetString(ann, keys::kRevisionAnnotation, std::to_string(maxOld + 1), a);
      }
    });
  }
  api.Mutate(dPath, [&](json::Document& dep) {
    auto& a = dep.GetAllocator();
    Value& st = json::EnsureObject(dep, "status", a);
    json::Set(st, "observedGeneration", *json::Path(&dep, {"metadata", "generation"}), a);
    json::Set(st, "replicas", Value(replicas), a);
    json::Set(st, "updatedReplicas", Value(updated), a);
  });
  return true;
}

std::string AddPodFromReplicaSet(FakeApi& api, std::string_view ns, std::string_view rsName,
                                 std::string_view podName) {
  json::Document rs = api.Object(kube::ReplicaSetPath(ns, rsName));
  const Value& tmpl = *json::Path(&rs, {"spec", "template"});
  json::Document pod(rapidjson::kObjectType);
  auto& a = pod.GetAllocator();
  Value meta(rapidjson::kObjectType);
  if (const Value* m = json::Find(&tmpl, "metadata")) meta.CopyFrom(*m, a);
  json::Remove(meta, "creationTimestamp");
  json::SetString(meta, "name", podName, a);
  json::SetString(meta, "namespace", ns, a);
  Value refs(rapidjson::kArrayType);
  Value ref(rapidjson::kObjectType);
  ref.AddMember("apiVersion", "apps/v1", a);
  ref.AddMember("kind", "ReplicaSet", a);
  ref.AddMember("name", Value(std::string(rsName).c_str(), a), a);
  ref.AddMember("uid", Value(std::string(Meta(rs, "uid")).c_str(), a), a);
  ref.AddMember("controller", true, a);
  refs.PushBack(ref, a);
  meta.AddMember("ownerReferences", refs, a);
  pod.AddMember("metadata", meta, a);
  if (const Value* spec = json::Find(&tmpl, "spec")) pod.AddMember("spec", Value(*spec, a), a);
  return api.Put(kube::PodsPath(ns), json::Serialize(pod));
}

}  // namespace iw::fake
