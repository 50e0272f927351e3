#include "hooks/budget.h"
#include "lib/rfc3339.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/pod_update.h"

namespace iw::budget {

int Replicas(const json::Value& workload) {
  const json::Value* r = json::Path(&workload, {"spec", "replicas"});
  if (r == nullptr || !r->IsInt()) return 1;
  return r->GetInt() < 0 ? 0 : r->GetInt();
}

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

int MaxUnavailable(const json::Value& deployment) {
  // The Deployment controller's value (deployment_rules), where in-place reads 0 as one at a time.
  const long long resolved = deployment::ResolveMaxUnavailable(deployment);
  return static_cast<int>(std::clamp<long long>(resolved, 1, std::numeric_limits<int>::max()));
}

bool IsReady(const json::Value& pod) {
  const json::Value* conditions = json::Path(&pod, {"status", "conditions"});
  if (conditions == nullptr || !conditions->IsArray()) return false;
  for (const auto& c : conditions->GetArray()) {
    if (json::StringOr(&c, "type") == "Ready") return json::StringOr(&c, "status") == "True";
  }
  return false;
}

int MinReadySeconds(const json::Value& workload) {
  const json::Value* m = json::Path(&workload, {"spec", "minReadySeconds"});
  if (m == nullptr || !m->IsInt() || m->GetInt() < 0) return 0;
  return m->GetInt();
}

std::optional<std::chrono::system_clock::time_point> AvailableAt(const json::Value& pod,
                                                                 int minReadySeconds) {
  if (!IsReady(pod)) return std::nullopt;
  if (minReadySeconds <= 0) return std::chrono::system_clock::time_point{};
  const json::Value* conditions = json::Path(&pod, {"status", "conditions"});
  for (const auto& c : conditions->GetArray()) {
    if (json::StringOr(&c, "type") != "Ready") continue;
    auto since = rfc3339::Parse(json::StringOr(&c, "lastTransitionTime"));
    if (!since) return std::nullopt;
    return *since + std::chrono::seconds(minReadySeconds) + std::chrono::seconds(1);
  }
  return std::nullopt;
}

bool IsAvailable(const json::Value& pod, int minReadySeconds,
                 std::chrono::system_clock::time_point now) {
  std::string_view state =
      json::StringOr(json::Path(&pod, {"metadata", "labels"}), keys::kStateLabel);
  const bool inUpdate = state == keys::kStatePreparingUpdate || state == keys::kStateUpdating ||
                        state == keys::kStateUpdated;
  if (inUpdate) return false;
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
