#include "plugin/explain.h"

#include <climits>
#include <cstdint>

#include "hooks/deployment_rules.h"
#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "hooks/rollout_plan.h"
#include "hooks/statefulset_rules.h"
#include "lib/kube_objects.h"
#include "plugin/status_report.h"

namespace iw::plugin {
namespace {

using json::Value;

// The Deployment as a user's write would carry it, with `podTemplate` (if given) as its template
// and none of the update's bookkeeping or commands; `caughtUp` sets the status the controller
// leaves after a finished rollout (the start of an update asks for it).
json::Document AsWritten(const Value& deployment, const kube::PodTemplate* podTemplate,
                         bool caughtUp) {
  json::Document out;
  out.CopyFrom(deployment, out.GetAllocator());
  auto& a = out.GetAllocator();
  if (Value* ann = json::FindMutable(json::FindMutable(&out, "metadata"), "annotations")) {
    for (std::string_view k : {keys::kInProgressAnnotation, keys::kAbortAnnotation,
                               keys::kPauseAnnotation, keys::kUndoAnnotation}) {
      json::Remove(*ann, k);
    }
  }
  Value& spec = json::EnsureObject(out, "spec", a);
  if (podTemplate != nullptr) {
    json::Set(spec, "template", podTemplate->json(), a);
    if (Value* labels = json::FindMutable(
            json::FindMutable(json::FindMutable(&spec, "template"), "metadata"), "labels")) {
      json::Remove(*labels, keys::kPodTemplateHashLabel);
    }
  }
  json::Remove(spec, "paused");
  if (caughtUp) {
    Value& meta = json::EnsureObject(out, "metadata", a);
    json::Remove(meta, "generation");
    meta.AddMember("generation", 1, a);
    int64_t replicas = 1;
    if (const Value* r = json::Find(&spec, "replicas"); r != nullptr && r->IsInt64()) {
      replicas = r->GetInt64();
    }
    Value status(rapidjson::kObjectType);
    status.AddMember("observedGeneration", 1, a);
    status.AddMember("replicas", Value(replicas), a);
    status.AddMember("updatedReplicas", Value(replicas), a);
    json::Remove(out, "status");
    out.AddMember("status", status, a);
  }
  return out;
}

// The StatefulSet as a user's write would carry it, with `podTemplate` (if given) as its template
// and none of the update's bookkeeping or commands; `caughtUpAt` (if not empty) sets the status
// its controller leaves once every pod is at that revision (the start of an update asks for it).
json::Document StatefulSetAsWritten(const Value& statefulSet, const kube::PodTemplate* podTemplate,
                                    std::string_view caughtUpAt) {
  json::Document out;
  out.CopyFrom(statefulSet, out.GetAllocator());
  auto& a = out.GetAllocator();
  if (Value* ann = json::FindMutable(json::FindMutable(&out, "metadata"), "annotations")) {
    for (std::string_view k :
         {keys::kInProgressAnnotation, keys::kAbortAnnotation, keys::kPauseAnnotation,
          keys::kUndoAnnotation, keys::kProgressAnnotation}) {
      json::Remove(*ann, k);
    }
  }
  Value& spec = json::EnsureObject(out, "spec", a);
  if (podTemplate != nullptr) json::Set(spec, "template", podTemplate->json(), a);
  if (!caughtUpAt.empty()) {
    int64_t generation = 0;
    if (const Value* g = json::Path(&out, {"metadata", "generation"});
        g != nullptr && g->IsInt64()) {
      generation = g->GetInt64();
    }
    int64_t replicas = 1;
    if (const Value* r = json::Find(&spec, "replicas"); r != nullptr && r->IsInt64()) {
      replicas = r->GetInt64();
    }
    Value status(rapidjson::kObjectType);
    status.AddMember("observedGeneration", Value(generation), a);
    for (const char* counter :
         {"replicas", "readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"}) {
      status.AddMember(Value(counter, a), Value(replicas), a);
    }
    json::SetString(status, "currentRevision", caughtUpAt, a);
    json::SetString(status, "updateRevision", caughtUpAt, a);
    json::Remove(out, "status");
    out.AddMember("status", status, a);
  }
  return out;
}

// What the webhook's decision `d` on the change and the comparison `r` of its two templates say.
void Conclude(Explanation& e, const rules::Decision& d, const eligibility::Result& r) {
  e.decisionReason = d.reason;
  e.warnings = d.warnings;
  using Action = rules::Decision::Action;
  if (d.action == Action::kIgnore) {
    e.kind = Explanation::Kind::kNotOptedIn;
  } else if (d.action == Action::kStart) {
    e.kind = Explanation::Kind::kInPlace;
    e.plan = r.plan;
  } else if (r.verdict == eligibility::Verdict::kNoChange) {
    e.kind = Explanation::Kind::kNoChange;
  } else {
    e.kind = Explanation::Kind::kNative;
    if (r.verdict == eligibility::Verdict::kNotEligible) {
      e.blockingPath = r.blockingPath;
      e.reason = r.reason;
      e.podApiRefuses = r.podApiRefuses;
    }
  }
}

// A ControllerRevision's .revision; -1 when absent.
long long RevisionNumber(const Value& controllerRevision) {
  const Value* r = json::Find(&controllerRevision, "revision");
  return r != nullptr && r->IsInt64() ? r->GetInt64() : -1;
}

}  // namespace

StatusOr<Explanation> Explain(const json::Value& deployment, const json::Value& replicaSets,
                              const resize_support::Support& resize) {
  StatusOr<kube::Deployment> dv = kube::Deployment::From(deployment, "deployment");
  if (!dv.ok()) return dv.status();
  Explanation e;
  e.name = dv->name();
  if (!deployment::IsOptedIn(*dv)) {
    e.kind = Explanation::Kind::kNotOptedIn;
    return e;
  }
  const int current = dv->revision();
  const std::string currentHash = TemplateHash(dv->podTemplate());
  std::optional<InProgress> record =
      ParseInProgressOrNone(dv->annotation(keys::kInProgressAnnotation));
  std::optional<kube::PodTemplate> earlier;
  int earlierRevision = -1;
  const Value* items = json::Find(&replicaSets, "items");
  if (items != nullptr && items->IsArray()) {
    for (const Value& item : items->GetArray()) {
      if (kube::ControllerNameOf(item, "Deployment") != dv->name()) continue;
      StatusOr<kube::ReplicaSet> rs = kube::ReplicaSet::From(item, "replicaSet");
      if (!rs.ok()) return rs.status();
      const int rev = rs->revision();
      if (record) {
        if (TemplateHash(rs->podTemplate()) == record->from && rev > earlierRevision) {
          earlier = rs->podTemplate();
          earlierRevision = rev;
        }
      } else if (rev < current && rev > earlierRevision) {
        earlier = rs->podTemplate();
        earlierRevision = rev;
      }
    }
  }
  e.to = "revision " + std::to_string(current) + " (current, template " + currentHash + ")";
  if (!earlier) {
    e.kind = Explanation::Kind::kNoHistory;
    return e;
  }
  e.from = record ? "template " + record->from + " (where the running update started)"
                  : "revision " + std::to_string(earlierRevision) + " (template " +
                        TemplateHash(*earlier) + ")";

  json::Document oldD = AsWritten(deployment, &*earlier, true);
  json::Document newD = AsWritten(deployment, nullptr, false);
  const deployment::Facts facts{std::chrono::system_clock::now(), /*loopAlive=*/true, resize};
  StatusOr<kube::Deployment> oldView = kube::Deployment::From(oldD, "deployment");
  StatusOr<kube::Deployment> newView = kube::Deployment::From(newD, "deployment");
  if (!oldView.ok()) return oldView.status();
  if (!newView.ok()) return newView.status();
  const deployment::Decision d = deployment::Decide(*oldView, *newView, facts);
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(*dv);
  lifecycle::Policy policy = settings.ok() ? settings->policy : lifecycle::Policy{};
  Conclude(e, d, eligibility::CompareDeployments(*oldView, *newView, policy, resize));
  return e;
}

StatusOr<Explanation> ExplainStatefulSet(const json::Value& statefulSet,
                                         const json::Value& controllerRevisions,
                                         const resize_support::Support& resize) {
  StatusOr<kube::StatefulSet> sv = kube::StatefulSet::From(statefulSet, "statefulSet");
  if (!sv.ok()) return sv.status();
  const kube::StatefulSet& set = *sv;
  Explanation e;
  e.workload = WorkloadKind::kStatefulSet;
  e.name = set.name();
  if (!rules::IsOptedIn(set)) {
    e.kind = Explanation::Kind::kNotOptedIn;
    return e;
  }
  const std::string currentHash = TemplateHash(set.podTemplate());
  const std::optional<InProgress> record =
      ParseInProgressOrNone(set.annotation(keys::kInProgressAnnotation));
  // The revisions it controls (by uid; by name when the read shows no uid).
  std::vector<const Value*> owned;
  if (const Value* items = json::Find(&controllerRevisions, "items");
      items != nullptr && items->IsArray()) {
    for (const Value& item : items->GetArray()) {
      StatusOr<kube::ObjectView> cr = kube::ObjectView::From(item, "controllerRevision");
      if (!cr.ok()) return cr.status();
      const bool ours = set.uid().empty()
                            ? kube::ControllerNameOf(item, "StatefulSet") == set.name()
                            : cr->controllerUid() == set.uid();
      if (ours) owned.push_back(&item);
    }
  }
  // The update revision's number; unknown (not listed): every revision is earlier.
  long long current = -1;
  for (const Value* cr : owned) {
    if (kube::MetaOf(*cr, "name") == set.updateRevision()) current = RevisionNumber(*cr);
  }
  e.to = (current >= 0 ? "revision " + std::to_string(current) + " (current, template "
                       : std::string("the current template (")) +
         currentHash + ")";
  const Value* earlier = nullptr;
  long long earlierRevision = -1;
  std::optional<json::Document> earlierDoc;
  for (const Value* cr : owned) {
    const long long rev = RevisionNumber(*cr);
    if (kube::MetaOf(*cr, "name") == set.updateRevision() || rev <= earlierRevision) continue;
    if (current >= 0 && rev >= current) continue;
    std::optional<json::Document> doc = rollout::RevisionTemplate(*cr);
    if (!doc) continue;
    if (record) {
      // Where the pods started: the revision holding the record's `from` (the current one).
      StatusOr<kube::PodTemplate> t = kube::PodTemplate::From(*doc, "template");
      if (!t.ok() || TemplateHash(*t) != record->from) continue;
    }
    earlier = cr;
    earlierRevision = rev;
    earlierDoc = std::move(doc);
  }
  if (earlier == nullptr) {
    e.kind = Explanation::Kind::kNoHistory;
    return e;
  }
  StatusOr<kube::PodTemplate> earlierTemplate = kube::PodTemplate::From(
      *earlierDoc, "controllerRevision " + std::string(kube::MetaOf(*earlier, "name")));
  if (!earlierTemplate.ok()) return earlierTemplate.status();
  e.from = record ? "template " + record->from + " (where the running update started, revision " +
                        std::to_string(earlierRevision) + ")"
                  : "revision " + std::to_string(earlierRevision) + " (template " +
                        TemplateHash(*earlierTemplate) + ")";

  json::Document oldS =
      StatefulSetAsWritten(statefulSet, &*earlierTemplate, kube::MetaOf(*earlier, "name"));
  json::Document newS = StatefulSetAsWritten(statefulSet, nullptr, "");
  StatusOr<kube::StatefulSet> oldView = kube::StatefulSet::From(oldS, "statefulSet");
  StatusOr<kube::StatefulSet> newView = kube::StatefulSet::From(newS, "statefulSet");
  if (!oldView.ok()) return oldView.status();
  if (!newView.ok()) return newView.status();
  const rules::Facts facts{std::chrono::system_clock::now(), /*loopAlive=*/true, resize};
  const rules::Decision d = statefulset::Decide(*oldView, *newView, facts);
  StatusOr<lifecycle::Settings> settings = lifecycle::ReadSettings(set);
  const lifecycle::Policy policy = settings.ok() ? settings->policy : lifecycle::Policy{};
  const kube::PodTemplate oldT = oldView->podTemplate();
  const kube::PodTemplate newT = newView->podTemplate();
  Conclude(e, d, eligibility::CompareTemplates(&oldT, &newT, policy, resize));
  return e;
}

std::string RenderExplanation(const Explanation& e) {
  const std::string ref = RefOf(e.workload, e.name);
  using Kind = Explanation::Kind;
  switch (e.kind) {
    case Kind::kNotOptedIn:
      return ref + ": not opted in (label inplace-webhook.io/enabled=true on the " +
             std::string(KindName(e.workload)) +
             " and its pod template): every change is a native rollout\n";
    case Kind::kNoHistory:
      return ref + ": no earlier template to compare " + e.to + " with\n";
    case Kind::kNoChange:
      return ref + ": the template of " + e.from + " equals " + e.to + ": nothing to update\n";
    default:
      break;
  }
  std::string out = ref + ": the last template change, " + e.from + " -> " + e.to + ",\n";
  if (e.kind == Kind::kInPlace) {
    out += "  is made IN PLACE:\n";
    for (const auto& [c, image] : e.plan.images) out += "    image of " + c + " -> " + image + "\n";
    for (const auto& [c, res] : e.plan.resources) {
      std::string parts;
      for (const auto& [kind, values] :
           {std::pair{"requests", &res.requests}, {"limits", &res.limits}}) {
        for (const auto& [name, q] : *values) {
          parts += std::string(parts.empty() ? "" : ", ") + kind + "." + name + "=" + q;
        }
      }
      out +=
          "    resources of " + c + " -> " + (parts.empty() ? "none" : parts) + " (pods/resize)\n";
    }
    for (const auto& [k, v] : e.plan.labels) {
      out += "    label " + k + (v ? " -> " + *v : std::string(" removed")) + "\n";
    }
    for (const auto& [k, v] : e.plan.annotations) {
      out += "    annotation " + k + (v ? " -> " + *v : std::string(" removed")) + "\n";
    }
  } else {
    out += "  is NOT made in place: a native rollout replaces the pods\n";
    if (!e.blockingPath.empty()) out += "    blocking path: " + e.blockingPath + "\n";
    if (!e.reason.empty()) out += "    why: " + e.reason + "\n";
    if (!e.podApiRefuses.empty()) {
      out += "    the pod API refuses to change " + e.podApiRefuses + " on a running pod\n";
    }
  }
  out += "  webhook: " + e.decisionReason + "\n";
  for (const std::string& w : e.warnings) out += "  Warning: " + w + "\n";
  return out;
}

}  // namespace iw::plugin
