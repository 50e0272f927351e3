#include "hooks/budget.h"

#include "hooks/pod_state.h"
#include "lib/rfc3339.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "hooks/keys.h"

namespace iw::budget {

std::optional<int> ResolveIntOrPercent(const json::Value& value, int total, bool roundUp) {
  if (value.IsInt()) {
    if (value.GetInt() < 0) return std::nullopt;
    return value.GetInt();
  }
  if (!value.IsString()) return std::nullopt;
  std::string_view s = json::View(value);
  if (s.size() < 2 || s.back() != '%') return std::nullopt;
  s.remove_suffix(1);
  long long percent = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), percent);
  if (ec != std::errc() || end != s.data() + s.size() || percent < 0 || percent > 100000) {
    return std::nullopt;
  }
  long long scaled = percent * static_cast<long long>(total);
  long long result = roundUp ? (scaled + 99) / 100 : scaled / 100;
  if (result > std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  return static_cast<int>(result);
}

int ResolveMaxUnavailable(const kube::Deployment& deployment) {
  const int replicas = deployment.replicas();
  if (deployment.recreate()) return replicas;
  const json::Value* strategy = deployment.strategy();
  const json::Value* v = json::Path(strategy, {"rollingUpdate", "maxUnavailable"});
  const json::Value defaultValue("25%");
  return ResolveIntOrPercent(v != nullptr && !v->IsNull() ? *v : defaultValue, replicas,
                             /*roundUp=*/false)
      .value_or(0);
}

int MaxUnavailable(const kube::Deployment& deployment) {
  // The Deployment controller's value, where in-place reads 0 as one at a time.
  return std::max(1, ResolveMaxUnavailable(deployment));
}

bool IsReady(const kube::Pod& pod) {
  return pod.conditionTrue("Ready");
}

std::optional<std::chrono::system_clock::time_point> AvailableAt(const kube::Pod& pod,
                                                                 int minReadySeconds) {
  if (!IsReady(pod)) return std::nullopt;
  if (minReadySeconds <= 0) return std::chrono::system_clock::time_point{};
  const std::optional<kube::Condition> ready = pod.condition("Ready");
  auto since = rfc3339::Parse(ready ? ready->lastTransitionTime() : std::string_view{});
  if (!since) return std::nullopt;
  return *since + std::chrono::seconds(minReadySeconds) + std::chrono::seconds(1);
}

bool IsAvailable(const kube::Pod& pod, int minReadySeconds,
                 std::chrono::system_clock::time_point now) {
  if (pod_update::StateOf(pod) != pod_update::PodState::kNormal) return false;
  auto at = AvailableAt(pod, minReadySeconds);
  return at && *at <= now;
}

bool Allowance::TryStart(bool podAvailable) {
  if (inFlight_ >= limit_) return false;
  if (podAvailable) {
    if (unavailable_ >= limit_) return false;
    ++unavailable_;
  }
  ++inFlight_;
  return true;
}

}  // namespace iw::budget
