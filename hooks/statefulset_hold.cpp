#include "hooks/statefulset_hold.h"

#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/statefulset_rules.h"
#include "lib/query_string.h"

namespace iw::statefulset_hold {

namespace {

constexpr std::string_view kHold = "hold";
constexpr std::string_view kRelease = "release";

Answer Release(std::string reason) {
  return {false, std::move(reason)};
}

// A DNS subdomain (RFC 1123), as Kubernetes object names are: lowercase letters, digits, '-' and
// '.', at most 253 characters.
bool IsObjectName(std::string_view v) {
  if (v.empty() || v.size() > 253) return false;
  for (char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return v != "." && v != "..";
}

std::string SetRef(const PodFacts& pod) {
  return "sts/" + pod.setName;
}

}  // namespace

std::optional<PodFacts> FactsOf(const kube::Pod& pod, std::string_view username,
                                std::string_view controllerUser) {
  if (username.empty() || username != controllerUser) return std::nullopt;
  if (!rules::IsOptedIn(pod) || !pod.live()) return std::nullopt;
  const json::Value* ref = kube::ControllerRefOf(pod.json());
  if (json::StringOr(ref, "kind") != "StatefulSet") return std::nullopt;
  PodFacts facts;
  facts.ns = pod.ns();
  facts.name = pod.name();
  facts.uid = pod.uid();
  facts.setName = json::StringOr(ref, "name");
  facts.setUid = json::StringOr(ref, "uid");
  facts.revision = pod.label(keys::kControllerRevisionHashLabel).value_or("");
  if (facts.ns.empty() || facts.name.empty() || facts.setName.empty()) return std::nullopt;
  return facts;
}

std::string EncodeQuery(const PodFacts& facts) {
  std::string q;
  kube::AppendQuery(q, "namespace", facts.ns);
  kube::AppendQuery(q, "pod", facts.name);
  kube::AppendQuery(q, "uid", facts.uid);
  kube::AppendQuery(q, "statefulset", facts.setName);
  kube::AppendQuery(q, "statefulsetUid", facts.setUid);
  kube::AppendQuery(q, "revision", facts.revision);
  return q;
}

StatusOr<PodFacts> DecodeQuery(std::string_view query) {
  PodFacts facts;
  struct Field {
    std::string_view key;
    std::string* out;
  };
  for (const Field& f :
       {Field{"namespace", &facts.ns}, Field{"pod", &facts.name}, Field{"uid", &facts.uid},
        Field{"statefulset", &facts.setName}, Field{"statefulsetUid", &facts.setUid},
        Field{"revision", &facts.revision}}) {
    std::optional<std::string> v = kube::QueryValue(query, f.key);
    if (!v) {
      return Status::InvalidArgument("query parameter " + std::string(f.key) +
                                     " is missing or malformed");
    }
    *f.out = *std::move(v);
  }
  if (facts.ns.empty() || facts.name.empty() || facts.setName.empty()) {
    return Status::InvalidArgument("namespace, pod and statefulset must not be empty");
  }
  // They become an API path: only what Kubernetes names may hold.
  for (const std::string* v : {&facts.ns, &facts.name, &facts.setName}) {
    if (!IsObjectName(*v)) {
      return Status::InvalidArgument("not a Kubernetes object name: " + kube::QueryEscape(*v));
    }
  }
  return facts;
}

Answer Decide(const std::optional<kube::StatefulSet>& set, const PodFacts& pod) {
  if (!set) return Release(SetRef(pod) + " not found");
  if (set->uid() != pod.setUid) return Release(SetRef(pod) + " is not the pod's controller");
  if (set->deleting()) return Release(SetRef(pod) + " is being deleted");
  StatusOr<std::optional<InProgress>> record = ReadInProgress(*set);
  if (!record.ok()) return Release(SetRef(pod) + " has a malformed in-progress record");
  if (!record->has_value()) return Release("no in-place update runs on " + SetRef(pod));
  if (set->annotation(keys::kAbortAnnotation) == keys::kTrue) {
    return Release("the in-place update of " + SetRef(pod) + " is aborted");
  }
  if (!set->rollingUpdate()) {
    return Release(SetRef(pod) + " updates " + std::string(set->updateStrategy()));
  }
  const std::optional<int> ordinal = set->OrdinalOf(pod.name);
  if (!ordinal) return Release("the pod's name has no ordinal of " + SetRef(pod));
  const long long start = set->ordinalStart();
  if (*ordinal < start || *ordinal >= start + set->replicas()) {
    return Release("ordinal " + std::to_string(*ordinal) + " is outside " + SetRef(pod) +
                   "'s replicas (a scale-down)");
  }
  if (*ordinal < start + set->partition()) {
    return Release("ordinal " + std::to_string(*ordinal) + " is below the partition");
  }
  // Live, in range and not below the partition, the controller deletes a pod only for its revision.
  // One already at the update revision was moved in place a moment ago and the controller's cache
  // still shows it as it was (the controller deletes by name, with no precondition): refused too.
  // (Its status is no guide either way: the controller deletes before it writes it.)
  const bool moved = set->ControllerObserved() && !set->updateRevision().empty() &&
                     pod.revision == set->updateRevision();
  return {true, "pod " + pod.name +
                    (moved ? " was updated in place to revision " + pod.revision +
                                 " by inplace-webhook (the controller's view of "
                                 "it is behind; "
                           : " is updated in place by inplace-webhook (") +
                    SetRef(pod) + " in-progress since " + (*record)->startedAt +
                    "); the controller counts it as updated once it carries the new revision; "
                    "to roll it natively instead: " +
                    statefulset::AbortCommand(*set)};
}

std::string RenderAnswer(const Answer& answer) {
  return std::string(answer.hold ? kHold : kRelease) + "\n" + answer.reason;
}

std::optional<Answer> ParseAnswer(std::string_view body) {
  const std::size_t nl = body.find('\n');
  const std::string_view word = body.substr(0, nl);
  std::string reason(nl == std::string_view::npos ? std::string_view{} : body.substr(nl + 1));
  if (word == kHold) return Answer{true, std::move(reason)};
  if (word == kRelease) return Answer{false, std::move(reason)};
  return std::nullopt;
}

}  // namespace iw::statefulset_hold
