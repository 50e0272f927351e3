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

namespace iw::deployment {

namespace {

// ---- reading ----

long long IntOr(const json::Value* v, long long fallback) {
  if (v == nullptr || !v->IsInt64()) return fallback;
  return v->GetInt64();
}

std::optional<std::string_view> MapString(const json::Value& object, std::string_view map,
                                          std::string_view key) {
  const json::Value* v = json::Find(json::Path(&object, {"metadata", map}), key);
  if (v == nullptr || !v->IsString()) return std::nullopt;
  return json::View(*v);
}

// ---- shape ----

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

// ---- deciding ----

using Action = Decision::Action;

// The API asks for warnings of at most 120 characters (longer ones may be truncated).
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

bool AbortRequested(const json::Value& deployment) {
  return Annotation(deployment, keys::kAbortAnnotation) == keys::kTrue;
}

std::string DeploymentRef(const json::Value& deployment) {
  return "deploy/" +
         std::string(json::StringOr(json::Find(&deployment, "metadata"), "name", "NAME"));
}

// The in-progress record the write carries, when it parses (the written record is never trusted;
// it is only compared with the stored one).
std::optional<InProgress> WrittenRecord(const json::Value& newD) {
  return ParseInProgressOrNone(Annotation(newD, keys::kInProgressAnnotation));
}

// Who holds the pause of a running update after this write (DESIGN.md §8.5): `record`'s
// pausedByUs as stored (with `to` already decided), changed only by the user's pause command, a
// written record that differs from `record` in pausedByUs alone (the command's own result, seen
// again on re-invocation and by the validator), or the user's unpause of a pause the user holds
// (kubectl rollout resume: the update goes on, the Deployment stays paused until its end).
bool DecidePause(Decision& d, InProgress& record, const json::Value& oldD,
                 const json::Value& newD) {
  const bool before = record.pausedByUs;
  const std::optional<InProgress> w = WrittenRecord(newD);
  if (Annotation(newD, keys::kPauseAnnotation)) {
    d.dropPauseCommand = true;
    if (Annotation(newD, keys::kPauseAnnotation) == keys::kTrue) record.pausedByUs = false;
  } else if (w) {
    InProgress other = *w;
    other.pausedByUs = record.pausedByUs;
    if (other == record) record.pausedByUs = w->pausedByUs;
  }
  if (!IsPaused(newD) && IsPaused(oldD) && !before) record.pausedByUs = true;
  if (record.pausedByUs == before) return false;
  d.warnings.push_back(
      Warning(record.pausedByUs
                  ? "in-place update resumed: it goes on; the Deployment unpauses when it is done"
                  : "in-place update paused: no further pod starts until kubectl rollout resume " +
                        DeploymentRef(newD)));
  return true;
}

// A write that carries the abort command while an update runs (DESIGN.md §9.8). The loop acts on
// it (releases the pods, unpauses); the webhook ends the update itself, leaving the abort
// annotation for the next write to consume, when no loop is known to run or the abort was first
// admitted kAbortTakeover ago. The first admission stamps abortRequestedAt into the record (our own
// earlier stamp, seen again on re-invocation or by the validator, is taken as written).
template <typename End>
Decision DecideAbort(Decision& d, std::optional<InProgress>& record, const json::Value& newD,
                     const admission::Context& ctx, End& end) {
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
      const std::optional<pod_update::Clock::time_point> at = rfc3339::Parse(w->abortRequestedAt);
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
  const std::optional<pod_update::Clock::time_point> at = rfc3339::Parse(record->abortRequestedAt);
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

// The decision while an in-place update runs (the stored object has `in-progress`).
Decision DecideRunning(std::string_view stored, const json::Value& oldD, const json::Value& newD,
                       const admission::Context& ctx) {
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
    if (Annotation(newD, keys::kPauseAnnotation)) {
      d.dropPauseCommand = true;
      if (Annotation(newD, keys::kPauseAnnotation) == keys::kTrue) d.paused = true;
    }
    d.dropUndoCommand = Annotation(newD, keys::kUndoAnnotation).has_value();
    d.inProgress.reset();
    d.reason = "in-place update ended: " + why;
    d.warnings.push_back(Warning("in-place update ended (" + why + "): a normal rollout follows"));
    return d;
  };
  if (AbortRequested(newD)) return DecideAbort(d, record, newD, ctx, end);
  if (AbortRequested(oldD)) {
    d.reason = "abort withdrawn before the loop acted on it";
    if (record && !record->abortRequestedAt.empty()) {
      record->abortRequestedAt.clear();
      d.inProgress = SerializeInProgress(*record);
    }
    return d;
  }
  if (!record) {
    d.reason = "the stored in-progress record is malformed (" + parsed.status().message() +
               "); the loop aborts it";
    return d;
  }
  auto notEligible = [&](const eligibility::Result& r) {
    if (r.podApiRefuses.empty()) return end(r.blockingPath + " changed");
    end(PodApiRefuses(r));
    d.warnings.back() =
        Warning(PodApiRefuses(r) + ": the in-place update ends, a normal rollout follows");
    return d;
  };
  if (!IsOptedIn(newD)) return end("Deployment label inplace-webhook.io/enabled removed");
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(newD);
  if (!settings.ok()) {
    d.reason = settings.status().message() + " (the validator denies this write)";
    return d;
  }
  eligibility::Result r = eligibility::CompareDeployments(oldD, newD, settings->policy);
  switch (r.verdict) {
    case eligibility::Verdict::kNoChange:
      d.reason = "in-place update running; template unchanged";
      break;
    case eligibility::Verdict::kNotEligible:
      return notEligible(r);
    case eligibility::Verdict::kEligible: {
      const json::Value& tmpl = *json::Path(&newD, {"spec", "template"});
      if (!IsOptedIn(tmpl)) return end("template label inplace-webhook.io/enabled removed");
      record->to = TemplateHash(tmpl);
      d.action = Action::kRetarget;
      d.inProgress = SerializeInProgress(*record);
      d.reason = "in-place update re-targeted to " + record->to;
      d.warnings.push_back(Warning("in-place update re-targeted: " + Pods(DesiredReplicas(newD)) +
                                   " will be updated to the new template; rollout stays paused"));
      break;
    }
  }
  if (DecidePause(d, *record, oldD, newD)) d.inProgress = SerializeInProgress(*record);
  if (Annotation(newD, keys::kUndoAnnotation) == keys::kTrue) {
    d.warnings.push_back(
        Warning("in-place update: undo requested; the pods return to their template in place"));
  }
  // The user's write dropped, edited or unpaused ours (not: it is our own earlier answer).
  std::optional<std::string_view> written = Annotation(newD, keys::kInProgressAnnotation);
  if ((!IsPaused(newD) && record->pausedByUs && !d.dropPauseCommand) ||
      (written != stored && written != std::string_view(*d.inProgress))) {
    d.warnings.push_back(Warning(
        "in-place update in progress: spec.paused=true and inplace-webhook.io/in-progress kept"));
    d.warnings.push_back(Warning("to stop it: " + AbortCommand(newD)));
  }
  return d;
}

// The decision when no in-place update runs: start one, or leave everything to the native rollout.
Decision DecideIdle(const json::Value& oldD, const json::Value& newD,
                    const admission::Context& ctx) {
  Decision d;
  d.action = Action::kNone;
  const json::Value* oldT = json::Path(&oldD, {"spec", "template"});
  const json::Value* newT = json::Path(&newD, {"spec", "template"});
  auto skip = [&](std::string why) {
    d.reason = "no in-place update: " + why;
    d.warnings.push_back(
        Warning("in-place update not possible (" + why + "): a normal rollout follows"));
    return d;
  };
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(newD);
  if (!settings.ok()) {
    d.reason = settings.status().message() + " (the validator denies this write)";
    return d;
  }
  eligibility::Result r = eligibility::CompareDeployments(oldD, newD, settings->policy);
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
  if (r.verdict == eligibility::Verdict::kNotEligible) return skip(r.blockingPath + " changed");
  if (AbortRequested(newD) && !AbortRequested(oldD)) return skip("inplace-webhook.io/abort is set");
  if (!IsOptedIn(*oldT) || !IsOptedIn(*newT)) {
    return skip("pod template lacks label inplace-webhook.io/enabled=true");
  }
  if (!RolloutComplete(oldD)) return skip("the previous rollout is not complete");
  if (DesiredReplicas(oldD) == 0) {
    d.reason = "no in-place update: no pods";
    return d;
  }
  InProgress record{TemplateHash(*oldT), TemplateHash(*newT), !IsPaused(oldD),
                    rfc3339::Format(ctx.now), ""};
  // Re-invocation on our own output: keep the startedAt we wrote then.
  if (const std::optional<InProgress> w = WrittenRecord(newD)) {
    // (pausedByUs false with a pause issued in the starting write: the pause command's result.)
    if (w->from == record.from && w->to == record.to &&
        (w->pausedByUs == record.pausedByUs || !w->pausedByUs) &&
        rfc3339::IsCanonical(w->startedAt)) {
      record.startedAt = w->startedAt;
      record.pausedByUs = w->pausedByUs;
    }
  }
  d.action = Action::kStart;
  d.paused = true;
  d.inProgress = SerializeInProgress(record);
  d.reason = "in-place update started: " + record.from + " -> " + record.to;
  d.warnings.push_back(Warning("in-place update: " + Pods(DesiredReplicas(newD)) +
                               " will be updated without restart of unchanged containers; "
                               "rollout paused until done"));
  d.warnings.push_back(
      Warning("kubectl rollout undo refuses a paused Deployment; to undo: kubectl annotate " +
              DeploymentRef(newD) + " " + std::string(keys::kUndoAnnotation) + "=true"));
  if (ResolveMaxUnavailable(newD) == 0) {
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

bool IsOptedIn(const json::Value& object) {
  return Label(object, keys::kEnabledLabel) == keys::kTrue;
}

bool IsPaused(const json::Value& deployment) {
  const json::Value* v = json::Path(&deployment, {"spec", "paused"});
  return v != nullptr && v->IsBool() && v->GetBool();
}

long long DesiredReplicas(const json::Value& deployment) {
  return IntOr(json::Path(&deployment, {"spec", "replicas"}), 1);
}

bool RolloutComplete(const json::Value& deployment) {
  const json::Value* status = json::Find(&deployment, "status");
  long long generation = IntOr(json::Path(&deployment, {"metadata", "generation"}), 0);
  long long observed = IntOr(json::Find(status, "observedGeneration"), 0);
  long long replicas = IntOr(json::Find(status, "replicas"), 0);
  long long updated = IntOr(json::Find(status, "updatedReplicas"), 0);
  return observed >= generation && updated == replicas && replicas == DesiredReplicas(deployment);
}

long long ResolveMaxUnavailable(const json::Value& deployment) {
  const int replicas = budget::Replicas(deployment);
  const json::Value* strategy = json::Path(&deployment, {"spec", "strategy"});
  if (json::StringOr(strategy, "type") == "Recreate") return replicas;
  const json::Value* v = json::Path(strategy, {"rollingUpdate", "maxUnavailable"});
  const json::Value defaultValue("25%");
  return budget::ResolveIntOrPercent(v != nullptr && !v->IsNull() ? *v : defaultValue, replicas,
                                     /*roundUp=*/false)
      .value_or(0);
}

bool HasReadinessGate(const json::Value& deployment) {
  const json::Value* gates =
      json::Path(&deployment, {"spec", "template", "spec", "readinessGates"});
  if (gates == nullptr || !gates->IsArray()) return false;
  for (const auto& g : gates->GetArray()) {
    if (json::StringOr(&g, "conditionType") == keys::kReadyCondition) return true;
  }
  return false;
}

std::optional<std::string_view> Annotation(const json::Value& object, std::string_view key) {
  return MapString(object, "annotations", key);
}

std::optional<std::string_view> Label(const json::Value& object, std::string_view key) {
  return MapString(object, "labels", key);
}

std::string AbortCommand(const json::Value& deployment) {
  std::string out = "kubectl annotate " + DeploymentRef(deployment) + " " +
                    std::string(keys::kAbortAnnotation) + "=true";
  std::string_view ns = json::StringOr(json::Find(&deployment, "metadata"), "namespace");
  if (!ns.empty()) out += " -n " + std::string(ns);
  return out;
}

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
                      {{"status", "updatedReplicas"}, Kind::kInteger}});
}

Decision Decide(const json::Value& oldDeployment, const json::Value& newDeployment,
                const admission::Context& ctx) {
  if (std::optional<std::string_view> stored =
          Annotation(oldDeployment, keys::kInProgressAnnotation)) {
    return DecideRunning(*stored, oldDeployment, newDeployment, ctx);
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
  if (d.action == Action::kNone && Annotation(newDeployment, keys::kInProgressAnnotation) &&
      IsPaused(newDeployment) && !IsPaused(oldDeployment)) {
    d.paused = false;
  }
  // The commands with no update running: pause is spec.paused (and a start the user holds);
  // undo has nothing to undo (kubectl rollout undo does it natively).
  if (std::optional<std::string_view> pause = Annotation(newDeployment, keys::kPauseAnnotation)) {
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
  if (Annotation(oldDeployment, keys::kAbortAnnotation) &&
      Annotation(newDeployment, keys::kAbortAnnotation)) {
    d.dropAbortCommand = true;
  }
  if (Annotation(newDeployment, keys::kUndoAnnotation)) {
    d.dropUndoCommand = true;
    d.warnings.push_back(
        Warning("no in-place update runs: nothing to undo in place; use "
                "kubectl rollout undo " +
                DeploymentRef(newDeployment)));
  }
  return d;
}

bool Conforms(const Decision& decision, const json::Value& deployment) {
  if (decision.action == Action::kIgnore) return true;
  if (decision.dropPauseCommand && Annotation(deployment, keys::kPauseAnnotation)) return false;
  if (decision.dropUndoCommand && Annotation(deployment, keys::kUndoAnnotation)) return false;
  if (decision.dropAbortCommand && Annotation(deployment, keys::kAbortAnnotation)) return false;
  if (decision.paused && IsPaused(deployment) != *decision.paused) return false;
  std::optional<std::string_view> written = Annotation(deployment, keys::kInProgressAnnotation);
  if (decision.inProgress) return written == std::string_view(*decision.inProgress);
  return !json::Find(json::Path(&deployment, {"metadata", "annotations"}),
                     keys::kInProgressAnnotation);
}

void Apply(const Decision& decision, json::Value& deployment, json::Allocator& alloc) {
  if (decision.action == Action::kIgnore) return;
  if (json::Value* annotations =
          json::FindMutable(json::FindMutable(&deployment, "metadata"), "annotations")) {
    if (decision.dropPauseCommand) json::Remove(*annotations, keys::kPauseAnnotation);
    if (decision.dropUndoCommand) json::Remove(*annotations, keys::kUndoAnnotation);
    if (decision.dropAbortCommand) json::Remove(*annotations, keys::kAbortAnnotation);
  }
  if (decision.paused && IsPaused(deployment) != *decision.paused) {
    json::Set(json::EnsureObject(deployment, "spec", alloc), "paused",
              json::Value(*decision.paused), alloc);
  }
  if (decision.inProgress) {
    if (Annotation(deployment, keys::kInProgressAnnotation) !=
        std::string_view(*decision.inProgress)) {
      json::Value& meta = json::EnsureObject(deployment, "metadata", alloc);
      json::SetString(json::EnsureObject(meta, "annotations", alloc), keys::kInProgressAnnotation,
                      *decision.inProgress, alloc);
    }
  } else if (json::Value* annotations =
                 json::FindMutable(json::FindMutable(&deployment, "metadata"), "annotations")) {
    json::Remove(*annotations, keys::kInProgressAnnotation);
  }
}

}  // namespace iw::deployment
