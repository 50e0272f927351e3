#include "hooks/eligibility.h"

#include <string_view>
#include <vector>

#include "hooks/keys.h"
#include "hooks/qos.h"
#include "lib/quantity.h"

namespace iw::eligibility {

namespace {

enum class MetaKind { kLabels, kAnnotations };

std::string_view MapName(MetaKind kind) {
  return kind == MetaKind::kLabels ? "labels" : "annotations";
}

// A reader of template metadata: env fieldRef or downwardAPI item `metadata.labels['k']` or
// `metadata.labels` (whole map: empty key).
struct MetadataReader {
  MetaKind kind;
  std::string key;
  std::string where;  // e.g. `container "app" env POD_TIER`
};

// Parses a downward-API fieldPath that reads labels or annotations.
std::optional<MetadataReader> ParseFieldPath(std::string_view path, std::string where) {
  for (MetaKind kind : {MetaKind::kLabels, MetaKind::kAnnotations}) {
    const std::string prefix = "metadata." + std::string(MapName(kind));
    if (!path.starts_with(prefix)) continue;
    std::string_view rest = path.substr(prefix.size());
    if (rest.empty()) return MetadataReader{kind, "", std::move(where)};
    // ['key'] or ["key"]
    if (rest.size() >= 4 && rest.front() == '[' && rest.back() == ']' &&
        (rest[1] == '\'' || rest[1] == '"') && rest[rest.size() - 2] == rest[1]) {
      return MetadataReader{kind, std::string(rest.substr(2, rest.size() - 4)), std::move(where)};
    }
  }
  return std::nullopt;
}

const json::Value* FieldRefPath(const json::Value& holder) {
  const json::Value* p = json::Path(&holder, {"fieldRef", "fieldPath"});
  return (p != nullptr && p->IsString()) ? p : nullptr;
}

void CollectDownwardItems(const json::Value* downwardApi, const std::string& where,
                          std::vector<MetadataReader>& out) {
  const json::Value* items = json::Find(downwardApi, "items");
  if (items == nullptr || !items->IsArray()) return;
  for (const auto& item : items->GetArray()) {
    if (const json::Value* p = FieldRefPath(item)) {
      if (auto r = ParseFieldPath(json::View(*p), where)) out.push_back(std::move(*r));
    }
  }
}

// Every reader of labels/annotations in one template.
void CollectReaders(const json::Value* podTemplate, std::vector<MetadataReader>& out) {
  const json::Value* spec = json::Find(podTemplate, "spec");
  for (std::string_view list : {"containers", "initContainers"}) {
    const json::Value* containers = json::Find(spec, list);
    if (containers == nullptr || !containers->IsArray()) continue;
    for (const auto& c : containers->GetArray()) {
      const json::Value* env = json::Find(&c, "env");
      if (env == nullptr || !env->IsArray()) continue;
      for (const auto& e : env->GetArray()) {
        const json::Value* valueFrom = json::Find(&e, "valueFrom");
        const json::Value* p = valueFrom != nullptr ? FieldRefPath(*valueFrom) : nullptr;
        if (p == nullptr) continue;
        std::string where = "container \"" + std::string(json::StringOr(&c, "name")) + "\" env " +
                            std::string(json::StringOr(&e, "name"));
        if (auto r = ParseFieldPath(json::View(*p), std::move(where))) out.push_back(std::move(*r));
      }
    }
  }
  const json::Value* volumes = json::Find(spec, "volumes");
  if (volumes == nullptr || !volumes->IsArray()) return;
  for (const auto& v : volumes->GetArray()) {
    const std::string where =
        "downwardAPI volume \"" + std::string(json::StringOr(&v, "name")) + "\"";
    CollectDownwardItems(json::Find(&v, "downwardAPI"), where, out);
    const json::Value* sources = json::Path(&v, {"projected", "sources"});
    if (sources == nullptr || !sources->IsArray()) continue;
    for (const auto& s : sources->GetArray()) {
      CollectDownwardItems(json::Find(&s, "downwardAPI"), where, out);
    }
  }
}

// Go's strings.TrimSpace would change it (ASCII whitespace is what image references can carry).
bool HasOuterSpace(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  return !s.empty() && (space(s.front()) || space(s.back()));
}

bool IsAbsent(const json::Value* v) {
  return v == nullptr || v->IsNull();
}

// Deep equality where an absent member equals a null one.
bool Same(const json::Value* a, const json::Value* b) {
  if (IsAbsent(a) || IsAbsent(b)) return IsAbsent(a) && IsAbsent(b);
  return *a == *b;
}

// Member names of `newer` in order, then those only `older` has.
std::vector<std::string_view> UnionKeys(const json::Value* newer, const json::Value* older) {
  std::vector<std::string_view> keys;
  if (newer != nullptr && newer->IsObject()) {
    for (const auto& m : newer->GetObject()) keys.push_back(json::View(m.name));
  }
  if (older != nullptr && older->IsObject()) {
    for (const auto& m : older->GetObject()) {
      if (json::Find(newer, json::View(m.name)) == nullptr) keys.push_back(json::View(m.name));
    }
  }
  return keys;
}

class Comparer {
 public:
  Comparer(const json::Value* oldTemplate, const json::Value* newTemplate,
           const lifecycle::Policy& policy, const resize_support::Support& support)
      : old_(oldTemplate), new_(newTemplate), policy_(policy), support_(support) {
    CollectReaders(old_, readers_);
    CollectReaders(new_, readers_);
  }

  Result Run() {
    if (IsAbsent(old_) || IsAbsent(new_) || !old_->IsObject() || !new_->IsObject()) {
      if (!Same(old_, new_))
        Block("spec.template", "the pod template was added, removed or is not an object");
      return Finish();
    }
    for (std::string_view key : UnionKeys(new_, old_)) {
      const json::Value* o = json::Find(old_, key);
      const json::Value* n = json::Find(new_, key);
      if (key == "metadata") {
        CompareMetadata(o, n);
      } else if (key == "spec") {
        CompareSpec(o, n);
      } else if (!Same(o, n)) {
        Block("spec.template." + std::string(key), kOnlyThese);
      }
      if (blocked_) break;
    }
    if (!blocked_ && !result_.plan.resources.empty()) CheckResize();
    return Finish();
  }

 private:
  static constexpr std::string_view kOnlyThese =
      "only container images and cpu/memory resources, template labels and allow-listed template "
      "annotations change in place";

  // A resize as a whole: what ValidatePodResize checks of the pod beyond each container.
  void CheckResize() {
    const json::Value* oldSpec = json::Find(old_, "spec");
    const json::Value* newSpec = json::Find(new_, "spec");
    const json::Value* podLevel = json::Find(newSpec, "resources");
    if (!IsAbsent(podLevel) && !(podLevel->IsObject() && podLevel->MemberCount() == 0)) {
      Block("spec.template.spec.resources",
            "a pod with pod-level resources is not resized in place");
      result_.resize = true;
      return;
    }
    const std::string_view before = qos::OfPodSpec(oldSpec);
    const std::string_view after = qos::OfPodSpec(newSpec);
    if (before != after) {
      Block(firstResized_ + ".resources", "the pod's QoS class would change from " +
                                              std::string(before) + " to " + std::string(after));
      result_.resize = true;
    }
  }

  // The container's resizePolicy for `resource`: RestartContainer or NotRequired (the default).
  static bool RestartsFor(const json::Value& container, std::string_view resource) {
    const json::Value* policies = json::Find(&container, "resizePolicy");
    if (policies == nullptr || !policies->IsArray()) return false;
    for (const auto& p : policies->GetArray()) {
      if (json::StringOr(&p, "resourceName") == resource) {
        return json::StringOr(&p, "restartPolicy") == "RestartContainer";
      }
    }
    return false;
  }

  // containers[i].resources changed: only cpu and memory, never removed, through pods/resize.
  void CompareResources(const std::string& at, const json::Value& oc, const json::Value& nc,
                        std::string_view name) {
    const std::string base = at + ".resources";
    const json::Value* o = json::Find(&oc, "resources");
    const json::Value* n = json::Find(&nc, "resources");
    if ((!IsAbsent(o) && !o->IsObject()) || (!IsAbsent(n) && !n->IsObject())) {
      return Block(base, "resources is not an object");
    }
    // Quantities compare by value, as the API server's semantic equality does ("1" == "1000m",
    // "64Mi" == "67108864"): a respelling is no change at all.
    if (SameByValue(o, n)) return;
    if (!support_.podResize) {
      return Resize(base, "the API server does not serve pods/resize (Kubernetes 1.33 or later)");
    }
    for (std::string_view key : UnionKeys(n, o)) {
      const json::Value* ov = json::Find(o, key);
      const json::Value* nv = json::Find(n, key);
      if (key != "requests" && key != "limits") {
        if (!Same(ov, nv)) {
          return Resize(base + "." + std::string(key),
                        "only cpu and memory requests and limits are resized in place");
        }
        continue;
      }
      if ((!IsAbsent(ov) && !ov->IsObject()) || (!IsAbsent(nv) && !nv->IsObject())) {
        return Block(base + "." + std::string(key), "not a map of quantities");
      }
      for (std::string_view resource : UnionKeys(nv, ov)) {
        const json::Value* oq = json::Find(ov, resource);
        const json::Value* nq = json::Find(nv, resource);
        const std::string path =
            base + "." + std::string(key) + "['" + std::string(resource) + "']";
        const bool resizable = resource == "cpu" || resource == "memory";
        if (resizable && !IsAbsent(nq) && !quantity::MilliOf(nq)) {
          return Block(path, "not a quantity");
        }
        if (quantity::SameQuantity(oq, nq)) continue;
        if (!resizable) return Resize(path, "only cpu and memory are resized in place");
        if (IsAbsent(nq)) return Resize(path, "the pod API refuses to remove a request or limit");
        if (key == "limits" && resource == "memory" && !support_.memoryLimitDecrease &&
            !IsAbsent(oq) && quantity::MilliOf(oq) &&
            *quantity::MilliOf(nq) < *quantity::MilliOf(oq) && !RestartsFor(nc, "memory")) {
          return Resize(path,
                        "this API server lowers a memory limit only with memory resizePolicy "
                        "RestartContainer");
        }
      }
    }
    Plan::Resources want = ResourcesOf(kube::Container(nc));
    if (want.requests.empty() && want.limits.empty()) return;  // e.g. `{}` for an absent one
    if (firstResized_.empty()) firstResized_ = at;
    result_.plan.resources[std::string(name)] = std::move(want);
  }

  static bool SameByValue(const json::Value* o, const json::Value* n) {
    for (std::string_view key : UnionKeys(n, o)) {
      const json::Value* ov = json::Find(o, key);
      const json::Value* nv = json::Find(n, key);
      if (key != "requests" && key != "limits") {
        if (!Same(ov, nv)) return false;
        continue;
      }
      if ((!IsAbsent(ov) && !ov->IsObject()) || (!IsAbsent(nv) && !nv->IsObject())) return false;
      for (std::string_view resource : UnionKeys(nv, ov)) {
        const json::Value* oq = json::Find(ov, resource);
        const json::Value* nq = json::Find(nv, resource);
        if (IsAbsent(oq) && IsAbsent(nq)) continue;
        if (IsAbsent(oq) || IsAbsent(nq) || !quantity::SameQuantity(oq, nq)) return false;
      }
    }
    return true;
  }

  Result Finish() {
    if (!blocked_) result_.verdict = result_.plan.Empty() ? Verdict::kNoChange : Verdict::kEligible;
    return std::move(result_);
  }

  // A block by a rule of in-place resizing (its reason is shown to the user).
  void Resize(std::string path, std::string_view reason) {
    Block(std::move(path), reason);
    result_.resize = true;
  }

  void Block(std::string path, std::string_view reason) {
    blocked_ = true;
    result_ = Result{};
    result_.verdict = Verdict::kNotEligible;
    result_.blockingPath = std::move(path);
    result_.reason = std::string(reason);
  }

  void CompareMetadata(const json::Value* o, const json::Value* n) {
    if (!IsAbsent(o) && !o->IsObject())
      return Block("spec.template.metadata", "metadata is not an object");
    if (!IsAbsent(n) && !n->IsObject())
      return Block("spec.template.metadata", "metadata is not an object");
    for (std::string_view key : UnionKeys(n, o)) {
      const json::Value* ov = json::Find(o, key);
      const json::Value* nv = json::Find(n, key);
      if (key == "labels") {
        CompareMap(MetaKind::kLabels, ov, nv);
      } else if (key == "annotations") {
        CompareMap(MetaKind::kAnnotations, ov, nv);
      } else if (!Same(ov, nv)) {
        Block("spec.template.metadata." + std::string(key), kOnlyThese);
      }
      if (blocked_) return;
    }
  }

  void CompareMap(MetaKind kind, const json::Value* o, const json::Value* n) {
    const std::string base = "spec.template.metadata." + std::string(MapName(kind));
    if ((!IsAbsent(o) && !o->IsObject()) || (!IsAbsent(n) && !n->IsObject())) {
      return Block(base, "not a map of strings");
    }
    auto& changes = kind == MetaKind::kLabels ? result_.plan.labels : result_.plan.annotations;
    for (std::string_view key : UnionKeys(n, o)) {
      const json::Value* ov = json::Find(o, key);
      const json::Value* nv = json::Find(n, key);
      if (Same(ov, nv)) continue;
      const std::string path = base + "['" + std::string(key) + "']";
      if ((!IsAbsent(ov) && !ov->IsString()) || (!IsAbsent(nv) && !nv->IsString())) {
        return Block(path, "value is not a string");
      }
      if (kind == MetaKind::kAnnotations &&
          (key.starts_with(keys::kAppArmorAnnotationPrefix) || key == keys::kMirrorPodAnnotation)) {
        // ValidatePodSpecificAnnotationUpdates: "may not add/remove or update ..." on any pod.
        Block(path, key == keys::kMirrorPodAnnotation
                        ? "the pod API refuses to add, change or remove the mirror-pod annotation"
                        : "the pod API refuses to add, change or remove AppArmor annotations");
        result_.podApiRefuses = "annotation " + std::string(key);
        return;
      }
      if (kind == MetaKind::kAnnotations && key == keys::kRestartedAtAnnotation) {
        return Block(path, "kubectl rollout restart asks for new pods");
      }
      if (kind == MetaKind::kAnnotations && !policy_.AllowsAnnotation(key)) {
        return Block(path,
                     "annotation not allowed by the inplace-webhook.io/policy annotations list");
      }
      for (const MetadataReader& r : readers_) {
        if (r.kind == kind && (r.key.empty() || r.key == key)) {
          return Block(path, "read by " + r.where + "; kubelet would not restart it");
        }
      }
      changes[std::string(key)] =
          IsAbsent(nv) ? std::nullopt : std::optional<std::string>(json::View(*nv));
    }
  }

  void CompareSpec(const json::Value* o, const json::Value* n) {
    if (IsAbsent(o) || IsAbsent(n) || !o->IsObject() || !n->IsObject()) {
      if (!Same(o, n))
        Block("spec.template.spec", "the pod spec was added, removed or is not an object");
      return;
    }
    for (std::string_view key : UnionKeys(n, o)) {
      const json::Value* ov = json::Find(o, key);
      const json::Value* nv = json::Find(n, key);
      if (key == "containers") {
        CompareContainers(ov, nv);
      } else if (!Same(ov, nv)) {
        Block("spec.template.spec." + std::string(key),
              key == "initContainers"
                  ? "init containers (images included) change only with new pods"
                  : kOnlyThese);
      }
      if (blocked_) return;
    }
  }

  void CompareContainers(const json::Value* o, const json::Value* n) {
    const std::string base = "spec.template.spec.containers";
    if (Same(o, n)) return;
    if (IsAbsent(o) || IsAbsent(n) || !o->IsArray() || !n->IsArray() || o->Size() != n->Size()) {
      return Block(base, "containers added or removed");
    }
    for (rapidjson::SizeType i = 0; i < n->Size(); ++i) {
      const json::Value& oc = (*o)[i];
      const json::Value& nc = (*n)[i];
      const std::string at = base + "[" + std::to_string(i) + "]";
      if (!oc.IsObject() || !nc.IsObject()) return Block(at, "container is not an object");
      const json::Value* oname = json::Find(&oc, "name");
      const json::Value* nname = json::Find(&nc, "name");
      if (oname == nullptr || nname == nullptr || !oname->IsString() || !nname->IsString() ||
          *oname != *nname) {
        return Block(at + ".name", "containers renamed or reordered");
      }
      for (std::string_view key : UnionKeys(&nc, &oc)) {
        const json::Value* ov = json::Find(&oc, key);
        const json::Value* nv = json::Find(&nc, key);
        if (Same(ov, nv)) continue;
        if (key == "image" && !IsAbsent(nv) && nv->IsString() && nv->GetStringLength() > 0) {
          std::string_view image = json::View(*nv);
          if (HasOuterSpace(image)) {
            // ValidateContainerUpdates: "must not have leading or trailing whitespace" (a pod-only
            // rule: the Deployment's template passes it, every pod write of it fails).
            Block(at + ".image",
                  "the pod API refuses an image with leading or trailing whitespace");
            result_.podApiRefuses = "the image of container " + std::string(json::View(*nname)) +
                                    " to one with leading or trailing whitespace";
            return;
          }
          result_.plan.images[std::string(json::View(*nname))] = std::string(image);
          continue;
        }
        if (key == "resources") {
          CompareResources(at, oc, nc, json::View(*nname));
          if (blocked_) return;
          continue;
        }
        return Block(at + "." + std::string(key),
                     key == "image" ? "image removed or empty"
                                    : "only the image and cpu/memory resources of a container "
                                      "change in place");
      }
    }
  }

  const json::Value* old_;
  const json::Value* new_;
  const lifecycle::Policy& policy_;
  const resize_support::Support& support_;
  std::string firstResized_;  // the path of the first container whose resources change
  std::vector<MetadataReader> readers_;
  Result result_;
  bool blocked_ = false;
};

}  // namespace

Plan::Resources ResourcesOf(const kube::Container& container) {
  Plan::Resources out;
  for (auto [key, map] : {std::pair{"requests", &out.requests}, std::pair{"limits", &out.limits}}) {
    const json::Value* list = container.resources(key);
    for (std::string_view resource : {"cpu", "memory"}) {
      const json::Value* q = json::Find(list, resource);
      if (q == nullptr || q->IsNull()) continue;
      (*map)[std::string(resource)] =
          q->IsString() ? std::string(json::View(*q)) : json::Serialize(*q);
    }
  }
  // A limit without a request: the API server defaults the request to it (SetDefaults_Pod), so a
  // pod made from this container asks for the limit.
  for (const auto& [resource, q] : out.limits) out.requests.try_emplace(resource, q);
  return out;
}

Result CompareTemplates(const kube::PodTemplate* oldTemplate, const kube::PodTemplate* newTemplate,
                        const lifecycle::Policy& policy, const resize_support::Support& support) {
  // The comparison walks every field of both templates, known to the views or not.
  auto raw = [](const kube::PodTemplate* t) { return t != nullptr ? &t->json() : nullptr; };
  return Comparer(raw(oldTemplate), raw(newTemplate), policy, support).Run();
}

Result CompareDeployments(const kube::Deployment& oldDeployment,
                          const kube::Deployment& newDeployment, const lifecycle::Policy& policy,
                          const resize_support::Support& support) {
  const kube::PodTemplate oldTemplate = oldDeployment.podTemplate();
  const kube::PodTemplate newTemplate = newDeployment.podTemplate();
  return CompareTemplates(&oldTemplate, &newTemplate, policy, support);
}

}  // namespace iw::eligibility
