// What the admission rules of every workload kind share (DESIGN.md §4.1, §4.8): the opt-in, the
// keys no new pod may start with, the mutating decision's shape and how it is applied and checked,
// the abort command and its takeover (§9.8), and the warnings' form. The kinds' own decisions are
// hooks/deployment_rules and hooks/statefulset_rules.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/eligibility.h"
#include "hooks/in_progress.h"
#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::rules {

// metadata.labels["inplace-webhook.io/enabled"] == "true" on a Deployment, a pod template or a pod.
bool IsOptedIn(const kube::ObjectView& object);

// The pod state keys of ours that `object`'s metadata (a pod, or a Deployment's pod template)
// carries and that no new pod may start with: `state` other than Normal, `update-state` and
// `hook-timeout` (the loop's records of an update step and of a hook's timeout). Comma-separated
// key names ("" = none); values are not quoted (they came from a client).
std::string ForgedStateKeys(const kube::ObjectView& object);
// The command that stops a running in-place update of `object` (`ref`: deploy/NAME, sts/NAME),
// for messages: `kubectl annotate REF inplace-webhook.io/abort=true -n NAMESPACE`.
std::string AbortCommand(std::string_view ref, const kube::ObjectView& object);

// How long an admitted abort is left to the loop (DESIGN.md §9.8): a user write that still carries
// the abort this long after it was first admitted ends the update in the webhook itself (as does
// an abort admitted while no loop is known to run), so a lost or powerless loop cannot keep a
// workload held.
inline constexpr std::chrono::seconds kAbortTakeover{60};

// What the mutating decision wants of the fields it owns: the in-progress annotation, the command
// annotations it consumes, and, for a Deployment, spec.paused and a restartedAt (a StatefulSet's
// decision never sets those two).
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

// Whether `object` already has what `decision` wants of its annotations (in-progress, the
// commands); a kind's Conforms adds its own fields.
bool AnnotationsConform(const Decision& decision, const kube::ObjectView& object);
// Makes `object` (a Deployment or StatefulSet being admitted) conform to `decision`, touching
// nothing else.
void Apply(const Decision& decision, json::Value& object, json::Allocator& alloc);
// The scratch copy of `object` that Apply may change (json::CopyAlong of the objects Apply
// writes in), to diff against `object` afterwards. Valid while `object` lives unchanged.
json::Value CopyForApply(const json::Value& object, json::Allocator& alloc);

// ---- pieces of the kinds' decisions ----

// The API asks for warnings of at most 120 characters (longer ones are cut with "...").
std::string Warning(std::string text);
// "1 pod", "3 pods".
std::string Pods(long long n);
// "the pod API refuses to change annotation container.apparmor.security.beta.kubernetes.io/app".
std::string PodApiRefuses(const eligibility::Result& r);
// The abort command annotation is "true".
bool AbortRequested(const kube::ObjectView& object);
// The in-progress record the write carries, when it parses (the written record is never trusted;
// it is only compared with the stored one).
std::optional<InProgress> WrittenRecord(const kube::ObjectView& written);
// The user's pause command on a running update (DESIGN.md §8.5, §4.8), into `record` (the stored
// record with `to` already decided): `inplace-webhook.io/pause` "true" sets pausedByUs false (the
// user holds the update), and with `falseResumes` "false" sets it true; the command is consumed
// either way (d.dropPauseCommand). Without a command, a written record that differs from `record`
// in pausedByUs alone is the command's own earlier answer (seen again on re-invocation and by the
// validator): `record` takes it.
void TakePauseCommand(Decision& d, InProgress& record, const kube::ObjectView& written,
                      bool falseResumes);
// A write that carries the abort command while an update runs (DESIGN.md §9.8). The loop acts on
// it (releases the pods, ends the hold); the webhook ends the update itself through `end`, leaving
// the abort annotation for the next write to consume, when no loop is known to run or the abort
// was first admitted kAbortTakeover ago. The first admission stamps abortRequestedAt into the
// record (our own earlier stamp, seen again on re-invocation or by the validator, is taken as
// written). `end(why)` ends `d` and adds its warning, which this replaces.
Decision DecideAbort(Decision& d, std::optional<InProgress>& record,
                     const kube::ObjectView& written, const Facts& ctx,
                     const std::function<void(std::string)>& end);

// What a write decides before looking at its change, while an update runs and the write carries no
// abort (`d` is kKeep with the stored record): an abort the stored object carried and the write
// removed is withdrawn (its stamp cleared from the record); a malformed record is kept as it is,
// for the loop to abort. True when one of them settled `d`; `parseError` is why `record` is absent.
bool SettledByTheStoredState(Decision& d, std::optional<InProgress>& record,
                             const Status& parseError, const kube::ObjectView& stored);
// The written template's change against the stored one (eligibility::CompareTemplates) under the
// written object's policy; nullopt, with `d.reason` saying why, when its lifecycle or policy
// annotation is malformed (the validator denies such a write).
std::optional<eligibility::Result> CompareChange(Decision& d, const kube::ObjectView& written,
                                                 const kube::PodTemplate& oldTemplate,
                                                 const kube::PodTemplate& newTemplate,
                                                 const Facts& ctx);
// A change that is not eligible (`r.verdict` kNotEligible): `stop` (a kind's end or skip) gets why,
// and a resize that cannot be made in place adds its own warning after it.
void NotEligible(Decision& d, const eligibility::Result& r,
                 const std::function<void(std::string)>& stop);

}  // namespace iw::rules
