#include "server/http/review_codec.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <cstdint>
#include <exception>
#include <optional>

#include "lib/clip.h"
#include "server/http/http_message.h"

namespace iw::review {

namespace {

using json::Value;

constexpr std::string_view kV1 = "admission.k8s.io/v1";
constexpr std::string_view kV1beta1 = "admission.k8s.io/v1beta1";

// The metadata every handler reads: if present, metadata is an object and its labels and
// annotations are maps of strings (what the API server guarantees for real requests).
std::optional<std::string> CheckMetadata(const Value& object, const std::string& where) {
  const Value* meta = json::Find(&object, "metadata");
  if (meta == nullptr || meta->IsNull()) return std::nullopt;
  if (!meta->IsObject()) return where + ".metadata must be an object";
  for (const char* map : {"labels", "annotations"}) {
    const Value* m = json::Find(meta, map);
    if (m == nullptr || m->IsNull()) continue;
    if (!m->IsObject()) return where + ".metadata." + map + " must be a map of strings";
    for (const auto& kv : m->GetObject()) {
      if (!kv.value.IsString()) {
        return where + ".metadata." + map + "[" + std::string(json::View(kv.name)) +
               "] must be a string";
      }
    }
  }
  return std::nullopt;
}

// Decodes request fields into `out`; returns an error message for a field of the wrong type.
std::optional<std::string> DecodeRequest(const Value& r, admission::Request& out) {
  auto str = [&](std::string_view key, std::string& dst) -> std::optional<std::string> {
    const Value* v = json::Find(&r, key);
    if (v == nullptr || v->IsNull()) return std::nullopt;
    if (!v->IsString()) return "request." + std::string(key) + " must be a string";
    dst.assign(v->GetString(), v->GetStringLength());
    return std::nullopt;
  };
  if (auto e = str("name", out.name)) return e;
  if (auto e = str("namespace", out.namespaceName)) return e;
  if (auto e = str("subResource", out.subResource)) return e;

  const Value* kind = json::Find(&r, "kind");
  if (kind == nullptr || !kind->IsObject())
    return "request.kind must be an object {group,version,kind}";
  for (auto [key, dst] :
       {std::pair{"group", &out.kind.group}, std::pair{"version", &out.kind.version},
        std::pair{"kind", &out.kind.kind}}) {
    const Value* v = json::Find(kind, key);
    if (v != nullptr && !v->IsString())
      return std::string("request.kind.") + key + " must be a string";
    if (v != nullptr) dst->assign(v->GetString(), v->GetStringLength());
  }
  if (out.kind.kind.empty()) return "request.kind.kind is required";
  if (const Value* res = json::Find(&r, "resource"); res != nullptr) {
    if (!res->IsObject()) return "request.resource must be an object {group,version,resource}";
    const Value* v = json::Find(res, "resource");
    if (v != nullptr && !v->IsString()) return "request.resource.resource must be a string";
    if (v != nullptr) out.resource.assign(v->GetString(), v->GetStringLength());
  }

  const Value* op = json::Find(&r, "operation");
  if (op == nullptr || !op->IsString()) return "request.operation must be a string";
  std::string_view ops = json::View(*op);
  if (ops == "CREATE")
    out.operation = admission::Operation::kCreate;
  else if (ops == "UPDATE")
    out.operation = admission::Operation::kUpdate;
  else if (ops == "DELETE")
    out.operation = admission::Operation::kDelete;
  else if (ops == "CONNECT")
    out.operation = admission::Operation::kConnect;
  else
    return "request.operation must be CREATE, UPDATE, DELETE or CONNECT, not \"" +
           std::string(ops) + "\"";

  if (const Value* ui = json::Find(&r, "userInfo"); ui != nullptr && !ui->IsNull()) {
    if (!ui->IsObject()) return "request.userInfo must be an object";
    const Value* u = json::Find(ui, "username");
    if (u != nullptr && !u->IsString()) return "request.userInfo.username must be a string";
    if (u != nullptr) out.username.assign(u->GetString(), u->GetStringLength());
    if (const Value* g = json::Find(ui, "groups"); g != nullptr && !g->IsNull()) {
      if (!g->IsArray()) return "request.userInfo.groups must be a list of strings";
      for (const Value& e : g->GetArray()) {
        if (!e.IsString()) return "request.userInfo.groups must be a list of strings";
        out.groups.emplace_back(e.GetString(), e.GetStringLength());
      }
    }
  }

  for (auto [key, dst] :
       {std::pair{"object", &out.object}, std::pair{"oldObject", &out.oldObject}}) {
    const Value* v = json::Find(&r, key);
    if (v == nullptr || v->IsNull()) continue;
    if (!v->IsObject()) return std::string("request.") + key + " must be an object or null";
    if (auto e = CheckMetadata(*v, std::string("request.") + key)) return e;
    *dst = v;
  }
  if (const Value* d = json::Find(&r, "dryRun"); d != nullptr && !d->IsNull()) {
    if (!d->IsBool()) return "request.dryRun must be a boolean";
    out.dryRun = d->GetBool();
  }
  // The object each operation needs.
  if ((out.operation == admission::Operation::kCreate ||
       out.operation == admission::Operation::kUpdate) &&
      out.object == nullptr) {
    return "request.object is required for " + std::string(ops);
  }
  if (out.operation == admission::Operation::kUpdate && out.oldObject == nullptr) {
    return "request.oldObject is required for UPDATE";
  }
  return std::nullopt;
}

void WriteString(rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// The AdmissionReview answering `uid`, written directly (it has a fixed shape).
std::string Encode(std::string_view apiVersion, std::string_view uid,
                   const admission::Response& resp) {
  std::string out;
  out.reserve(160 + uid.size() + resp.message.size() + resp.patch.size() * 4 / 3);
  out += "{\"apiVersion\":";
  json::AppendString(out, apiVersion);
  out += ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";
  json::AppendString(out, uid);
  out += resp.allowed ? ",\"allowed\":true" : ",\"allowed\":false";
  if (!resp.allowed || !resp.message.empty()) {
    out += ",\"status\":{";
    if (!resp.allowed) out += "\"status\":\"Failure\",";
    if (!resp.message.empty()) {
      out += "\"message\":";
      json::AppendString(out, resp.message);
      out += ',';
    }
    if (!resp.reason.empty()) {
      out += "\"reason\":";
      json::AppendString(out, resp.reason);
      out += ',';
    }
    out += "\"code\":";
    out += std::to_string(resp.code);
    out += '}';
  }
  if (!resp.patch.empty()) {
    out += ",\"patchType\":\"JSONPatch\",\"patch\":\"";  // base64 needs no escaping
    out += Base64(resp.patch);
    out += '"';
  }
  if (!resp.warnings.empty()) {
    out += ",\"warnings\":[";
    for (std::size_t i = 0; i < resp.warnings.size(); ++i) {
      if (i > 0) out += ',';
      json::AppendString(out, resp.warnings[i]);
    }
    out += ']';
  }
  out += "}}";
  return out;
}

}  // namespace

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out(4 * ((bytes.size() + 2) / 3), '=');
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t whole = bytes.size() / 3 * 3;
  char* w = out.data();
  for (std::size_t i = 0; i < whole; i += 3, w += 4) {
    const std::uint32_t v =
        (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2];
    w[0] = kAlphabet[v >> 18];
    w[1] = kAlphabet[(v >> 12) & 63];
    w[2] = kAlphabet[(v >> 6) & 63];
    w[3] = kAlphabet[v & 63];
  }
  if (const std::size_t rest = bytes.size() - whole; rest > 0) {  // one or two bytes: padded
    const std::uint32_t v =
        (std::uint32_t{in[whole]} << 16) | (rest == 2 ? std::uint32_t{in[whole + 1]} << 8 : 0);
    w[0] = kAlphabet[v >> 18];
    w[1] = kAlphabet[(v >> 12) & 63];
    if (rest == 2) w[2] = kAlphabet[(v >> 6) & 63];
  }
  return out;
}

bool IsJsonContentType(std::string_view ct) {
  std::string_view media = ct.substr(0, ct.find(';'));
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.back())))
    media.remove_suffix(1);
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.front())))
    media.remove_prefix(1);
  return http::EqualsIgnoreCase(media, "application/json");
}

Reply PlainError(int httpStatus, std::string_view message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("kind");
  w.String("Status");
  w.Key("apiVersion");
  w.String("v1");
  w.Key("metadata");
  w.StartObject();
  w.EndObject();
  w.Key("status");
  w.String("Failure");
  w.Key("message");
  WriteString(w, message);
  w.Key("reason");
  WriteString(w, admission::FailureReason(httpStatus));
  w.Key("code");
  w.Int(httpStatus);
  w.EndObject();
  Reply r;
  r.httpStatus = httpStatus;
  r.body.assign(buf.GetString(), buf.GetSize());
  r.message = std::string(message);
  return r;
}

Reply Answer(const admission::Route& route, std::string_view body, std::string_view contentType,
             const admission::Context& ctx) {
  if (body.empty()) return PlainError(400, "request body is empty");
  if (!IsJsonContentType(contentType)) {
    return PlainError(415, "contentType=" + Clip(contentType) + ", expected application/json");
  }
  // `body` and the arena outlive `doc` and everything the handler derives from it.
  json::RequestArena arena;
  json::Document doc(&arena.allocator());
  if (Status err = json::ParseUntrustedBorrowing(body, doc); !err.ok()) {
    if (err.IsTooLarge()) {
      Reply r = PlainError(413, "request body is too large to parse: " + err.message());
      r.tooManyValues = true;
      return r;
    }
    return PlainError(400, "request body is not valid JSON: " + err.message());
  }
  if (!doc.IsObject())
    return PlainError(400, "request body is not an AdmissionReview: not a JSON object");
  if (std::string_view kind = json::StringOr(&doc, "kind", "AdmissionReview");
      kind != "AdmissionReview") {
    return PlainError(400, "request body is a " + Clip(kind) + ", expected kind AdmissionReview");
  }
  std::string_view apiVersion = json::StringOr(&doc, "apiVersion", kV1);
  if (apiVersion != kV1 && apiVersion != kV1beta1) {
    return PlainError(400, "unsupported AdmissionReview apiVersion \"" + Clip(apiVersion) +
                               "\": expected admission.k8s.io/v1 or admission.k8s.io/v1beta1");
  }
  const Value* request = json::Find(&doc, "request");
  if (request == nullptr || !request->IsObject()) {
    return PlainError(400, "AdmissionReview has no request object");
  }
  const Value* uid = json::Find(request, "uid");
  if (uid == nullptr || !uid->IsString() || uid->GetStringLength() == 0) {
    return PlainError(400, "AdmissionReview request has no uid");
  }
  // The API server's uids are UUIDs (36 bytes): a longer one is no review to echo back at length.
  if (uid->GetStringLength() > kClipBytes) {
    return PlainError(400, "AdmissionReview request uid is " +
                               std::to_string(uid->GetStringLength()) + " bytes, at most " +
                               std::to_string(kClipBytes));
  }

  Reply reply;
  reply.decided = true;
  reply.uid.assign(uid->GetString(), uid->GetStringLength());
  admission::Request req;
  req.uid = reply.uid;
  req.scratch = &arena.allocator();
  admission::Response resp;
  if (auto err = DecodeRequest(*request, req)) {
    resp = admission::Errored(400, "malformed AdmissionReview: " + *err);
  } else {
    try {
      resp = route.handler(req, ctx);
    } catch (const std::exception& e) {
      resp = admission::Errored(
          500, std::string("internal error in ") + std::string(route.path) + ": " + e.what());
    } catch (...) {
      resp = admission::Errored(500, std::string("internal error in ") + std::string(route.path));
    }
    // Contract of the API server: no patch from a validating webhook, none on DELETE.
    if (!resp.patch.empty() &&
        (!route.mutating || req.operation == admission::Operation::kDelete)) {
      resp = admission::Errored(
          500, "internal error: " + std::string(route.path) + " produced a patch it may not send");
    }
  }
  reply.allowed = resp.allowed;
  reply.patched = !resp.patch.empty();
  reply.handlerError = resp.handlerError;
  reply.message = resp.message;
  reply.body = Encode(apiVersion, reply.uid, resp);
  return reply;
}

}  // namespace iw::review
