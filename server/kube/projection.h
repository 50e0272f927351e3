// What an informer keeps of each object it caches: a projection writes the parts of a whole
// object to keep. Thread safety: a projection is a pure function; the ones made here may be called
// from several threads at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/json.h"

namespace iw::kube {

// Writes into `out` (allocating from `alloc`) the parts of `full` to keep.
using Projection =
    std::function<void(const json::Value& full, json::Value& out, json::Allocator& alloc)>;

// Keeps only the listed paths: dot-separated member names; a segment ending in "[]" is an array
// whose elements keep the rest of the path ("spec.containers[].image"). Paths sharing a prefix
// merge ("spec.containers[].name" + "spec.containers[].image" keep both per container, in order).
// A path naming an object keeps it whole ("metadata.labels").
Projection KeepFields(const std::vector<std::string>& paths);

}  // namespace iw::kube
