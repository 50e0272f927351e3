// inplace-webhook: the process. `serve` runs the HTTPS webhook (and the loop); `review` answers
// one AdmissionReview offline through the same codec and handlers.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "hooks/admission.h"
#include "hooks/identity_check.h"
#include "hooks/plan.h"
#include "lib/status.h"
#include "lib/stop_sleep.h"
#include "server/certs/cert_controller.h"
#include "server/http/review_codec.h"
#include "server/http/webhook_server.h"
#include "server/kube/kube_client.h"
#include "server/kube/resize_discovery.h"
#include "server/loop/access_monitor.h"
#include "server/loop/leader_election.h"
#include "server/loop/loop.h"
#include "server/loop/loop_metrics.h"
#include "server/loop/loop_status.h"
#include "server/process/log.h"
#include "server/process/metrics.h"
#include "server/process/options.h"

namespace {

int Review(const iw::cli::ReviewOptions& o) {
  const iw::admission::Route* route = iw::admission::FindRoute(o.path);
  if (route == nullptr) {
    std::cerr << "unknown --path " << o.path << "; routes: " << iw::admission::RoutePaths() << "\n";
    return 2;
  }
  std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  iw::admission::Context ctx;
  ctx.controllerUser = o.controllerUser;
  ctx.resize = o.resize;
  iw::review::Reply reply = iw::review::Answer(*route, body, "application/json", ctx);
  std::cout << reply.body << "\n";
  if (!reply.decided) {
    std::cerr << "HTTP " << reply.httpStatus << ": " << reply.message << "\n";
    return 2;
  }
  return reply.allowed ? 0 : 1;
}

// The in-place loop and what it needs: an API client, metrics, and (when electing) the Lease.
// Absent when the loop is disabled or no API server is configured. The loop is event-driven: it
// watches Deployments, ReplicaSets and opted-in pods (its caches exist only while it leads).
class LoopRuntime {
 public:
  // The runtime, or nullptr when there is nothing to run. Failure: InvalidArgument when the
  // configuration is wrong, or the failure of ClientConfig::FromUrl or ClientConfig::InCluster.
  static iw::StatusOr<std::unique_ptr<LoopRuntime>> Create(const iw::cli::ServeOptions& o,
                                                           iw::metrics::Registry& metrics) {
    // --disable-loop with --manage-certificates: the API client for the certificates only (the
    // controller pods keep the webhook's certificate while the loop is off).
    if (o.role == "webhook" || (o.disableLoop && !o.managedCertificates.enabled)) {
      return std::unique_ptr<LoopRuntime>();
    }
    if (o.apiServer.empty() && std::getenv("KUBERNETES_SERVICE_HOST") == nullptr) {
      iw::log::Warn(
          "in-place loop not started: no API server (give --api-server, or run in a cluster)");
      return std::unique_ptr<LoopRuntime>();
    }
    const bool inCluster = o.apiServer.empty();
    iw::StatusOr<iw::kube::ClientConfig> config =
        inCluster
            ? iw::kube::ClientConfig::InCluster()
            : iw::kube::ClientConfig::FromUrl(o.apiServer, o.tokenFile, o.certificateAuthority);
    if (!config.ok()) return config.status();
    bool elect = o.leaderElect == "true" || (o.leaderElect == "auto" && inCluster);
    std::string leaseNamespace =
        !o.leaderElectionNamespace.empty() ? o.leaderElectionNamespace : config->namespaceName;
    if (elect && leaseNamespace.empty()) {
      return iw::Status::InvalidArgument(
          "--leader-elect needs --leader-election-namespace outside a cluster");
    }
    // One identity for the Lease holder, the Events' reportingInstance and the User-Agent, so
    // the API server's audit log, the Lease and the Events all name the same replica.
    const char* pod = std::getenv("POD_NAME");
    const std::string identity =
        pod != nullptr && *pod != '\0' ? std::string(pod) : iw::leader::DefaultIdentity();
    config->userAgent += " (" + identity + ")";
    std::string eventNamespace = config->namespaceName;
    if (const char* ns = std::getenv("POD_NAMESPACE"); ns != nullptr && *ns != '\0') {
      eventNamespace = ns;
    }
    auto rt = std::make_unique<LoopRuntime>(std::move(*config), o.server.controllerUser, identity,
                                            eventNamespace);
    rt->loopDisabled_ = o.disableLoop;
    rt->accessGatesReadiness_ = o.role == "controller";
    iw::loop::Options loopOptions;
    loopOptions.metrics = &rt->loopMetrics_;
    loopOptions.instance = identity;
    // Event-driven: --loop-resync-period-ms is only the safety resync (from the caches, no API
    // call).
    loopOptions.resyncPeriod = std::chrono::milliseconds(o.loopResyncPeriodMs);
    LoopRuntime* self = rt.get();
    rt->access_ = std::make_unique<iw::server::AccessMonitor>(
        *rt->client_,
        iw::server::AccessMonitor::Options{.onRefused = [self](const std::string& problem) {
          self->RecordPodEvent("ControllerCannotAct", problem);
        }});
    if (elect) {
      iw::leader::Options lo;
      lo.namespaceName = leaseNamespace;
      lo.identity = identity;
      if (iw::Status bad = iw::leader::CheckTiming(lo.timing); !bad.ok()) {
        return bad.Prefixed("leader election");
      }
      lo.onStartedLeading = [self] { self->loop_->Start(); };
      lo.onStoppedLeading = [self] { self->loop_->Stop(); };
      lo.mayLead = [self] { return self->access_->Able(); };
      rt->elector_ = std::make_unique<iw::leader::LeaderElector>(*rt->client_, lo);
    }
    // The loop writes only through the leader's fence (DESIGN.md §9.3): no write starts once this
    // replica cannot be sure it leads, none outlives the moment another replica may take over.
    rt->fenced_ = std::make_unique<iw::leader::FencedApi>(
        *rt->client_, rt->elector_ ? &rt->elector_->WriteFence() : nullptr,
        rt->client_->Config().requestTimeout);
    rt->loop_ = std::make_unique<iw::loop::Loop>(*rt->fenced_, loopOptions);
    if (const auto& mc = o.managedCertificates; mc.enabled) {
      // Every replica runs it, leader or not (its writes are conditional, §9.7): certificates
      // must not wait for an election.
      iw::certs::ControllerOptions co;
      co.namespaceName =
          !mc.namespaceName.empty() ? mc.namespaceName : rt->client_->Config().namespaceName;
      if (co.namespaceName.empty()) {
        return iw::Status::InvalidArgument(
            "--manage-certificates needs --cert-namespace outside a cluster");
      }
      co.secretName = mc.secretName;
      co.serviceName = mc.serviceName;
      co.webhookConfiguration = mc.webhookConfiguration;
      co.policy.caValidity = mc.caValiditySeconds;
      co.policy.caRenewBefore = mc.caRenewBeforeSeconds;
      co.policy.servingValidity = mc.validitySeconds;
      co.policy.servingRenewBefore = mc.renewBeforeSeconds;
      co.policy.overlap = mc.overlapSeconds;
      co.checkInterval = std::chrono::seconds(mc.checkIntervalSeconds);
      rt->certs_ = std::make_unique<iw::certs::Controller>(*rt->client_, co);
      metrics.AddCollector([c = rt->certs_.get()](std::string& out) { c->RenderMetrics(out); });
    }
    iw::kube::Client* client = rt->client_.get();
    iw::loop::LoopMetrics* lm = &rt->loopMetrics_;
    iw::loop::Loop* lp = rt->loop_.get();
    iw::leader::LeaderElector* el = rt->elector_.get();
    iw::server::AccessMonitor* am = rt->access_.get();
    metrics.AddCollector([client, lm, lp, el, am](std::string& out) {
      client->RenderMetrics(out);
      lm->Render(out);
      lp->RenderMetrics(out);
      if (el != nullptr) el->RenderMetrics(out);
      am->RenderMetrics(out);
    });
    iw::log::Info(
        "in-place loop configured",
        {{"apiServer", rt->client_->Config().Url()},
         {"leaderElection", elect ? "Lease " + leaseNamespace + "/inplace-webhook" : "off"},
         {"identity", identity}});
    return rt;
  }

  // Whether a loop is known to run: ours (leading, or without election), or the Lease holder's;
  // never while this replica is refused a permission the loop needs (§9.8): its /loopz then
  // answers "no loop" (and its /readyz fails).
  bool LoopAlive() const {
    if (loopDisabled_) return false;
    if (access_->Known() && !access_->Able()) return false;
    if (elector_) return elector_->LeaderKnownAlive(std::chrono::steady_clock::now());
    return loop_->Running();
  }

  // The loop itself only once the API server confirmed its identity: a SelfSubjectReview must
  // name --controller-user (DESIGN.md §9.6), asked on a thread and retried until answered;
  // NotReady() says why not meanwhile.
  void Start() {
    if (certs_) certs_->Start();
    if (loopDisabled_) return;
    starter_ = std::jthread([this](std::stop_token stop) { VerifyThenRun(stop); });
  }

  // "" once the identity is verified; else why the loop does not run (for /readyz). A controller
  // (--role=controller) is also not ready while it is refused a permission the loop needs, which
  // `kubectl get pods` shows; with the webhook in the same process (--role=all) it stays ready,
  // or the fail-closed webhooks would refuse every write for the loop's sake.
  std::string NotReady() const {
    {
      std::lock_guard lock(identityMu_);
      if (!identityProblem_.empty()) return identityProblem_;
    }
    return accessGatesReadiness_ ? access_->Problem() : "";
  }

  // Stops the identity check, releases the Lease (which stops the loop), stops the loop, and fails
  // the client's pending retries so nothing outlives the process's shutdown.
  void Stop() {
    starter_.request_stop();
    if (starter_.joinable()) starter_.join();
    access_->Stop();
    if (elector_) elector_->Stop();
    loop_->Stop();
    if (certs_) certs_->Stop();
    client_->Shutdown();
  }

  explicit LoopRuntime(iw::kube::ClientConfig config, std::string controllerUser,
                       std::string identity, std::string eventNamespace)
      : client_(std::make_unique<iw::kube::Client>(std::move(config))),
        controllerUser_(std::move(controllerUser)),
        identity_(std::move(identity)),
        eventNamespace_(std::move(eventNamespace)) {}
  ~LoopRuntime() { Stop(); }
  iw::kube::Client& ApiClient() { return *client_; }
  LoopRuntime(const LoopRuntime&) = delete;
  LoopRuntime& operator=(const LoopRuntime&) = delete;

 private:
  void SetProblem(std::string problem) {
    std::lock_guard lock(identityMu_);
    identityProblem_ = std::move(problem);
  }

  // A Warning Event on this pod (when POD_NAME names one): what `kubectl describe pod` shows.
  void RecordPodEvent(std::string_view reason, const std::string& message) {
    const char* pod = std::getenv("POD_NAME");
    if (pod == nullptr || *pod == '\0' || eventNamespace_.empty()) return;
    iw::json::Document involved(rapidjson::kObjectType);
    auto& a = involved.GetAllocator();
    iw::json::Value& meta = iw::json::EnsureObject(involved, "metadata", a);
    iw::json::SetString(meta, "name", pod, a);
    iw::json::SetString(meta, "namespace", eventNamespace_, a);
    iw::json::Document event =
        iw::rollout::MakeEvent(involved, "v1", "Pod", "Warning", reason, message,
                               iw::rollout::Clock::now(), iw::rollout::DedupEventName(pod, reason));
    iw::json::SetString(event, "reportingInstance", identity_, event.GetAllocator());
    iw::kube::DeadlineScope scope(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    iw::kube::Result r = client_->Create(iw::kube::EventsPath(eventNamespace_), event);
    if (!r.Ok() && r.code != 409) {
      iw::log::Warn("could not record the Event", {{"reason", std::string(reason)},
                                                   {"code", std::to_string(r.code)},
                                                   {"error", r.message}});
    }
  }

  void VerifyThenRun(std::stop_token stop) {
    SetProblem("verifying the loop's API identity (SelfSubjectReview)");
    for (int attempt = 0; !stop.stop_requested(); ++attempt) {
      iw::kube::Result r;
      {
        iw::kube::DeadlineScope scope(std::chrono::steady_clock::now() + std::chrono::seconds(10));
        r = client_->Create(iw::identity::kSelfSubjectReviewsPath,
                            iw::identity::SelfSubjectReview());
      }
      if (r.Ok()) {
        iw::identity::Verdict v = iw::identity::Check(r.object, controllerUser_);
        if (!v.ok) {
          SetProblem(v.message);
          iw::log::Error(
              "the in-place loop does not run: wrong identity",
              {{"user", v.username}, {"controllerUser", controllerUser_}, {"error", v.message}});
          RecordPodEvent("WrongControllerIdentity", v.message);
          return;
        }
        iw::log::Info("loop identity verified", {{"user", v.username}});
        SetProblem("checking what the loop may do (SelfSubjectAccessReview)");
        CheckAccessThenRun(stop);
        return;
      }
      const std::string why = "cannot verify the loop's API identity (SelfSubjectReview): HTTP " +
                              std::to_string(r.code) + (r.message.empty() ? "" : ": " + r.message);
      SetProblem(why);
      auto delay = iw::kube::Backoff(std::min(attempt, 6), std::chrono::milliseconds(500),
                                     std::chrono::seconds(30));
      iw::log::Warn(why, {{"retryInMs", std::to_string(delay.count())}});
      iw::SleepUnlessStopped(delay, stop);
    }
  }

  // The first access check (retried until the API server answers every question), then the
  // periodic one, and the elector (or, without election, the loop). A replica refused some
  // permission still starts its elector, which does not campaign until a later check finds it
  // able (DESIGN.md §9.8).
  void CheckAccessThenRun(std::stop_token stop) {
    for (int attempt = 0; !access_->CheckNow(); ++attempt) {
      auto delay = iw::kube::Backoff(std::min(attempt, 6), std::chrono::milliseconds(500),
                                     std::chrono::seconds(30));
      if (!iw::SleepUnlessStopped(delay, stop)) return;
    }
    SetProblem("");
    access_->Start();
    if (elector_)
      elector_->Start();
    else
      loop_->Start();
  }

  std::unique_ptr<iw::kube::Client> client_;
  const std::string controllerUser_;
  const std::string identity_;
  const std::string eventNamespace_;
  mutable std::mutex identityMu_;
  std::string identityProblem_;
  bool loopDisabled_ = false;          // --disable-loop: only the certificate controller runs
  bool accessGatesReadiness_ = false;  // --role=controller
  iw::loop::LoopMetrics loopMetrics_;
  std::unique_ptr<iw::server::AccessMonitor> access_;
  std::unique_ptr<iw::leader::LeaderElector> elector_;
  std::unique_ptr<iw::leader::FencedApi> fenced_;
  std::unique_ptr<iw::loop::Loop> loop_;
  std::jthread starter_;  // joined in Stop() before the members it uses go
  std::unique_ptr<iw::certs::Controller> certs_;
};

int Serve(const iw::cli::ServeOptions& o) {
  iw::log::Configure(o.logLevel, o.logFormat);
  // SIGTERM/SIGINT are taken by sigwait below; SIGPIPE (a peer gone mid-write) is ignored.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  iw::metrics::Registry metrics;
  iw::StatusOr<std::unique_ptr<LoopRuntime>> created = LoopRuntime::Create(o, metrics);
  if (!created.ok()) {
    iw::log::Error("cannot start the in-place loop", {{"error", created.status().message()}});
    return 1;
  }
  std::unique_ptr<LoopRuntime> loop = std::move(*created);
  if (o.managedCertificates.enabled && !loop) {
    iw::log::Error("cannot start",
                   {{"error", "--manage-certificates needs the API client (an API server)"}});
    return 1;
  }
  // The pod webhook injects the readiness gate only while a loop is known to set it (§8.6): this
  // process's own knowledge (role all or controller, which also answers /loopz), or, in the
  // credential-free webhook role, the controller's /loopz answer (§9.4).
  std::unique_ptr<iw::server::LoopStatusPoller> poller;
  if (!o.loopStatusUrl.empty()) {
    if (iw::Status err = iw::server::LoopStatusPoller::Validate(o.loopStatusUrl); !err.ok()) {
      iw::log::Error("cannot start", {{"error", err.message()}});
      return 1;
    }
    poller = std::make_unique<iw::server::LoopStatusPoller>(
        iw::server::LoopStatusPoller::Options{.url = o.loopStatusUrl});
    metrics.AddCollector([p = poller.get()](std::string& out) { p->RenderMetrics(out); });
  }
  // --pod-resize (DESIGN.md §3.1): given, or asked of the API server by the process that has
  // credentials; the controller role answers no reviews.
  std::unique_ptr<iw::server::ResizeDiscovery> discovery;
  iw::resize_support::Support fixedResize;
  if (o.podResize) {
    fixedResize = *o.podResize;
  } else if (loop && o.role != "controller") {
    discovery = std::make_unique<iw::server::ResizeDiscovery>(
        loop->ApiClient(), iw::server::ResizeDiscovery::Options{});
  } else if (o.role != "controller") {
    iw::log::Warn(
        "--pod-resize=auto without API credentials: cpu/memory changes take the native rollout "
        "(give --pod-resize with the cluster's Kubernetes version)");
  }
  iw::server::WebhookServerOptions serverOptions = o.server;
  if (discovery) {
    serverOptions.resizeSupport = [d = discovery.get()] { return d->Current(); };
    metrics.AddCollector([d = discovery.get()](std::string& out) { d->RenderMetrics(out); });
  } else {
    serverOptions.resizeSupport = [fixedResize] { return fixedResize; };
    metrics.AddCollector([fixedResize, known = o.podResize.has_value()](std::string& out) {
      iw::server::RenderResizeMetrics(out, fixedResize, known);
    });
  }
  const LoopRuntime* runtime = loop.get();
  const iw::server::LoopStatusPoller* status = poller.get();
  auto loopAlive = [runtime, status] {
    if (status != nullptr) return status->Alive();
    return runtime != nullptr && runtime->LoopAlive();
  };
  serverOptions.loopAlive = loopAlive;
  serverOptions.notReady = [runtime] { return runtime != nullptr ? runtime->NotReady() : ""; };
  metrics.AddCollector([loopAlive](std::string& out) {
    out +=
        "# HELP inplace_webhook_loop_alive Whether this replica knows a loop to be running (it "
        "leads, saw the leader Lease renewed within the renew deadline, or, --role=webhook, the "
        "controller's /loopz answered alive within 3 s); 0: new pods get no readiness gate.\n";
    out += "# TYPE inplace_webhook_loop_alive gauge\n";
    out += std::string("inplace_webhook_loop_alive ") + (loopAlive() ? "1" : "0") + "\n";
  });
  // Asked once before the first review (each GET bounded by 5 s), then in the background.
  if (discovery) discovery->Start();
  iw::server::WebhookServer server(std::move(serverOptions), metrics);
  if (iw::Status err = server.Start(); !err.ok()) {
    iw::log::Error("cannot start", {{"error", err.message()}});
    return 1;
  }
  if (o.server.port >= 0) {
    iw::log::Info("serving admission", {{"address", o.server.bindAddress},
                                        {"port", std::to_string(server.Port())},
                                        {"probePort", std::to_string(server.ProbePort())},
                                        {"certificate", server.Certificates().Fingerprint()},
                                        {"role", o.role},
                                        {"version", IW_VERSION}});
  } else {
    iw::log::Info("controller: probe port only, no webhook listener",
                  {{"address", o.server.bindAddress},
                   {"probePort", std::to_string(server.ProbePort())},
                   {"version", IW_VERSION}});
  }
  if (poller) poller->Start();
  if (loop) loop->Start();
  int sig = 0;
  sigwait(&set, &sig);
  iw::log::Info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // --shutdown-delay-seconds + --shutdown-grace-seconds bound the whole shutdown: reviews under
  // way are answered until then, and whatever still runs a moment later (a loop stuck on the API
  // server) ends with the process.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::seconds(o.shutdownDelaySeconds + o.shutdownGraceSeconds);
  std::thread([deadline] {
    std::this_thread::sleep_until(deadline + std::chrono::milliseconds(200));
    iw::log::Error(
        "shutdown took longer than --shutdown-delay-seconds + --shutdown-grace-seconds; exiting");
    std::_Exit(1);
  }).detach();
  if (poller) poller->Stop();
  if (discovery) discovery->Stop();
  if (loop) loop->Stop();
  server.Shutdown(std::chrono::seconds(o.shutdownDelaySeconds), deadline);
  iw::log::Info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    iw::cli::Parsed p = iw::cli::Parse(argc, argv);
    if (p.exitCode) {
      (*p.exitCode == 0 ? std::cout : std::cerr)
          << p.output << (p.output.ends_with('\n') ? "" : "\n");
      return *p.exitCode;
    }
    if (p.command == "version") {
      std::cout << "inplace-webhook " << IW_VERSION << "\n";
      return 0;
    }
    if (p.command == "review") return Review(p.review);
    return Serve(p.serve);
  } catch (const std::exception& e) {
    std::cerr << "inplace-webhook: " << e.what() << "\n";
    return 1;
  }
}
