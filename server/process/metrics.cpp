#include "server/process/metrics.h"

#include <cstdio>

namespace iw::metrics {

namespace {
std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

std::string EscapeLabel(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Histogram::Observe(double seconds) {
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      counts_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  sumNanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void Histogram::Render(std::string& out, std::string_view name, std::string_view labels) const {
  std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    cumulative += counts_[i].load();
    out += std::string(name) + "_bucket{" + std::string(labels) + sep + "le=\"" +
           FormatDouble(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_bucket{" + std::string(labels) + sep + "le=\"+Inf\"} " +
         std::to_string(count_.load()) + "\n";
  std::string braces = labels.empty() ? "" : "{" + std::string(labels) + "}";
  out += std::string(name) + "_sum" + braces + " " + FormatDouble(sumNanos_.load() / 1e9) + "\n";
  out += std::string(name) + "_count" + braces + " " + std::to_string(count_.load()) + "\n";
}

void Registry::RecordRequest(std::string_view route, int httpCode, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{std::string(route), httpCode}];
  auto it = latency_.find(route);
  if (it == latency_.end()) it = latency_.try_emplace(std::string(route)).first;
  it->second.Observe(seconds);
}

void Registry::RecordHandlerError(std::string_view route) {
  std::lock_guard lock(mu_);
  ++handlerErrors_[std::string(route)];
}

void Registry::DeclareRoute(std::string_view route) {
  std::lock_guard lock(mu_);
  handlerErrors_.try_emplace(std::string(route), 0);
  if (latency_.find(route) == latency_.end()) latency_.try_emplace(std::string(route));
}

void Registry::AddCollector(std::function<void(std::string&)> collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  std::string out;
  out.reserve(4096);
  std::lock_guard lock(mu_);
  out +=
      "# HELP inplace_webhook_requests_total Admission requests by route and HTTP status code.\n";
  out += "# TYPE inplace_webhook_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "inplace_webhook_requests_total{route=\"" + EscapeLabel(key.first) + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP inplace_webhook_request_duration_seconds Time to answer an admission request.\n";
  out += "# TYPE inplace_webhook_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    h.Render(out, "inplace_webhook_request_duration_seconds",
             "route=\"" + EscapeLabel(route) + "\"");
  }
  out += "# HELP inplace_webhook_requests_in_flight Admission requests being answered now.\n";
  out += "# TYPE inplace_webhook_requests_in_flight gauge\n";
  out += "inplace_webhook_requests_in_flight " + std::to_string(inFlight.load()) + "\n";
  out += "# HELP inplace_webhook_handler_errors_total Handlers that failed (answered code 500).\n";
  out += "# TYPE inplace_webhook_handler_errors_total counter\n";
  for (const auto& [route, n] : handlerErrors_) {
    out += "inplace_webhook_handler_errors_total{route=\"" + EscapeLabel(route) + "\"} " +
           std::to_string(n) + "\n";
  }
  out +=
      "# HELP inplace_webhook_certificate_reloads_total Serving certificate reloads from disk.\n";
  out += "# TYPE inplace_webhook_certificate_reloads_total counter\n";
  out += "inplace_webhook_certificate_reloads_total " + std::to_string(certificateReloads.load()) +
         "\n";
  out +=
      "# HELP inplace_webhook_certificate_reload_errors_total Certificate reloads refused "
      "(unreadable, invalid or mismatched key).\n";
  out += "# TYPE inplace_webhook_certificate_reload_errors_total counter\n";
  out += "inplace_webhook_certificate_reload_errors_total " +
         std::to_string(certificateReloadErrors.load()) + "\n";
  for (const auto& c : collectors_) c(out);
  return out;
}

}  // namespace iw::metrics
