#include "hooks/workload_rules.h"

#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "lib/list_text.h"
#include "lib/rfc3339.h"

namespace iw::rules {

bool IsOptedIn(const kube::ObjectView& object) {
  return object.label(keys::kEnabledLabel) == keys::kTrue;
}

std::string ForgedStateKeys(const kube::ObjectView& object) {
  std::string out;
  std::optional<std::string_view> state = object.label(keys::kStateLabel);
  if (state && *state != keys::kStateNormal) AppendItem(out, keys::kStateLabel);
  if (object.annotation(keys::kUpdateStateAnnotation)) {
    AppendItem(out, keys::kUpdateStateAnnotation);
  }
  if (object.annotation(keys::kHookTimeoutAnnotation)) {
    AppendItem(out, keys::kHookTimeoutAnnotation);
  }
  return out;
}

std::string AbortCommand(std::string_view ref, const kube::ObjectView& object) {
  std::string out =
      "kubectl annotate " + std::string(ref) + " " + std::string(keys::kAbortAnnotation) + "=true";
  std::string_view ns = object.ns();
  if (!ns.empty()) out += " -n " + std::string(ns);
  return out;
}

bool AnnotationsConform(const Decision& decision, const kube::ObjectView& object) {
  if (decision.action == Decision::Action::kIgnore) return true;
  if (decision.dropPauseCommand && object.annotation(keys::kPauseAnnotation)) return false;
  if (decision.dropUndoCommand && object.annotation(keys::kUndoAnnotation)) return false;
  if (decision.dropAbortCommand && object.annotation(keys::kAbortAnnotation)) return false;
  std::optional<std::string_view> written = object.annotation(keys::kInProgressAnnotation);
  if (decision.inProgress) return written == std::string_view(*decision.inProgress);
  return !written;
}

void Apply(const Decision& decision, json::Value& object, json::Allocator& alloc) {
  if (decision.action == Decision::Action::kIgnore) return;
  if (json::Value* annotations =
          json::FindMutable(json::FindMutable(&object, "metadata"), "annotations")) {
    if (decision.dropPauseCommand) json::Remove(*annotations, keys::kPauseAnnotation);
    if (decision.dropUndoCommand) json::Remove(*annotations, keys::kUndoAnnotation);
    if (decision.dropAbortCommand) json::Remove(*annotations, keys::kAbortAnnotation);
  }
  if (decision.restartedAt) {
    json::Value& tmpl =
        json::EnsureObject(json::EnsureObject(object, "spec", alloc), "template", alloc);
    json::SetString(
        json::EnsureObject(json::EnsureObject(tmpl, "metadata", alloc), "annotations", alloc),
        keys::kRestartedAtAnnotation, *decision.restartedAt, alloc);
  }
  if (decision.paused && kube::PausedOf(object) != *decision.paused) {
    json::Set(json::EnsureObject(object, "spec", alloc), "paused", json::Value(*decision.paused),
              alloc);
  }
  if (decision.inProgress) {
    if (kube::AnnotationOf(object, keys::kInProgressAnnotation) !=
        std::string_view(*decision.inProgress)) {
      json::Value& meta = json::EnsureObject(object, "metadata", alloc);
      json::SetString(json::EnsureObject(meta, "annotations", alloc), keys::kInProgressAnnotation,
                      *decision.inProgress, alloc);
    }
  } else if (json::Value* annotations =
                 json::FindMutable(json::FindMutable(&object, "metadata"), "annotations")) {
    json::Remove(*annotations, keys::kInProgressAnnotation);
  }
}

json::Value CopyForApply(const json::Value& object, json::Allocator& alloc) {
  // Every object Apply sets, adds or removes members in; keep in step with Apply.
  return json::CopyAlong(
      object, {{"metadata", "annotations"}, {"spec", "template", "metadata", "annotations"}},
      alloc);
}

std::string Warning(std::string text) {
  constexpr size_t kMax = 120;
  if (text.size() > kMax) text = text.substr(0, kMax - 3) + "...";
  return text;
}

std::string Pods(long long n) {
  return std::to_string(n) + (n == 1 ? " pod" : " pods");
}

// "the pod API refuses to change annotation container.apparmor.security.beta.kubernetes.io/app".
std::string PodApiRefuses(const eligibility::Result& r) {
  return "the pod API refuses to change " + r.podApiRefuses;
}

bool AbortRequested(const kube::ObjectView& object) {
  return object.annotation(keys::kAbortAnnotation) == keys::kTrue;
}

std::optional<InProgress> WrittenRecord(const kube::ObjectView& written) {
  return ParseInProgressOrNone(written.annotation(keys::kInProgressAnnotation));
}

void TakePauseCommand(Decision& d, InProgress& record, const kube::ObjectView& written,
                      bool falseResumes) {
  if (const std::optional<std::string_view> command = written.annotation(keys::kPauseAnnotation)) {
    d.dropPauseCommand = true;
    if (*command == keys::kTrue) record.pausedByUs = false;
    if (falseResumes && *command == "false") record.pausedByUs = true;
  } else if (const std::optional<InProgress> w = WrittenRecord(written)) {
    InProgress other = *w;
    other.pausedByUs = record.pausedByUs;
    if (other == record) record.pausedByUs = w->pausedByUs;
  }
}

Decision DecideAbort(Decision& d, std::optional<InProgress>& record, const kube::ObjectView& newD,
                     const Facts& ctx, const std::function<void(std::string)>& end) {
  if (!ctx.loopAlive) {
    end("aborted while no in-place loop runs");
    d.warnings.back() = Warning(
        "in-place update ended by the webhook (no in-place loop runs): a normal rollout follows");
    return d;
  }
  if (!record) {
    d.reason = "abort requested; the stored in-progress record is malformed; the loop aborts it";
    return d;
  }
  if (record->abortRequestedAt.empty()) {
    record->abortRequestedAt = rfc3339::Format(ctx.now);
    if (const std::optional<InProgress> w = WrittenRecord(newD)) {
      InProgress other = *w;
      other.abortRequestedAt = record->abortRequestedAt;
      const std::optional<std::chrono::system_clock::time_point> at =
          rfc3339::Parse(w->abortRequestedAt);
      if (other == *record && at && *at <= ctx.now + std::chrono::seconds(1) &&
          *at >= ctx.now - std::chrono::seconds(10)) {
        record->abortRequestedAt = w->abortRequestedAt;
      }
    }
    d.inProgress = SerializeInProgress(*record);
    d.reason = "abort requested: the loop hands the update back to the native rollout";
    d.warnings.push_back(Warning("in-place update: abort requested; if it still runs in " +
                                 std::to_string(kAbortTakeover.count()) +
                                 " s, run the abort command again"));
    return d;
  }
  const std::optional<std::chrono::system_clock::time_point> at =
      rfc3339::Parse(record->abortRequestedAt);
  if (!at || ctx.now - *at >= kAbortTakeover) {
    end("the loop did not act on the abort within " + std::to_string(kAbortTakeover.count()) +
        " s");
    d.warnings.back() = Warning(
        "in-place update ended by the webhook (the loop did not act on the "
        "abort): a normal rollout follows");
    return d;
  }
  d.reason = "abort requested at " + record->abortRequestedAt + "; the loop has not acted yet";
  d.warnings.push_back(Warning("in-place update: abort pending since " + record->abortRequestedAt +
                               "; the webhook ends the update itself " +
                               std::to_string(kAbortTakeover.count()) + " s after it"));
  return d;
}

bool SettledByTheStoredState(Decision& d, std::optional<InProgress>& record,
                             const Status& parseError, const kube::ObjectView& stored) {
  if (AbortRequested(stored)) {
    d.reason = "abort withdrawn before the loop acted on it";
    if (record && !record->abortRequestedAt.empty()) {
      record->abortRequestedAt.clear();
      d.inProgress = SerializeInProgress(*record);
    }
    return true;
  }
  if (!record) {
    d.reason = "the stored in-progress record is malformed (" + parseError.message() +
               "); the loop aborts it";
    return true;
  }
  return false;
}

std::optional<eligibility::Result> CompareChange(Decision& d, const kube::ObjectView& written,
                                                 const kube::PodTemplate& oldTemplate,
                                                 const kube::PodTemplate& newTemplate,
                                                 const Facts& ctx) {
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(written);
  if (!settings.ok()) {
    d.reason = settings.status().message() + " (the validator denies this write)";
    return std::nullopt;
  }
  return eligibility::CompareTemplates(&oldTemplate, &newTemplate, settings->policy, ctx.resize);
}

void NotEligible(Decision& d, const eligibility::Result& r,
                 const std::function<void(std::string)>& stop) {
  if (!r.podApiRefuses.empty()) {
    stop(PodApiRefuses(r));
    return;
  }
  stop(r.blockingPath + " changed");
  if (r.resize) d.warnings.push_back(Warning("in-place resize not possible: " + r.reason));
}

}  // namespace iw::rules
