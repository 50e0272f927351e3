// The user's lifecycle hooks and in-place policy, parsed from the Deployment's annotations, and
// the hook predicates (after OpenKruise's pkg/util/lifecycle). See DESIGN.md §2 and §4a.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/json.h"
#include "lib/kube_objects.h"
#include "lib/status.h"

namespace iw::lifecycle {

// The longest `timeoutSeconds` and `gracePeriodSeconds` accepted: one day. Above it the annotation
// is refused at admission with the bound in the message (a hook that should wait for ever leaves
// timeoutSeconds unset), so every duration the loop adds to a time point fits its nanosecond clock
// with room to spare.
inline constexpr long long kMaxDurationSeconds = 86400;

// One hook: `{"labelsHandler":{"k":"v"},"finalizersHandler":["f"],"markPodNotReady":true,
// "timeoutSeconds":600}`.
struct Hook {
  std::map<std::string, std::string> labelsHandler;
  std::vector<std::string> finalizersHandler;
  bool markPodNotReady = false;
  std::optional<long long> timeoutSeconds;  // none: wait for ever (Kruise's behaviour)

  bool Empty() const { return labelsHandler.empty() && finalizersHandler.empty(); }
};

// The `lifecycle` annotation: `{"inPlaceUpdate":H,"preUpdate":H,"postUpdate":H}`, each optional.
// inPlaceUpdate serves both phases; preUpdate / postUpdate override one phase each.
struct Lifecycle {
  std::optional<Hook> inPlaceUpdate;
  std::optional<Hook> preUpdate;
  std::optional<Hook> postUpdate;

  // The hook that holds a pod before its update, if any.
  const Hook* PreHook() const;
  // The hook that holds a pod after its update, if any.
  const Hook* PostHook() const;
};

// The `policy` annotation: `{"annotations":["prefix/*","exact-key"],"gracePeriodSeconds":0}`.
struct Policy {
  std::vector<std::string> annotations;  // patterns; a trailing "*" matches any suffix
  // The drain between readiness-gate False and the pod write; unset: pod_update's default for
  // pods that declare the gate (kDefaultDrainSeconds).
  std::optional<long long> gracePeriodSeconds;

  // Whether template annotation `key` may change in place: it matches a pattern exactly, or a
  // pattern ending in "*" is a prefix of it. `kubectl.kubernetes.io/restartedAt` never does.
  bool AllowsAnnotation(std::string_view key) const;
};

// Parses the annotation text. InvalidArgument names the offending field and the expected shape,
// e.g. `inplace-webhook.io/lifecycle: inPlaceUpdate.labelsHandler must be an object of string
// values`.
StatusOr<Lifecycle> ParseLifecycle(std::string_view text);
StatusOr<Policy> ParsePolicy(std::string_view text);

// Reads both annotations from a workload's metadata.annotations (absent → defaults); fails as
// ParseLifecycle/ParsePolicy do.
struct Settings {
  Lifecycle lifecycle;
  Policy policy;
};
StatusOr<Settings> ReadSettings(const kube::ObjectView& workload);

// Kruise's IsPodHooked: any handler label matches exactly or any handler finalizer is present.
// An empty hook is never hooked.
bool IsPodHooked(const Hook& hook, const kube::Pod& pod);
// Kruise's IsPodAllHooked: every handler label matches and every finalizer is present.
// An empty hook counts as all hooked.
bool IsPodAllHooked(const Hook& hook, const kube::Pod& pod);
// The handlers of `hook` that the pod carries (`present`) or lacks (!present), in words:
// "label lb=on, finalizer example.com/registered" ("" for none).
std::string DescribeHandlers(const Hook& hook, const kube::Pod& pod, bool present);

}  // namespace iw::lifecycle
