// The loop's one writer: a plan's actions applied in order through the API (DESIGN.md §4.5).
// Every patch carries the resourceVersion it was planned from (or the one its own previous write
// in the same pass returned). A run of consecutive pod writes to different pods (a step's pods)
// is sent at once, by up to `concurrentWrites` threads; any other write alone. The first failed
// write ends the pass (the rest of its run has been sent, and what of it applied is counted). What
// the caches must show afterwards goes to the Deployment's expectations. A pod write the API server
// refuses (admission, validation, RBAC) is named in the result, for the progress report. Events are
// best effort, those with deterministic names created once.
//
// Thread safety: Apply from the loop's thread, and from the gate thread for actions without Events
// (a gate write creates none); CreateEvent and the remembered Event names are the loop thread's.
// The API client and the metrics are thread-safe. The threads Apply starts for a run of pod
// writes each send their own actions and end before Apply goes on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/kube_api.h"
#include "hooks/plan.h"
#include "lib/status.h"
#include "server/loop/expectations.h"
#include "server/loop/loop_metrics.h"

namespace iw::loop {

// What applying a plan's actions did.
struct WriteResult {
  Status status;          // OK: every write applied; else what failed
  bool conflict = false;  // a write was answered 409
  size_t writes = 0;      // writes applied (Events not counted)
  // A pod write the API server refused (an admission policy or webhook, validation, RBAC), or a
  // pods/resize write it refused (also: no such subresource): the pod, the refusal's message and
  // HTTP code, reported as PodUpdateRefused or, a resize, PodResizeRefused (hooks/progress.h).
  std::string refusedPod, refusal;
  bool refusedResize = false;
  int refusalCode = 0;
};

struct WriterOptions {
  // How long the caches may take to show a write, and to show a version newer than one refused
  // with a 409, before the Deployment is read through the API instead.
  std::chrono::milliseconds expectationTimeout{std::chrono::seconds(15)};
  std::chrono::milliseconds conflictTimeout{std::chrono::seconds(2)};
  std::string instance;            // Event reportingInstance (e.g. the pod name)
  LoopMetrics* metrics = nullptr;  // optional
  // How many pod writes of one run may be in flight at once (1: one at a time). The client's
  // rate limit still holds: this only keeps the round trips from adding up.
  size_t concurrentWrites = 8;
};

class Writer {
 public:
  Writer(kube::Api& api, WriterOptions options) : api_(api), options_(std::move(options)) {}

  // Applies `actions` in order for `workload` (for logs: "namespace/name" of a Deployment, or
  // kStatefulSetKeyPrefix and that of a StatefulSet); stops at the first failed write.
  // With `expectations`, records what the caches must show afterwards (`cached`: the plan was
  // made from them, so a write must also leave the version it was planned from).
  WriteResult Apply(std::string_view workload, std::vector<rollout::Action>& actions,
                    std::vector<Expectation>* expectations = nullptr, bool cached = false);

  // Creates the Event of `action` (named <object>.<hex> when it has no name); a named one once.
  // False when the API server refused it.
  bool CreateEvent(rollout::Action& action);

 private:
  // Stamps and sends one patch.
  kube::Result Send(rollout::Action& action);
  // Sends actions [begin, end) (patches of different objects), each answer at its index.
  void SendAll(std::vector<rollout::Action>& actions, size_t begin, size_t end,
               std::vector<kube::Result>& results);

  kube::Api& api_;
  const WriterOptions options_;
  std::set<std::string> createdEvents_;  // deterministic Event names already created
  uint64_t eventSeq_ = 0;
};

}  // namespace iw::loop
