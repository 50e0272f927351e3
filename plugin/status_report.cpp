#include "plugin/status_report.h"

#include <algorithm>
#include <cstdio>

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "lib/kube_objects.h"
#include "lib/label_selector.h"
#include "lib/rfc3339.h"

namespace iw::plugin {
namespace {

using json::Value;

std::string Images(const kube::Pod& pod) {
  std::string out;
  for (const kube::Container& c : pod.containers()) {
    if (!out.empty()) out += ",";
    out += std::string(c.name()) + "=" + std::string(c.image());
  }
  return out;
}

// What the loop waits for before it moves this pod on: pod_update::Decide's own wait, rendered,
// as the loop would decide it now without granting the budget. Normal pods not at the target wait
// on the user's pause while it holds the update.
std::string WaitsOn(const pod_update::Rules& rules, const pod_update::Target* target,
                    const InProgress& record, const kube::Pod& pod, pod_update::PodState state,
                    bool updated, Clock::time_point now) {
  if (state == pod_update::PodState::kNormal && updated) return "";
  if (state == pod_update::PodState::kNormal && !record.pausedByUs)
    return "held: the update is paused";
  if (target == nullptr) {
    return "unknown: no ReplicaSet has the update's base template " + record.from;
  }
  const pod_update::Step step = pod_update::Decide(*target, rules, pod, /*mayStart=*/false, now);
  if (step.wait.on == pod_update::PodWait::On::kNothing) {
    return step.ops.empty() ? "" : "the loop's next write";
  }
  return pod_update::Describe(step.wait, now);
}

const Value* Items(const Value& list) {
  const Value* items = json::Find(&list, "items");
  return items != nullptr && items->IsArray() ? items : nullptr;
}

}  // namespace

std::string FormatDuration(std::chrono::seconds d) {
  long long s = std::max<long long>(0, d.count());
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string ProgressBar(int done, int total, int width) {
  const int filled = total > 0 ? std::clamp(done * width / total, 0, width) : 0;
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(static_cast<size_t>(width - filled), '-') + "] " + std::to_string(done) + "/" +
         std::to_string(total) + " pods updated";
}

StatusOr<StatusReport> BuildStatus(const Value& deploymentJson, const Value& pods,
                                   const Value& replicaSets, Clock::time_point now) {
  StatusOr<kube::Deployment> dv = kube::Deployment::From(deploymentJson, "deployment");
  if (!dv.ok()) return dv.status();
  const kube::Deployment& d = *dv;
  StatusReport r;
  r.ns = d.ns();
  r.name = d.name();
  r.optedIn = deployment::IsOptedIn(d);
  r.abortRequested = d.annotation(keys::kAbortAnnotation) == keys::kTrue;
  r.undoRequested = d.annotation(keys::kUndoAnnotation) == keys::kTrue;
  if (std::optional<std::string_view> text = d.annotation(keys::kInProgressAnnotation)) {
    StatusOr<InProgress> rec = ParseInProgress(*text);
    if (rec.ok()) {
      r.record = *rec;
      r.userPaused = !rec->pausedByUs;
    } else {
      r.recordMalformed = true;
    }
  }
  if (const std::optional<kube::Condition> c = d.condition(keys::kProgressCondition)) {
    r.conditionStatus = c->status();
    r.conditionReason = c->reason();
    r.conditionMessage = c->message();
  }
  if (const std::optional<kube::Condition> c = d.condition("Progressing")) {
    r.controllerReason = c->reason();
  }

  // The loop's rules and target, when they can be made (else rows say less).
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(d);
  lifecycle::Settings noSettings;
  const lifecycle::Settings& s = settings.ok() ? *settings : noSettings;
  const pod_update::Rules rules = pod_update::MakeRules(s);
  std::optional<pod_update::Target> target;
  if (r.record) {
    if (const Value* rss = Items(replicaSets)) {
      for (const Value& item : rss->GetArray()) {
        StatusOr<kube::ReplicaSet> rs = kube::ReplicaSet::From(item, "replicaSet");
        if (!rs.ok()) return rs.status();
        if (TemplateHash(rs->podTemplate()) != r.record->from) continue;
        StatusOr<pod_update::Target> made = pod_update::MakeTarget(
            rs->podTemplate(), d.podTemplate(), s.policy, r.record->from, r.record->to);
        if (made.ok()) target = *std::move(made);
        break;
      }
    }
  }

  static const Value kEverything(rapidjson::kObjectType);
  StatusOr<kube::LabelSelector> selector =
      kube::LabelSelector::FromJson(d.selector() != nullptr ? *d.selector() : kEverything);
  if (const Value* items = Items(pods)) {
    for (const Value& podJson : items->GetArray()) {
      StatusOr<kube::Pod> pv = kube::Pod::From(podJson, "pod");
      if (!pv.ok() || !pv->live()) continue;
      if (selector.ok() && !selector->Matches(pv->labels())) continue;
      PodRow row;
      row.name = pv->name();
      row.state = pod_update::StateOf(*pv);
      row.ready = pv->conditionTrue("Ready");
      row.images = Images(*pv);
      if (r.record) {
        if (target) {
          row.updated = pod_update::AtTarget(*target, *pv);
        } else {
          std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(*pv);
          row.updated =
              us && us->revision == r.record->to && row.state == pod_update::PodState::kNormal;
        }
      }
      if (row.state != pod_update::PodState::kNormal) {
        if (auto t = rfc3339::Parse(pv->annotation(keys::kStateTimestampAnnotation).value_or(""))) {
          row.inStateFor = std::chrono::duration_cast<std::chrono::seconds>(now - *t);
        }
      }
      if (r.record) {
        row.waitsOn = WaitsOn(rules, target ? &*target : nullptr, *r.record, *pv, row.state,
                              row.updated, now);
      }
      if (row.updated) ++r.updated;
      r.pods.push_back(std::move(row));
    }
  }
  std::sort(r.pods.begin(), r.pods.end(),
            [](const PodRow& a, const PodRow& b) { return a.name < b.name; });
  r.total = static_cast<int>(r.pods.size());
  return r;
}

std::string RenderStatus(const StatusReport& r) {
  std::string out = "Deployment " + r.ns + "/" + r.name + ": ";
  if (r.record) {
    out += "in-place update " + r.record->from + " -> " + r.record->to + ", started " +
           r.record->startedAt + "\n";
    out += "  phase: " + Phase(r) +
           "   paused by user: " + std::string(r.userPaused ? "yes" : "no") +
           "   abort requested: " + std::string(r.abortRequested ? "yes" : "no");
    if (r.undoRequested) out += "   undo requested: yes";
    out += "\n";
  } else if (r.recordMalformed) {
    out += "the in-progress record is malformed (the loop aborts the update)\n";
  } else if (!r.optedIn) {
    out += "no in-place update runs (not opted in: label inplace-webhook.io/enabled=true)\n";
  } else {
    out += "no in-place update runs\n";
  }
  if (!r.conditionReason.empty()) {
    out += std::string(r.record ? "  progress: " : "  last in-place update: ") + r.conditionStatus +
           " " + r.conditionReason + ": " + r.conditionMessage + "\n";
  }
  if (r.record) out += ProgressBar(r.updated, r.total) + "\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"POD", "STATE", "READY", "IMAGES", "WAITING ON", "FOR"});
  for (const PodRow& p : r.pods) {
    std::string waits = p.waitsOn.empty() ? (p.updated ? "(updated)" : "-") : p.waitsOn;
    rows.push_back({p.name, std::string(pod_update::StateName(p.state)), p.ready ? "true" : "false",
                    p.images, waits, p.inStateFor ? FormatDuration(*p.inStateFor) : "-"});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Phase(const StatusReport& r) {
  if (!r.record && !r.recordMalformed) return "";
  if (Judge(r, true) == WatchVerdict::kStuck) return "stuck";
  if (r.abortRequested) return "aborting";
  if (r.userPaused) return "held";
  const bool allNormal = std::all_of(r.pods.begin(), r.pods.end(), [](const PodRow& p) {
    return p.state == pod_update::PodState::kNormal;
  });
  if (r.total > 0 && r.updated == r.total && allNormal) return "finishing";
  return "updating";
}

WatchVerdict Judge(const StatusReport& r, bool sawRunning) {
  if (r.record || r.recordMalformed) {
    if (r.conditionStatus == "False" && (r.conditionReason == progress::kReasonDeadline ||
                                         r.conditionReason == progress::kReasonRefused ||
                                         r.conditionReason == progress::kReasonResizeRefused ||
                                         r.conditionReason == progress::kReasonNotOptedIn)) {
      return WatchVerdict::kStuck;
    }
    if (r.controllerReason == progress::kReasonDeadline) return WatchVerdict::kStuck;
    return WatchVerdict::kRunning;
  }
  // No record but our condition still says the update progresses: the update has just ended and the
  // loop has not yet written the end's condition (it writes it after the Deployment's), or the
  // webhook ended it and the loop will report it Aborted. Either way an update ran: wait for the
  // end.
  if (r.conditionStatus == "True" && r.conditionReason == progress::kReasonProgressing) {
    return WatchVerdict::kSettling;
  }
  if (!sawRunning) return WatchVerdict::kDone;
  if (r.conditionReason == progress::kReasonCompleted) return WatchVerdict::kDone;
  if (r.conditionReason == progress::kReasonAborted) return WatchVerdict::kAborted;
  return WatchVerdict::kSettling;
}

}  // namespace iw::plugin
