// The query string of an HTTP request (an API request, the loop's /holdz): percent-encoded values
// (RFC 3986) joined as key=value pairs with '&'. Pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace iw::kube {

// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string QueryEscape(std::string_view value);

// Appends `key`=QueryEscape(`value`) to the query `q`, after a '&' unless `q` is empty.
void AppendQuery(std::string& q, std::string_view key, std::string_view value);

// The value of `key` in the query `q`, percent-decoded ('+' is a space); nullopt when the key is
// absent or its value holds a malformed escape. The first occurrence counts.
std::optional<std::string> QueryValue(std::string_view q, std::string_view key);

}  // namespace iw::kube
