// libFuzzer target: JSON Patch diff and apply. The input is two JSON documents separated by a
// NUL byte; the property apply(diff(a, b), a) == b must hold, and applying the input as a patch
// must never crash.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "lib/json.h"
#include "lib/json_patch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t cut = input.find('\0');
  std::string_view left = input.substr(0, cut);
  std::string_view right =
      cut == std::string_view::npos ? std::string_view{} : input.substr(cut + 1);
  iw::json::Document a, b;
  if (!iw::json::ParseUntrusted(left, a).ok()) return 0;
  if (!right.empty() && !iw::json::ParseUntrusted(right, b).ok()) return 0;
  if (right.empty()) b.CopyFrom(a, b.GetAllocator());

  iw::json::Document patch;
  iw::json::Value ops = iw::json_patch::Diff(a, b, patch.GetAllocator());
  iw::json::Document applied;
  applied.CopyFrom(a, applied.GetAllocator());
  if (!iw::json_patch::Apply(ops, applied).ok()) __builtin_trap();  // a diff must always apply
  if (iw::json::SerializeCanonical(applied) != iw::json::SerializeCanonical(b)) __builtin_trap();

  // The right-hand document used as a patch on the left: errors are fine, crashes are not.
  iw::json::Document target;
  target.CopyFrom(a, target.GetAllocator());
  (void)iw::json_patch::Apply(b, target);
  return 0;
}
