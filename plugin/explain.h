// `kubectl inplace explain`: would the Deployment's last template change be made in place, and if
// not, the first path that blocks it. Pure: the verdict is the mutating webhook's own decision
// (deployment::Decide) on that change, with eligibility::CompareTemplates' plan or blocking path.
#pragma once

#include <string>
#include <vector>

#include "hooks/eligibility.h"
#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/status.h"

namespace iw::plugin {

struct Explanation {
  enum class Kind {
    kNotOptedIn,  // the Deployment lacks inplace-webhook.io/enabled=true
    kNoHistory,   // no earlier template to compare with (a single revision)
    kNoChange,    // the earlier template equals the current one
    kInPlace,     // the webhook would start an in-place update: `plan`
    kNative,      // it would not: `blockingPath`/`reason`, or the webhook's `decisionReason`
  };
  Kind kind = Kind::kNoHistory;
  std::string name;
  std::string from;  // "revision 1" or "template abc123 (the running update's start)"
  std::string to;    // "revision 2 (current)"
  eligibility::Plan plan;
  std::string blockingPath, reason, podApiRefuses;
  std::string decisionReason;         // deployment::Decision::reason
  std::vector<std::string> warnings;  // what kubectl would print for the change
};

// `deployment` as `kubectl get -o json` prints it, `replicaSets` a list of its ReplicaSets. The
// earlier template: while an update runs, the ReplicaSet template of its `from` hash; otherwise
// the ReplicaSet with the highest deployment.kubernetes.io/revision below the Deployment's.
// `resize`: what the cluster's API server allows with container resources (as the webhook's
// --pod-resize=auto finds it).
StatusOr<Explanation> Explain(const json::Value& deployment, const json::Value& replicaSets,
                              const resize_support::Support& resize = {});

std::string RenderExplanation(const Explanation& e);

}  // namespace iw::plugin
