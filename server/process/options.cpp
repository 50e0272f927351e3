#include "server/process/options.h"

#include <cxxopts.hpp>

#include "hooks/admission.h"

namespace iw::cli {

namespace {

constexpr const char* kUsage =
    "inplace-webhook: in-place updates with lifecycle hooks for Kubernetes Deployments.\n\n"
    "Usage:\n"
    "  inplace-webhook serve [flags]     serve the admission webhook (HTTPS) and run the in-place "
    "loop\n"
    "  inplace-webhook review [flags]    answer one AdmissionReview read from stdin and print the "
    "response\n"
    "  inplace-webhook version           print the version\n\n"
    "Run `inplace-webhook serve --help` or `inplace-webhook review --help` for the flags.\n";

cxxopts::Options ServeSpec() {
  cxxopts::Options o(
      "inplace-webhook serve",
      "Serves the admission webhook over HTTPS and, when an API server is reachable, runs the\n"
      "  in-place rollout loop (leader-elected). Certificates are re-read when their files "
      "change.");
  o.set_width(110);
  o.add_options("Listeners")("bind-address", "address both listeners bind to",
                             cxxopts::value<std::string>()->default_value("0.0.0.0"))(
      "port", "HTTPS port for AdmissionReviews", cxxopts::value<int>()->default_value("8443"))(
      "probe-port", "plain-HTTP port for /healthz, /readyz and /metrics (-1: none)",
      cxxopts::value<int>()->default_value("8080"))(
      "tls-cert-file", "serving certificate (PEM, leaf first, then intermediates)",
      cxxopts::value<std::string>())("tls-private-key-file",
                                     "private key of the serving certificate (PEM)",
                                     cxxopts::value<std::string>())(
      "client-ca-file", "if set, require client certificates signed by this CA (PEM)",
      cxxopts::value<std::string>()->default_value(""))(
      "cert-check-interval-ms", "how often the certificate files are checked for changes",
      cxxopts::value<int>()->default_value("1000"))(
      "tls-wait-for-files",
      "start even if the certificate files do not exist yet; /readyz fails until they appear "
      "(a Secret that --manage-certificates fills)")(
      "tls-ticket-key-rotation-seconds",
      "session ticket keys rotate this often; a ticket resumes for up to two periods",
      cxxopts::value<int>()->default_value("3600"));
  o.add_options("Self-managed certificates, needs API credentials")(
      "manage-certificates",
      "keep a CA and the serving certificate in --cert-secret, rotate them, and write the CA "
      "bundle into the webhook configurations named --cert-webhook-configuration")(
      "cert-namespace", "namespace of the Secret and the Service (default: the pod's)",
      cxxopts::value<std::string>()->default_value(""))(
      "cert-secret", "the Secret that holds ca.crt, ca.key, tls.crt, tls.key",
      cxxopts::value<std::string>()->default_value(""))(
      "cert-service", "the webhook Service: the certificate names SERVICE.NAMESPACE.svc",
      cxxopts::value<std::string>()->default_value(""))(
      "cert-webhook-configuration",
      "name of the Mutating- and ValidatingWebhookConfiguration whose caBundle is written",
      cxxopts::value<std::string>()->default_value(""))(
      "cert-ca-validity-seconds", "validity of a new CA",
      cxxopts::value<long long>()->default_value("315360000"))(
      "cert-ca-renew-before-seconds", "a new CA is staged this long before the CA expires",
      cxxopts::value<long long>()->default_value("31536000"))(
      "cert-validity-seconds", "validity of a serving certificate (never beyond its CA)",
      cxxopts::value<long long>()->default_value("31536000"))(
      "cert-renew-before-seconds", "a serving certificate is renewed this long before expiry",
      cxxopts::value<long long>()->default_value("2592000"))(
      "cert-overlap-seconds",
      "how long a staged CA is trusted before it signs, and the old CA after (longer than the "
      "kubelet's Secret refresh plus --cert-check-interval-ms)",
      cxxopts::value<long long>()->default_value("3600"))(
      "cert-controller-interval-seconds",
      "how often the Secret and the webhook configurations are re-read (a wiped caBundle is "
      "rewritten within this)",
      cxxopts::value<int>()->default_value("60"));
  o.add_options("Limits")("max-request-bytes",
                          "largest AdmissionReview body accepted (larger: HTTP 413)",
                          cxxopts::value<size_t>()->default_value("7340032"))(
      "max-connections",
      "connections open at once on the webhook port; at the limit the idle connection that has "
      "waited longest is closed to make room (only when none is idle does a new one wait)",
      cxxopts::value<size_t>()->default_value("256"))(
      "max-probe-connections", "the same bound for the probe port",
      cxxopts::value<size_t>()->default_value("64"))(
      "max-inflight-request-bytes",
      "request bytes all connections may hold at once beyond 64 KiB each; a request that does "
      "not fit is refused with HTTP 503 and Retry-After",
      cxxopts::value<size_t>()->default_value("67108864"))(
      "first-request-timeout-seconds",
      "a new connection that has not started its first request this long after being accepted "
      "(TLS handshake included) is closed",
      cxxopts::value<int>()->default_value("5"))(
      "header-timeout-seconds",
      "a request whose line and headers have not all arrived this long after its first byte is "
      "refused by closing the connection (a half-sent head holds no connection slot for longer)",
      cxxopts::value<int>()->default_value("2"))(
      "worker-threads", "threads serving the webhook port (0: one per CPU, at most 4)",
      cxxopts::value<size_t>()->default_value("0"))(
      "read-timeout-seconds",
      "time allowed to receive a request once it starts, and for the TLS handshake",
      cxxopts::value<int>()->default_value("10"))(
      "idle-timeout-seconds",
      "keep-alive idle timeout (the API server keeps idle connections 90 s)",
      cxxopts::value<int>()->default_value("90"))(
      "shutdown-delay-seconds",
      "on SIGTERM, keep serving this long with /readyz failing before closing",
      cxxopts::value<int>()->default_value("3"))(
      "shutdown-grace-seconds", "on SIGTERM, longest wait for in-flight work before exiting",
      cxxopts::value<int>()->default_value("30"));
  o.add_options("Identity and loop")(
      "role",
      "all: webhook and loop in one process; webhook: admission only (no API credentials needed); "
      "controller: the loop and the probe port only (no webhook listener, no certificate)",
      cxxopts::value<std::string>()->default_value("all"))(
      "loop-status-url",
      "role webhook: the controller's /loopz (http://SERVICE:PORT/loopz), polled every second; "
      "new opted-in pods get the readiness gate only while it answers alive",
      cxxopts::value<std::string>()->default_value(""))(
      "controller-user", "the loop's own API identity; its requests pass the webhooks untouched",
      cxxopts::value<std::string>()->default_value(
          "system:serviceaccount:inplace-webhook:inplace-webhook"))(
      "statefulset-controller-user",
      "the StatefulSet controller's API identity: its pod DELETEs are the ones the StatefulSet "
      "hold "
      "judges (/validate/pod-deletions); any other user's go through",
      cxxopts::value<std::string>()->default_value(
          "system:serviceaccount:kube-system:statefulset-controller"))(
      "api-server",
      "API server URL (e.g. http://127.0.0.1:8001 for kubectl proxy); default: in-cluster config",
      cxxopts::value<std::string>()->default_value(""))(
      "token-file", "bearer token file for --api-server (re-read when it changes)",
      cxxopts::value<std::string>()->default_value(""))(
      "certificate-authority", "CA bundle to verify --api-server",
      cxxopts::value<std::string>()->default_value(""))(
      "pod-resize",
      "whether a Deployment's cpu/memory change can be in place (pods/resize): auto (ask the API "
      "server, again every 10 minutes; without API credentials: off), off, or the cluster's "
      "Kubernetes version (v1.33 and later serve pods/resize, v1.34 and later a memory limit "
      "decrease without a restart)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "leader-elect",
      "run the loop only while holding the Lease: auto (on in a cluster), true or false",
      cxxopts::value<std::string>()->default_value("auto"))(
      "leader-election-namespace", "namespace of the Lease (default: the pod's namespace)",
      cxxopts::value<std::string>()->default_value(""))(
      "disable-loop", "serve admission only; do not run the in-place loop")(
      "loop-resync-period-ms",
      "safety resync: how often the loop re-plans every Deployment from its caches (no API call); "
      "changes are picked up from watch events at once",
      cxxopts::value<int>()->default_value("300000"))(
      "kube-api-qps",
      "the loop's client-side rate limit of API requests per second, every retry included (a "
      "budget: the API server's priority and fairness protects it)",
      cxxopts::value<double>()->default_value("200"))(
      "kube-api-burst", "requests the loop may send at once above --kube-api-qps",
      cxxopts::value<int>()->default_value("400"));
  o.add_options("Logging")("log-level", "debug, info, warn or error",
                           cxxopts::value<std::string>()->default_value("info"))(
      "log-format", "json or text", cxxopts::value<std::string>()->default_value("json"))(
      "h,help", "show this help");
  return o;
}

cxxopts::Options ReviewSpec() {
  cxxopts::Options o(
      "inplace-webhook review",
      "Reads one AdmissionReview from stdin, answers it with the same code the server runs, and\n"
      "  prints the response. Exit status: 0 allowed, 1 denied, 2 not an answerable review.");
  o.set_width(110);
  o.add_options()("path", "route to answer as: " + admission::RoutePaths(),
                  cxxopts::value<std::string>()->default_value("/mutate/deployments"))(
      "controller-user", "the controller identity, as for serve",
      cxxopts::value<std::string>()->default_value(
          "system:serviceaccount:inplace-webhook:inplace-webhook"))(
      "pod-resize",
      "as for serve, without auto (no API server here): off, or the cluster's Kubernetes version",
      cxxopts::value<std::string>()->default_value("off"))("h,help", "show this help");
  return o;
}

Parsed Fail(std::string message) {
  Parsed p;
  p.exitCode = 2;
  p.output = std::move(message);
  return p;
}

}  // namespace

Parsed Parse(int argc, char** argv) {
  Parsed p;
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h" ||
      std::string_view(argv[1]) == "help") {
    p.exitCode = argc < 2 ? 2 : 0;
    p.output = kUsage;
    return p;
  }
  p.command = argv[1];
  if (p.command == "version" || p.command == "--version") {
    p.command = "version";
    return p;
  }
  if (p.command != "serve" && p.command != "review") {
    return Fail("unknown command \"" + p.command + "\"\n\n" + kUsage);
  }
  cxxopts::Options spec = p.command == "serve" ? ServeSpec() : ReviewSpec();
  try {
    auto r = spec.parse(argc - 1, argv + 1);
    if (!r.unmatched().empty())
      return Fail("unexpected argument \"" + r.unmatched().front() + "\"");
    if (r.count("help") != 0) {
      p.exitCode = 0;
      p.output = spec.help();
      return p;
    }
    if (p.command == "review") {
      p.review.path = r["path"].as<std::string>();
      p.review.controllerUser = r["controller-user"].as<std::string>();
      StatusOr<std::optional<resize_support::Support>> resize =
          resize_support::ParseFlag(r["pod-resize"].as<std::string>());
      if (!resize.ok()) return Fail(resize.status().message());
      if (!*resize) return Fail("--pod-resize=auto needs an API server: give off or a version");
      p.review.resize = **resize;
      return p;
    }
    ServeOptions& s = p.serve;
    auto& w = s.server;
    w.bindAddress = r["bind-address"].as<std::string>();
    w.port = r["port"].as<int>();
    w.probePort = r["probe-port"].as<int>();
    s.role = r["role"].as<std::string>();
    if (s.role != "all" && s.role != "webhook" && s.role != "controller") {
      return Fail("--role must be all, webhook or controller");
    }
    StatusOr<std::optional<resize_support::Support>> resize =
        resize_support::ParseFlag(r["pod-resize"].as<std::string>());
    if (!resize.ok()) return Fail(resize.status().message());
    s.podResize = *resize;
    s.loopStatusUrl = r["loop-status-url"].as<std::string>();
    if (!s.loopStatusUrl.empty() && s.role != "webhook") {
      return Fail("--loop-status-url is for --role=webhook");
    }
    if (s.role == "controller") {
      w.port = -1;  // no webhook listener
    } else if (r.count("tls-cert-file") == 0 || r.count("tls-private-key-file") == 0) {
      return Fail(
          "--tls-cert-file and --tls-private-key-file are required (see certs/gen-dev-certs.sh)");
    } else {
      w.certFile = r["tls-cert-file"].as<std::string>();
      w.keyFile = r["tls-private-key-file"].as<std::string>();
    }
    w.clientCaFile = r["client-ca-file"].as<std::string>();
    w.certCheckInterval = std::chrono::milliseconds(r["cert-check-interval-ms"].as<int>());
    w.waitForCertificate = r.count("tls-wait-for-files") != 0;
    w.ticketKeyRotation = std::chrono::seconds(r["tls-ticket-key-rotation-seconds"].as<int>());
    if (w.ticketKeyRotation.count() < 1)
      return Fail("--tls-ticket-key-rotation-seconds must be at least 1");
    auto& mc = s.managedCertificates;
    mc.enabled = r.count("manage-certificates") != 0;
    mc.namespaceName = r["cert-namespace"].as<std::string>();
    mc.secretName = r["cert-secret"].as<std::string>();
    mc.serviceName = r["cert-service"].as<std::string>();
    mc.webhookConfiguration = r["cert-webhook-configuration"].as<std::string>();
    mc.caValiditySeconds = r["cert-ca-validity-seconds"].as<long long>();
    mc.caRenewBeforeSeconds = r["cert-ca-renew-before-seconds"].as<long long>();
    mc.validitySeconds = r["cert-validity-seconds"].as<long long>();
    mc.renewBeforeSeconds = r["cert-renew-before-seconds"].as<long long>();
    mc.overlapSeconds = r["cert-overlap-seconds"].as<long long>();
    mc.checkIntervalSeconds = r["cert-controller-interval-seconds"].as<int>();
    if (mc.enabled) {
      if (mc.secretName.empty() || mc.serviceName.empty() || mc.webhookConfiguration.empty())
        return Fail(
            "--manage-certificates needs --cert-secret, --cert-service and "
            "--cert-webhook-configuration");
      if (s.role == "webhook")
        return Fail("--manage-certificates needs API credentials: not with --role=webhook");
      if (mc.caValiditySeconds < 60 || mc.validitySeconds < 60 || mc.overlapSeconds < 1 ||
          mc.checkIntervalSeconds < 1 || mc.caRenewBeforeSeconds < 0 || mc.renewBeforeSeconds < 0)
        return Fail("--cert-*: validities at least 60 s, overlap and interval at least 1 s");
      if (mc.caRenewBeforeSeconds < 2 * mc.overlapSeconds ||
          mc.caRenewBeforeSeconds >= mc.caValiditySeconds ||
          mc.renewBeforeSeconds >= mc.validitySeconds)
        return Fail(
            "--cert-ca-renew-before-seconds must be at least twice --cert-overlap-seconds and "
            "less than the CA validity; --cert-renew-before-seconds less than the validity");
    }
    w.maxRequestBytes = r["max-request-bytes"].as<size_t>();
    w.maxConnections = r["max-connections"].as<size_t>();
    w.maxProbeConnections = r["max-probe-connections"].as<size_t>();
    w.maxInflightRequestBytes = r["max-inflight-request-bytes"].as<size_t>();
    w.firstRequestTimeoutSeconds = r["first-request-timeout-seconds"].as<int>();
    w.headerTimeoutSeconds = r["header-timeout-seconds"].as<int>();
    w.workerThreads = r["worker-threads"].as<size_t>();
    w.readTimeoutSeconds = r["read-timeout-seconds"].as<int>();
    w.idleTimeoutSeconds = r["idle-timeout-seconds"].as<int>();
    w.controllerUser = r["controller-user"].as<std::string>();
    w.statefulSetControllerUser = r["statefulset-controller-user"].as<std::string>();
    s.shutdownDelaySeconds = r["shutdown-delay-seconds"].as<int>();
    s.shutdownGraceSeconds = r["shutdown-grace-seconds"].as<int>();
    w.shutdownGrace = std::chrono::seconds(s.shutdownGraceSeconds);
    s.apiServer = r["api-server"].as<std::string>();
    s.tokenFile = r["token-file"].as<std::string>();
    s.certificateAuthority = r["certificate-authority"].as<std::string>();
    s.leaderElect = r["leader-elect"].as<std::string>();
    s.leaderElectionNamespace = r["leader-election-namespace"].as<std::string>();
    s.disableLoop = r.count("disable-loop") != 0;
    s.loopResyncPeriodMs = r["loop-resync-period-ms"].as<int>();
    if (s.loopResyncPeriodMs < 10) return Fail("--loop-resync-period-ms must be at least 10");
    s.kubeApiQps = r["kube-api-qps"].as<double>();
    s.kubeApiBurst = r["kube-api-burst"].as<int>();
    if (!(s.kubeApiQps >= 1 && s.kubeApiQps <= 10000)) {
      return Fail("--kube-api-qps must be 1..10000");
    }
    if (s.kubeApiBurst < 1 || s.kubeApiBurst > 10000) {
      return Fail("--kube-api-burst must be 1..10000");
    }
    if (s.leaderElect != "auto" && s.leaderElect != "true" && s.leaderElect != "false") {
      return Fail("--leader-elect must be auto, true or false");
    }
    if (s.role != "controller" && (w.port < 0 || w.port > 65535)) {
      return Fail("--port must be 0..65535");
    }
    if (s.role == "controller" && w.probePort < 0) {
      return Fail("--role=controller needs the probe port (/loopz, /healthz, /metrics)");
    }
    if (w.probePort < -1 || w.probePort > 65535) return Fail("--probe-port must be -1..65535");
    if (w.maxConnections == 0) return Fail("--max-connections must be at least 1");
    if (w.maxProbeConnections == 0) return Fail("--max-probe-connections must be at least 1");
    if (w.maxInflightRequestBytes < w.maxRequestBytes) {
      return Fail("--max-inflight-request-bytes must be at least --max-request-bytes");
    }
    if (w.firstRequestTimeoutSeconds < 1) {
      return Fail("--first-request-timeout-seconds must be at least 1");
    }
    if (w.headerTimeoutSeconds < 1 || w.headerTimeoutSeconds > 3600) {
      return Fail("--header-timeout-seconds must be 1..3600");
    }
    if (s.shutdownGraceSeconds < 0 || s.shutdownDelaySeconds < 0) {
      return Fail("--shutdown-delay-seconds and --shutdown-grace-seconds must not be negative");
    }
    if (w.maxRequestBytes < 1024) return Fail("--max-request-bytes must be at least 1024");
    if (w.idleTimeoutSeconds < 1 || w.readTimeoutSeconds < 1)
      return Fail("timeouts must be at least 1 second");
    StatusOr<log::Level> level = log::ParseLevel(r["log-level"].as<std::string>());
    if (!level.ok()) return Fail(level.status().message());
    s.logLevel = *level;
    std::string fmt = r["log-format"].as<std::string>();
    if (fmt != "json" && fmt != "text") return Fail("--log-format must be json or text");
    s.logFormat = fmt == "json" ? log::Format::kJson : log::Format::kText;
  } catch (const cxxopts::exceptions::exception& e) {
    return Fail(std::string(e.what()) + "\nRun `inplace-webhook " + p.command +
                " --help` for the flags.");
  }
  return p;
}

}  // namespace iw::cli
