// Which pod-template changes of a Deployment can be applied to running pods in place (DESIGN.md
// §3), after OpenKruise's defaultCalculateInPlaceUpdateSpec with its env-from-metadata gate off (no
// node agent) and container cpu/memory changes through pods/resize (in-place pod vertical scaling)
// where the API server serves it. Pure: a function of two templates, the policy and what the API
// server supports.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hooks/lifecycle.h"
#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::eligibility {

// What an eligible change does to a pod: only the difference between the two templates.
struct Plan {
  // Template label changes: the new value, or nullopt when the label was removed.
  std::map<std::string, std::optional<std::string>> labels;
  // Template annotation changes (allow-listed keys only), same convention.
  std::map<std::string, std::optional<std::string>> annotations;
  // New image per container name, for the containers whose image changed.
  std::map<std::string, std::string> images;
  // New cpu/memory requests and limits per container name, for the containers whose resources
  // changed: every cpu/memory entry of the new template's container (quantities as written).
  struct Resources {
    std::map<std::string, std::string> requests;
    std::map<std::string, std::string> limits;
    bool operator==(const Resources&) const = default;
  };
  std::map<std::string, Resources> resources;

  bool Empty() const {
    return labels.empty() && annotations.empty() && images.empty() && resources.empty();
  }
  bool operator==(const Plan&) const = default;
};

enum class Verdict {
  kNoChange,     // the templates are equal (absent, null and empty label/annotation maps alike)
  kEligible,     // every difference can be applied in place: see `plan`
  kNotEligible,  // some difference needs new pods: see `blockingPath` and `reason`
};

struct Result {
  Verdict verdict = Verdict::kNoChange;
  Plan plan;                 // kEligible only
  std::string blockingPath;  // kNotEligible only, e.g. `spec.template.spec.containers[0].env`
  std::string reason;        // kNotEligible only: why that path blocks, one short sentence
  // kNotEligible only: set when kube-apiserver's pod update validation itself refuses the change
  // on a running pod (ValidatePodUpdate), naming what for the user, e.g.
  // `annotation container.apparmor.security.beta.kubernetes.io/app`; empty otherwise.
  std::string podApiRefuses;
  // kNotEligible only: the block is a rule of in-place resizing (a resources change that cannot
  // go through pods/resize); the webhook's warning then says `reason`.
  bool resize = false;
};

// Compares two pod templates (a Deployment's spec.template). Eligible differences:
// - containers[i].image replaced (non-empty string without leading or trailing whitespace, which
//   the pod API refuses), same container names in the same order;
// - containers[i].resources: cpu and memory requests and limits changed or added (not removed:
//   ValidatePodResize refuses that), claims and every other resource unchanged, when
//   `support.podResize`; a memory limit lowered only where `support.memoryLimitDecrease` or the
//   container's memory resizePolicy is RestartContainer; and then only when the template has no
//   pod-level spec.resources and the pod's QoS class (qos::OfPodSpec) stays the same;
// - metadata.labels[k] added, changed or removed;
// - metadata.annotations[k] added, changed or removed where `policy.AllowsAnnotation(k)`, except
//   the keys the pod API refuses to change on a running pod (AppArmor's
//   `container.apparmor.security.beta.kubernetes.io/*`, the mirror-pod
//   `kubernetes.io/config.mirror`), whatever the policy says;
// but a label or annotation read by a container env `valueFrom.fieldRef` (init containers too) or a
// downwardAPI volume item (also inside a projected volume) of either template, by key or as the
// whole map, is not eligible: kubelet would not restart anything. Every other difference is not
// eligible; `blockingPath` names the first one met, walking metadata before spec and each object
// in the new template's member order, then members only the old one has.
// A missing template (nullptr) on either side is not eligible (`spec.template`) unless both are.
Result CompareTemplates(const kube::PodTemplate* oldTemplate, const kube::PodTemplate* newTemplate,
                        const lifecycle::Policy& policy,
                        const resize_support::Support& support = {});

// The cpu/memory requests and limits of a container object (quantities as written; numbers as
// their JSON text), with a limit's request defaulted to it where the container sets none, as the
// API server does for a pod made from it.
Plan::Resources ResourcesOf(const kube::Container& container);

// CompareTemplates on the spec.template of two Deployments: nothing else of them matters.
Result CompareDeployments(const kube::Deployment& oldDeployment,
                          const kube::Deployment& newDeployment, const lifecycle::Policy& policy,
                          const resize_support::Support& support = {});

}  // namespace iw::eligibility
