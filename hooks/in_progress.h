// The Deployment's `in-progress` annotation: the record of one running in-place update.
// `{"from":"<old template hash>","to":"<new template hash>","pausedByUs":true,
//   "startedAt":"<RFC3339 UTC>"}`, plus `"abortRequestedAt":"<RFC3339 UTC>"` once the user's abort
// command has been admitted (DESIGN.md §9.8): absent from records without it, so their text is
// unchanged.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lib/json.h"
#include "lib/kube_objects.h"
#include "lib/status.h"

namespace iw {

struct InProgress {
  std::string from;
  std::string to;
  bool pausedByUs = true;
  std::string startedAt;
  std::string abortRequestedAt = {};  // "" until an abort is requested

  bool operator==(const InProgress&) const = default;
};

// Parses the annotation text; InvalidArgument when it is not the shape above.
StatusOr<InProgress> ParseInProgress(std::string_view text);
// The record in `text` when there is one and it parses; nullopt otherwise (for a decision that
// treats a malformed record written by someone else as absent).
std::optional<InProgress> ParseInProgressOrNone(std::optional<std::string_view> text);
// Serialises with keys in the order above, so equal records give equal text.
std::string SerializeInProgress(const InProgress& record);

// Reads the annotation from a Deployment or StatefulSet: nullopt when absent, InvalidArgument when
// present but malformed (the caller decides: the mutator treats it as absent-and-restored, the loop
// aborts).
StatusOr<std::optional<InProgress>> ReadInProgress(const kube::ObjectView& workload);

// The stable hash of a pod template (spec.template of a Deployment or ReplicaSet), ignoring the
// `pod-template-hash` label. Algorithm: copy the template; delete metadata.labels
// ["pod-template-hash"] (and the labels map itself if that leaves it empty, as the Deployment
// controller's EqualIgnoreHash treats an empty map like an absent one); serialise with
// json::SerializeCanonical (object keys sorted by byte order at every level, no whitespace, strings
// as UTF-8 with JSON escapes); SHA-256 (OpenSSL EVP) of those bytes; the first 10 lowercase hex
// digits. Equal templates hash equal in every process and every version of this binary. Not the
// Deployment controller's FNV pod-template-hash: never compare the two.
std::string TemplateHash(const kube::PodTemplate& podTemplate);

}  // namespace iw
