#include "hooks/qos.h"

#include <optional>

#include "lib/quantity.h"

namespace iw::qos {

namespace {

bool NonEmptyMap(const json::Value* v) {
  return v != nullptr && v->IsObject() && v->MemberCount() > 0;
}

// A request or limit as milli-units, 0 when absent or unreadable (as a missing Quantity).
long long Milli(const json::Value* list, std::string_view name) {
  return quantity::MilliOf(json::Find(list, name)).value_or(0);
}

}  // namespace

std::string_view OfRequirements(const json::Value* resources) {
  const json::Value* requests = json::Find(resources, "requests");
  const json::Value* limits = json::Find(resources, "limits");
  if (!NonEmptyMap(requests) && !NonEmptyMap(limits)) return kBestEffort;
  std::optional<std::string_view> out;
  for (std::string_view name : {"cpu", "memory"}) {
    const long long limit = Milli(limits, name);
    // SetDefaults_Pod: a limit without a request makes the request.
    const long long request = json::Find(requests, name) != nullptr ? Milli(requests, name) : limit;
    std::string_view one = request != limit ? kBurstable : request == 0 ? kBestEffort : kGuaranteed;
    if (one == kBurstable) return kBurstable;
    if (!out) {
      out = one;
    } else if (*out != one) {
      return kBurstable;
    }
  }
  return *out;
}

std::string_view OfPodSpec(const json::Value* podSpec) {
  const json::Value* podLevel = json::Find(podSpec, "resources");
  if (NonEmptyMap(json::Find(podLevel, "requests")) ||
      NonEmptyMap(json::Find(podLevel, "limits"))) {
    return OfRequirements(podLevel);
  }
  std::optional<std::string_view> out;
  for (std::string_view list : {"initContainers", "containers"}) {
    const json::Value* containers = json::Find(podSpec, list);
    if (containers == nullptr || !containers->IsArray()) continue;
    for (const auto& c : containers->GetArray()) {
      std::string_view one = OfRequirements(json::Find(&c, "resources"));
      if (one == kBurstable) return kBurstable;
      if (!out) {
        out = one;
      } else if (*out != one) {
        return kBurstable;
      }
    }
  }
  return out.value_or(kBestEffort);
}

}  // namespace iw::qos
