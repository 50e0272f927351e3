"""Issue 12 item 11 on the real cluster: every pod the ReplicaSet owns ends at the Deployment's template and the
Deployment unpaused, or the update says it is stuck; never a half-updated Deployment reported complete
(DESIGN.md §8.11)."""

import base64
import json
import os
import re
import signal
import time

import test_cluster as tc
from kube import ABORT, ENABLED, IN_PROGRESS, annotations_of, check, images, is_ready, labels_of, \
    snapshot, state_of, wait_for

GATE_POLICY = {"gracePeriodSeconds": 600}  # a drain that holds the first pod with its gate False


def all_at(app, image):
    return all(images(p)["app"] == image for p in app.pods())


def r11_unlabelled_pod_reaches_the_target(s):
    """A pod whose opt-in label was removed is not the controller's to write (the chart's policy decides "ours" by
    that label, DESIGN.md §9.5): the update moves the others in place and then says it is stuck, naming the pod, and
    `kubectl rollout status` fails; labelled again, the pod is updated in place and the update finishes. Removing
    the label from a pod in its drain (gate False) is refused: it would leave the pod out of service."""
    app = tc.App(s, "r11")
    before = snapshot(app.create(tc.deployment("web", replicas=3, gate=True, policy={"gracePeriodSeconds": 6})))
    rs0 = app.rs_names()
    odd = sorted(before)[1]
    s.tools.kubectl("label", "pod", odd, "-n", app.ns, ENABLED + "-")
    check(ENABLED not in labels_of(next(p for p in app.pods() if p["metadata"]["name"] == odd)), "label kept")
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.expect_in_progress(app)
    # Draining: its gate False. Without a pre-update hook the gate's write alone starts the drain, and the pod's
    # state label stays Normal until the pod write (DESIGN.md §4.3).
    draining_pod = wait_for(lambda: next((p for p in app.pods() if tc.condition(p, tc.READY_GATE) == "False"), None),
                            60, "a pod draining", app)
    draining = draining_pod["metadata"]["name"]
    check(state_of(draining_pod) in ("Normal", "Updating"), "draining pod %s has state label %s, not Normal (the drain "
          "without a hook writes only the gate)" % (draining, state_of(draining_pod)))
    out = s.tools.kubectl("label", "pod", draining, "-n", app.ns, ENABLED + "-", check_rc=False)
    check(out.returncode != 0 and "is in an in-place update or out of service for one" in out.stderr,
          "removing the opt-in label of draining pod %s was not refused by the policy: %s %s"
          % (draining, out.returncode, (out.stdout + out.stderr)[-300:]))

    def stuck():
        d = app.deployment()
        return (tc.condition(d, "inplace-webhook.io/Progressing", "reason") == "PodNotOptedIn"
                and odd in (tc.condition(d, "inplace-webhook.io/Progressing", "message") or "")
                and all(images(p)["app"] == tc.V2 for p in app.pods() if p["metadata"]["name"] != odd))
    wait_for(stuck, 120, "the update to say it waits for %s" % odd, app)
    pod = next(p for p in app.pods() if p["metadata"]["name"] == odd)
    check(images(pod)["app"] == tc.V1 and pod["metadata"]["uid"] == before[odd]["uid"]
          and tc.container_statuses(pod)["app"]["restartCount"] == before[odd]["containers"]["app"][1]
          and state_of(pod) == "Normal" and is_ready(pod),
          "pod %s without the label was touched: %s %s" % (odd, images(pod), labels_of(pod)))
    check(IN_PROGRESS in annotations_of(app.deployment()), "the update was ended instead of waiting")
    status = s.tools.kubectl("rollout", "status", "deploy/web", "-n", app.ns, "--timeout=20s", check_rc=False)
    check(status.returncode != 0 and "progress deadline" in status.stdout + status.stderr,
          "kubectl rollout status did not fail on the stuck update: %s" % (status.stdout + status.stderr)[-300:])
    s.tools.kubectl("label", "pod", odd, "-n", app.ns, ENABLED + "=true")
    tc.finish(app, before, rs0, restarted={"app"}, timeout=90)
    check(all_at(app, tc.V2), "a pod of the ReplicaSet was left behind: %s"
          % [(p["metadata"]["name"], images(p)) for p in app.pods()])


def r11b_abort_releases_pods_and_waits_for_a_revert(s):
    """Abort puts a draining pod (gate False) back in service; an abort after a revert to the ReplicaSet's template
    waits until the pods this run moved are back (the native rollout would leave them), then ends."""
    app = tc.App(s, "r11b")
    before = snapshot(app.create(tc.deployment("web", replicas=3, gate=True, policy=GATE_POLICY)))
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    draining = wait_for(lambda: next((p for p in app.pods() if tc.condition(p, tc.READY_GATE) == "False"
                                      and not is_ready(p)), None), 30, "a pod draining", app)["metadata"]["name"]
    app.kubectl("annotate", "deploy/web", ABORT + "=true")
    wait_for(lambda: IN_PROGRESS not in annotations_of(app.deployment()), 30, "the abort", app)
    wait_for(lambda: all(state_of(p) == "Normal" and is_ready(p) for p in app.pods()), 30,
             "pod %s back in service after the abort" % draining, app)
    # The abort unpaused it: the native rollout replaces the pods with V2.
    wait_for(lambda: app.rollout_complete() and all_at(app, tc.V2), 120, "the native rollout", app)

    # Now V2 -> V1 in place with no drain; one pod moves; revert to V2 and abort at once: the abort waits.
    app.kubectl("annotate", "deploy/web", tc.POLICY + "-")
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")
    app.kubectl("annotate", "deploy/web", "--overwrite", tc.LIFECYCLE + "=" + json.dumps(
        {"preUpdate": {"labelsHandler": {tc.HANDLER_LABEL: "true"}}}))
    before = snapshot(app.pods())
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V1)
    first = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    app.set_label(first, None)
    wait_for(lambda: any(p["metadata"]["name"] == first and state_of(p) == "Normal" and images(p)["app"] == tc.V1
                         and is_ready(p) for p in app.pods()), 40, "pod %s updated" % first, app)
    held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                    "a second pod in PreparingUpdate", app)["metadata"]["name"]
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)  # the revert
    app.kubectl("annotate", "deploy/web", ABORT + "=true")
    wait_for(lambda: app.events_with("InPlaceAbortDeferred", kind="Deployment"), 20, "the deferred abort", app)
    check(IN_PROGRESS in annotations_of(app.deployment()), "the abort ended the update with %s at V1" % first)
    tc.release_until_done(app, lambda p: app.set_label(p["metadata"]["name"], None), 90, "after the revert")
    wait_for(app.in_place_done, 60, "the end of the reverted update", app)
    d, pods = app.deployment(), app.pods()
    check(ABORT not in annotations_of(d) and not d["spec"].get("paused"), "Deployment after the revert: %s %s"
          % (annotations_of(d), d["spec"].get("paused")))
    check(all_at(app, tc.V2), "pods after the deferred abort: %s" % [(p["metadata"]["name"], images(p)) for p in pods])
    after = snapshot(app.pods())
    check(sorted(after) == sorted(before), "pods replaced: %s -> %s" % (sorted(before), sorted(after)))
    check(after[first]["containers"]["app"][1] == before[first]["containers"]["app"][1] + 2,
          "pod %s: expected two restarts (V1, then back to V2)" % first)
    check(held in after, "held pod gone")


def r11d_retarget_between_finish_and_unpause(s):
    """A re-target in the window between the finish (the pods' ReplicaSet holds the target) and the unpause: the
    window is held open by stopping kube-controller-manager (SIGSTOP), so the finish waits for the controller; a
    new image then takes every pod on to it in place, and once the controller runs again the update ends with the
    history the two templates give: the first (revision 1) and the last (revision 2)."""
    app = tc.App(s, "r11d")
    tc.create_label_hooked(app, replicas=2)
    before = snapshot(app.pods())
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    first, held = tc.hold_one_pod(app, lambda name: app.set_label(name, None))
    with open(os.path.join(s.env.run, "pids", "kube-controller-manager")) as f:
        pid = int(f.read())
    os.killpg(pid, signal.SIGSTOP)
    try:
        app.set_label(held, None)
        wait_for(lambda: any(r["spec"].get("replicas") and images(r)["app"] == tc.V2 for r in app.replicasets()),
                 60, "the finish to write the target into the pods' ReplicaSet", app)
        d = app.deployment()
        check(d["spec"].get("paused") and IN_PROGRESS in annotations_of(d), "the update ended without the controller")
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V201)
        tc.expect_warning(warnings, "re-targeted")
        wait_for(lambda: all(images(p)["app"] == V201 and state_of(p) == "Normal" and is_ready(p)
                             for p in app.pods()), 90, "every pod at the new target while the controller is stopped",
                 app)
        wait_for(lambda: any(r["spec"].get("replicas") and images(r)["app"] == V201 for r in app.replicasets()),
                 30, "the second finish", app)
        check(IN_PROGRESS in annotations_of(app.deployment()), "the update ended without the controller")
    finally:
        os.killpg(pid, signal.SIGCONT)
    wait_for(app.in_place_done, 60, "the end once the controller runs again", app)
    d = app.deployment()
    check(not d["spec"].get("paused"), "still paused")
    after = snapshot(app.pods())
    check(sorted(after) == sorted(before), "pods replaced: %s -> %s" % (sorted(before), sorted(after)))
    for name, snap in after.items():
        check(snap["uid"] == before[name]["uid"], "pod %s recreated" % name)
        check(snap["containers"]["app"][1] == before[name]["containers"]["app"][1] + 2
              and snap["containers"]["sidecar"] == before[name]["containers"]["sidecar"],
              "pod %s: restarts %s -> %s (app twice, sidecar never)" % (name, before[name]["containers"],
                                                                       snap["containers"]))
    out, _ = app.kubectl("rollout", "history", "deploy/web")
    revisions = [int(m.group(1)) for m in re.finditer(r"^(\d+)\s", out, re.M)]
    check(revisions == [1, 2], "history: %s" % revisions)
    out, _ = app.kubectl("rollout", "history", "deploy/web", "--revision=2")
    check(V201 in out and tc.V1 not in out, "revision 2 is not the last target:\n%s" % out)
    out, _ = app.kubectl("rollout", "history", "deploy/web", "--revision=1")
    check(tc.V1 in out, "revision 1 is not the first template:\n%s" % out)


V201 = "localhost/httpd-demo:v2.0.1"  # the same image as :v2 under another tag


def r11c_later_webhook_makes_the_change_native(s):
    """Another mutating webhook, called after ours, turns an image change into one that is not eligible (it adds an
    env var): the API server calls ours again (reinvocationPolicy IfNeeded), which takes back the pause and record
    its first answer added, so the native rollout replaces the pods and the Deployment is never left paused."""
    app = tc.App(s, "r11c")
    before = snapshot(app.create(tc.deployment("web", replicas=2)))
    server, port = tc.start_test_webhook(s, "r11c", "later_webhook.py", ["--image", tc.V2])
    name = "zz-r11c-later"  # sorts after ours: called after it
    try:
        with open(os.path.join(s.env.pki, "ca.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                  "metadata": {"name": name},
                  "webhooks": [{"name": "later.r11c.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                                "failurePolicy": "Fail", "timeoutSeconds": 5, "reinvocationPolicy": "Never",
                                "clientConfig": {"url": "https://127.0.0.1:%s/mutate" % port,
                                                 "caBundle": ca},
                                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": app.ns}},
                                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                           "resources": ["deployments"]}]}]}
        s.tools.kubectl("create", "-f", "-", stdin=json.dumps(config))
        time.sleep(2)  # the API server's webhook configuration informer
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        tc.expect_warning(warnings, "in-place update not possible (spec.template.spec.containers[0].env changed)")
        d = app.deployment()
        env = d["spec"]["template"]["spec"]["containers"][0].get("env")
        check({"name": "ADDED_BY_LATER_WEBHOOK", "value": "1"} in (env or []), "the later webhook did not run: %s" % env)
        check(not d["spec"].get("paused") and IN_PROGRESS not in annotations_of(d),
              "left paused by our first answer: paused %s, %s" % (d["spec"].get("paused"), annotations_of(d)))
        wait_for(lambda: app.rollout_complete() and all_at(app, tc.V2) and len(app.pods()) == 2
                 and all(is_ready(p) for p in app.pods()), 120, "the native rollout", app)
        after = snapshot(app.pods())
        check(not set(after) & set(before), "pods kept: %s -> %s" % (sorted(before), sorted(after)))
    finally:
        s.tools.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found")
        server.kill()
        server.wait()


SCENARIOS = [r11_unlabelled_pod_reaches_the_target, r11b_abort_releases_pods_and_waits_for_a_revert,
             r11c_later_webhook_makes_the_change_native, r11d_retarget_between_finish_and_unpause]
