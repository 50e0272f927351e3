// Small helpers over RapidJSON used by every decision in hooks/ and by the I/O in server/.
// Untrusted text goes through ParseUntrusted only: no recursion, bounded nesting, valid UTF-8.
#pragma once

#include <rapidjson/document.h>

#include <optional>
#include <string>
#include <string_view>

namespace iw::json {

using Value = rapidjson::Value;
using Document = rapidjson::Document;
using Allocator = rapidjson::Document::AllocatorType;

// Deepest nesting accepted from the outside. Kubernetes objects nest about 15 deep; the bound keeps
// every recursive walk over a parsed document (serialise, compare, diff) far from the stack limit.
inline constexpr int kMaxDepth = 512;

// Parses `text` into `out` with RapidJSON's iterative parser, validating UTF-8 and rejecting
// nesting deeper than kMaxDepth. Returns an error message, or nullopt on success.
std::optional<std::string> ParseUntrusted(std::string_view text, Document& out);

// Compact serialisation.
std::string Serialize(const Value& value);

// Member `key` of `object` when `object` is an object that has it, else nullptr.
const Value* Find(const Value* object, std::string_view key);
Value* FindMutable(Value* object, std::string_view key);

// Walks nested object members: Path(v, {"metadata", "labels"}).
const Value* Path(const Value* root, std::initializer_list<std::string_view> keys);

// String value of member `key`, or `fallback` when absent or not a string.
std::string_view StringOr(const Value* object, std::string_view key,
                          std::string_view fallback = {});

// Sets member `key` of `object` (created as an object if it is not one) to `value`, copying.
void Set(Value& object, std::string_view key, const Value& value, Allocator& alloc);
void SetString(Value& object, std::string_view key, std::string_view value, Allocator& alloc);
// Returns the object member `key`, creating an empty object there when absent or not an object.
Value& EnsureObject(Value& object, std::string_view key, Allocator& alloc);
// Removes member `key` if present; returns whether it was.
bool Remove(Value& object, std::string_view key);

// Serialisation with object keys sorted (byte order), so equal documents give equal text.
std::string SerializeCanonical(const Value& value);

// A string view over a RapidJSON string value (which may contain NULs).
inline std::string_view View(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}
inline rapidjson::GenericStringRef<char> Ref(std::string_view s) {
  return rapidjson::GenericStringRef<char>(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// RFC 6901 reference-token escaping: "~" -> "~0", "/" -> "~1", and back.
std::string EscapePointerToken(std::string_view token);
std::string UnescapePointerToken(std::string_view token);

}  // namespace iw::json
