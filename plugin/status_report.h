// `kubectl inplace status`: what an in-place update of one Deployment is doing, computed from
// what kubectl read (the Deployment, its pods, its ReplicaSets) and the time. Pure: no I/O.
// Every key is hooks/keys.h's; the hooks, targets and drains are the loop's own rules
// (hooks/lifecycle.h, hooks/pod_update.h), so a row says what the loop waits for.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/pod_state.h"
#include "lib/json.h"
#include "lib/status.h"

namespace iw::plugin {

using Clock = std::chrono::system_clock;

struct PodRow {
  std::string name;
  pod_update::PodState state = pod_update::PodState::kNormal;  // the state label
  bool ready = false;
  std::string images;    // "app=nginx:1.27,sidecar=pause:3"
  bool updated = false;  // at the update's target (the loop's AtTarget)
  std::string waitsOn;   // what it waits on; empty when it waits on nothing
  std::optional<std::chrono::seconds> inStateFor;  // since state-timestamp, for states not Normal
};

struct StatusReport {
  std::string ns, name;
  std::optional<InProgress> record;  // the running update; nullopt: none runs
  bool recordMalformed = false;      // an in-progress annotation that does not parse
  bool userPaused = false;           // the user holds the running update (pausedByUs false)
  bool abortRequested = false;       // abort=true is stored
  bool undoRequested = false;        // undo=true is stored
  // The loop's condition inplace-webhook.io/Progressing; empty when absent.
  std::string conditionStatus, conditionReason, conditionMessage;
  // The controller's own Progressing condition reason (ProgressDeadlineExceeded on a stall).
  std::string controllerReason;
  bool optedIn = false;  // the Deployment's inplace-webhook.io/enabled label is "true"
  int updated = 0;       // pods at the target
  int total = 0;         // live pods of the Deployment
  std::vector<PodRow> pods;
};

// `deployment` is the Deployment as `kubectl get -o json` prints it; `pods` and `replicaSets` are
// lists (`{"items":[...]}`) of its selector's objects (others are ignored). InvalidArgument when
// the Deployment's shape is not one Kubernetes gives.
StatusOr<StatusReport> BuildStatus(const json::Value& deployment, const json::Value& pods,
                                   const json::Value& replicaSets, Clock::time_point now);

// One word for where the running update is: "updating", "finishing" (every pod at the target and
// Normal), "held" (the user paused it), "aborting" (abort requested), "stuck" (a stall or a refused
// pod write); "" when none runs.
std::string Phase(const StatusReport& report);

// "45s", "3m12s", "1h02m".
std::string FormatDuration(std::chrono::seconds d);
// "[#######-------] 1/2 pods updated", `width` characters between the brackets.
std::string ProgressBar(int done, int total, int width = 30);
// The whole report as the command prints it.
std::string RenderStatus(const StatusReport& report);

// What `status --watch` concludes from one report (DESIGN.md §8.13).
enum class WatchVerdict {
  kRunning,   // an update runs and moves (or waits on a hook within its deadline)
  kStuck,     // it runs, but the loop reports a stall or a refused pod write: exit 1
  kDone,      // no update runs and the last one completed, or none ran while watched: exit 0
  kAborted,   // the watched update ended without completing: exit 2
  kSettling,  // an update's record is gone but the loop has not yet said how it ended
};
// `sawRunning`: an update ran at some earlier poll of this watch.
WatchVerdict Judge(const StatusReport& report, bool sawRunning);

// The exit codes of `status --watch`.
inline constexpr int kExitDone = 0;
inline constexpr int kExitStuck = 1;
inline constexpr int kExitAborted = 2;
inline constexpr int kExitTimeout = 3;

}  // namespace iw::plugin
