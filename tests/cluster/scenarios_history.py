"""Issue 12 items 1 and 5 on the real cluster: revision history and rollback after in-place updates, the working
paths while an update runs (undo, restart, resume), and a user's pause (DESIGN.md §8.1, §8.5)."""

import json
import re
import time

import test_cluster as tc
from kube import IN_PROGRESS, annotations_of, check, images, snapshot, state_of, wait_for

PREFIX = "inplace-webhook.io/"
SETTINGS = {PREFIX + "lifecycle", PREFIX + "policy"}


def history(app):
    """`kubectl rollout history` as the user reads it: [revision, ...], oldest first."""
    out, _ = app.kubectl("rollout", "history", "deploy/web")
    return [int(m.group(1)) for m in re.finditer(r"^(\d+)\s", out, re.M)]


def revision_images(app, rev):
    """The image of container `app` in revision `rev`, from `kubectl rollout history --revision`."""
    out, _ = app.kubectl("rollout", "history", "deploy/web", "--revision", str(rev))
    m = re.search(r"^\s+app:\s*\n\s+Image:\s+(\S+)", out, re.M)
    check(m is not None, "kubectl rollout history --revision %d printed no app image:\n%s" % (rev, out))
    return m.group(1)


def no_bookkeeping(app, within=15):
    """No key of ours but the user's settings on the Deployment or any of its ReplicaSets (kubectl rollout undo copies
    a ReplicaSet's annotations into the Deployment), once the loop's cleanup after the end has had `within` seconds
    (it follows the end in a later pass: a loaded machine shows the gap)."""
    def left():
        out = []
        for obj in [app.deployment()] + app.replicasets():
            ours = sorted(k for k in annotations_of(obj) if k.startswith(PREFIX) and k not in SETTINGS)
            if ours:
                out.append("%s %s carries %s" % (obj.get("kind", "ReplicaSet"), obj["metadata"]["name"], ours))
        return out
    deadline = time.time() + within
    while left() and time.time() < deadline:
        time.sleep(0.5)
    check(not left(), "; ".join(left()))


def in_place(app, before, rs_before, command, restarted, expect=("in-place update",)):
    """Runs a kubectl command that changes the template, expects it in place, and waits for the finish."""
    _, warnings = app.kubectl(*command)
    for text in expect:
        tc.expect_warning(warnings, text)
    tc.expect_in_progress(app)
    return tc.finish(app, before, rs_before, restarted=restarted)


def r01_history_and_rollback(s):
    """After A -> B in place, `kubectl rollout history` shows A and B as consecutive revisions; `kubectl rollout
    undo` returns to A in place, `--to-revision` to B; no bookkeeping annotation reaches the Deployment."""
    app = tc.App(s, "r01")
    before = snapshot(app.create(tc.deployment("web", replicas=2, lifecycle={"inPlaceUpdate": {}})))
    check(history(app) == [1], "history of a new Deployment: %s" % history(app))

    in_place(app, before, app.rs_names(), ["set", "image", "deploy/web", "app=" + tc.V2], {"app"})
    check(history(app) == [1, 2], "history after A -> B in place: %s" % history(app))
    check(revision_images(app, 1) == tc.V1 and revision_images(app, 2) == tc.V2,
          "revision 1 runs %s, revision 2 %s" % (revision_images(app, 1), revision_images(app, 2)))
    no_bookkeeping(app)

    # kubectl rollout undo: back to A (revision 1 becomes 3), in place.
    before = snapshot(app.pods())
    d, _ = in_place(app, before, app.rs_names(), ["rollout", "undo", "deploy/web"], {"app"})
    check(images(d)["app"] == tc.V1, "undo went to %s" % images(d))
    check(history(app) == [2, 3], "history after undo: %s" % history(app))
    check(revision_images(app, 3) == tc.V1, "revision 3 runs %s" % revision_images(app, 3))
    check(annotations_of(d).get(PREFIX + "lifecycle") == json.dumps({"inPlaceUpdate": {}}),
          "the undo changed the lifecycle setting: %s" % annotations_of(d))
    no_bookkeeping(app)

    # --to-revision=2: B again, in place.
    before = snapshot(app.pods())
    d, _ = in_place(app, before, app.rs_names(), ["rollout", "undo", "deploy/web", "--to-revision=2"], {"app"})
    check(images(d)["app"] == tc.V2, "undo --to-revision=2 went to %s" % images(d))
    check(history(app) == [3, 4], "history after undo --to-revision=2: %s" % history(app))
    no_bookkeeping(app)


def r01b_undo_restart_resume_while_updating(s):
    """While an in-place update runs, kubectl rollout undo and restart refuse the paused Deployment and resume is
    re-paused; the paths the warnings name work: the undo annotation returns every pod in place, a restartedAt
    patch hands over to the native rollout."""
    app = tc.App(s, "r01b")
    app.create(tc.deployment("web", replicas=3,
                             lifecycle={"preUpdate": {"labelsHandler": {tc.HANDLER_LABEL: "true"}}}))
    # A second revision first (a native rollout: env is not eligible), so that undo has somewhere to go.
    app.kubectl("set", "env", "deploy/web", "-c", "app", "GREETING=hello")
    wait_for(lambda: app.rollout_complete() and len(app.rs_names()) == 2, 90, "the native rollout", app)
    check(history(app) == [1, 2], "history before the update: %s" % history(app))
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")
    before = snapshot(app.pods())
    rs0 = app.rs_names()
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.expect_warning(warnings, PREFIX + "undo=true")
    first, held = tc.hold_one_pod(app, lambda name: app.set_label(name, None))

    r = s.tools.kubectl("rollout", "undo", "deploy/web", "-n", app.ns, user="alice", check_rc=False)
    check(r.returncode != 0 and "paused" in r.stderr, "kubectl rollout undo: rc %d %s" % (r.returncode, r.stderr))
    _, warnings = app.kubectl("rollout", "resume", "deploy/web")
    tc.expect_warning(warnings, "to stop it")
    check(app.deployment()["spec"].get("paused") is True, "resume was not re-paused")

    # The undo path: every pod back to V1 in place (the updated one restarts once more, the others not at all).
    _, warnings = app.kubectl("annotate", "deploy/web", PREFIX + "undo=true")
    wait_for(lambda: images(app.deployment())["app"] == tc.V1, 20, "the loop to take the undo", app)
    tc.release_until_done(app, lambda p: app.set_label(p["metadata"]["name"], None), 90, "after the undo")
    d = app.deployment()
    check(PREFIX + "undo" not in annotations_of(d), "the undo command was left on the Deployment")
    check(history(app) == [1, 2], "history after an undone update: %s" % history(app))
    after = snapshot(app.pods())
    check(sorted(after) == sorted(before), "pods replaced: %s -> %s" % (sorted(before), sorted(after)))
    for name, snap in after.items():
        check(snap["uid"] == before[name]["uid"], "pod %s was recreated" % name)
        want = 2 if name == first else 0
        got = snap["containers"]["app"][1] - before[name]["containers"]["app"][1]
        check(got == want, "pod %s: app restarted %d times, expected %d" % (name, got, want))
    check(all(images(p)["app"] == tc.V1 for p in app.pods()), "pods not back at V1")
    check(app.rs_names() == rs0, "ReplicaSets changed by an undone update: %s" % app.rs_names())
    no_bookkeeping(app)
    check(held in after, "the held pod is gone")

    # The restart path during an update: the restartedAt patch the README names ends it; the native rollout
    # replaces every pod.
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")  # registered again: the next update waits in the hook
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.expect_in_progress(app)
    r = s.tools.kubectl("rollout", "restart", "deploy/web", "-n", app.ns, user="alice", check_rc=False)
    check(r.returncode != 0 and "paused" in r.stderr, "kubectl rollout restart: rc %d %s" % (r.returncode, r.stderr))
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _, warnings = app.kubectl("patch", "deploy/web", "-p", json.dumps(
        {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}}))
    tc.expect_warning(warnings, "in-place update ended")
    tc.release_until_done(app, lambda p: app.set_label(p["metadata"]["name"], None), 120, "after the restart")
    wait_for(app.rollout_complete, 120, "the native rollout of the restart", app)
    check(not set(snapshot(app.pods())) & set(before), "the restart left old pods: %s" % sorted(snapshot(app.pods())))
    check(all(images(p)["app"] == tc.V2 for p in app.pods()), "pods after the restart: %s"
          % [images(p) for p in app.pods()])


def r05_user_pause_mid_update(s):
    """A pause issued mid-update (the pause annotation: kubectl rollout pause says "already paused") holds it: no
    further pod starts; the pods in flight finish; kubectl rollout resume continues it in place; a pause still in
    force at the finish leaves the Deployment paused."""
    app = tc.App(s, "r05")
    tc.create_label_hooked(app, replicas=3)
    before = snapshot(app.pods())
    rs0 = app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    first, held = tc.hold_one_pod(app, lambda name: app.set_label(name, None))
    r = s.tools.kubectl("rollout", "pause", "deploy/web", "-n", app.ns, user="alice", check_rc=False)
    check("already paused" in r.stdout + r.stderr, "kubectl rollout pause: rc %d %s%s"
          % (r.returncode, r.stdout, r.stderr))
    _, warnings = app.kubectl("annotate", "deploy/web", PREFIX + "pause=true")
    tc.expect_warning(warnings, "in-place update paused")
    tc.expect_in_progress(app, paused_by_us=False)
    check(PREFIX + "pause" not in annotations_of(app.deployment()), "the pause command was left on the Deployment")
    # The held pod is in flight: released, it finishes; no third pod starts.
    app.set_label(held, None)
    wait_for(lambda: all(state_of(p) == "Normal" for p in app.pods())
             and sum(images(p)["app"] == tc.V2 for p in app.pods()) == 2, 40, "the pod in flight to finish", app)
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")
    time.sleep(3 * tc.SETTLE)
    waiting = [p["metadata"]["name"] for p in app.pods() if images(p)["app"] == tc.V1]
    check(len(waiting) == 1 and state_of(next(p for p in app.pods() if images(p)["app"] == tc.V1)) == "Normal",
          "a pod started while the user's pause held: %s" % [(p["metadata"]["name"], state_of(p)) for p in app.pods()])
    check(app.events_with("InPlaceUpdatePaused", kind="Deployment", wait=tc.EVENT_WAIT),
          "no InPlaceUpdatePaused Event")

    # Resume, then pause again with the last pod in flight: the finish leaves the Deployment paused.
    _, warnings = app.kubectl("rollout", "resume", "deploy/web")
    tc.expect_warning(warnings, "in-place update resumed")
    last = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                    "the last pod to start after the resume", app)["metadata"]["name"]
    check(last == waiting[0], "the pod that started is %s, expected %s" % (last, waiting[0]))
    app.kubectl("annotate", "deploy/web", PREFIX + "pause=true")
    tc.expect_in_progress(app, paused_by_us=False)
    tc.release_until_done(app, lambda p: app.set_label(p["metadata"]["name"], None), 60, "while paused")
    tc.finish(app, before, rs0, restarted={"app"}, paused=True)
    check(IN_PROGRESS not in annotations_of(app.deployment()), "in-progress left")
    # The user's pause is a native pause now: resume rolls nothing.
    before = snapshot(app.pods())
    app.kubectl("rollout", "resume", "deploy/web")
    wait_for(app.rollout_complete, 30, "the resumed Deployment to settle", app)
    tc.finish(app, before, app.rs_names(), restarted=set(), paused=False)


SCENARIOS = [r01_history_and_rollback, r01b_undo_restart_resume_while_updating, r05_user_pause_mid_update]
