// cpp-httplib's transport errors (no HTTP answer arrived): what they mean for the request (was it
// sent? would a retry fail the same way?) and their words in a Result's message. Pure functions.
// Internal to the client's sources: this header includes <httplib.h>.
#pragma once

#include <httplib.h>

#include <string>

namespace iw::kube {

// The connection was never established, so the request cannot have reached the server.
bool NotSent(httplib::Error error);

// Errors that repeat identically on every attempt.
bool Permanent(httplib::Error error);

// A transport error in words, with httplib's name for it.
std::string DescribeTransportError(httplib::Error error);

}  // namespace iw::kube
