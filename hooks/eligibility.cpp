#include "hooks/eligibility.h"

#include <string_view>
#include <vector>

#include "hooks/keys.h"

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
           const lifecycle::Policy& policy)
      : old_(oldTemplate), new_(newTemplate), policy_(policy) {
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
    return Finish();
  }

 private:
  static constexpr std::string_view kOnlyThese =
      "only container images, template labels and allow-listed template annotations change in "
      "place";

  Result Finish() {
    if (!blocked_) result_.verdict = result_.plan.Empty() ? Verdict::kNoChange : Verdict::kEligible;
    return std::move(result_);
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
        return Block(at + "." + std::string(key),
                     key == "image" ? "image removed or empty"
                                    : "only the image of a container changes in place");
      }
    }
  }

  const json::Value* old_;
  const json::Value* new_;
  const lifecycle::Policy& policy_;
  std::vector<MetadataReader> readers_;
  Result result_;
  bool blocked_ = false;
};

}  // namespace

Result CompareTemplates(const json::Value* oldTemplate, const json::Value* newTemplate,
                        const lifecycle::Policy& policy) {
  return Comparer(oldTemplate, newTemplate, policy).Run();
}

Result CompareDeployments(const json::Value& oldDeployment, const json::Value& newDeployment,
                          const lifecycle::Policy& policy) {
  return CompareTemplates(json::Path(&oldDeployment, {"spec", "template"}),
                          json::Path(&newDeployment, {"spec", "template"}), policy);
}

}  // namespace iw::eligibility
