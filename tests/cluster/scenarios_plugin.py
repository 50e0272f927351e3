"""Issue 15 item 1 on the real cluster: the kubectl plugin `kubectl inplace` (DESIGN.md §8.13). Run as a user runs it:
`kubectl inplace ...` with the directory of the build's `kubectl-inplace` on PATH (kubectl finds the plugin there),
as alice (the namespace's `edit` role) through her own kubeconfig, which the plugin never reads itself: it runs
kubectl. Every check is on what the real cluster reports."""

import os
import re
import time

import test_cluster as tc
from kube import IN_PROGRESS, annotations_of, check, images, is_ready, state_of, wait_for
from scenarios_progress import Background

_on_path = []


def plugin_on_path(s):
    """Puts the build directory (where kubectl-inplace is built next to the product binary) first on PATH, once."""
    if not _on_path:
        directory = os.path.dirname(os.path.abspath(s.binary))
        check(os.access(os.path.join(directory, "kubectl-inplace"), os.X_OK), "no kubectl-inplace in %s" % directory)
        os.environ["PATH"] = directory + os.pathsep + os.environ["PATH"]
        _on_path.append(directory)


def inplace(app, *args, rc=0, timeout=120):
    """`kubectl inplace ARGS -n NS` as alice; checks the exit code (None: any) and returns the process."""
    plugin_on_path(app.s)
    p = app.s.tools.kubectl("inplace", *(list(args) + ["-n", app.ns]), user="alice", check_rc=False,
                            timeout=timeout)
    check(rc is None or p.returncode == rc, "kubectl inplace %s exited %d, not %s:\n%s%s" % (
        " ".join(args), p.returncode, rc, p.stdout, p.stderr))
    return p


def rows(out):
    """The pod rows of `kubectl inplace status`: {pod: (state, rest of the line)}."""
    table = {}
    for line in out.splitlines():
        m = re.match(r"^(\S+)\s+(Normal|PreparingUpdate|Updating|Updated)\s+(.*)$", line)
        if m:
            table[m.group(1)] = (m.group(2), m.group(3))
    return table


def expect_rows_match(app, out):
    """Every live pod has a row whose state is its state label, and no other row is there."""
    table = rows(out)
    pods = {p["metadata"]["name"]: state_of(p) for p in app.pods()}
    check(set(table) == set(pods), "rows %s, pods %s:\n%s" % (sorted(table), sorted(pods), out))
    # A pod may move between the plugin's read and ours; the ones that did not must match.
    moved = [n for n in pods if table[n][0] != pods[n]]
    check(len(moved) <= 1, "status rows %s, pods' state labels %s:\n%s" % (table, pods, out))


def release(app):
    return lambda pod: app.set_label(pod["metadata"]["name"], None)


def watch(app, timeout="150s"):
    return Background(lambda: inplace(app, "status", "deploy/web", "--watch", "--timeout=" + timeout, rc=None,
                                      timeout=240))


def k01_status_watch_done_and_explain(s):
    """While a pre-update label hook holds a pod, `kubectl inplace status` shows a row per pod with its state label,
    names the hook the held pod waits on and for how long, and a progress bar; `status --watch` exits 0 when the
    update completes; `explain` says the image change is made in place, and `version` is the build's."""
    app = tc.App(s, "k01")
    tc.create_label_hooked(app, replicas=3)
    p = inplace(app, "status", "deploy/web")
    check("no in-place update runs" in p.stdout, "status with no update:\n%s" % p.stdout)
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    first, held = tc.hold_one_pod(app, lambda name: app.set_label(name, None))
    d = app.deployment()
    out = inplace(app, "status", "deploy/web").stdout
    print("  kubectl inplace status deploy/web:\n" + "\n".join("    " + line for line in out.splitlines()))
    record = annotations_of(d)[IN_PROGRESS]
    check("in-place update" in out.splitlines()[0], "header: %s" % out)
    check(re.search(r"\] 1/3 pods updated", out), "no 1/3 progress bar:\n%s" % out)
    expect_rows_match(app, out)
    state, rest = rows(out)[held]
    check(state == "PreparingUpdate" and "pre-update hook: label %s=true" % tc.HANDLER_LABEL in rest
          and re.search(r"\d+s$", rest), "the held pod's row: %s %s" % (state, rest))
    check("(updated)" in rows(out)[first][1], "the updated pod's row: %s" % (rows(out)[first],))
    check(record and '"pausedByUs":true' in record, "record: %s" % record)

    waiting = watch(app)
    tc.release_until_done(app, release(app), 90, "after the hook was released")
    p = waiting.wait(60)
    print("  status --watch (stdout a pipe), its last lines: exit %d\n%s" % (
        p.returncode, "\n".join("    " + line for line in p.stdout.splitlines()[-8:])))
    check(p.returncode == 0 and "in-place update completed" in p.stdout,
          "status --watch after the completed update: exit %d\n%s%s" % (p.returncode, p.stdout[-2000:], p.stderr))
    check(all(images(q)["app"] == tc.V2 for q in app.pods()), "not every pod at V2: %s" % app.pod_table())

    out = inplace(app, "explain", "deploy/web").stdout
    print("  kubectl inplace explain deploy/web:\n" + "\n".join("    " + line for line in out.splitlines()))
    check("is made IN PLACE" in out and "image of app -> " + tc.V2 in out, "explain after set image:\n%s" % out)
    out = inplace(app, "version").stdout
    check(re.match(r"^kubectl-inplace \d+\.\d+\.\d+", out), "version: %s" % out)


def k02_watch_exits_1_on_a_stall(s):
    """A hook that is never released, with progressDeadlineSeconds 10: `status --watch --timeout=2s` exits 3 first;
    then `status --watch` exits 1 and says the update is stuck (ProgressDeadlineExceeded), as `kubectl rollout
    status` fails on the deadline."""
    app = tc.App(s, "k02")
    obj = tc.deployment("web", replicas=2, lifecycle={"preUpdate": {"labelsHandler": {tc.HANDLER_LABEL: "true"}}})
    obj["spec"]["progressDeadlineSeconds"] = 10
    app.create(obj)
    for q in app.pods():
        app.set_label(q["metadata"]["name"], "true")
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    t0 = time.time()
    p = inplace(app, "status", "deploy/web", "-w", "--timeout=2s", rc=3)
    print("  status --watch --timeout=2s before the stall: exit 3 after %.1f s: %s" % (
        time.time() - t0, p.stdout.splitlines()[-1]))
    check("timed out after 2s" in p.stdout, "watch with a timeout: %s" % p.stdout[-500:])
    p = inplace(app, "status", "deploy/web", "-w", "--timeout=120s", rc=None, timeout=180)
    took = time.time() - t0
    print("  status --watch on a stall: exit %d after %.1f s: %s" % (p.returncode, took, p.stdout.splitlines()[-1]))
    check(p.returncode == 1 and "stuck" in p.stdout and "ProgressDeadlineExceeded" in p.stdout,
          "status --watch on a stall: exit %d\n%s%s" % (p.returncode, p.stdout[-2000:], p.stderr))
    inplace(app, "abort", "deploy/web")


def k03_abort_and_watch_exits_2(s):
    """`kubectl inplace abort` while a hook holds a pod: kubectl's output and the webhook's answer are printed, a
    running `status --watch` exits 2 (the update ended without completing), the native rollout takes over; a second
    abort, with no update left, is refused with exit 1."""
    app = tc.App(s, "k03")
    tc.create_label_hooked(app, replicas=2)
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    wait_for(lambda: any(state_of(q) == "PreparingUpdate" for q in app.pods()), 30, "a pod in PreparingUpdate", app)
    waiting = watch(app)
    time.sleep(2)
    p = inplace(app, "abort", "deploy/web")
    print("  kubectl inplace abort: %s %s" % (p.stdout.strip(), p.stderr.strip().replace("\n", " | ")))
    check("annotated" in p.stdout, "abort printed: %s%s" % (p.stdout, p.stderr))
    p = waiting.wait(60)
    print("  status --watch after the abort: exit %d: %s" % (p.returncode, p.stdout.splitlines()[-1]))
    check(p.returncode == 2 and "aborted" in p.stdout,
          "status --watch after the abort: exit %d\n%s%s" % (p.returncode, p.stdout[-2000:], p.stderr))
    wait_for(lambda: IN_PROGRESS not in annotations_of(app.deployment()), 30, "the record to go", app)
    p = inplace(app, "abort", "deploy/web", rc=1)
    print("  kubectl inplace abort with no update running: exit 1: %s" % p.stderr.strip())
    check("nothing to abort" in p.stderr, "a second abort: %s" % p.stderr)


def k04_pause_holds_resume_continues(s):
    """`kubectl inplace pause` during an update: the pod already in a hook goes on, no further pod leaves Normal,
    status says the user holds it; `kubectl inplace resume` continues it in place to the end."""
    app = tc.App(s, "k04")
    tc.create_label_hooked(app, replicas=3)
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    first, held = tc.hold_one_pod(app, lambda name: app.set_label(name, None))
    p = inplace(app, "pause", "deploy/web")
    print("  kubectl inplace pause: %s %s" % (p.stdout.strip(), p.stderr.strip().replace("\n", " | ")))
    wait_for(lambda: '"pausedByUs":false' in annotations_of(app.deployment()).get(IN_PROGRESS, ""), 10,
             "the pause in the record", app)
    app.set_label(held, None)
    wait_for(lambda: any(q["metadata"]["name"] == held and state_of(q) == "Normal" and images(q)["app"] == tc.V2
                         and is_ready(q) for q in app.pods()), 40, "the held pod to finish", app)
    rest = [q["metadata"]["name"] for q in app.pods() if q["metadata"]["name"] not in (first, held)]
    check(len(rest) == 1, "pods: %s" % app.pod_table())
    app.set_label(rest[0], None)  # even unhooked, it must not start while paused
    deadline = time.time() + 3 * tc.SETTLE
    while time.time() < deadline:
        q = [q for q in app.pods() if q["metadata"]["name"] == rest[0]][0]
        check(state_of(q) == "Normal" and images(q)["app"] == tc.V1, "pod %s moved while paused:\n%s" % (
            rest[0], app.pod_table()))
        time.sleep(0.2)
    out = inplace(app, "status", "deploy/web").stdout
    print("  status while paused:\n" + "\n".join("    " + line for line in out.splitlines()))
    check("paused by user: yes" in out and "held: the update is paused" in rows(out)[rest[0]][1],
          "status while paused:\n%s" % out)
    p = inplace(app, "pause", "deploy/web")
    check("already paused" in p.stdout, "a second pause: %s" % p.stdout)
    p = inplace(app, "resume", "deploy/web")
    print("  kubectl inplace resume: %s %s" % (p.stdout.strip(), p.stderr.strip().replace("\n", " | ")))
    tc.release_until_done(app, release(app), 60, "after the resume")
    check(all(images(q)["app"] == tc.V2 for q in app.pods()), "not every pod at V2: %s" % app.pod_table())
    d = app.deployment()
    check(not d["spec"].get("paused"), "the Deployment stayed paused after the resumed update")


def k05_undo_mid_update_in_place(s):
    """`kubectl inplace undo` while an update runs (kubectl rollout undo refuses the paused Deployment): every pod goes
    back to V1 in place, with the same UIDs; `--to-revision` is refused then. With no update running, undo is
    kubectl rollout undo (which goes back in place too)."""
    app = tc.App(s, "k05")
    tc.create_label_hooked(app, replicas=3)
    uids = {q["metadata"]["name"]: q["metadata"]["uid"] for q in app.pods()}
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.hold_one_pod(app, lambda name: app.set_label(name, None))
    p = inplace(app, "undo", "deploy/web", "--to-revision=1", rc=1)
    check("--to-revision" in p.stderr, "undo --to-revision mid-update: %s" % p.stderr)
    p = inplace(app, "undo", "deploy/web")
    print("  kubectl inplace undo: %s %s" % (p.stdout.strip(), p.stderr.strip().replace("\n", " | ")))
    tc.release_until_done(app, release(app), 90, "after the undo")
    pods = app.pods()
    check(all(images(q)["app"] == tc.V1 for q in pods), "after the undo: %s" % app.pod_table())
    check({q["metadata"]["name"]: q["metadata"]["uid"] for q in pods} == uids,
          "the undo replaced pods:\n%s" % app.pod_table())
    # With no update running, undo is kubectl rollout undo: the in-place undo left the history as before the
    # update (one revision), so kubectl has nothing to go back to and says so.
    p = inplace(app, "undo", "deploy/web", rc=None)
    print("  kubectl inplace undo (no update running): exit %d: %s%s" % (p.returncode, p.stdout.strip(),
                                                                        p.stderr.strip()))
    check(("rolled back" in p.stdout and p.returncode == 0)
          or ("no rollout history found" in p.stderr and p.returncode == 1),
          "undo with no update running: exit %d %s%s" % (p.returncode, p.stdout, p.stderr))
    if p.returncode == 0:
        tc.release_until_done(app, release(app), 90, "after kubectl rollout undo")


def k06_explain_env_change_and_flags(s):
    """An env change is a native rollout: `kubectl inplace explain` names spec.template.spec.containers[0].env as the
    path that blocks it; kubectl's global flags work before the command too; usage errors exit 1."""
    app = tc.App(s, "k06")
    app.create(tc.deployment("web", replicas=2))
    _, warnings = app.kubectl("set", "env", "deploy/web", "EXTRA=1")
    tc.expect_warning(warnings, "in-place update not possible (spec.template.spec.containers[0].env changed)")
    wait_for(app.rollout_complete, 90, "the native rollout", app)
    plugin_on_path(s)
    p = s.tools.kubectl("inplace", "-n", app.ns, "explain", "deployment/web", user="alice")
    print("  kubectl inplace explain deployment/web:\n" + "\n".join("    " + line for line in p.stdout.splitlines()))
    check("is NOT made in place" in p.stdout and "blocking path: spec.template.spec.containers[0].env" in p.stdout,
          "explain after set env:\n%s" % p.stdout)
    out = inplace(app, "status", "deploy/web").stdout
    print("  kubectl inplace status deploy/web (no update running):\n" + "\n".join(
        "    " + line for line in out.splitlines()))
    check(out.startswith("Deployment %s/web: no in-place update runs" % app.ns), "status: %s" % out)
    # kubectl itself refuses flags before a plugin's name; they go after it.
    p = s.tools.kubectl("-n", app.ns, "inplace", "version", user="alice", check_rc=False)
    print("  kubectl -n NS inplace version: exit %d: %s%s" % (p.returncode, p.stdout.strip(), p.stderr.strip()))
    p = inplace(app, "status", "deploy/nope", rc=4)
    check("not found" in p.stderr, "status of a missing Deployment: %s" % p.stderr)
    p = inplace(app, "frobnicate", "deploy/web", rc=1)
    print("  kubectl inplace frobnicate deploy/web: exit 1: %s" % p.stderr.strip().replace("\n", " | "))
    check("unknown command" in p.stderr, "usage error: %s" % p.stderr)


def k07_post_update_hook_named(s):
    """A post-update finalizer hook: the updated pod waits in Updated until the finalizer is back, and
    `kubectl inplace status` names that finalizer; once it is set the update completes."""
    app = tc.App(s, "k07")
    app.create(tc.deployment("web", replicas=1, lifecycle={"postUpdate": {"finalizersHandler": [tc.FINALIZER]}}))
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    pod = wait_for(lambda: next((q for q in app.pods() if state_of(q) == "Updated"), None), 60, "a pod in Updated",
                   app)["metadata"]["name"]
    out = inplace(app, "status", "deploy/web").stdout
    print("  kubectl inplace status deploy/web:\n" + "\n".join("    " + line for line in out.splitlines()))
    check(rows(out)[pod][0] == "Updated" and "post-update hook: finalizer " + tc.FINALIZER in rows(out)[pod][1],
          "the row of the pod in Updated: %s" % (rows(out).get(pod),))
    app.set_finalizer(pod, True)
    p = inplace(app, "status", "deploy/web", "-w", "--timeout=60s", rc=0, timeout=90)
    # The loop may finish before the plugin starts (a loaded machine): then it reports the last update's end.
    check("in-place update completed" in p.stdout or "last in-place update: True InPlaceUpdateCompleted" in p.stdout,
          "watch: %s" % p.stdout[-1000:])


SCENARIOS = [k01_status_watch_done_and_explain, k02_watch_exits_1_on_a_stall, k03_abort_and_watch_exits_2,
             k04_pause_holds_resume_continues, k05_undo_mid_update_in_place, k06_explain_env_change_and_flags,
             k07_post_update_hook_named]
