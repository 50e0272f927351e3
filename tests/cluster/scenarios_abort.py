"""Issue 13, item 8 on the real cluster: a stuck update can always be ended without cluster-admin (DESIGN.md §9.8).
The abort is the loop's to act on; when no loop runs, or the loop has not acted on it for a minute (it lost its
permissions, say), the user's abort ends the update in the webhook itself. Every write here is alice's, who holds
only the namespace's `edit` role."""

import json
import time

import test_cluster as tc
from kube import check, condition, images, is_ready, state_of, wait_for

ABORT = "inplace-webhook.io/abort"
IN_PROGRESS = "inplace-webhook.io/in-progress"


def annotations_of(obj):
    return obj["metadata"].get("annotations") or {}


def held_update(s, name):
    """An opted-in Deployment of 3 with a pre-update label hook whose update to V2 waits on the hook: one pod
    updated, one held in PreparingUpdate, the Deployment paused by us."""
    app = tc.App(s, name)
    tc.create_label_hooked(app, replicas=3)
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    first, held = tc.hold_one_pod(app, lambda pod: app.set_label(pod, None))
    d = app.deployment()
    check(IN_PROGRESS in annotations_of(d) and d["spec"].get("paused"), "no update held: %s" % annotations_of(d))
    return app, first, held


def ended_natively(app):
    """The update is gone, the Deployment unpaused, and the native rollout brings every pod to V2, Ready."""
    d = app.deployment()
    check(IN_PROGRESS not in annotations_of(d) and not d["spec"].get("paused"),
          "after the abort: paused %s, annotations %s" % (d["spec"].get("paused"), annotations_of(d)))
    wait_for(lambda: app.rollout_complete() and len(app.pods()) == 3
             and all(images(p)["app"] == tc.V2 and is_ready(p) for p in app.pods()), 120,
             "the native rollout after the abort", app)


RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def held_revert(s, name):
    """A held update reverted: 3 pods with a pre-update label hook, updated to V2 until one pod runs V2 (released,
    then registered again by the test's load balancer), then the template reverted to V1 while that pod's move back
    is held by its hook. Returns (app, the pod on V2)."""
    app, first, _ = held_update(s, name)
    app.set_label(first, "true")  # registered again: its move back waits on the hook
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V1)
    wait_for(lambda: json.loads(annotations_of(app.deployment()).get(IN_PROGRESS) or "{}").get("to")
             == json.loads(annotations_of(app.deployment()).get(IN_PROGRESS) or "{}").get("from"), 10,
             "the update re-targeted to its start", app)
    time.sleep(tc.SETTLE)
    on_b = [p["metadata"]["name"] for p in app.pods() if images(p)["app"] == tc.V2]
    check(on_b == [first], "after the revert, pods on V2: %s (want %s held by its hook)\n%s"
          % (on_b, first, app.pod_table()))
    return app, first


def reverted_natively(app, warnings, what):
    """After the webhook ended a reverted update (`what`): kubectl said the template restarts, the template carries
    the restartedAt, and the native rollout takes every pod to V1 (none left on V2): `kubectl rollout status`
    succeeds on a true state."""
    tc.expect_warning(warnings, RESTARTED_AT + " added, every pod is replaced at it")
    d = app.deployment()
    check(IN_PROGRESS not in annotations_of(d) and RESTARTED_AT in (d["spec"]["template"]["metadata"].get(
        "annotations") or {}), "%s: record %s, template annotations %s" % (
        what, annotations_of(d).get(IN_PROGRESS), d["spec"]["template"]["metadata"].get("annotations")))
    wait_for(lambda: app.rollout_complete() and len(app.pods()) == 3
             and all(images(p)["app"] == tc.V1 and is_ready(p) for p in app.pods()), 120,
             "the native rollout to V1 after %s" % what, app)
    app.kubectl("rollout", "status", "deploy/web", "--timeout=30s")


def h10_revert_ended_by_the_webhook_is_finished(s):
    """A→B→A with a pod held on B by its hook, ended by each of the webhook's escapes that a running loop leaves
    to it (DESIGN.md §8.11; the third, no loop at all, is h08's): the opt-in label removed, and an abort the loop
    defers (a pod still on B) repeated 61 s later. Each time the webhook adds kubectl.kubernetes.io/restartedAt to
    the template, so the native rollout replaces every pod at A, and the loop closes the product's condition
    (False/InPlaceUpdateAborted naming why). Before, the pod stayed on B under an A template while `kubectl rollout
    status` reported success."""
    optout, _ = held_revert(s, "h10a")
    deferred, _ = held_revert(s, "h10b")
    _, warnings = deferred.kubectl("annotate", "deploy/web", ABORT + "=true")
    asked = time.time()
    tc.expect_warning(warnings, "abort requested; if it still runs in 60 s, run the abort command again")
    _, warnings = optout.kubectl("label", "deploy/web", "inplace-webhook.io/enabled-")
    reverted_natively(optout, warnings, "the opt-in label's removal")
    wait_for(lambda: (condition(optout.deployment(), "inplace-webhook.io/Progressing", "reason")
                      == "InPlaceUpdateAborted"), 30, "the loop to close its condition", optout)
    check("no longer opted in" in condition(optout.deployment(), "inplace-webhook.io/Progressing", "message"),
          "the condition does not say why")
    wait_for(lambda: deferred.count_events("InPlaceAbortDeferred", kind="Deployment") > 0, 30,
             "the loop to defer the abort (a pod still on V2)", deferred)
    check(IN_PROGRESS in annotations_of(deferred.deployment()), "the deferred abort ended the update")
    time.sleep(max(0.0, asked + 61 - time.time()))
    _, warnings = deferred.kubectl("annotate", "--overwrite", "deploy/web", ABORT + "=true")
    tc.expect_warning(warnings, "in-place update ended by the webhook (the loop did not act on the abort)")
    reverted_natively(deferred, warnings, "the repeated abort")
    wait_for(lambda: (condition(deferred.deployment(), "inplace-webhook.io/Progressing", "reason")
                      == "InPlaceUpdateAborted"), 30, "the loop to close its condition", deferred)


def h08_abort_with_no_loop_running(s):
    """With no loop running (helm upgrade with --disable-loop; every webhook replica reports
    inplace_webhook_loop_alive 0), the user's abort ends the held update at once: kubectl prints that the webhook
    ended it, the Deployment is unpaused without its record, and the native rollout takes every pod to V2."""
    import scenarios_gate as gate
    app, first, held = held_update(s, "h08")
    reverted, _ = held_revert(s, "h08r")  # A→B→A, a pod held on B: the escape must not leave it there
    try:
        s.install(extra=["--set-json", 'server.extraArgs=["--disable-loop"]'], upgrade=True, loop=False)
        wait_for(lambda: all(gate.loop_alive_metric(s, p["metadata"]["name"]) == 0
                             for p in s.webhook_pods() if tc.is_ready(p)), 180,
                 "every webhook replica to report no loop")
        check(IN_PROGRESS in annotations_of(app.deployment()), "the update ended with the loop stopped")
        _, warnings = app.kubectl("annotate", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "in-place update ended by the webhook (no in-place loop runs)")
        ended_natively(app)
        # The abort stays until the next write, which consumes it (it would block the next in-place update).
        check(annotations_of(app.deployment()).get(ABORT) == "true", "the abort annotation went early")
        app.kubectl("annotate", "deploy/web", "note=one")
        check(ABORT not in annotations_of(app.deployment()), "the next write left the abort")
        _, warnings = reverted.kubectl("annotate", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "in-place update ended by the webhook (no in-place loop runs)")
        reverted_natively(reverted, warnings, "the abort with no loop")
    finally:
        s.install(upgrade=True)


def refuse_controller_deployment_writes(s, ns):
    """A ValidatingAdmissionPolicy (a cluster's own, as a platform team might write) that refuses the controller's
    writes to Deployments in `ns`; returns the names to delete."""
    name = "h08b-refuse-controller"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                               "operations": ["UPDATE"],
                                                               "resources": ["deployments"]}]},
                       "validations": [{"expression": "request.userInfo.username != '%s'" % tc.CONTROLLER_USER,
                                        "message": "h08b: the controller may not write Deployments here"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}}
    for obj in (policy, binding):
        s.tools.kubectl("create", "-f", "-", stdin=json.dumps(obj))
    return ["validatingadmissionpolicybinding/" + name, "validatingadmissionpolicy/" + name]


def h08b_abort_the_loop_cannot_carry_out(s):
    """A loop that runs but whose Deployment writes a policy refuses: the abort is first left to it (kubectl says to
    run it again after 60 s); the loop puts the held pod back in service but cannot unpause, so the update is still
    held 15 s later and at a repeat before 60 s; the same command 61 s after the first ends the update in the
    webhook, and the native rollout takes every pod to V2 (the loop, which may still write pods, sets the new pods'
    gates)."""
    app, first, held = held_update(s, "h08b")
    created = refuse_controller_deployment_writes(s, app.ns)
    try:
        time.sleep(2)  # the API server's policy informer
        _, warnings = app.kubectl("annotate", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "abort requested; if it still runs in 60 s, run the abort command again")
        asked = time.time()
        wait_for(lambda: all(state_of(p) == "Normal" and is_ready(p) for p in app.pods()), 30,
                 "the loop to put pod %s back in service" % held, app)
        time.sleep(max(0.0, asked + 15 - time.time()))
        d = app.deployment()
        check(IN_PROGRESS in annotations_of(d) and d["spec"].get("paused"),
              "the refused loop ended the update: %s" % annotations_of(d))
        _, warnings = app.kubectl("annotate", "--overwrite", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "abort pending since")
        check(IN_PROGRESS in annotations_of(app.deployment()), "the webhook ended the update before 60 s")
        time.sleep(max(0.0, asked + 61 - time.time()))
        _, warnings = app.kubectl("annotate", "--overwrite", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "in-place update ended by the webhook (the loop did not act on the abort)")
        ended_natively(app)
    finally:
        s.tools.kubectl("delete", "--ignore-not-found", *created)
    # The next write consumes the abort.
    app.kubectl("annotate", "deploy/web", "note=one")
    check(ABORT not in annotations_of(app.deployment()), "the next write left the abort")


def binding_without_server_fields(s, name):
    """The ClusterRoleBinding `name` as it can be created again."""
    binding = json.loads(s.tools.kubectl("get", "clusterrolebinding", name, "-o", "json").stdout)
    meta = binding["metadata"]
    binding["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    return binding


def h08c_controller_without_rbac_is_no_loop(s):
    """The controller's ClusterRoleBinding deleted (it may no longer watch or patch pods, set their gate or write
    Deployments): within a check period it steps down, releasing the Lease, its pods fail /readyz and every webhook
    replica reports inplace_webhook_loop_alive 0. So a pod created then gets no readiness gate and becomes Ready;
    an image change starts an update whose warning says no controller runs, and alice's abort ends it at once, the
    native rollout taking every pod to V2, none of them gated. With the binding restored a controller leads again
    within a check period, and a new pod gets the gate, which the loop sets True."""
    import scenarios_gate as gate
    app = tc.App(s, "h08c")
    before = app.create(tc.deployment("web", replicas=2))
    check(all(gate.has_gate(p) and is_ready(p) for p in before), "the first pods: %s" % app.pod_table())
    binding = binding_without_server_fields(s, tc.RELEASE)
    t0 = time.time()
    s.tools.kubectl("delete", "clusterrolebinding", tc.RELEASE)
    restored = False
    try:
        wait_for(lambda: not s.lease_identity(), 60, "the controller to step down and release the Lease")
        stepped_down = time.time() - t0
        wait_for(lambda: s.controller_pods() and not any(is_ready(p) for p in s.controller_pods()), 30,
                 "every controller pod to fail /readyz")
        wait_for(lambda: all(gate.loop_alive_metric(s, p["metadata"]["name"]) == 0
                             for p in s.webhook_pods() if is_ready(p)), 30, "every webhook replica to report no loop")
        no_loop = time.time() - t0
        logs = s.webhook_logs(tail=200)
        check("the loop cannot act: the API server refuses it" in logs and "patch pods/status" in logs,
              "no controller log names the refused permissions")
        print("    binding deleted: Lease released after %.1f s, webhooks report no loop after %.1f s"
              % (stepped_down, no_loop))
        check(no_loop < 60, "the outage took %.0f s to show" % no_loop)

        # A new pod is not held for a gate nothing would set.
        app.kubectl("scale", "deploy/web", "--replicas=3")
        wait_for(lambda: len(app.pods()) == 3 and all(is_ready(p) for p in app.pods()), 90,
                 "the scaled-up pod to become Ready", app)
        new = [p for p in app.pods() if p["metadata"]["name"] not in {q["metadata"]["name"] for q in before}]
        check(len(new) == 1 and not gate.has_gate(new[0]), "the new pod: %s" % app.pod_table(new))

        # An update says no controller runs; the abort ends it in the webhook at once.
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        tc.expect_warning(warnings, "no inplace-webhook controller is known to run; the update waits until one does")
        tc.expect_warning(warnings, "to end it now: kubectl annotate deploy/web " + ABORT + "=true -n h08c")
        check(IN_PROGRESS in annotations_of(app.deployment()), "no update started")
        _, warnings = app.kubectl("annotate", "deploy/web", ABORT + "=true")
        tc.expect_warning(warnings, "in-place update ended by the webhook (no in-place loop runs)")
        ended_natively(app)
        check(not any(gate.has_gate(p) for p in app.pods()), "gated pods after the native rollout: %s"
              % app.pod_table())
        app.kubectl("annotate", "deploy/web", "note=one")  # consumes the abort
    finally:
        s.tools.kubectl("create", "-f", "-", stdin=json.dumps(binding))
        restored = True
    t1 = time.time()
    if restored:
        wait_for(lambda: s.lease_holder() in {p["metadata"]["name"] for p in s.controller_pods() if is_ready(p)},
                 60, "a Ready controller to lead again")
        wait_for(lambda: all(gate.loop_alive_metric(s, p["metadata"]["name"]) == 1
                             for p in s.webhook_pods() if is_ready(p)), 30, "every webhook replica to see the loop")
        print("    binding restored: a controller leads and the webhooks see it after %.1f s" % (time.time() - t1))
        names = {p["metadata"]["name"] for p in app.pods()}
        app.kubectl("scale", "deploy/web", "--replicas=4")
        wait_for(lambda: len(app.pods()) == 4 and all(is_ready(p) for p in app.pods()), 90,
                 "the pod created with the loop back to become Ready", app)
        new = [p for p in app.pods() if p["metadata"]["name"] not in names]
        check(len(new) == 1 and gate.has_gate(new[0]), "the pod created with the loop back: %s" % app.pod_table(new))


SCENARIOS = [h08_abort_with_no_loop_running, h08b_abort_the_loop_cannot_carry_out,
             h08c_controller_without_rbac_is_no_loop, h10_revert_ended_by_the_webhook_is_finished]
