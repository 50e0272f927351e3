// libFuzzer target: the AdmissionReview decoder and every route's handler, as the HTTPS server
// calls them. The first byte picks the route; the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hooks/admission.h"
#include "server/http/review_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& routes = iw::admission::Routes();
  const iw::admission::Route& route = routes[data[0] % routes.size()];
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  iw::admission::Context ctx;
  ctx.controllerUser = "system:serviceaccount:inplace-webhook:inplace-webhook";
  iw::review::Reply reply = iw::review::Answer(route, body, "application/json", ctx);
  // Invariants: a decided review never carries a handler-produced patch on a validating route,
  // and every reply has a body.
  if (reply.body.empty()) __builtin_trap();
  if (reply.decided && !route.mutating && reply.patched) __builtin_trap();
  return 0;
}
