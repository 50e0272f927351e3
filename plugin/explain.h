// `kubectl inplace explain`: would the last template change of a Deployment or StatefulSet be made
// in place, and if not, the first path that blocks it. Pure: the verdict is the mutating webhook's
// own decision (deployment::Decide, statefulset::Decide) on that change, with
// eligibility::CompareTemplates' plan or blocking path.
#pragma once

#include <string>
#include <vector>

#include "hooks/eligibility.h"
#include "hooks/resize_support.h"
#include "lib/json.h"
#include "lib/status.h"
#include "plugin/workload_kind.h"

namespace iw::plugin {

struct Explanation {
  enum class Kind {
    kNotOptedIn,  // the workload lacks inplace-webhook.io/enabled=true
    kNoHistory,   // no earlier template to compare with (a single revision)
    kNoChange,    // the earlier template equals the current one
    kInPlace,     // the webhook would start an in-place update: `plan`
    kNative,      // it would not: `blockingPath`/`reason`, or the webhook's `decisionReason`
  };
  Kind kind = Kind::kNoHistory;
  WorkloadKind workload = WorkloadKind::kDeployment;
  std::string name;
  std::string from;  // "revision 1" or "template abc123 (the running update's start)"
  std::string to;    // "revision 2 (current)"
  eligibility::Plan plan;
  std::string blockingPath, reason, podApiRefuses;
  std::string decisionReason;         // the webhook's rules::Decision::reason
  std::vector<std::string> warnings;  // what kubectl would print for the change
};

// `deployment` as `kubectl get -o json` prints it, `replicaSets` a list of its ReplicaSets. The
// earlier template: while an update runs, the ReplicaSet template of its `from` hash; otherwise
// the ReplicaSet with the highest deployment.kubernetes.io/revision below the Deployment's.
// `resize`: what the cluster's API server allows with container resources (as the webhook's
// --pod-resize=auto finds it).
StatusOr<Explanation> Explain(const json::Value& deployment, const json::Value& replicaSets,
                              const resize_support::Support& resize = {});

// The same for a StatefulSet (`kubectl get sts -o json`), `controllerRevisions` a list of its
// selector's ControllerRevisions (those it controls, by uid, count; their template is
// data.spec.template without the "$patch" key, rollout::RevisionTemplate). The earlier template:
// while an update runs, that of the ControllerRevision holding the record's `from` (the one
// status.currentRevision names, where the pods started); otherwise that of the ControllerRevision
// with the highest .revision below status.updateRevision's (below none when that one is not
// listed). The webhook's decision is statefulset::Decide on the current StatefulSet with that
// template swapped in and its controller caught up at that revision (currentRevision ==
// updateRevision, every replica counted: no rolling update under way), against the current one as
// a user's write (no record, no command annotations, no progress report).
StatusOr<Explanation> ExplainStatefulSet(const json::Value& statefulSet,
                                         const json::Value& controllerRevisions,
                                         const resize_support::Support& resize = {});

std::string RenderExplanation(const Explanation& e);

}  // namespace iw::plugin
