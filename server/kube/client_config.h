// How the API client reaches the API server: its address, credentials and limits (ClientConfig),
// read from the pod's service account (InCluster) or from flags (FromUrl). Every failure to build
// one is a Status naming the variable, file or flag at fault.
//
// Thread safety: a ClientConfig is a plain value; the Client holds its own copy, never changed,
// which any thread may read (Client::Config).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "lib/status.h"

namespace iw::kube {

// Directory of the mounted service-account credentials in a pod.
inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

// "inplace-webhook/<version>" (IW_VERSION when the build defines it).
std::string DefaultUserAgent();

struct ClientConfig {
  std::string scheme = "https";  // "http" or "https"
  std::string host;              // name or IP (IPv6 without brackets)
  int port = 443;
  std::string basePath;       // prefix of every request path ("" or e.g. "/k8s/clusters/c-1")
  std::string tokenFile;      // bearer token, re-read as it rotates; empty: no Authorization header
  std::string caFile;         // https: CA bundle to verify the server; empty: the system store
  std::string namespaceName;  // in-cluster: the pod's namespace (service-account file), else ""
  std::string userAgent = DefaultUserAgent();

  // Client-side rate limit (token bucket; qps <= 0 disables it). client-go's 5/10 is meant for
  // kubectl-like tools: a controller that starts several informers, renews a Lease every few
  // seconds and patches pods in bursts during a rollout would queue behind it, and the API
  // server already protects itself with priority and fairness. 50/100 keeps a runaway loop from
  // flooding the server while never being the bottleneck of a normal rollout.
  double qps = 50;
  int burst = 100;

  std::chrono::milliseconds connectTimeout{5000};
  std::chrono::milliseconds requestTimeout{30000};  // read/write inactivity of one attempt
  int maxRetries = 5;                               // attempts after the first
  std::chrono::milliseconds retryBaseDelay{200};    // first backoff; doubles per attempt
  std::chrono::milliseconds retryMaxDelay{8000};    // backoff cap
  std::chrono::seconds maxRetryAfter{30};           // cap on a server's Retry-After
  std::chrono::milliseconds tokenRecheck{5000};     // token file stat() at most this often
  size_t maxIdleConnections = 8;

  // In a pod: KUBERNETES_SERVICE_HOST/PORT, and ca.crt, token and namespace from
  // kServiceAccountDir. Failure: InvalidArgument when the variables are unset, empty or not a
  // host and port; IOError when the token cannot be read or is empty, or the CA bundle cannot be
  // read (the namespace file is optional).
  static StatusOr<ClientConfig> InCluster();
  // The same from explicit values (tests).
  static StatusOr<ClientConfig> InClusterFrom(std::string_view host, std::string_view port,
                                              std::string_view serviceAccountDir);
  // `url` is http://HOST[:PORT][/prefix] or https://...; `tokenFile` and `caFile` may be empty.
  // Failure: InvalidArgument when `url` is not such a URL or a CA file is given for http://;
  // IOError when a given file cannot be read. The message names the flag (--api-server,
  // --token-file, --certificate-authority).
  static StatusOr<ClientConfig> FromUrl(std::string_view url, std::string_view tokenFile,
                                        std::string_view caFile);

  // "https://host:port" (brackets around IPv6, no basePath), for logs.
  std::string Url() const;
};

}  // namespace iw::kube
