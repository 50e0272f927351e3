// The certificate controller of --manage-certificates (DESIGN.md §9.7): keeps a CA and a serving
// certificate in one Secret, rotates them before they expire (hooks/cert_rotation.h decides),
// and writes the CA bundle into the caBundle of every webhook of its webhook configurations.
// Needs API credentials, so it runs in the controller role; webhook pods mount the Secret's
// tls.crt/tls.key and reload them as any certificate files.
//
// Every replica may run one: writes carry the Secret's resourceVersion, so of two replicas that
// decide at once one wins and the other re-reads and agrees. Secret keys: ca.crt, ca.key
// (current CA), ca-next.crt/ca-next.key (staged), ca-previous.crt (kept after a promotion),
// ca-bundle.crt (what the caBundle holds), tls.crt, tls.key. The Secret must exist (the chart
// creates it empty): it is read and patched by name only.
//
// Thread safety: Start() at most once and Stop() (joins; idempotent; the destructor calls it)
// from the owner's thread. Passes run on the controller's thread, which calls the API and
// `options.now`; RunOnce() from one thread at a time (only that thread once started; tests call
// it unstarted). DnsNames() and RenderMetrics() from any thread: `mu_` guards stopping_ and the
// metrics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hooks/cert_rotation.h"
#include "hooks/kube_api.h"
#include "lib/status.h"

namespace iw::certs {

struct ControllerOptions {
  std::string namespaceName;
  std::string secretName;
  std::string
      serviceName;  // the serving certificate's names: NAME.NS.svc, NAME.NS.svc.cluster.local
  std::string webhookConfiguration;  // the Mutating- and ValidatingWebhookConfiguration's name
  Policy policy;
  std::chrono::milliseconds checkInterval{
      60000};                    // re-read Secret and configurations at least this often
  std::function<int64_t()> now;  // Unix seconds; default: the system clock
};

class Controller {
 public:
  Controller(kube::Api& api, ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void Start();
  void Stop();

  // One pass: read, decide, write the Secret (at most one step), publish the bundle; `next` is
  // when the next pass is due (also on failure). A write that loses to another replica's
  // (409 Conflict) is no failure: `next` is then soon. Failure: NotFound when the Secret does not
  // exist, IOError when an API call fails (the message names the object, the HTTP code and the
  // server's message), or the step's failure from cert_crypto.h prefixed with its name
  // ("create-ca: ..."); the pass ends at the first failure.
  Status RunOnce(std::chrono::milliseconds& next);

  // The DNS names of the serving certificate.
  std::vector<std::string> DnsNames() const;

  void RenderMetrics(std::string& out) const;

 private:
  // Every webhook's caBundle = base64(bundle) in both configurations (`write`: make it so);
  // `published`: both already hold it, or now do. Both are tried; failure: IOError, the first
  // configuration's that could not be read or written.
  Status Publish(const std::string& bundle, bool& published, bool write);
  // The same for the configuration at `path` (`want` is the base64 bundle); IOError when it
  // cannot be read or written.
  Status PublishTo(const std::string& path, const std::string& want, bool& published, bool write);

  kube::Api& api_;
  ControllerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  // Metrics (under mu_).
  std::vector<std::pair<std::string, uint64_t>> steps_;
  uint64_t errors_ = 0, bundleWrites_ = 0;
  int64_t caNotAfter_ = 0, servingNotAfter_ = 0;
};

}  // namespace iw::certs
