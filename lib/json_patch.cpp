#include "lib/json_patch.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace iw::json_patch {

namespace {

using json::Allocator;
using json::Value;

// ---------------------------------------------------------------------------------------------
// Shared helpers.

enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

Kind KindOf(const Value& v) {
  if (v.IsNull()) return Kind::kNull;
  if (v.IsBool()) return Kind::kBool;
  if (v.IsNumber()) return Kind::kNumber;
  if (v.IsString()) return Kind::kString;
  if (v.IsArray()) return Kind::kArray;
  return Kind::kObject;
}

// Numbers equal by value: integers exactly (RapidJSON's operator== confuses -1 with 2^64-1),
// anything involving a double by double value (RFC 6902 §4.6 "numerically equal").
bool NumbersEqual(const Value& a, const Value& b) {
  if (a.IsDouble() || b.IsDouble()) return a.GetDouble() == b.GetDouble();
  if (a.IsInt64() && b.IsInt64()) return a.GetInt64() == b.GetInt64();
  if (a.IsUint64() && b.IsUint64()) return a.GetUint64() == b.GetUint64();
  return false;  // one is negative, the other above INT64_MAX
}

// Numbers with the same value AND the same representation, so that serialisation is identical
// (1 and 1.0 differ, as do 0.0 and -0.0). Diff uses this: Apply(Diff(a, b), a) then serialises as
// b.
bool NumbersIdentical(const Value& a, const Value& b) {
  if (a.IsDouble() != b.IsDouble()) return false;
  if (a.IsDouble()) {
    return std::bit_cast<std::uint64_t>(a.GetDouble()) ==
           std::bit_cast<std::uint64_t>(b.GetDouble());
  }
  return NumbersEqual(a, b);
}

// Bracket nesting of `v` (a scalar is 0, [] is 1), as ParseUntrusted counts it. Stops descending
// once `limit` is exceeded, so recursion never goes deeper than limit + 1 frames.
int Depth(const Value& v, int limit) {
  if (!v.IsArray() && !v.IsObject()) return 0;
  if (limit <= 0) return 1;
  int deepest = 0;
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) {
      deepest = std::max(deepest, Depth(e, limit - 1));
      if (deepest >= limit) break;
    }
  } else {
    for (const auto& m : v.GetObject()) {
      deepest = std::max(deepest, Depth(m.value, limit - 1));
      if (deepest >= limit) break;
    }
  }
  return deepest + 1;
}

// Number of JSON values in `v`, itself included. Callers check the depth first.
std::size_t CountValues(const Value& v) {
  std::size_t n = 1;
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) n += CountValues(e);
  } else if (v.IsObject()) {
    for (const auto& m : v.GetObject()) n += CountValues(m.value);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Diff.

using Members = Value::ConstMemberIterator;

// Whether strings `a` and `b` hold the same bytes. A handler's scratch copy shares the strings of
// the original (json::CopySharingStrings): those compare by address, without reading them.
bool SameString(const Value& a, const Value& b) {
  const rapidjson::SizeType n = a.GetStringLength();
  if (n != b.GetStringLength()) return false;
  const char* pa = a.GetString();
  const char* pb = b.GetString();
  return pa == pb || std::memcmp(pa, pb, n) == 0;
}

// How Equal compares: kValue is RFC 6902 §4.6 equality (numbers numerically, objects with the same
// members regardless of order), the test operation's; kText is "serialises to the same text"
// (numbers in the same representation, members in the same order), what Diff needs so that
// Apply(Diff(a, b), a) serialises as b.
enum class Equality { kValue, kText };

// Same type, strings byte by byte, arrays element by element; numbers and objects as `how` says.
// Recursion is bounded by the depth checks done before any operation runs.
bool Equal(const Value& a, const Value& b, Equality how) {
  if (KindOf(a) != KindOf(b)) return false;
  switch (KindOf(a)) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return a.GetBool() == b.GetBool();
    case Kind::kNumber:
      return how == Equality::kValue ? NumbersEqual(a, b) : NumbersIdentical(a, b);
    case Kind::kString:
      return SameString(a, b);
    case Kind::kArray: {
      if (a.Size() != b.Size()) return false;
      if (a.Begin() == b.Begin()) return true;  // one array shared by both (json::CopyAlong)
      for (rapidjson::SizeType i = 0; i < a.Size(); ++i) {
        if (!Equal(a[i], b[i], how)) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (a.MemberCount() != b.MemberCount()) return false;
      if (a.MemberBegin() == b.MemberBegin()) return true;  // one member list shared by both
      if (how == Equality::kValue) {
        for (const auto& m : a.GetObject()) {
          auto it = b.FindMember(m.name);
          if (it == b.MemberEnd() || !Equal(m.value, it->value, how)) return false;
        }
        return true;
      }
      for (auto ia = a.MemberBegin(), ib = b.MemberBegin(); ia != a.MemberEnd(); ++ia, ++ib) {
        if (!SameString(ia->name, ib->name) || !Equal(ia->value, ib->value, how)) return false;
      }
      return true;
    }
  }
  return false;
}

bool JsonEqual(const Value& a, const Value& b) {
  return Equal(a, b, Equality::kValue);
}
bool Identical(const Value& a, const Value& b) {
  return Equal(a, b, Equality::kText);
}

// Identical(a, b), tried on every member or element pair before descending into it: most pairs
// are equal strings, and an unchanged subtree compares faster than it diffs.
inline bool Unchanged(const Value& a, const Value& b) {
  if (a.IsString()) return b.IsString() && SameString(a, b);
  return Identical(a, b);
}

// Below this many candidates a linear scan beats building an index.
constexpr rapidjson::SizeType kLinearScanLimit = 16;

// A cheap hash of `s` for the duplicate check: its length and its first and last eight bytes
// (member names sharing a prefix, like example.com/note-001, differ at the end). Collisions only
// cost comparisons.
std::size_t QuickHash(std::string_view s) {
  std::uint64_t head = 0;
  std::uint64_t tail = 0;
  if (s.size() >= 8) {
    std::memcpy(&head, s.data(), 8);
    std::memcpy(&tail, s.data() + s.size() - 8, 8);
  } else {
    std::memcpy(&head, s.data(), s.size());
  }
  std::uint64_t h = (head ^ std::rotl(tail, 29) ^ s.size()) * 0x9E3779B97F4A7C15ULL;
  return static_cast<std::size_t>(h ^ (h >> 32));
}

// Whether two members of `object` have the same name. `slots` is scratch space.
bool HasDuplicateNames(const Value& object, std::vector<std::uint32_t>& slots) {
  const rapidjson::SizeType n = object.MemberCount();
  const Members m = object.MemberBegin();
  if (n <= kLinearScanLimit) {
    for (rapidjson::SizeType i = 1; i < n; ++i) {
      for (rapidjson::SizeType j = 0; j < i; ++j) {
        if (json::View(m[i].name) == json::View(m[j].name)) return true;
      }
    }
    return false;
  }
  // Open addressing in a table at least twice as large as n; a slot holds a member index + 1.
  const std::size_t mask = std::bit_ceil(2 * static_cast<std::size_t>(n)) - 1;
  slots.assign(mask + 1, 0);
  for (rapidjson::SizeType i = 0; i < n; ++i) {
    const std::string_view name = json::View(m[i].name);
    std::size_t slot = QuickHash(name) & mask;
    for (; slots[slot] != 0; slot = (slot + 1) & mask) {
      if (json::View(m[slots[slot] - 1].name) == name) return true;
    }
    slots[slot] = i + 1;
  }
  return false;
}

// Finds members by name among members [begin, end) of an object: a linear scan when they are
// few, else a sorted index built once.
class MemberFinder {
 public:
  MemberFinder(Members members, rapidjson::SizeType begin, rapidjson::SizeType end)
      : members_(members), begin_(begin), end_(end) {
    if (end - begin <= kLinearScanLimit) return;
    index_.reserve(end - begin);
    for (rapidjson::SizeType i = begin; i < end; ++i) {
      index_.emplace_back(json::View(members[i].name), i);
    }
    std::sort(index_.begin(), index_.end());
  }

  // Position of the first member named `name`, or `end` when there is none.
  rapidjson::SizeType Find(std::string_view name) const {
    if (index_.empty()) {
      for (rapidjson::SizeType i = begin_; i < end_; ++i) {
        if (json::View(members_[i].name) == name) return i;
      }
      return end_;
    }
    auto it = std::lower_bound(index_.begin(), index_.end(),
                               std::pair<std::string_view, rapidjson::SizeType>(name, 0));
    return (it != index_.end() && it->first == name) ? it->second : end_;
  }

 private:
  Members members_;
  rapidjson::SizeType begin_, end_;
  std::vector<std::pair<std::string_view, rapidjson::SizeType>> index_;
};

// Collects the operations of one Diff. The location being compared is kept as a stack of
// reference tokens; its JSON Pointer is written only for an operation actually emitted.
class Differ {
 public:
  Differ(Value& patch, Allocator& alloc) : patch_(patch), alloc_(alloc) {}

  // Appends the operations turning `from` into `to` (both at the current location). Returns
  // whether the two are identical (they serialise alike); then nothing was appended.
  bool Diff(const Value& from, const Value& to) {
    if (KindOf(from) != KindOf(to)) {
      Emit("replace", &to);
      return false;
    }
    switch (KindOf(from)) {
      case Kind::kObject:
        return DiffObjects(from, to);
      case Kind::kArray:
        return DiffArrays(from, to);
      default:
        if (Identical(from, to)) return true;
        Emit("replace", &to);
        return false;
    }
  }

 private:
  struct Token {
    const Value* name;  // nullptr for an array index
    rapidjson::SizeType index;
  };

  // Members are matched by name: removes first (in `from`'s order), then adds and nested diffs in
  // `to`'s order. Members in the same place under the same name (the usual case: handlers add at
  // the end and erase in place) are paired without a search.
  bool DiffObjects(const Value& from, const Value& to) {
    const rapidjson::SizeType nf = from.MemberCount();
    const rapidjson::SizeType nt = to.MemberCount();
    const Members f = from.MemberBegin();
    const Members t = to.MemberBegin();
    rapidjson::SizeType same = 0;  // members [0, same) have the same names in both
    while (same < nf && same < nt && SameString(f[same].name, t[same].name)) ++same;
    const bool sameNames = same == nf && same == nt;
    const rapidjson::SizeType mark = patch_.Size();
    bool identical = sameNames;

    if (!sameNames) {
      // Without duplicate names, a member past `same` can only match one past `same`.
      const MemberFinder inTo(t, same, nt);
      for (rapidjson::SizeType i = same; i < nf; ++i) {
        if (inTo.Find(json::View(f[i].name)) != nt) continue;
        tokens_.push_back({&f[i].name, 0});
        Emit("remove", nullptr);
        tokens_.pop_back();
      }
    }
    const MemberFinder inFrom(f, same, nf);  // not searched when the names are the same
    for (rapidjson::SizeType j = 0; j < nt; ++j) {
      const rapidjson::SizeType i = j < same ? j : inFrom.Find(json::View(t[j].name));
      if (i != nf && Unchanged(f[i].value, t[j].value)) continue;
      tokens_.push_back({&t[j].name, 0});
      if (i == nf) {
        Emit("add", &t[j].value);
      } else if (!Diff(f[i].value, t[j].value)) {
        identical = false;
      }
      tokens_.pop_back();
    }
    if (identical) return true;
    // When one object's names are a prefix of the other's (same names, added at the end, or
    // removed from the end), the longer one holds every duplicate.
    const bool ambiguous = same == nf ? HasDuplicateNames(to, slots_)
                           : same == nt
                               ? HasDuplicateNames(from, slots_)
                               : HasDuplicateNames(from, slots_) || HasDuplicateNames(to, slots_);
    if (ambiguous) {
      // Member-wise operations would be ambiguous: replace the object whole.
      while (patch_.Size() > mark) patch_.PopBack();
      Emit("replace", &to);
    }
    return false;
  }

  // Elements are diffed in place for the common prefix, then added or removed at the tail.
  bool DiffArrays(const Value& from, const Value& to) {
    const rapidjson::SizeType common = std::min(from.Size(), to.Size());
    bool identical = from.Size() == to.Size();
    for (rapidjson::SizeType i = 0; i < common; ++i) {
      if (Unchanged(from[i], to[i])) continue;
      tokens_.push_back({nullptr, i});
      if (!Diff(from[i], to[i])) identical = false;
      tokens_.pop_back();
    }
    for (rapidjson::SizeType i = common; i < to.Size(); ++i) {
      tokens_.push_back({nullptr, i});
      Emit("add", &to[i]);
      tokens_.pop_back();
    }
    // Remove from the end backwards so that every index is valid when its operation runs.
    for (rapidjson::SizeType i = from.Size(); i > common; --i) {
      tokens_.push_back({nullptr, i - 1});
      Emit("remove", nullptr);
      tokens_.pop_back();
    }
    return identical;
  }

  // Appends {op, path: the current location, value (copied) unless nullptr}.
  void Emit(std::string_view op, const Value* value) {
    pointer_.clear();
    for (const Token& token : tokens_) {
      pointer_ += '/';
      if (token.name != nullptr) {
        json::AppendEscapedPointerToken(pointer_, json::View(*token.name));
      } else {
        char digits[16];
        auto [end, ec] = std::to_chars(digits, digits + sizeof digits, token.index);
        pointer_.append(digits, end);
      }
    }
    Value entry(rapidjson::kObjectType);
    entry.AddMember("op", Value(json::Ref(op)), alloc_);  // `op` is a literal: no copy needed
    entry.AddMember(
        "path", Value(pointer_.data(), static_cast<rapidjson::SizeType>(pointer_.size()), alloc_),
        alloc_);
    if (value != nullptr) entry.AddMember("value", json::Copy(*value, alloc_), alloc_);
    patch_.PushBack(entry, alloc_);
  }

  Value& patch_;
  Allocator& alloc_;
  std::vector<Token> tokens_;
  std::string pointer_;
  std::vector<std::uint32_t> slots_;
};

// ---------------------------------------------------------------------------------------------
// Apply.

constexpr std::size_t kMaxQuotedBytes = 200;

// `s` as a JSON string literal, cut at a UTF-8 boundary when long, for error messages.
std::string Quote(std::string_view s) {
  bool cut = false;
  if (s.size() > kMaxQuotedBytes) {
    std::size_t n = kMaxQuotedBytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s = s.substr(0, n);
    cut = true;
  }
  std::string out = json::Serialize(Value(json::Ref(s)));
  if (cut) out += "...";
  return out;
}

enum class OpKind { kAdd, kRemove, kReplace, kMove, kCopy, kTest };

struct Operation {
  OpKind kind;
  std::string_view name;
  std::string_view path;
  std::vector<std::string> pathTokens;
  std::string_view from;
  std::vector<std::string> fromTokens;
  const Value* value = nullptr;
};

std::optional<OpKind> ParseOpName(std::string_view name) {
  if (name == "add") return OpKind::kAdd;
  if (name == "remove") return OpKind::kRemove;
  if (name == "replace") return OpKind::kReplace;
  if (name == "move") return OpKind::kMove;
  if (name == "copy") return OpKind::kCopy;
  if (name == "test") return OpKind::kTest;
  return std::nullopt;
}

// Splits an RFC 6901 pointer into unescaped reference tokens; nullopt when it is not a valid
// pointer (non-empty without a leading '/', or '~' not followed by '0' or '1').
std::optional<std::vector<std::string>> ParsePointer(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer.front() != '/') return std::nullopt;
  std::size_t start = 1;
  while (true) {
    std::size_t end = pointer.find('/', start);
    std::string_view raw = pointer.substr(start, end == std::string_view::npos ? end : end - start);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && (i + 1 == raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1'))) {
        return std::nullopt;
      }
    }
    tokens.push_back(json::UnescapePointerToken(raw));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return tokens;
}

// The array index named by `token` in an array of `size` elements: decimal digits without leading
// zeros, below `size` (or equal to it, or "-", when `forAdd`). nullopt when not a valid index.
std::optional<rapidjson::SizeType> ParseIndex(std::string_view token, rapidjson::SizeType size,
                                              bool forAdd) {
  if (forAdd && token == "-") return size;
  if (token.empty() || token.size() > 10) return std::nullopt;
  if (token.size() > 1 && token.front() == '0') return std::nullopt;
  std::uint64_t n = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n > size || (n == size && !forAdd)) return std::nullopt;
  return static_cast<rapidjson::SizeType>(n);
}

// Returns the value at `tokens` below `root`; InvalidArgument naming the token that fails.
StatusOr<Value*> Resolve(Value& root, std::span<const std::string> tokens) {
  Value* v = &root;
  for (const auto& token : tokens) {
    if (v->IsObject()) {
      auto it = v->FindMember(Value(json::Ref(token)));
      if (it == v->MemberEnd()) {
        return Status::InvalidArgument("member " + Quote(token) + " does not exist");
      }
      v = &it->value;
    } else if (v->IsArray()) {
      auto index = ParseIndex(token, v->Size(), /*forAdd=*/false);
      if (!index) {
        return Status::InvalidArgument("array index " + Quote(token) +
                                       " is not valid for an array of " +
                                       std::to_string(v->Size()) + " elements");
      }
      v = &(*v)[*index];
    } else {
      return Status::InvalidArgument("cannot descend into a scalar with token " + Quote(token));
    }
  }
  return v;
}

// Inserts `value` (moved) at `tokens`: root replacement, object member set, or array insert.
Status AddAt(Value& root, std::span<const std::string> tokens, Value& value, Allocator& alloc) {
  if (tokens.empty()) {
    root = value;  // moves
    return Status::Ok();
  }
  StatusOr<Value*> resolved = Resolve(root, tokens.first(tokens.size() - 1));
  if (!resolved.ok()) return resolved.status();
  Value* parent = *resolved;
  const std::string& last = tokens.back();
  if (parent->IsObject()) {
    auto it = parent->FindMember(Value(json::Ref(last)));
    if (it != parent->MemberEnd()) {
      it->value = value;
    } else {
      parent->AddMember(Value(last.data(), static_cast<rapidjson::SizeType>(last.size()), alloc),
                        value, alloc);
    }
    return Status::Ok();
  }
  if (parent->IsArray()) {
    auto index = ParseIndex(last, parent->Size(), /*forAdd=*/true);
    if (!index) {
      return Status::InvalidArgument("array index " + Quote(last) +
                                     " is not valid for inserting into an array of " +
                                     std::to_string(parent->Size()) + " elements");
    }
    parent->PushBack(value, alloc);
    for (rapidjson::SizeType i = parent->Size() - 1; i > *index; --i) {
      (*parent)[i].Swap((*parent)[i - 1]);
    }
    return Status::Ok();
  }
  return Status::InvalidArgument("the parent of the target is not an object or an array");
}

// Removes the value at `tokens`, moving it into `removed`.
Status RemoveAt(Value& root, std::span<const std::string> tokens, Value& removed) {
  if (tokens.empty()) return Status::InvalidArgument("cannot remove the whole document");
  StatusOr<Value*> resolved = Resolve(root, tokens.first(tokens.size() - 1));
  if (!resolved.ok()) return resolved.status();
  Value* parent = *resolved;
  const std::string& last = tokens.back();
  if (parent->IsObject()) {
    auto it = parent->FindMember(Value(json::Ref(last)));
    if (it == parent->MemberEnd()) {
      return Status::InvalidArgument("member " + Quote(last) + " does not exist");
    }
    removed = it->value;
    parent->EraseMember(it);  // keeps the order of the other members
    return Status::Ok();
  }
  if (parent->IsArray()) {
    auto index = ParseIndex(last, parent->Size(), /*forAdd=*/false);
    if (!index) {
      return Status::InvalidArgument("array index " + Quote(last) +
                                     " is not valid for an array of " +
                                     std::to_string(parent->Size()) + " elements");
    }
    removed = (*parent)[*index];
    parent->Erase(parent->Begin() + *index);
    return Status::Ok();
  }
  return Status::InvalidArgument("the parent of the target is not an object or an array");
}

bool IsProperPrefix(const std::vector<std::string>& prefix, const std::vector<std::string>& of) {
  return prefix.size() < of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

// Checks the shape of operation `op` and fills `out`. Members not used by the operation are
// ignored (RFC 6902 §4); a member given twice is an error (RFC 6902 Appendix A.13).
Status ParseOperation(const Value& op, Operation& out) {
  if (!op.IsObject()) return Status::InvalidArgument("is not an object");
  const Value* opName = nullptr;
  const Value* path = nullptr;
  const Value* from = nullptr;
  for (const auto& m : op.GetObject()) {
    std::string_view name = json::View(m.name);
    const Value** slot = name == "op"      ? &opName
                         : name == "path"  ? &path
                         : name == "from"  ? &from
                         : name == "value" ? &out.value
                                           : nullptr;
    if (slot == nullptr) continue;
    if (*slot != nullptr)
      return Status::InvalidArgument("member " + Quote(name) + " is given more than once");
    *slot = &m.value;
  }
  if (opName == nullptr || !opName->IsString())
    return Status::InvalidArgument("\"op\" must be a string");
  out.name = json::View(*opName);
  auto kind = ParseOpName(out.name);
  if (!kind) return Status::InvalidArgument("unknown op " + Quote(out.name));
  out.kind = *kind;
  if (path == nullptr || !path->IsString())
    return Status::InvalidArgument("\"path\" must be a string");
  out.path = json::View(*path);
  auto pathTokens = ParsePointer(out.path);
  if (!pathTokens)
    return Status::InvalidArgument("\"path\" " + Quote(out.path) + " is not a JSON pointer");
  out.pathTokens = std::move(*pathTokens);
  if (out.kind == OpKind::kMove || out.kind == OpKind::kCopy) {
    if (from == nullptr || !from->IsString())
      return Status::InvalidArgument("\"from\" must be a string");
    out.from = json::View(*from);
    auto fromTokens = ParsePointer(out.from);
    if (!fromTokens)
      return Status::InvalidArgument("\"from\" " + Quote(out.from) + " is not a JSON pointer");
    out.fromTokens = std::move(*fromTokens);
  }
  if (out.kind == OpKind::kAdd || out.kind == OpKind::kReplace || out.kind == OpKind::kTest) {
    if (out.value == nullptr) return Status::InvalidArgument("\"value\" is missing");
    if (Depth(*out.value, json::kMaxDepth) > json::kMaxDepth) {
      return Status::InvalidArgument("\"value\" is nested deeper than " +
                                     std::to_string(json::kMaxDepth) + " levels");
    }
  } else {
    out.value = nullptr;
  }
  return Status::Ok();
}

// Fails when a value of bracket depth `valueDepth` placed at `tokens` would nest too deep.
Status DepthFits(std::span<const std::string> tokens, int valueDepth) {
  if (static_cast<std::size_t>(valueDepth) + tokens.size() <= json::kMaxDepth) return Status::Ok();
  return Status::InvalidArgument("the result would be nested deeper than " +
                                 std::to_string(json::kMaxDepth) + " levels");
}

// Runs one validated operation on `root`. `copyBudget` is the number of values copy operations
// may still duplicate.
Status Run(const Operation& op, Value& root, Allocator& alloc, std::size_t& copyBudget) {
  switch (op.kind) {
    case OpKind::kAdd: {
      if (Status s = DepthFits(op.pathTokens, Depth(*op.value, json::kMaxDepth)); !s.ok()) return s;
      Value copy(*op.value, alloc);
      return AddAt(root, op.pathTokens, copy, alloc);
    }
    case OpKind::kRemove: {
      Value removed;
      return RemoveAt(root, op.pathTokens, removed);
    }
    case OpKind::kReplace: {
      StatusOr<Value*> target = Resolve(root, op.pathTokens);
      if (!target.ok()) return target.status();
      if (Status s = DepthFits(op.pathTokens, Depth(*op.value, json::kMaxDepth)); !s.ok()) return s;
      Value copy(*op.value, alloc);
      **target = copy;
      return Status::Ok();
    }
    case OpKind::kMove: {
      StatusOr<Value*> source = Resolve(root, op.fromTokens);
      if (!source.ok()) return source.status();
      if (op.fromTokens == op.pathTokens) return Status::Ok();
      if (IsProperPrefix(op.fromTokens, op.pathTokens)) {
        return Status::InvalidArgument("cannot move a value into one of its own children");
      }
      if (Status s = DepthFits(op.pathTokens, Depth(**source, json::kMaxDepth)); !s.ok()) return s;
      Value moved;
      if (Status s = RemoveAt(root, op.fromTokens, moved); !s.ok()) return s;
      return AddAt(root, op.pathTokens, moved, alloc);
    }
    case OpKind::kCopy: {
      StatusOr<Value*> source = Resolve(root, op.fromTokens);
      if (!source.ok()) return source.status();
      if (Status s = DepthFits(op.pathTokens, Depth(**source, json::kMaxDepth)); !s.ok()) return s;
      std::size_t n = CountValues(**source);
      if (n > copyBudget) {
        return Status::InvalidArgument(
            "copy operations would duplicate more values than the document and patch hold");
      }
      copyBudget -= n;
      Value copy(**source, alloc);
      return AddAt(root, op.pathTokens, copy, alloc);
    }
    case OpKind::kTest: {
      StatusOr<Value*> target = Resolve(root, op.pathTokens);
      if (!target.ok()) return target.status();
      if (!JsonEqual(**target, *op.value)) {
        return Status::InvalidArgument("test failed: the value differs");
      }
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown op");
}

std::string OperationError(std::size_t index, const Operation* op, const std::string& reason) {
  std::string out = "JSON Patch operation " + std::to_string(index);
  if (op != nullptr) out += " (" + std::string(op->name) + " at " + Quote(op->path) + ")";
  return out + ": " + reason;
}

}  // namespace

json::Value Diff(const json::Value& from, const json::Value& to, json::Allocator& alloc) {
  Value patch(rapidjson::kArrayType);
  Differ(patch, alloc).Diff(from, to);
  return patch;
}

Status Apply(const json::Value& patch, json::Document& doc) {
  if (!patch.IsArray()) return Status::InvalidArgument("JSON Patch must be an array of operations");
  std::vector<Operation> ops(patch.Size());
  for (rapidjson::SizeType i = 0; i < patch.Size(); ++i) {
    if (Status err = ParseOperation(patch[i], ops[i]); !err.ok()) {
      const Operation* named = ops[i].path.data() != nullptr ? &ops[i] : nullptr;
      return Status::InvalidArgument(OperationError(i, named, err.message()));
    }
  }
  if (Depth(doc, json::kMaxDepth) > json::kMaxDepth) {
    return Status::InvalidArgument("document is nested deeper than " +
                                   std::to_string(json::kMaxDepth) + " levels");
  }
  std::size_t copyBudget = CountValues(doc);
  for (const auto& op : ops) {
    if (op.value != nullptr) copyBudget += CountValues(*op.value);
  }

  // Work on a copy in the document's own allocator, so that values the caller allocated there
  // (the patch, typically) stay valid; swap it in only when every operation succeeded.
  Allocator& alloc = doc.GetAllocator();
  Value work(doc, alloc);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (Status s = Run(ops[i], work, alloc, copyBudget); !s.ok()) {
      return Status::InvalidArgument(OperationError(i, &ops[i], s.message()));
    }
  }
  static_cast<Value&>(doc) = work;  // moves
  return Status::Ok();
}

}  // namespace iw::json_patch
