#include "server/loop/loop_projections.h"

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "lib/clip.h"
#include "lib/kube_objects.h"

namespace iw::loop {

namespace {

using json::Value;

constexpr std::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

// A template (or object) from a watch event, not shape-checked yet: opted in when its metadata
// reads so; a malformed one is not (the fresh read reports it).
bool OptedIn(const Value* templ) {
  if (templ == nullptr) return false;
  StatusOr<kube::ObjectView> view = kube::ObjectView::From(*templ, "template");
  return view.ok() && deployment::IsOptedIn(*view);
}

// A copy of `full` without managedFields and the last-applied annotation.
void CopyTrimmed(const Value& full, Value& out, json::Allocator& alloc) {
  out.CopyFrom(full, alloc);
  if (Value* meta = json::FindMutable(&out, "metadata")) {
    json::Remove(*meta, "managedFields");
    if (Value* annotations = json::FindMutable(meta, "annotations")) {
      json::Remove(*annotations, kLastApplied);
    }
  }
}

}  // namespace

kube::Projection DeploymentProjection() {
  return
      [](const Value& full, Value& out, json::Allocator& alloc) { CopyTrimmed(full, out, alloc); };
}

kube::Projection ReplicaSetProjection() {
  // What the loop reads of a cached ReplicaSet: of one a Deployment controls, its metadata,
  // spec.replicas and spec.selector, and its template only when that is opted in (the planner
  // hashes and compares opted-in templates; of another template it reads only that it is not
  // opted in, which an absent template says too: such a Deployment is read through the API,
  // PodsCacheable). Of any other ReplicaSet only what the uid index needs (a pod's owner).
  static const kube::Projection identity =
      kube::KeepFields({"metadata.name", "metadata.namespace", "metadata.uid",
                        "metadata.resourceVersion", "metadata.ownerReferences"});
  return [](const Value& full, Value& out, json::Allocator& alloc) {
    if (kube::ControllerNameOf(full, "Deployment").empty()) {
      identity(full, out, alloc);
      return;
    }
    CopyTrimmed(full, out, alloc);
    json::Remove(out, "status");
    Value* spec = json::FindMutable(&out, "spec");
    if (spec != nullptr && !OptedIn(json::Find(spec, "template"))) json::Remove(*spec, "template");
  };
}

kube::Projection StatefulSetProjection() {
  static const kube::Projection identity = kube::KeepFields(
      {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion"});
  return [](const Value& full, Value& out, json::Allocator& alloc) {
    identity(full, out, alloc);
    if (!out.IsObject()) out.SetObject();
    if (std::optional<std::string_view> record =
            kube::AnnotationOf(full, keys::kInProgressAnnotation)) {
      Value& annotations =
          json::EnsureObject(json::EnsureObject(out, "metadata", alloc), "annotations", alloc);
      json::SetString(annotations, keys::kInProgressAnnotation, *record, alloc);
    }
  };
}

kube::Projection PodProjection() {
  static const std::vector<std::string> fields = {
      "metadata.name",
      "metadata.namespace",
      "metadata.uid",
      "metadata.resourceVersion",
      "metadata.generation",
      "metadata.deletionTimestamp",
      "metadata.labels",
      "metadata.annotations",
      "metadata.finalizers",
      "metadata.ownerReferences[].uid",
      "metadata.ownerReferences[].controller",
      "spec.containers[].name",
      "spec.containers[].image",
      "spec.containers[].resources",  // an in-place resize (DESIGN.md §3.1)
      "spec.nodeName",                // named when its kubelet cannot resize
      "spec.readinessGates",
      "status.phase",
      "status.observedGeneration",
      "status.resize",  // the deprecated resize status of kubelets before 1.33
      "status.containerStatuses[].name",
      "status.containerStatuses[].image",
      "status.containerStatuses[].imageID",
      "status.containerStatuses[].containerID",
      "status.containerStatuses[].restartCount",
      "status.containerStatuses[].resources",
      "status.containerStatuses[].state.running",
      "status.containerStatuses[].state.waiting.reason",
      "status.containerStatuses[].state.waiting.message",
      "status.containerStatuses[].lastState.terminated.containerID",
  };
  auto keep = std::make_shared<const kube::Projection>(kube::KeepFields(fields));
  return [keep](const Value& full, Value& out, json::Allocator& alloc) {
    (*keep)(full, out, alloc);
    if (!out.IsObject()) out.SetObject();
    Value& status = json::EnsureObject(out, "status", alloc);
    // The phase only matters when it ends the pod (kube::Pod::live).
    const std::string_view phase = json::StringOr(&status, "phase");
    if (phase != "Succeeded" && phase != "Failed") json::Remove(status, "phase");
    // The image a container reports and the container it replaced only decide whether an
    // Updating pod's restart is done, and why a container waits only what an Updating pod
    // reports stuck on (an image the kubelet cannot pull or run); whether a container runs, also
    // whether the pod's kubelet can resize it (any state). A pod labelled Normal at its write
    // reads as Updating until its record is done (pod_update::StateOf): it keeps what that reads
    // of the recorded containers once done too, so that the cached pod reads as the stored one.
    if (Value* statuses = json::FindMutable(&status, "containerStatuses");
        statuses != nullptr && statuses->IsArray()) {
      // (A pod of another shape than Kubernetes gives is kept whole: the planner refuses it.)
      const StatusOr<kube::Pod> pod = kube::Pod::From(out, "pod");
      const bool updating =
          !pod.ok() || pod_update::StateOf(*pod) == pod_update::PodState::kUpdating;
      std::optional<pod_update::UpdateState> record;
      if (!updating && pod_update::LabelStateOf(*pod) == pod_update::PodState::kNormal) {
        record = pod_update::ReadUpdateState(*pod);
        if (record && !record->completesOnReport) record.reset();
      }
      for (auto& st : statuses->GetArray()) {
        if (record &&
            record->lastContainerStatuses.contains(std::string(json::StringOr(&st, "name")))) {
          if (Value* state = json::FindMutable(&st, "state")) json::Remove(*state, "waiting");
          continue;
        }
        if (updating) {
          // The kubelet's message, clipped: it is quoted in one Event only.
          Value* message = json::FindMutable(
              json::FindMutable(json::FindMutable(&st, "state"), "waiting"), "message");
          if (message != nullptr && message->IsString() &&
              message->GetStringLength() > kClipBytes) {
            const std::string clipped = Clip(json::View(*message));
            message->SetString(clipped.data(), static_cast<rapidjson::SizeType>(clipped.size()),
                               alloc);
          }
          continue;
        }
        json::Remove(st, "image");
        json::Remove(st, "lastState");
        if (Value* state = json::FindMutable(&st, "state")) json::Remove(*state, "waiting");
      }
    }
    // Conditions: only those the loop reads, with the fields it reads: Ready (availability; its
    // lastTransitionTime starts minReadySeconds), the readiness gates' (our gate's
    // lastTransitionTime anchors the drain), and the kubelet's resize conditions (their reason and
    // message say whether a resize can go on).
    const Value* conditions = json::Path(&full, {"status", "conditions"});
    if (conditions == nullptr || !conditions->IsArray()) return;
    const Value* gates = json::Path(&full, {"spec", "readinessGates"});
    auto gated = [gates](std::string_view type) {
      return json::FindNamed(gates, "conditionType", type) != nullptr;
    };
    auto resize = [](std::string_view type) {
      return type == "PodResizePending" || type == "PodResizeInProgress";
    };
    auto wanted = [&](std::string_view type) {
      return type == "Ready" || gated(type) || resize(type);
    };
    Value kept(rapidjson::kArrayType);
    for (const auto& c : conditions->GetArray()) {
      const std::string_view type = json::StringOr(&c, "type");
      if (!wanted(type)) continue;
      Value k(rapidjson::kObjectType);
      auto copy = [&k, &c, &alloc](std::string_view field) {
        if (const Value* v = json::Find(&c, field)) json::Set(k, field, *v, alloc);
      };
      copy("type");
      copy("status");
      if (type == keys::kReadyCondition || type == "Ready") copy("lastTransitionTime");
      if (resize(type)) {
        copy("reason");
        copy("message");
      }
      kept.PushBack(k, alloc);
    }
    status.AddMember("conditions", kept, alloc);
  };
}

bool PodsCacheable(const json::Value& deployment,
                   const std::vector<const json::Value*>& replicaSets) {
  if (!OptedIn(json::Path(&deployment, {"spec", "template"}))) return false;
  bool active = false;
  for (const Value* raw : replicaSets) {
    if (raw == nullptr) continue;
    StatusOr<kube::ReplicaSet> rs = kube::ReplicaSet::From(*raw, "replicaSet");
    if (!rs.ok()) return false;  // the fresh read reports it
    if (rs->replicas() == 0) continue;
    if (!deployment::IsOptedIn(rs->podTemplate())) return false;
    active = true;
  }
  return active;
}

}  // namespace iw::loop
