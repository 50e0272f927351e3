#include "server/kube/error_result.h"

#include "server/kube/text_util.h"

namespace iw::kube {

std::string ReasonForCode(int code) {
  std::string_view known = kube::StatusReason(code);
  return std::string(known.empty() ? "Unknown" : known);
}

Result ErrorResult(int code, std::string_view body) {
  Result r;
  r.code = code;
  json::Document d;
  if (!body.empty() && json::ParseUntrusted(body, d).ok() && d.IsObject() &&
      json::StringOr(&d, "kind") == "Status") {
    r.reason = std::string(json::StringOr(&d, "reason"));
    r.message = std::string(json::StringOr(&d, "message"));
    r.object.Swap(d);
  }
  if (r.reason.empty()) r.reason = ReasonForCode(code);
  if (r.message.empty()) {
    std::string text = Trim(body.substr(0, 512));
    r.message = text.empty() ? "the server responded with the status code " + std::to_string(code) +
                                   " but did not return more information"
                             : text;
  }
  return r;
}

}  // namespace iw::kube
