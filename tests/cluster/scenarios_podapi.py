"""Issue 12, item 8 on the real cluster: only what the pod API lets change is eligible. For each class of change
that kube-apiserver's pod update validation (ValidatePodUpdate) refuses on a running pod, (1) a direct PATCH of
a pod shows the real API server refusing it, and (2) the same change of the Deployment takes the native rollout,
whatever the policy allow-list says, with a warning naming what the pod API refuses (DESIGN.md §8.8)."""

import json

import test_cluster as tc
from kube import ApiError, annotations_of, check, is_ready, ns_path, wait_for

ALL_ANNOTATIONS = {"annotations": ["*"]}  # the allow-list that would let any annotation change in place
APPARMOR = "container.apparmor.security.beta.kubernetes.io/app"
MIRROR = "kubernetes.io/config.mirror"


def refused_pod_patch(s, app, patch, message):
    """A strategic merge patch of a running pod by the cluster admin: the API server answers 422 Invalid with
    `message` in it, and the pod's spec, labels and annotations are unchanged."""
    pod = app.pods()[0]
    path = ns_path(app.ns, "pods", pod["metadata"]["name"])
    try:
        s.api.strategic_patch(path, patch)
    except ApiError as e:
        check(e.code == 422 and message in json.dumps(e.body), "the API server answered %d: %s" % (e.code, e.body))
        after = s.api.get(path)
        # The kubelet may still write the pod's status meanwhile (a new resourceVersion): what the PATCH targeted,
        # the spec and the metadata a user sets, is what must not have changed.
        for part in ("spec", "metadata.labels", "metadata.annotations", "metadata.generation"):
            was, now = pod, after
            for key in part.split("."):
                was, now = (was or {}).get(key), (now or {}).get(key)
            check(was == now, "the refused PATCH changed the pod's %s: %s -> %s"
                  % (part, json.dumps(was), json.dumps(now)))
        return
    raise tc.Failure("the API server accepted the pod PATCH %s" % json.dumps(patch))


def create(app):
    """Two replicas, policy allowing every annotation in place, one ReplicaSet."""
    pods = app.create(tc.deployment("web", replicas=2, policy=ALL_ANNOTATIONS))
    check(len(app.rs_names()) == 1, "one ReplicaSet after creation: %s" % app.rs_names())
    return {p["metadata"]["uid"] for p in pods}


def not_in_place(app, warnings, refused):
    """The webhook let the change through untouched: a warning naming what the pod API refuses, not paused, no
    in-progress record."""
    tc.expect_warning(warnings, "the pod API refuses to change " + refused)
    d = app.deployment()
    check(not d["spec"].get("paused") and tc.IN_PROGRESS not in annotations_of(d),
          "the change was taken in place: paused=%s annotations=%s" % (d["spec"].get("paused"), annotations_of(d)))


def native_rollout_done(app, uids, rs0):
    """The Deployment controller rolled natively: a new ReplicaSet, every pod replaced, all Ready."""
    wait_for(lambda: app.rollout_complete() and len(app.rs_names()) == len(rs0) + 1, 120, "the native rollout", app)
    pods = app.pods()
    check(not uids & {p["metadata"]["uid"] for p in pods}, "pods were not replaced:\n%s" % app.pod_table())
    check(all(is_ready(p) and tc.state_of(p) == "Normal" for p in pods), "pods after the rollout:\n%s" % app.pod_table())


def r08_apparmor_annotation_native(s):
    """AppArmor's per-container annotation may not be added, changed or removed on a running pod: adding it to the
    template (allowed by policy ["*"]) is a native rollout; the new pods carry it."""
    app = tc.App(s, "r08")
    uids = create(app)
    rs0 = app.rs_names()
    refused_pod_patch(s, app, {"metadata": {"annotations": {APPARMOR: "unconfined"}}},
                      "may not add AppArmor annotations")
    _, warnings = app.kubectl("patch", "deploy/web", "--type", "merge", "-p", json.dumps(
        {"spec": {"template": {"metadata": {"annotations": {APPARMOR: "unconfined"}}}}}))
    not_in_place(app, warnings, "annotation " + APPARMOR)
    native_rollout_done(app, uids, rs0)
    check(all(annotations_of(p).get(APPARMOR) == "unconfined" for p in app.pods()), "the new pods lack the annotation")


def r08_mirror_pod_annotation_native(s):
    """The kubelet's mirror-pod annotation may not be added or removed on a running pod: added to the template
    (with the nodeName the template then needs), the webhook hands the change to the Deployment controller, which
    starts a native rollout: a new ReplicaSet with the annotation, whose pods the API server creates."""
    app = tc.App(s, "r08")
    create(app)
    rs0 = app.rs_names()
    refused_pod_patch(s, app, {"metadata": {"annotations": {MIRROR: "x"}}}, "may not add mirror pod annotation")
    node = app.pods()[0]["spec"]["nodeName"]
    _, warnings = app.kubectl("patch", "deploy/web", "--type", "merge", "-p", json.dumps(
        {"spec": {"template": {"metadata": {"annotations": {MIRROR: "x"}}, "spec": {"nodeName": node}}}}))
    not_in_place(app, warnings, "annotation " + MIRROR)
    new = wait_for(lambda: next((r for r in app.replicasets() if r["metadata"]["name"] not in rs0), None), 30,
                   "the new ReplicaSet of the native rollout", app)
    check(annotations_of(new["spec"]["template"]).get(MIRROR) == "x", "the new ReplicaSet's template: %s"
          % new["spec"]["template"]["metadata"])
    wait_for(lambda: app.events_with("SuccessfulCreate", "ReplicaSet", new["metadata"]["name"]), 30,
             "the new ReplicaSet to create a pod", app)
    # Such pods are the kubelet's to delete (no static pod backs them): back to the previous template.
    app.kubectl("rollout", "undo", "deploy/web")
    wait_for(lambda: app.rollout_complete() and all(MIRROR not in annotations_of(p) for p in app.pods()), 120,
             "the rollback", app)


def r08_image_with_whitespace_native(s):
    """An image with trailing whitespace passes the Deployment's validation but not the pod's: the webhook leaves
    it to the Deployment controller, whose new ReplicaSet reports the API server's refusal (FailedCreate), while the
    old pods keep serving; nothing is paused or held by us."""
    app = tc.App(s, "r08")
    uids = create(app)
    rs0 = app.rs_names()
    refused_pod_patch(s, app, {"spec": {"containers": [{"name": "app", "image": tc.V2 + " "}]}},
                      "must not have leading or trailing whitespace")
    _, warnings = app.kubectl("patch", "deploy/web", "--type", "json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": tc.V2 + " "}]))
    not_in_place(app, warnings, "the image of container app")
    new = wait_for(lambda: next((r for r in app.replicasets() if r["metadata"]["name"] not in rs0), None), 30,
                   "the new ReplicaSet of the native rollout", app)
    failed = wait_for(lambda: next((e for e in app.events_with("FailedCreate", "ReplicaSet", new["metadata"]["name"])),
                                   None), 30, "the new ReplicaSet's FailedCreate", app)
    check("must not have leading or trailing whitespace" in failed["message"], "FailedCreate: %s" % failed["message"])
    check(uids <= {p["metadata"]["uid"] for p in app.pods() if is_ready(p)}, "the old pods stopped serving")
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    native_rollout_done(app, uids, rs0 + [new["metadata"]["name"]])


def r08_pod_spec_field_native(s):
    """Every pod-spec field but the images is immutable on a running pod (here terminationGracePeriodSeconds): a
    native rollout replaces the pods."""
    app = tc.App(s, "r08")
    uids = create(app)
    rs0 = app.rs_names()
    refused_pod_patch(s, app, {"spec": {"terminationGracePeriodSeconds": 3}},
                      "pod updates may not change fields other than")
    _, warnings = app.kubectl("patch", "deploy/web", "--type", "merge", "-p", json.dumps(
        {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 3}}}}))
    tc.expect_warning(warnings, "spec.template.spec.terminationGracePeriodSeconds changed")
    native_rollout_done(app, uids, rs0)


SCENARIOS = [r08_apparmor_annotation_native, r08_mirror_pod_annotation_native, r08_image_with_whitespace_native,
             r08_pod_spec_field_native]
