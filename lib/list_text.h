// ListText: the comma-separated lists the describers write into messages ("label a=b, finalizer
// x"). Pure.
#pragma once

#include <string>
#include <string_view>

namespace iw {

// Appends `item` to the list in `out`, after `separator` unless the list is empty.
inline void AppendItem(std::string& out, std::string_view item, std::string_view separator = ", ") {
  if (!out.empty()) out += separator;
  out += item;
}

}  // namespace iw
