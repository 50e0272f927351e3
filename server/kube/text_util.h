// Text helpers of the API client's files: the whole contents of a small file (the token, the CA
// bundle, the namespace) and whitespace trimming (of those files, of header values and of error
// bodies). Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace iw::kube {

// `s` without leading and trailing whitespace (std::isspace).
std::string Trim(std::string_view s);

}  // namespace iw::kube
