#include "server/loop/hold_answerer.h"

#include "lib/kube_objects.h"
#include "server/kube/kube_client.h"
#include "server/process/log.h"

namespace iw::loop {

HoldAnswerer::HoldAnswerer(kube::Api& api, Options options)
    : api_(api),
      options_(options),
      budget_(options.perSecond, static_cast<int>(2 * options.perSecond)) {}

std::optional<statefulset_hold::Answer> HoldAnswerer::Ask(const statefulset_hold::PodFacts& facts) {
  if (!budget_.TryAcquire()) {
    errors_++;
    return std::nullopt;
  }
  kube::Result r;
  {
    kube::DeadlineScope deadline(std::chrono::steady_clock::now() + options_.timeout);
    r = api_.Get(kube::StatefulSetPath(facts.ns, facts.setName));
  }
  std::optional<kube::StatefulSet> set;
  if (r.Ok()) {
    StatusOr<kube::StatefulSet> view = kube::StatefulSet::From(r.object, "statefulset");
    if (!view.ok()) {
      errors_++;
      return std::nullopt;
    }
    set = *view;
  } else if (!r.NotFound()) {
    errors_++;
    log::Warn("hold: cannot read the StatefulSet; its controller's pod DELETE goes through",
              {{"statefulset", facts.ns + "/" + facts.setName}, {"error", kube::Describe(r)}});
    return std::nullopt;
  }
  statefulset_hold::Answer a = statefulset_hold::Decide(set, facts);
  (a.hold ? holds_ : releases_)++;
  log::Info(a.hold ? "hold: the StatefulSet controller's pod DELETE refused"
                   : "hold: the StatefulSet controller's pod DELETE goes through",
            {{"pod", facts.ns + "/" + facts.name}, {"why", a.reason}});
  return a;
}

std::pair<int, std::string> HoldAnswerer::Serve(std::string_view query) {
  StatusOr<statefulset_hold::PodFacts> facts = statefulset_hold::DecodeQuery(query);
  if (!facts.ok()) return {400, facts.status().message() + "\n"};
  std::optional<statefulset_hold::Answer> a = Ask(*facts);
  if (!a) return {503, "no answer\n"};
  return {200, statefulset_hold::RenderAnswer(*a)};
}

void HoldAnswerer::RenderMetrics(std::string& out) const {
  out +=
      "# HELP inplace_webhook_hold_answers_total Answers to the StatefulSet controller's pod "
      "DELETEs (DESIGN.md §4.8): hold (refused), release (let through), error (no answer: the "
      "StatefulSet unreadable, or over the budget; the DELETE went through).\n";
  out += "# TYPE inplace_webhook_hold_answers_total counter\n";
  out += "inplace_webhook_hold_answers_total{answer=\"hold\"} " + std::to_string(holds_) + "\n";
  out +=
      "inplace_webhook_hold_answers_total{answer=\"release\"} " + std::to_string(releases_) + "\n";
  out += "inplace_webhook_hold_answers_total{answer=\"error\"} " + std::to_string(errors_) + "\n";
}

}  // namespace iw::loop
