#include "server/kube/client_config.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include "lib/file.h"
#include "server/kube/text_util.h"

#ifndef IW_VERSION
#define IW_VERSION "0.1.0"
#endif

namespace iw::kube {

namespace {

std::optional<int> ParsePort(std::string_view text) {
  int port = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || p != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

std::string DefaultUserAgent() {
  return std::string("inplace-webhook/") + IW_VERSION;
}

StatusOr<ClientConfig> ClientConfig::InCluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Status::InvalidArgument(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(or pass --api-server)");
  }
  return InClusterFrom(host, port, kServiceAccountDir);
}

StatusOr<ClientConfig> ClientConfig::InClusterFrom(std::string_view host, std::string_view port,
                                                   std::string_view serviceAccountDir) {
  ClientConfig c;
  c.scheme = "https";
  c.host = std::string(host);
  if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']') {
    c.host = c.host.substr(1, c.host.size() - 2);
  }
  if (c.host.empty()) {
    return Status::InvalidArgument("KUBERNETES_SERVICE_HOST is empty");
  }
  auto p = ParsePort(port);
  if (!p) {
    return Status::InvalidArgument("KUBERNETES_SERVICE_PORT is not a port number: " +
                                   std::string(port));
  }
  c.port = *p;
  std::string dir(serviceAccountDir);
  c.tokenFile = dir + "/token";
  c.caFile = dir + "/ca.crt";
  StatusOr<std::string> token = ReadFile(c.tokenFile);
  if (!token.ok()) return token.status().Prefixed("the service-account token");
  if (Trim(*token).empty()) {
    return Status::IOError("the service-account token: " + c.tokenFile + " is empty");
  }
  if (StatusOr<std::string> ca = ReadFile(c.caFile); !ca.ok()) {
    return ca.status().Prefixed("the service-account CA bundle");
  }
  // Optional: without it the namespace comes from the flags.
  if (StatusOr<std::string> ns = ReadFile(dir + "/namespace"); ns.ok()) {
    c.namespaceName = Trim(*ns);
  }
  return c;
}

StatusOr<ClientConfig> ClientConfig::FromUrl(std::string_view url, std::string_view tokenFile,
                                             std::string_view caFile) {
  ClientConfig c;
  std::string_view rest;
  if (url.starts_with("https://")) {
    c.scheme = "https";
    c.port = 443;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    c.scheme = "http";
    c.port = 80;
    rest = url.substr(7);
  } else {
    return Status::InvalidArgument("--api-server must start with http:// or https://: " +
                                   std::string(url));
  }
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos) {
    return Status::InvalidArgument("--api-server must not have a query or fragment: " +
                                   std::string(url));
  }
  std::string_view portText;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("--api-server has an unterminated IPv6 address: " +
                                     std::string(url));
    }
    c.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return Status::InvalidArgument("--api-server has junk after the IPv6 address: " +
                                       std::string(url));
      }
      portText = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    c.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) portText = authority.substr(colon + 1);
  }
  if (c.host.empty() || c.host.find('@') != std::string::npos) {
    return Status::InvalidArgument("--api-server has no usable host: " + std::string(url));
  }
  if (!portText.empty() || authority.ends_with(":")) {
    auto p = ParsePort(portText);
    if (!p) {
      return Status::InvalidArgument("--api-server has an invalid port: " + std::string(url));
    }
    c.port = *p;
  }
  while (path.ends_with("/")) path.remove_suffix(1);
  c.basePath = std::string(path);
  c.tokenFile = std::string(tokenFile);
  c.caFile = std::string(caFile);
  if (!c.tokenFile.empty()) {
    if (StatusOr<std::string> token = ReadFile(c.tokenFile); !token.ok()) {
      return token.status().Prefixed("--token-file");
    }
  }
  if (!c.caFile.empty()) {
    if (c.scheme != "https") {
      return Status::InvalidArgument("--certificate-authority needs an https:// --api-server");
    }
    if (StatusOr<std::string> ca = ReadFile(c.caFile); !ca.ok()) {
      return ca.status().Prefixed("--certificate-authority");
    }
  }
  return c;
}

std::string ClientConfig::Url() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + ":" + std::to_string(port);
}

}  // namespace iw::kube
