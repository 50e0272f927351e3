#include "server/process/loop_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "hooks/identity_check.h"
#include "hooks/plan.h"
#include "lib/stop_sleep.h"
#include "server/process/log.h"

namespace iw::process {

StatusOr<std::unique_ptr<LoopRuntime>> LoopRuntime::Create(const cli::ServeOptions& o,
                                                           metrics::Registry& metrics) {
  // --disable-loop with --manage-certificates: the API client for the certificates only (the
  // controller pods keep the webhook's certificate while the loop is off).
  if (o.role == "webhook" || (o.disableLoop && !o.managedCertificates.enabled)) {
    return std::unique_ptr<LoopRuntime>();
  }
  if (o.apiServer.empty() && std::getenv("KUBERNETES_SERVICE_HOST") == nullptr) {
    log::Warn("in-place loop not started: no API server (give --api-server, or run in a cluster)");
    return std::unique_ptr<LoopRuntime>();
  }
  const bool inCluster = o.apiServer.empty();
  StatusOr<kube::ClientConfig> config =
      inCluster ? kube::ClientConfig::InCluster()
                : kube::ClientConfig::FromUrl(o.apiServer, o.tokenFile, o.certificateAuthority);
  if (!config.ok()) return config.status();
  config->qps = o.kubeApiQps;
  config->burst = o.kubeApiBurst;
  bool elect = o.leaderElect == "true" || (o.leaderElect == "auto" && inCluster);
  std::string leaseNamespace =
      !o.leaderElectionNamespace.empty() ? o.leaderElectionNamespace : config->namespaceName;
  if (elect && leaseNamespace.empty()) {
    return Status::InvalidArgument(
        "--leader-elect needs --leader-election-namespace outside a cluster");
  }
  // One identity for the Lease holder, the Events' reportingInstance and the User-Agent, so
  // the API server's audit log, the Lease and the Events all name the same replica.
  const char* pod = std::getenv("POD_NAME");
  const std::string identity =
      pod != nullptr && *pod != '\0' ? std::string(pod) : leader::DefaultIdentity();
  config->userAgent += " (" + identity + ")";
  std::string eventNamespace = config->namespaceName;
  if (const char* ns = std::getenv("POD_NAMESPACE"); ns != nullptr && *ns != '\0') {
    eventNamespace = ns;
  }
  auto rt = std::make_unique<LoopRuntime>(std::move(*config), o.server.controllerUser, identity,
                                          eventNamespace);
  rt->loopDisabled_ = o.disableLoop;
  rt->accessGatesReadiness_ = o.role == "controller";
  loop::Options loopOptions;
  loopOptions.metrics = &rt->loopMetrics_;
  loopOptions.instance = identity;
  // Event-driven: --loop-resync-period-ms is only the safety resync (from the caches, no API
  // call).
  loopOptions.resyncPeriod = std::chrono::milliseconds(o.loopResyncPeriodMs);
  LoopRuntime* self = rt.get();
  rt->access_ = std::make_unique<server::AccessMonitor>(
      *rt->client_, server::AccessMonitor::Options{.onRefused = [self](const std::string& problem) {
        self->RecordPodEvent("ControllerCannotAct", problem);
      }});
  if (elect) {
    leader::Options lo;
    lo.namespaceName = leaseNamespace;
    lo.identity = identity;
    if (Status bad = leader::CheckTiming(lo.timing); !bad.ok()) {
      return bad.Prefixed("leader election");
    }
    lo.onStartedLeading = [self] { self->loop_->Start(); };
    lo.onStoppedLeading = [self] { self->loop_->Stop(); };
    lo.mayLead = [self] { return self->access_->Able(); };
    rt->elector_ = std::make_unique<leader::LeaderElector>(*rt->client_, lo);
  }
  // The loop writes only through the leader's fence (DESIGN.md §9.3): no write starts once this
  // replica cannot be sure it leads, none outlives the moment another replica may take over.
  rt->fenced_ = std::make_unique<leader::FencedApi>(
      *rt->client_, rt->elector_ ? &rt->elector_->WriteFence() : nullptr,
      rt->client_->Config().requestTimeout);
  rt->loop_ = std::make_unique<loop::Loop>(*rt->fenced_, loopOptions);
  rt->hold_ = std::make_unique<loop::HoldAnswerer>(*rt->client_, loop::HoldAnswerer::Options{});
  if (const auto& mc = o.managedCertificates; mc.enabled) {
    // Every replica runs it, leader or not (its writes are conditional, §9.7): certificates
    // must not wait for an election.
    certs::ControllerOptions co;
    co.namespaceName =
        !mc.namespaceName.empty() ? mc.namespaceName : rt->client_->Config().namespaceName;
    if (co.namespaceName.empty()) {
      return Status::InvalidArgument(
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
    rt->certs_ = std::make_unique<certs::Controller>(*rt->client_, co);
    metrics.AddCollector([c = rt->certs_.get()](std::string& out) { c->RenderMetrics(out); });
  }
  kube::Client* client = rt->client_.get();
  loop::LoopMetrics* lm = &rt->loopMetrics_;
  loop::Loop* lp = rt->loop_.get();
  leader::LeaderElector* el = rt->elector_.get();
  server::AccessMonitor* am = rt->access_.get();
  loop::HoldAnswerer* hold = rt->hold_.get();
  metrics.AddCollector([client, lm, lp, el, am, hold](std::string& out) {
    client->RenderMetrics(out);
    lm->Render(out);
    lp->RenderMetrics(out);
    if (el != nullptr) el->RenderMetrics(out);
    am->RenderMetrics(out);
    hold->RenderMetrics(out);
  });
  log::Info("in-place loop configured",
            {{"apiServer", rt->client_->Config().Url()},
             {"leaderElection", elect ? "Lease " + leaseNamespace + "/inplace-webhook" : "off"},
             {"identity", identity}});
  return rt;
}

LoopRuntime::LoopRuntime(kube::ClientConfig config, std::string controllerUser,
                         std::string identity, std::string eventNamespace)
    : client_(std::make_unique<kube::Client>(std::move(config))),
      controllerUser_(std::move(controllerUser)),
      identity_(std::move(identity)),
      eventNamespace_(std::move(eventNamespace)) {}

bool LoopRuntime::LoopAlive() const {
  if (loopDisabled_) return false;
  if (access_->Known() && !access_->Able()) return false;
  if (elector_) return elector_->LeaderKnownAlive(std::chrono::steady_clock::now());
  return loop_->Running();
}

void LoopRuntime::Start() {
  if (certs_) certs_->Start();
  if (loopDisabled_) return;
  starter_ = std::jthread([this](std::stop_token stop) { VerifyThenRun(stop); });
}

std::string LoopRuntime::NotReady() const {
  {
    std::lock_guard lock(identityMu_);
    if (!identityProblem_.empty()) return identityProblem_;
  }
  return accessGatesReadiness_ ? access_->Problem() : "";
}

void LoopRuntime::Stop() {
  starter_.request_stop();
  if (starter_.joinable()) starter_.join();
  access_->Stop();
  if (elector_) elector_->Stop();
  loop_->Stop();
  if (certs_) certs_->Stop();
  client_->Shutdown();
}

void LoopRuntime::SetProblem(std::string problem) {
  std::lock_guard lock(identityMu_);
  identityProblem_ = std::move(problem);
}

void LoopRuntime::RecordPodEvent(std::string_view reason, const std::string& message) {
  const char* pod = std::getenv("POD_NAME");
  if (pod == nullptr || *pod == '\0' || eventNamespace_.empty()) return;
  json::Document involved(rapidjson::kObjectType);
  auto& a = involved.GetAllocator();
  json::Value& meta = json::EnsureObject(involved, "metadata", a);
  json::SetString(meta, "name", pod, a);
  json::SetString(meta, "namespace", eventNamespace_, a);
  StatusOr<kube::ObjectView> view = kube::ObjectView::From(involved, "pod");
  if (!view.ok()) return;  // built just above: cannot happen
  json::Document event =
      rollout::MakeEvent(*view, "v1", "Pod", "Warning", reason, message, rollout::Clock::now(),
                         rollout::DedupEventName(pod, reason));
  json::SetString(event, "reportingInstance", identity_, event.GetAllocator());
  kube::DeadlineScope scope(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  kube::Result r = client_->Create(kube::EventsPath(eventNamespace_), event);
  if (!r.Ok() && r.code != 409) {
    log::Warn(
        "could not record the Event",
        {{"reason", std::string(reason)}, {"code", std::to_string(r.code)}, {"error", r.message}});
  }
}

void LoopRuntime::VerifyThenRun(std::stop_token stop) {
  SetProblem("verifying the loop's API identity (SelfSubjectReview)");
  for (int attempt = 0; !stop.stop_requested(); ++attempt) {
    kube::Result r;
    {
      kube::DeadlineScope scope(std::chrono::steady_clock::now() + std::chrono::seconds(10));
      r = client_->Create(identity::kSelfSubjectReviewsPath, identity::SelfSubjectReview());
    }
    if (r.Ok()) {
      StatusOr<std::string> user = identity::Check(r.object, controllerUser_);
      if (!user.ok()) {
        const std::string& why = user.status().message();
        SetProblem(why);
        log::Error("the in-place loop does not run: wrong identity",
                   {{"controllerUser", controllerUser_}, {"error", why}});
        RecordPodEvent("WrongControllerIdentity", why);
        return;
      }
      log::Info("loop identity verified", {{"user", *user}});
      SetProblem("checking what the loop may do (SelfSubjectAccessReview)");
      CheckAccessThenRun(stop);
      return;
    }
    const std::string why = "cannot verify the loop's API identity (SelfSubjectReview): HTTP " +
                            std::to_string(r.code) + (r.message.empty() ? "" : ": " + r.message);
    SetProblem(why);
    auto delay = kube::Backoff(std::min(attempt, 6), std::chrono::milliseconds(500),
                               std::chrono::seconds(30));
    log::Warn(why, {{"retryInMs", std::to_string(delay.count())}});
    SleepUnlessStopped(delay, stop);
  }
}

void LoopRuntime::CheckAccessThenRun(std::stop_token stop) {
  for (int attempt = 0; !access_->CheckNow(); ++attempt) {
    auto delay = kube::Backoff(std::min(attempt, 6), std::chrono::milliseconds(500),
                               std::chrono::seconds(30));
    if (!SleepUnlessStopped(delay, stop)) return;
  }
  SetProblem("");
  access_->Start();
  if (elector_)
    elector_->Start();
  else
    loop_->Start();
}

}  // namespace iw::process
