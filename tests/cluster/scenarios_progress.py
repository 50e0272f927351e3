"""Issue 12 items 9 and 12 on the real cluster: progress that kubectl, Argo CD and Flux read (r09), and the
loop's pod writes going through admission like a user's (r12)."""

import json
import os
import sys
import threading
import time

import test_cluster as tc
from kube import IN_PROGRESS, annotations_of, check, condition, container_statuses, images, \
    rfc3339_micro, state_of, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "argocd"))
import health_lua  # noqa: E402

OURS = "inplace-webhook.io/Progressing"


def cond(d, ctype):
    return next((c for c in (d.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


class Background:
    """A command run on its own thread (kubectl rollout status waits): .done, .rc, .out."""

    def __init__(self, fn):
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        self.result = fn()

    @property
    def done(self):
        return not self.thread.is_alive()

    def wait(self, timeout):
        self.thread.join(timeout)
        check(self.done, "the background command did not return within %d s" % timeout)
        return self.result


def rollout_status(app, timeout="180s"):
    """`kubectl rollout status` as alice: (exit code, stdout + stderr)."""
    p = app.s.tools.kubectl("rollout", "status", "deploy/" + app.name, "-n", app.ns, "--timeout=" + timeout,
                            user="alice", check_rc=False, timeout=240)
    return p.returncode, p.stdout + p.stderr


def capture(app, d, label):
    """Keeps the Deployment as the API server returned it (IW_CAPTURE_DIR, for tests/argocd/fixtures)."""
    where = os.environ.get("IW_CAPTURE_DIR")
    if where:
        os.makedirs(where, exist_ok=True)
        with open(os.path.join(where, "%s-%s.json" % (app.ns, label)), "w") as f:
            json.dump(d, f, indent=1, sort_keys=True)


def expect_health(app, d, label, status, text):
    capture(app, d, label)
    got, message = health_lua.health(d)
    check(got == status and text in message, "Argo CD health (%s): %s %r, expected %s with %r" % (
        label, got, message, status, text))


def r09_progress_rollout_status_and_health(s):
    """While an in-place update runs, `kubectl rollout status` waits (exit 0 when it ends), the Deployment carries
    inplace-webhook.io/Progressing with n/m pods, and a stall past progressDeadlineSeconds is the controller's own
    Progressing=False/ProgressDeadlineExceeded: rollout status exits 1, Argo CD (the chart's health.lua in Lua 5.1)
    says Degraded; progress clears it; Healthy at the end."""
    app = tc.App(s, "r09")
    deadline = 20
    obj = tc.deployment("web", replicas=3, lifecycle={"preUpdate": {"finalizersHandler": [tc.FINALIZER],
                                                                    "timeoutSeconds": 600}})
    obj["spec"]["progressDeadlineSeconds"] = deadline
    app.create(obj)
    for p in app.pods():
        app.set_finalizer(p["metadata"]["name"], True)
    before, rs0 = tc.snapshot(app.pods()), app.rs_names()
    expect_health(app, app.deployment(), "before", "Healthy", "")

    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    waiting = Background(lambda: rollout_status(app))
    first = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    d = wait_for(lambda: (lambda d: d if (cond(d, OURS) or {}).get("reason") == "InPlaceUpdateProgressing" else None)(
        app.deployment()), 15, "the progress condition", app)
    check(condition(d, "Progressing", "reason") == "DeploymentPaused", "Progressing: %s" % cond(d, "Progressing"))
    expect_health(app, d, "during", "Progressing", "in-place update: 0/3 pods updated to template")
    app.set_finalizer(first, False)
    wait_for(lambda: any(p["metadata"]["name"] == first and state_of(p) == "Normal" and images(p)["app"] == tc.V2
                         for p in app.pods()), 40, "pod %s updated" % first, app)
    held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                    "a second pod in PreparingUpdate", app)["metadata"]["name"]
    d = wait_for(lambda: (lambda d: d if (cond(d, OURS) or {}).get("message", "").startswith("1/3 pods") else None)(
        app.deployment()), 15, "1/3 pods in the progress condition", app)
    print("  during: %s: %s" % (OURS, cond(d, OURS)["message"]))
    check(not waiting.done, "kubectl rollout status returned during the update: %s" % (waiting.result,))

    # The stall: the held pod's hook is never released.
    d = wait_for(lambda: (lambda d: d if condition(d, "Progressing", "reason") == "ProgressDeadlineExceeded" else None)(
        app.deployment()), deadline + 20, "Progressing=False/ProgressDeadlineExceeded", app)
    ours, prog = cond(d, OURS), cond(d, "Progressing")
    stalled_for = rfc3339_micro(prog["lastTransitionTime"]) - rfc3339_micro(ours["lastUpdateTime"])
    print("  stall: reported %.1f s after the last progress (progressDeadlineSeconds %d): %s" % (
        stalled_for, deadline, prog["message"]))
    check(prog["status"] == "False" and deadline <= stalled_for <= deadline + 10,
          "stall reported %.1f s after the last progress; deadline %d s" % (stalled_for, deadline))
    check(ours["status"] == "False" and ours["reason"] == "ProgressDeadlineExceeded", "ours: %s" % ours)
    rc, out = waiting.wait(30)
    print("  kubectl rollout status (started with the update) exited %d: %s" % (rc, out.strip().splitlines()[-1]))
    check(rc == 1 and "exceeded its progress deadline" in out and "0 out of 3 new replicas have been updated" in out,
          "kubectl rollout status on a stall: exit %d, %r" % (rc, out))
    rc, out = rollout_status(app, "10s")
    check(rc == 1 and "exceeded its progress deadline" in out, "a new rollout status: exit %d %r" % (rc, out))
    expect_health(app, d, "stalled", "Degraded", "in-place update has timed out progressing")
    time.sleep(tc.SETTLE)  # the Deployment controller keeps it while paused
    check(condition(app.deployment(), "Progressing", "reason") == "ProgressDeadlineExceeded",
          "the Deployment controller overwrote ProgressDeadlineExceeded: %s" % cond(app.deployment(), "Progressing"))

    # Progress again: Progressing goes back to the paused state; rollout status waits, then succeeds.
    app.set_finalizer(held, False)
    d = wait_for(lambda: (lambda d: d if condition(d, "Progressing", "reason") == "DeploymentPaused" else None)(
        app.deployment()), 30, "Progressing back to DeploymentPaused after progress", app)
    check(cond(d, OURS)["reason"] == "InPlaceUpdateProgressing", "ours after progress: %s" % cond(d, OURS))
    if IN_PROGRESS in annotations_of(d):
        expect_health(app, d, "resumed", "Progressing", "in-place update:")
    waiting = Background(lambda: rollout_status(app))
    tc.release_until_done(app, lambda p: state_of(p) == "PreparingUpdate" and tc.FINALIZER in (
        p["metadata"].get("finalizers") or []) and app.set_finalizer(p["metadata"]["name"], False), 90,
        "after the hooks were released")
    d, _ = tc.finish(app, before, rs0, restarted={"app"})
    rc, out = waiting.wait(60)
    print("  kubectl rollout status (started mid-update) exited %d: %s" % (rc, out.strip().splitlines()[-1]))
    check(rc == 0 and 'deployment "web" successfully rolled out' in out, "rollout status: exit %d %r" % (rc, out))
    ours = cond(d, OURS)
    check(ours and ours["status"] == "True" and ours["reason"] == "InPlaceUpdateCompleted"
          and ours["message"].startswith("3/3 pods"), "ours at the end: %s" % ours)
    expect_health(app, d, "after", "Healthy", "")


POLICY = "r12-deny-v2"
POLICY_MESSAGE = "r12 image policy: localhost/httpd-demo:v2 is not allowed"


def r12_admission_policy_refuses_pod_write(s):
    """A ValidatingAdmissionPolicy that refuses the new image on pod UPDATE: within seconds the update reports
    PodUpdateRefused with the policy's message (Events on the pod and the Deployment, the progress condition), the
    loop retries with backoff and touches no container; once the policy is removed it resumes by itself."""
    app = tc.App(s, "r12")
    app.create(tc.deployment("web", replicas=2))
    before, rs0 = tc.snapshot(app.pods()), app.rs_names()
    vap = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": POLICY},
           "spec": {"failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                            "operations": ["UPDATE"], "resources": ["pods"]}]},
                    "validations": [{"expression": "!object.spec.containers.exists(c, c.image == '%s')" % tc.V2,
                                     "message": POLICY_MESSAGE}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": POLICY},
               "spec": {"policyName": POLICY, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": app.ns}}}}}
    s.tools.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [vap, binding]}))
    try:
        probe = app.pods()[0]["metadata"]["name"]
        wait_for(lambda: POLICY_MESSAGE in s.tools.kubectl("set", "image", "pod/" + probe, "app=" + tc.V2, "-n", app.ns,
                                                           "--dry-run=server", check_rc=False).stderr,
                 30, "the policy to refuse a dry-run pod update", app)
        t0 = time.time()
        app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        refused = wait_for(lambda: app.events_with("PodUpdateRefused", "Pod") and app.events_with(
            "PodUpdateRefused", "Deployment"), 15, "PodUpdateRefused Events on a pod and the Deployment", app)
        seen = time.time() - t0
        d = wait_for(lambda: (lambda d: d if (cond(d, OURS) or {}).get("reason") == "PodUpdateRefused" else None)(
            app.deployment()), 10, "the progress condition PodUpdateRefused", app)
        shown = time.time() - t0
        print("  refusal: Events %.1f s, condition %.1f s after kubectl set image" % (seen, shown))
        print("  %s: %s" % (OURS, cond(d, OURS)["message"]))
        check(shown <= 10, "the refusal took %.1f s to show" % shown)
        for e in app.events_with("PodUpdateRefused"):
            check(POLICY_MESSAGE in e["message"] and POLICY in e["message"] and e["type"] == "Warning",
                  "the Event does not carry the policy's message: %s" % e["message"])
        check(POLICY_MESSAGE in cond(d, OURS)["message"], "the condition: %s" % cond(d, OURS))
        time.sleep(8)
        writes = s.audit.writes(t0 - 1, user=tc.CONTROLLER_USER, ns=app.ns, resource="pods")
        refusals = [e for e in writes if (e.get("responseStatus") or {}).get("code", 0) >= 400]
        window = time.time() - t0
        print("  %d refused pod writes in %.0f s (retry with backoff); the loop's pod writes by code: %s" % (
            len(refusals), window, sorted({(e.get("objectRef") or {}).get("subresource", "") + ":" + str(
                (e.get("responseStatus") or {}).get("code")) for e in writes})))
        check(1 <= len(refusals) <= 12, "%d refused pod writes in %.0f s" % (len(refusals), window))
        check(app.count_events("PodUpdateRefused", "Deployment") <= 2 * len(app.pods()),
              "the refusal is reported again at every retry: %d Events" % app.count_events("PodUpdateRefused",
                                                                                             "Deployment"))
        for p in app.pods():
            name = p["metadata"]["name"]
            check(images(p)["app"] == tc.V1 and all(
                c.get("restartCount") == before[name]["containers"][n][1] for n, c in container_statuses(p).items()),
                "pod %s changed while the policy refused it" % name)
    finally:
        s.tools.kubectl("delete", "validatingadmissionpolicybinding", POLICY, "--ignore-not-found", check_rc=False)
        s.tools.kubectl("delete", "validatingadmissionpolicy", POLICY, "--ignore-not-found", check_rc=False)
    t1 = time.time()
    d, _ = tc.finish(app, before, rs0, restarted={"app"}, timeout=120)
    print("  resumed and completed %.1f s after the policy was removed" % (time.time() - t1))
    ours = cond(d, OURS)
    check(ours and ours["reason"] == "InPlaceUpdateCompleted", "ours at the end: %s" % ours)
    check(refused, "no refusal seen")


SCENARIOS = [r09_progress_rollout_status_and_health, r12_admission_policy_refuses_pod_write]
