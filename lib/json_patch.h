// RFC 6902 JSON Patch: compute the patch between two documents, and apply a patch.
// Handlers never assemble operations by hand: they mutate a copy of the object and call Diff.
#pragma once

#include <optional>
#include <string>

#include "lib/json.h"
#include "lib/status.h"

namespace iw::json_patch {

// Returns a JSON Patch array (in `alloc`) that turns `from` into `to`:
// apply(Diff(a, b), a) == b for every pair of documents. Objects are diffed member by member
// (add / remove / replace, keys escaped per RFC 6901); arrays element by element for the common
// prefix, then add/remove at the tail; a type change is one replace. Equal documents give [].
json::Value Diff(const json::Value& from, const json::Value& to, json::Allocator& alloc);

// Applies `patch` (an array of operations: add, remove, replace, move, copy, test) to `doc` in
// place, atomically: on failure (InvalidArgument) `doc` is left unchanged and the message names
// the failing operation's index and path.
Status Apply(const json::Value& patch, json::Document& doc);

}  // namespace iw::json_patch
