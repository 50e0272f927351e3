#include "hooks/progress.h"
#include "lib/rfc3339.h"

#include <algorithm>
#include <charconv>
#include <climits>

#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "lib/kube_patch.h"

namespace iw::progress {

namespace {

using json::Value;
using rollout::Action;
using rollout::Clock;

using Condition = Report;

// What one kind of workload gives the rules: the object, its stored report and, for a Deployment,
// its controller's Progressing condition, and the deadline a stall is judged by.
struct Subject {
  const kube::ObjectView& object;
  std::string_view kind;  // "Deployment", "StatefulSet"
  std::optional<Condition> ours;
  std::optional<Condition> progressing;
  bool controllerCondition = false;  // a Deployment: its Progressing reports our stall too
  std::optional<int> deadline;       // no progress for this long is a stall (none: nullopt)
  std::string deadlineName;          // how the stall's message names it
  bool paused = false;               // a Deployment's spec.paused
};

Condition ReportOf(const kube::Condition& c) {
  return Condition{std::string(c.status()), std::string(c.reason()), std::string(c.message()),
                   std::string(c.lastUpdateTime()), std::string(c.lastTransitionTime())};
}

std::optional<Condition> Find(const kube::Deployment& d, std::string_view type) {
  const std::optional<kube::Condition> c = d.condition(type);
  if (!c) return std::nullopt;
  return ReportOf(*c);
}

// The user holds the running update (its record's pausedByUs is false): no stall deadline runs, as
// the Deployment controller has none while paused.
bool UserPaused(const kube::ObjectView& workload) {
  const StatusOr<std::optional<InProgress>> record = ReadInProgress(workload);
  return record.ok() && *record && !(*record)->pausedByUs;
}

// The deadline a Deployment's stall is judged by: ProgressDeadline, none while the user pauses.
std::optional<int> StallDeadline(const kube::Deployment& d) {
  return UserPaused(d) ? std::nullopt : ProgressDeadline(d);
}

Subject Of(const kube::Deployment& d) {
  return Subject{.object = d,
                 .kind = "Deployment",
                 .ours = Find(d, keys::kProgressCondition),
                 .progressing = Find(d, "Progressing"),
                 .controllerCondition = true,
                 .deadline = StallDeadline(d),
                 .deadlineName = "progressDeadlineSeconds",
                 .paused = d.paused()};
}

Subject Of(const kube::StatefulSet& s) {
  // A malformed deadline (the webhook refuses one) is judged as the default; none runs while the
  // user pauses the update.
  const StatusOr<std::optional<int>> deadline =
      UserPaused(s) ? StatusOr<std::optional<int>>(std::optional<int>()) : ProgressDeadline(s);
  return Subject{.object = s,
                 .kind = "StatefulSet",
                 .ours = StoredReport(s),
                 .progressing = std::nullopt,
                 .controllerCondition = false,
                 .deadline = deadline.ok() ? *deadline : kDefaultStatefulSetDeadline,
                 .deadlineName = std::string(keys::kProgressDeadlineAnnotation),
                 .paused = false};
}

// `want` with its times filled from `stored`: lastTransitionTime kept while the status is the
// same, lastUpdateTime as given ("" = now).
Condition Stamped(const Condition& want, const std::optional<Condition>& stored,
                  const std::string& now) {
  const bool keep = stored && stored->status == want.status && !stored->lastTransitionTime.empty();
  Condition c = want;
  if (c.lastUpdateTime.empty()) c.lastUpdateTime = now;
  c.lastTransitionTime = keep ? stored->lastTransitionTime : now;
  return c;
}

void SetConditionOf(kube::PatchBuilder& patch, std::string_view type, const Condition& want,
                    const std::optional<Condition>& stored, const std::string& now) {
  const Condition c = Stamped(want, stored, now);
  patch.SetCondition({.type = type,
                      .status = c.status,
                      .reason = c.reason,
                      .message = c.message,
                      .lastUpdateTime = c.lastUpdateTime,
                      .lastTransitionTime = c.lastTransitionTime});
}

// A StatefulSet's report as its annotation stores it.
std::string ReportJson(const Condition& c) {
  json::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  auto str = [&a](std::string_view v) {
    return json::Value(v.data(), static_cast<rapidjson::SizeType>(v.size()), a);
  };
  doc.AddMember("type", str(keys::kProgressCondition), a);
  doc.AddMember("status", str(c.status), a);
  doc.AddMember("reason", str(c.reason), a);
  doc.AddMember("message", str(c.message), a);
  doc.AddMember("lastUpdateTime", str(c.lastUpdateTime), a);
  doc.AddMember("lastTransitionTime", str(c.lastTransitionTime), a);
  return json::Serialize(doc);
}

bool Same(const std::optional<Condition>& stored, const Condition& want) {
  return stored && stored->status == want.status && stored->reason == want.reason &&
         stored->message == want.message &&
         (want.lastUpdateTime.empty() || want.lastUpdateTime == stored->lastUpdateTime);
}

// The write of `ours` (and, for a Deployment, its controller's `progressing`): a Deployment's is a
// strategic merge of status.conditions, a StatefulSet's a merge patch of its annotation; neither
// carries a resourceVersion (each touches only what is ours).
Action StatusPatch(const Subject& s, std::optional<Condition> ours,
                   std::optional<Condition> progressing, Clock::time_point now,
                   std::string summary) {
  kube::PatchBuilder patch;
  const std::string ts = rfc3339::Format(now);
  Action act;
  if (s.controllerCondition) {
    if (ours) SetConditionOf(patch, keys::kProgressCondition, *ours, s.ours, ts);
    if (progressing) SetConditionOf(patch, "Progressing", *progressing, s.progressing, ts);
    act.kind = rollout::WriteKind::kDeploymentStatusPatch;
  } else {
    if (ours) patch.Annotation(keys::kProgressAnnotation, ReportJson(Stamped(*ours, s.ours, ts)));
    act.kind = rollout::WriteKind::kStatefulSetPatch;
  }
  act.ns = std::string(s.object.ns());
  act.name = std::string(s.object.name());
  act.body = patch.Take();
  act.summary = std::move(summary);
  return act;  // no resourceVersion: the patch merges only our report
}

void Requeue(rollout::Plan& plan, Clock::duration after) {
  after = std::max(after, Clock::duration::zero());
  if (!plan.requeueAfter || after < *plan.requeueAfter) plan.requeueAfter = after;
}

bool OurStall(const std::optional<Condition>& progressing) {
  return progressing && progressing->reason == kReasonDeadline &&
         progressing->message.starts_with(kStallPrefix);
}

Condition PausedProgressing() {
  return {"Unknown", "DeploymentPaused", "Deployment is paused", "", ""};
}

}  // namespace

std::string ProgressText(int atTarget, int total, std::string_view target,
                         const std::map<std::string, int>& podsByState) {
  std::string out = std::to_string(atTarget) + "/" + std::to_string(total) +
                    " pods updated to template " + std::string(target);
  std::string states;
  for (const auto& [state, n] : podsByState) {
    if (state == keys::kStateNormal || n == 0) continue;
    if (!states.empty()) states += ", ";
    states += std::to_string(n) + " " + state;
  }
  if (!states.empty()) out += " (" + states + ")";
  return out;
}

std::string_view ProgressPart(std::string_view message) {
  const size_t cut = message.find("; ");
  return cut == std::string_view::npos ? message : message.substr(0, cut);
}

std::optional<int> ProgressDeadline(const kube::Deployment& d) {
  const std::optional<long long> s = d.progressDeadlineSeconds();
  if (!s || *s <= 0 || *s >= INT_MAX) return std::nullopt;
  return static_cast<int>(*s);
}

StatusOr<std::optional<int>> ProgressDeadline(const kube::StatefulSet& set) {
  const std::optional<std::string_view> text = set.annotation(keys::kProgressDeadlineAnnotation);
  if (!text) return std::optional<int>(kDefaultStatefulSetDeadline);
  long long v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size() || v <= 0 || v > INT_MAX) {
    return Status::InvalidArgument(
        "annotation " + std::string(keys::kProgressDeadlineAnnotation) + ": \"" +
        std::string(text->substr(0, 64)) +
        "\" is not a number of seconds from 1 to 2147483647 (2147483647: no deadline)");
  }
  if (v == INT_MAX) return std::optional<int>();
  return std::optional<int>(static_cast<int>(v));
}

std::optional<Report> ParseReport(std::optional<std::string_view> text) {
  if (!text) return std::nullopt;
  json::Document doc;
  if (!json::ParseUntrusted(*text, doc).ok() || !doc.IsObject()) return std::nullopt;
  auto nonEmpty = [&doc](std::string_view key) {
    const Value* v = json::Find(&doc, key);
    return v != nullptr && v->IsString() && v->GetStringLength() > 0;
  };
  if (!nonEmpty("status") || !nonEmpty("reason")) return std::nullopt;
  if (const Value* type = json::Find(&doc, "type");
      type != nullptr && (!type->IsString() || json::View(*type) != keys::kProgressCondition)) {
    return std::nullopt;
  }
  return ReportOf(kube::Condition(doc));
}

std::optional<Report> StoredReport(const kube::ObjectView& set) {
  return ParseReport(set.annotation(keys::kProgressAnnotation));
}

namespace {

void AddProgressOf(rollout::Plan& plan, const Subject& s, Clock::time_point now) {
  const std::optional<Condition>& ours = s.ours;
  const std::optional<Condition>& progressing = s.progressing;
  std::optional<Condition> wantOurs;
  std::optional<Condition> wantProgressing;
  bool stalled = false;
  using rollout::Phase;

  if (plan.phase == Phase::kCompleted) {
    const int total = std::max(plan.podsTotal, 0);
    wantOurs = Condition{"True", std::string(kReasonCompleted),
                         ProgressText(total, total, plan.target, {}), "", ""};
  } else if (plan.phase == Phase::kAborted) {
    if (!ours || ours->reason == kReasonAborted) return;  // never reported, or already
    wantOurs = Condition{"False", std::string(kReasonAborted),
                         "in-place update aborted; " + plan.message, "", ""};
  } else if (plan.phase == Phase::kIdle || plan.podsAtTarget < 0) {
    return;
  } else {
    const std::string text =
        ProgressText(plan.podsAtTarget, plan.podsTotal, plan.target, plan.podsByState);
    const bool ended = ours && (ours->reason == kReasonCompleted || ours->reason == kReasonAborted);
    if (plan.stuckReason.empty() && ours && !ended && ours->reason == kReasonResizeRefused &&
        ProgressPart(ours->message) == text) {
      // A refused resize reported, no progress since. This patch is the pass's last write and
      // lands only if every write before it did, the retried resize included: the refusal is
      // over, which is no progress (the driver reports it again when the resize is refused again).
      wantOurs = Condition{"True", std::string(kReasonProgressing), text, ours->lastUpdateTime, ""};
    } else if (!plan.stuckReason.empty()) {
      // A pod that cannot go on (a resize the kubelet refuses): a stall at once, naming it.
      stalled = true;
      Condition c{"False", plan.stuckReason, text + "; " + plan.stuckMessage, "", ""};
      if (ours && !ended && ProgressPart(ours->message) == text) {
        c.lastUpdateTime = ours->lastUpdateTime;  // no progress: the anchor stays
      }
      if (!progressing || progressing->reason != kReasonDeadline) {
        wantProgressing = Condition{"False", std::string(kReasonDeadline),
                                    std::string(kStallPrefix) + ": " + c.message, "", ""};
      }
      wantOurs = std::move(c);
    } else {
      const std::optional<Clock::time_point> last =
          ours ? rfc3339::Parse(ours->lastUpdateTime) : std::nullopt;
      if (!ours || ended || !last || ProgressPart(ours->message) != text) {
        // Progress (or the first report of this update).
        if (ours && !ended && last && ours->status == "True" &&
            ours->reason == kReasonProgressing && now - *last < kMinWriteInterval) {
          Requeue(plan, *last + kMinWriteInterval - now);  // throttled; written then
          wantOurs = std::nullopt;
        } else {
          wantOurs = Condition{"True", std::string(kReasonProgressing), text, "", ""};
        }
      } else {
        // No progress since lastUpdateTime.
        const std::optional<int> deadline = plan.staged ? std::nullopt : s.deadline;
        const auto due = *last + std::chrono::seconds(deadline.value_or(0));
        if (deadline && now >= due) {
          stalled = true;
          if (ours->reason == kReasonRefused || ours->reason == kReasonDeadline) {
            wantOurs = std::nullopt;  // keep what it says (the refusal names the cause)
          } else {
            // The cause a pod reports, when one does (an image the kubelet cannot pull).
            wantOurs = Condition{
                "False", std::string(kReasonDeadline),
                text + "; no progress for " + std::to_string(*deadline) + "s (" + s.deadlineName +
                    ")" + (plan.waitingMessage.empty() ? "" : "; " + plan.waitingMessage),
                ours->lastUpdateTime, ""};
          }
          const std::string why = wantOurs ? wantOurs->message : ours->message;
          if (!progressing || progressing->reason != kReasonDeadline) {
            wantProgressing = Condition{"False", std::string(kReasonDeadline),
                                        std::string(kStallPrefix) + ": " + why, "", ""};
          }
        } else if (deadline) {
          Requeue(plan, due - now);
        }
      }
    }
  }
  plan.stalled = stalled;
  if (!stalled && OurStall(progressing)) wantProgressing = PausedProgressing();
  if (!s.controllerCondition) wantProgressing = std::nullopt;
  if (wantOurs && Same(ours, *wantOurs)) wantOurs = std::nullopt;
  if (!wantOurs && !wantProgressing) return;
  std::string summary = "progress: ";
  summary += wantOurs ? wantOurs->reason + " " + wantOurs->message : "unchanged";
  if (wantProgressing) summary += "; Progressing " + wantProgressing->reason;
  plan.actions.push_back(StatusPatch(s, wantOurs, wantProgressing, now, std::move(summary)));
  // Progress of a running update: one Event on the workload with the condition's write (at most
  // every kMinWriteInterval), after it, so that it is made only once the report has landed; named
  // by its text, so that a retried pass does not repeat it. The pods have no Event of their own for
  // their ordinary steps (only where a person must act or look: a hook past its timeout, a refused
  // write, a pod the kubelet cannot move on).
  const bool wasRunning =
      ours && ours->reason != kReasonCompleted && ours->reason != kReasonAborted;
  // (Every pod at the target: the finish's InPlaceUpdateCompleted tells it.)
  const bool allThere = plan.podsAtTarget >= 0 && plan.podsAtTarget == plan.podsTotal;
  if (wantOurs && wantOurs->reason == kReasonProgressing && wasRunning && !allThere &&
      ProgressPart(ours->message) != ProgressPart(wantOurs->message)) {
    plan.actions.push_back(rollout::EventAction(
        s.object, "apps/v1", s.kind, "Normal", kReasonProgressing,
        "in-place update: " + wantOurs->message, now,
        rollout::DedupEventName(s.object.name(), "progress/" + wantOurs->message)));
  }
}

// `templateHash`: the hash of the workload's template now.
void AddEndedWithoutLoopOf(rollout::Plan& plan, const Subject& s, std::string_view templateHash,
                           Clock::time_point now) {
  const std::optional<Condition>& ours = s.ours;
  // (The chart's policy lets the controller close its condition also on a Deployment whose opt-in
  // label was removed: that status write, and nothing else of it.)
  if (!ours || ours->reason == kReasonCompleted || ours->reason == kReasonAborted) return;
  // The loop's own finish whose report did not land (its status patch comes after the Deployment
  // patch): the last report had every pod at the template the Deployment still has.
  const std::string_view part = ProgressPart(ours->message);
  const std::string_view n = part.substr(0, part.find('/'));
  int pods = -1;
  std::from_chars(n.data(), n.data() + n.size(), pods);
  if (pods >= 0 && part == ProgressText(pods, pods, templateHash, {})) {
    const Condition done{"True", std::string(kReasonCompleted), std::string(part), "", ""};
    plan.actions.push_back(
        StatusPatch(s, done, std::nullopt, now, "progress: " + done.reason + " " + done.message));
    return;
  }
  std::string why = "a change not made in place";
  if (s.object.label(keys::kEnabledLabel) != keys::kTrue) {
    why = "the " + std::string(s.kind) + " is no longer opted in";
  } else if (s.object.annotation(keys::kAbortAnnotation)) {
    why = "an abort the loop did not carry out";
  }
  Condition want{"False", std::string(kReasonAborted),
                 "in-place update ended by the webhook (" + why + "); the " + std::string(s.kind) +
                     " controller's rollout takes over",
                 "", ""};
  std::optional<Condition> wantProgressing;
  if (OurStall(s.progressing) && s.paused) wantProgressing = PausedProgressing();
  plan.actions.push_back(
      StatusPatch(s, want, wantProgressing, now, "progress: " + want.reason + " " + want.message));
}

std::vector<Action> PlanRefusalOf(const Subject& s, const kube::Pod* pod, std::string_view podName,
                                  std::string_view progress, std::string_view message,
                                  Clock::time_point now, Refused what, int code) {
  const bool resize = what == Refused::kResize;
  const std::string_view reason = resize ? kReasonResizeRefused : kReasonRefused;
  std::vector<Action> out;
  std::string text =
      "pod " + std::string(podName) +
      (resize ? ": resize refused by the API server: " : ": update refused by the API server: ") +
      std::string(message);
  if (resize && code == 404) {
    text +=
        " (the API server does not serve pods/resize: Kubernetes before 1.33 or its "
        "InPlacePodVerticalScaling gate off, while --pod-resize said it does)";
  }
  const std::string eventText =
      resize ? text +
                   "; the pod keeps running as it was and the update is stuck (fix the cause, or "
                   "set the " +
                   std::string(s.kind) + " annotation " + std::string(keys::kAbortAnnotation) +
                   "=true to abort)"
             : text;
  const std::string key =
      (resize ? "resize-refused/" : "refused/") + std::string(podName) + "/" + std::string(message);
  auto event = [&](const kube::ObjectView& involved, std::string_view apiVersion,
                   std::string_view kind) {
    Action e = rollout::EventAction(involved, apiVersion, kind, "Warning", reason, eventText, now,
                                    rollout::DedupEventName(involved.name(), key));
    e.pod = std::string(podName);
    e.summary = std::string(reason) + ": " + text;
    out.push_back(std::move(e));
  };
  if (pod != nullptr) event(*pod, "v1", "Pod");
  event(s.object, "apps/v1", s.kind);

  const std::optional<Condition>& ours = s.ours;
  Condition want{"False", std::string(reason), std::string(progress) + "; " + text, "", ""};
  // The last progress stays the anchor: a refusal is no progress.
  if (ours && ProgressPart(ours->message) == progress) want.lastUpdateTime = ours->lastUpdateTime;
  // A refused resize is a stall at once (the pod cannot go on until something changes); a refused
  // pod write that lasts is a stall like any other once progressDeadlineSeconds pass without
  // progress (the pass that meets the refusal ends there, before the usual report: this is it).
  std::optional<Condition> wantProgressing;
  const std::optional<Condition>& progressing = s.progressing;
  const std::optional<int>& deadline = s.deadline;
  const std::optional<Clock::time_point> anchor =
      want.lastUpdateTime.empty() ? std::nullopt : rfc3339::Parse(want.lastUpdateTime);
  const bool stall =
      resize || (deadline && anchor && now >= *anchor + std::chrono::seconds(*deadline));
  if (stall && s.controllerCondition && (!progressing || progressing->reason != kReasonDeadline)) {
    wantProgressing = Condition{"False", std::string(kReasonDeadline),
                                std::string(kStallPrefix) + ": " + want.message, "", ""};
  }
  const bool same = Same(ours, want);
  if (!same || wantProgressing) {
    std::string summary = "progress: " + want.reason + " " + want.message;
    if (wantProgressing) summary += "; Progressing " + wantProgressing->reason;
    out.push_back(StatusPatch(s, same ? std::nullopt : std::optional<Condition>(want),
                              wantProgressing, now, std::move(summary)));
  }
  return out;
}

}  // namespace

void AddProgress(rollout::Plan& plan, const kube::Deployment& d, Clock::time_point now) {
  AddProgressOf(plan, Of(d), now);
}

void AddProgress(rollout::Plan& plan, const kube::StatefulSet& set, Clock::time_point now) {
  AddProgressOf(plan, Of(set), now);
}

void AddEndedWithoutLoop(rollout::Plan& plan, const kube::Deployment& d, Clock::time_point now) {
  AddEndedWithoutLoopOf(plan, Of(d), TemplateHash(d.podTemplate()), now);
}

void AddEndedWithoutLoop(rollout::Plan& plan, const kube::StatefulSet& set, Clock::time_point now) {
  AddEndedWithoutLoopOf(plan, Of(set), TemplateHash(set.podTemplate()), now);
}

std::vector<Action> PlanRefusal(const kube::Deployment& d, const kube::Pod* pod,
                                std::string_view podName, std::string_view progress,
                                std::string_view message, Clock::time_point now, Refused what,
                                int code) {
  return PlanRefusalOf(Of(d), pod, podName, progress, message, now, what, code);
}

std::vector<Action> PlanRefusal(const kube::StatefulSet& set, const kube::Pod* pod,
                                std::string_view podName, std::string_view progress,
                                std::string_view message, Clock::time_point now, Refused what,
                                int code) {
  return PlanRefusalOf(Of(set), pod, podName, progress, message, now, what, code);
}

bool IsRefusal(int code) {
  return code == 400 || code == 403 || code == 422;
}

bool IsResizeRefusal(int code, std::string_view message, std::string_view pod) {
  if (code < 400 || code >= 500 || code == 408 || code == 409 || code == 429) return false;
  if (code == 404 && message.find("\"" + std::string(pod) + "\" not found") != std::string::npos) {
    return false;  // the pod is gone
  }
  return true;
}

}  // namespace iw::progress
