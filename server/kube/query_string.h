// The query string of an API request: percent-encoded values (RFC 3986) joined as key=value pairs
// with '&'. Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace iw::kube {

// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string QueryEscape(std::string_view value);

// Appends `key`=QueryEscape(`value`) to the query `q`, after a '&' unless `q` is empty.
void AppendQuery(std::string& q, std::string_view key, std::string_view value);

}  // namespace iw::kube
