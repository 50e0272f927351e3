#include "server/kube/cached_object.h"

#include <algorithm>

#include "lib/kube_objects.h"

namespace iw::kube {

namespace {

rapidjson::CrtAllocator& SharedCrt() {
  static rapidjson::CrtAllocator crt;  // stateless: safe to share between pools and threads
  return crt;
}

// Forwards SAX events, forcing every string and key to be copied (a plain CopyFrom keeps
// references to constant strings, which could outlive their owner).
template <class Handler>
struct CopyingHandler {
  Handler& h;
  bool Null() { return h.Null(); }
  bool Bool(bool b) { return h.Bool(b); }
  bool Int(int i) { return h.Int(i); }
  bool Uint(unsigned u) { return h.Uint(u); }
  bool Int64(int64_t i) { return h.Int64(i); }
  bool Uint64(uint64_t u) { return h.Uint64(u); }
  bool Double(double d) { return h.Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return h.RawNumber(s, n, true); }
  bool String(const char* s, rapidjson::SizeType n, bool) { return h.String(s, n, true); }
  bool StartObject() { return h.StartObject(); }
  bool Key(const char* s, rapidjson::SizeType n, bool) { return h.Key(s, n, true); }
  bool EndObject(rapidjson::SizeType n) { return h.EndObject(n); }
  bool StartArray() { return h.StartArray(); }
  bool EndArray(rapidjson::SizeType n) { return h.EndArray(n); }
};

// Deep copy of `src` allocated from `alloc`, strings included; exact capacities.
json::Value DeepCopy(const json::Value& src, json::Allocator& alloc) {
  json::Document d(&alloc);
  auto generate = [&src](json::Document& handler) {
    CopyingHandler<json::Document> copying{handler};
    return src.Accept(copying);
  };
  d.Populate(generate);
  json::Value out;
  out.Swap(d);
  return out;
}

// --- field paths ---------------------------------------------------------------------------

}  // namespace

std::string ObjectKey(std::string_view ns, std::string_view name) {
  std::string k;
  k.reserve(ns.size() + name.size() + 1);
  k += ns;
  k += '/';
  k += name;
  return k;
}

Object::Object(Tag, size_t bytes) : alloc_(std::max<size_t>(bytes, 1), &SharedCrt()) {}

std::shared_ptr<const Object> Object::Make(const json::Value& value) {
  size_t bytes = 0;
  {
    json::Allocator sizing(16 * 1024, &SharedCrt());
    json::Value probe = DeepCopy(value, sizing);
    bytes = sizing.Size();
  }
  auto obj = std::make_shared<Object>(Tag{}, bytes);
  obj->value_ = DeepCopy(value, obj->alloc_);
  return obj;
}

std::string_view Object::Namespace() const {
  return kube::MetaOf(value_, "namespace");
}
std::string_view Object::Name() const {
  return kube::MetaOf(value_, "name");
}
std::string_view Object::Uid() const {
  return kube::MetaOf(value_, "uid");
}
std::string_view Object::ResourceVersion() const {
  return kube::MetaOf(value_, "resourceVersion");
}
const json::Value* Object::Labels() const {
  return json::Path(&value_, {"metadata", "labels"});
}

size_t Object::ApproxBytes() const {
  constexpr size_t kMallocOverhead = 16;  // glibc chunk header, per allocation
  constexpr size_t kControlBlock = 16;    // make_shared's reference counts
  constexpr size_t kChunkHeader = 3 * sizeof(size_t);
  size_t capacity = alloc_.Capacity();
  size_t pool = capacity > 0 ? capacity + kChunkHeader + kMallocOverhead : 0;
  return sizeof(Object) + kControlBlock + kMallocOverhead + pool;
}

}  // namespace iw::kube
