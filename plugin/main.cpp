// kubectl-inplace: the kubectl plugin of inplace-webhook (`kubectl inplace ...`, DESIGN.md §8.13).
// This file is the plugin's I/O: it runs kubectl (kubectl_runner.h) and prints; what to run and
// what the answers mean are the pure parts (command_line.h, status_report.h, explain.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "hooks/in_progress.h"
#include "hooks/keys.h"
#include "lib/json.h"
#include "lib/kube_objects.h"
#include "lib/label_selector.h"
#include "plugin/command_line.h"
#include "plugin/explain.h"
#include "plugin/kubectl_runner.h"
#include "plugin/status_report.h"

#ifndef IW_VERSION
#define IW_VERSION "0.0.0"
#endif

namespace iw::plugin {
namespace {

// Exit status when kubectl cannot read what a command needs (after retries).
constexpr int kExitError = 4;
constexpr int kReadAttempts = 5;

// kubectl's answer, parsed; a failed kubectl is retried (a transient API or network failure) up
// to kReadAttempts times a second apart, except when the object does not exist.
Status ReadJson(const std::vector<std::string>& args, json::Document& out) {
  Status last;
  for (int attempt = 1; attempt <= kReadAttempts; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::seconds(1));
    StatusOr<KubectlResult> r = RunKubectl(args);
    if (!r.ok()) return r.status();  // kubectl itself is missing: no retry helps
    if (r->exitCode == 0) {
      Status s = json::ParseUntrusted(r->out, out);
      if (s.ok()) return s;
      last = s.Prefixed("kubectl printed no JSON");
      continue;
    }
    std::string err = r->err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    last = Status::IOError(err.empty() ? "kubectl exited " + std::to_string(r->exitCode) : err);
    if (err.find("NotFound") != std::string::npos || err.find("not found") != std::string::npos) {
      return Status::NotFound(last.message());
    }
  }
  return last;
}

// What the commands read; `view` is the workload's metadata, into `workload` (a Snapshot is not
// moved). A Deployment's status and explain read its pods and ReplicaSets; a StatefulSet's status
// its pods and the ControllerRevision of its status.currentRevision (while an update runs), its
// explain the ControllerRevisions of its selector.
struct Snapshot {
  json::Document workload, pods, replicaSets, revision, revisions;
  bool revisionRead = false;  // `revision` holds the current ControllerRevision
  std::optional<kube::ObjectView> view;
};

enum class Need { kWorkload, kStatus, kExplain };

Status Read(const Invocation& inv, Snapshot& s, Need need) {
  if (Status st = ReadJson(GetWorkload(inv), s.workload); !st.ok()) return st;
  const bool sts = inv.kind == WorkloadKind::kStatefulSet;
  if (sts) {
    StatusOr<kube::StatefulSet> view = kube::StatefulSet::From(s.workload, "statefulSet");
    if (!view.ok()) return view.status();
    s.view = static_cast<const kube::ObjectView&>(*view);
  } else {
    StatusOr<kube::Deployment> view = kube::Deployment::From(s.workload, "deployment");
    if (!view.ok()) return view.status();
    s.view = static_cast<const kube::ObjectView&>(*view);
  }
  s.pods.SetObject();
  s.replicaSets.SetObject();
  s.revision.SetObject();
  s.revisions.SetObject();
  if (need == Need::kWorkload) return Status::Ok();
  const json::Value* sel = json::Path(&s.workload, {"spec", "selector"});
  if (sel == nullptr) {
    return Status::InvalidArgument("the " + std::string(KindName(inv.kind)) +
                                   " has no spec.selector");
  }
  StatusOr<kube::LabelSelector> selector = kube::LabelSelector::FromJson(*sel);
  if (!selector.ok()) return selector.status();
  const std::string text = selector->ToString();
  if (!sts) {
    if (Status st = ReadJson(GetPods(inv, text), s.pods); !st.ok()) return st;
    return ReadJson(GetReplicaSets(inv, text), s.replicaSets);
  }
  if (need == Need::kExplain) return ReadJson(GetControllerRevisions(inv, text), s.revisions);
  if (Status st = ReadJson(GetPods(inv, text), s.pods); !st.ok()) return st;
  const std::string current(json::StringOr(json::Find(&s.workload, "status"), "currentRevision"));
  if (current.empty() || !s.view->annotation(keys::kInProgressAnnotation)) return Status::Ok();
  // A revision not found (gone since the StatefulSet was read) leaves the rows to say so.
  Status st = ReadJson(GetControllerRevision(inv, current), s.revision);
  s.revisionRead = st.ok();
  return st.ok() || st.IsNotFound() ? Status::Ok() : st;
}

// What the API server allows with container resources, as the webhook's --pod-resize=auto asks
// it; unanswerable (discovery refused): nothing in place, with a note on stderr.
resize_support::Support ReadResizeSupport(const Invocation& inv) {
  json::Document apiV1, version;
  Status st = ReadJson(GetRaw(inv, "/api/v1"), apiV1);
  if (st.ok()) st = ReadJson(GetRaw(inv, "/version"), version);
  StatusOr<resize_support::Support> s = st.ok()
                                            ? resize_support::FromDiscoveryAnswers(apiV1, version)
                                            : StatusOr<resize_support::Support>(st);
  if (s.ok()) return *s;
  std::cerr << "note: cannot tell whether the API server serves pods/resize ("
            << s.status().message() << "): cpu/memory changes judged as not in place\n";
  return {};
}

int Fail(const Status& s, int code = kExitError) {
  std::cerr << "error: " << s.message() << "\n";
  return code;
}

// Runs kubectl, passing through what it prints (warnings of the webhook included, on stderr).
int Pass(const std::vector<std::string>& args) {
  StatusOr<KubectlResult> r = RunKubectl(args);
  if (!r.ok()) return Fail(r.status(), 1);
  std::cout << r->out << std::flush;
  std::cerr << r->err << std::flush;
  return r->exitCode == 0 ? 0 : 1;
}

std::string Key(StatusReport r) {
  for (PodRow& p : r.pods) p.inStateFor.reset();
  return RenderStatus(r);
}

int Status_(const Invocation& inv) {
  const bool tty = ::isatty(1) == 1;
  const auto started = std::chrono::steady_clock::now();
  bool sawRunning = false;
  std::optional<std::chrono::steady_clock::time_point> settlingSince;
  std::string lastKey;
  for (;;) {
    Snapshot s;
    if (Status st = Read(inv, s, Need::kStatus); !st.ok()) return Fail(st);
    StatusOr<StatusReport> r =
        inv.kind == WorkloadKind::kStatefulSet
            ? BuildStatefulSetStatus(s.workload, s.pods, s.revisionRead ? &s.revision : nullptr,
                                     Clock::now())
            : BuildStatus(s.workload, s.pods, s.replicaSets, Clock::now());
    if (!r.ok()) return Fail(r.status());
    if (!inv.watch) {
      std::cout << RenderStatus(*r);
      return 0;
    }
    const std::string key = Key(*r);
    if (tty) {
      std::cout << "\033[H\033[2J" << RenderStatus(*r) << std::flush;
    } else if (key != lastKey) {
      std::cout << RenderStatus(*r) << "\n" << std::flush;
    }
    lastKey = key;
    const WatchVerdict v = Judge(*r, sawRunning);
    if (r->record || v == WatchVerdict::kSettling) sawRunning = true;
    const std::string why = r->conditionReason + ": " + r->conditionMessage;
    switch (v) {
      case WatchVerdict::kDone:
        std::cout << (sawRunning ? "in-place update completed\n" : "no in-place update runs\n");
        return kExitDone;
      case WatchVerdict::kStuck:
        std::cout << "in-place update stuck: " << why << "\n";
        return kExitStuck;
      case WatchVerdict::kAborted:
        std::cout << "in-place update aborted: " << r->conditionMessage << "\n";
        return kExitAborted;
      case WatchVerdict::kSettling:
        if (!settlingSince) settlingSince = std::chrono::steady_clock::now();
        // The loop writes the end's report after the record's removal: wait for it a while; an end
        // the webhook made (abort without a loop, a change that is not eligible) gets none.
        if (std::chrono::steady_clock::now() - *settlingSince > std::chrono::seconds(10)) {
          std::cout << "in-place update ended without completing\n";
          return kExitAborted;
        }
        break;
      case WatchVerdict::kRunning:
        break;
    }
    if (inv.timeout && std::chrono::steady_clock::now() - started >= *inv.timeout) {
      std::cout << "timed out after " << FormatDuration(*inv.timeout) << "\n";
      return kExitTimeout;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// The running update's record, or a message (exit 1) when none runs.
int WithRunningUpdate(const Invocation& inv, const char* nothingTo,
                      std::optional<InProgress>& record) {
  Snapshot s;
  if (Status st = Read(inv, s, Need::kWorkload); !st.ok()) return Fail(st, 1);
  std::optional<std::string_view> text = s.view->annotation(keys::kInProgressAnnotation);
  record = ParseInProgressOrNone(text);
  const std::string ref = RefOf(inv.kind, inv.name);
  if (!text) {
    std::cerr << "error: no in-place update runs on " << ref << ": nothing to " << nothingTo
              << "\n";
    return 1;
  }
  if (!record) {
    std::cerr << "error: the in-progress record of " << ref
              << " is malformed; the loop aborts the update\n";
    return 1;
  }
  return 0;
}

int Command(const Invocation& inv) {
  if (inv.command == "help") {
    std::cout << Usage();
    return 0;
  }
  if (inv.command == "version") {
    std::cout << "kubectl-inplace " << IW_VERSION << "\n";
    return 0;
  }
  if (inv.command == "status") return Status_(inv);
  const bool sts = inv.kind == WorkloadKind::kStatefulSet;
  if (inv.command == "explain") {
    Snapshot s;
    if (Status st = Read(inv, s, Need::kExplain); !st.ok()) return Fail(st, 1);
    const resize_support::Support resize = ReadResizeSupport(inv);
    StatusOr<Explanation> e = sts ? ExplainStatefulSet(s.workload, s.revisions, resize)
                                  : Explain(s.workload, s.replicaSets, resize);
    if (!e.ok()) return Fail(e.status(), 1);
    std::cout << RenderExplanation(*e);
    return 0;
  }
  // A StatefulSet's undo is always kubectl rollout undo: the webhook refuses the undo command for
  // it and updates the template rollout undo writes in place (re-targeting a running update).
  if (inv.command == "undo" && sts) return Pass(RolloutUndo(inv));
  std::optional<InProgress> record;
  if (inv.command == "undo") {
    Snapshot s;
    if (Status st = Read(inv, s, Need::kWorkload); !st.ok()) return Fail(st, 1);
    if (!s.view->annotation(keys::kInProgressAnnotation)) return Pass(RolloutUndo(inv));
    if (inv.toRevision) {
      std::cerr << "error: an in-place update runs on deploy/" << inv.name
                << ": undo moves its pods back to the template they started from; "
                   "--to-revision applies only when no update runs (kubectl rollout undo)\n";
      return 1;
    }
    return Pass(Annotate(inv, keys::kUndoAnnotation));
  }
  if (inv.command == "abort") {
    if (int rc = WithRunningUpdate(inv, "abort", record); rc != 0) return rc;
    return Pass(Annotate(inv, keys::kAbortAnnotation));
  }
  const std::string ref = RefOf(inv.kind, inv.name);
  if (inv.command == "pause") {
    if (int rc = WithRunningUpdate(
            inv, sts ? "pause" : "pause (kubectl rollout pause pauses a Deployment)", record);
        rc != 0) {
      return rc;
    }
    if (!record->pausedByUs) {
      std::cout << "the in-place update of " << ref
                << " is already paused; kubectl inplace resume continues it\n";
      return 0;
    }
    return Pass(Annotate(inv, keys::kPauseAnnotation));
  }
  if (inv.command == "resume") {
    if (int rc = WithRunningUpdate(
            inv, sts ? "resume" : "resume (kubectl rollout resume resumes a Deployment)", record);
        rc != 0) {
      return rc;
    }
    if (record->pausedByUs) {
      std::cout << "the in-place update of " << ref << " is not paused: it runs\n";
      return 0;
    }
    // A Deployment's is kubectl rollout resume (the mutator reads it, §8.5); a StatefulSet has no
    // spec.paused: the pause command "false".
    return Pass(sts ? Annotate(inv, keys::kPauseAnnotation, "false") : RolloutResume(inv));
  }
  std::cerr << "error: unknown command " << inv.command << "\n";
  return 1;
}

}  // namespace
}  // namespace iw::plugin

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  iw::StatusOr<iw::plugin::Invocation> inv = iw::plugin::ParseCommandLine(args);
  if (!inv.ok()) {
    std::cerr << "error: " << inv.status().message() << "\nSee 'kubectl inplace --help'.\n";
    return 1;
  }
  return iw::plugin::Command(*inv);
}
