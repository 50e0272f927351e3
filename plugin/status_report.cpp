#include "plugin/status_report.h"

#include <algorithm>
#include <cstdio>

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/pod_update.h"
#include "hooks/progress.h"
#include "hooks/rollout_plan.h"
#include "hooks/statefulset_workload.h"
#include "hooks/workload_rules.h"
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
// on the user's pause while it holds the update. Without a target, `noTarget` says why.
std::string WaitsOn(const pod_update::Rules& rules, const pod_update::Target* target,
                    std::string_view noTarget, const InProgress& record, const kube::Pod& pod,
                    pod_update::PodState state, bool updated, Clock::time_point now) {
  if (state == pod_update::PodState::kNormal && updated) return "";
  if (state == pod_update::PodState::kNormal && !record.pausedByUs)
    return "held: the update is paused";
  if (target == nullptr) return std::string(noTarget);
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

// The record and the command annotations of `workload` (a Deployment or a StatefulSet).
void ReadRecord(const kube::ObjectView& workload, StatusReport& r) {
  r.ns = workload.ns();
  r.name = workload.name();
  r.abortRequested = workload.annotation(keys::kAbortAnnotation) == keys::kTrue;
  r.undoRequested = workload.annotation(keys::kUndoAnnotation) == keys::kTrue;
  if (std::optional<std::string_view> text = workload.annotation(keys::kInProgressAnnotation)) {
    StatusOr<InProgress> rec = ParseInProgress(*text);
    if (rec.ok()) {
      r.record = *rec;
      r.userPaused = !rec->pausedByUs;
    } else {
      r.recordMalformed = true;
    }
  }
}

// One pod's row: its state, readiness and images, whether it is at the target (the loop's
// AtTarget, or without a target the update-state's revision) and, while an update runs, what it
// waits on.
PodRow Row(const kube::Pod& pod, const StatusReport& r, const pod_update::Rules& rules,
           const pod_update::Target* target, std::string_view noTarget, Clock::time_point now) {
  PodRow row;
  row.name = pod.name();
  row.state = pod_update::StateOf(pod);
  row.ready = pod.conditionTrue("Ready");
  row.images = Images(pod);
  if (r.record) {
    if (target != nullptr) {
      row.updated = pod_update::AtTarget(*target, pod);
    } else {
      std::optional<pod_update::UpdateState> us = pod_update::ReadUpdateState(pod);
      row.updated =
          us && us->revision == r.record->to && row.state == pod_update::PodState::kNormal;
    }
  }
  if (row.state != pod_update::PodState::kNormal) {
    if (auto t = rfc3339::Parse(pod.annotation(keys::kStateTimestampAnnotation).value_or(""))) {
      row.inStateFor = std::chrono::duration_cast<std::chrono::seconds>(now - *t);
    }
  }
  if (r.record) {
    row.waitsOn = WaitsOn(rules, target, noTarget, *r.record, pod, row.state, row.updated, now);
  }
  return row;
}

// A StatefulSet's target (StatefulSetWorkload: spec.template with the update revision's label)
// from the base its current ControllerRevision holds, as the loop's FindBase finds it; nullopt
// with `why` (a row's "unknown: ...") when the loop would wait or abort instead.
std::optional<pod_update::Target> StatefulSetTarget(const kube::StatefulSet& s,
                                                    const Value* currentRevision,
                                                    const InProgress& record,
                                                    const lifecycle::Policy& policy,
                                                    std::string& why) {
  if (!s.ControllerObserved() || s.updateRevision().empty()) {
    why = "unknown: the StatefulSet controller has not observed generation " +
          std::to_string(s.generation()) + " yet";
    return std::nullopt;
  }
  const std::string revision(s.currentRevision());
  if (currentRevision == nullptr || revision.empty() ||
      kube::MetaOf(*currentRevision, "name") != revision) {
    why = "unknown: ControllerRevision " + revision + " (the update's base) not read";
    return std::nullopt;
  }
  std::optional<json::Document> baseDoc = rollout::RevisionTemplate(*currentRevision);
  StatusOr<kube::PodTemplate> base =
      baseDoc ? kube::PodTemplate::From(*baseDoc, "template")
              : StatusOr<kube::PodTemplate>(Status::InvalidArgument("no data.spec.template"));
  if (!base.ok()) {
    why = "unknown: ControllerRevision " + revision + ": " + base.status().message();
    return std::nullopt;
  }
  if (s.currentRevision() != s.updateRevision() && TemplateHash(*base) != record.from) {
    why = "unknown: ControllerRevision " + revision +
          " holds another template than the update started from (" + record.from +
          "): the loop aborts the update";
    return std::nullopt;
  }
  const std::vector<const kube::Pod*> noPods;
  const rollout::StatefulSetWorkload w(s, noPods, &*base);
  StatusOr<pod_update::Target> made =
      pod_update::MakeTarget(*base, w.podTemplate(), policy, record.from, record.to);
  if (!made.ok()) {
    why = "unknown: " + made.status().message();
    return std::nullopt;
  }
  return *std::move(made);
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
  r.kind = WorkloadKind::kDeployment;
  r.optedIn = deployment::IsOptedIn(d);
  ReadRecord(d, r);
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
  const std::string noTarget =
      r.record ? "unknown: no ReplicaSet has the update's base template " + r.record->from : "";

  static const Value kEverything(rapidjson::kObjectType);
  StatusOr<kube::LabelSelector> selector =
      kube::LabelSelector::FromJson(d.selector() != nullptr ? *d.selector() : kEverything);
  if (const Value* items = Items(pods)) {
    for (const Value& podJson : items->GetArray()) {
      StatusOr<kube::Pod> pv = kube::Pod::From(podJson, "pod");
      if (!pv.ok() || !pv->live()) continue;
      if (selector.ok() && !selector->Matches(pv->labels())) continue;
      PodRow row = Row(*pv, r, rules, target ? &*target : nullptr, noTarget, now);
      if (row.updated) ++r.updated;
      r.pods.push_back(std::move(row));
    }
  }
  std::sort(r.pods.begin(), r.pods.end(),
            [](const PodRow& a, const PodRow& b) { return a.name < b.name; });
  r.total = static_cast<int>(r.pods.size());
  return r;
}

StatusOr<StatusReport> BuildStatefulSetStatus(const Value& statefulSet, const Value& pods,
                                              const Value* currentRevision, Clock::time_point now) {
  StatusOr<kube::StatefulSet> sv = kube::StatefulSet::From(statefulSet, "statefulSet");
  if (!sv.ok()) return sv.status();
  const kube::StatefulSet& set = *sv;
  StatusReport r;
  r.kind = WorkloadKind::kStatefulSet;
  r.optedIn = rules::IsOptedIn(set);
  ReadRecord(set, r);
  if (std::optional<ProgressReport> p = progress::StoredReport(set)) {
    r.conditionStatus = p->status;
    r.conditionReason = p->reason;
    r.conditionMessage = p->message;
  }
  r.partition = set.partition();

  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(set);
  lifecycle::Settings noSettings;
  const lifecycle::Settings& s = settings.ok() ? *settings : noSettings;
  const pod_update::Rules rules = pod_update::MakeRules(s);
  std::optional<pod_update::Target> target;
  std::string noTarget;
  if (r.record) target = StatefulSetTarget(set, currentRevision, *r.record, s.policy, noTarget);

  // The pods it controls (by uid; by its selector when the read shows no uid), by ordinal.
  static const Value kEverything(rapidjson::kObjectType);
  const Value* selectorJson = json::Path(&statefulSet, {"spec", "selector"});
  StatusOr<kube::LabelSelector> selector = kube::LabelSelector::FromJson(
      selectorJson != nullptr && selectorJson->IsObject() ? *selectorJson : kEverything);
  const long long low = static_cast<long long>(set.ordinalStart()) + set.partition();
  const long long high = static_cast<long long>(set.ordinalStart()) + set.replicas();
  std::vector<std::pair<int, PodRow>> rows;
  if (const Value* items = Items(pods)) {
    for (const Value& podJson : items->GetArray()) {
      StatusOr<kube::Pod> pv = kube::Pod::From(podJson, "pod");
      if (!pv.ok() || !pv->live()) continue;
      if (!set.uid().empty() ? pv->controllerUid() != set.uid()
                             : selector.ok() && !selector->Matches(pv->labels())) {
        continue;
      }
      const std::optional<int> ordinal = set.OrdinalOf(pv->name());
      if (!ordinal) continue;
      PodRow row = Row(*pv, r, rules, target ? &*target : nullptr, noTarget, now);
      const bool settled = row.updated && row.state == pod_update::PodState::kNormal;
      if (*ordinal < low) {
        row.inUpdate = false;
        ++r.belowPartition;
        if (r.record && !settled) {
          row.waitsOn = "held: below partition " + std::to_string(r.partition);
        }
      } else if (*ordinal >= high) {
        row.inUpdate = false;
        if (r.record) row.waitsOn = "not in the update: ordinal beyond the replicas";
      } else {
        ++r.total;
        if (row.updated) ++r.updated;
      }
      rows.emplace_back(*ordinal, std::move(row));
    }
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [ordinal, row] : rows) r.pods.push_back(std::move(row));
  return r;
}

std::string RenderStatus(const StatusReport& r) {
  const bool sts = r.kind == WorkloadKind::kStatefulSet;
  std::string out = sts ? RefOf(r.kind, r.name) + " (namespace " + r.ns + "): "
                        : "Deployment " + r.ns + "/" + r.name + ": ";
  if (r.record) {
    out += "in-place update " + r.record->from + " -> " + r.record->to + ", started " +
           r.record->startedAt + "\n";
    out += "  phase: " + Phase(r);
    out += "   paused by user: " + std::string(r.userPaused ? "yes" : "no");
    // (A StatefulSet takes no undo command.)
    out += "   abort requested: " + std::string(r.abortRequested ? "yes" : "no");
    if (r.undoRequested && !sts) out += "   undo requested: yes";
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
  if (r.record && sts && r.partition > 0) {
    out += "  partition " + std::to_string(r.partition) +
           ": the update works on the pods at or above it (" + rules::Pods(r.total) +
           "); the pods below it (" + rules::Pods(r.belowPartition) +
           ") keep their revision until it is lowered\n";
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
    return !p.inUpdate || p.state == pod_update::PodState::kNormal;
  });
  const bool done = r.updated == r.total && allNormal;
  // A StatefulSet's update ends only with its partition at 0 (StatefulSetWorkload::Finish).
  if (done && r.kind == WorkloadKind::kStatefulSet && r.partition > 0) return "held";
  if (r.total > 0 && done) return "finishing";
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
