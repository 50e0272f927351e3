// A Kubernetes label selector, from either of its two forms: the string syntax of
// `?labelSelector=` and the metav1.LabelSelector object of a Deployment's spec.selector. One type
// for the loop's list calls and the informer's cache matching, so both select the same pods.
// Thread safety: a value; const methods may be called from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lib/json.h"
#include "lib/status.h"

namespace iw::kube {

class LabelSelector {
 public:
  struct Requirement {
    enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;
  };

  LabelSelector() = default;  // matches everything

  // "a=b,c!=d,e in (x,y),f notin (z),g,!h" ("==" as "="). InvalidArgument when malformed, naming
  // the position.
  static StatusOr<LabelSelector> Parse(std::string_view text);
  // A metav1.LabelSelector object: matchLabels and matchExpressions (In, NotIn, Exists,
  // DoesNotExist). An empty object matches everything. InvalidArgument for any other shape (an
  // unknown operator, values where none belong): a selector is never half-read.
  static StatusOr<LabelSelector> FromJson(const json::Value& selector);

  // Whether a labels object (nullptr or not an object: no labels) satisfies every requirement.
  bool Matches(const json::Value* labels) const;
  bool Empty() const { return requirements_.empty(); }
  const std::vector<Requirement>& Requirements() const { return requirements_; }
  // The string syntax, for `?labelSelector=` (Parse(ToString()) gives the same selector).
  std::string ToString() const;

 private:
  std::vector<Requirement> requirements_;
};

}  // namespace iw::kube
