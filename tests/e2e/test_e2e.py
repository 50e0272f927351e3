#!/usr/bin/env python3
"""End-to-end scenarios of the whole product (DESIGN.md §4): the test API server with its simulated
kubelet and controllers calls our real webhook binary (through a Service-like proxy) for every
matching request, and the same binary's loop drives the in-place updates. The user's changes are
sent as the user "alice"; the hook handler (an LB controller) is played by the test as its own
service account.

    python3 tests/e2e/test_e2e.py BINARY SOURCE_DIR CERT_DIR [-k NAME] [--keep] [--jobs N]

With --jobs N (or IW_E2E_JOBS), N scenarios run at once, each in its own process with its own API server
and webhooks on free ports; a scenario's output is printed whole when it ends.

Every scenario runs against a fresh API server and fresh webhook processes, and ends with the
invariants of an in-place update: no ReplicaSet with pods added (unless a native rollout was meant;
at most the zero-replica history of the template the pods left), the pods' ReplicaSet at the template
with the newest revision, the Deployment's paused state as the user left it and no `in-progress`,
every pod Normal and Ready, the same pod names and UIDs, restartCount +1 only for changed containers.
On failure it prints the Deployment, ReplicaSets, pods, Events and the tail of each webhook's log.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (ABORT, CONTROLLER_USER, IN_PROGRESS, LEASE_PATH, READY_GATE, REVISION,  # noqa: E402
                     STATE_TIMESTAMP, App, Cluster, Failure, PodSampler, annotations_of, check, condition, deployment,
                     deployments_path, images, is_ready, labels_of, pods_path, restart_counts, rfc3339_seconds,
                     set_finalizer, set_label, state_of, wait_for)

FINALIZER = "lb.example.com/registered"
HANDLER_LABEL = "lb.example.com/registered"
OLD, NEW, NEWER = "nginx:1.25", "nginx:1.27", "nginx:1.28"
SETTLE = 1.0  # seconds: long enough for a loop that was going to act wrongly to have done it


# ---------------------------------------------------------------------------------------------
# Shared checks


def snapshot(pods):
    """name → (uid, restartCounts) of the pods."""
    return {p["metadata"]["name"]: (p["metadata"]["uid"], restart_counts(p)) for p in pods}


def expect_events(app, reason, kind, name=None, count=1, timeout=5):
    """Exactly `count` Events `reason` about the `kind` object (named `name`, when given). The loop creates an Event
    after the write it reports (DESIGN §4.5), so a check made as soon as the write shows waits for the Event."""
    args = (reason, kind) + ((name,) if name else ())
    wait_for(lambda: len(app.events_with(*args)) >= count, timeout, "%d %s Event(s)" % (count, reason), app)
    got = len(app.events_with(*args))
    check(got == count, "expected %d %s Event(s), got %d" % (count, reason, got))


def rs_names(app):
    return [r["metadata"]["name"] for r in app.replicasets()]


def finish(env, app, before, rs_before, restarted, paused=False, timeout=40):
    """Waits for the in-place update to end and checks its invariants. `before` is the snapshot()
    taken before the user's change; `restarted` the containers whose image changed."""
    wait_for(app.in_place_done, timeout, "the in-place update of %s/%s to finish" % (app.ns, app.name), app)
    check(env.cluster.idle(), "the simulated controllers did not settle")
    time.sleep(SETTLE)  # a late mistake (a new ReplicaSet, a re-pause) would show up now
    check(env.cluster.idle(), "the simulated controllers did not settle")
    d = app.deployment()
    ann = annotations_of(d)
    check(IN_PROGRESS not in ann, "in-progress still on the Deployment: %s" % ann.get(IN_PROGRESS))
    check(ABORT not in ann, "abort annotation left on the Deployment")
    check(bool(d["spec"].get("paused")) == paused,
          "Deployment paused=%s, expected %s" % (d["spec"].get("paused"), paused))
    st = d.get("status") or {}
    check(st.get("observedGeneration") == d["metadata"]["generation"], "Deployment status not observed")
    check(st.get("updatedReplicas") == d["spec"]["replicas"] == st.get("replicas"),
          "Deployment status: updatedReplicas=%s replicas=%s" % (st.get("updatedReplicas"), st.get("replicas")))
    # The pods' ReplicaSet holds the template now, with the newest revision; at most one zero-replica
    # ReplicaSet was added (the history of the template the pods left, DESIGN.md §8.1); a native
    # rollout would have made one with replicas instead.
    rss = app.replicasets()
    added = [r for r in rss if r["metadata"]["name"] not in rs_before]
    check(len(added) <= 1 and all(not r["spec"].get("replicas") for r in added),
          "ReplicaSets changed: %s, before %s (a native rollout ran)" % (rs_names(app), rs_before))
    active = [r for r in rss if r["spec"].get("replicas")]
    check(len(active) == 1, "%d ReplicaSets with replicas" % len(active))
    check(active[0]["metadata"]["name"] in rs_before, "the active ReplicaSet %s is new (before: %s)"
          % (active[0]["metadata"]["name"], rs_before))
    want_images = images(d["spec"]["template"])
    want_labels = d["spec"]["template"]["metadata"]["labels"]
    check(images(active[0]["spec"]["template"]) == want_images, "ReplicaSet template images differ")
    others = [revision(r) for r in rss if r is not active[0]]
    check(revision(active[0]) == revision(d) and all(n < revision(active[0]) for n in others),
          "the active ReplicaSet has revision %d, the Deployment %d, the others %s"
          % (revision(active[0]), revision(d), others))
    pods = app.pods()
    check(all(p["metadata"]["ownerReferences"][0]["uid"] == active[0]["metadata"]["uid"] for p in pods),
          "the pods' owner is not the active ReplicaSet")
    after = snapshot(pods)
    check(sorted(after) == sorted(before), "pod names changed: %s → %s" % (sorted(before), sorted(after)))
    for p in pods:
        name = p["metadata"]["name"]
        uid, counts = after[name]
        check(uid == before[name][0], "pod %s has a new UID (it was recreated)" % name)
        check(state_of(p) == "Normal" and is_ready(p), "pod %s is %s, Ready=%s" % (name, state_of(p), is_ready(p)))
        check(images(p) == want_images, "pod %s runs %s, template says %s" % (name, images(p), want_images))
        for k, v in want_labels.items():
            check(labels_of(p).get(k) == v, "pod %s label %s=%s, template says %s" % (name, k, labels_of(p).get(k), v))
        for c, n in counts.items():
            delta = n - before[name][1].get(c, 0)
            want = 1 if c in restarted else 0
            check(delta == want, "pod %s container %s restarted %d times, expected %d" % (name, c, delta, want))
    return d, pods


def revision(obj):
    """deployment.kubernetes.io/revision of a Deployment or ReplicaSet, as a number (0 when absent)."""
    return int(annotations_of(obj).get(REVISION) or 0)


def expect_warning(warnings, text):
    check(any(text in w for w in warnings), "no warning containing %r; got %s" % (text, warnings))


def expect_in_progress(d, paused_by_us=True):
    check(d["spec"].get("paused") is True, "the webhook did not pause the Deployment")
    rec = annotations_of(d).get(IN_PROGRESS)
    check(rec is not None, "the webhook did not record in-progress")
    check(json.loads(rec).get("pausedByUs") is paused_by_us, "in-progress pausedByUs: %s" % rec)


def pod_writes(env, ns, since=0.0, until=None):
    """The controller's pod writes (PATCH/PUT on pods and pods/status) in the API server's log."""
    prefix = "/api/v1/namespaces/%s/pods/" % ns
    return [r for r in env.cluster.requests_log()
            if r.get("user") == CONTROLLER_USER and r["method"] in ("PATCH", "PUT")
            and r["path"].startswith(prefix) and r["time"] >= since and (until is None or r["time"] <= until)]


def register_pods(env, app, hook):
    """The LB controller registers every pod: adds its finalizer or label (arms the hooks)."""
    for p in app.pods():
        if hook == "finalizer":
            set_finalizer(env.cluster.lb, app.ns, p["metadata"]["name"], FINALIZER, True)
        else:
            set_label(env.cluster.lb, app.ns, p["metadata"]["name"], HANDLER_LABEL, "true")


def release(env, app, name, hook):
    if hook == "finalizer":
        set_finalizer(env.cluster.lb, app.ns, name, FINALIZER, False)
    else:
        set_label(env.cluster.lb, app.ns, name, HANDLER_LABEL, None)


def hold_one_pod(env, app, hook):
    """Releases the first pod that reaches PreparingUpdate, lets it finish, and returns
    (updated pod name, held pod name) once the second pod waits in PreparingUpdate."""
    first = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 20,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    release(env, app, first, hook)
    wait_for(lambda: any(p["metadata"]["name"] == first and state_of(p) == "Normal" and images(p)["app"] == NEW
                         and is_ready(p) for p in app.pods()), 20, "pod %s updated" % first, app)
    held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 20,
                    "a second pod in PreparingUpdate", app)["metadata"]["name"]
    return first, held


# ---------------------------------------------------------------------------------------------
# Scenarios


def s01_image_then_labels(env):
    """An image change, then a label change, on a 3-replica Deployment: every pod in place."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s01", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    check(len(rs0) == 1, "expected one ReplicaSet after creation: %s" % rs0)

    d, warnings = app.set_image("app", NEW)  # kubectl set image deploy/web app=nginx:1.27
    expect_warning(warnings, "in-place update: 3 pods will be updated")
    expect_in_progress(d)
    calls = [a for a in env.cluster.admission_log() if a["webhook"] == "mutate-deployments.inplace-webhook.io"
             and a["user"] == "alice" and a.get("patched")]
    check(calls, "the API server did not call the mutating webhook for alice's change")
    finish(env, app, before, rs0, restarted={"app"})
    pods = app.pods()
    for reason in ("InPlaceUpdateStarted", "InPlaceUpdateCompleted"):
        expect_events(app, reason, "Deployment", "web")
    ours = [e["reason"] for e in app.events() if e["involvedObject"]["kind"] == "Pod"
            and (e.get("source") or {}).get("component") == "inplace-webhook"]
    check(not ours, "a pod's ordinary steps make no Event, got %s" % ours)
    check(all(state_of(p) == "Normal" for p in pods) and all(labels_of(p).get("inplace-webhook.io/state")
                                                             for p in pods),
          "pods are not stamped with the state label")

    # kubectl edit: a template label changed and one added; nothing restarts.
    before, rs1 = snapshot(pods), rs_names(app)

    def relabel(dep):
        dep["spec"]["template"]["metadata"]["labels"].update({"version": "v2", "tier": "frontend"})

    d, warnings = app.edit(relabel)
    expect_warning(warnings, "in-place update: 3 pods will be updated")
    expect_in_progress(d)
    finish(env, app, before, rs1, restarted=set())
    for p in app.pods():
        check(labels_of(p).get("version") == "v2" and labels_of(p).get("tier") == "frontend",
              "pod %s labels %s" % (p["metadata"]["name"], labels_of(p)))
    expect_events(app, "InPlaceUpdateCompleted", "Deployment", "web", count=2)  # a second one


def s02_pre_and_post_hooks(env):
    """A pre-update drain hook and a post-update hook (a finalizer), played by the test."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s02", "web")
    hooks = {"preUpdate": {"finalizersHandler": [FINALIZER]}, "postUpdate": {"finalizersHandler": [FINALIZER]}}
    app.create(deployment("web", replicas=3, lifecycle=hooks))
    app.wait_created()
    register_pods(env, app, "finalizer")
    before, rs0 = snapshot(app.pods()), rs_names(app)
    d, warnings = app.set_image("app", NEW)
    expect_in_progress(d)

    hold = 1.0  # the handler takes its time: the loop must wait for it, whatever wakes it meanwhile
    track = {n: {} for n in before}
    deadline = time.time() + 60
    while not app.in_place_done():
        check(time.time() < deadline, "the update did not finish in 60 s")
        now = time.time()
        for p in app.pods():
            name = p["metadata"]["name"]
            r = track[name]
            st, armed, img = state_of(p), FINALIZER in (p["metadata"].get("finalizers") or []), images(p)["app"]
            if "released" not in r:
                check(st in ("Normal", "PreparingUpdate") and img == OLD,
                      "pod %s is %s with image %s before its pre-update hook was released" % (name, st, img))
            if st == "PreparingUpdate" and armed:
                r.setdefault("preparing", now)
                if now - r["preparing"] >= hold:
                    release(env, app, name, "finalizer")  # drained: remove the finalizer
                    r["released"] = time.time()
            if st == "Updated" and not armed:
                r.setdefault("updated", now)
                if now - r["updated"] >= hold:
                    set_finalizer(env.cluster.lb, app.ns, name, FINALIZER, True)  # registered again
                    r["rearmed"] = time.time()
            if "released" in r and st == "Normal":
                check("rearmed" in r, "pod %s returned to Normal before its post-update hook was re-armed" % name)
        time.sleep(0.03)
    for name, r in track.items():
        check({"preparing", "released", "updated", "rearmed"} <= set(r),
              "pod %s did not go through both hooks: %s" % (name, sorted(r)))
    finish(env, app, before, rs0, restarted={"app"})
    for p in app.pods():
        check(FINALIZER in p["metadata"].get("finalizers", []), "pod %s lost its finalizer" % p["metadata"]["name"])
        for reason in ("PodPreparingUpdate", "PodUpdating", "PodUpdated"):  # ordinary steps: no Event
            check(not app.events_with(reason, "Pod", p["metadata"]["name"]),
                  "a %s Event on %s" % (reason, p["metadata"]["name"]))


def s03_mark_not_ready_grace(env):
    """markPodNotReady + gracePeriodSeconds with the readiness gate: not Ready during the grace."""
    grace = 2
    env.cluster.start_webhook("iw-a")
    app = env.app("s03", "web")
    app.create(deployment("web", replicas=2, gate=True, lifecycle={"preUpdate": {"markPodNotReady": True}},
                          policy={"gracePeriodSeconds": grace}))
    pods = app.wait_created()
    for p in pods:
        check(condition(p, READY_GATE) == "True", "the loop did not set the gate True on new pod %s"
              % p["metadata"]["name"])
    before, rs0 = snapshot(pods), rs_names(app)
    with PodSampler(app) as sampler:
        d, _ = app.set_image("app", NEW)
        expect_in_progress(d)
        finish(env, app, before, rs0, restarted={"app"})
    for name in before:
        timeline = [(t, p) for t, ps in sampler.samples for p in ps if p["metadata"]["name"] == name]
        gate_false = next((t for t, p in timeline if condition(p, READY_GATE) == "False"), None)
        written = next((t for t, p in timeline if images(p)["app"] == NEW), None)
        check(gate_false is not None and written is not None, "pod %s: gate never False or never updated" % name)
        check(written - gate_false >= grace - 0.25,
              "pod %s: written %.2f s after its gate went False; gracePeriodSeconds is %d"
              % (name, written - gate_false, grace))
        # The loop writes the gate only; Ready is the kubelet's (the simulated one recomputes it as soon as it
        # sees the gate False): out of Ready at once, and not Ready again until the pod write.
        not_ready = next((t for t, p in timeline if t >= gate_false and not is_ready(p)), None)
        check(not_ready is not None and not_ready - gate_false < 1.0,
              "pod %s: not out of Ready within 1 s of its gate going False" % name)
        ready_in_grace = [t for t, p in timeline if not_ready <= t <= written and is_ready(p)]
        check(not ready_in_grace, "pod %s was Ready during its grace period" % name)
        unready_normal = [t for t, p in timeline if t < gate_false and not is_ready(p)]
        check(not unready_normal, "pod %s was not Ready before its update began" % name)
        last = timeline[-1][1]
        check(is_ready(last) and condition(last, READY_GATE) == "True", "pod %s not Ready again" % name)


def _budget_case(env, ns, replicas, max_unavailable, max_surge, budget):
    app = env.app(ns, "web")
    app.create(deployment("web", replicas=replicas, max_unavailable=max_unavailable, max_surge=max_surge))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    with PodSampler(app, interval=0.01) as sampler:
        d, warnings = app.set_image("app", NEW)
        expect_in_progress(d)
        finish(env, app, before, rs0, restarted={"app"})
    check(len(sampler.samples) > 50, "too few samples (%d)" % len(sampler.samples))
    worst, worst_at = 0, None
    for t, pods in sampler.samples:
        ok = [p for p in pods if state_of(p) == "Normal" and is_ready(p) and not p["metadata"].get("deletionTimestamp")]
        unavailable = replicas - len(ok)
        if unavailable > worst:
            worst, worst_at = unavailable, pods
    detail = "" if worst_at is None else app.pod_table(worst_at)
    check(worst <= budget, "%d pods unavailable at once, budget %d:\n%s" % (worst, budget, detail))
    check(worst == budget, "at most %d pods were updated at once; the budget of %d was not used" % (worst, budget))
    return warnings


def s04_max_unavailable(env):
    """maxUnavailable held at every instant: 40% of 5 (= 2), then 0 (one at a time)."""
    env.cluster.start_webhook("iw-a")
    env.cluster.sim(restartDelayMs=400, notReadyMs=200)  # updates overlap long enough to be seen
    _budget_case(env, "s04-pct", 5, "40%", 1, 2)
    warnings = _budget_case(env, "s04-zero", 4, 0, 1, 1)
    expect_warning(warnings, "maxUnavailable is 0")


def s05_hook_timeout(env):
    """A pre-update hook that is never released: HookTimeout, the pod waits, nothing is deleted."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s05", "web")
    app.create(deployment("web", replicas=3,
                          lifecycle={"preUpdate": {"finalizersHandler": [FINALIZER], "timeoutSeconds": 2}}))
    app.wait_created()
    register_pods(env, app, "finalizer")
    before, rs0 = snapshot(app.pods()), rs_names(app)
    app.set_image("app", NEW)
    stuck = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 20,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    wait_for(lambda: app.events_with("HookTimeout", "Pod", stuck) and app.events_with("HookTimeout", "Deployment"),
             15, "HookTimeout Events on the pod and the Deployment", app)
    # Not early, on the loop's own clock (the test sees the state change late when the machine is
    # busy, e.g. under sanitizers): from the pod's state-timestamp to the Event's. Both are whole
    # seconds, and floor(b) - floor(a) >= 2 whenever b - a >= 2.
    entered = rfc3339_seconds(annotations_of(env.cluster.observer.get(pods_path("s05", stuck)))[STATE_TIMESTAMP])
    reported = rfc3339_seconds(app.events_with("HookTimeout", "Pod", stuck)[0]["firstTimestamp"])
    check(reported - entered >= 2, "HookTimeout reported %d s after the pod entered PreparingUpdate; "
          "timeoutSeconds is 2" % (reported - entered))
    time.sleep(SETTLE + 0.5)
    pods = app.pods()
    check(snapshot(pods).keys() == before.keys(), "pods changed while the hook timed out")
    for p in pods:
        name = p["metadata"]["name"]
        check(p["metadata"]["uid"] == before[name][0], "pod %s was recreated" % name)
        check(images(p)["app"] == OLD, "pod %s was updated although its hook was never released" % name)
        want = "PreparingUpdate" if name == stuck else "Normal"
        check(state_of(p) == want, "pod %s is %s, expected %s" % (name, state_of(p), want))
        check(FINALIZER in (p["metadata"].get("finalizers") or []), "pod %s lost its finalizer" % name)
    d = app.deployment()
    check(IN_PROGRESS in annotations_of(d) and d["spec"].get("paused"), "the update was abandoned")
    check(len(app.events_with("HookTimeout", "Pod", stuck)) == 1, "HookTimeout reported more than once")
    check(rs_names(app) == rs0, "a ReplicaSet was created")
    msg = app.events_with("HookTimeout", "Deployment")[0]["message"]
    check(stuck in msg, "the Deployment's HookTimeout Event does not name the pod: %s" % msg)

    # The handler comes back: it drains each pod as it reaches PreparingUpdate; the update finishes.
    deadline = time.time() + 40
    while not app.in_place_done():
        check(time.time() < deadline, "the update did not finish after the hooks were released")
        for p in app.pods():
            if state_of(p) == "PreparingUpdate" and FINALIZER in (p["metadata"].get("finalizers") or []):
                release(env, app, p["metadata"]["name"], "finalizer")
        time.sleep(0.05)
    finish(env, app, before, rs0, restarted={"app"})


def s06_killed_mid_update(env):
    """The loop SIGKILLed twice mid-update and restarted: every step done exactly once."""
    env.cluster.sim(restartDelayMs=1500)  # pods wait in Updating long enough to be caught there
    w = env.cluster.start_webhook("iw-a")
    app = env.app("s06", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    t_start = time.time()
    app.set_image("app", NEW)
    killed = []
    for identity in ("iw-b", "iw-c"):
        pod = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "Updating"
                                     and p["metadata"]["name"] not in killed), None), 30,
                       "a pod in Updating", app)["metadata"]["name"]
        w.kill()
        killed.append(pod)
        check(state_of(app.c.observer.get(pods_path(app.ns, pod))) == "Updating",
              "pod %s left Updating before the kill" % pod)
        w = env.cluster.start_webhook(identity)
    finish(env, app, before, rs0, restarted={"app"})
    writes = pod_writes(env, app.ns, since=t_start)
    for name in before:
        image_writes = [r for r in writes if r["path"].endswith("/pods/" + name) and NEW in r.get("body", "")]
        check(len(image_writes) == 1, "pod %s got %d image writes, expected exactly 1" % (name, len(image_writes)))
    expect_events(app, "InPlaceUpdateCompleted", "Deployment")
    done = app.events_with("InPlaceUpdateCompleted", "Deployment")[0]
    check(done.get("reportingInstance") == "iw-c", "completed by %s, expected iw-c" % done.get("reportingInstance"))


def _lease(env):
    lease = env.cluster.observer.get_or_none(LEASE_PATH)
    return (lease or {}).get("spec") or {}


def _writers(env, ns, since, until=None):
    """The identities (from the User-Agent) that wrote pods of `ns` in the window."""
    return {r.get("userAgent", "").rpartition("(")[2].rstrip(")") for r in pod_writes(env, ns, since, until)}


def s07_leader_election(env):
    """Two replicas with leader election: one writes; SIGTERM hands over at once, SIGKILL after the
    Lease expires."""
    env.cluster.sim(restartDelayMs=800)
    a = env.cluster.start_webhook("iw-a", leader_elect=True)
    wait_for(lambda: _lease(env).get("holderIdentity") == "iw-a", 10, "iw-a to hold the Lease")
    b = env.cluster.start_webhook("iw-b", leader_elect=True)
    app = env.app("s07", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    t0 = time.time()
    app.set_image("app", NEW)
    wait_for(lambda: sum(1 for p in app.pods() if images(p)["app"] == NEW and state_of(p) == "Normal") >= 1
             and any(state_of(p) == "Updating" for p in app.pods()), 30, "one pod done and one updating", app)
    check(_lease(env).get("holderIdentity") == "iw-a", "the Lease moved while iw-a was running")
    t_stop = time.time()
    check(a.stop() == 0, "iw-a did not exit cleanly on SIGTERM")
    check(_writers(env, app.ns, t0, t_stop) == {"iw-a"}, "pods written by %s while iw-a led"
          % _writers(env, app.ns, t0, t_stop))
    b_before = [r for r in env.cluster.requests_log()
                if r.get("userAgent", "").endswith("(iw-b)") and r["time"] < t_stop]
    # Besides the Lease, a standby POSTs only its SelfSubjectReview at start (DESIGN.md §9.6: who am I) and its
    # SelfSubjectAccessReviews (§9.8: may I act); nothing is stored.
    check(all(r["path"].startswith("/apis/coordination.k8s.io/")
              or r["path"] in ("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                               "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
              for r in b_before if r["method"] != "GET"),
          "the standby iw-b wrote something other than the Lease")
    wait_for(lambda: _lease(env).get("holderIdentity") == "iw-b", 8, "iw-b to take the released Lease")
    check(time.time() - t_stop < 6, "takeover after SIGTERM took %.1f s" % (time.time() - t_stop))
    finish(env, app, before, rs0, restarted={"app"})
    check(_writers(env, app.ns, t_stop) == {"iw-b"}, "pods written by %s after iw-a stopped"
          % _writers(env, app.ns, t_stop))
    by = {e.get("reportingInstance") for e in app.events_with("InPlaceUpdateCompleted", "Deployment")}
    check(by == {"iw-b"}, "InPlaceUpdateCompleted reported by %s" % by)
    starts = {e.get("reportingInstance") for e in app.events_with("InPlaceUpdateStarted", "Deployment")}
    check(starts == {"iw-a"}, "InPlaceUpdateStarted reported by %s" % starts)

    # SIGKILL: no release; the standby takes over only once the Lease has expired (15 s).
    env.cluster.start_webhook("iw-c", leader_elect=True)
    before, rs1 = snapshot(app.pods()), rs_names(app)
    app.set_image("app", NEWER)
    pod = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "Updating"), None), 20,
                   "a pod in Updating", app)["metadata"]["name"]
    t_kill = time.time()
    b.kill()
    wait_for(lambda: _lease(env).get("holderIdentity") == "iw-c", 30, "iw-c to take the expired Lease")
    t_take = time.time()
    check(t_take - t_kill >= 10, "iw-c took the Lease %.1f s after iw-b died, before it expired" % (t_take - t_kill))
    check(not pod_writes(env, app.ns, t_kill + 0.2, t_take - 0.5), "pods were written while nobody led")
    finish(env, app, before, rs1, restarted={"app"}, timeout=30)
    check(_writers(env, app.ns, t_take) == {"iw-c"}, "pods written by %s after the takeover"
          % _writers(env, app.ns, t_take))


def s08_abort(env):
    """`abort`: the pods stay as they are, the Deployment is handed back, the native rollout runs."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s08", "web")
    app.create(deployment("web", replicas=3, lifecycle={"preUpdate": {"labelsHandler": {HANDLER_LABEL: "true"}}}))
    app.wait_created()
    register_pods(env, app, "label")
    original = snapshot(app.pods())
    app.set_image("app", NEW)
    updated, held = hold_one_pod(env, app, "label")

    env.cluster.sim(deploymentController=False)  # freeze the native rollout to see the pods as left
    check(env.cluster.idle(), "controllers did not settle")
    frozen = {p["metadata"]["name"]: (p["metadata"]["uid"], state_of(p), images(p)["app"]) for p in app.pods()}
    t_abort = time.time()
    app.patch({"metadata": {"annotations": {ABORT: "true"}}})  # kubectl annotate deploy/web ...abort=true
    wait_for(lambda: IN_PROGRESS not in annotations_of(app.deployment()), 10, "the loop to abort", app)
    d = app.deployment()
    check(not d["spec"].get("paused"), "the Deployment is still paused after abort")
    check(ABORT not in annotations_of(d), "the abort annotation was left")
    expect_events(app, "InPlaceUpdateAborted", "Deployment")
    time.sleep(SETTLE)
    check(frozen[updated][1:] == ("Normal", NEW) and frozen[held][1:] == ("PreparingUpdate", OLD),
          "unexpected pod states at abort: %s" % frozen)
    # The held pod is put back in service (Normal; DESIGN.md §8.11), nothing else changes: no image written.
    want = {n: (uid, "Normal", image) for n, (uid, _, image) in frozen.items()}
    now = {p["metadata"]["name"]: (p["metadata"]["uid"], state_of(p), images(p)["app"]) for p in app.pods()}
    check(now == want, "pods after abort: %s, expected %s" % (now, want))
    writes = pod_writes(env, app.ns, t_abort)
    check({r["path"].rpartition("/pods/")[2].split("/")[0] for r in writes} <= {held},
          "the loop wrote pods other than the held one after the abort: %s" % [r["path"] for r in writes])
    check(not [r for r in writes if NEW in r.get("body", "") or OLD in r.get("body", "")],
          "the loop wrote an image after the abort")

    env.cluster.sim(deploymentController=True)  # the native rollout takes over
    wait_for(lambda: app.rollout_complete() and len(rs_names(app)) == 2, 30, "the native rollout", app)
    pods = app.pods()
    check(all(p["metadata"]["uid"] not in {u for u, _ in original.values()} for p in pods),
          "the native rollout kept old pods")
    check(all(images(p)["app"] == NEW and state_of(p) == "Normal" for p in pods), "new pods are not right")
    check(IN_PROGRESS not in annotations_of(app.deployment()), "in-progress came back")
    check(len(app.events_with("InPlaceUpdateStarted", "Deployment")) == 1, "the in-place update restarted")


def s09_non_eligible_mid_update(env):
    """An env change while an in-place update runs: handed to the native rollout, nothing stuck."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s09", "web")
    app.create(deployment("web", replicas=3, lifecycle={"preUpdate": {"labelsHandler": {HANDLER_LABEL: "true"}}}))
    app.wait_created()
    register_pods(env, app, "label")
    rs0 = rs_names(app)
    app.set_image("app", NEW)
    hold_one_pod(env, app, "label")
    # kubectl set env deploy/web MODE=blue
    d = app.c.user.strategic_patch(deployments_path(app.ns, app.name), {"spec": {"template": {"spec": {
        "containers": [{"name": "app", "env": [{"name": "MODE", "value": "blue"}]}]}}}})
    check(not d["spec"].get("paused"), "the Deployment stays paused after a non-eligible change")
    check(IN_PROGRESS not in annotations_of(d), "in-progress kept after a non-eligible change")
    wait_for(lambda: app.rollout_complete() and len(rs_names(app)) == 2, 30, "the native rollout", app)
    check(env.cluster.idle(), "controllers did not settle")
    time.sleep(SETTLE)
    d = app.deployment()
    check(IN_PROGRESS not in annotations_of(d) and not d["spec"].get("paused"), "the Deployment is stuck: %s"
          % annotations_of(d))
    check(len(set(rs_names(app)) - set(rs0)) == 1, "expected one new ReplicaSet")
    for p in app.pods():
        env_vars = {e["name"]: e.get("value") for e in p["spec"]["containers"][0].get("env") or []}
        check(env_vars.get("MODE") == "blue" and images(p)["app"] == NEW and state_of(p) == "Normal",
              "pod %s: env %s image %s state %s" % (p["metadata"]["name"], env_vars, images(p)["app"], state_of(p)))
    check(app.rollout_complete(), "the native rollout did not stay complete")


def s10_user_pause_kept(env):
    """A Deployment the user paused holds the in-place update: no pod is touched until `kubectl rollout
    resume`, which runs it in place; the Deployment unpauses when it is done (DESIGN.md §8.5)."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s10", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    app.patch({"spec": {"paused": True}})  # kubectl rollout pause
    wait_for(lambda: app.deployment()["status"].get("observedGeneration") == app.deployment()["metadata"]["generation"],
             10, "the pause to be observed", app)
    d, warnings = app.set_image("app", NEW)
    expect_warning(warnings, "in-place update")
    expect_in_progress(d, paused_by_us=False)
    wait_for(lambda: app.events_with("InPlaceUpdatePaused", "Deployment", "web"), 10,
             "the loop to report the update held by the user's pause", app)
    check(env.cluster.idle(), "the simulated controllers did not settle")
    time.sleep(SETTLE)
    pods = app.pods()
    check(snapshot(pods) == before and all(images(p)["app"] == OLD and state_of(p) == "Normal" for p in pods),
          "a pod was touched while the user's pause held the update:\n" + app.pod_table(pods))
    check(not app.events_with("InPlaceUpdateStarted", "Deployment"), "InPlaceUpdateStarted while held")
    check(rs_names(app) == rs0, "a ReplicaSet was created while the update was held")
    # kubectl rollout resume: a strategic merge patch {"spec":{"paused":null}}
    d = app.c.user.strategic_patch(deployments_path(app.ns, app.name), {"spec": {"paused": None}})
    expect_warning(app.c.user.last_warnings, "in-place update resumed")
    expect_in_progress(d, paused_by_us=True)
    finish(env, app, before, rs0, restarted={"app"}, paused=False)
    check(len(app.events_with("InPlaceUpdatePaused", "Deployment")) == 1, "InPlaceUpdatePaused reported again")
    check(app.rollout_complete(), "the Deployment controller does not report the rollout complete")


def s11_api_faults(env):
    """Injected 500s, 429s and first-write conflicts during updates: they still complete correctly."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s11", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    app.set_image("app", NEW)
    env.cluster.faults({"errorRate": 0.2, "errorCode": 500, "conflictOnFirstWrite": True, "seed": 7})
    t0 = time.time()
    finish(env, app, before, rs0, restarted={"app"}, timeout=60)
    check(env.cluster.faults_injected() > 0, "no fault was injected")
    answered = [r["code"] for r in env.cluster.requests_log() if r.get("user") == CONTROLLER_USER and r["time"] >= t0]
    check(409 in answered and 500 in answered, "the loop saw no injected conflict or 500: %s" % sorted(set(answered)))

    env.cluster.faults(None)  # the user's own write goes through cleanly
    before, rs1 = snapshot(app.pods()), rs_names(app)
    app.edit(lambda d: d["spec"]["template"]["metadata"]["labels"].update({"version": "v2"}))
    env.cluster.faults({"errorRate": 0.1, "errorCode": 429, "retryAfterSeconds": 1, "conflictOnFirstWrite": True,
                        "seed": 11})
    finish(env, app, before, rs1, restarted=set(), timeout=60)
    check(env.cluster.faults_injected() > 0, "no 429 was injected")
    env.cluster.faults(None)


def s12_rollout_undo_in_place(env):
    """`kubectl rollout undo` after an in-place update is in place too, and leaves the ReplicaSets as a
    native rollback does: no ReplicaSet added, the pods' ReplicaSet holds the template with the newest
    revision, the history ReplicaSet the template the pods left with the one before (DESIGN.md §8.1)."""
    env.cluster.start_webhook("iw-a")
    app = env.app("s12", "web")
    app.create(deployment("web", replicas=3))
    before, rs0 = snapshot(app.wait_created()), rs_names(app)
    app.set_image("app", NEW)
    finish(env, app, before, rs0, restarted={"app"})
    [history] = [r for r in app.replicasets() if r["metadata"]["name"] not in rs0]
    check(images(history["spec"]["template"])["app"] == OLD and revision(history) == 1,
          "history ReplicaSet %s: image %s, revision %d" % (history["metadata"]["name"],
                                                            images(history["spec"]["template"]), revision(history)))
    ours = [k for k in annotations_of(history) if k.startswith("inplace-webhook.io/")]
    check(not ours, "the history ReplicaSet carries in-place bookkeeping (kubectl rollout undo copies it): %s" % ours)

    before, rs1 = snapshot(app.pods()), rs_names(app)
    d, warnings, source = app.rollout_undo()
    check(source["metadata"]["name"] == history["metadata"]["name"], "kubectl rollout undo chose %s, not %s"
          % (source["metadata"]["name"], history["metadata"]["name"]))
    expect_warning(warnings, "in-place update: 3 pods will be updated")
    expect_in_progress(d)
    d, _ = finish(env, app, before, rs1, restarted={"app"})
    check(images(d["spec"]["template"])["app"] == OLD, "the Deployment's template is not back at %s" % OLD)
    check(rs_names(app) == rs1, "ReplicaSets %s after the in-place rollback, before %s" % (rs_names(app), rs1))
    rss = {r["metadata"]["name"]: r for r in app.replicasets()}
    h = rss[history["metadata"]["name"]]
    active = rss[rs0[0]]
    check(images(h["spec"]["template"])["app"] == NEW and h["spec"]["replicas"] == 0,
          "history ReplicaSet %s now holds %s with %s replicas, expected the left %s at 0"
          % (h["metadata"]["name"], images(h["spec"]["template"]), h["spec"]["replicas"], NEW))
    check((revision(active), revision(h)) == (3, 2), "revisions: active %d, history %d; a native rollback "
          "leaves 3 and 2" % (revision(active), revision(h)))
    check(h["metadata"]["labels"].get("pod-template-hash") == h["spec"]["selector"]["matchLabels"].get(
          "pod-template-hash") == history["metadata"]["labels"].get("pod-template-hash"),
          "the history ReplicaSet's pod-template-hash changed")


SCENARIOS = [s01_image_then_labels, s02_pre_and_post_hooks, s03_mark_not_ready_grace, s04_max_unavailable,
             s05_hook_timeout, s06_killed_mid_update, s07_leader_election, s08_abort, s09_non_eligible_mid_update,
             s10_user_pause_kept, s11_api_faults, s12_rollout_undo_in_place]
# The scenarios that wait longest (about 50 s each): started first when several run at once.
LONGEST = [s07_leader_election, s11_api_faults]


# ---------------------------------------------------------------------------------------------
# Runner


class Env:
    def __init__(self, cluster):
        self.cluster = cluster
        self.apps = []

    def app(self, ns, name):
        a = App(self.cluster, ns, name)
        self.apps.append(a)
        return a


def run_one(fn, args, workroot):
    workdir = os.path.join(workroot, fn.__name__)
    cluster = Cluster(args.binary, args.source_dir, args.cert_dir, workdir, webhook_config=args.webhook_config)
    env = Env(cluster)
    started = time.time()
    try:
        cluster.start()
        fn(env)
        problems = cluster.api_log_problems()
        check(not problems, "the test API server logged errors:\n" + "\n".join(problems[:20]))
        calls = cluster.admission_log()
        failed = [c for c in calls if c.get("error")]
        check(not failed, "webhook calls failed:\n" + "\n".join(json.dumps(c) for c in failed[:10]))
        denied = [c for c in calls if c.get("allowed") is False and c.get("user") != "alice"]
        check(not denied, "the webhook denied a controller's request:\n"
              + "\n".join(json.dumps(c) for c in denied[:10]))
        exit_codes = {w: w.stop() for w in cluster.webhooks if w.alive()}
        for w in cluster.webhooks:  # killed ones too: their reports were written before the kill
            findings = w.sanitizer_findings()
            check(not findings, "sanitizer report from %s (pid %d):\n%s" % (w.identity, w.proc.pid, findings))
        for w in cluster.webhooks:
            check(exit_codes.get(w, 0) == 0, "%s did not exit cleanly" % w.identity)
            crashes = [line for line in w.log_text().splitlines() if "reconcile failed" in line
                       or "resync failed" in line]
            check(not crashes, "%s logged loop failures:\n%s" % (w.identity, "\n".join(crashes[:10])))
        print("PASS %-32s %5.1f s" % (fn.__name__, time.time() - started), flush=True)
        return True
    except Exception as e:  # noqa: BLE001 - report and go on with the next scenario
        print("FAIL %-32s %5.1f s: %s" % (fn.__name__, time.time() - started,
                                          e if isinstance(e, Failure) else traceback.format_exc()), flush=True)
        print("  (%s)" % (fn.__doc__ or "").strip(), flush=True)
        for a in env.apps:
            try:
                print(a.describe(cluster.webhooks if a is env.apps[-1] else ()), flush=True)
            except Exception as e2:  # noqa: BLE001
                print("  (no diagnostics: %s)" % e2)
        if not env.apps:
            for w in cluster.webhooks:
                print("--- tail of %s:\n%s" % (w.identity, w.log_tail(40)))
        for w in cluster.webhooks:
            findings = w.sanitizer_findings()
            if findings and findings not in str(e):
                print("--- sanitizer report from %s (pid %d):\n%s" % (w.identity, w.proc.pid, findings))
        problems = cluster.api_log_problems()
        if problems:
            print("--- test API server errors (%s):\n%s" % (cluster.api_log, "\n".join(problems[:20])))
        print("  logs kept in %s" % workdir, flush=True)
        return False
    finally:
        cluster.stop()


def run_concurrently(chosen, args):
    """Runs each scenario in a child process of this script, args.jobs at a time, the longest first; prints each
    child's output whole when it ends. Returns the names of the scenarios that failed."""
    def child(fn):
        cmd = [sys.executable, os.path.abspath(__file__), args.binary, args.source_dir, args.cert_dir,
               "--webhook-config", args.webhook_config, "--exact", "-k", fn.__name__, "--jobs", "1"]
        if args.keep:
            cmd.append("--keep")
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        return fn, done.returncode, done.stdout

    failed = []
    ordered = sorted(chosen, key=lambda fn: fn not in LONGEST)  # stable: the rest in the listed order
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for fut in concurrent.futures.as_completed([pool.submit(child, fn) for fn in ordered]):
            fn, rc, out = fut.result()
            lines = [line for line in out.splitlines() if not line.startswith("1/1 scenarios passed")
                     and not line.startswith("0/1 scenarios passed") and not line.startswith("failed: ")]
            print("\n".join(lines), flush=True)
            if rc != 0:
                failed.append(fn.__name__)
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary")
    p.add_argument("source_dir")
    p.add_argument("cert_dir")
    p.add_argument("-k", dest="only", action="append", default=[], help="run scenarios whose name contains this")
    p.add_argument("--webhook-config", help="default: SOURCE_DIR/tests/e2e/webhook-config.yaml")
    p.add_argument("--keep", action="store_true", help="keep the logs of passing scenarios too")
    p.add_argument("--exact", action="store_true", help="-k names whole scenarios (used by --jobs)")
    p.add_argument("--jobs", type=int, default=int(os.environ.get("IW_E2E_JOBS", "1")),
                   help="scenarios run at once, each in its own process (default IW_E2E_JOBS or 1)")
    args = p.parse_args()
    config = args.webhook_config or os.path.join(args.source_dir, "tests", "e2e", "webhook-config.yaml")
    if not os.path.exists(config):
        p.error("%s is missing (the webhook configurations the test API server calls)" % config)
    args.webhook_config = config
    chosen = [s for s in SCENARIOS if not args.only or any(k == s.__name__ if args.exact else k in s.__name__
                                                           for k in args.only)]
    if not chosen:
        p.error("no scenario matches %s" % args.only)
    workroot = tempfile.mkdtemp(prefix="iw-e2e-")
    started = time.time()
    if args.jobs > 1 and len(chosen) > 1:
        failed = run_concurrently(chosen, args)
    else:
        failed = [s.__name__ for s in chosen if not run_one(s, args, workroot)]
    print("%d/%d scenarios passed in %.0f s" % (len(chosen) - len(failed), len(chosen), time.time() - started))
    if failed:
        print("failed: " + " ".join(failed))
        return 1
    if not args.keep:
        shutil.rmtree(workroot, ignore_errors=True)
    else:
        print("logs in " + workroot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
