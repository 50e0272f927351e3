#include "server/certs/cert_controller.h"

#include <algorithm>
#include <map>

#include "hooks/keys.h"
#include "lib/json.h"
#include "server/certs/cert_crypto.h"
#include "server/process/log.h"

namespace iw::certs {

namespace {

constexpr std::string_view kCaCert = "ca.crt", kCaKey = "ca.key", kNextCert = "ca-next.crt",
                           kNextKey = "ca-next.key", kPreviousCert = "ca-previous.crt",
                           kBundle = "ca-bundle.crt", kTlsCert = "tls.crt", kTlsKey = "tls.key";
const std::string_view kAllKeys[] = {kCaCert,       kCaKey,  kNextCert, kNextKey,
                                     kPreviousCert, kBundle, kTlsCert,  kTlsKey};

using Data = std::map<std::string, std::string, std::less<>>;

std::string Get(const Data& d, std::string_view key) {
  auto it = d.find(key);
  return it == d.end() ? std::string() : it->second;
}

// The CAs the caBundle must trust: current, staged, previous (those that parse).
std::string BundleOf(const Data& d) {
  std::string out;
  for (std::string_view key : {kCaCert, kNextCert, kPreviousCert}) {
    std::string pem = Get(d, key);
    if (pem.empty() || !Inspect(pem, "").present) continue;
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += pem;
  }
  return out;
}

int64_t ParseSeconds(std::string_view s) {
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

Controller::Controller(kube::Api& api, ControllerOptions options)
    : api_(api), options_(std::move(options)) {
  if (!options_.now) {
    options_.now = [] {
      return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    };
  }
}

Controller::~Controller() {
  Stop();
}

std::vector<std::string> Controller::DnsNames() const {
  std::string base = options_.serviceName + "." + options_.namespaceName + ".svc";
  return {base, base + ".cluster.local"};
}

void Controller::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      std::chrono::milliseconds next = options_.checkInterval;
      Status err;
      try {
        err = RunOnce(next);
      } catch (const std::exception& e) {
        err = Status::Internal(e.what());
      }
      lock.lock();
      if (!err.ok()) {
        ++errors_;
        next = std::min(next, std::chrono::milliseconds(5000));
        log::Error("certificate controller", {{"error", err.message()}});
      }
      cv_.wait_for(lock, next, [this] { return stopping_; });
    }
  });
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Controller::Publish(const std::string& bundle, bool& published, bool write) {
  const std::string want = Base64Encode(bundle);
  bool mutating = false, validating = false;
  Status error = PublishTo(kube::MutatingWebhookConfigurationPath(options_.webhookConfiguration),
                           want, mutating, write);
  Status error2 = PublishTo(kube::ValidatingWebhookConfigurationPath(options_.webhookConfiguration),
                            want, validating, write);
  published = mutating && validating;
  return error.ok() ? error2 : error;
}

Status Controller::PublishTo(const std::string& path, const std::string& want, bool& published,
                             bool write) {
  published = false;
  kube::Result r = api_.Get(path);
  if (!r.Ok()) {
    return Status::IOError("cannot read " + path + ": " + std::to_string(r.code) + " " + r.message);
  }
  const json::Value* hooks = json::Find(&r.object, "webhooks");
  std::string ops;
  for (rapidjson::SizeType i = 0; hooks != nullptr && hooks->IsArray() && i < hooks->Size(); ++i) {
    const json::Value& h = (*hooks)[i];
    if (json::StringOr(json::Find(&h, "clientConfig"), "caBundle") == want) continue;
    std::string at = "/webhooks/" + std::to_string(i);
    ops += ops.empty() ? "[" : ",";
    ops += R"({"op":"test","path":")" + at + R"(/name","value":)";
    json::AppendString(ops, json::StringOr(&h, "name"));
    ops += R"(},{"op":"add","path":")" + at + R"(/clientConfig/caBundle","value":)";
    json::AppendString(ops, want);
    ops += "}";
  }
  if (ops.empty()) {
    published = true;
    return Status::Ok();
  }
  if (!write) return Status::Ok();
  kube::Result p = api_.Patch(path, kube::PatchType::kJson, ops + "]");
  if (!p.Ok()) {
    return Status::IOError("cannot write the caBundle of " + path + ": " + std::to_string(p.code) +
                           " " + p.message);
  }
  {
    std::lock_guard lock(mu_);
    ++bundleWrites_;
  }
  published = true;
  log::Info("webhook caBundle written", {{"configuration", path}});
  return Status::Ok();
}

Status Controller::RunOnce(std::chrono::milliseconds& next) {
  next = options_.checkInterval;
  const int64_t now = options_.now();
  const std::string path = kube::SecretPath(options_.namespaceName, options_.secretName);
  kube::Result r = api_.Get(path);
  if (r.NotFound()) {
    // The chart creates it (empty), so that RBAC can name it: create cannot be limited by name.
    return Status::NotFound("Secret " + options_.namespaceName + "/" + options_.secretName +
                            " not found: create it (empty); the controller fills it");
  }
  if (!r.Ok()) {
    return Status::IOError("cannot read Secret " + path + ": " + std::to_string(r.code) + " " +
                           r.message);
  }

  Data data;
  if (const json::Value* d = json::Find(&r.object, "data"); d != nullptr && d->IsObject()) {
    for (auto it = d->MemberBegin(); it != d->MemberEnd(); ++it) {
      if (!it->value.IsString()) continue;
      std::string decoded;
      if (Base64Decode(json::View(it->value), decoded))
        data[std::string(json::View(it->name))] = decoded;
    }
  }
  const json::Value* meta = json::Find(&r.object, "metadata");
  const json::Value* ann = json::Find(meta, "annotations");
  const std::string rv(json::StringOr(meta, "resourceVersion"));

  const std::vector<std::string> names = DnsNames();
  State st;
  st.ca = Inspect(Get(data, kCaCert), Get(data, kCaKey));
  st.nextCa = Inspect(Get(data, kNextCert), Get(data, kNextKey));
  st.previous = Inspect(Get(data, kPreviousCert), "");
  st.serving = Inspect(Get(data, kTlsCert), Get(data, kTlsKey));
  st.servingSignedByCa = st.ca.present && SignedBy(Get(data, kTlsCert), Get(data, kCaCert));
  st.servingNamesOk = HasDnsNames(Get(data, kTlsCert), names);
  st.stagedAt = ParseSeconds(json::StringOr(ann, keys::kCaStagedAtAnnotation));
  st.promotedAt = ParseSeconds(json::StringOr(ann, keys::kCaPromotedAtAnnotation));
  st.rotateRequested = json::StringOr(ann, keys::kRotateCaAnnotation);
  st.rotateDone = json::StringOr(ann, keys::kRotateCaDoneAnnotation);
  std::string bundle = BundleOf(data);
  bool published = false;
  // Read only: whether the bundle is in place already. A failure here is dropped: the writing
  // Publish at the end of the pass reads again and reports its own.
  static_cast<void>(Publish(bundle, published, false));
  st.bundlePublished = published;
  {
    std::lock_guard lock(mu_);
    caNotAfter_ = st.ca.notAfter;
    servingNotAfter_ = st.serving.notAfter;
  }

  const Policy& p = options_.policy;
  Decision d = Decide(st, p, now);
  if (d.action != Action::kNone) {
    Data nd = data;
    std::map<std::string_view, std::string> setAnn;
    std::string caName =
        options_.serviceName + "." + options_.namespaceName + " CA " + std::to_string(now);
    auto issue = [&](const Pem& ca) -> Status {
      Pem serving;
      Status err = IssueServing(ca, names, now - 300,
                                ServingNotAfter(p, now, Inspect(ca.cert, "").notAfter), serving);
      nd[std::string(kTlsCert)] = serving.cert;
      nd[std::string(kTlsKey)] = serving.key;
      return err;
    };
    Status err;
    switch (d.action) {
      case Action::kNone:
        break;
      case Action::kCreateCa: {
        Pem ca;
        err = GenerateCa(caName, now - 300, now + p.caValidity, ca);
        if (err.ok()) {
          nd.clear();
          nd[std::string(kCaCert)] = ca.cert;
          nd[std::string(kCaKey)] = ca.key;
          err = issue(ca);
          setAnn[keys::kRotateCaDoneAnnotation] = st.rotateRequested;
          setAnn[keys::kCaStagedAtAnnotation] = "";
          setAnn[keys::kCaPromotedAtAnnotation] = "";
        }
        break;
      }
      case Action::kStageNextCa: {
        Pem ca;
        err = GenerateCa(caName, now - 300, now + p.caValidity, ca);
        nd[std::string(kNextCert)] = ca.cert;
        nd[std::string(kNextKey)] = ca.key;
        setAnn[keys::kCaStagedAtAnnotation] = std::to_string(now);
        setAnn[keys::kRotateCaDoneAnnotation] = st.rotateRequested;
        break;
      }
      case Action::kPromoteNextCa: {
        Pem ca{Get(data, kNextCert), Get(data, kNextKey)};
        nd[std::string(kPreviousCert)] = Get(data, kCaCert);
        nd[std::string(kCaCert)] = ca.cert;
        nd[std::string(kCaKey)] = ca.key;
        nd.erase(std::string(kNextCert));
        nd.erase(std::string(kNextKey));
        err = issue(ca);
        setAnn[keys::kCaStagedAtAnnotation] = "";
        setAnn[keys::kCaPromotedAtAnnotation] = std::to_string(now);
        break;
      }
      case Action::kDropPrevious:
        nd.erase(std::string(kPreviousCert));
        setAnn[keys::kCaPromotedAtAnnotation] = "";
        break;
      case Action::kIssueServing:
        err = issue(Pem{Get(data, kCaCert), Get(data, kCaKey)});
        break;
    }
    if (!err.ok()) return err.Prefixed(ActionName(d.action));
    std::string newBundle = BundleOf(nd);
    nd[std::string(kBundle)] = newBundle;
    // JSON merge patch: keys set or removed (null); the resourceVersion makes it conditional.
    std::string body = R"({"metadata":{"resourceVersion":)";
    json::AppendString(body, rv);
    body += R"(,"annotations":{)";
    bool first = true;
    for (const auto& [k, v] : setAnn) {
      if (!first) body += ",";
      first = false;
      json::AppendString(body, k);
      body += ":";
      if (v.empty())
        body += "null";
      else
        json::AppendString(body, v);
    }
    body += R"(}},"data":{)";
    first = true;
    for (std::string_view k : kAllKeys) {
      if (!first) body += ",";
      first = false;
      json::AppendString(body, k);
      body += ":";
      auto it = nd.find(k);
      if (it == nd.end())
        body += "null";
      else
        json::AppendString(body, Base64Encode(it->second));
    }
    body += "}}";
    kube::Result w = api_.Patch(path, kube::PatchType::kMerge, body);
    if (w.Conflict()) {
      next = std::chrono::milliseconds(200);  // another replica wrote: read again
      return Status::Ok();
    }
    if (!w.Ok()) {
      return Status::IOError("cannot write Secret " + path + ": " + std::to_string(w.code) + " " +
                             w.message);
    }
    {
      std::lock_guard lock(mu_);
      auto it = std::find_if(steps_.begin(), steps_.end(),
                             [&](const auto& s) { return s.first == ActionName(d.action); });
      if (it == steps_.end())
        steps_.emplace_back(std::string(ActionName(d.action)), 1);
      else
        ++it->second;
    }
    log::Info("certificate Secret updated",
              {{"step", std::string(ActionName(d.action))},
               {"reason", d.reason},
               {"secret", options_.namespaceName + "/" + options_.secretName},
               {"ca", Fingerprint(Get(nd, kCaCert))},
               {"serving", Fingerprint(Get(nd, kTlsCert))}});
    bundle = newBundle;
    next = std::chrono::milliseconds(0);  // the next step may be due at once
  }
  if (Status s = Publish(bundle, published, true); !s.ok()) return s;
  if (d.action == Action::kNone && d.recheckAt > now) {
    next = std::min<std::chrono::milliseconds>(next, std::chrono::seconds(d.recheckAt - now));
  }
  return Status::Ok();
}

void Controller::RenderMetrics(std::string& out) const {
  std::lock_guard lock(mu_);
  out +=
      "# HELP inplace_webhook_certificate_steps_total Writes of the certificate Secret by step "
      "(create-ca, stage-ca, promote-ca, drop-previous-ca, issue-serving).\n"
      "# TYPE inplace_webhook_certificate_steps_total counter\n";
  for (const auto& [step, n] : steps_)
    out += "inplace_webhook_certificate_steps_total{step=\"" + step + "\"} " + std::to_string(n) +
           "\n";
  out +=
      "# HELP inplace_webhook_certificate_bundle_writes_total caBundle writes into the webhook "
      "configurations.\n"
      "# TYPE inplace_webhook_certificate_bundle_writes_total counter\n"
      "inplace_webhook_certificate_bundle_writes_total " +
      std::to_string(bundleWrites_) + "\n";
  out +=
      "# HELP inplace_webhook_certificate_errors_total Certificate controller passes that "
      "failed.\n"
      "# TYPE inplace_webhook_certificate_errors_total counter\n"
      "inplace_webhook_certificate_errors_total " +
      std::to_string(errors_) + "\n";
  out +=
      "# HELP inplace_webhook_certificate_not_after_seconds Expiry (Unix seconds) of the CA and "
      "the serving certificate in the Secret.\n"
      "# TYPE inplace_webhook_certificate_not_after_seconds gauge\n"
      "inplace_webhook_certificate_not_after_seconds{certificate=\"ca\"} " +
      std::to_string(caNotAfter_) +
      "\n"
      "inplace_webhook_certificate_not_after_seconds{certificate=\"serving\"} " +
      std::to_string(servingNotAfter_) + "\n";
}

}  // namespace iw::certs
