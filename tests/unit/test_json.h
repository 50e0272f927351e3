// Helpers shared by the unit tests: JSON text parsed the way the server does, and fixture files.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "lib/json.h"
#include "lib/kube_objects.h"

namespace iw::test {

// Parses `text`, failing the current test (with the text as message) when it does not parse.
inline json::Document Parse(std::string_view text) {
  json::Document d;
  Status err = json::ParseUntrusted(text, d);
  REQUIRE_MESSAGE(err.ok(), std::string(text));
  return d;
}

// The view of a test object, failing the current test when its shape is not one Kubernetes gives
// (views are obtainable only through that check). The value must outlive the view.
template <class View>
View ViewOf(const json::Value& object) {
  StatusOr<View> v = View::From(object);
  REQUIRE_MESSAGE(v.ok(), v.status().message());
  return *v;
}
inline kube::Deployment AsDeployment(const json::Value& object) {
  return ViewOf<kube::Deployment>(object);
}
inline kube::ReplicaSet AsReplicaSet(const json::Value& object) {
  return ViewOf<kube::ReplicaSet>(object);
}
inline kube::StatefulSet AsStatefulSet(const json::Value& object) {
  return ViewOf<kube::StatefulSet>(object);
}
inline kube::Pod AsPod(const json::Value& object) {
  return ViewOf<kube::Pod>(object);
}
inline kube::PodTemplate AsTemplate(const json::Value& object) {
  return ViewOf<kube::PodTemplate>(object);
}
inline kube::ObjectView AsObject(const json::Value& object) {
  return ViewOf<kube::ObjectView>(object);
}

// The bytes of the file at `path` ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace iw::test
