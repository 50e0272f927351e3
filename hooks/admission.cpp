#include "hooks/admission.h"

#include <ctime>

#include "hooks/json_patch.h"

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

Response Errored(int code, std::string message) {
  Response r;
  r.allowed = false;
  r.code = code;
  switch (code) {
    case 400:
      r.reason = "BadRequest";
      break;
    case 413:
      r.reason = "RequestEntityTooLarge";
      break;
    case 415:
      r.reason = "UnsupportedMediaType";
      break;
    case 422:
      r.reason = "Invalid";
      break;
    default:
      r.reason = code >= 500 ? "InternalError" : "BadRequest";
      break;
  }
  r.handlerError = code >= 500;
  r.message = std::move(message);
  return r;
}

Response Patched(const json::Value& original, const json::Value& mutated,
                 std::vector<std::string> warnings) {
  Response r;
  r.warnings = std::move(warnings);
  json::Document scratch;
  json::Value ops = json_patch::Diff(original, mutated, scratch.GetAllocator());
  if (ops.IsArray() && !ops.Empty()) r.patch = json::Serialize(ops);
  return r;
}

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace iw::admission
