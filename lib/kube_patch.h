// PatchBuilder: the body of a merge or strategic-merge patch of a Kubernetes object, built by
// what it sets instead of by JSON paths (DESIGN.md §6.1): the readers are lib/kube_objects.h, the
// writer is this. Keys appear in the order they are first set; setting a key again replaces its
// value. Containers and conditions are lists merged by their key (`name`, `type`) as a strategic
// merge patch of a pod merges them: one entry per key, whatever is set on it.
//
// Thread safety: none; a builder is one writer's value.
#pragma once

#include <optional>
#include <string_view>

#include "lib/json.h"

namespace iw::kube {

class PatchBuilder {
 public:
  PatchBuilder();
  // Goes on building `body` (a patch body made by a builder).
  explicit PatchBuilder(json::Document body);

  // metadata.labels[key] / metadata.annotations[key]; nullopt writes null (removes the key).
  PatchBuilder& Label(std::string_view key, std::optional<std::string_view> value);
  PatchBuilder& Annotation(std::string_view key, std::optional<std::string_view> value);
  // spec.paused.
  PatchBuilder& Paused(bool paused);
  // spec.template: a merge diff of the pod template (a value of this builder's allocator, moved
  // in).
  PatchBuilder& Template(json::Value&& diff);
  // spec.containers[name].image.
  PatchBuilder& ContainerImage(std::string_view container, std::string_view image);
  // spec.containers[name].resources.<kind>[resource] ("requests"/"limits", "cpu"/"memory").
  PatchBuilder& ContainerResource(std::string_view container, std::string_view kind,
                                  std::string_view resource, std::string_view quantity);
  // status.conditions[type]: every field of the condition (lastUpdateTime, which Deployment
  // conditions have and pod conditions do not, only when not empty).
  struct Condition {
    std::string_view type, status, reason, message, lastUpdateTime, lastTransitionTime;
  };
  PatchBuilder& SetCondition(const Condition& condition);
  // The metadata of `other` (its labels and annotations), merged into this one's; a key both set
  // takes `other`'s value.
  PatchBuilder& MergeMetadata(const PatchBuilder& other);

  // Nothing is set.
  bool empty() const { return body_.ObjectEmpty(); }
  json::Allocator& allocator() { return body_.GetAllocator(); }
  const json::Value& body() const { return body_; }
  // The body; the builder is empty afterwards.
  json::Document Take();

 private:
  json::Value& Metadata(std::string_view map);
  json::Value& Entry(std::string_view section, std::string_view list, std::string_view keyField,
                     std::string_view key);
  json::Document body_;
};

}  // namespace iw::kube
