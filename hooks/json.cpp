#include "hooks/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <vector>

namespace iw::json {

namespace {

// Deepest bracket nesting in `text`, ignoring brackets inside strings. Stops early past `limit`.
int NestingDepth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        break;
      case '{':
      case '[':
        deepest = std::max(deepest, ++depth);
        if (deepest > limit) return deepest;
        break;
      case '}':
      case ']':
        --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

void WriteCanonical(const Value& v, rapidjson::Writer<rapidjson::StringBuffer>& w) {
  if (v.IsObject()) {
    std::vector<const Value::Member*> members;
    members.reserve(v.MemberCount());
    for (auto& m : v.GetObject()) members.push_back(&m);
    std::sort(members.begin(), members.end(),
              [](auto* a, auto* b) { return View(a->name) < View(b->name); });
    w.StartObject();
    for (auto* m : members) {
      w.Key(m->name.GetString(), m->name.GetStringLength());
      WriteCanonical(m->value, w);
    }
    w.EndObject();
  } else if (v.IsArray()) {
    w.StartArray();
    for (auto& e : v.GetArray()) WriteCanonical(e, w);
    w.EndArray();
  } else {
    v.Accept(w);
  }
}

}  // namespace

std::optional<std::string> ParseUntrusted(std::string_view text, Document& out) {
  if (NestingDepth(text, kMaxDepth) > kMaxDepth) {
    return "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels";
  }
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;
  out.Parse<kFlags>(text.data(), text.size());
  if (out.HasParseError()) {
    return std::string(rapidjson::GetParseError_En(out.GetParseError())) + " at offset " +
           std::to_string(out.GetErrorOffset());
  }
  return std::nullopt;
}

std::string Serialize(const Value& value) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  value.Accept(w);
  return {buf.GetString(), buf.GetSize()};
}

std::string SerializeCanonical(const Value& value) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  WriteCanonical(value, w);
  return {buf.GetString(), buf.GetSize()};
}

const Value* Find(const Value* object, std::string_view key) {
  if (object == nullptr || !object->IsObject()) return nullptr;
  auto it = object->FindMember(Value(Ref(key)));
  return it == object->MemberEnd() ? nullptr : &it->value;
}

Value* FindMutable(Value* object, std::string_view key) {
  if (object == nullptr || !object->IsObject()) return nullptr;
  auto it = object->FindMember(Value(Ref(key)));
  return it == object->MemberEnd() ? nullptr : &it->value;
}

const Value* Path(const Value* root, std::initializer_list<std::string_view> keys) {
  const Value* v = root;
  for (auto k : keys) {
    v = Find(v, k);
    if (v == nullptr) return nullptr;
  }
  return v;
}

std::string_view StringOr(const Value* object, std::string_view key, std::string_view fallback) {
  const Value* v = Find(object, key);
  return (v != nullptr && v->IsString()) ? View(*v) : fallback;
}

void Set(Value& object, std::string_view key, const Value& value, Allocator& alloc) {
  if (!object.IsObject()) object.SetObject();
  Value copy(value, alloc);
  auto it = object.FindMember(Value(Ref(key)));
  if (it != object.MemberEnd()) {
    it->value = copy;  // moves
  } else {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc), copy,
                     alloc);
  }
}

void SetString(Value& object, std::string_view key, std::string_view value, Allocator& alloc) {
  Value v(value.data(), static_cast<rapidjson::SizeType>(value.size()), alloc);
  if (!object.IsObject()) object.SetObject();
  auto it = object.FindMember(Value(Ref(key)));
  if (it != object.MemberEnd()) {
    it->value = v;
  } else {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc), v,
                     alloc);
  }
}

Value& EnsureObject(Value& object, std::string_view key, Allocator& alloc) {
  if (!object.IsObject()) object.SetObject();
  auto it = object.FindMember(Value(Ref(key)));
  if (it == object.MemberEnd()) {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc),
                     Value(rapidjson::kObjectType), alloc);
    it = object.FindMember(Value(Ref(key)));
  } else if (!it->value.IsObject()) {
    it->value.SetObject();
  }
  return it->value;
}

bool Remove(Value& object, std::string_view key) {
  if (!object.IsObject()) return false;
  return object.EraseMember(Value(Ref(key)));
}

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

}  // namespace iw::json
