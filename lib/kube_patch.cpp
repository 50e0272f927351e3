#include "lib/kube_patch.h"

namespace iw::kube {

namespace {

json::Value Str(std::string_view s, json::Allocator& a) {
  return s.empty() ? json::Value("", 0, a)
                   : json::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

}  // namespace

PatchBuilder::PatchBuilder() : body_(rapidjson::kObjectType) {}
PatchBuilder::PatchBuilder(json::Document body) : body_(std::move(body)) {
  if (!body_.IsObject()) body_.SetObject();
}

json::Value& PatchBuilder::Metadata(std::string_view map) {
  auto& a = body_.GetAllocator();
  return json::EnsureObject(json::EnsureObject(body_, "metadata", a), map, a);
}

PatchBuilder& PatchBuilder::Label(std::string_view key, std::optional<std::string_view> value) {
  auto& a = body_.GetAllocator();
  json::Set(Metadata("labels"), key, value ? Str(*value, a) : json::Value(rapidjson::kNullType), a);
  return *this;
}

PatchBuilder& PatchBuilder::Annotation(std::string_view key,
                                       std::optional<std::string_view> value) {
  auto& a = body_.GetAllocator();
  json::Set(Metadata("annotations"), key,
            value ? Str(*value, a) : json::Value(rapidjson::kNullType), a);
  return *this;
}

PatchBuilder& PatchBuilder::Paused(bool paused) {
  auto& a = body_.GetAllocator();
  json::Set(json::EnsureObject(body_, "spec", a), "paused", json::Value(paused), a);
  return *this;
}

PatchBuilder& PatchBuilder::Template(json::Value&& diff) {
  auto& a = body_.GetAllocator();
  json::Value& spec = json::EnsureObject(body_, "spec", a);
  json::Remove(spec, "template");
  spec.AddMember("template", diff.Move(), a);
  return *this;
}

json::Value& PatchBuilder::Entry(std::string_view section, std::string_view list,
                                 std::string_view keyField, std::string_view key) {
  auto& a = body_.GetAllocator();
  json::Value& parent = json::EnsureObject(body_, section, a);
  json::Value* items = json::FindMutable(&parent, list);
  if (items == nullptr || !items->IsArray()) {
    json::Remove(parent, list);
    parent.AddMember(Str(list, a), json::Value(rapidjson::kArrayType), a);
    items = json::FindMutable(&parent, list);
  }
  for (auto& item : items->GetArray()) {
    if (json::StringOr(&item, keyField) == key) return item;
  }
  json::Value entry(rapidjson::kObjectType);
  entry.AddMember(Str(keyField, a), Str(key, a), a);
  items->PushBack(entry, a);
  return (*items)[items->Size() - 1];
}

PatchBuilder& PatchBuilder::ContainerImage(std::string_view container, std::string_view image) {
  auto& a = body_.GetAllocator();
  json::SetString(Entry("spec", "containers", "name", container), "image", image, a);
  return *this;
}

PatchBuilder& PatchBuilder::ContainerResource(std::string_view container, std::string_view kind,
                                              std::string_view resource,
                                              std::string_view quantity) {
  auto& a = body_.GetAllocator();
  json::Value& c = Entry("spec", "containers", "name", container);
  json::SetString(json::EnsureObject(json::EnsureObject(c, "resources", a), kind, a), resource,
                  quantity, a);
  return *this;
}

PatchBuilder& PatchBuilder::SetCondition(const Condition& c) {
  auto& a = body_.GetAllocator();
  json::Value& e = Entry("status", "conditions", "type", c.type);
  json::SetString(e, "status", c.status, a);
  json::SetString(e, "reason", c.reason, a);
  json::SetString(e, "message", c.message, a);
  if (!c.lastUpdateTime.empty()) json::SetString(e, "lastUpdateTime", c.lastUpdateTime, a);
  json::SetString(e, "lastTransitionTime", c.lastTransitionTime, a);
  return *this;
}

PatchBuilder& PatchBuilder::MergeMetadata(const PatchBuilder& other) {
  const json::Value* meta = json::Find(&other.body_, "metadata");
  if (meta == nullptr || !meta->IsObject()) return *this;
  auto& a = body_.GetAllocator();
  for (std::string_view map : {"labels", "annotations"}) {
    const json::Value* from = json::Find(meta, map);
    if (from == nullptr || !from->IsObject()) continue;
    json::Value& to = Metadata(map);
    for (const auto& m : from->GetObject()) {
      json::Set(to, json::View(m.name), json::Value(m.value, a), a);
    }
  }
  return *this;
}

json::Document PatchBuilder::Take() {
  json::Document out(rapidjson::kObjectType);
  out.Swap(body_);
  return out;
}

}  // namespace iw::kube
