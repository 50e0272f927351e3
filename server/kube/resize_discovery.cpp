#include "server/kube/resize_discovery.h"

#include "lib/stop_sleep.h"
#include "server/kube/kube_client.h"
#include "server/process/log.h"

namespace iw::server {

namespace {

constexpr unsigned kPodResize = 1, kMemoryDecrease = 2, kAnswered = 4;

unsigned Bits(resize_support::Support s) {
  return (s.podResize ? kPodResize : 0) | (s.memoryLimitDecrease ? kMemoryDecrease : 0) | kAnswered;
}

std::string Describe(resize_support::Support s) {
  if (!s.podResize) return "not served: cpu/memory changes take the native rollout";
  return s.memoryLimitDecrease
             ? "served (memory limit decreases in place too)"
             : "served (a memory limit decrease needs resizePolicy RestartContainer)";
}

}  // namespace

ResizeDiscovery::ResizeDiscovery(kube::Api& api, Options options) : api_(api), options_(options) {}

ResizeDiscovery::~ResizeDiscovery() {
  Stop();
}

void ResizeDiscovery::Start() {
  if (thread_.joinable()) return;
  Status first = DiscoverOnce();
  thread_ = std::jthread([this, ok = first.ok()](std::stop_token stop) {
    bool last = ok;
    // Nothing here throws past the loop: DiscoverOnce() reports failure as a Status.
    while (SleepUnlessStopped(last ? options_.period : options_.retry, stop)) {
      last = DiscoverOnce().ok();
    }
  });
}

void ResizeDiscovery::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

Status ResizeDiscovery::DiscoverOnce() {
  kube::Result apiV1, version;
  {
    kube::DeadlineScope scope(std::chrono::steady_clock::now() + options_.timeout);
    apiV1 = api_.Get("/api/v1");
  }
  if (apiV1.Ok()) {
    kube::DeadlineScope scope(std::chrono::steady_clock::now() + options_.timeout);
    version = api_.Get("/version");
  }
  const kube::Result& bad = apiV1.Ok() ? version : apiV1;
  StatusOr<resize_support::Support> s =
      !bad.Ok() ? StatusOr<resize_support::Support>(Status::IOError(
                      "GET " + std::string(apiV1.Ok() ? "/version" : "/api/v1") + ": HTTP " +
                      std::to_string(bad.code) + (bad.message.empty() ? "" : ": " + bad.message)))
                : resize_support::FromDiscoveryAnswers(apiV1.object, version.object);
  if (!s.ok()) {
    log::Warn("cannot tell whether the API server serves pods/resize; asking again later",
              {{"error", s.status().message()}, {"current", Describe(Current())}});
    return s.status();
  }
  const unsigned now = Bits(*s);
  if (bits_.exchange(now) != now) log::Info("pods/resize " + Describe(*s));
  return Status::Ok();
}

resize_support::Support ResizeDiscovery::Current() const {
  const unsigned b = bits_.load();
  return {(b & kPodResize) != 0, (b & kMemoryDecrease) != 0};
}

void RenderResizeMetrics(std::string& out, resize_support::Support s, bool answered) {
  out +=
      "# HELP inplace_webhook_pod_resize_supported Whether a Deployment's cpu/memory change can be "
      "in place (the API server serves pods/resize; --pod-resize).\n"
      "# TYPE inplace_webhook_pod_resize_supported gauge\n";
  out += std::string("inplace_webhook_pod_resize_supported ") + (s.podResize ? "1" : "0") + "\n";
  out +=
      "# HELP inplace_webhook_pod_resize_discovered Whether the answer is known: the API server "
      "answered (--pod-resize=auto), or --pod-resize gave it.\n"
      "# TYPE inplace_webhook_pod_resize_discovered gauge\n";
  out += std::string("inplace_webhook_pod_resize_discovered ") + (answered ? "1" : "0") + "\n";
}

void ResizeDiscovery::RenderMetrics(std::string& out) const {
  RenderResizeMetrics(out, Current(), (bits_.load() & kAnswered) != 0);
}

}  // namespace iw::server
