"""Issue 12, item 6 on the real cluster: no pod waits on a condition nothing will set. The readiness gate
inplace-webhook.io/ready is added to opted-in pods at creation by the pod webhook, and only while a loop is known
to run (DESIGN.md §8.6): drain needs no template change, a stopped loop blocks no new pod, and the README's
uninstall leaves no pod waiting for the gate."""

import json
import os
import time

import test_cluster as tc
from kube import (READY_GATE, PodSampler, check, condition, images, is_ready,  # noqa: F401
                  ns_path, snapshot, state_of, wait_for)

V1, V2 = tc.V1, tc.V2
HANDLER_LABEL = tc.HANDLER_LABEL

def has_gate(pod):
    return any(g.get("conditionType") == READY_GATE for g in pod["spec"].get("readinessGates") or [])


def template_gate(app):
    return any(g.get("conditionType") == READY_GATE
               for g in app.deployment()["spec"]["template"]["spec"].get("readinessGates") or [])


def loop_alive_metric(s, pod_name):
    """inplace_webhook_loop_alive as the webhook pod reports it on /metrics (through the API server's proxy)."""
    text = s.tools.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics"
                           % (tc.RELEASE_NS, pod_name)).stdout
    for line in text.splitlines():
        if line.startswith("inplace_webhook_loop_alive "):
            return float(line.split()[1])
    return None


def r06_gate_injected_drain_adopted_without_rollout(s):
    """An opted-in Deployment whose template has no readiness gate: its pods get the gate from the pod webhook and
    the loop sets it True; drain settings added later (an annotation of the Deployment, no rollout) drain every pod
    through the gate during an in-place update: the gate False and the pod out of Ready for the grace period before
    the pod write."""
    grace = 2
    app = tc.App(s, "r06")
    pods = app.create(tc.deployment("web", replicas=2))
    check(not template_gate(app), "the template declares the gate")
    for p in pods:
        check(has_gate(p), "pod %s has no readiness gate: %s" % (p["metadata"]["name"], p["spec"].get("readinessGates")))
        check(condition(p, READY_GATE) == "True" and is_ready(p), "pod %s: gate %s, Ready %s"
              % (p["metadata"]["name"], condition(p, READY_GATE), is_ready(p)))
    before, rs0 = snapshot(pods), app.rs_names()
    # Adopting drain: a Deployment annotation; the validator accepts it without a template gate, nothing rolls.
    _, warnings = app.kubectl("annotate", "deploy/web",
                              tc.LIFECYCLE + "=" + json.dumps({"preUpdate": {"markPodNotReady": True}}),
                              tc.POLICY + "=" + json.dumps({"gracePeriodSeconds": grace}))
    time.sleep(tc.SETTLE)
    check(snapshot(app.pods()) == before and app.rs_names() == rs0, "adopting drain rolled the pods")
    with PodSampler(app.all_pods) as sampler:
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V2)
        tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
        tc.finish(app, before, rs0, restarted={"app"})
    for name, (timeline, gate_false, written) in tc.drain_timelines(sampler, before, V2, grace).items():
        check(any(not is_ready(p) for t, p in timeline if gate_false <= t < written),
              "pod %s was never out of Ready while drained" % name)
        last = timeline[-1][1]
        check(is_ready(last) and condition(last, READY_GATE) == "True", "pod %s not Ready again" % name)


def r06_loop_stopped_new_pods_ready(s):
    """With the loop stopped (helm upgrade with --disable-loop: the webhook still serves, no loop runs), new pods
    of an opted-in Deployment with drain settings get no readiness gate and become Ready; every webhook replica
    reports inplace_webhook_loop_alive 0. With the loop back, new pods get the gate again and the loop sets it."""
    app = tc.App(s, "r06")
    app.create(tc.deployment("web", replicas=2, lifecycle={"preUpdate": {"markPodNotReady": True}},
                             policy={"gracePeriodSeconds": 1}))
    check(all(has_gate(p) for p in app.pods()), "pods created with the loop up have no gate")
    try:
        s.install(extra=["--set-json", 'server.extraArgs=["--disable-loop"]'], upgrade=True, loop=False)
        # The webhook pods learn it from the controller's /loopz: polled every second, kept 3 s (DESIGN §9.4).
        for p in s.webhook_pods():
            if tc.is_ready(p):
                wait_for(lambda: loop_alive_metric(s, p["metadata"]["name"]) == 0, 5,
                         "webhook pod %s to report no loop with --disable-loop" % p["metadata"]["name"])
        old = {p["metadata"]["name"] for p in app.pods()}
        app.kubectl("scale", "deploy/web", "--replicas=4")
        wait_for(app.rollout_complete, 60, "the scale-up to 4 with the loop stopped", app)
        new = [p for p in app.pods() if p["metadata"]["name"] not in old]
        check(len(new) == 2, "new pods: %s" % [p["metadata"]["name"] for p in new])
        for p in new:
            check(not has_gate(p) and is_ready(p), "pod %s created with the loop down: gates %s, Ready %s"
                  % (p["metadata"]["name"], p["spec"].get("readinessGates"), is_ready(p)))
        check(all(is_ready(p) for p in app.pods()), "a pod is not Ready:\n%s" % app.pod_table())
    finally:
        s.install(upgrade=True)
    # The loop is back (a Ready webhook pod holds the Lease): the next new pod gets the gate, set True.
    leader = s.lease_holder()
    wait_for(lambda: loop_alive_metric(s, leader) == 1, 20, "the leader to report its loop alive")
    wait_for(lambda: all(loop_alive_metric(s, p["metadata"]["name"]) == 1 for p in s.webhook_pods() if is_ready(p)),
             5, "every webhook pod to see the loop alive on the controller's /loopz")
    old = {p["metadata"]["name"] for p in app.pods()}
    app.kubectl("scale", "deploy/web", "--replicas=5")
    wait_for(app.rollout_complete, 60, "the scale-up to 5 with the loop back", app)
    new = [p for p in app.pods() if p["metadata"]["name"] not in old]
    check(len(new) == 1 and has_gate(new[0]) and condition(new[0], READY_GATE) == "True",
          "the pod created with the loop back: %s" % [(p["metadata"]["name"], p["spec"].get("readinessGates"),
                                                       condition(p, READY_GATE)) for p in new])


def r06_uninstall_leaves_no_pod_blocked(s):
    """The README's uninstall while a pod is being drained (gate False, held by a pre-update hook) and while a
    legacy template declares the gate itself: afterwards every pod is Ready, new pods of the formerly opted-in
    Deployments become Ready with nothing of ours running, and the README's resume ends the held update natively.
    The release is installed again at the end."""
    app = tc.App(s, "r06")
    app.create(tc.deployment("web", replicas=2, lifecycle={"preUpdate": {"labelsHandler": {HANDLER_LABEL: "true"},
                                                                          "markPodNotReady": True}}))
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")
    legacy = tc.App(s, "r06", name="legacy")
    legacy.kubectl("apply", "-f", "-", stdin=json.dumps(tc.deployment("legacy", replicas=1, gate=True)))
    wait_for(legacy.rollout_complete, 60, "the legacy Deployment", legacy)
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"
                                  and condition(p, READY_GATE) == "False"), None), 30,
                    "a pod drained (gate False) and held by its hook", app)["metadata"]["name"]
    wait_for(lambda: not is_ready(s.api.get(ns_path(app.ns, "pods", held))), 10, "the held pod out of Ready", app)
    readme = open(os.path.join(s.source, "README.md")).read()
    check(tc.GATE_PODS in readme and tc.GATE_TRUE in readme, "the README's uninstall does not say this command")

    tc.uninstall_as_readme_says(s)  # webhook configurations, helm uninstall, namespace, then the gates released
    try:
        check(not s.webhook_pods() and not s.controller_pods(), "webhook or controller pods left")
        wait_for(lambda: all(is_ready(p) for p in app.pods() + legacy.pods()), 30,
                 "every pod Ready after the uninstall", app)
        # README: a template that declares the gate itself would block every new pod: remove it (a native rollout).
        legacy.kubectl("scale", "deploy/legacy", "--replicas=2")
        blocked = wait_for(lambda: next((p for p in legacy.pods() if has_gate(p) and p["status"].get("phase") == "Running"
                                         and not is_ready(p)), None), 60,
                           "the legacy template's new pod waiting on the gate", legacy)
        check(condition(blocked, READY_GATE) is None, "the gate of %s has a status" % blocked["metadata"]["name"])
        legacy.kubectl("patch", "deploy/legacy", "--type=json",
                       "-p", '[{"op":"remove","path":"/spec/template/spec/readinessGates"}]')
        wait_for(lambda: legacy.rollout_complete() and not any(has_gate(p) for p in legacy.pods()), 90,
                 "the legacy Deployment rolled to a template without the gate", legacy)
        # README: resume a Deployment left mid-update: the native rollout replaces its pods; all become Ready.
        app.kubectl("annotate", "deploy/web", tc.IN_PROGRESS + "-")
        app.kubectl("rollout", "resume", "deploy/web")
        wait_for(lambda: app.rollout_complete() and all(images(p)["app"] == V2 and not has_gate(p)
                                                        for p in app.pods()), 90,
                 "the native rollout of the resumed Deployment", app)
        old = {p["metadata"]["name"] for p in app.pods()}
        app.kubectl("scale", "deploy/web", "--replicas=3")
        wait_for(app.rollout_complete, 60, "a new pod Ready with nothing of ours running", app)
        check(all(is_ready(p) and not has_gate(p) for p in app.pods() if p["metadata"]["name"] not in old),
              "new pods after the uninstall:\n%s" % app.pod_table())
    finally:
        s.install()


SCENARIOS = [r06_gate_injected_drain_adopted_without_rollout, r06_loop_stopped_new_pods_ready,
             r06_uninstall_leaves_no_pod_blocked]
