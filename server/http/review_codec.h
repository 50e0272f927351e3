// The AdmissionReview codec: HTTP body in, HTTP reply out, for one route. Used by the HTTPS
// server and by `inplace-webhook review`, so both answer with the same code path.
//
// Errors are answered in two ways (README "Bad input"):
//  - when no AdmissionReview can be decoded (empty body, not JSON, wrong Content-Type, no
//    request or uid, unsupported version), a plain HTTP 4xx with a metav1.Status body: no
//    review exists to answer, so the API server treats the call as failed (failurePolicy);
//  - once the uid is known, every other problem (a malformed object, a handler error) is an
//    HTTP 200 review with allowed:false and status.code 400/500, which denies the request
//    whatever the failurePolicy.
#pragma once

#include <string>
#include <string_view>

#include "hooks/admission.h"

namespace iw::review {

struct Reply {
  int httpStatus = 200;
  std::string body;
  // For logs and metrics.
  bool decided = false;  // an AdmissionReview response was produced
  bool allowed = false;
  bool patched = false;
  bool handlerError = false;
  bool tooManyValues = false;  // 413: the body has more JSON values than json::kMaxValues
  std::string uid;
  std::string message;
};

// Answers one POST to `route`.
Reply Answer(const admission::Route& route, std::string_view body, std::string_view contentType,
             const admission::Context& ctx);

// A plain HTTP error with a metav1.Status body.
Reply PlainError(int httpStatus, std::string_view message);

// Whether `contentType` is application/json (parameters such as charset=utf-8 are accepted).
bool IsJsonContentType(std::string_view contentType);

// Standard padded base64, as Go encodes []byte in JSON.
std::string Base64(std::string_view bytes);

}  // namespace iw::review
