#include "server/kube/transport_error.h"

#include <string_view>

namespace iw::kube {

bool NotSent(httplib::Error error) {
  return error == httplib::Error::Connection || error == httplib::Error::SSLConnection ||
         error == httplib::Error::ConnectionTimeout;
}

bool Permanent(httplib::Error error) {
  return error == httplib::Error::SSLServerVerification ||
         error == httplib::Error::SSLLoadingCerts || error == httplib::Error::BindIPAddress;
}

std::string DescribeTransportError(httplib::Error error) {
  std::string_view what;
  switch (error) {
    case httplib::Error::Connection:
      what = "could not connect";
      break;
    case httplib::Error::ConnectionTimeout:
      what = "connect timed out";
      break;
    case httplib::Error::Read:
      what = "read failed or timed out";
      break;
    case httplib::Error::Write:
      what = "write failed or timed out";
      break;
    case httplib::Error::SSLConnection:
      what = "TLS handshake failed";
      break;
    case httplib::Error::SSLLoadingCerts:
      what = "cannot load the CA bundle";
      break;
    case httplib::Error::SSLServerVerification:
      what = "the server certificate did not verify against the CA bundle";
      break;
    case httplib::Error::Canceled:
      what = "canceled";
      break;
    default:
      what = "transport error";
      break;
  }
  return std::string(what) + " (" + httplib::to_string(error) + ")";
}

}  // namespace iw::kube
