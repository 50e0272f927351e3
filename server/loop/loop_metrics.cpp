#include "server/loop/loop_metrics.h"

#include <cstdio>

#include "hooks/keys.h"
#include "hooks/pod_update.h"
#include "server/process/metrics.h"

namespace iw::loop {

namespace {

void Counter(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
  out += "# TYPE " + std::string(name) + " counter\n";
  out += std::string(name) + " " + std::to_string(value) + "\n";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void DurationHistogram::Observe(double seconds) {
  if (seconds < 0) seconds = 0;
  for (size_t i = 0; i < buckets_.size() && i < kMaxBuckets; ++i) {
    if (seconds <= buckets_[i]) counts_[i].fetch_add(1);
  }
  count_.fetch_add(1);
  sumMillis_.fetch_add(static_cast<uint64_t>(seconds * 1000.0));
}

void DurationHistogram::Render(std::string& out, std::string_view name,
                               std::string_view help) const {
  const std::string n(name);
  out += "# HELP " + n + " " + std::string(help) + "\n";
  out += "# TYPE " + n + " histogram\n";
  RenderSeries(out, name, "");
}

void DurationHistogram::RenderSeries(std::string& out, std::string_view name,
                                     std::string_view labels) const {
  const std::string n(name);
  const std::string l(labels);
  const std::string sep = l.empty() ? "" : ",";
  const std::string braces = l.empty() ? "" : "{" + l + "}";
  for (size_t i = 0; i < buckets_.size() && i < kMaxBuckets; ++i) {
    out += n + "_bucket{" + l + sep + "le=\"" + Number(buckets_[i]) + "\"} " +
           std::to_string(counts_[i].load()) + "\n";
  }
  out += n + "_bucket{" + l + sep + "le=\"+Inf\"} " + std::to_string(count_.load()) + "\n";
  out += n + "_sum" + braces + " " + Number(static_cast<double>(sumMillis_.load()) / 1000.0) + "\n";
  out += n + "_count" + braces + " " + std::to_string(count_.load()) + "\n";
}

void LoopMetrics::Count(rollout::Metric metric, double seconds) {
  if (metric == rollout::Metric::kNone) return;
  counters_[static_cast<size_t>(metric)].fetch_add(1);
  if (metric == rollout::Metric::kPodUpdateCompleted) podUpdate_.Observe(seconds);
  if (metric == rollout::Metric::kRolloutCompleted) rollout_.Observe(seconds);
  if (metric == rollout::Metric::kPreUpdateWaitEnded) preUpdateWait_.Observe(seconds);
  if (metric == rollout::Metric::kPostUpdateWaitEnded) postUpdateWait_.Observe(seconds);
}

uint64_t LoopMetrics::Value(rollout::Metric metric) const {
  return counters_[static_cast<size_t>(metric)].load();
}

void LoopMetrics::SetUpdate(const std::string& deployment,
                            const std::map<std::string, int>& podsByState,
                            const std::map<std::string, int>& podsByWait, bool stalled) {
  std::lock_guard lock(mu_);
  updates_[deployment] = Update{podsByState, podsByWait, stalled};
}

void LoopMetrics::ForgetUpdate(const std::string& deployment) {
  std::lock_guard lock(mu_);
  updates_.erase(deployment);
}

void LoopMetrics::ForgetUpdates() {
  std::lock_guard lock(mu_);
  updates_.clear();
}

std::map<std::string, int> LoopMetrics::Sum(std::map<std::string, int> Update::*counts) const {
  std::lock_guard lock(mu_);
  std::map<std::string, int> sum;
  for (const auto& [d, u] : updates_) {
    for (const auto& [key, n] : u.*counts) sum[key] += n;
  }
  return sum;
}

std::map<std::string, int> LoopMetrics::PodsByState() const {
  return Sum(&Update::podsByState);
}

std::map<std::string, int> LoopMetrics::PodsByWait() const {
  return Sum(&Update::podsByWait);
}

int LoopMetrics::UpdatesInProgress() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(updates_.size());
}

std::vector<std::string> LoopMetrics::StalledUpdates() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [d, u] : updates_) {
    if (u.stalled) out.push_back(d);
  }
  return out;
}

void LoopMetrics::Render(std::string& out) const {
  using rollout::Metric;
  Counter(out, "inplace_webhook_rollouts_started_total",
          "In-place updates of Deployments the loop started.", Value(Metric::kRolloutStarted));
  Counter(out, "inplace_webhook_rollouts_completed_total",
          "In-place updates of Deployments completed.", Value(Metric::kRolloutCompleted));
  Counter(out, "inplace_webhook_rollouts_aborted_total",
          "In-place updates of Deployments aborted (annotation, failed precondition, unpause).",
          Value(Metric::kRolloutAborted));
  Counter(out, "inplace_webhook_pod_updates_started_total",
          "Pods that left Normal for an in-place update.", Value(Metric::kPodUpdateStarted));
  Counter(out, "inplace_webhook_pod_updates_completed_total",
          "Pods whose changed containers restarted on the new image.",
          Value(Metric::kPodUpdateCompleted));
  Counter(out, "inplace_webhook_hook_timeouts_total",
          "Pods reported stuck in a hook or in Updating past the timeout.",
          Value(Metric::kHookTimeout));
  Counter(out, "inplace_webhook_loop_reconciles_total", "Reconciles of in-progress Deployments.",
          reconciles.load());
  Counter(out, "inplace_webhook_loop_conflicts_total",
          "Loop writes answered 409 Conflict (re-read and retried).", conflicts.load());
  Counter(out, "inplace_webhook_loop_errors_total", "Loop API calls that failed otherwise.",
          errors.load());
  const std::string_view wait = "inplace_webhook_hook_wait_seconds";
  out += "# HELP " + std::string(wait) +
         " Time a pod waited before the loop moved it on: hook=\"preUpdate\" PreparingUpdate -> "
         "Updating (pre-update hook and drain), hook=\"postUpdate\" Updated -> Normal.\n";
  out += "# TYPE " + std::string(wait) + " histogram\n";
  preUpdateWait_.RenderSeries(out, wait, "hook=\"preUpdate\"");
  postUpdateWait_.RenderSeries(out, wait, "hook=\"postUpdate\"");
  podUpdate_.Render(out, "inplace_webhook_pod_update_duration_seconds",
                    "Time from a pod's in-place write to its containers running the new images.");
  rollout_.Render(out, "inplace_webhook_rollout_duration_seconds",
                  "Time from the start of an in-place update to its completion.");
  gate_.Render(
      out, "inplace_webhook_gate_latency_seconds",
      "Time from the pod event that queued a new pod's readiness gate to the loop's write "
      "setting it True (or to the gate lane finding it True, set by a Deployment's pass).");
  out +=
      "# HELP inplace_webhook_pods Pods of in-progress Deployments and StatefulSets by in-place "
      "state.\n";
  out += "# TYPE inplace_webhook_pods gauge\n";
  std::map<std::string, int> sum = PodsByState();
  for (pod_update::PodState s : pod_update::kAllPodStates) {
    const std::string_view state = pod_update::StateName(s);
    auto it = sum.find(std::string(state));
    out += "inplace_webhook_pods{state=\"" + std::string(state) + "\"} " +
           std::to_string(it == sum.end() ? 0 : it->second) + "\n";
  }
  out +=
      "# HELP inplace_webhook_pods_waiting Pods of in-progress Deployments and StatefulSets by "
      "what the loop waits "
      "on before it moves them on (pod_update::PodWait): turn, pre_update_hook, drain_gate, "
      "drain, resize_write, resize, restart, image, step, post_update_hook.\n";
  out += "# TYPE inplace_webhook_pods_waiting gauge\n";
  std::map<std::string, int> waits = PodsByWait();
  for (pod_update::PodWait::On on : pod_update::kAllWaits) {
    const std::string name(pod_update::WaitName(on));
    auto it = waits.find(name);
    out += "inplace_webhook_pods_waiting{on=\"" + name + "\"} " +
           std::to_string(it == waits.end() ? 0 : it->second) + "\n";
  }
  out +=
      "# HELP inplace_webhook_updates_in_progress In-place updates of Deployments and StatefulSets "
      "this loop is running (0 on replicas that do not lead).\n";
  out += "# TYPE inplace_webhook_updates_in_progress gauge\n";
  out += "inplace_webhook_updates_in_progress " + std::to_string(UpdatesInProgress()) + "\n";
  // One gauge per kind, each labelled by its own kind's words (the label is <kind>_namespace, not
  // namespace, which Prometheus' target labels take).
  std::map<std::string, bool> deployments, statefulSets;
  {
    std::lock_guard lock(mu_);
    for (const auto& [d, u] : updates_) {
      if (d.starts_with(kStatefulSetKeyPrefix)) {
        statefulSets[d.substr(kStatefulSetKeyPrefix.size())] = u.stalled;
      } else {
        deployments[d] = u.stalled;
      }
    }
  }
  auto gauge = [&out](std::string_view family, std::string_view help, std::string_view label,
                      const std::map<std::string, bool>& stalled) {
    out += "# HELP " + std::string(family) + " " + std::string(help) + "\n";
    out += "# TYPE " + std::string(family) + " gauge\n";
    for (const auto& [d, s] : stalled) {
      const size_t slash = d.find('/');
      const std::string ns = slash == std::string::npos ? "" : d.substr(0, slash);
      const std::string name = slash == std::string::npos ? d : d.substr(slash + 1);
      out += std::string(family) + "{" + std::string(label) + "_namespace=\"" +
             metrics::EscapeLabel(ns) + "\"," + std::string(label) + "=\"" +
             metrics::EscapeLabel(name) + "\"} " + (s ? "1" : "0") + "\n";
    }
  };
  gauge("inplace_webhook_update_stalled",
        "In-place updates of Deployments with no progress for spec.progressDeadlineSeconds "
        "(ProgressDeadlineExceeded), 1 per Deployment; updates that progress are 0. The label is "
        "deployment_namespace, not namespace, which Prometheus' target labels take.",
        "deployment", deployments);
  gauge("inplace_webhook_statefulset_update_stalled",
        "In-place updates of StatefulSets with no progress for their annotation "
        "inplace-webhook.io/progress-deadline-seconds (600 s when absent), or a refused pod "
        "resize, 1 per StatefulSet; updates that progress are 0.",
        "statefulset", statefulSets);
}

}  // namespace iw::loop
