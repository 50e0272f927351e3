#include "lib/label_selector.h"

#include <algorithm>
#include <cctype>

namespace iw::kube {

namespace {

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '/';
}
bool IsValueChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

class SelectorParser {
 public:
  explicit SelectorParser(std::string_view text) : s_(text) {}

  bool Parse(std::vector<LabelSelector::Requirement>& out) {
    SkipSpace();
    if (AtEnd()) return true;
    for (;;) {
      LabelSelector::Requirement r;
      if (!Requirement(r)) return false;
      out.push_back(std::move(r));
      SkipSpace();
      if (AtEnd()) return true;
      if (s_[pos_] != ',') return Fail("expected ','");
      ++pos_;
      SkipSpace();
    }
  }

  // Why Parse failed.
  const std::string& error() const { return error_; }

 private:
  using Op = LabelSelector::Requirement::Op;

  bool AtEnd() const { return pos_ >= s_.size(); }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Fail(std::string_view what) {
    error_ = "invalid label selector \"" + std::string(s_) + "\": " + std::string(what) +
             " at position " + std::to_string(pos_);
    return false;
  }
  std::string Read(bool (*accept)(char)) {
    size_t b = pos_;
    while (!AtEnd() && accept(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  bool Word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    size_t after = pos_ + w.size();
    if (after < s_.size() && IsKeyChar(s_[after])) return false;
    pos_ = after;
    return true;
  }

  bool Requirement(LabelSelector::Requirement& r) {
    bool negated = false;
    if (s_[pos_] == '!') {
      negated = true;
      ++pos_;
      SkipSpace();
    }
    r.key = Read(IsKeyChar);
    if (r.key.empty()) return Fail("expected a label key");
    SkipSpace();
    if (negated) {
      r.op = Op::kDoesNotExist;
      return true;
    }
    if (AtEnd() || s_[pos_] == ',') {
      r.op = Op::kExists;
      return true;
    }
    if (s_.substr(pos_, 2) == "==" || s_.substr(pos_, 2) == "!=") {
      r.op = s_[pos_] == '!' ? Op::kNotEquals : Op::kEquals;
      pos_ += 2;
    } else if (s_[pos_] == '=') {
      r.op = Op::kEquals;
      ++pos_;
    } else if (Word("notin")) {
      r.op = Op::kNotIn;
    } else if (Word("in")) {
      r.op = Op::kIn;
    } else {
      return Fail("expected an operator (=, ==, !=, in, notin)");
    }
    SkipSpace();
    if (r.op == Op::kEquals || r.op == Op::kNotEquals) {
      r.values.push_back(Read(IsValueChar));
      return true;
    }
    if (AtEnd() || s_[pos_] != '(') return Fail("expected '('");
    ++pos_;
    for (;;) {
      SkipSpace();
      r.values.push_back(Read(IsValueChar));
      SkipSpace();
      if (AtEnd()) return Fail("expected ')'");
      if (s_[pos_] == ')') {
        ++pos_;
        return true;
      }
      if (s_[pos_] != ',') return Fail("expected ',' or ')'");
      ++pos_;
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

StatusOr<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector s;
  SelectorParser p(text);
  if (!p.Parse(s.requirements_)) return Status::InvalidArgument(p.error());
  return s;
}

StatusOr<LabelSelector> LabelSelector::FromJson(const json::Value& selector) {
  using Op = Requirement::Op;
  LabelSelector s;
  if (!selector.IsObject()) {
    return Status::InvalidArgument("label selector is not an object");
  }
  if (const json::Value* ml = json::Find(&selector, "matchLabels"); ml && !ml->IsNull()) {
    if (!ml->IsObject()) {
      return Status::InvalidArgument("matchLabels is not an object");
    }
    for (const auto& m : ml->GetObject()) {
      if (!m.value.IsString()) {
        return Status::InvalidArgument("matchLabels." + std::string(json::View(m.name)) +
                                       " is not a string");
      }
      s.requirements_.push_back(
          {std::string(json::View(m.name)), Op::kEquals, {std::string(json::View(m.value))}});
    }
  }
  if (const json::Value* me = json::Find(&selector, "matchExpressions"); me && !me->IsNull()) {
    if (!me->IsArray()) {
      return Status::InvalidArgument("matchExpressions is not an array");
    }
    for (const auto& e : me->GetArray()) {
      Requirement r;
      r.key = std::string(json::StringOr(&e, "key"));
      std::string_view op = json::StringOr(&e, "operator");
      if (r.key.empty()) {
        return Status::InvalidArgument("matchExpressions entry without a key");
      }
      if (op == "In") {
        r.op = Op::kIn;
      } else if (op == "NotIn") {
        r.op = Op::kNotIn;
      } else if (op == "Exists") {
        r.op = Op::kExists;
      } else if (op == "DoesNotExist") {
        r.op = Op::kDoesNotExist;
      } else {
        return Status::InvalidArgument("matchExpressions operator \"" + std::string(op) +
                                       "\" is not valid");
      }
      if (const json::Value* vals = json::Find(&e, "values"); vals && vals->IsArray()) {
        for (const auto& v : vals->GetArray()) {
          if (!v.IsString()) {
            return Status::InvalidArgument("matchExpressions values must be strings");
          }
          r.values.emplace_back(json::View(v));
        }
      }
      bool wantsValues = r.op == Op::kIn || r.op == Op::kNotIn;
      if (wantsValues == r.values.empty()) {
        return Status::InvalidArgument(
            "matchExpressions key \"" + r.key +
            "\": " + (wantsValues ? "In/NotIn need values" : "Exists/DoesNotExist take no values"));
      }
      s.requirements_.push_back(std::move(r));
    }
  }
  return s;
}

bool LabelSelector::Matches(const json::Value* labels) const {
  using Op = Requirement::Op;
  for (const auto& r : requirements_) {
    const json::Value* v =
        labels != nullptr && labels->IsObject() ? json::Find(labels, r.key) : nullptr;
    bool has = v != nullptr && v->IsString();
    std::string_view value = has ? json::View(*v) : std::string_view();
    bool inValues = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    bool ok = false;
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        ok = inValues;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        ok = !inValues;
        break;
      case Op::kExists:
        ok = has;
        break;
      case Op::kDoesNotExist:
        ok = !has;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string LabelSelector::ToString() const {
  using Op = Requirement::Op;
  std::string out;
  for (const Requirement& r : requirements_) {
    if (!out.empty()) out += ',';
    auto values = [&r] {
      std::string v;
      for (const std::string& s : r.values) {
        if (!v.empty()) v += ',';
        v += s;
      }
      return v;
    };
    switch (r.op) {
      case Op::kEquals:
        out += r.key + "=" + (r.values.empty() ? std::string() : r.values.front());
        break;
      case Op::kNotEquals:
        out += r.key + "!=" + (r.values.empty() ? std::string() : r.values.front());
        break;
      case Op::kIn:
        out += r.key + " in (" + values() + ")";
        break;
      case Op::kNotIn:
        out += r.key + " notin (" + values() + ")";
        break;
      case Op::kExists:
        out += r.key;
        break;
      case Op::kDoesNotExist:
        out += "!" + r.key;
        break;
    }
  }
  return out;
}

}  // namespace iw::kube
