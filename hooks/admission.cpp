#include "hooks/admission.h"

#include <cstddef>
#include <ctime>

#include "hooks/kube_api.h"
#include "lib/json_patch.h"

namespace iw::admission {

Response Allowed(std::string message) {
  Response r;
  r.message = std::move(message);
  return r;
}

Response Denied(std::string message) {
  Response r;
  r.allowed = false;
  r.code = 403;
  r.reason = "Forbidden";
  r.message = std::move(message);
  return r;
}

std::string_view FailureReason(int code) {
  std::string_view known = kube::StatusReason(code);
  if (!known.empty()) return known;
  return code >= 500 ? "InternalError" : "BadRequest";
}

Response Errored(int code, std::string message) {
  Response r;
  r.allowed = false;
  r.code = code;
  r.reason = FailureReason(code);
  r.handlerError = code >= 500;
  r.message = std::move(message);
  return r;
}

Response Patched(const json::Value& original, const json::Value& mutated,
                 std::vector<std::string> warnings) {
  return PatchedAt("", original, mutated, std::move(warnings));
}

Response PatchedAt(std::string_view at, const json::Value& original, const json::Value& mutated,
                   std::vector<std::string> warnings) {
  Response r;
  r.warnings = std::move(warnings);
  // A patch is a few operations: a buffer on the stack holds them, the pool grows if need be.
  alignas(std::max_align_t) char buffer[4096];
  json::Allocator alloc(buffer, sizeof buffer);
  json::Value ops = json_patch::Diff(original, mutated, alloc);
  if (ops.Empty()) return r;
  if (!at.empty()) {
    std::string path;
    for (json::Value& op : ops.GetArray()) {
      json::Value& p = op["path"];
      path.assign(at);
      path += json::View(p);
      p.SetString(path.data(), static_cast<rapidjson::SizeType>(path.size()), alloc);
    }
  }
  r.patch = json::Serialize(ops);
  return r;
}

}  // namespace iw::admission
