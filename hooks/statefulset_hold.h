// How an in-place update holds the StatefulSet controller (DESIGN.md §4.8): not through any field
// of the StatefulSet, but by refusing the one pod DELETE the controller makes to roll a pod the
// update moves in place. The controller's status, `kubectl rollout status` and every field the
// user wrote stay as a native rolling update has them; the pods the loop moves carry the update
// revision in their controller-revision-hash label, so the controller counts them as updated and
// goes on to the next.
//
// Two halves, both pure: what the pod webhook reads of a DELETE and forwards (it holds no
// credentials, §9.4), and the loop's answer from the StatefulSet as stored.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lib/kube_objects.h"
#include "lib/status.h"

namespace iw::statefulset_hold {

// What the webhook forwards of a live pod's DELETE by the StatefulSet controller: the stored pod's
// identity, its controlling StatefulSet and its revision.
struct PodFacts {
  std::string ns, name, uid;
  std::string setName, setUid;  // the ownerReference with controller: true, of kind StatefulSet
  std::string revision;         // controller-revision-hash

  bool operator==(const PodFacts&) const = default;
};

// The facts of a pod whose DELETE the hold may judge, or nullopt when it is none of the hold's
// business (the answer is then "allow" without asking): the requester is not `controllerUser` (the
// StatefulSet controller's identity, --statefulset-controller-user), the pod is not opted in, not
// controlled by a StatefulSet, already terminating or in a terminal phase (the controller replaces
// a terminal pod; never held).
std::optional<PodFacts> FactsOf(const kube::Pod& pod, std::string_view username,
                                std::string_view controllerUser);

// The facts as a query string for the loop's /holdz, and back. Decode fails (InvalidArgument)
// on a missing field, a malformed escape, or a namespace, pod or StatefulSet name that is not a
// Kubernetes object name (they become an API path).
std::string EncodeQuery(const PodFacts& facts);
StatusOr<PodFacts> DecodeQuery(std::string_view query);

struct Answer {
  bool hold = false;
  std::string reason;  // for the denial message (the controller's FailedDelete Event) or the log
};

// The loop's answer for `pod`, from its StatefulSet as stored (nullopt: not found). Held only if
// every one of these holds; else the DELETE goes through and the native controller does what it
// does without us:
// - the StatefulSet is the pod's controller (same uid) and is not being deleted;
// - it stores a readable in-progress record and no abort (an abort hands the change to the native
//   rollout at once; a malformed record is the loop's to abort);
// - its update strategy is RollingUpdate (OnDelete leaves pods to the user; Recreate is native);
// - the pod's ordinal is in [start + partition, start + replicas): one the rolling update would
//   replace (below the partition it keeps its revision; above the replicas it is a scale-down).
// The pod's revision does not matter: at the update revision it was moved in place a moment ago,
// and the controller, whose cache still shows it as it was, deletes it by name (s01 caught it with
// the drain off); the reason then says so. (The pod asked about is live: FactsOf leaves terminal
// and deleting pods, which the controller replaces, to it.)
Answer Decide(const std::optional<kube::StatefulSet>& set, const PodFacts& pod);

// The /holdz answer's body ("hold\n<reason>" or "release\n<reason>") and back: nullopt for any
// other text (the webhook then lets the DELETE through).
std::string RenderAnswer(const Answer& answer);
std::optional<Answer> ParseAnswer(std::string_view body);

}  // namespace iw::statefulset_hold
