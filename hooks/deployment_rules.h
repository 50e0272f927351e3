// The in-place rules of a Deployment (DESIGN.md §3, §4.1, §4a): the facts about a Deployment they
// read, the shape checks of admitted objects, and the ONE decision that both Deployment webhooks
// share: the mutator applies it, the validator admits only its fixed points.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/workload_rules.h"
#include "lib/json.h"
#include "lib/kube_objects.h"
#include "lib/status.h"

namespace iw::deployment {

using rules::Decision;
using rules::Facts;
using rules::ForgedStateKeys;
using rules::IsOptedIn;
using rules::kAbortTakeover;

// The command that stops a running in-place update of `deployment`, for messages:
// `kubectl annotate deploy/NAME inplace-webhook.io/abort=true -n NAMESPACE`.
std::string AbortCommand(const kube::Deployment& deployment);

// The mutating decision for a Deployment UPDATE by someone other than the controller, from the
// stored object (`oldDeployment`) and the written one (`newDeployment`). State is read from the
// stored object only: whether an update runs (its in-progress annotation) and pausedByUs (!old
// spec.paused, decided when the update starts). The written object's in-progress is never trusted,
// except that a start carries its startedAt when from/to/pausedByUs equal the computed ones (so
// answering our own output changes nothing). Applying the decision to `newDeployment` and deciding
// again on the result gives the same decision with nothing left to change.
Decision Decide(const kube::Deployment& oldDeployment, const kube::Deployment& newDeployment,
                const Facts& ctx);

// Whether `deployment` already has what `decision` wants (paused, in-progress, the commands).
bool Conforms(const Decision& decision, const kube::Deployment& deployment);
using rules::Apply;

}  // namespace iw::deployment
