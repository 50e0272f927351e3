#include "hooks/statefulset_rules.h"

#include <algorithm>

#include "hooks/eligibility.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "lib/rfc3339.h"

namespace iw::statefulset {

namespace {

using rules::Decision;
using rules::Warning;
using Action = Decision::Action;

// The user's pause command on a running update (DESIGN.md §4.8): `pause=true` holds it (no further
// pod starts; a pod already moving finishes), `pause=false` lets it go on (a StatefulSet has no
// spec.paused for kubectl rollout resume). Updates `record` and the decision.
void DecideUserPause(Decision& d, InProgress& record, const kube::StatefulSet& newS) {
  const bool before = record.pausedByUs;
  rules::TakePauseCommand(d, record, newS, /*falseResumes=*/true);
  if (record.pausedByUs == before) return;
  d.inProgress = SerializeInProgress(record);
  d.warnings.push_back(
      Warning(record.pausedByUs
                  ? "in-place update resumed: it goes on"
                  : "in-place update paused: no further pod starts until kubectl inplace resume " +
                        Ref(newS)));
}

// The decision while an in-place update runs (the stored object has `in-progress`).
Decision DecideRunning(std::string_view stored, const kube::StatefulSet& oldS,
                       const kube::StatefulSet& newS, const rules::Facts& ctx) {
  Decision d;
  d.action = Action::kKeep;
  d.inProgress = std::string(stored);
  StatusOr<InProgress> parsed = ParseInProgress(stored);
  std::optional<InProgress> record;
  if (parsed.ok()) record = *std::move(parsed);
  auto end = [&](std::string why) {
    d.action = Action::kEnd;
    d.inProgress.reset();
    d.reason = "in-place update ended: " + why;
    d.warnings.push_back(
        Warning("in-place update ended (" + why + "): the rolling update replaces the pods"));
  };
  if (rules::AbortRequested(newS)) return rules::DecideAbort(d, record, newS, ctx, end);
  if (rules::SettledByTheStoredState(d, record, parsed.status(), oldS)) return d;
  if (!rules::IsOptedIn(newS)) {
    end("StatefulSet label inplace-webhook.io/enabled removed");
    return d;
  }
  if (!newS.rollingUpdate()) {
    end("updateStrategy " + std::string(newS.updateStrategy()));
    return d;
  }
  const std::optional<eligibility::Result> compared =
      rules::CompareChange(d, newS, oldS.podTemplate(), newS.podTemplate(), ctx);
  if (!compared) return d;
  const eligibility::Result& r = *compared;
  switch (r.verdict) {
    case eligibility::Verdict::kNoChange:
      d.reason = "in-place update running; template unchanged";
      break;
    case eligibility::Verdict::kNotEligible:
      rules::NotEligible(d, r, end);
      return d;
    case eligibility::Verdict::kEligible: {
      const kube::PodTemplate tmpl = newS.podTemplate();
      if (!rules::IsOptedIn(tmpl)) {
        end("template label inplace-webhook.io/enabled removed");
        return d;
      }
      record->to = TemplateHash(tmpl);
      d.action = Action::kRetarget;
      d.inProgress = SerializeInProgress(*record);
      d.reason = "in-place update re-targeted to " + record->to;
      d.warnings.push_back(Warning("in-place update re-targeted: " + rules::Pods(newS.replicas()) +
                                   " will be updated to the new template in place"));
      break;
    }
  }
  DecideUserPause(d, *record, newS);
  // The user's write dropped or edited ours (not: it is our own earlier answer).
  const std::optional<std::string_view> written = newS.annotation(keys::kInProgressAnnotation);
  if (written != stored && written != std::string_view(*d.inProgress)) {
    d.warnings.push_back(
        Warning("in-place update in progress: inplace-webhook.io/in-progress kept"));
    d.warnings.push_back(Warning("to stop it: " + AbortCommand(newS)));
  }
  return d;
}

// The decision when no in-place update runs: start one, or leave the change to the native
// rolling update.
Decision DecideIdle(const kube::StatefulSet& oldS, const kube::StatefulSet& newS,
                    const rules::Facts& ctx) {
  Decision d;
  d.action = Action::kNone;
  auto skip = [&](std::string why) {
    d.reason = "no in-place update: " + why;
    d.warnings.push_back(
        Warning("in-place update not possible (" + why + "): a rolling update follows"));
    return d;
  };
  const std::optional<eligibility::Result> compared =
      rules::CompareChange(d, newS, oldS.podTemplate(), newS.podTemplate(), ctx);
  if (!compared) return d;
  const eligibility::Result& r = *compared;
  if (r.verdict == eligibility::Verdict::kNoChange) {
    d.reason = "no template change";
    return d;
  }
  if (r.verdict == eligibility::Verdict::kNotEligible) {
    rules::NotEligible(d, r, skip);
    return d;
  }
  if (rules::AbortRequested(newS) && !rules::AbortRequested(oldS)) {
    return skip("inplace-webhook.io/abort is set");
  }
  const kube::PodTemplate oldT = oldS.podTemplate();
  const kube::PodTemplate newT = newS.podTemplate();
  if (!rules::IsOptedIn(oldT) || !rules::IsOptedIn(newT)) {
    return skip("pod template lacks label inplace-webhook.io/enabled=true");
  }
  // OnDelete leaves each pod's update to the user's delete; Recreate (1.37 alpha) replaces every
  // pod at once. Neither is a rolling update to do in place.
  if (!newS.rollingUpdate()) {
    return skip("updateStrategy " + std::string(newS.updateStrategy()));
  }
  if (oldS.replicas() == 0) {
    d.reason = "no in-place update: no pods";
    return d;
  }
  // A rolling update under way (or staged by a partition) has pods of two revisions already; the
  // in-place update starts from one.
  if (oldS.currentRevision() != oldS.updateRevision()) {
    return skip("a rolling update is under way");
  }
  if (oldS.statusReplicas() == 0) return skip("no pod runs yet");
  // pausedByUs true: whatever holds the update is ours (the planner reads false as a user's pause
  // that holds it, DESIGN.md §8.5; a StatefulSet has none).
  InProgress record{TemplateHash(oldT), TemplateHash(newT), /*pausedByUs=*/true,
                    rfc3339::Format(ctx.now), ""};
  // Re-invocation on our own output: keep the startedAt we wrote then.
  if (const std::optional<InProgress> w = rules::WrittenRecord(newS)) {
    if (w->from == record.from && w->to == record.to && w->pausedByUs &&
        w->abortRequestedAt.empty() && rfc3339::IsCanonical(w->startedAt)) {
      record.startedAt = w->startedAt;
    }
  }
  d.action = Action::kStart;
  d.inProgress = SerializeInProgress(record);
  d.reason = "in-place update started: " + record.from + " -> " + record.to;
  const int partition = std::min(newS.partition(), newS.replicas());
  // (Under 120 characters, the API server's limit for a warning.)
  d.warnings.push_back(
      Warning("in-place update: " + rules::Pods(newS.replicas() - partition) +
              " will be updated in place, highest ordinal first" +
              (partition > 0 ? "; " + std::to_string(partition) + " below partition " +
                                   std::to_string(newS.partition()) + " stay"
                             : "")));
  if (!ctx.loopAlive) {
    d.warnings.push_back(
        Warning("in-place update: no inplace-webhook controller is known to run; the update "
                "waits until one does"));
    d.warnings.push_back(Warning("to end it now: " + AbortCommand(newS)));
  }
  return d;
}

}  // namespace

std::string Ref(const kube::ObjectView& set) {
  return "sts/" + std::string(set.name().empty() ? "NAME" : set.name());
}

std::string AbortCommand(const kube::ObjectView& set) {
  return rules::AbortCommand(Ref(set), set);
}

Decision Decide(const kube::StatefulSet& oldSet, const kube::StatefulSet& newSet,
                const rules::Facts& ctx) {
  Decision d;
  if (std::optional<std::string_view> stored = oldSet.annotation(keys::kInProgressAnnotation)) {
    d = DecideRunning(*stored, oldSet, newSet, ctx);
  } else if (!rules::IsOptedIn(newSet)) {
    d.reason = "not opted in (label inplace-webhook.io/enabled=true)";
    return d;
  } else {
    d = DecideIdle(oldSet, newSet, ctx);
  }
  if (rules::AbortRequested(oldSet) && newSet.annotation(keys::kAbortAnnotation) &&
      !oldSet.annotation(keys::kInProgressAnnotation)) {
    d.dropAbortCommand = true;
  }
  // A pause command with no update to hold (none runs, or this write ends it) is taken out with a
  // word; kubectl rollout undo sts/NAME writes the previous template, which this decision then
  // updates in place: the undo command is taken out too.
  if (newSet.annotation(keys::kPauseAnnotation) && !d.dropPauseCommand) {
    d.dropPauseCommand = true;
    d.warnings.push_back(Warning("inplace-webhook.io/pause: no in-place update runs on " +
                                 Ref(newSet) + " to pause or resume"));
  }
  if (newSet.annotation(keys::kUndoAnnotation)) {
    d.dropUndoCommand = true;
    d.warnings.push_back(
        Warning("to undo: kubectl rollout undo " + Ref(newSet) + " (it is updated in place)"));
  }
  return d;
}

bool Conforms(const rules::Decision& decision, const kube::StatefulSet& set) {
  return rules::AnnotationsConform(decision, set);
}

}  // namespace iw::statefulset
