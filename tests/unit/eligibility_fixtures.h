// The eligibility tables' way in: templates written as JSON, compared through the views the
// product makes of them.
#pragma once

#include "hooks/eligibility.h"
#include "lib/json.h"
#include "tests/unit/test_json.h"

namespace iw::test {

// eligibility::CompareTemplates on `oldT` and `newT` (nullptr: no template); a template whose
// shape the view refuses fails the test.
inline eligibility::Result CompareJson(const json::Value* oldT, const json::Value* newT,
                                       const lifecycle::Policy& policy,
                                       const resize_support::Support& support = {}) {
  std::optional<kube::PodTemplate> o, n;
  if (oldT != nullptr) o = AsTemplate(*oldT);
  if (newT != nullptr) n = AsTemplate(*newT);
  return eligibility::CompareTemplates(o ? &*o : nullptr, n ? &*n : nullptr, policy, support);
}

}  // namespace iw::test
