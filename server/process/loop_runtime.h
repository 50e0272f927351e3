// The controller half of the process (DESIGN.md §9.3, §9.6, §9.7, §9.8): the in-place loop with
// its API client, the leader elector and its write fence, the access monitor, and the certificate
// controller when certificates.mode=controller; started once the API server confirmed the loop's
// identity. `serve` builds it from its options and renders its metrics; nothing else of the
// process reaches into it.
//
// Thread safety: Create, Start and Stop from the owner's thread (Stop joins the identity check's
// thread, then stops the elector, the loop and the certificate controller); LoopAlive and NotReady
// from any thread (the probes and /metrics).
#pragma once

#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "lib/status.h"
#include "server/certs/cert_controller.h"
#include "server/kube/kube_client.h"
#include "server/loop/access_monitor.h"
#include "server/loop/hold_answerer.h"
#include "server/loop/leader_election.h"
#include "server/loop/loop.h"
#include "server/loop/loop_metrics.h"
#include "server/process/metrics.h"
#include "server/process/options.h"

namespace iw::process {

// The in-place loop and what it needs: an API client, metrics, and (when electing) the Lease.
// Absent when the loop is disabled or no API server is configured. The loop is event-driven: it
// watches Deployments, ReplicaSets and opted-in pods (its caches exist only while it leads).
class LoopRuntime {
 public:
  // The runtime, or nullptr when there is nothing to run. Failure: InvalidArgument when the
  // configuration is wrong, or the failure of ClientConfig::FromUrl or ClientConfig::InCluster.
  static StatusOr<std::unique_ptr<LoopRuntime>> Create(const cli::ServeOptions& o,
                                                       metrics::Registry& metrics);

  // Whether a loop is known to run: ours (leading, or without election), or the Lease holder's;
  // never while this replica is refused a permission the loop needs (§9.8): its /loopz then
  // answers "no loop" (and its /readyz fails).
  bool LoopAlive() const;

  // The loop itself only once the API server confirmed its identity: a SelfSubjectReview must
  // name --controller-user (DESIGN.md §9.6), asked on a thread and retried until answered;
  // NotReady() says why not meanwhile.
  void Start();

  // "" once the identity is verified; else why the loop does not run (for /readyz). A controller
  // (--role=controller) is also not ready while it is refused a permission the loop needs, which
  // `kubectl get pods` shows; with the webhook in the same process (--role=all) it stays ready,
  // or the fail-closed webhooks would refuse every write for the loop's sake.
  std::string NotReady() const;

  // Stops the identity check, releases the Lease (which stops the loop), stops the loop, and fails
  // the client's pending retries so nothing outlives the process's shutdown.
  void Stop();

  LoopRuntime(kube::ClientConfig config, std::string controllerUser, std::string identity,
              std::string eventNamespace);
  ~LoopRuntime() { Stop(); }
  kube::Client& ApiClient() { return *client_; }
  // The answer to the StatefulSet controller's pod DELETEs (DESIGN.md §4.8), from this process:
  // /holdz on the probe port, and the webhook's own question with --role=all. Any replica answers
  // (a GET, leader or not).
  loop::HoldAnswerer& Hold() { return *hold_; }
  LoopRuntime(const LoopRuntime&) = delete;
  LoopRuntime& operator=(const LoopRuntime&) = delete;

 private:
  void SetProblem(std::string problem);
  // A Warning Event on this pod (when POD_NAME names one): what `kubectl describe pod` shows.
  void RecordPodEvent(std::string_view reason, const std::string& message);
  void VerifyThenRun(std::stop_token stop);
  // The first access check (retried until the API server answers every question), then the
  // periodic one, and the elector (or, without election, the loop). A replica refused some
  // permission still starts its elector, which does not campaign until a later check finds it
  // able (DESIGN.md §9.8).
  void CheckAccessThenRun(std::stop_token stop);

  std::unique_ptr<kube::Client> client_;
  const std::string controllerUser_;
  const std::string identity_;
  const std::string eventNamespace_;
  mutable std::mutex identityMu_;
  std::string identityProblem_;
  bool loopDisabled_ = false;          // --disable-loop: only the certificate controller runs
  bool accessGatesReadiness_ = false;  // --role=controller
  loop::LoopMetrics loopMetrics_;
  std::unique_ptr<server::AccessMonitor> access_;
  std::unique_ptr<leader::LeaderElector> elector_;
  std::unique_ptr<leader::FencedApi> fenced_;
  std::unique_ptr<loop::Loop> loop_;
  std::unique_ptr<loop::HoldAnswerer> hold_;
  std::jthread starter_;  // joined in Stop() before the members it uses go
  std::unique_ptr<certs::Controller> certs_;
};

}  // namespace iw::process
