#include "hooks/workload_admission.h"

#include <type_traits>

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"
#include "hooks/progress.h"
#include "hooks/statefulset_rules.h"

namespace iw::admission {

namespace {

using rules::Decision;

// Requests a workload webhook never judges: subresources (scale, status), the controller's own
// writes (DESIGN.md §4a "Who is exempt"), and operations other than UPDATE (and CREATE when
// `includeCreate`).
bool Exempt(const Request& req, const Context& ctx, bool includeCreate) {
  if (!req.subResource.empty()) return true;
  if (req.username == ctx.controllerUser) return true;
  if (req.operation == Operation::kUpdate) return false;
  return !(includeCreate && req.operation == Operation::kCreate);
}

// A workload being deleted (deletionTimestamp set) passes whatever changes on it: that is the
// deletion's own bookkeeping (the garbage collector removing the foregroundDeletion finalizer, a
// controller removing its finalizer, a metadata edit), and admission must never stand in the way of
// a deletion, whatever the object's settings; there is nothing to start or to hold on a workload
// that is going away.

std::string AbortCommand(const kube::Deployment& object) {
  return deployment::AbortCommand(object);
}
std::string AbortCommand(const kube::StatefulSet& object) {
  return statefulset::AbortCommand(object);
}

// The user-facing reason why `object` is not a fixed point of `d`. A Deployment's decision also
// holds spec.paused; a StatefulSet's holds no field.
template <class View>
std::string DenialMessage(const Decision& d, const View& object) {
  constexpr bool kPaused = std::is_same_v<View, kube::Deployment>;
  const std::string abort = std::string("to stop the in-place update and let the ") +
                            (kPaused ? "normal rollout" : "rolling update") +
                            " run: " + AbortCommand(object);
  const std::string key(keys::kInProgressAnnotation);
  switch (d.action) {
    case Decision::Action::kNone:
      return key + " is written by inplace-webhook only and no in-place update is running: " +
             "remove it";
    case Decision::Action::kStart:
      return "this template change is an in-place update, but " +
             (kPaused ? "spec.paused=true and " + key + " were" : key + " was") +
             " not set by the mutating webhook (/mutate/" +
             (kPaused ? "deployments" : "statefulsets") + "): retry the write, or remove label " +
             std::string(keys::kEnabledLabel) + " for a " +
             (kPaused ? "normal rollout" : "rolling update");
    case Decision::Action::kEnd:
      return "this change ends the in-place update, so the mutating webhook removes " + key +
             (d.paused ? " and restores spec.paused=false" : "") + ": retry the write, or " + abort;
    case Decision::Action::kKeep:
    case Decision::Action::kRetarget:
      if constexpr (kPaused) {
        if (d.paused && object.paused() != *d.paused) {
          return "spec.paused must stay true while an in-place update is running (" + key + "); " +
                 abort;
        }
      }
      return key + " is managed by inplace-webhook while an in-place update is running and " +
             "cannot be edited; " + abort;
    case Decision::Action::kIgnore:
      break;
  }
  return "not a fixed point of the in-place decision: " + d.reason;
}

// A template that declares the readiness gate itself gives it to pods created when nothing of ours
// runs (after an uninstall), which then never become Ready: accepted, with a warning.
template <class View>
std::vector<std::string> TemplateGateWarnings(const View& object) {
  if (!rules::IsOptedIn(object) || !object.podTemplate().hasReadinessGate(keys::kReadyCondition)) {
    return {};
  }
  return {"template declares readiness gate " + std::string(keys::kReadyCondition) +
          ": the webhook adds it; if uninstalled, new pods never get Ready"};
}

// The pod state keys of ours the template gives its pods (ForgedStateKeys), unless the old
// template gave the same ones (a workload stored before this check is not blocked).
template <class View>
std::string NewForgedTemplateKeys(const View& object, const std::optional<View>& old) {
  std::string forged = rules::ForgedStateKeys(object.podTemplate());
  if (forged.empty() || !old) return forged;
  if (rules::ForgedStateKeys(old->podTemplate()) == forged) return "";
  return forged;
}

rules::Facts FactsOf(const Context& ctx) {
  return {ctx.now, ctx.loopAlive, ctx.resize};
}

Decision DecideFor(const kube::Deployment& old, const kube::Deployment& object,
                   const rules::Facts& facts) {
  return deployment::Decide(old, object, facts);
}
Decision DecideFor(const kube::StatefulSet& old, const kube::StatefulSet& object,
                   const rules::Facts& facts) {
  return statefulset::Decide(old, object, facts);
}
bool ConformsTo(const Decision& d, const kube::Deployment& object) {
  return deployment::Conforms(d, object);
}
bool ConformsTo(const Decision& d, const kube::StatefulSet& object) {
  return statefulset::Conforms(d, object);
}

template <class View>
Response Mutate(const Request& req, const Context& ctx) {
  if (Exempt(req, ctx, /*includeCreate=*/false)) return Allowed();
  StatusOr<RequestObjects<View>> read = ReadObjects<View>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  if (read->object->deleting()) return Allowed();
  Decision d = DecideFor(*read->old, *read->object, FactsOf(ctx));
  if (d.action == Decision::Action::kIgnore) return Allowed();
  json::Document mutated(req.scratch);
  static_cast<json::Value&>(mutated) =
      rules::CopyForApply(*req.object, mutated.GetAllocator());  // moves
  rules::Apply(d, mutated, mutated.GetAllocator());
  return Patched(*req.object, mutated, std::move(d.warnings));
}

template <class View>
Response Validate(const Request& req, const Context& ctx) {
  if (Exempt(req, ctx, /*includeCreate=*/true)) return Allowed();
  StatusOr<RequestObjects<View>> read = ReadObjects<View>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  const View& object = *read->object;
  if (object.deleting()) return Allowed();
  // The lifecycle/policy annotations parse (opted-in objects). Drain (markPodNotReady, a grace
  // period) needs no readiness gate in the template: the pod webhook adds it to new pods.
  if (rules::IsOptedIn(object)) {
    if (Status s = lifecycle::ReadSettings(object).status(); !s.ok()) return Denied(s.message());
    if constexpr (std::is_same_v<View, kube::StatefulSet>) {
      if (Status s = progress::ProgressDeadline(object).status(); !s.ok()) {
        return Denied(s.message());
      }
    }
  }
  if (const std::string forged = NewForgedTemplateKeys(object, read->old); !forged.empty()) {
    return Denied("the pod template carries " + forged +
                  ", which the inplace-webhook controller alone writes on pods: remove it");
  }
  auto allowed = [&object] {
    Response r = Allowed();
    r.warnings = TemplateGateWarnings(object);
    return r;
  };
  if (req.operation == Operation::kCreate) {
    if (rules::IsOptedIn(object) && object.annotation(keys::kInProgressAnnotation)) {
      return Denied(std::string(keys::kInProgressAnnotation) + " is written by inplace-webhook " +
                    "only: create the " + req.kind.kind + " without it");
    }
    return allowed();
  }
  Decision d = DecideFor(*read->old, object, FactsOf(ctx));
  if (ConformsTo(d, object)) return allowed();
  return Denied(DenialMessage(d, object));
}

}  // namespace

Response MutateDeployment(const Request& req, const Context& ctx) {
  return Mutate<kube::Deployment>(req, ctx);
}
Response ValidateDeployment(const Request& req, const Context& ctx) {
  return Validate<kube::Deployment>(req, ctx);
}
Response MutateStatefulSet(const Request& req, const Context& ctx) {
  return Mutate<kube::StatefulSet>(req, ctx);
}
Response ValidateStatefulSet(const Request& req, const Context& ctx) {
  return Validate<kube::StatefulSet>(req, ctx);
}

}  // namespace iw::admission
