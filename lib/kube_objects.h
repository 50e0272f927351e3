// Typed, zero-copy views over the Kubernetes objects the product reads: a Deployment, a ReplicaSet,
// a StatefulSet and a Pod. A view points into a JSON value it does not own (the value must outlive
// it) and is obtainable only through From, which runs the object's shape check: every field an
// accessor reads has the type Kubernetes gives it (null counts as absent), so accessors need no
// error paths. Each fact about an object is computed here and nowhere else (DESIGN.md §6.1).
//
// Thread safety: a view is a const pointer; as safe to share as the value it points into.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/json.h"
#include "lib/status.h"

namespace iw::kube {

// Shape checks of objects from the outside (admission requests, API reads). InvalidArgument names
// the first wrong field as `<name>.<path>` and the expected type, e.g. `object.metadata.labels
// must be an object of string values, got array`.
// CheckMetadataShape: the object and its metadata (labels, annotations, finalizers).
Status CheckMetadataShape(const json::Value& object, std::string_view name);
// CheckDeploymentShape: the above plus spec (paused, replicas, minReadySeconds, strategy,
// template with its labels, annotations, containers' names and images, readinessGates) and
// status counters.
Status CheckDeploymentShape(const json::Value& deployment, std::string_view name);
// CheckReplicaSetShape: metadata plus spec.replicas and the template's labels and containers.
Status CheckReplicaSetShape(const json::Value& replicaSet, std::string_view name);
// CheckStatefulSetShape: metadata plus spec (replicas, minReadySeconds, podManagementPolicy,
// ordinals.start, updateStrategy with rollingUpdate's partition and maxUnavailable, the template
// as a Deployment's) and status (observedGeneration, the replica counters, the two revisions).
Status CheckStatefulSetShape(const json::Value& statefulSet, std::string_view name);
// CheckPodShape: metadata plus spec.containers, spec.readinessGates, status.phase,
// status.conditions and status.containerStatuses.
Status CheckPodShape(const json::Value& pod, std::string_view name);
// CheckPodTemplateShape: a pod template on its own (a Deployment's or ReplicaSet's is checked with
// it): metadata plus spec.containers, spec.initContainers and spec.readinessGates.
Status CheckPodTemplateShape(const json::Value& podTemplate, std::string_view name);

// What every object has: its metadata.
class ObjectView {
 public:
  // The view of any object's metadata, after CheckMetadataShape(object, name): what admission
  // checks that read only labels and annotations take (of a pod, a Deployment or a template).
  static StatusOr<ObjectView> From(const json::Value& object, std::string_view name = "object");

  const json::Value& json() const { return *object_; }

  std::string_view name() const;
  std::string_view ns() const;
  std::string_view uid() const;
  std::string_view resourceVersion() const;
  // metadata.generation; 0 when absent.
  long long generation() const;
  // A value of metadata.labels / metadata.annotations; nullopt when absent.
  std::optional<std::string_view> label(std::string_view key) const;
  std::optional<std::string_view> annotation(std::string_view key) const;
  // metadata.labels / metadata.annotations (an object), or nullptr when absent.
  const json::Value* labels() const;
  const json::Value* annotations() const;
  // metadata.finalizers has `finalizer`.
  bool hasFinalizer(std::string_view finalizer) const;
  // The uid of the ownerReference with controller: true; empty when there is none.
  std::string_view controllerUid() const;
  // metadata.deletionTimestamp is set.
  bool deleting() const;
  // The deployment.kubernetes.io/revision annotation (of a Deployment or ReplicaSet) as a number;
  // 0 when absent or not one.
  int revision() const;

 protected:
  explicit ObjectView(const json::Value& object) : object_(&object) {}

 private:
  const json::Value* object_;
};

class PodTemplate;

// An entry of status.conditions (of a pod, a Deployment, ...). Fields of a wrong type read as
// empty.
class Condition {
 public:
  explicit Condition(const json::Value& condition) : c_(&condition) {}

  std::string_view type() const;
  std::string_view status() const;
  std::string_view reason() const;
  std::string_view message() const;
  std::string_view lastTransitionTime() const;
  std::string_view lastUpdateTime() const;
  // status is "True".
  bool isTrue() const { return status() == "True"; }

 private:
  const json::Value* c_;
};

class Deployment : public ObjectView {
 public:
  // The view of `object`, after CheckDeploymentShape(object, name).
  static StatusOr<Deployment> From(const json::Value& object, std::string_view name = "object");

  // spec.replicas; 1 when absent (the API server's default), never below 0.
  int replicas() const;
  // spec.paused; absent is false.
  bool paused() const;
  // spec.template; an empty template when absent.
  PodTemplate podTemplate() const;
  // spec.minReadySeconds; 0 when absent or negative.
  int minReadySeconds() const;
  // spec.progressDeadlineSeconds; nullopt when absent.
  std::optional<long long> progressDeadlineSeconds() const;
  // spec.revisionHistoryLimit; 10 (the API default) when absent.
  long long revisionHistoryLimit() const;
  // spec.strategy (an object), or nullptr when absent.
  const json::Value* strategy() const;
  // spec.selector (an object, as lib/label_selector reads it), or nullptr when absent.
  const json::Value* selector() const;
  // spec.strategy.type is Recreate (absent is RollingUpdate, the API server's default).
  bool recreate() const;
  // status.observedGeneration, status.replicas, status.updatedReplicas; 0 when absent.
  long long observedGeneration() const;
  long long statusReplicas() const;
  long long updatedReplicas() const;
  // The Deployment controller has caught up with the current spec: it observed this generation
  // (observedGeneration >= generation, kubectl rollout status' test) and every pod it counts is
  // of the newest ReplicaSet, at spec.replicas (status.replicas == updatedReplicas == replicas).
  // The finish of an update asks this (the controller adopted the written ReplicaSet); the start
  // asks the weaker PodsOnNewestReplicaSet.
  bool ControllerCaughtUp() const;
  // As of the controller's last status, every pod it counts is of its newest ReplicaSet
  // (status.updatedReplicas == status.replicas): no rollout of a template was under way when it
  // last synced. Unlike ControllerCaughtUp it holds while the controller has not observed the
  // newest generation yet and while a scale's pods are being created or deleted: a spec write
  // that leaves the template alone (replicas, paused, minReadySeconds, strategy) starts no
  // rollout, and whether an unobserved write changed the template only the ReplicaSets tell
  // (the loop's check, DESIGN.md §3). The start of an update asks this.
  bool PodsOnNewestReplicaSet() const;
  // status.conditions[type == `type`]; nullopt when absent.
  std::optional<Condition> condition(std::string_view type) const;

 private:
  using ObjectView::ObjectView;
};

class ReplicaSet : public ObjectView {
 public:
  // The view of `object`, after CheckReplicaSetShape(object, name).
  static StatusOr<ReplicaSet> From(const json::Value& object, std::string_view name = "object");

  // spec.replicas; 1 when absent, never below 0.
  int replicas() const;
  // spec.template; an empty template when absent.
  PodTemplate podTemplate() const;
  // spec.selector.matchLabels[`key`]; empty when absent.
  std::string_view selectorMatchLabel(std::string_view key) const;

 private:
  using ObjectView::ObjectView;
};

// An entry of spec.containers (of a pod or a pod template). Fields of a wrong type read as absent.
class Container {
 public:
  explicit Container(const json::Value& container) : c_(&container) {}
  const json::Value& json() const { return *c_; }

  std::string_view name() const;
  std::string_view image() const;
  // resources.<kind> ("requests" or "limits"), an object of quantities; nullptr when absent.
  const json::Value* resources(std::string_view kind) const;

 private:
  const json::Value* c_;
};

// An entry of status.containerStatuses, as the kubelet reports it. Fields of a wrong type read as
// absent.
class ContainerStatus {
 public:
  explicit ContainerStatus(const json::Value& status) : s_(&status) {}

  std::string_view name() const;
  std::string_view image() const;
  std::string_view imageID() const;
  // The running (or last) container's id; empty before the first start.
  std::string_view containerID() const;
  // restartCount; nullopt when absent.
  std::optional<long long> restartCount() const;
  // state.running is set.
  bool running() const;
  // state.waiting.reason and .message; empty when the container is not waiting.
  std::string_view waitingReason() const;
  std::string_view waitingMessage() const;
  // lastState.terminated.containerID: the container this one replaced; empty when none.
  std::string_view lastTerminatedContainerID() const;
  // The kubelet reports the container's resources (kubelets from 1.33, or 1.30-1.32 with the
  // InPlacePodVerticalScaling gate): `resources` is set and not null.
  bool reportsResources() const;
  // resources.<kind> ("requests" or "limits"); nullptr when absent.
  const json::Value* resources(std::string_view kind) const;

 private:
  const json::Value* s_;
};
// A StatefulSet (DESIGN.md §4.8). Its pods are named `<name>-<ordinal>`; the controller
// deletes a pod for three reasons only (pkg/controller/statefulset, 1.30 to 1.37): a terminal
// phase, an ordinal outside [start, start + replicas) (scale-down), and, for RollingUpdate, a
// controller-revision-hash other than status.updateRevision at an ordinal >= start + partition.
class StatefulSet : public ObjectView {
 public:
  // The view of `object`, after CheckStatefulSetShape(object, name).
  static StatusOr<StatefulSet> From(const json::Value& object, std::string_view name = "object");

  // spec.replicas; 1 when absent, never below 0.
  int replicas() const;
  // spec.template; an empty template when absent.
  PodTemplate podTemplate() const;
  // spec.minReadySeconds; 0 when absent or negative.
  int minReadySeconds() const;
  // spec.podManagementPolicy is Parallel (absent is OrderedReady, the API server's default).
  bool parallel() const;
  // spec.ordinals.start; 0 when absent or negative.
  int ordinalStart() const;
  // spec.updateStrategy.type; "RollingUpdate" when absent (the API server's default). The 1.37
  // alpha "Recreate" reads as itself.
  std::string_view updateStrategy() const;
  // updateStrategy() is RollingUpdate: the only strategy in which the controller rolls pods itself.
  bool rollingUpdate() const { return updateStrategy() == "RollingUpdate"; }
  // spec.updateStrategy.rollingUpdate.partition; 0 when absent or negative.
  int partition() const;
  // spec.updateStrategy.rollingUpdate.maxUnavailable (an int or a percent string), or nullptr
  // when absent (the controller then takes one pod at a time).
  const json::Value* maxUnavailable() const;
  // status.observedGeneration, status.replicas, readyReplicas, currentReplicas,
  // updatedReplicas; 0 when absent.
  long long observedGeneration() const;
  long long statusReplicas() const;
  long long readyReplicas() const;
  long long currentReplicas() const;
  long long updatedReplicas() const;
  // status.currentRevision, status.updateRevision: the ControllerRevision names (the pods'
  // controller-revision-hash values); empty when absent.
  std::string_view currentRevision() const;
  std::string_view updateRevision() const;
  // The controller observed this generation (status.observedGeneration >= metadata.generation):
  // its status.updateRevision is the revision of the current spec.template.
  bool ControllerObserved() const;
  // The ordinal of a pod named `podName` of this StatefulSet (`<name>-<digits>`, as the
  // controller's getParentNameAndOrdinal parses it); nullopt for any other name.
  std::optional<int> OrdinalOf(std::string_view podName) const;

 private:
  using ObjectView::ObjectView;
};

// What a pod and a pod template share: metadata, and a pod spec's containers and readiness gates.
class PodSpecView : public ObjectView {
 public:
  // spec.containers[name == `name`]; nullopt when there is no such container.
  std::optional<Container> container(std::string_view name) const;
  // spec.containers, in order.
  std::vector<Container> containers() const;
  // spec.readinessGates has an entry with conditionType `type`.
  bool hasReadinessGate(std::string_view type) const;

 protected:
  using ObjectView::ObjectView;
};

// A pod template: spec.template of a Deployment or ReplicaSet (their podTemplate(), whose shape
// their From checked), or one on its own through From. Its name, uid, ... read empty.
class PodTemplate : public PodSpecView {
 public:
  // The view of `podTemplate`, after CheckPodTemplateShape(podTemplate, name).
  static StatusOr<PodTemplate> From(const json::Value& podTemplate,
                                    std::string_view name = "template");

 private:
  friend class Deployment;
  friend class ReplicaSet;
  friend class StatefulSet;
  using PodSpecView::PodSpecView;
};

class Pod : public PodSpecView {
 public:
  // The view of `object`, after CheckPodShape(object, name).
  static StatusOr<Pod> From(const json::Value& object, std::string_view name = "object");

  // status.containerStatuses[name == `name`]; nullopt before the kubelet reports it.
  std::optional<ContainerStatus> containerStatus(std::string_view name) const;
  // status.containerStatuses, in order.
  std::vector<ContainerStatus> containerStatuses() const;
  // spec.nodeName; empty before the pod is scheduled.
  std::string_view nodeName() const;
  // status.observedGeneration (kubelets report it from 1.34, KEP-5067); nullopt when absent.
  std::optional<long long> observedGeneration() const;
  // The deprecated status.resize (kubelets before 1.33); empty when absent.
  std::string_view legacyResize() const;

  // status.phase; empty when absent.
  std::string_view phase() const;
  // Not being deleted and not in a terminal phase (Succeeded, Failed).
  bool live() const;
  // status.conditions[type == `type`]; nullopt when absent.
  std::optional<Condition> condition(std::string_view type) const;
  // The condition `type` has status "True".
  bool conditionTrue(std::string_view type) const;

 private:
  using PodSpecView::PodSpecView;
};

// A string of metadata of any object (name, namespace, uid, resourceVersion, continue of a list,
// ...); empty when absent or not a string. The views' name(), ns(), ... read it.
std::string_view MetaOf(const json::Value& object, std::string_view field);
// A value of metadata.labels / metadata.annotations of any object (a view's label() and
// annotation() call these; they serve code that holds an object being built or mutated); nullopt
// when absent or not a string.
std::optional<std::string_view> LabelOf(const json::Value& object, std::string_view key);
std::optional<std::string_view> AnnotationOf(const json::Value& object, std::string_view key);
// The ownerReference with controller: true of any object, or nullptr (a view's controllerUid()
// reads it).
const json::Value* ControllerRefOf(const json::Value& object);
// The name of that owner when it is of `kind`; empty otherwise.
std::string_view ControllerNameOf(const json::Value& object, std::string_view kind);
// spec.paused of a Deployment being built or patched; absent is false (Deployment::paused()).
bool PausedOf(const json::Value& deployment);
// status.conditions[type == `type`] of any object, or nullptr.
const json::Value* ConditionOf(const json::Value& object, std::string_view type);

}  // namespace iw::kube
