#include "hooks/admission.h"

#include <cstddef>
#include <ctime>

#include "hooks/json_patch.h"
#include "hooks/kube_api.h"

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

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  const int year = tm.tm_year + 1900;
  if (year < 0 || year > 9999) {  // strftime writes such years with other widths
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
  std::string out = "0000-00-00T00:00:00Z";
  auto put = [&out](std::size_t end, int value) {  // right-aligned digits ending before `end`
    for (std::size_t i = end; value > 0; value /= 10)
      out[--i] = static_cast<char>('0' + value % 10);
  };
  put(4, year);
  put(7, tm.tm_mon + 1);
  put(10, tm.tm_mday);
  put(13, tm.tm_hour);
  put(16, tm.tm_min);
  put(19, tm.tm_sec);
  return out;
}

}  // namespace iw::admission
