// The per-pod state machine of an in-place update (DESIGN.md §4.3 and §4a), in one place:
//
//   Normal ──(chosen within the budget)──► PreparingUpdate ──(no pre-hook handler left, gate
//     │          pre-hook armed, or a drain     False, grace elapsed)──┐
//     │          (gate False / grace) needed                           ▼
//     └──────────(nothing to wait for)───────────────────────────► Updating ──(every changed
//                                                                      │      container restarted
//                                                                      │      on its new image)
//                         Normal ◄──(all post-hook handlers present)── Updated ◄──┘ (or straight
//                                                                             to Normal)
//
// Updating has up to two pod writes: with a resources change, the first write (labels,
// annotations, update-state) is followed by a pods/resize write, and the images are written only
// once the kubelet reports the resize done (an image and a resize in one kubelet sync are known to
// fail); without one, the first write carries the images too. Where another mutating webhook
// stored another image than the one written (a registry mirror, a digest pin), one more pod patch
// records it in the update-state (DESIGN.md §8.2): at most one more write per pod.
//
// Without a pre-update hook configured, Normal → PreparingUpdate is the gate's write to False alone
// (the label stays Normal; StateOf reads such a pod as PreparingUpdate): one pod write fewer. A
// state change that goes with the gate's return to True is written in that same pods/status write
// (the API server keeps a pods/status write's labels and annotations): with the drain, a pod costs
// the gate False, the pod write and one write back. Where no later write would return the pod (no
// resize, no post-update hook, the gate not False), the pod write leaves the label Normal and
// marks the update-state completesOnReport: StateOf reads the pod as Updating until the kubelet's
// report shows it done, then Normal, with no write of ours: one write per pod.
//
// A decision is a function of the pod as stored in the cluster (labels, annotations, conditions),
// the update's target and the Deployment's hooks, and `now`: nothing is remembered in memory, so a
// restarted loop continues where the last one stopped. Each decision yields at most one pod patch
// and one pod status patch (strategic merge patches without resourceVersion: the driver adds the
// precondition) plus Events.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/eligibility.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_state.h"
#include "hooks/update_state.h"
#include "lib/json.h"

namespace iw::pod_update {

using Clock = std::chrono::system_clock;

// Kruise's default for a hook without timeoutSeconds does not exist (it waits for ever); the
// Updating state (waiting for kubelet) is reported stuck after the largest hook timeout, or this.
inline constexpr long long kDefaultUpdatingTimeoutSeconds = 600;

// The drain of a pod that declares the readiness gate when the policy sets no
// gracePeriodSeconds: the gate goes False, then this long passes before the pod write, so that
// the EndpointSlice controller and kube-proxy take the pod out of its Services before the kubelet
// stops the container (DESIGN.md §8.10). An explicit `gracePeriodSeconds: 0` turns it off.
inline constexpr long long kDefaultDrainSeconds = 3;

// What the running in-place update wants of every pod, computed once per pass from the base
// template (the one the pods were created from: the active ReplicaSet's) and the target template
// (the stored Deployment's spec.template).
struct Target {
  std::string from, to;  // template hashes of the in-progress record
  // The target template's labels (without pod-template-hash), annotations and container images.
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::map<std::string, std::string> images;
  // The target template's cpu/memory requests and limits per container.
  std::map<std::string, eligibility::Plan::Resources> resources;
  // What differs between base and target: label keys (changed, added, removed), annotation keys
  // the policy allows, container names whose image changed, container names whose cpu/memory
  // changed.
  std::set<std::string> changedLabels;
  std::set<std::string> changedAnnotations;
  std::set<std::string> changedContainers;
  std::set<std::string> resizedContainers;
  lifecycle::Policy policy;
};

// Builds the Target; InvalidArgument when the difference is not one that can be applied in place
// (a non-eligible change reached the loop, e.g. past a failed webhook).
StatusOr<Target> MakeTarget(const kube::PodTemplate& baseTemplate,
                            const kube::PodTemplate& targetTemplate,
                            const lifecycle::Policy& policy, std::string from, std::string to);

// The hook rules of the Deployment, resolved for the two phases.
struct Rules {
  const lifecycle::Hook* pre = nullptr;   // holds a pod before its update (any handler present)
  const lifecycle::Hook* post = nullptr;  // holds it after (until all handlers are present)
  std::optional<long long> graceSeconds;  // policy.gracePeriodSeconds; unset: the default drain
  long long updatingTimeoutSeconds = kDefaultUpdatingTimeoutSeconds;
};
// Pointers into `settings`, which must outlive the Rules. The Updating timeout is the largest
// hook timeoutSeconds, or kDefaultUpdatingTimeoutSeconds when no hook declares one.
Rules MakeRules(const lifecycle::Settings& settings);

// The drain a pod gets before its write: the policy's gracePeriodSeconds, or, when unset,
// kDefaultDrainSeconds for a pod that declares the gate and 0 for one that does not (nothing could
// take it out of its endpoints).
long long GraceSeconds(const Rules& rules, bool podHasGate);

// When the drain before the write of `pod` (in PreparingUpdate) ends: `grace` seconds after the
// later of its state timestamp and, with its gate False, the gate's change. The gate's change is
// stamped as its write is sent, before the API server stores it, so a positive grace gets half a
// second more (the drain is never shorter than asked, for a write stored within half a second),
// and a second more still for a stamp truncated to whole seconds: the state timestamp, and the
// gate's lastTransitionTime where the gate-sent annotation (milliseconds) is missing or is not the
// same write's. With no readable anchor, `now` + grace. Decide waits for it, and the plugin reports
// the time left from it.
Clock::time_point DrainEnd(const kube::Pod& pod, long long grace, Clock::time_point now);

// What a pod needs written to reach the target: only template keys the update changes (plus
// those this run changed before, for a re-target), and only where the pod differs. An image this
// run asked for (the update-state's ImageRecord names the target's image) that the API server
// stored as another reference is not written again while the spec holds what it stored.
struct Changes {
  std::map<std::string, std::optional<std::string>> labels;  // nullopt: remove
  std::map<std::string, std::optional<std::string>> annotations;
  std::map<std::string, std::string> images;  // container name → image
  // container name → the target's cpu/memory (all of it), where the pod's spec differs
  std::map<std::string, eligibility::Plan::Resources> resources;
  bool Empty() const {
    return labels.empty() && annotations.empty() && images.empty() && resources.empty();
  }
};
Changes ComputeChanges(const Target& target, const kube::Pod& pod);

// The pod's content is the target's and its update-state (if this run wrote one) says `to`.
bool AtTarget(const Target& target, const kube::Pod& pod);

// Why a changed container of an Updating pod does not run its new image, as the kubelet reports
// it: waiting with a pull's reason (ErrImagePull, ImagePullBackOff, InvalidImageName,
// ErrImageNeverPull, RegistryUnavailable, SignatureValidationFailed) or a run's
// (CrashLoopBackOff, which the kubelet also reports between the retries of a failed pull,
// CreateContainerError, CreateContainerConfigError, RunContainerError). Names the pod, the
// container, the image the loop asked for and the one the API server stored (when admission
// rewrote it), and the kubelet's reason; `detail` is the kubelet's message. nullopt when no changed
// container waits so (ContainerCreating is no trouble).
struct ImageTrouble {
  std::string container;
  std::string image;  // the spec's (stored) image
  std::string text;   // "pod P container C: asked for image A, the API server stored B ..."
  std::string detail;
};
std::optional<ImageTrouble> FindImageTrouble(const kube::Pod& pod, const UpdateState& state);

// Where the kubelet stands with the resize of the containers `state` names (DESIGN.md §3.1):
// kDone when the status is one it computed from the current spec (observedGeneration, where
// reported), neither PodResizePending nor PodResizeInProgress is present, and each resized
// container reports (status.containerStatuses[].resources) the cpu/memory its spec asks for;
// kInfeasible / kDeferred from PodResizePending's reason; kError from PodResizeInProgress with
// reason Error; else kInProgress. Kubelets before 1.33 report no such condition but the
// deprecated status.resize, read the same way: Infeasible, Deferred; Proposed and InProgress in
// progress. `message` is the kubelet's condition message, if any.
struct ResizeProgress {
  enum class Phase { kDone, kInProgress, kDeferred, kInfeasible, kError };
  Phase phase = Phase::kDone;
  std::string message;
};
ResizeProgress ResizeStatus(const kube::Pod& pod, const UpdateState& state);

// Why the kubelet running `pod` cannot resize it in place (naming the pod, its node and the
// container), or nullopt when nothing says so. kube-apiserver (1.32+, ValidatePodResize) refuses a
// pods/resize of a pod whose first running container reports no
// status.containerStatuses[].resources ("Pod running on node without support for resize", 422):
// kubelets report them only where they act on a resize (by default from 1.33; 1.30-1.32 with
// their InPlacePodVerticalScaling gate on). A pod with no running container tells nothing (the API
// server lets that resize through).
std::optional<std::string> ResizeUnsupported(const kube::Pod& pod);

// Whether the update still waits on the kubelet of `pod` for a resize: the pod's spec does not
// hold the target's cpu/memory yet, or it is Updating towards the target and ResizeStatus does
// not say done.
bool ResizePending(const Target& target, const kube::Pod& pod);

// The pods/resize strategic merge patch that gives the containers of `resources` those cpu and
// memory requests and limits (no resourceVersion: the driver adds it).
json::Document ResizePatch(const std::map<std::string, eligibility::Plan::Resources>& resources);

// A pod patch that moves the pod to `state` (the state label and its timestamp annotation),
// clearing a hook-timeout marker of the state it leaves.
json::Document StatePatch(const kube::Pod& pod, PodState state, Clock::time_point now);

// The readiness gate `inplace-webhook.io/ready`: whether spec.readinessGates declares it (the
// status of its condition: GateStatus, in pod_state.h).
bool HasGate(const kube::Pod& pod);
// A strategic merge patch for pods/status that sets the gate condition to `value`, and nothing
// else: Ready is the kubelet's, which recomputes it from the gates as soon as it sees the change
// (kubelet HandlePodReconcile, NeedToReconcilePodReadiness) and would re-publish its own cached
// Ready over any we wrote (DESIGN.md §8.3).
json::Document GatePatch(const kube::Pod& pod, bool value, Clock::time_point now);

// An Event the decision asks for, about the pod (and also its Deployment when `onDeployment`).
// A non-empty `dedupKey` makes the Event's name deterministic: creating it twice is a no-op.
struct PodEvent {
  std::string type;  // Normal or Warning
  std::string reason;
  std::string message;
  bool onDeployment = false;
  std::string dedupKey;
};

// One write or Event, in the order the driver must apply them; it stops at the first failed write.
struct PodOp {
  enum class Kind { kPatch, kStatusPatch, kResizePatch, kEvent };
  Kind kind = Kind::kPatch;
  // kPatch / kStatusPatch / kResizePatch (pods/resize): strategic merge patch, no resourceVersion
  json::Document body;
  PodEvent event;  // kEvent
  // kStatusPatch that changes the gate: its lastTransitionTime is to be the time the write is sent,
  // not the pass's `now`, since the drain is measured from it (DrainEnd) and a slow pass or a
  // queue of writes ahead of it would otherwise shorten the drain.
  bool stampTransition = false;
};

// What a pod waits on before the loop can move it on (DESIGN.md §4.3), as Decide sees it: the one
// vocabulary that the stall message, the loop's logs and metrics and the plugin's `status` render.
// A step that changes the pod's state waits on nothing: the next pass says what the new state
// waits on.
struct PodWait {
  enum class On {
    kNothing,      // the step moves the pod on, or the pod is Normal at the target
    kTurn,         // Normal, not at the target: a place in the budget
    kPreHook,      // PreparingUpdate: the pre-update hook (`detail`: its handlers still present)
    kGateFalse,    // PreparingUpdate: the readiness gate's write to False, the drain's start
    kDrain,        // PreparingUpdate: the drain grace, from `since` (the gate's change) to `until`
    kResizeWrite,  // Updating: the pods/resize write (`detail`: the changes)
    kResize,       // Updating: the kubelet's resize (`detail`: what the kubelet reports)
    kRestart,      // Updating: the kubelet's restart of the changed containers (`detail`: names)
    kImage,        // Updating: an image the kubelet does not run (`detail`: which, and why)
    kStep,         // Updating, done: the rest of its step, to go back in service with it
    kPostHook,     // Updated: the post-update hook (`detail`: its handlers still missing); last
  };
  On on = On::kNothing;
  std::optional<Clock::time_point> since;  // the state's timestamp; the gate's change for kDrain
  std::optional<Clock::time_point> until;  // the drain's end, or the timeout of the wait
  std::string detail;
};

// Every wait but kNothing, in the order an update meets them (for renderers that list each one).
inline constexpr std::array<PodWait::On, 10> kAllWaits = {
    PodWait::On::kTurn,        PodWait::On::kPreHook, PodWait::On::kGateFalse, PodWait::On::kDrain,
    PodWait::On::kResizeWrite, PodWait::On::kResize,  PodWait::On::kRestart,   PodWait::On::kImage,
    PodWait::On::kStep,        PodWait::On::kPostHook};
static_assert(kAllWaits.size() == static_cast<size_t>(PodWait::On::kPostHook),
              "kAllWaits lists every PodWait::On after kNothing");

// The wait's name for metrics and logs: "turn", "pre_update_hook", "drain_gate", "drain",
// "resize_write", "resize", "restart", "image", "step", "post_update_hook"; "" for kNothing.
std::string_view WaitName(PodWait::On on);

// The wait in one line, e.g. "pre-update hook: label lb=on (past its 600s timeout)", "drain grace
// 3s (2s left)", "containers restarting: app"; "" for kNothing.
std::string Describe(const PodWait& wait, Clock::time_point now);

struct Step {
  std::vector<PodOp> ops;
  PodWait wait;              // what the pod waits on after this step's ops
  bool started = false;      // the pod left Normal for this update (it used the budget)
  bool completed = false;    // its containers finished restarting
  double updateSeconds = 0;  // with `completed`: time since the pod write
  bool timedOut = false;     // a HookTimeout is reported by this step
  // The pod leaves a wait with this step's first pod write: PreparingUpdate -> Updating
  // (kPreparingUpdate) or Updated -> Normal (kUpdated), after `waitSeconds` since its
  // state-timestamp (0 when that is missing or unreadable).
  enum class Wait { kNone, kPreparingUpdate, kUpdated };
  Wait waitEnded = Wait::kNone;
  double waitSeconds = 0;
  std::optional<Clock::duration> wakeAfter;  // a time-based wait ends then (grace, timeout)
  // The pod cannot go on until something changes (a resize the kubelet finds Infeasible, or one
  // it deferred past the Updating timeout): the reason for the progress condition
  // (PodResizeInfeasible, PodResizeDeferred, PodResizeFailed) and one line naming the pod's cause.
  std::string stuckReason;
  std::string stuckMessage;
  // What the pod waits on that the user must fix, and that is a stall only once
  // progressDeadlineSeconds pass without progress (an image the kubelet cannot pull): one line
  // naming the pod, for the stall's message.
  std::string waitingMessage;
  std::string summary;  // one line for the logs, "" when nothing happens
};

// The update is gone (aborted, or ended without the loop): a pod it left out of Normal goes back to
// Normal and a gate it left False goes True again, so nothing stays out of service for a hook or a
// drain that no longer runs (DESIGN.md §8.11); a pod labelled Normal that reads as Updating from
// the kubelet's report gets completesOnReport cleared from its record, so that it reads as its
// label. No op when the pod is Normal with its gate not False.
Step Release(const kube::Pod& pod, Clock::time_point now);

// A pod labelled Normal at its write (UpdateState::completesOnReport) completes with no write of
// ours: the change from `old` to `now` (two versions of one pod, as a watch delivers them) is its
// completion when `now` reads as Normal with that record done and `old` did not show the same
// write (its updateTimestamp) done already (an `old` from before the write counts: a relist may
// skip versions). Returns the seconds since the pod write (`at` is when `now` was seen), for the
// completion metric; nullopt when this change completes nothing. (A record that reads as not done
// again for a moment, a later resize the kubelet has not observed yet, counts once more.)
std::optional<double> CompletedOnReport(const kube::Pod& old, const kube::Pod& now,
                                        Clock::time_point at);

// Whether the pod would start an update now if the budget allows (Normal and not at target).
bool WantsStart(const Target& target, const kube::Pod& pod);

// Whether `pod` is on its way through the update's current step and not back yet, so that a pod of
// the same step whose change is done waits for it (Decide's `stepBusy`): draining before its write
// (PreparingUpdate, not held by the pre-update hook), or written at the target and restarting
// (Updating, not done, with no image trouble and no resize pending). A pod held by a hook or by a
// trouble the user must fix holds no other pod.
bool OnItsWay(const Target& target, const Rules& rules, const kube::Pod& pod);

// How long a pod whose change is done waits for the rest of its step before it goes back in
// service alone: from its pod write. A step's writes leave at the loop's client rate (50 a second
// by default, a 250-pod step in about 5 s) and the kubelet restarts a container in a second or
// two; a pod whose image pulls for longer does not keep the others out of service.
inline constexpr long long kStepReturnSeconds = 10;

// The next step for `pod`. `mayStart` grants the budget to a pod for which WantsStart is true.
// `stepBusy`: another pod of the update is OnItsWay; a pod whose change is done, and whose return
// sets its gate True, then waits (PodWait::On::kStep) up to kStepReturnSeconds after its pod write,
// so that the step's pods go back in service together: the ReplicaSet and Deployment controllers
// see one burst of readiness changes per step, not one per pod (DESIGN.md §4a "Steps").
Step Decide(const Target& target, const Rules& rules, const kube::Pod& pod, bool mayStart,
            Clock::time_point now, bool stepBusy = false);

}  // namespace iw::pod_update
