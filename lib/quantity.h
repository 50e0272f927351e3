// Kubernetes resource quantities ("100m", "150500u", "0.5", "128Mi", "1e3", "2G"), as
// k8s.io/apimachinery/pkg/api/resource parses them, reduced to one comparable number: thousandths
// of the unit (MilliValue, rounded up as it is). Two quantities the API server would store as the
// same canonical value compare equal ("0.1" == "100m", "1Gi" == "1024Mi"). Pure.
#pragma once

#include <optional>
#include <string_view>

#include "lib/json.h"

namespace iw::quantity {

// The quantity in milli-units; nullopt when `text` is not a quantity or its magnitude is beyond
// what fits (|value| above 9.2e15 units, far beyond any cpu or memory figure).
std::optional<long long> ParseMilli(std::string_view text);

// A JSON quantity (a string, or a number: the API accepts both): ParseMilli of it.
std::optional<long long> MilliOf(const json::Value* value);

// Both are quantities with the same value, or both are absent.
bool SameQuantity(const json::Value* a, const json::Value* b);

}  // namespace iw::quantity
