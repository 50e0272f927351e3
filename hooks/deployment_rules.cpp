#include "hooks/deployment_rules.h"
#include "lib/rfc3339.h"

#include <array>
#include <charconv>
#include <cmath>

#include "hooks/budget.h"
#include "hooks/eligibility.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "lib/kube_objects.h"
#include "lib/list_text.h"

namespace iw::deployment {

namespace {

// ---- deciding ----

using Action = Decision::Action;

std::string DeploymentRef(const kube::Deployment& deployment) {
  return "deploy/" + std::string(deployment.name().empty() ? "NAME" : deployment.name());
}

using rules::AbortRequested;
using rules::DecideAbort;
using rules::PodApiRefuses;
using rules::Pods;
using rules::Warning;
using rules::WrittenRecord;

// Who holds the pause of a running update after this write (DESIGN.md §8.5): `record`'s
// pausedByUs as stored (with `to` already decided), changed only by the user's pause command, a
// written record that differs from `record` in pausedByUs alone (the command's own result, seen
// again on re-invocation and by the validator), or the user's unpause of a pause the user holds
// (kubectl rollout resume: the update goes on, the Deployment stays paused until its end).
bool DecidePause(Decision& d, InProgress& record, const kube::Deployment& oldD,
                 const kube::Deployment& newD) {
  const bool before = record.pausedByUs;
  // (Its resume is kubectl rollout resume, below: pause "false" is only consumed.)
  rules::TakePauseCommand(d, record, newD, /*falseResumes=*/false);
  if (!newD.paused() && oldD.paused() && !before) record.pausedByUs = true;
  if (record.pausedByUs == before) return false;
  d.warnings.push_back(
      Warning(record.pausedByUs
                  ? "in-place update resumed: it goes on; the Deployment unpauses when it is done"
                  : "in-place update paused: no further pod starts until kubectl rollout resume " +
                        DeploymentRef(newD)));
  return true;
}

// The decision while an in-place update runs (the stored object has `in-progress`).
Decision DecideRunning(std::string_view stored, const kube::Deployment& oldD,
                       const kube::Deployment& newD, const Facts& ctx) {
  Decision d;
  d.action = Action::kKeep;
  d.paused = true;
  d.inProgress = std::string(stored);
  StatusOr<InProgress> parsed = ParseInProgress(stored);
  std::optional<InProgress> record;
  if (parsed.ok()) record = *std::move(parsed);
  auto end = [&](std::string why) {
    d.action = Action::kEnd;
    // A malformed record: pausedByUs is unknown; leave paused as the user wrote it.
    d.paused = record && record->pausedByUs ? std::optional<bool>(false) : std::nullopt;
    if (newD.annotation(keys::kPauseAnnotation)) {
      d.dropPauseCommand = true;
      if (newD.annotation(keys::kPauseAnnotation) == keys::kTrue) d.paused = true;
    }
    d.dropUndoCommand = newD.annotation(keys::kUndoAnnotation).has_value();
    d.inProgress.reset();
    d.reason = "in-place update ended: " + why;
    d.warnings.push_back(Warning("in-place update ended (" + why + "): a normal rollout follows"));
    return d;
  };
  if (AbortRequested(newD)) return DecideAbort(d, record, newD, ctx, end);
  if (rules::SettledByTheStoredState(d, record, parsed.status(), oldD)) return d;
  auto notEligible = [&](const eligibility::Result& r) {
    if (r.podApiRefuses.empty()) {
      end(r.blockingPath + " changed");
      if (r.resize) d.warnings.push_back(Warning("in-place resize not possible: " + r.reason));
      return d;
    }
    end(PodApiRefuses(r));
    d.warnings.back() =
        Warning(PodApiRefuses(r) + ": the in-place update ends, a normal rollout follows");
    return d;
  };
  if (!IsOptedIn(newD)) return end("Deployment label inplace-webhook.io/enabled removed");
  // The native Recreate replaces every pod at once: from then on no two templates run together
  // (DESIGN.md §3.2).
  if (newD.recreate()) return end("strategy Recreate");
  const std::optional<eligibility::Result> compared =
      rules::CompareChange(d, newD, oldD.podTemplate(), newD.podTemplate(), ctx);
  if (!compared) return d;
  const eligibility::Result& r = *compared;
  switch (r.verdict) {
    case eligibility::Verdict::kNoChange:
      d.reason = "in-place update running; template unchanged";
      break;
    case eligibility::Verdict::kNotEligible:
      return notEligible(r);
    case eligibility::Verdict::kEligible: {
      const kube::PodTemplate tmpl = newD.podTemplate();
      if (!IsOptedIn(tmpl)) return end("template label inplace-webhook.io/enabled removed");
      record->to = TemplateHash(tmpl);
      d.action = Action::kRetarget;
      d.inProgress = SerializeInProgress(*record);
      d.reason = "in-place update re-targeted to " + record->to;
      d.warnings.push_back(Warning("in-place update re-targeted: " + Pods(newD.replicas()) +
                                   " will be updated to the new template; rollout stays paused"));
      break;
    }
  }
  const bool pauseChanged = DecidePause(d, *record, oldD, newD);
  if (pauseChanged) d.inProgress = SerializeInProgress(*record);
  // The user's unpause of an update they held is the resume itself, not an unpause to refuse.
  const bool resumed = pauseChanged && record->pausedByUs;
  if (newD.annotation(keys::kUndoAnnotation) == keys::kTrue) {
    d.warnings.push_back(
        Warning("in-place update: undo requested; the pods return to their template in place"));
  }
  // The user's write dropped, edited or unpaused ours (not: it is our own earlier answer).
  std::optional<std::string_view> written = newD.annotation(keys::kInProgressAnnotation);
  if ((!newD.paused() && record->pausedByUs && !d.dropPauseCommand && !resumed) ||
      (written != stored && written != std::string_view(*d.inProgress))) {
    d.warnings.push_back(Warning(
        "in-place update in progress: spec.paused=true and inplace-webhook.io/in-progress kept"));
    d.warnings.push_back(Warning("to stop it: " + AbortCommand(newD)));
  }
  return d;
}

// The decision when no in-place update runs: start one, or leave everything to the native rollout.
Decision DecideIdle(const kube::Deployment& oldD, const kube::Deployment& newD, const Facts& ctx) {
  Decision d;
  d.action = Action::kNone;
  const kube::PodTemplate oldT = oldD.podTemplate();
  const kube::PodTemplate newT = newD.podTemplate();
  auto skip = [&](std::string why) {
    d.reason = "no in-place update: " + why;
    d.warnings.push_back(
        Warning("in-place update not possible (" + why + "): a normal rollout follows"));
    return d;
  };
  const std::optional<eligibility::Result> compared =
      rules::CompareChange(d, newD, oldD.podTemplate(), newD.podTemplate(), ctx);
  if (!compared) return d;
  const eligibility::Result& r = *compared;
  if (r.verdict == eligibility::Verdict::kNoChange) {
    d.reason = "no template change";
    return d;
  }
  if (r.verdict == eligibility::Verdict::kNotEligible && !r.podApiRefuses.empty()) {
    // Named on its own: the policy allow-list cannot make it eligible, and the key must show.
    d.reason = "no in-place update: " + PodApiRefuses(r);
    d.warnings.push_back(Warning(PodApiRefuses(r) + ": a normal rollout follows"));
    return d;
  }
  if (r.verdict == eligibility::Verdict::kNotEligible) {
    skip(r.blockingPath + " changed");
    if (r.resize) d.warnings.push_back(Warning("in-place resize not possible: " + r.reason));
    return d;
  }
  if (AbortRequested(newD) && !AbortRequested(oldD)) return skip("inplace-webhook.io/abort is set");
  if (!IsOptedIn(oldT) || !IsOptedIn(newT)) {
    return skip("pod template lacks label inplace-webhook.io/enabled=true");
  }
  // Recreate promises that no pod runs the new template while one runs the old; hooks and the
  // budget cannot keep that promise in place (DESIGN.md §3.2).
  if (newD.recreate()) return skip("strategy Recreate never runs two templates at once");
  if (oldD.replicas() == 0) {
    d.reason = "no in-place update: no pods";
    return d;
  }
  // A spec write the controller has not observed yet, or a scale whose pods are still being
  // created, is no rollout: only pods of an older ReplicaSet are (DESIGN.md §3).
  if (!oldD.PodsOnNewestReplicaSet()) return skip("the previous rollout is not complete");
  if (oldD.statusReplicas() == 0) return skip("no pod runs yet");
  // A pause written with the change is the user's, as much as one stored before it: upstream,
  // a paused Deployment never rolls out (DESIGN.md §8.5).
  InProgress record{TemplateHash(oldT), TemplateHash(newT), !oldD.paused() && !newD.paused(),
                    rfc3339::Format(ctx.now), ""};
  // Re-invocation on our own output: keep the startedAt we wrote then, and its pausedByUs where
  // the stored object was not paused (the pause on our output is then the one our record says:
  // ours with pausedByUs true, the user's or the pause command's with false). On a Deployment
  // the user had paused, a written pausedByUs true is never taken (a user cannot claim a pause).
  if (const std::optional<InProgress> w = WrittenRecord(newD)) {
    if (w->from == record.from && w->to == record.to &&
        (w->pausedByUs == record.pausedByUs || !w->pausedByUs || !oldD.paused()) &&
        rfc3339::IsCanonical(w->startedAt)) {
      record.startedAt = w->startedAt;
      record.pausedByUs = w->pausedByUs;
    }
  }
  d.action = Action::kStart;
  d.paused = true;
  d.inProgress = SerializeInProgress(record);
  d.reason = "in-place update started: " + record.from + " -> " + record.to;
  d.warnings.push_back(Warning("in-place update: " + Pods(newD.replicas()) +
                               " will be updated without restart of unchanged containers; "
                               "rollout paused until done"));
  d.warnings.push_back(
      Warning("kubectl rollout undo refuses a paused Deployment; to undo: kubectl annotate " +
              DeploymentRef(newD) + " " + std::string(keys::kUndoAnnotation) + "=true"));
  if (budget::ResolveMaxUnavailable(newD) == 0) {
    d.warnings.push_back(Warning(
        "in-place update: maxUnavailable is 0, but pods are still updated one at a time and a "
        "changed container restarts"));
  }
  // Started all the same (a leader change or a controller restart is a short gap), but said: the
  // update waits for a loop, and the abort, which the webhook then carries out itself, ends it.
  if (!ctx.loopAlive) {
    d.warnings.push_back(
        Warning("in-place update: no inplace-webhook controller is known to run; the update "
                "waits until one does"));
    d.warnings.push_back(Warning("to end it now: " + AbortCommand(newD)));
  }
  return d;
}

}  // namespace

std::string AbortCommand(const kube::Deployment& deployment) {
  return rules::AbortCommand(DeploymentRef(deployment), deployment);
}

// An end by the webhook (it cannot see pods) of an update whose written template is the one the
// pods' ReplicaSet holds (`from`: A→B→A) starts no rollout, so pods already moved to B would stay
// there under an A template, reported as rolled out (issue 28): the template gets a restartedAt, so
// that the native rollout replaces every pod at A. A malformed record says nothing: left alone.
void RestartWhenNoRolloutFollows(Decision& d, std::string_view stored, const kube::Deployment& newD,
                                 const Facts& ctx) {
  const std::optional<InProgress> record = ParseInProgressOrNone(stored);
  if (!record || TemplateHash(newD.podTemplate()) != record->from) return;
  d.restartedAt = rfc3339::Format(ctx.now);
  d.warnings.push_back(Warning("the template is the one the pods started from: " +
                               std::string(keys::kRestartedAtAnnotation) +
                               " added, every pod is replaced at it"));
}

Decision Decide(const kube::Deployment& oldDeployment, const kube::Deployment& newDeployment,
                const Facts& ctx) {
  if (std::optional<std::string_view> stored =
          oldDeployment.annotation(keys::kInProgressAnnotation)) {
    Decision d = DecideRunning(*stored, oldDeployment, newDeployment, ctx);
    if (d.action == Action::kEnd) RestartWhenNoRolloutFollows(d, *stored, newDeployment, ctx);
    return d;
  }
  if (!IsOptedIn(newDeployment)) {
    Decision d;
    d.reason = "not opted in (label inplace-webhook.io/enabled=true)";
    return d;
  }
  Decision d = DecideIdle(oldDeployment, newDeployment, ctx);
  // Our own earlier answer, seen again after a later webhook made the change one that does not
  // start an update (reinvocationPolicy IfNeeded): take back the pause it added with its record,
  // or the Deployment would stay paused with nothing to unpause it (DESIGN.md §8.11).
  // Only a pause our record says is ours (pausedByUs true): one the user wrote with the change,
  // or asked for with the pause command, stays.
  if (d.action == Action::kNone && newDeployment.paused() && !oldDeployment.paused()) {
    const std::optional<InProgress> w =
        ParseInProgressOrNone(newDeployment.annotation(keys::kInProgressAnnotation));
    if (w && w->pausedByUs) d.paused = false;
  }
  // The commands with no update running: pause is spec.paused (and a start the user holds);
  // undo has nothing to undo (kubectl rollout undo does it natively).
  if (std::optional<std::string_view> pause = newDeployment.annotation(keys::kPauseAnnotation)) {
    d.dropPauseCommand = true;
    if (pause == keys::kTrue) {
      d.paused = true;
      std::optional<InProgress> record = ParseInProgressOrNone(d.inProgress);
      if (record && record->pausedByUs) {
        record->pausedByUs = false;
        d.inProgress = SerializeInProgress(*record);
      }
    }
  }
  if (oldDeployment.annotation(keys::kAbortAnnotation) &&
      newDeployment.annotation(keys::kAbortAnnotation)) {
    d.dropAbortCommand = true;
  }
  if (newDeployment.annotation(keys::kUndoAnnotation)) {
    d.dropUndoCommand = true;
    d.warnings.push_back(
        Warning("no in-place update runs: nothing to undo in place; use "
                "kubectl rollout undo " +
                DeploymentRef(newDeployment)));
  }
  return d;
}

bool Conforms(const Decision& decision, const kube::Deployment& deployment) {
  if (decision.action == Action::kIgnore) return true;
  if (decision.paused && deployment.paused() != *decision.paused) return false;
  if (decision.restartedAt && deployment.podTemplate().annotation(keys::kRestartedAtAnnotation) !=
                                  std::string_view(*decision.restartedAt)) {
    return false;
  }
  return rules::AnnotationsConform(decision, deployment);
}

}  // namespace iw::deployment
