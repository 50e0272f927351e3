#include "hooks/in_progress.h"

#include <openssl/evp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <memory>

#include "hooks/keys.h"

namespace iw {

namespace {

constexpr std::string_view kShape =
    R"({"from":"<hash>","to":"<hash>","pausedByUs":true|false,"startedAt":"<RFC3339>"} (optionally "abortRequestedAt":"<RFC3339>"))";

std::string Sha256Hex(std::string_view data) {
  // Fetched once: an implicit fetch by EVP_sha256() on every digest costs more than hashing a
  // 9 KB template. Kept for the life of the process.
  static const std::unique_ptr<EVP_MD, decltype(&EVP_MD_free)> sha256(
      EVP_MD_fetch(nullptr, "SHA256", nullptr), EVP_MD_free);
  // One digest context per thread, re-initialised for every digest: EVP_Digest allocates and
  // frees one each time, a third of the cost of hashing a template of a few hundred bytes.
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!sha256 || !ctx || EVP_DigestInit_ex2(ctx.get(), sha256.get(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) {
    return {};  // only on allocation failure inside OpenSSL
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace

StatusOr<InProgress> ParseInProgress(std::string_view text) {
  json::Document doc;
  if (Status err = json::ParseUntrusted(text, doc); !err.ok()) {
    return Status::InvalidArgument("in-progress record is not valid JSON (" + err.message() +
                                   "); expected " + std::string(kShape));
  }
  const json::Value* from = json::Find(&doc, "from");
  const json::Value* to = json::Find(&doc, "to");
  const json::Value* pausedByUs = json::Find(&doc, "pausedByUs");
  const json::Value* startedAt = json::Find(&doc, "startedAt");
  if (from == nullptr || !from->IsString() || from->GetStringLength() == 0 || to == nullptr ||
      !to->IsString() || to->GetStringLength() == 0 || pausedByUs == nullptr ||
      !pausedByUs->IsBool() || startedAt == nullptr || !startedAt->IsString()) {
    return Status::InvalidArgument("in-progress record must be " + std::string(kShape));
  }
  const json::Value* abortAt = json::Find(&doc, "abortRequestedAt");
  if (abortAt != nullptr && !abortAt->IsString()) {
    return Status::InvalidArgument("in-progress record's abortRequestedAt must be a string");
  }
  return InProgress{std::string(json::View(*from)), std::string(json::View(*to)),
                    pausedByUs->GetBool(), std::string(json::View(*startedAt)),
                    abortAt != nullptr ? std::string(json::View(*abortAt)) : std::string()};
}

std::string SerializeInProgress(const InProgress& record) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("from");
  w.String(record.from.data(), static_cast<rapidjson::SizeType>(record.from.size()));
  w.Key("to");
  w.String(record.to.data(), static_cast<rapidjson::SizeType>(record.to.size()));
  w.Key("pausedByUs");
  w.Bool(record.pausedByUs);
  w.Key("startedAt");
  w.String(record.startedAt.data(), static_cast<rapidjson::SizeType>(record.startedAt.size()));
  if (!record.abortRequestedAt.empty()) {
    w.Key("abortRequestedAt");
    w.String(record.abortRequestedAt.data(),
             static_cast<rapidjson::SizeType>(record.abortRequestedAt.size()));
  }
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

StatusOr<std::optional<InProgress>> ReadInProgress(const kube::ObjectView& workload) {
  const std::optional<std::string_view> v = workload.annotation(keys::kInProgressAnnotation);
  if (!v) return std::optional<InProgress>();
  StatusOr<InProgress> parsed = ParseInProgress(*v);
  if (!parsed.ok()) return parsed.status();
  return std::optional<InProgress>(*std::move(parsed));
}

std::optional<InProgress> ParseInProgressOrNone(std::optional<std::string_view> text) {
  if (!text) return std::nullopt;
  StatusOr<InProgress> parsed = ParseInProgress(*text);
  if (!parsed.ok()) return std::nullopt;
  return *std::move(parsed);
}

std::string TemplateHash(const kube::PodTemplate& podTemplate) {
  // The template as if pod-template-hash were not among its labels (and labels absent when it
  // was the only one), without copying it.
  const json::Value::Member* omit = nullptr;
  const json::Value* metadata = json::Find(&podTemplate.json(), "metadata");
  const json::Value* labels = podTemplate.labels();
  if (labels != nullptr) {
    const std::string_view key = keys::kPodTemplateHashLabel;
    auto hash = labels->FindMember(json::Value(
        rapidjson::StringRef(key.data(), static_cast<rapidjson::SizeType>(key.size()))));
    if (hash != labels->MemberEnd()) {
      omit = labels->MemberCount() == 1 ? &*metadata->FindMember("labels") : &*hash;
    }
  }
  return Sha256Hex(json::SerializeCanonical(podTemplate.json(), omit)).substr(0, 10);
}

}  // namespace iw
