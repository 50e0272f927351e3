// The Deployment's `in-progress` annotation: the record of one running in-place update.
// `{"from":"<old template hash>","to":"<new template hash>","pausedByUs":true,
//   "startedAt":"<RFC3339 UTC>"}`
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hooks/json.h"

namespace iw {

struct InProgress {
  std::string from;
  std::string to;
  bool pausedByUs = true;
  std::string startedAt;

  bool operator==(const InProgress&) const = default;
};

// Parses the annotation text; nullopt (with `error`) when it is not the shape above.
std::optional<InProgress> ParseInProgress(std::string_view text, std::string& error);
// Serialises with keys in the order above, so equal records give equal text.
std::string SerializeInProgress(const InProgress& record);

// Reads the annotation from a Deployment; nullopt when absent. `error` is set when present but
// malformed (the caller decides: the mutator treats it as absent-and-restored, the loop aborts).
std::optional<InProgress> ReadInProgress(const json::Value& deployment, std::string& error);

// The stable hash of a pod template (spec.template of a Deployment or ReplicaSet), ignoring the
// `pod-template-hash` label: the first 10 hex digits of SHA-256 over the template's canonical JSON
// (keys sorted, no whitespace, json::SerializeCanonical). Equal templates hash equal in every
// process and every version of this binary.
std::string TemplateHash(const json::Value& podTemplate);

}  // namespace iw
