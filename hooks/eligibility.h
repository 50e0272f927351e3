// Which pod-template changes of a Deployment can be applied to running pods in place (DESIGN.md
// §3), after OpenKruise's defaultCalculateInPlaceUpdateSpec with its env-from-metadata and vertical
// scaling gates off (no node agent, no resize). Pure: a function of two templates and the policy.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hooks/lifecycle.h"
#include "lib/json.h"

namespace iw::eligibility {

// What an eligible change does to a pod: only the difference between the two templates.
struct Plan {
  // Template label changes: the new value, or nullopt when the label was removed.
  std::map<std::string, std::optional<std::string>> labels;
  // Template annotation changes (allow-listed keys only), same convention.
  std::map<std::string, std::optional<std::string>> annotations;
  // New image per container name, for the containers whose image changed.
  std::map<std::string, std::string> images;

  bool Empty() const { return labels.empty() && annotations.empty() && images.empty(); }
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
};

// Compares two pod templates (a Deployment's spec.template). Eligible differences:
// - containers[i].image replaced (non-empty string without leading or trailing whitespace, which
// the
//   pod API refuses), same container names in the same order;
// - metadata.labels[k] added, changed or removed;
// - metadata.annotations[k] added, changed or removed where `policy.AllowsAnnotation(k)`, except
// the
//   keys the pod API refuses to change on a running pod (AppArmor's
//   `container.apparmor.security.beta.kubernetes.io/*`, the mirror-pod
//   `kubernetes.io/config.mirror`), whatever the policy says;
// but a label or annotation read by a container env `valueFrom.fieldRef` (init containers too) or a
// downwardAPI volume item (also inside a projected volume) of either template, by key or as the
// whole map, is not eligible: kubelet would not restart anything. Every other difference is not
// eligible; `blockingPath` names the first one met, walking metadata before spec and each object
// in the new template's member order, then members only the old one has.
// A missing template (nullptr) on either side is not eligible (`spec.template`) unless both are.
Result CompareTemplates(const json::Value* oldTemplate, const json::Value* newTemplate,
                        const lifecycle::Policy& policy);

// CompareTemplates on the spec.template of two Deployments: nothing else of them matters.
Result CompareDeployments(const json::Value& oldDeployment, const json::Value& newDeployment,
                          const lifecycle::Policy& policy);

}  // namespace iw::eligibility
