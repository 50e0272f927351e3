#include "hooks/resize_support.h"

#include <charconv>
#include <string>

namespace iw::resize_support {

namespace {

// major.minor of "v1.33.4", "1.34", "v1.35.0-gke.100"; nullopt when it is not one.
std::optional<std::pair<int, int>> MajorMinor(std::string_view v) {
  if (v.starts_with('v') || v.starts_with('V')) v.remove_prefix(1);
  if (v.empty() || v[0] < '0' || v[0] > '9') return std::nullopt;  // from_chars reads a '-'

  int major = 0, minor = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), major);
  if (ec != std::errc() || p == v.data() + v.size() || *p != '.') return std::nullopt;
  const char* start = p + 1;
  if (start == v.data() + v.size() || *start < '0' || *start > '9') return std::nullopt;
  auto [q, ec2] = std::from_chars(start, v.data() + v.size(), minor);
  if (ec2 != std::errc() || q == start) return std::nullopt;
  // Then nothing, ".patch", "+", or "-suffix" (EKS and GKE put their build after the minor too).
  if (q != v.data() + v.size() && *q != '.' && *q != '-' && *q != '+') return std::nullopt;
  return std::pair{major, minor};
}

bool AtLeast(std::pair<int, int> have, int major, int minor) {
  return have.first > major || (have.first == major && have.second >= minor);
}

}  // namespace

StatusOr<Support> FromVersion(std::string_view version) {
  std::optional<std::pair<int, int>> mm = MajorMinor(version);
  if (!mm) {
    return Status::InvalidArgument("not a Kubernetes version: \"" + std::string(version) +
                                   "\" (want e.g. v1.33.4)");
  }
  return Support{AtLeast(*mm, 1, 33), AtLeast(*mm, 1, 34)};
}

Support FromDiscovery(bool resizeServed, std::string_view gitVersion) {
  if (!resizeServed) return Support{};
  std::optional<std::pair<int, int>> mm = MajorMinor(gitVersion);
  return Support{true, mm && AtLeast(*mm, 1, 34)};
}

StatusOr<Support> FromDiscoveryAnswers(const json::Value& apiV1, const json::Value& version) {
  if (!apiV1.IsObject() || !apiV1.HasMember("resources") || !apiV1["resources"].IsArray()) {
    return Status::InvalidArgument("/api/v1 is not an APIResourceList (no resources)");
  }
  if (!version.IsObject() || !version.HasMember("gitVersion") ||
      !version["gitVersion"].IsString()) {
    return Status::InvalidArgument("/version has no gitVersion");
  }
  bool served = false;
  for (const json::Value& r : apiV1["resources"].GetArray()) {
    if (r.IsObject() && r.HasMember("name") && r["name"].IsString() &&
        std::string_view(r["name"].GetString(), r["name"].GetStringLength()) == "pods/resize") {
      served = true;
    }
  }
  const json::Value& gv = version["gitVersion"];
  return FromDiscovery(served, std::string_view(gv.GetString(), gv.GetStringLength()));
}

StatusOr<std::optional<Support>> ParseFlag(std::string_view flag) {
  if (flag == "auto") return std::optional<Support>();
  if (flag == "off") return std::optional<Support>(Support{});
  StatusOr<Support> s = FromVersion(flag);
  if (!s.ok()) {
    return Status::InvalidArgument("--pod-resize: want auto, off or a Kubernetes version, not \"" +
                                   std::string(flag) + "\"");
  }
  return std::optional<Support>(*s);
}

}  // namespace iw::resize_support
