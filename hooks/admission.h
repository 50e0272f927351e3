// The typed view of an AdmissionReview request, the response a handler returns, and the helpers
// that make a handler's intent obvious (after controller-runtime's pkg/webhook/admission).
// Handlers are pure: a function of the request and a Context, no I/O.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/resize_support.h"
#include "hooks/statefulset_hold.h"
#include "lib/json.h"
#include "lib/status.h"

namespace iw::admission {

enum class Operation { kCreate, kUpdate, kDelete, kConnect };

struct GroupVersionKind {
  std::string group, version, kind;
};

struct Request {
  std::string uid;
  GroupVersionKind kind;
  std::string resource;     // e.g. "deployments"
  std::string subResource;  // "" unless e.g. "status", "scale"
  std::string name;         // may be empty (generateName)
  std::string namespaceName;
  Operation operation = Operation::kCreate;
  std::string username;
  std::vector<std::string> groups;
  const json::Value* object = nullptr;     // nullptr when null or absent
  const json::Value* oldObject = nullptr;  // nullptr when null or absent
  bool dryRun = false;
  // Memory for the handler's scratch documents (json::Document d(req.scratch)), released after
  // the response is encoded; nullptr: each document has its own.
  json::Allocator* scratch = nullptr;
};

struct Response {
  bool allowed = true;
  int code = 200;
  std::string reason;   // metav1.StatusReason, e.g. "Forbidden", "BadRequest"
  std::string message;  // shown to the user on denial
  std::string patch;    // serialised JSON Patch array, empty when nothing changes
  std::vector<std::string> warnings;
  bool handlerError = false;  // set by Errored(500, ...): counted as a handler error
};

// What a handler may know besides the request.
struct Context {
  std::string controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
  // Whose pod DELETEs the StatefulSet hold judges (--statefulset-controller-user).
  std::string statefulSetControllerUser =
      "system:serviceaccount:kube-system:statefulset-controller";
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
  // A loop is known to be alive: this process leads (or runs the loop without election), or it saw
  // the leader Lease renewed within the renew deadline. Only then does the pod mutator inject the
  // readiness gate, so that no pod waits on a condition nothing will set (DESIGN.md §8.6).
  bool loopAlive = false;
  // What the API server allows of container resources on running pods (--pod-resize): without
  // pods/resize a resources change takes the native rollout.
  resize_support::Support resize;
  // The loop's answer on a StatefulSet pod's DELETE (DESIGN.md §4.8: the controller's /holdz, or
  // the loop in this process); nullopt: no answer (the DELETE goes through). Unset: never asked.
  std::function<std::optional<statefulset_hold::Answer>(const statefulset_hold::PodFacts&)> askHold;
};

using Handler = std::function<Response(const Request&, const Context&)>;

// A request's objects as views (`View`: kube::Deployment, kube::ObjectView, ...): `object`, and
// `old` for an UPDATE.
template <class View>
struct RequestObjects {
  std::optional<View> object;
  std::optional<View> old;
};

// The request's objects through View::From (their shape check); a handler answers a failure with
// Errored(400).
template <class View>
StatusOr<RequestObjects<View>> ReadObjects(const Request& req) {
  if (req.object == nullptr) return Status::InvalidArgument("request.object is missing");
  RequestObjects<View> out;
  StatusOr<View> object = View::From(*req.object, "request.object");
  if (!object.ok()) return object.status();
  out.object = *object;
  if (req.operation != Operation::kUpdate) return out;
  if (req.oldObject == nullptr) {
    return Status::InvalidArgument("request.oldObject is missing for UPDATE");
  }
  StatusOr<View> old = View::From(*req.oldObject, "request.oldObject");
  if (!old.ok()) return old.status();
  out.old = *old;
  return out;
}

Response Allowed(std::string message = {});
// Denial for a policy reason: code 403, reason Forbidden.
Response Denied(std::string message);
// Denial because the request cannot be judged (code 400 BadRequest, 500 InternalError, ...).
Response Errored(int code, std::string message);
// The Status reason of a failure answered with HTTP `code`: kube::StatusReason, else BadRequest
// (4xx) or InternalError (5xx).
std::string_view FailureReason(int code);
// Allowed with the JSON Patch that turns `original` into `mutated` (no patch when they are equal).
Response Patched(const json::Value& original, const json::Value& mutated,
                 std::vector<std::string> warnings = {});
// As Patched, for a handler that changes only the subtree at JSON Pointer `at` (e.g. "/metadata")
// of the request object: `original` and `mutated` are that subtree before and after, so only it
// is copied and diffed; every operation's path starts with `at`.
Response PatchedAt(std::string_view at, const json::Value& original, const json::Value& mutated,
                   std::vector<std::string> warnings = {});

// One route of the webhook: path, whether it may patch, and its handler.
struct Route {
  std::string_view path;
  bool mutating;
  Handler handler;
};

// The routes the server serves, in a fixed order.
const std::vector<Route>& Routes();
const Route* FindRoute(std::string_view path);
// The routes' paths, comma-separated, for messages and help texts.
std::string RoutePaths();

}  // namespace iw::admission
