// The in-place rules of a StatefulSet (DESIGN.md §4.8): the ONE decision that both StatefulSet
// webhooks share (the mutator applies it, the validator admits only its fixed points). It owns one
// field, the in-progress annotation, and consumes the command annotations; it never changes the
// StatefulSet's spec: the controller is held by refusing its pod deletions (statefulset_hold), so
// the partition, the strategy and the template stay exactly as the user wrote them.
#pragma once

#include "hooks/workload_rules.h"
#include "lib/kube_objects.h"

namespace iw::statefulset {

// The mutating decision for a StatefulSet UPDATE by someone other than the controller, from the
// stored object (`oldSet`) and the written one (`newSet`). Whether an update runs is read from the
// stored object only. No update runs: an eligible template change (hooks/eligibility, as for a
// Deployment) of an opted-in StatefulSet and template, updateStrategy RollingUpdate, pods running
// and no rolling update under way (status.currentRevision == updateRevision) starts one (kStart,
// the record with from/to and startedAt; pausedByUs true: nothing but the update holds it). An
// update runs: a further eligible change re-targets it; a change that is not eligible, the opt-in
// label removed, or another updateStrategy ends it (the native rolling update then replaces
// every pod not at the new revision, the ones the update moved included); the abort command as
// for a Deployment (§9.8); the pause command `inplace-webhook.io/pause` "true" holds a running
// update (pausedByUs false: the planner's user pause) and "false" lets it go on, consumed either
// way (a StatefulSet has no spec.paused for kubectl rollout pause/resume). Applying the decision
// and deciding again on the result changes nothing.
rules::Decision Decide(const kube::StatefulSet& oldSet, const kube::StatefulSet& newSet,
                       const rules::Facts& ctx);

// Whether `set` already has what `decision` wants (in-progress, the commands).
bool Conforms(const rules::Decision& decision, const kube::StatefulSet& set);

// `sts/NAME`, for messages and commands.
std::string Ref(const kube::ObjectView& set);
// The command that stops a running in-place update of `set`, for messages:
// `kubectl annotate sts/NAME inplace-webhook.io/abort=true -n NAMESPACE`.
std::string AbortCommand(const kube::ObjectView& set);

}  // namespace iw::statefulset
