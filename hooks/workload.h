// What the loop's planner needs of the workload an in-place update runs on (DESIGN.md §4.7): how
// its native controller is held and released, which pods the update works on and the template
// they were made from, the kind's own finish and undo, and how Events and messages name it. The
// planner (hooks/rollout_plan) is written against this alone; a kind is one implementation
// beside it (hooks/deployment_workload: a Deployment, its ReplicaSets and their pods).
//
// Pure, as the planner: an implementation reads views of the objects of one pass (which must
// outlive it) and returns writes; it never does I/O.
//
// Thread safety: none needed; one pass builds and uses one instance on one thread, calling
// FindBase before Undo and Finish.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/plan.h"
#include "lib/kube_objects.h"

namespace iw::rollout {

// How often to look again while waiting for the native controller, or while an update is blocked.
inline constexpr auto kControllerPoll = std::chrono::seconds(2);
inline constexpr auto kBlockedPoll = std::chrono::seconds(30);

// The pods one update works on and the template they were created from (Workload::FindBase).
struct RunBase {
  std::vector<const kube::Pod*> pods;  // live, in the order the update takes them
  kube::PodTemplate from;              // the template the pods were created from
  std::string owner;                   // what holds them, for messages ("ReplicaSet web-5d4f")
  bool finishBegun = false;            // the kind's finish has begun: the owner holds the target
};

// Instead of a base: the update ends (an abort with `why`), or waits (`why`, blocked).
struct NoBase {
  bool abort = false;
  std::string why;
};

class Workload {
 public:
  virtual ~Workload() = default;

  // The object the update runs on and how Events name it ("apps/v1", "Deployment").
  virtual const kube::ObjectView& object() const = 0;
  virtual std::string_view apiVersion() const = 0;
  virtual std::string_view kind() const = 0;
  // How a kubectl command names it: "deploy/web".
  virtual std::string Ref() const = 0;

  // The template the pods move to; spec.minReadySeconds; how many pods may be unavailable at once
  // (at least 1).
  virtual kube::PodTemplate podTemplate() const = 0;
  virtual int minReadySeconds() const = 0;
  virtual int MaxUnavailable() const = 0;

  // Every live pod the workload owns, of any revision (an abort puts them all back in service).
  virtual std::vector<const kube::Pod*> Pods() const = 0;

  // The native controller is held for the update (a Deployment: spec.paused).
  virtual bool Held() const = 0;
  // Why the update cannot go on for the kind's own reasons (its controller released by a write
  // that bypassed the webhook; a strategy that never runs two templates at once), or nullopt.
  virtual std::optional<std::string> EndReason() const = 0;
  // A revert to the template the pods' owner holds is under way, which the native controller
  // would leave half done: an abort waits for it (DESIGN.md §8.11).
  virtual bool RevertPending() const = 0;
  // The write that ends the update: the record (and an abort request) removed and, when
  // `release`, the native controller released.
  virtual Action EndPatch(bool release, std::string summary) const = 0;
  // How an abort's message says what `release` did ("the Deployment is unpaused ..."), and how
  // the completion's says the release ("Deployment unpaused").
  virtual std::string ReleaseWords(bool release) const = 0;
  virtual std::string_view ReleasedNote() const = 0;

  // The pods of the update `r` and the template they were made from; or why it ends or waits.
  // Undo and Finish act on the base found here (one pass: FindBase first).
  virtual std::variant<RunBase, NoBase> FindBase(const InProgress& r) = 0;
  // The undo command was given: whether it is, and the plan that takes the workload's template
  // back to `base.from` and re-targets the update there.
  virtual bool UndoRequested() const = 0;
  virtual Plan Undo(const RunBase& base, const InProgress& r, Clock::time_point now) const = 0;
  // Every pod is done: the kind's bookkeeping so that the native controller sees the target as
  // its own. Returns true when the update may end now (the caller adds the end); otherwise adds
  // the writes, phase, message and requeue of this pass.
  virtual bool Finish(Plan& plan, const RunBase& base, const InProgress& r) const = 0;

  // Progress in the workload's status (hooks/progress): this pass's, or, with no update
  // running, the close of a condition an update the webhook ended left behind.
  virtual void AddProgress(Plan& plan, Clock::time_point now) const = 0;
  virtual void AddEndedWithoutLoop(Plan& plan, Clock::time_point now) const = 0;

  // An Event about the workload.
  Action Event(std::string_view type, std::string_view reason, std::string_view message,
               Clock::time_point now, std::string name = {}, Metric metric = Metric::kNone) const {
    return EventAction(object(), apiVersion(), kind(), type, reason, message, now, std::move(name),
                       metric);
  }
};

}  // namespace iw::rollout
