// One object of an informer's cache: an immutable JSON value in a memory pool sized to fit it,
// shared by pointer. Thread safety: immutable once made; read it from any thread, for as long as
// a pointer to it is held.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "lib/json.h"

namespace iw::kube {

// "namespace/name", the key of an object in an informer's cache.
std::string ObjectKey(std::string_view ns, std::string_view name);

// One cached object: an immutable JSON value in a memory pool sized to fit it.
class Object {
  struct Tag {};

 public:
  // Deep-copies `value` (every string copied) into a new exactly sized pool.
  static std::shared_ptr<const Object> Make(const json::Value& value);

  Object(Tag, size_t bytes);
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  const json::Value& Value() const { return value_; }
  std::string_view Namespace() const;
  std::string_view Name() const;
  std::string_view Uid() const;
  std::string_view ResourceVersion() const;
  const json::Value* Labels() const;  // metadata.labels or nullptr

  // Heap bytes held for this object: the pool (with its header) and this object itself.
  size_t ApproxBytes() const;

 private:
  json::Allocator alloc_;
  json::Value value_;
};

using ObjectPtr = std::shared_ptr<const Object>;

}  // namespace iw::kube
