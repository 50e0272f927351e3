// The in-place rules of a Deployment (DESIGN.md §3, §4.1, §4a): the facts about a Deployment they
// read, the shape checks of admitted objects, and the ONE decision that both Deployment webhooks
// share: the mutator applies it, the validator admits only its fixed points.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/kube_objects.h"
#include "lib/status.h"

namespace iw::deployment {

// metadata.labels["inplace-webhook.io/enabled"] == "true" on a Deployment, a pod template or a pod.
bool IsOptedIn(const kube::ObjectView& object);

// The pod state keys of ours that `object`'s metadata (a pod, or a Deployment's pod template)
// carries and that no new pod may start with: `state` other than Normal, `update-state` and
// `hook-timeout` (the loop's records of an update step and of a hook's timeout). Comma-separated
// key names ("" = none); values are not quoted (they came from a client).
std::string ForgedStateKeys(const kube::ObjectView& object);
// spec.template.spec.readinessGates holds {conditionType: inplace-webhook.io/ready}.
bool HasReadinessGate(const kube::Deployment& deployment);

// The command that stops a running in-place update of `deployment`, for messages:
// `kubectl annotate deploy/NAME inplace-webhook.io/abort=true -n NAMESPACE`.
std::string AbortCommand(const kube::Deployment& deployment);

// How long an admitted abort is left to the loop (DESIGN.md §9.8): a user write that still carries
// the abort this long after it was first admitted ends the update in the webhook itself (as does
// an abort admitted while no loop is known to run), so a lost or powerless loop cannot keep a
// Deployment paused.
inline constexpr std::chrono::seconds kAbortTakeover{60};

// What the mutating decision wants of the two fields it owns: spec.paused and the in-progress
// annotation.
struct Decision {
  enum class Action {
    kIgnore,    // not opted in and no update running: nothing of ours to enforce
    kNone,      // opted in, no in-place update runs or starts: in-progress must be absent
    kStart,     // an eligible change starts an in-place update
    kKeep,      // an update runs; kept exactly as stored (no template change, abort pending, ...)
    kRetarget,  // an update runs and a further eligible change moves its target (`to`)
    kEnd,       // an update runs and a change that is not eligible (or an opt-out) ends it
  };
  Action action = Action::kIgnore;
  // The value spec.paused must have; nullopt: whatever the user wrote.
  std::optional<bool> paused;
  // The exact text the in-progress annotation must have; nullopt: it must be absent (except for
  // kIgnore, which enforces nothing).
  std::optional<std::string> inProgress;
  // The write carries the pause or undo command annotation (DESIGN.md §8.1, §8.5): it is
  // removed (the pause is then carried by `inProgress`'s pausedByUs or by spec.paused; the undo is
  // the loop's to act on while an update runs, so it is kept then).
  bool dropPauseCommand = false;
  bool dropUndoCommand = false;
  // The abort annotation stored with no update running (left by an update the webhook ended,
  // DESIGN.md §9.8): consumed by the next write.
  bool dropAbortCommand = false;
  // kEnd only: the value of kubectl.kubernetes.io/restartedAt the template gets, when the webhook
  // ends an update while the written template is its pods' ReplicaSet's (`from`: a revert). No
  // rollout would follow, and pods the update had moved would stay on another template; the
  // restart (as `kubectl rollout restart` writes it) makes the native rollout replace every pod at
  // the Deployment's template (DESIGN.md §8.11).
  std::optional<std::string> restartedAt;
  // For the user (kubectl prints them), each at most 120 characters.
  std::vector<std::string> warnings;
  // One line on why, for logs and denial messages.
  std::string reason;
};

// What the rules know beyond the two objects (the webhooks fill it from their admission context):
// the time, whether a loop is known to run (DESIGN.md §8.6), and what the API server allows of
// container resources on running pods.
struct Facts {
  std::chrono::system_clock::time_point now;
  bool loopAlive = false;
  resize_support::Support resize;
};

// The mutating decision for a Deployment UPDATE by someone other than the controller, from the
// stored object (`oldDeployment`) and the written one (`newDeployment`). State is read from the
// stored object only: whether an update runs (its in-progress annotation) and pausedByUs (!old
// spec.paused, decided when the update starts). The written object's in-progress is never trusted,
// except that a start carries its startedAt when from/to/pausedByUs equal the computed ones (so
// answering our own output changes nothing). Applying the decision to `newDeployment` and deciding
// again on the result gives the same decision with nothing left to change.
Decision Decide(const kube::Deployment& oldDeployment, const kube::Deployment& newDeployment,
                const Facts& ctx);

// Whether `deployment` already has what `decision` wants (paused, in-progress).
bool Conforms(const Decision& decision, const kube::Deployment& deployment);
// Makes `deployment` conform to `decision`, touching nothing else.
void Apply(const Decision& decision, json::Value& deployment, json::Allocator& alloc);

}  // namespace iw::deployment
