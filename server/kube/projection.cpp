#include "server/kube/projection.h"

#include <map>
#include <memory>
#include <string_view>

namespace iw::kube {

namespace {

struct FieldTree {
  std::map<std::string, FieldTree, std::less<>> children;
  bool whole = false;  // keep this value entirely
  bool each = false;   // an array: apply the children to each element
};

struct Segment {
  std::string name;
  bool each = false;
};

std::vector<Segment> SplitPath(std::string_view path) {
  std::vector<Segment> out;
  while (!path.empty()) {
    size_t dot = path.find('.');
    std::string_view seg = path.substr(0, dot);
    Segment s;
    if (seg.ends_with("[]")) {
      s.each = true;
      seg.remove_suffix(2);
    }
    s.name = std::string(seg);
    if (!s.name.empty()) out.push_back(std::move(s));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return out;
}

FieldTree BuildTree(const std::vector<std::string>& paths) {
  FieldTree root;
  for (const auto& p : paths) {
    FieldTree* node = &root;
    for (const auto& seg : SplitPath(p)) {
      node = &node->children[seg.name];
      if (seg.each) node->each = true;
    }
    if (node != &root) node->whole = true;
  }
  return root;
}

// Copies into `out` the members of object `src` that `tree` names.
void Keep(const json::Value& src, const FieldTree& tree, json::Value& out, json::Allocator& a) {
  out.SetObject();
  for (const auto& [name, child] : tree.children) {
    const json::Value* v = json::Find(&src, name);
    if (v == nullptr) continue;
    json::Value copy;
    if (child.whole) {
      copy.CopyFrom(*v, a);
    } else if (child.each) {
      if (!v->IsArray()) continue;
      copy.SetArray();
      copy.Reserve(v->Size(), a);
      for (const auto& e : v->GetArray()) {
        json::Value ce;
        if (e.IsObject()) {
          Keep(e, child, ce, a);
        } else {
          ce.CopyFrom(e, a);
        }
        copy.PushBack(ce, a);
      }
    } else {
      if (!v->IsObject()) continue;
      Keep(*v, child, copy, a);
    }
    out.AddMember(json::Value(name.data(), static_cast<rapidjson::SizeType>(name.size()), a), copy,
                  a);
  }
}

}  // namespace

Projection KeepFields(const std::vector<std::string>& paths) {
  auto tree = std::make_shared<const FieldTree>(BuildTree(paths));
  return [tree](const json::Value& full, json::Value& out, json::Allocator& alloc) {
    if (!full.IsObject()) {
      out.CopyFrom(full, alloc);
      return;
    }
    Keep(full, *tree, out, alloc);
  };
}

}  // namespace iw::kube
