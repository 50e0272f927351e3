#include "lib/kube_objects.h"

#include <algorithm>
#include <array>
#include <limits>

namespace iw::kube {

// ---- shape ----

namespace {

enum class Kind {
  kObject,
  kString,
  kBool,
  kInteger,
  kIntOrString,
  kStringMap,
  kStringArray,
  kNamedArray,
  kObjectArray
};

std::string_view TypeName(const json::Value& v) {
  if (v.IsObject()) return "object";
  if (v.IsArray()) return "array";
  if (v.IsString()) return "string";
  if (v.IsBool()) return "boolean";
  if (v.IsNull()) return "null";
  return "number";
}

std::string_view Expected(Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return "an object";
    case Kind::kString:
      return "a string";
    case Kind::kBool:
      return "a boolean";
    case Kind::kInteger:
      return "an integer";
    case Kind::kIntOrString:
      return "an integer or a string";
    case Kind::kStringMap:
      return "an object of string values";
    case Kind::kStringArray:
      return "an array of strings";
    case Kind::kNamedArray:
      return "an array of containers";
    case Kind::kObjectArray:
      return "an array of objects";
  }
  return "";
}

// Why `v` at `path()` is not of `kind`, naming the offending member or element; OK if it is.
// `path` is called only to word an error, so a well-formed object costs no string building.
template <typename PathFn>
Status Mismatch(const json::Value& v, Kind kind, const PathFn& path) {
  auto wrong = [](const std::string& at, std::string_view expected, const json::Value& got) {
    return Status::InvalidArgument(at + " must be " + std::string(expected) + ", got " +
                                   std::string(TypeName(got)));
  };
  const bool ok = [&] {
    switch (kind) {
      case Kind::kObject:
      case Kind::kStringMap:
        return v.IsObject();
      case Kind::kString:
        return v.IsString();
      case Kind::kBool:
        return v.IsBool();
      case Kind::kInteger:
        return v.IsInt64();
      case Kind::kIntOrString:
        return v.IsInt64() || v.IsString();
      case Kind::kStringArray:
      case Kind::kNamedArray:
      case Kind::kObjectArray:
        return v.IsArray();
    }
    return false;
  }();
  if (!ok) return wrong(path(), Expected(kind), v);
  if (kind == Kind::kStringMap) {
    for (const auto& m : v.GetObject()) {
      if (!m.value.IsString()) {
        return wrong(path() + "[\"" + std::string(json::View(m.name)) + "\"]", "a string", m.value);
      }
    }
  }
  if (!v.IsArray() || kind == Kind::kObject) return Status::Ok();
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    const json::Value& e = v[i];
    auto at = [&] { return path() + "[" + std::to_string(i) + "]"; };
    if (kind == Kind::kStringArray) {
      if (!e.IsString()) return wrong(at(), "a string", e);
      continue;
    }
    if (!e.IsObject()) return wrong(at(), "an object", e);
    if (kind != Kind::kNamedArray) continue;
    const json::Value* name = json::Find(&e, "name");
    if (name == nullptr || !name->IsString()) {
      return Status::InvalidArgument(at() + ".name must be a string");
    }
    const json::Value* image = json::Find(&e, "image");
    if (image != nullptr && !image->IsNull() && !image->IsString()) {
      return wrong(at() + ".image", "a string", *image);
    }
  }
  return Status::Ok();
}

struct Field {
  std::initializer_list<std::string_view> path;
  Kind kind;
};

Status CheckFields(const json::Value& object, std::string_view name,
                   std::initializer_list<Field> fields) {
  // Consecutive fields share prefixes (metadata.*, spec.template.*): each path is resolved from
  // the deepest value it shares with the previous one. at[i] is the value at the previous path's
  // first i keys (nullptr once absent).
  constexpr std::size_t kMaxKeys = 8;
  std::array<const json::Value*, kMaxKeys + 1> at{&object};
  const std::string_view* previous = nullptr;
  std::size_t previousSize = 0;
  for (const Field& f : fields) {
    const std::string_view* keys = f.path.begin();
    const std::size_t size = std::min(f.path.size(), kMaxKeys);
    std::size_t common = 0;
    while (common < size && common < previousSize && keys[common] == previous[common]) ++common;
    for (std::size_t i = common; i < size; ++i) at[i + 1] = json::Find(at[i], keys[i]);
    previous = keys;
    previousSize = size;
    const json::Value* v = at[size];
    if (v == nullptr || v->IsNull()) continue;
    auto path = [&] {
      std::string p(name);
      for (std::string_view k : f.path) {
        p += '.';
        p += k;
      }
      return p;
    };
    if (Status s = Mismatch(*v, f.kind, path); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Status CheckMetadataShape(const json::Value& object, std::string_view name) {
  if (!object.IsObject()) {
    return Status::InvalidArgument(std::string(name) + " must be an object, got " +
                                   std::string(TypeName(object)));
  }
  return CheckFields(object, name,
                     {{{"metadata"}, Kind::kObject},
                      {{"metadata", "name"}, Kind::kString},
                      {{"metadata", "namespace"}, Kind::kString},
                      {{"metadata", "labels"}, Kind::kStringMap},
                      {{"metadata", "annotations"}, Kind::kStringMap},
                      {{"metadata", "finalizers"}, Kind::kStringArray}});
}

Status CheckDeploymentShape(const json::Value& deployment, std::string_view name) {
  if (Status s = CheckMetadataShape(deployment, name); !s.ok()) return s;
  return CheckFields(deployment, name,
                     {{{"metadata", "generation"}, Kind::kInteger},
                      {{"spec"}, Kind::kObject},
                      {{"spec", "paused"}, Kind::kBool},
                      {{"spec", "replicas"}, Kind::kInteger},
                      {{"spec", "minReadySeconds"}, Kind::kInteger},
                      {{"spec", "progressDeadlineSeconds"}, Kind::kInteger},
                      {{"spec", "revisionHistoryLimit"}, Kind::kInteger},
                      {{"spec", "strategy"}, Kind::kObject},
                      {{"spec", "strategy", "type"}, Kind::kString},
                      {{"spec", "strategy", "rollingUpdate"}, Kind::kObject},
                      {{"spec", "strategy", "rollingUpdate", "maxUnavailable"}, Kind::kIntOrString},
                      {{"spec", "template"}, Kind::kObject},
                      {{"spec", "template", "metadata"}, Kind::kObject},
                      {{"spec", "template", "metadata", "labels"}, Kind::kStringMap},
                      {{"spec", "template", "metadata", "annotations"}, Kind::kStringMap},
                      {{"spec", "template", "spec"}, Kind::kObject},
                      {{"spec", "template", "spec", "containers"}, Kind::kNamedArray},
                      {{"spec", "template", "spec", "initContainers"}, Kind::kNamedArray},
                      {{"spec", "template", "spec", "readinessGates"}, Kind::kObjectArray},
                      {{"status"}, Kind::kObject},
                      {{"status", "observedGeneration"}, Kind::kInteger},
                      {{"status", "replicas"}, Kind::kInteger},
                      {{"status", "updatedReplicas"}, Kind::kInteger},
                      {{"status", "conditions"}, Kind::kObjectArray}});
}

Status CheckReplicaSetShape(const json::Value& replicaSet, std::string_view name) {
  if (Status s = CheckMetadataShape(replicaSet, name); !s.ok()) return s;
  return CheckFields(replicaSet, name,
                     {{{"metadata", "ownerReferences"}, Kind::kObjectArray},
                      {{"spec"}, Kind::kObject},
                      {{"spec", "replicas"}, Kind::kInteger},
                      {{"spec", "template"}, Kind::kObject},
                      {{"spec", "template", "metadata"}, Kind::kObject},
                      {{"spec", "template", "metadata", "labels"}, Kind::kStringMap},
                      {{"spec", "template", "metadata", "annotations"}, Kind::kStringMap},
                      {{"spec", "template", "spec"}, Kind::kObject},
                      {{"spec", "template", "spec", "containers"}, Kind::kNamedArray}});
}

Status CheckStatefulSetShape(const json::Value& statefulSet, std::string_view name) {
  if (Status s = CheckMetadataShape(statefulSet, name); !s.ok()) return s;
  Status s = CheckFields(
      statefulSet, name,
      {{{"metadata", "generation"}, Kind::kInteger},
       {{"spec"}, Kind::kObject},
       {{"spec", "replicas"}, Kind::kInteger},
       {{"spec", "minReadySeconds"}, Kind::kInteger},
       {{"spec", "podManagementPolicy"}, Kind::kString},
       {{"spec", "ordinals"}, Kind::kObject},
       {{"spec", "ordinals", "start"}, Kind::kInteger},
       {{"spec", "updateStrategy"}, Kind::kObject},
       {{"spec", "updateStrategy", "type"}, Kind::kString},
       {{"spec", "updateStrategy", "rollingUpdate"}, Kind::kObject},
       {{"spec", "updateStrategy", "rollingUpdate", "partition"}, Kind::kInteger},
       {{"spec", "updateStrategy", "rollingUpdate", "maxUnavailable"}, Kind::kIntOrString},
       {{"spec", "template"}, Kind::kObject},
       {{"status"}, Kind::kObject},
       {{"status", "observedGeneration"}, Kind::kInteger},
       {{"status", "replicas"}, Kind::kInteger},
       {{"status", "readyReplicas"}, Kind::kInteger},
       {{"status", "currentReplicas"}, Kind::kInteger},
       {{"status", "updatedReplicas"}, Kind::kInteger},
       {{"status", "currentRevision"}, Kind::kString},
       {{"status", "updateRevision"}, Kind::kString},
       {{"status", "conditions"}, Kind::kObjectArray}});
  if (!s.ok()) return s;
  const json::Value* tmpl = json::Path(&statefulSet, {"spec", "template"});
  if (tmpl == nullptr || tmpl->IsNull()) return Status::Ok();
  return CheckPodTemplateShape(*tmpl, std::string(name) + ".spec.template");
}

Status CheckPodShape(const json::Value& pod, std::string_view name) {
  if (Status s = CheckMetadataShape(pod, name); !s.ok()) return s;
  return CheckFields(pod, name,
                     {{{"metadata", "ownerReferences"}, Kind::kObjectArray},
                      {{"spec"}, Kind::kObject},
                      {{"spec", "containers"}, Kind::kNamedArray},
                      {{"spec", "readinessGates"}, Kind::kObjectArray},
                      {{"status"}, Kind::kObject},
                      {{"status", "phase"}, Kind::kString},
                      {{"status", "conditions"}, Kind::kObjectArray},
                      {{"status", "containerStatuses"}, Kind::kObjectArray}});
}

Status CheckPodTemplateShape(const json::Value& podTemplate, std::string_view name) {
  if (Status s = CheckMetadataShape(podTemplate, name); !s.ok()) return s;
  return CheckFields(podTemplate, name,
                     {{{"spec"}, Kind::kObject},
                      {{"spec", "containers"}, Kind::kNamedArray},
                      {{"spec", "initContainers"}, Kind::kNamedArray},
                      {{"spec", "readinessGates"}, Kind::kObjectArray}});
}

// ---- the views ----

namespace {

const json::Value* Meta(const json::Value& object) {
  return json::Find(&object, "metadata");
}

long long IntAt(const json::Value* v, long long fallback) {
  return v != nullptr && v->IsInt64() ? v->GetInt64() : fallback;
}

std::optional<std::string_view> MapString(const json::Value& object, std::string_view map,
                                          std::string_view key) {
  const json::Value* v = json::Find(json::Find(Meta(object), map), key);
  if (v == nullptr || !v->IsString()) return std::nullopt;
  return json::View(*v);
}

const json::Value& TemplateOf(const json::Value& workload) {
  static const json::Value kEmpty(rapidjson::kObjectType);
  const json::Value* t = json::Path(&workload, {"spec", "template"});
  return t != nullptr && t->IsObject() ? *t : kEmpty;
}

// The entry named `name` of the list at `path` of an object, as a `View`.
template <class View>
std::optional<View> NamedEntry(const json::Value& object,
                               std::initializer_list<std::string_view> path,
                               std::string_view name) {
  const json::Value* e = json::FindNamed(json::Path(&object, path), "name", name);
  if (e == nullptr) return std::nullopt;
  return View(*e);
}

// Every entry of the list at `path` of an object, in order, as `View`s.
template <class View>
std::vector<View> Entries(const json::Value& object, std::initializer_list<std::string_view> path) {
  std::vector<View> out;
  const json::Value* list = json::Path(&object, path);
  if (list == nullptr || !list->IsArray()) return out;
  out.reserve(list->Size());
  for (const auto& e : list->GetArray()) out.emplace_back(e);
  return out;
}

// `n` as an int: below 0 is 0, above INT_MAX is INT_MAX.
int ClampInt(long long n) {
  return n < 0                                 ? 0
         : n > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                               : static_cast<int>(n);
}

int SpecReplicas(const json::Value& workload) {
  return ClampInt(IntAt(json::Path(&workload, {"spec", "replicas"}), 1));
}

}  // namespace

std::string_view MetaOf(const json::Value& object, std::string_view field) {
  return json::StringOr(Meta(object), field);
}

std::optional<std::string_view> LabelOf(const json::Value& object, std::string_view key) {
  return MapString(object, "labels", key);
}
std::optional<std::string_view> AnnotationOf(const json::Value& object, std::string_view key) {
  return MapString(object, "annotations", key);
}

bool PausedOf(const json::Value& deployment) {
  const json::Value* v = json::Path(&deployment, {"spec", "paused"});
  return v != nullptr && v->IsBool() && v->GetBool();
}

const json::Value* ControllerRefOf(const json::Value& object) {
  const json::Value* refs = json::Find(Meta(object), "ownerReferences");
  if (refs == nullptr || !refs->IsArray()) return nullptr;
  for (const auto& ref : refs->GetArray()) {
    const json::Value* controller = json::Find(&ref, "controller");
    if (controller != nullptr && controller->IsBool() && controller->GetBool()) return &ref;
  }
  return nullptr;
}

std::string_view ControllerNameOf(const json::Value& object, std::string_view kind) {
  const json::Value* ref = ControllerRefOf(object);
  return json::StringOr(ref, "kind") == kind ? json::StringOr(ref, "name") : std::string_view{};
}
const json::Value* ConditionOf(const json::Value& object, std::string_view type) {
  return json::FindNamed(json::Path(&object, {"status", "conditions"}), "type", type);
}

namespace {
// status.conditions[type == `type`] of `object` as a view (Pod::condition, Deployment::condition).
std::optional<Condition> ConditionView(const json::Value& object, std::string_view type) {
  const json::Value* c = ConditionOf(object, type);
  if (c == nullptr) return std::nullopt;
  return Condition(*c);
}
}  // namespace

StatusOr<ObjectView> ObjectView::From(const json::Value& object, std::string_view name) {
  if (Status s = CheckMetadataShape(object, name); !s.ok()) return s;
  return ObjectView(object);
}
std::string_view ObjectView::name() const {
  return json::StringOr(Meta(*object_), "name");
}
std::string_view ObjectView::ns() const {
  return json::StringOr(Meta(*object_), "namespace");
}
std::string_view ObjectView::uid() const {
  return json::StringOr(Meta(*object_), "uid");
}
std::string_view ObjectView::resourceVersion() const {
  return MetaOf(*object_, "resourceVersion");
}
long long ObjectView::generation() const {
  return IntAt(json::Find(Meta(*object_), "generation"), 0);
}
std::optional<std::string_view> ObjectView::label(std::string_view key) const {
  return LabelOf(*object_, key);
}
std::optional<std::string_view> ObjectView::annotation(std::string_view key) const {
  return AnnotationOf(*object_, key);
}
const json::Value* ObjectView::labels() const {
  const json::Value* l = json::Find(Meta(*object_), "labels");
  return l != nullptr && l->IsObject() ? l : nullptr;
}
const json::Value* ObjectView::annotations() const {
  const json::Value* a = json::Find(Meta(*object_), "annotations");
  return a != nullptr && a->IsObject() ? a : nullptr;
}
bool ObjectView::hasFinalizer(std::string_view finalizer) const {
  const json::Value* finalizers = json::Find(Meta(*object_), "finalizers");
  if (finalizers == nullptr || !finalizers->IsArray()) return false;
  for (const auto& f : finalizers->GetArray()) {
    if (f.IsString() && json::View(f) == finalizer) return true;
  }
  return false;
}
std::string_view ObjectView::controllerUid() const {
  return json::StringOr(ControllerRefOf(*object_), "uid");
}
bool ObjectView::deleting() const {
  const json::Value* ts = json::Find(Meta(*object_), "deletionTimestamp");
  return ts != nullptr && !ts->IsNull();
}

StatusOr<Deployment> Deployment::From(const json::Value& object, std::string_view name) {
  if (Status s = CheckDeploymentShape(object, name); !s.ok()) return s;
  return Deployment(object);
}
int Deployment::replicas() const {
  return SpecReplicas(json());
}
bool Deployment::paused() const {
  return PausedOf(json());
}
PodTemplate Deployment::podTemplate() const {
  return PodTemplate(TemplateOf(json()));
}
int Deployment::minReadySeconds() const {
  return ClampInt(IntAt(json::Path(&json(), {"spec", "minReadySeconds"}), 0));
}
std::optional<long long> Deployment::progressDeadlineSeconds() const {
  const json::Value* v = json::Path(&json(), {"spec", "progressDeadlineSeconds"});
  if (v == nullptr || !v->IsInt64()) return std::nullopt;
  return v->GetInt64();
}
long long Deployment::revisionHistoryLimit() const {
  return IntAt(json::Path(&json(), {"spec", "revisionHistoryLimit"}), 10);
}
const json::Value* Deployment::strategy() const {
  const json::Value* s = json::Path(&json(), {"spec", "strategy"});
  return s != nullptr && s->IsObject() ? s : nullptr;
}
const json::Value* Deployment::selector() const {
  const json::Value* s = json::Path(&json(), {"spec", "selector"});
  return s != nullptr && s->IsObject() ? s : nullptr;
}
bool Deployment::recreate() const {
  return json::StringOr(strategy(), "type") == "Recreate";
}
long long Deployment::observedGeneration() const {
  return IntAt(json::Path(&json(), {"status", "observedGeneration"}), 0);
}
long long Deployment::statusReplicas() const {
  return IntAt(json::Path(&json(), {"status", "replicas"}), 0);
}
long long Deployment::updatedReplicas() const {
  return IntAt(json::Path(&json(), {"status", "updatedReplicas"}), 0);
}
bool Deployment::ControllerCaughtUp() const {
  return observedGeneration() >= generation() && updatedReplicas() == statusReplicas() &&
         statusReplicas() == replicas();
}
bool Deployment::PodsOnNewestReplicaSet() const {
  return updatedReplicas() == statusReplicas();
}
std::optional<Condition> Deployment::condition(std::string_view type) const {
  return ConditionView(json(), type);
}

StatusOr<ReplicaSet> ReplicaSet::From(const json::Value& object, std::string_view name) {
  if (Status s = CheckReplicaSetShape(object, name); !s.ok()) return s;
  return ReplicaSet(object);
}
int ReplicaSet::replicas() const {
  return SpecReplicas(json());
}
PodTemplate ReplicaSet::podTemplate() const {
  return PodTemplate(TemplateOf(json()));
}
std::string_view ReplicaSet::selectorMatchLabel(std::string_view key) const {
  return json::StringOr(json::Path(&json(), {"spec", "selector", "matchLabels"}), key);
}
StatusOr<StatefulSet> StatefulSet::From(const json::Value& object, std::string_view name) {
  if (Status s = CheckStatefulSetShape(object, name); !s.ok()) return s;
  return StatefulSet(object);
}
int StatefulSet::replicas() const {
  return SpecReplicas(json());
}
PodTemplate StatefulSet::podTemplate() const {
  return PodTemplate(TemplateOf(json()));
}
int StatefulSet::minReadySeconds() const {
  return ClampInt(IntAt(json::Path(&json(), {"spec", "minReadySeconds"}), 0));
}
bool StatefulSet::parallel() const {
  return json::StringOr(json::Find(&json(), "spec"), "podManagementPolicy") == "Parallel";
}
int StatefulSet::ordinalStart() const {
  return ClampInt(IntAt(json::Path(&json(), {"spec", "ordinals", "start"}), 0));
}
std::string_view StatefulSet::updateStrategy() const {
  std::string_view type = json::StringOr(json::Path(&json(), {"spec", "updateStrategy"}), "type");
  return type.empty() ? std::string_view("RollingUpdate") : type;
}
int StatefulSet::partition() const {
  return ClampInt(
      IntAt(json::Path(&json(), {"spec", "updateStrategy", "rollingUpdate", "partition"}), 0));
}
const json::Value* StatefulSet::maxUnavailable() const {
  const json::Value* v =
      json::Path(&json(), {"spec", "updateStrategy", "rollingUpdate", "maxUnavailable"});
  return v != nullptr && !v->IsNull() ? v : nullptr;
}
long long StatefulSet::observedGeneration() const {
  return IntAt(json::Path(&json(), {"status", "observedGeneration"}), 0);
}
long long StatefulSet::statusReplicas() const {
  return IntAt(json::Path(&json(), {"status", "replicas"}), 0);
}
long long StatefulSet::readyReplicas() const {
  return IntAt(json::Path(&json(), {"status", "readyReplicas"}), 0);
}
long long StatefulSet::currentReplicas() const {
  return IntAt(json::Path(&json(), {"status", "currentReplicas"}), 0);
}
long long StatefulSet::updatedReplicas() const {
  return IntAt(json::Path(&json(), {"status", "updatedReplicas"}), 0);
}
std::string_view StatefulSet::currentRevision() const {
  return json::StringOr(json::Find(&json(), "status"), "currentRevision");
}
std::string_view StatefulSet::updateRevision() const {
  return json::StringOr(json::Find(&json(), "status"), "updateRevision");
}
bool StatefulSet::ControllerObserved() const {
  return observedGeneration() >= generation();
}
std::optional<int> StatefulSet::OrdinalOf(std::string_view podName) const {
  const std::string_view set = name();
  if (set.empty() || podName.size() < set.size() + 2 || !podName.starts_with(set) ||
      podName[set.size()] != '-') {
    return std::nullopt;
  }
  const std::string_view digits = podName.substr(set.size() + 1);
  long long n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
    if (n > std::numeric_limits<int>::max()) return std::nullopt;
  }
  return static_cast<int>(n);
}

int ObjectView::revision() const {
  std::string_view r = annotation("deployment.kubernetes.io/revision").value_or("");
  int n = 0;
  for (char c : r) {
    if (c < '0' || c > '9' || n > 100000000) return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::string_view Container::name() const {
  return json::StringOr(c_, "name");
}
std::string_view Container::image() const {
  return json::StringOr(c_, "image");
}
const json::Value* Container::resources(std::string_view kind) const {
  const json::Value* r = json::Path(c_, {"resources", kind});
  return r != nullptr && r->IsObject() ? r : nullptr;
}

std::string_view ContainerStatus::name() const {
  return json::StringOr(s_, "name");
}
std::string_view ContainerStatus::image() const {
  return json::StringOr(s_, "image");
}
std::string_view ContainerStatus::imageID() const {
  return json::StringOr(s_, "imageID");
}
std::string_view ContainerStatus::containerID() const {
  return json::StringOr(s_, "containerID");
}
std::optional<long long> ContainerStatus::restartCount() const {
  const json::Value* rc = json::Find(s_, "restartCount");
  if (rc == nullptr || !rc->IsInt64()) return std::nullopt;
  return rc->GetInt64();
}
bool ContainerStatus::running() const {
  const json::Value* r = json::Path(s_, {"state", "running"});
  return r != nullptr && !r->IsNull();
}
std::string_view ContainerStatus::waitingReason() const {
  return json::StringOr(json::Path(s_, {"state", "waiting"}), "reason");
}
std::string_view ContainerStatus::waitingMessage() const {
  return json::StringOr(json::Path(s_, {"state", "waiting"}), "message");
}
std::string_view ContainerStatus::lastTerminatedContainerID() const {
  return json::StringOr(json::Path(s_, {"lastState", "terminated"}), "containerID");
}
bool ContainerStatus::reportsResources() const {
  const json::Value* r = json::Find(s_, "resources");
  return r != nullptr && !r->IsNull();
}
const json::Value* ContainerStatus::resources(std::string_view kind) const {
  const json::Value* r = json::Path(s_, {"resources", kind});
  return r != nullptr && r->IsObject() ? r : nullptr;
}

StatusOr<Pod> Pod::From(const json::Value& object, std::string_view name) {
  if (Status s = CheckPodShape(object, name); !s.ok()) return s;
  return Pod(object);
}
std::string_view Pod::phase() const {
  return json::StringOr(json::Find(&json(), "status"), "phase");
}
bool Pod::live() const {
  const std::string_view p = phase();
  return !deleting() && p != "Succeeded" && p != "Failed";
}
std::optional<Condition> Pod::condition(std::string_view type) const {
  return ConditionView(json(), type);
}
bool Pod::conditionTrue(std::string_view type) const {
  const std::optional<Condition> c = condition(type);
  return c && c->isTrue();
}

std::string_view Condition::type() const {
  return json::StringOr(c_, "type");
}
std::string_view Condition::status() const {
  return json::StringOr(c_, "status");
}
std::string_view Condition::reason() const {
  return json::StringOr(c_, "reason");
}
std::string_view Condition::message() const {
  return json::StringOr(c_, "message");
}
std::string_view Condition::lastTransitionTime() const {
  return json::StringOr(c_, "lastTransitionTime");
}
std::string_view Condition::lastUpdateTime() const {
  return json::StringOr(c_, "lastUpdateTime");
}

std::optional<Container> PodSpecView::container(std::string_view name) const {
  return NamedEntry<Container>(json(), {"spec", "containers"}, name);
}
std::vector<Container> PodSpecView::containers() const {
  return Entries<Container>(json(), {"spec", "containers"});
}
bool PodSpecView::hasReadinessGate(std::string_view type) const {
  return json::FindNamed(json::Path(&json(), {"spec", "readinessGates"}), "conditionType", type) !=
         nullptr;
}

StatusOr<PodTemplate> PodTemplate::From(const json::Value& podTemplate, std::string_view name) {
  if (Status s = CheckPodTemplateShape(podTemplate, name); !s.ok()) return s;
  return PodTemplate(podTemplate);
}

std::optional<ContainerStatus> Pod::containerStatus(std::string_view name) const {
  return NamedEntry<ContainerStatus>(json(), {"status", "containerStatuses"}, name);
}
std::vector<ContainerStatus> Pod::containerStatuses() const {
  return Entries<ContainerStatus>(json(), {"status", "containerStatuses"});
}
std::string_view Pod::nodeName() const {
  return json::StringOr(json::Find(&json(), "spec"), "nodeName");
}
std::optional<long long> Pod::observedGeneration() const {
  const json::Value* v = json::Path(&json(), {"status", "observedGeneration"});
  if (v == nullptr || !v->IsInt64()) return std::nullopt;
  return v->GetInt64();
}
std::string_view Pod::legacyResize() const {
  return json::StringOr(json::Find(&json(), "status"), "resize");
}

}  // namespace iw::kube
