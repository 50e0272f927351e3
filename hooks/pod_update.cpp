#include "hooks/pod_update.h"
#include "lib/rfc3339.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <ctime>

#include "hooks/eligibility.h"
#include "hooks/keys.h"
#include "lib/clip.h"
#include "lib/image_ref.h"
#include "lib/kube_objects.h"
#include "lib/kube_patch.h"
#include "lib/list_text.h"
#include "lib/quantity.h"

namespace iw::pod_update {

namespace {

using json::Allocator;
using json::Value;

// Template keys the pod write never touches: ours, and the ReplicaSet's hash label.
bool IsReservedLabel(std::string_view key) {
  return key == keys::kStateLabel || key == keys::kPodTemplateHashLabel;
}
bool IsReservedAnnotation(std::string_view key) {
  return key == keys::kStateTimestampAnnotation || key == keys::kUpdateStateAnnotation ||
         key == keys::kHookTimeoutAnnotation;
}

std::map<std::string, std::string> StringMap(const Value* object) {
  std::map<std::string, std::string> out;
  if (object == nullptr || !object->IsObject()) return out;
  for (const auto& m : object->GetObject()) {
    if (m.value.IsString()) out[std::string(json::View(m.name))] = std::string(json::View(m.value));
  }
  return out;
}

std::optional<std::string> PodLabel(const kube::Pod& pod, std::string_view key) {
  std::optional<std::string_view> v = pod.label(key);
  return v ? std::optional<std::string>(*v) : std::nullopt;
}
std::optional<std::string> PodAnnotation(const kube::Pod& pod, std::string_view key) {
  std::optional<std::string_view> v = pod.annotation(key);
  return v ? std::optional<std::string>(*v) : std::nullopt;
}

std::string PodName(const kube::Pod& pod) {
  return std::string(pod.name());
}

// The pod's state label `state`, stamped `now`, and a hook-timeout marker cleared.
kube::PatchBuilder StateChange(const kube::Pod& pod, PodState state, Clock::time_point now) {
  kube::PatchBuilder patch;
  patch.Label(keys::kStateLabel, StateName(state))
      .Annotation(keys::kStateTimestampAnnotation, rfc3339::Format(now));
  if (pod.annotation(keys::kHookTimeoutAnnotation)) {
    patch.Annotation(keys::kHookTimeoutAnnotation, std::nullopt);
  }
  return patch;
}

// The readiness-gate condition at `value`: its transition time kept when the status stays. A
// change to False also records its time to the millisecond in the gate-sent annotation (the drain
// runs from it); True removes that record.
void SetGateCondition(kube::PatchBuilder& patch, const kube::Pod& pod, bool value,
                      Clock::time_point now) {
  const std::string ts = rfc3339::Format(now);
  const std::optional<kube::Condition> old = pod.condition(keys::kReadyCondition);
  const bool same = old && old->isTrue() == value && !old->lastTransitionTime().empty();
  if (!value && !same) {
    patch.Annotation(keys::kGateSentAnnotation, rfc3339::FormatMillis(now));
  } else if (value && pod.annotation(keys::kGateSentAnnotation)) {
    patch.Annotation(keys::kGateSentAnnotation, std::nullopt);
  }
  patch.SetCondition({.type = keys::kReadyCondition,
                      .status = value ? "True" : "False",
                      .reason = value ? "InPlaceUpdateReady" : "StartInPlaceUpdate",
                      .message = value ? "no in-place update holds this pod"
                                       : "inplace-webhook: out of service for an in-place update",
                      .lastUpdateTime = {},
                      .lastTransitionTime = same ? std::string(old->lastTransitionTime()) : ts});
}

std::string Seconds(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

std::string DescribeHook(const lifecycle::Hook& hook) {
  std::string out;
  for (const auto& [k, v] : hook.labelsHandler) AppendItem(out, "label " + k + "=" + v);
  for (const auto& f : hook.finalizersHandler) AppendItem(out, "finalizer " + f);
  return out;
}

std::string DescribeChanges(const Changes& c) {
  std::string out;
  auto add = [&out](const std::string& s) { AppendItem(out, s, "; "); };
  for (const auto& [name, r] : c.resources) {
    std::string text = "container " + name + " resources";
    for (auto [kind, map] : {std::pair{"requests", &r.requests}, std::pair{"limits", &r.limits}}) {
      for (const auto& [resource, q] : *map) text += " " + resource + " " + kind + " " + q + ",";
    }
    if (text.back() == ',') text.pop_back();
    add(text);
  }
  for (const auto& [name, image] : c.images) add("container " + name + " image " + image);
  for (const auto& [k, v] : c.labels) add("label " + k + (v ? "=" + *v : " removed"));
  for (const auto& [k, v] : c.annotations) add("annotation " + k + (v ? " set" : " removed"));
  return out.empty() ? "no template change" : out;
}

// Everything a decision reads from one pod, computed once.
struct View {
  const kube::Pod* pod = nullptr;
  std::string name;
  PodState state = PodState::kNormal;
  std::optional<UpdateState> updateState;
  bool inRun = false;  // the update-state was written by this run (revision is not `from`)
  Changes changes;
  bool atTarget = false;
  bool hasGate = false;
  std::optional<bool> gate;
  std::string stateTimestamp;
  std::optional<Clock::time_point> stateTime;
  bool preHooked = false;
  long long grace = 0;       // the drain before the pod write (GraceSeconds)
  bool drainNeeded = false;  // the gate must be False before the pod write
};

View Look(const Target& target, const Rules& rules, const kube::Pod& pod) {
  View v;
  v.pod = &pod;
  v.name = PodName(pod);
  v.state = StateOf(pod);
  v.updateState = ReadUpdateState(pod);
  v.inRun =
      v.updateState && !v.updateState->revision.empty() && v.updateState->revision != target.from;
  // Labelled Normal and read as Updating from a record of an earlier update (the kubelet's report
  // says not done for a moment, e.g. a later resize it has not observed yet): not this update's.
  if (v.state == PodState::kUpdating && !v.inRun && LabelStateOf(pod) == PodState::kNormal) {
    v.state = PodState::kNormal;
  }
  v.changes = ComputeChanges(target, pod);
  v.atTarget = v.changes.Empty() && (!v.inRun || v.updateState->revision == target.to);
  v.hasGate = HasGate(pod);
  v.gate = GateStatus(pod);
  v.stateTimestamp = PodAnnotation(pod, keys::kStateTimestampAnnotation).value_or("");
  v.stateTime = rfc3339::Parse(v.stateTimestamp);
  v.preHooked = rules.pre != nullptr && lifecycle::IsPodHooked(*rules.pre, pod);
  v.grace = GraceSeconds(rules, v.hasGate);
  v.drainNeeded =
      v.hasGate && ((rules.pre != nullptr && rules.pre->markPodNotReady) || v.grace > 0);
  return v;
}

void Wake(Step& step, Clock::duration after) {
  if (after < Clock::duration::zero()) after = Clock::duration::zero();
  if (!step.wakeAfter || after < *step.wakeAfter) step.wakeAfter = after;
}

void AddEvent(Step& step, std::string type, std::string reason, std::string message,
              bool onDeployment = false, std::string dedupKey = {}) {
  PodOp op;
  op.kind = PodOp::Kind::kEvent;
  op.event = PodEvent{std::move(type), std::move(reason), std::move(message), onDeployment,
                      std::move(dedupKey)};
  step.ops.push_back(std::move(op));
}

void AddPatch(Step& step, PodOp::Kind kind, json::Document body) {
  PodOp op;
  op.kind = kind;
  op.body = std::move(body);
  step.ops.push_back(std::move(op));
}

// A pod patch (strategic merge) that sets one annotation and nothing else.
void AddAnnotationPatch(Step& step, std::string_view key, std::string_view value) {
  AddPatch(step, PodOp::Kind::kPatch, kube::PatchBuilder().Annotation(key, value).Take());
}

// A change of the gate to `value`, stamped when the writer sends it (PodOp::stampTransition).
void AddGateChange(Step& step, const kube::Pod& pod, bool value, Clock::time_point now) {
  AddPatch(step, PodOp::Kind::kStatusPatch, GatePatch(pod, value, now));
  step.ops.back().stampTransition = true;
}

void SetGate(const View& v, Step& step, bool value, Clock::time_point now) {
  if (!v.hasGate || v.gate == value) return;
  AddGateChange(step, *v.pod, value, now);
}

// Moves the pod to `state` (where its label says otherwise, or a hook-timeout marker is to be
// cleared) with its gate True (where the pod declares it and it is not). Both at once are one
// pods/status write: the API server keeps the labels and annotations of a pods/status write (its
// reset fields are the spec, deletionTimestamp and ownerReferences, 1.30 to 1.37), so a return to
// Normal that the gate's return to True goes with costs no pod write of its own (DESIGN.md §4.3).
void ReturnTo(Step& step, const kube::Pod& pod, PodState state, Clock::time_point now) {
  const bool writeState =
      LabelStateOf(pod) != state || PodAnnotation(pod, keys::kHookTimeoutAnnotation);
  const bool writeGate = HasGate(pod) && GateStatus(pod) != true;
  if (!writeGate) {
    if (writeState) AddPatch(step, PodOp::Kind::kPatch, StatePatch(pod, state, now));
    return;
  }
  AddGateChange(step, pod, true, now);
  if (!writeState) return;
  // The gate's status patch also carries the state (its metadata), one write.
  kube::PatchBuilder both(std::move(step.ops.back().body));
  both.MergeMetadata(StateChange(pod, state, now));
  step.ops.back().body = both.Take();
}

// The pod has waited in its state longer than `timeoutSeconds`: report it once (Events first, then
// the marker annotation, so a failed marker write only repeats Events that are deduplicated).
void CheckTimeout(const View& v, Step& step, std::optional<long long> timeoutSeconds,
                  std::string_view waitingFor, Clock::time_point now) {
  if (!timeoutSeconds || !v.stateTime) return;
  const auto deadline = *v.stateTime + std::chrono::seconds(*timeoutSeconds);
  if (now < deadline) {
    Wake(step, deadline - now);
    return;
  }
  const std::string marker = std::string(StateName(v.state)) + "@" + v.stateTimestamp;
  if (PodAnnotation(*v.pod, keys::kHookTimeoutAnnotation) == marker) return;
  AddEvent(step, "Warning", "HookTimeout",
           "pod " + v.name + " has been " + std::string(StateName(v.state)) + " for " +
               Seconds(now - *v.stateTime) + ", longer than " + std::to_string(*timeoutSeconds) +
               "s, " + std::string(waitingFor) +
               "; the pod stays where it is and the update is stuck (set the Deployment "
               "annotation " +
               std::string(keys::kAbortAnnotation) + "=true to abort)",
           /*onDeployment=*/true, v.name + "/" + marker);
  AddAnnotationPatch(step, keys::kHookTimeoutAnnotation, marker);
  step.timedOut = true;
  step.summary = "hook timeout reported";
}

// The step ends the pod's wait in its state (for the hook-wait histograms).
void EndWait(const View& v, Step& step, Step::Wait wait, Clock::time_point now) {
  step.waitEnded = wait;
  if (v.stateTime)
    step.waitSeconds = std::max(0.0, std::chrono::duration<double>(now - *v.stateTime).count());
}

// The pod waits on `on` in its state, since its state timestamp; `timeoutSeconds`, when set, ends
// the wait's patience (a HookTimeout).
void WaitOn(const View& v, Step& step, PodWait::On on, std::string detail,
            std::optional<long long> timeoutSeconds) {
  step.wait.on = on;
  step.wait.since = v.stateTime;
  if (timeoutSeconds && v.stateTime) {
    step.wait.until = *v.stateTime + std::chrono::seconds(*timeoutSeconds);
  }
  step.wait.detail = std::move(detail);
}

// The containers an Updating pod waits on: the recorded ones (naming an image an admission webhook
// rewrote), else those the target changes.
std::string RestartingContainers(const Target& target, const View& v) {
  std::string out;
  auto add = [&out](const std::string& what) { AppendItem(out, what); };
  if (v.updateState) {
    for (const auto& [name, rec] : v.updateState->lastContainerStatuses) {
      auto image = v.updateState->images.find(name);
      add(image != v.updateState->images.end() && !image->second.got.empty()
              ? name + " (image " + image->second.got + ", rewritten from " + image->second.asked +
                    ")"
              : name);
    }
  }
  if (out.empty()) {
    for (const std::string& name : target.changedContainers) add(name);
  }
  return out;
}

// An Updating pod waits on its containers' restart, or on an image the kubelet does not run
// (`trouble`, FindImageTrouble's finding).
void WaitOnContainers(const Target& target, const Rules& rules, const View& v,
                      const std::optional<ImageTrouble>& trouble, Step& step) {
  if (trouble) {
    WaitOn(v, step, PodWait::On::kImage, trouble->text, rules.updatingTimeoutSeconds);
  } else {
    WaitOn(v, step, PodWait::On::kRestart, RestartingContainers(target, v),
           rules.updatingTimeoutSeconds);
  }
}

// Rewrites only the revision of an update-state this run wrote, when the newer target asks for
// nothing else of the pod.
void Restamp(const Target& target, const View& v, Step& step) {
  UpdateState next = v.updateState.value_or(UpdateState{});
  next.revision = target.to;
  next.changedLabels.insert(target.changedLabels.begin(), target.changedLabels.end());
  next.changedAnnotations.insert(target.changedAnnotations.begin(),
                                 target.changedAnnotations.end());
  AddAnnotationPatch(step, keys::kUpdateStateAnnotation, SerializeUpdateState(next));
  step.summary = "update-state re-targeted to " + target.to + " (nothing else to change)";
}

// The containers' status as the update-state baseline of an image write: what the kubelet runs
// now, so that only a later container counts as the restart for the new image.
void RecordContainers(const kube::Pod& pod, const std::map<std::string, std::string>& images,
                      UpdateState& next) {
  for (const auto& [name, image] : images) {
    // What is asked now, and the spec's image it replaces; what the API server stores is seen
    // on the next pass (RecordStoredImages).
    const std::optional<kube::Container> spec = pod.container(name);
    next.images[name] = ImageRecord{image, "", std::string(spec ? spec->image() : "")};
    ContainerRecord rec;
    if (const std::optional<kube::ContainerStatus> st = pod.containerStatus(name)) {
      rec.imageID = std::string(st->imageID());
      rec.containerID = std::string(st->containerID());
      rec.restartCount = st->restartCount().value_or(rec.restartCount);
    }
    next.lastContainerStatuses[name] = rec;
  }
}

void AddImages(kube::PatchBuilder& patch, const std::map<std::string, std::string>& images) {
  for (const auto& [name, image] : images) patch.ContainerImage(name, image);
}

void AddResize(Step& step, const Changes& changes) {
  if (!changes.resources.empty()) {
    AddPatch(step, PodOp::Kind::kResizePatch, ResizePatch(changes.resources));
  }
}

// The first pod write: the template difference, state Updating and a fresh update-state. With a
// resources change it is followed by the pods/resize write, and the images wait for the resize.
void Write(const Target& target, const Rules& rules, const View& v, Step& step,
           Clock::time_point now) {
  const kube::Pod& pod = *v.pod;
  UpdateState next;
  next.revision = target.to;
  next.updateTimestamp = rfc3339::Format(now);
  next.changedLabels = target.changedLabels;
  next.changedAnnotations = target.changedAnnotations;
  next.resizedContainers = target.resizedContainers;
  if (v.inRun) {
    // A re-target: keep what this run changed before, and the baseline of containers still
    // restarting from the previous write.
    next.changedLabels.insert(v.updateState->changedLabels.begin(),
                              v.updateState->changedLabels.end());
    for (const auto& k : v.updateState->changedAnnotations) {
      if (target.policy.AllowsAnnotation(k)) next.changedAnnotations.insert(k);
    }
    next.resizedContainers.insert(v.updateState->resizedContainers.begin(),
                                  v.updateState->resizedContainers.end());
    next.lastContainerStatuses = v.updateState->lastContainerStatuses;
    next.images = v.updateState->images;
  }
  const bool resizeFirst = !v.changes.resources.empty();
  if (!resizeFirst) RecordContainers(pod, v.changes.images, next);
  // Where no later write returns the pod (no resize to follow, no post-update hook, no drain's
  // gate to set True), the write leaves the label Normal and the kubelet's report says Updating
  // until it shows the change done (StateOf): one pod write in all.
  next.completesOnReport = !resizeFirst && rules.post == nullptr && !(v.hasGate && v.gate == false);

  kube::PatchBuilder patch =
      StateChange(*v.pod, next.completesOnReport ? PodState::kNormal : PodState::kUpdating, now);
  for (const auto& [k, value] : v.changes.labels) patch.Label(k, value);
  for (const auto& [k, value] : v.changes.annotations) patch.Annotation(k, value);
  patch.Annotation(keys::kUpdateStateAnnotation, SerializeUpdateState(next));
  if (!resizeFirst) AddImages(patch, v.changes.images);
  AddPatch(step, PodOp::Kind::kPatch, patch.Take());
  AddResize(step, v.changes);
  Wake(step, std::chrono::seconds(rules.updatingTimeoutSeconds));
  step.summary =
      "pod write, template " + target.to + ": " + DescribeChanges(v.changes) +
      (resizeFirst && !v.changes.images.empty() ? " (images once the resize is done)" : "");
}

// Updating, the resize done: the images, with the baseline of the containers as they run now.
void WriteImages(const Target& target, const Rules& rules, const View& v, Step& step,
                 Clock::time_point now) {
  UpdateState next = *v.updateState;
  next.updateTimestamp = rfc3339::Format(now);
  RecordContainers(*v.pod, v.changes.images, next);
  kube::PatchBuilder patch = StateChange(*v.pod, PodState::kUpdating, now);
  patch.Annotation(keys::kUpdateStateAnnotation, SerializeUpdateState(next));
  AddImages(patch, v.changes.images);
  AddPatch(step, PodOp::Kind::kPatch, patch.Take());
  Changes images;
  images.images = v.changes.images;
  Wake(step, std::chrono::seconds(rules.updatingTimeoutSeconds));
  step.summary =
      "pod write after the resize, template " + target.to + ": " + DescribeChanges(images);
}

// Updating at the target, after the write of the images: where the API server stored another
// image than the one asked for (another mutating webhook on pods rewrote it: a registry mirror, a
// digest pin), one pod patch records it in the update-state, so that the stored reference is the
// container's target from now on and a later change of the spec is told apart from it, with an
// Event naming both. Returns false (nothing to record) when every stored image is the asked one:
// the write costs nothing more then.
bool RecordStoredImages(const View& v, Step& step) {
  if (!v.updateState) return false;
  UpdateState next = *v.updateState;
  std::string what;
  std::string key = v.name + "/image-rewritten/" + v.updateState->updateTimestamp;
  for (auto& [name, rec] : next.images) {
    if (!rec.got.empty()) continue;
    const std::optional<kube::Container> spec = v.pod->container(name);
    const std::string_view image = spec ? spec->image() : "";
    if (image.empty() || image_ref::SameImage(image, rec.asked)) continue;
    rec.got = std::string(image);
    if (!what.empty()) what += "; ";
    what += "container " + name + ": asked for image " + rec.asked + ", the API server stored " +
            rec.got;
    key += "/" + name + "=" + rec.got;
  }
  if (what.empty()) return false;
  AddAnnotationPatch(step, keys::kUpdateStateAnnotation, SerializeUpdateState(next));
  AddEvent(step, "Normal", "PodImageRewritten",
           "pod " + v.name + " " + what +
               " (rewritten by admission: another mutating webhook on pods); the stored "
               "reference is the target: the update completes when the kubelet runs it",
           /*onDeployment=*/true, key);
  step.summary = "image rewritten by admission: " + what;
  return true;
}

// Updating, waiting for the kubelet's resize: a resize it cannot make stops the pod (an Event on
// the pod and the Deployment, once per pod generation, and the stuck report), never a recreate.
void WaitForResize(const Rules& rules, const View& v, Step& step, const ResizeProgress& progress,
                   Clock::time_point now) {
  using Phase = ResizeProgress::Phase;
  const std::string generation = std::to_string(v.pod->generation());
  auto stuck = [&](std::string reason, std::string what) {
    const std::string text =
        "pod " + v.name + ": " + what + (progress.message.empty() ? "" : ": " + progress.message);
    AddEvent(step, "Warning", reason,
             text +
                 "; the pod keeps running as it was and the update is stuck (fix the cause, "
                 "or set the Deployment annotation " +
                 std::string(keys::kAbortAnnotation) + "=true to abort)",
             /*onDeployment=*/true, v.name + "/" + reason + "/" + generation);
    step.stuckReason = std::move(reason);
    step.stuckMessage = text;
    step.summary = step.stuckReason + ": " + text;
  };
  if (progress.phase == Phase::kInfeasible) {
    return stuck("PodResizeInfeasible", "the kubelet finds the resize infeasible");
  }
  const bool late =
      v.stateTime && now >= *v.stateTime + std::chrono::seconds(rules.updatingTimeoutSeconds);
  if (late && progress.phase == Phase::kDeferred) {
    return stuck("PodResizeDeferred", "the kubelet deferred the resize for longer than " +
                                          std::to_string(rules.updatingTimeoutSeconds) + "s");
  }
  if (late && progress.phase == Phase::kError) {
    return stuck("PodResizeFailed", "the kubelet could not apply the resize for " +
                                        std::to_string(rules.updatingTimeoutSeconds) + "s");
  }
  CheckTimeout(v, step, rules.updatingTimeoutSeconds,
               "waiting for kubelet to resize the containers", now);
}

// Leaves Normal (or a stale Updating/Updated after a re-target): hold in PreparingUpdate while
// the pre-update hook is armed or a drain is needed, else write at once.
void Begin(const Target& target, const Rules& rules, const View& v, Step& step,
           Clock::time_point now) {
  const bool needPrep = v.preHooked || v.drainNeeded || v.grace > 0;
  if (!needPrep) {
    Write(target, rules, v, step, now);
    return;
  }
  const bool gateFalse = v.preHooked ? rules.pre->markPodNotReady : v.drainNeeded;
  // Without a pre-update hook, a drain of a Normal pod starts with the gate write alone: a Normal
  // pod with its gate False reads as PreparingUpdate (StateOf), one pod write fewer per pod. The
  // label is written where a hook needs it (its handlers watch for PreparingUpdate). (Without a
  // hook, gateFalse is drainNeeded, so the pod has the gate; labelled Normal here, its gate is not
  // False, else it would read as PreparingUpdate and not begin.)
  const bool gateOnly =
      rules.pre == nullptr && gateFalse && LabelStateOf(*v.pod) == PodState::kNormal;
  if (!gateOnly) {
    AddPatch(step, PodOp::Kind::kPatch, StatePatch(*v.pod, PodState::kPreparingUpdate, now));
  }
  if (gateFalse) SetGate(v, step, false, now);
  std::string why;
  if (v.preHooked) {
    why =
        "waiting for the pre-update hook to be released (remove " + DescribeHook(*rules.pre) + ")";
    if (rules.pre->timeoutSeconds) Wake(step, std::chrono::seconds(*rules.pre->timeoutSeconds));
  } else {
    why = "draining for " + std::to_string(v.grace) + "s before the update";
    Wake(step, std::chrono::seconds(v.grace));
  }
  step.summary = "PreparingUpdate for template " + target.to + ": " + why;
}

// The update is done (or nothing is left to do): Updated while the post-update hook is not fully
// present, else Normal; the gate goes back to True.
void Complete(const Target& target, const Rules& rules, const View& v, Step& step,
              Clock::time_point now, bool restarted) {
  const bool hold = rules.post != nullptr && !lifecycle::IsPodAllHooked(*rules.post, *v.pod);
  const PodState next = hold ? PodState::kUpdated : PodState::kNormal;
  // (A pod labelled Normal whose drain is cut short by a re-target needs only its gate back.)
  ReturnTo(step, *v.pod, next, now);
  std::string message = restarted ? "in-place update to template " + target.to + " done"
                                  : "pod already matches template " + target.to;
  if (hold) {
    message += "; waiting for the post-update hook (" + DescribeHook(*rules.post) + ")";
    if (rules.post->timeoutSeconds) Wake(step, std::chrono::seconds(*rules.post->timeoutSeconds));
  } else {
    message += "; pod is Normal";
  }
  if (restarted) {
    step.completed = true;
    if (auto t = rfc3339::Parse(v.updateState->updateTimestamp)) {
      step.updateSeconds = std::chrono::duration<double>(now - *t).count();
      if (step.updateSeconds < 0) step.updateSeconds = 0;
    }
  }
  step.summary =
      std::string(StateName(v.state)) + " -> " + std::string(StateName(next)) + ": " + message;
}

}  // namespace

StatusOr<Target> MakeTarget(const kube::PodTemplate& baseTemplate,
                            const kube::PodTemplate& targetTemplate,
                            const lifecycle::Policy& policy, std::string from, std::string to) {
  // The base comes from a ReplicaSet: its hash label is not part of the template's meaning.
  json::Document copy;
  copy.CopyFrom(baseTemplate.json(), copy.GetAllocator());
  if (Value* labels = json::FindMutable(json::FindMutable(&copy, "metadata"), "labels")) {
    json::Remove(*labels, keys::kPodTemplateHashLabel);
  }
  StatusOr<kube::PodTemplate> base = kube::PodTemplate::From(copy, "base template");
  if (!base.ok()) return base.status();
  // The webhook decided what is in place; the loop applies whatever it let through.
  eligibility::Result r =
      eligibility::CompareTemplates(&*base, &targetTemplate, policy, resize_support::kAll);
  if (r.verdict == eligibility::Verdict::kNotEligible) {
    return Status::InvalidArgument("the change of " + r.blockingPath +
                                   " cannot be applied in place (" + r.reason + ")");
  }
  Target t;
  t.from = std::move(from);
  t.to = std::move(to);
  t.policy = policy;
  t.labels = StringMap(targetTemplate.labels());
  t.labels.erase(std::string(keys::kPodTemplateHashLabel));
  t.annotations = StringMap(targetTemplate.annotations());
  for (const kube::Container& c : targetTemplate.containers()) {
    const std::string name(c.name());
    t.images[name] = std::string(c.image());
    t.resources[name] = eligibility::ResourcesOf(c);
  }
  for (const auto& [k, v] : r.plan.labels) {
    if (!IsReservedLabel(k)) t.changedLabels.insert(k);
  }
  for (const auto& [k, v] : r.plan.annotations) {
    if (!IsReservedAnnotation(k)) t.changedAnnotations.insert(k);
  }
  for (const auto& [name, image] : r.plan.images) t.changedContainers.insert(name);
  for (const auto& [name, resources] : r.plan.resources) t.resizedContainers.insert(name);
  return t;
}

Rules MakeRules(const lifecycle::Settings& settings) {
  Rules r;
  r.pre = settings.lifecycle.PreHook();
  r.post = settings.lifecycle.PostHook();
  if (settings.policy.gracePeriodSeconds) {
    r.graceSeconds = std::max<long long>(0, *settings.policy.gracePeriodSeconds);
  }
  std::optional<long long> largest;
  for (const lifecycle::Hook* h : {r.pre, r.post}) {
    if (h != nullptr && h->timeoutSeconds && (!largest || *h->timeoutSeconds > *largest)) {
      largest = h->timeoutSeconds;
    }
  }
  if (largest) r.updatingTimeoutSeconds = *largest;
  return r;
}

long long GraceSeconds(const Rules& rules, bool podHasGate) {
  if (rules.graceSeconds) return *rules.graceSeconds;
  return podHasGate ? kDefaultDrainSeconds : 0;
}

Clock::time_point DrainEnd(const kube::Pod& pod, long long grace, Clock::time_point now) {
  // Half a second for a write's own way: its stamp is taken as it is sent, and the API server
  // stores it later (the client's rate limiter, admission, etcd), which is when the pod leaves its
  // endpoints; and a second more for a stamp truncated to whole seconds.
  const Clock::duration way = std::chrono::milliseconds(500);
  const Clock::duration truncated = way + std::chrono::seconds(1);
  std::optional<Clock::time_point> anchor;  // the later of the anchors
  std::optional<Clock::time_point> start;   // the later of the anchors, each with its slack
  auto later = [&anchor, &start](std::optional<Clock::time_point> t, Clock::duration slack) {
    if (!t) return;
    if (!anchor || *t > *anchor) anchor = t;
    if (!start || *t + slack > *start) start = *t + slack;
  };
  later(rfc3339::Parse(PodAnnotation(pod, keys::kStateTimestampAnnotation).value_or("")),
        truncated);
  if (HasGate(pod) && GateStatus(pod) == false) {
    const std::optional<kube::Condition> c = pod.condition(keys::kReadyCondition);
    const std::optional<Clock::time_point> gate =
        rfc3339::Parse(c ? c->lastTransitionTime() : std::string_view{});
    // The gate-sent record to the millisecond, when it is the same write's (its whole second is
    // the condition's); else the condition's whole second.
    const std::optional<Clock::time_point> sent =
        rfc3339::Parse(PodAnnotation(pod, keys::kGateSentAnnotation).value_or(""));
    if (gate && sent && std::chrono::floor<std::chrono::seconds>(*sent) == *gate) {
      later(sent, way);
    } else {
      later(gate, truncated);
    }
  }
  if (!anchor) return now + std::chrono::seconds(grace);
  // With no grace there is no drain to keep whole: no slack.
  return grace > 0 ? *start + std::chrono::seconds(grace) : *anchor;
}

namespace {
// The container's spec has every cpu/memory request and limit of `want` (same quantities).
bool SpecHas(const kube::Container& container, const eligibility::Plan::Resources& want) {
  for (auto [kind, map] :
       {std::pair{"requests", &want.requests}, std::pair{"limits", &want.limits}}) {
    const Value* have = container.resources(kind);
    for (const auto& [resource, q] : *map) {
      Value text(q.data(), static_cast<rapidjson::SizeType>(q.size()));
      if (!quantity::SameQuantity(&text, json::Find(have, resource))) return false;
    }
  }
  return true;
}
}  // namespace

Changes ComputeChanges(const Target& target, const kube::Pod& pod) {
  Changes out;
  std::optional<UpdateState> us = ReadUpdateState(pod);
  const bool inRun = us && !us->revision.empty() && us->revision != target.from;

  std::set<std::string> labelKeys = target.changedLabels;
  std::set<std::string> annotationKeys = target.changedAnnotations;
  std::set<std::string> containerNames = target.changedContainers;
  std::set<std::string> resized = target.resizedContainers;
  if (inRun) {
    resized.insert(us->resizedContainers.begin(), us->resizedContainers.end());
    labelKeys.insert(us->changedLabels.begin(), us->changedLabels.end());
    for (const auto& k : us->changedAnnotations) {
      if (target.policy.AllowsAnnotation(k)) annotationKeys.insert(k);
    }
    for (const auto& [name, rec] : us->lastContainerStatuses) containerNames.insert(name);
  }
  for (const auto& k : labelKeys) {
    if (IsReservedLabel(k)) continue;
    auto it = target.labels.find(k);
    std::optional<std::string> want =
        it == target.labels.end() ? std::nullopt : std::optional<std::string>(it->second);
    if (PodLabel(pod, k) != want) out.labels[k] = want;
  }
  for (const auto& k : annotationKeys) {
    if (IsReservedAnnotation(k)) continue;
    auto it = target.annotations.find(k);
    std::optional<std::string> want =
        it == target.annotations.end() ? std::nullopt : std::optional<std::string>(it->second);
    if (PodAnnotation(pod, k) != want) out.annotations[k] = want;
  }
  for (const kube::Container& c : pod.containers()) {
    std::string name(c.name());
    if (resized.contains(name)) {
      auto want = target.resources.find(name);
      if (want != target.resources.end() && !SpecHas(c, want->second)) {
        out.resources[name] = want->second;
      }
    }
    if (!containerNames.contains(name)) continue;
    auto it = target.images.find(name);
    if (it == target.images.end() || it->second.empty()) continue;
    const std::string_view image = c.image();
    if (image_ref::SameImage(image, it->second)) continue;
    // This run asked for the target's image and the API server stored another reference
    // (admission rewrote it: a registry mirror, a digest pin): the stored one is the target,
    // unless the spec changed since it was recorded. Asked for another image (a later target),
    // the pod is written again.
    if (inRun) {
      auto rec = us->images.find(name);
      if (rec != us->images.end() && rec->second.asked == it->second &&
          (rec->second.got.empty() || rec->second.got == image)) {
        continue;
      }
    }
    out.images[name] = it->second;
  }
  return out;
}

ResizeProgress ResizeStatus(const kube::Pod& pod, const UpdateState& state) {
  using Phase = ResizeProgress::Phase;
  if (const std::optional<kube::Condition> pending = pod.condition("PodResizePending")) {
    std::string_view reason = pending->reason();
    return {reason == "Infeasible" ? Phase::kInfeasible : Phase::kDeferred,
            std::string(reason) + ": " + std::string(pending->message())};
  }
  if (const std::optional<kube::Condition> inProgress = pod.condition("PodResizeInProgress")) {
    std::string_view reason = inProgress->reason();
    std::string message(inProgress->message());
    if (reason == "Error") return {Phase::kError, "Error: " + message};
    return {Phase::kInProgress, message};
  }
  // Kubelets before 1.33 (1.30-1.32 with their alpha gate on) never set those conditions: they
  // report in the deprecated status.resize, which the API server set to Proposed (1.30-1.32) and
  // the kubelet to InProgress, Deferred or Infeasible, and clears once the resize is applied.
  const std::string_view legacy = pod.legacyResize();
  if (legacy == "Infeasible") return {Phase::kInfeasible, "status.resize Infeasible"};
  if (legacy == "Deferred") return {Phase::kDeferred, "status.resize Deferred"};
  if (legacy == "Proposed" || legacy == "InProgress") {
    return {Phase::kInProgress, "status.resize " + std::string(legacy)};
  }
  if (state.resizedContainers.empty()) return {};
  if (pod.observedGeneration().value_or(pod.generation()) < pod.generation()) {
    return {Phase::kInProgress, "the kubelet has not seen the resize yet"};
  }
  for (const std::string& name : state.resizedContainers) {
    const std::optional<kube::Container> spec = pod.container(name);
    if (!spec) continue;  // not in this pod: nothing to resize
    const std::optional<kube::ContainerStatus> st = pod.containerStatus(name);
    if (!st || !st->reportsResources()) {
      return {Phase::kInProgress, "container " + name + " reports no resources yet"};
    }
    if (!st->running()) return {Phase::kInProgress, "container " + name + " is not running"};
    for (const char* kind : {"requests", "limits"}) {
      const Value* want = spec->resources(kind);
      const Value* have = st->resources(kind);
      for (std::string_view resource : {"cpu", "memory"}) {
        const Value* w = json::Find(want, resource);
        if (w == nullptr || w->IsNull()) continue;
        if (!quantity::SameQuantity(w, json::Find(have, resource))) {
          return {Phase::kInProgress, "container " + name + " runs with other " + kind};
        }
      }
    }
  }
  return {};
}

std::optional<std::string> ResizeUnsupported(const kube::Pod& pod) {
  for (const kube::ContainerStatus& st : pod.containerStatuses()) {
    if (!st.running()) continue;
    // The first running container decides, as in the API server.
    if (st.reportsResources()) return std::nullopt;
    const std::string_view node = pod.nodeName();
    return "pod " + PodName(pod) + (node.empty() ? "" : " on node " + std::string(node)) +
           ": its kubelet reports no resources for running container " + std::string(st.name()) +
           " and cannot resize it in place (kubelets before 1.33, or 1.30-1.32 without the "
           "InPlacePodVerticalScaling gate; the API server refuses such a resize)";
  }
  return std::nullopt;
}

bool ResizePending(const Target& target, const kube::Pod& pod) {
  if (!ComputeChanges(target, pod).resources.empty()) return true;
  if (StateOf(pod) != PodState::kUpdating) return false;
  std::optional<UpdateState> us = ReadUpdateState(pod);
  return us && us->revision == target.to && !us->resizedContainers.empty() &&
         ResizeStatus(pod, *us).phase != ResizeProgress::Phase::kDone;
}

json::Document ResizePatch(const std::map<std::string, eligibility::Plan::Resources>& resources) {
  kube::PatchBuilder patch;
  for (const auto& [name, r] : resources) {
    for (auto [kind, map] : {std::pair{"requests", &r.requests}, std::pair{"limits", &r.limits}}) {
      for (const auto& [resource, q] : *map) patch.ContainerResource(name, kind, resource, q);
    }
  }
  return patch.Take();
}

bool AtTarget(const Target& target, const kube::Pod& pod) {
  if (!ComputeChanges(target, pod).Empty()) return false;
  std::optional<UpdateState> us = ReadUpdateState(pod);
  const bool inRun = us && !us->revision.empty() && us->revision != target.from;
  return !inRun || us->revision == target.to;
}

std::optional<ImageTrouble> FindImageTrouble(const kube::Pod& pod, const UpdateState& state) {
  // The kubelet's reasons for a container it cannot pull, and those for one it cannot run. After
  // a failed pull the kubelet also reports CrashLoopBackOff (the container it stopped for the
  // write exited, and its restarts back off), alternating with the pull's reasons.
  static constexpr std::string_view kPullReasons[] = {
      "ErrImagePull",      "ImagePullBackOff",    "InvalidImageName",
      "ErrImageNeverPull", "RegistryUnavailable", "SignatureValidationFailed"};
  static constexpr std::string_view kRunReasons[] = {"CrashLoopBackOff", "CreateContainerError",
                                                     "CreateContainerConfigError",
                                                     "RunContainerError"};
  auto in = [](const auto& list, std::string_view reason) {
    return std::find(std::begin(list), std::end(list), reason) != std::end(list);
  };
  for (const auto& [name, rec] : state.lastContainerStatuses) {
    const std::optional<kube::ContainerStatus> st = pod.containerStatus(name);
    if (!st) continue;
    const std::string_view reason = st->waitingReason();
    const bool pull = in(kPullReasons, reason);
    if (!pull && !in(kRunReasons, reason)) continue;
    ImageTrouble t;
    t.container = name;
    const std::optional<kube::Container> spec = pod.container(name);
    t.image = std::string(spec ? spec->image() : "");
    t.detail = std::string(st->waitingMessage());
    // No container of the written spec ever started (the kubelet reports the one it stopped for
    // the write): its restarts back off while the image cannot be had; the pod's Events say why.
    const std::string_view containerID = st->containerID();
    const bool neverStarted = containerID.empty() || containerID == rec.containerID;
    const std::string verb = pull           ? "cannot pull"
                             : neverStarted ? "has not started"
                                            : "does not run";
    const std::string because = " (" + std::string(reason) +
                                (!pull && neverStarted ? "; the pod's Events say why" : "") + ")";
    auto asked = state.images.find(name);
    const std::string prefix = "pod " + PodName(pod) + " container " + name + ": ";
    if (asked != state.images.end() && !image_ref::SameImage(asked->second.asked, t.image)) {
      t.text = prefix + "asked for image " + asked->second.asked + ", the API server stored " +
               t.image + " (rewritten by admission), which the kubelet " + verb + because;
    } else {
      t.text = prefix + "the kubelet " + verb + " image " + t.image + because;
    }
    return t;
  }
  return std::nullopt;
}

json::Document StatePatch(const kube::Pod& pod, PodState state, Clock::time_point now) {
  return StateChange(pod, state, now).Take();
}

bool HasGate(const kube::Pod& pod) {
  return pod.hasReadinessGate(keys::kReadyCondition);
}

json::Document GatePatch(const kube::Pod& pod, bool value, Clock::time_point now) {
  kube::PatchBuilder patch;
  SetGateCondition(patch, pod, value, now);
  return patch.Take();
}

std::string_view WaitName(PodWait::On on) {
  switch (on) {
    case PodWait::On::kNothing:
      return "";
    case PodWait::On::kTurn:
      return "turn";
    case PodWait::On::kPreHook:
      return "pre_update_hook";
    case PodWait::On::kGateFalse:
      return "drain_gate";
    case PodWait::On::kDrain:
      return "drain";
    case PodWait::On::kResizeWrite:
      return "resize_write";
    case PodWait::On::kResize:
      return "resize";
    case PodWait::On::kRestart:
      return "restart";
    case PodWait::On::kImage:
      return "image";
    case PodWait::On::kStep:
      return "step";
    case PodWait::On::kPostHook:
      return "post_update_hook";
  }
  return "";
}

std::string Describe(const PodWait& wait, Clock::time_point now) {
  // A wait with a timeout says when it is past it (the HookTimeout Event was written then).
  auto late = [&]() -> std::string {
    if (!wait.until || !wait.since || now < *wait.until) return "";
    return " (past its " + Seconds(*wait.until - *wait.since) + " timeout)";
  };
  auto with = [](std::string_view what, const std::string& detail) {
    return std::string(what) + (detail.empty() ? "" : ": " + detail);
  };
  switch (wait.on) {
    case PodWait::On::kNothing:
      return "";
    case PodWait::On::kTurn:
      return "its turn";
    case PodWait::On::kPreHook:
      return with("pre-update hook", wait.detail) + late();
    case PodWait::On::kGateFalse:
      return "drain: readiness gate going False";
    case PodWait::On::kDrain: {
      if (!wait.since || !wait.until) return "drain grace";
      const auto left = std::chrono::ceil<std::chrono::seconds>(*wait.until - now);
      return "drain grace " + Seconds(*wait.until - *wait.since) + " (" +
             std::to_string(std::max<long long>(0, left.count())) + "s left)";
    }
    case PodWait::On::kResizeWrite:
      return with("resize write", wait.detail) + late();
    case PodWait::On::kResize:
      return with("kubelet to resize the containers", wait.detail) + late();
    case PodWait::On::kRestart:
      return (wait.detail.empty() ? std::string("kubelet to see the update")
                                  : "containers restarting: " + wait.detail) +
             late();
    case PodWait::On::kImage:
      return wait.detail + late();
    case PodWait::On::kStep:
      return "the rest of its step, to go back in service together";
    case PodWait::On::kPostHook:
      return with("post-update hook", wait.detail) + late();
  }
  return "";
}

bool WantsStart(const Target& target, const kube::Pod& pod) {
  if (StateOf(pod) != PodState::kNormal) return false;
  return !ComputeChanges(target, pod).Empty();
}

Step Release(const kube::Pod& pod, Clock::time_point now) {
  Step step;
  const PodState labelled = LabelStateOf(pod);
  const bool gateFalse = HasGate(pod) && GateStatus(pod) == false;
  // Labelled Normal, Updating by the kubelet's report: the record stops saying so.
  const bool onReport =
      labelled == PodState::kNormal && !gateFalse && StateOf(pod) == PodState::kUpdating;
  ReturnTo(step, pod, PodState::kNormal, now);
  if (onReport) {
    UpdateState us = *ReadUpdateState(pod);
    us.completesOnReport = false;
    const std::string text = SerializeUpdateState(us);
    if (step.ops.empty()) {
      AddAnnotationPatch(step, keys::kUpdateStateAnnotation, text);
    } else {  // the hook-timeout marker's removal: one pod patch for both
      kube::PatchBuilder both(std::move(step.ops.back().body));
      both.Annotation(keys::kUpdateStateAnnotation, text);
      step.ops.back().body = both.Take();
    }
  }
  if (labelled != PodState::kNormal || onReport) {
    step.summary = "pod back to Normal (it was " +
                   std::string(StateName(onReport ? PodState::kUpdating : labelled)) + ")";
  }
  if (gateFalse) {
    step.summary += step.summary.empty() ? "readiness gate True again" : ", readiness gate True";
  }
  return step;
}

std::optional<double> CompletedOnReport(const kube::Pod& old, const kube::Pod& now,
                                        Clock::time_point at) {
  if (LabelStateOf(now) != PodState::kNormal || StateOf(now) != PodState::kNormal) {
    return std::nullopt;
  }
  const std::optional<UpdateState> record = ReadUpdateState(now);
  if (!record || !record->completesOnReport || !UpdateCompleted(now, *record)) return std::nullopt;
  // `old` showed this write (its updateTimestamp) done already: counted then.
  const std::optional<UpdateState> before = ReadUpdateState(old);
  if (before && before->updateTimestamp == record->updateTimestamp &&
      StateOf(old) == PodState::kNormal) {
    return std::nullopt;
  }
  const std::optional<Clock::time_point> written = rfc3339::Parse(record->updateTimestamp);
  if (!written) return 0.0;
  return std::max(0.0, std::chrono::duration<double>(at - *written).count());
}

bool OnItsWay(const Target& target, const Rules& rules, const kube::Pod& pod) {
  const PodState state = StateOf(pod);
  if (state == PodState::kPreparingUpdate) {
    return !(rules.pre != nullptr && lifecycle::IsPodHooked(*rules.pre, pod));
  }
  if (state != PodState::kUpdating) return false;
  const std::optional<UpdateState> us = ReadUpdateState(pod);
  if (!us || us->revision != target.to || !ComputeChanges(target, pod).Empty()) return false;
  if (ResizeStatus(pod, *us).phase != ResizeProgress::Phase::kDone) return false;
  return !UpdateCompleted(pod, *us) && !FindImageTrouble(pod, *us);
}

Step Decide(const Target& target, const Rules& rules, const kube::Pod& pod, bool mayStart,
            Clock::time_point now, bool stepBusy) {
  Step step;
  const View v = Look(target, rules, pod);

  if (v.state == PodState::kNormal) {
    // Done on the kubelet's report before a pass saw it Updating: what admission stored is
    // recorded all the same (as the Updating branch does), once.
    if (v.atTarget && v.inRun && v.updateState->completesOnReport && RecordStoredImages(v, step)) {
      return step;
    }
    if (v.atTarget || (!v.changes.Empty() && !mayStart)) {
      SetGate(v, step, true, now);  // also new pods that declare the gate and lack the condition
      if (!step.ops.empty()) step.summary = "readiness gate set True";
      if (!v.atTarget) step.wait.on = PodWait::On::kTurn;
      return step;
    }
    if (v.changes.Empty()) {
      Restamp(target, v, step);
      SetGate(v, step, true, now);
      return step;
    }
    step.started = true;
    Begin(target, rules, v, step, now);
    return step;
  }

  if (v.state == PodState::kPreparingUpdate) {
    if (v.atTarget) {  // re-targeted back while waiting (kruise#1156)
      Complete(target, rules, v, step, now, /*restarted=*/false);
      return step;
    }
    if (v.preHooked) {
      if (rules.pre->markPodNotReady) SetGate(v, step, false, now);
      WaitOn(v, step, PodWait::On::kPreHook, lifecycle::DescribeHandlers(*rules.pre, pod, true),
             rules.pre->timeoutSeconds);
      CheckTimeout(v, step, rules.pre->timeoutSeconds,
                   "waiting for the pre-update hook (" + DescribeHook(*rules.pre) + ")", now);
      return step;
    }
    if (v.drainNeeded && v.gate != false) {
      SetGate(v, step, false, now);
      WaitOn(v, step, PodWait::On::kGateFalse, "", std::nullopt);
      Wake(step, std::chrono::seconds(v.grace));
      step.summary = "readiness gate set False before the update";
      return step;
    }
    const Clock::time_point graceEnd = DrainEnd(pod, v.grace, now);
    if (now < graceEnd) {
      step.wait.on = PodWait::On::kDrain;
      step.wait.since = graceEnd - std::chrono::seconds(v.grace);
      step.wait.until = graceEnd;
      Wake(step, graceEnd - now);
      return step;
    }
    Write(target, rules, v, step, now);
    EndWait(v, step, Step::Wait::kPreparingUpdate, now);
    return step;
  }

  if (v.state == PodState::kUpdating) {
    if (v.updateState && v.updateState->revision == target.to) {
      if (!v.changes.resources.empty()) {  // the resize write is still to be made (or failed)
        AddResize(step, v.changes);
        std::string changes = DescribeChanges(v.changes);
        step.summary = "resize: " + changes;
        WaitOn(v, step, PodWait::On::kResizeWrite, std::move(changes),
               rules.updatingTimeoutSeconds);
        Wake(step, std::chrono::seconds(rules.updatingTimeoutSeconds));
        return step;
      }
      if (ResizeProgress rp = ResizeStatus(pod, *v.updateState);
          rp.phase != ResizeProgress::Phase::kDone) {
        WaitOn(v, step, PodWait::On::kResize, rp.message, rules.updatingTimeoutSeconds);
        WaitForResize(rules, v, step, rp, now);
        return step;
      }
      if (!v.changes.images.empty()) {
        WriteImages(target, rules, v, step, now);
        return step;
      }
      if (RecordStoredImages(v, step)) {
        WaitOnContainers(target, rules, v, FindImageTrouble(pod, *v.updateState), step);
        Wake(step, std::chrono::seconds(rules.updatingTimeoutSeconds));
        return step;
      }
      if (UpdateCompleted(pod, *v.updateState)) {
        // Back in service with the rest of its step, where its return is a readiness change.
        const std::optional<Clock::time_point> written =
            rfc3339::Parse(v.updateState->updateTimestamp);
        if (stepBusy && v.hasGate && v.gate == false && written &&
            now < *written + std::chrono::seconds(kStepReturnSeconds)) {
          step.wait.on = PodWait::On::kStep;
          step.wait.since = written;
          step.wait.until = *written + std::chrono::seconds(kStepReturnSeconds);
          Wake(step, *step.wait.until - now);
          return step;
        }
        Complete(target, rules, v, step, now, /*restarted=*/true);
        return step;
      }
      const std::optional<ImageTrouble> trouble = FindImageTrouble(pod, *v.updateState);
      if (trouble) {
        // Reported now (deterministic name: once per pod, container, image and write); a stall
        // only once progressDeadlineSeconds pass without progress, then naming it.
        AddEvent(step, "Warning", "PodImageNotRunning",
                 trouble->text + (trouble->detail.empty() ? "" : ": " + Clip(trouble->detail)) +
                     "; the pod waits and the update is reported stuck once "
                     "progressDeadlineSeconds pass without progress (fix the image or what "
                     "rewrote it, or set the Deployment annotation " +
                     std::string(keys::kAbortAnnotation) + "=true to abort)",
                 /*onDeployment=*/true,
                 v.name + "/image-not-running/" + trouble->container + "/" + trouble->image + "/" +
                     v.updateState->updateTimestamp);
        step.waitingMessage = trouble->text;
      }
      WaitOnContainers(target, rules, v, trouble, step);
      CheckTimeout(v, step, rules.updatingTimeoutSeconds,
                   "waiting for kubelet to restart the updated containers", now);
      return step;
    }
    // Re-targeted while restarting: go through again.
    if (v.changes.Empty()) {
      Restamp(target, v, step);
    } else {
      Begin(target, rules, v, step, now);
    }
    return step;
  }

  // Updated: waiting for the post-update hook.
  if (v.atTarget) {
    if (rules.post == nullptr || lifecycle::IsPodAllHooked(*rules.post, pod)) {
      ReturnTo(step, pod, PodState::kNormal, now);
      EndWait(v, step, Step::Wait::kUpdated, now);
      step.summary = "Updated -> Normal";
    } else {
      SetGate(v, step, true, now);
      WaitOn(v, step, PodWait::On::kPostHook, lifecycle::DescribeHandlers(*rules.post, pod, false),
             rules.post->timeoutSeconds);
      CheckTimeout(v, step, rules.post->timeoutSeconds,
                   "waiting for the post-update hook (" + DescribeHook(*rules.post) + ")", now);
    }
    return step;
  }
  if (v.changes.Empty()) {
    Restamp(target, v, step);
  } else {
    Begin(target, rules, v, step, now);
  }
  return step;
}

}  // namespace iw::pod_update
