#include "hooks/deployment_admission.h"

#include "hooks/deployment_rules.h"
#include "hooks/keys.h"
#include "hooks/lifecycle.h"

namespace iw::admission {

namespace {

using deployment::Decision;

// Requests a Deployment webhook never judges: subresources (scale, status), the controller's own
// writes (DESIGN.md §4a "Who is exempt"), and operations other than UPDATE (and CREATE when
// `includeCreate`).
bool Exempt(const Request& req, const Context& ctx, bool includeCreate) {
  if (!req.subResource.empty()) return true;
  if (req.username == ctx.controllerUser) return true;
  if (req.operation == Operation::kUpdate) return false;
  return !(includeCreate && req.operation == Operation::kCreate);
}

using Deployments = RequestObjects<kube::Deployment>;

// A Deployment being deleted (deletionTimestamp set) passes whatever changes on it: that is the
// deletion's own bookkeeping (the garbage collector removing the foregroundDeletion finalizer, a
// controller removing its finalizer, a metadata edit), and admission must never stand in the way of
// a deletion, whatever the object's settings; there is nothing to start or to hold on a Deployment
// that is going away.

// The user-facing reason why `object` is not a fixed point of `d`.
std::string DenialMessage(const Decision& d, const kube::Deployment& object) {
  const std::string abort = "to stop the in-place update and let the normal rollout run: " +
                            deployment::AbortCommand(object);
  const std::string key(keys::kInProgressAnnotation);
  switch (d.action) {
    case Decision::Action::kNone:
      return key + " is written by inplace-webhook only and no in-place update is running: " +
             "remove it";
    case Decision::Action::kStart:
      return "this template change is an in-place update, but spec.paused=true and " + key +
             " were not set by the mutating webhook (/mutate/deployments): retry the write, or " +
             "remove label " + std::string(keys::kEnabledLabel) + " for a normal rollout";
    case Decision::Action::kEnd:
      return "this change ends the in-place update, so the mutating webhook removes " + key +
             (d.paused ? " and restores spec.paused=false" : "") + ": retry the write, or " + abort;
    case Decision::Action::kKeep:
    case Decision::Action::kRetarget:
      if (d.paused && object.paused() != *d.paused) {
        return "spec.paused must stay true while an in-place update is running (" + key + "); " +
               abort;
      }
      return key + " is managed by inplace-webhook while an in-place update is running and " +
             "cannot be edited; " + abort;
    case Decision::Action::kIgnore:
      break;
  }
  return "not a fixed point of the in-place decision: " + d.reason;
}

// The lifecycle/policy annotations parse (opted-in objects). Drain (markPodNotReady, a grace
// period) needs no readiness gate in the template: the pod webhook adds it to new pods.
Status CheckSettings(const kube::Deployment& object) {
  return lifecycle::ReadSettings(object).status();
}

// A template that declares the readiness gate itself gives it to pods created when nothing of ours
// runs (after an uninstall), which then never become Ready: accepted, with a warning.
std::vector<std::string> TemplateGateWarnings(const kube::Deployment& object) {
  if (!deployment::IsOptedIn(object) || !deployment::HasReadinessGate(object)) return {};
  return {"template declares readiness gate " + std::string(keys::kReadyCondition) +
          ": the webhook adds it; if uninstalled, new pods never get Ready"};
}

// The pod state keys of ours the template gives its pods (ForgedStateKeys), unless the old
// template gave the same ones (a Deployment stored before this check is not blocked).
std::string NewForgedTemplateKeys(const kube::Deployment& object,
                                  const std::optional<kube::Deployment>& old) {
  std::string forged = deployment::ForgedStateKeys(object.podTemplate());
  if (forged.empty() || !old) return forged;
  if (deployment::ForgedStateKeys(old->podTemplate()) == forged) return "";
  return forged;
}

deployment::Facts FactsOf(const Context& ctx) {
  return {ctx.now, ctx.loopAlive, ctx.resize};
}

}  // namespace

Response MutateDeployment(const Request& req, const Context& ctx) {
  if (Exempt(req, ctx, /*includeCreate=*/false)) return Allowed();
  StatusOr<Deployments> read = ReadObjects<kube::Deployment>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  if (read->object->deleting()) return Allowed();
  Decision d = deployment::Decide(*read->old, *read->object, FactsOf(ctx));
  if (d.action == Decision::Action::kIgnore) return Allowed();
  json::Document mutated(req.scratch);
  static_cast<json::Value&>(mutated) =
      json::CopySharingStrings(*req.object, mutated.GetAllocator());  // moves
  deployment::Apply(d, mutated, mutated.GetAllocator());
  return Patched(*req.object, mutated, std::move(d.warnings));
}

Response ValidateDeployment(const Request& req, const Context& ctx) {
  if (Exempt(req, ctx, /*includeCreate=*/true)) return Allowed();
  StatusOr<Deployments> read = ReadObjects<kube::Deployment>(req);
  if (!read.ok()) return Errored(400, read.status().message());
  const kube::Deployment& object = *read->object;
  if (object.deleting()) return Allowed();
  if (deployment::IsOptedIn(object)) {
    if (Status s = CheckSettings(object); !s.ok()) return Denied(s.message());
  }
  if (const std::string forged = NewForgedTemplateKeys(object, read->old); !forged.empty()) {
    return Denied("the pod template carries " + forged +
                  ", which the inplace-webhook controller alone writes on pods: remove it");
  }
  auto allowed = [&read] {
    Response r = Allowed();
    r.warnings = TemplateGateWarnings(*read->object);
    return r;
  };
  if (req.operation == Operation::kCreate) {
    if (deployment::IsOptedIn(object) && object.annotation(keys::kInProgressAnnotation)) {
      return Denied(std::string(keys::kInProgressAnnotation) +
                    " is written by inplace-webhook only: create the Deployment without it");
    }
    return allowed();
  }
  Decision d = deployment::Decide(*read->old, *read->object, FactsOf(ctx));
  if (deployment::Conforms(d, *read->object)) return allowed();
  return Denied(DenialMessage(d, *read->object));
}

}  // namespace iw::admission
