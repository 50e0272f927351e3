// Small helpers over RapidJSON used by every decision in hooks/ and by the I/O in server/.
// Untrusted text goes through ParseUntrusted only: no recursion, bounded nesting, valid UTF-8.
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "lib/status.h"

namespace iw::json {

using Value = rapidjson::Value;
using Document = rapidjson::Document;
using Allocator = rapidjson::Document::AllocatorType;

// Deepest nesting accepted from the outside. Kubernetes objects nest about 15 deep; the bound keeps
// every recursive walk over a parsed document (serialise, compare, diff) far from the stack limit.
inline constexpr int kMaxDepth = 512;
// Most values (member names counted too) accepted from the outside in one text. A parsed value
// takes 16 bytes and about as much again while the document is built, so a review of at most this
// many costs at most ~16 MiB to parse, whatever its byte size; an AdmissionReview of two objects at
// the API server's 1.5 MiB object limit holds ~100,000 values in practice.
inline constexpr std::size_t kMaxValues = 500000;

// Parses `text` (after a UTF-8 byte order mark, if any) into `out` in one forward pass without
// recursion, validating UTF-8 (RFC 3629; also what \u escapes decode to: an unpaired surrogate is
// an error) and rejecting nesting deeper than kMaxDepth. Strings are copied into `out`'s
// allocator; numbers convert exactly as RapidJSON converts them. A text of more than `maxValues`
// values (member names included) is rejected before anything is built (only a text of more than
// 2 * maxValues - 1 bytes can hold that many; such a text is counted first, in one scan).
// Failure: TooLarge for too many values, InvalidArgument otherwise (RapidJSON's wording, with the
// byte offset); on failure `out` keeps its previous value.
Status ParseUntrusted(std::string_view text, Document& out, std::size_t maxValues = kMaxValues);
// As ParseUntrusted, but strings without escapes point into `text` instead of being copied (as
// constant strings, which Value(v, alloc) copies by reference too): `text` must outlive `out` and
// every value copied from it. For a request body answered before it is released.
Status ParseUntrustedBorrowing(std::string_view text, Document& out,
                               std::size_t maxValues = kMaxValues);

// Memory for the documents of one request, kept by the thread between requests: a pool allocator
// whose first chunk is a per-thread buffer sized to the largest recent request (within a
// process-wide budget), so steady traffic builds documents without malloc and without faulting
// fresh pages in. Documents using allocator() must be destroyed before the arena: declare it first.
// One arena per thread at a time gets the buffer; a nested one falls back to plain chunks.
// Thread safety: an arena belongs to the thread that made it, which alone allocates from it and
// must destroy it (the buffer is that thread's); the process-wide budget is an atomic.
class RequestArena {
 public:
  RequestArena();
  ~RequestArena();
  RequestArena(const RequestArena&) = delete;
  RequestArena& operator=(const RequestArena&) = delete;

  Allocator& allocator() { return *allocator_; }

 private:
  bool ownsThreadBuffer_ = false;
  std::optional<Allocator> allocator_;
};

// A deep copy of `value` in `alloc` (one walk; RapidJSON 1.1's copy constructor builds a
// temporary document for every container it copies). Strings `value` holds by reference stay
// references, as with Value(value, alloc).
Value Copy(const Value& value, Allocator& alloc);
// A deep copy of `value`'s structure in `alloc` whose strings point into `value` instead of being
// copied: cheaper than Copy, and valid only while `value` lives unchanged. For the scratch copy
// a handler mutates and then diffs against `value`.
Value CopySharingStrings(const Value& value, Allocator& alloc);
// The scratch copy for a handler that changes only the objects along `paths` (member names from
// the top: {{"metadata", "annotations"}, {"spec"}}): `value`'s top level and each object along a
// path are copied one level (their member lists), every other value is `value`'s own, shared, not
// copied. A change through the copy may set, add or remove members of those copied objects, and
// create objects there, but must never change anything below a shared value (it would change
// `value`). Valid only while `value` lives unchanged. Much cheaper than CopySharingStrings for a
// large object, and Diff sees a shared value as identical without reading it.
Value CopyAlong(const Value& value,
                std::initializer_list<std::initializer_list<std::string_view>> paths,
                Allocator& alloc);

// Compact serialisation (as RapidJSON's Writer writes it).
std::string Serialize(const Value& value);
// Appends `s` as a JSON string literal, escaped as Serialize escapes strings.
void AppendString(std::string& out, std::string_view s);

// Member `key` of `object` when `object` is an object that has it, else nullptr.
const Value* Find(const Value* object, std::string_view key);
Value* FindMutable(Value* object, std::string_view key);

// Walks nested object members: Path(v, {"metadata", "labels"}).
const Value* Path(const Value* root, std::initializer_list<std::string_view> keys);

// The first element of `array` (an array of objects: Kubernetes' named lists, e.g. containers by
// "name", conditions by "type") whose string member `key` is `value`; nullptr when none or when
// `array` is not an array.
const Value* FindNamed(const Value* array, std::string_view key, std::string_view value);

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
// `omit`, when given, is one member somewhere in `value` written as if it were absent.
std::string SerializeCanonical(const Value& value, const Value::Member* omit = nullptr);

// A string view over a RapidJSON string value (which may contain NULs).
inline std::string_view View(const Value& v) {
  return {v.GetString(), v.GetStringLength()};
}
inline rapidjson::GenericStringRef<char> Ref(std::string_view s) {
  return rapidjson::GenericStringRef<char>(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// RFC 6901 reference-token escaping: "~" -> "~0", "/" -> "~1", and back.
std::string EscapePointerToken(std::string_view token);
// Appends EscapePointerToken(token) to `out`.
void AppendEscapedPointerToken(std::string& out, std::string_view token);
std::string UnescapePointerToken(std::string_view token);

}  // namespace iw::json
