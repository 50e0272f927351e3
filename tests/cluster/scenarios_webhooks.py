"""Issue 27 item 2 on the real cluster: another mutating webhook rewrites the images of pods, not of templates (a
registry mirror, a digest pin). The loop records the image it asked for and the one the API server stored, takes the
stored reference as the container's target, and writes each pod a bounded number of times (DESIGN.md §8.2)."""

import base64
import json
import os
import time

import test_cluster as tc
from kube import check, container_statuses, event_line, images, is_ready, snapshot, state_of, \
    wait_for
from scenarios_plugin import inplace
from scenarios_progress import Background, cond, rollout_status

MIRROR_V1, MIRROR_V2 = "localhost/mirror/httpd-demo:v1", "localhost/mirror/httpd-demo:v2"
MISSING_V2 = "localhost/missing/httpd-demo:v2"  # no such image anywhere: the kubelet cannot pull it
UPDATE_STATE = "inplace-webhook.io/update-state"
OURS = "inplace-webhook.io/Progressing"
# The loop's pod patches (not pods/status) per pod: PreparingUpdate, the write, Normal (a pod with the gate and
# the default drain), plus one that records the image the API server stored when admission rewrote it.
MAX_POD_PATCHES = 4


def start_rewriter(s, name, rules):
    """The image rewriter (image_rewriter.py) in the cluster's network namespace; returns (process, port)."""
    args = []
    for r in rules:
        args += ["--rule"] + list(r)
    return tc.start_test_webhook(s, name, "image_rewriter.py", args)


def register_rewriter(s, name, ns, port, paths):
    """A MutatingWebhookConfiguration that sends the pods of `ns` carrying label mirror=VALUE to PATH, for each
    VALUE: PATH in `paths`, on CREATE and UPDATE."""
    with open(os.path.join(s.env.pki, "ca.crt"), "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    hooks = [{"name": "%s.rewriter.test" % value, "admissionReviewVersions": ["v1"], "sideEffects": "None",
              "failurePolicy": "Fail", "timeoutSeconds": 5, "reinvocationPolicy": "Never",
              "clientConfig": {"url": "https://127.0.0.1:%s%s" % (port, path), "caBundle": ca},
              "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
              "objectSelector": {"matchLabels": {"mirror": value}},
              "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                         "resources": ["pods"]}]} for value, path in paths.items()]
    s.tools.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": hooks}))


def rewritten_deployment(name, mirror, deadline=None):
    d = tc.deployment(name, replicas=2, gate=True)
    d["spec"]["template"]["metadata"]["labels"]["mirror"] = mirror
    if deadline is not None:
        d["spec"]["progressDeadlineSeconds"] = deadline
    return d


def pod_patches(s, ns, since):
    """The loop's pod patches (no subresource) that the API server took, per pod, from its audit log."""
    out = {}
    for e in s.audit.writes(since, user=tc.CONTROLLER_USER, ns=ns, resource="pods", subresource=""):
        if e.get("verb") == "patch" and (e.get("responseStatus") or {}).get("code", 0) < 300:
            out[e["objectRef"]["name"]] = out.get(e["objectRef"]["name"], 0) + 1
    return out


def w06_pod_image_rewriter(s):
    """A pod-only image rewriter is installed (a small mutating webhook: `localhost/httpd-demo:` becomes
    `localhost/mirror/httpd-demo:`, tagged in containerd as the same image). (a) v1 -> v2 of an opted-in 2-replica
    Deployment completes in place: every pod keeps its UID, runs the mirror reference, kubectl rollout status
    succeeds. (b) A rewrite to a reference that does not exist (`localhost/missing/...`, a second Deployment with
    progressDeadlineSeconds 12) is reported stuck within the deadline, naming the pod, the image asked for and the
    image got (the Deployment's conditions, an Event, kubectl inplace status). (c) The audit log shows at most 4
    pod patches by the loop per pod (3 without a rewrite)."""
    for ref, mirror in ((tc.V1, MIRROR_V1), (tc.V2, MIRROR_V2)):
        s.tools.ctr("images", "tag", "--force", ref, mirror)
    app = tc.App(s, "w06", "web")
    miss = tc.App(s, "w06", "miss")
    app.setup_namespace()
    server, port = start_rewriter(s, "w06", [
        ("/mirror", "localhost/httpd-demo:", "localhost/mirror/httpd-demo:"),
        ("/missing", tc.V2, MISSING_V2)])
    name = "w06-image-rewriter"
    try:
        register_rewriter(s, name, app.ns, port, {"yes": "/mirror", "missing": "/missing"})
        time.sleep(2)  # the API server's webhook configuration informer
        app.kubectl("apply", "-f", "-", stdin=json.dumps(rewritten_deployment("web", "yes")))
        miss.kubectl("apply", "-f", "-", stdin=json.dumps(rewritten_deployment("miss", "missing", deadline=12)))
        for a in (app, miss):
            wait_for(a.rollout_complete, 90, "the initial rollout of %s" % a.name, a)
        check(all(images(p)["app"] == MIRROR_V1 for p in app.pods()),
              "the rewriter did not rewrite the pods at creation: %s" % [images(p) for p in app.pods()])
        before, before_miss = snapshot(app.pods()), snapshot(miss.pods())

        t0 = time.time()
        app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        miss.kubectl("set", "image", "deploy/miss", "app=" + tc.V2)
        tc.expect_in_progress(app)
        tc.expect_in_progress(miss)

        # (a) completes in place on the mirror reference.
        wait_for(app.in_place_done, 60, "the in-place update of web to finish", app)
        done = time.time() - t0
        code, out = rollout_status(app, timeout="30s")
        check(code == 0, "kubectl rollout status: %d %s" % (code, out))
        check(images(app.deployment())["app"] == tc.V2, "the template changed: %s" % images(app.deployment()))
        pods = app.pods()
        after = snapshot(pods)
        check(sorted(after) == sorted(before), "pods replaced: %s -> %s" % (sorted(before), sorted(after)))
        for p in pods:
            n = p["metadata"]["name"]
            check(after[n]["uid"] == before[n]["uid"], "pod %s recreated" % n)
            check(images(p)["app"] == MIRROR_V2 and is_ready(p) and state_of(p) == "Normal",
                  "pod %s: %s ready=%s state=%s" % (n, images(p), is_ready(p), state_of(p)))
            cid, restarts = after[n]["containers"]["app"]
            check(cid != before[n]["containers"]["app"][0] and restarts == before[n]["containers"]["app"][1] + 1,
                  "pod %s container app: %s restarts %d (one restart expected)" % (n, cid, restarts))
            rec = json.loads(p["metadata"]["annotations"][UPDATE_STATE]).get("images", {}).get("app", {})
            check(rec.get("asked") == tc.V2 and rec.get("got") == MIRROR_V2 and rec.get("before") == MIRROR_V1,
                  "pod %s update-state images: %s" % (n, rec))
            check(container_statuses(p)["app"].get("ready"), "pod %s app not ready" % n)
        rewritten = app.events_with("PodImageRewritten", "Deployment", name=app.name)
        check(len(rewritten) == 2 and all(tc.V2 in e["message"] and MIRROR_V2 in e["message"] for e in rewritten),
              "PodImageRewritten Events: %s" % [event_line(e) for e in rewritten])
        print("  (a) web: 2 pods in place on %s in %.1f s; kubectl rollout status: %s" % (
            MIRROR_V2, done, out.strip().splitlines()[-1]))

        # (b) stuck within the deadline, naming pod, asked and got.
        seen = []  # the app container's states the kubelet reported meanwhile

        def stalled():
            for p in miss.pods():
                st = container_statuses(p).get("app", {}).get("state") or {}
                for k, v in st.items():
                    if (k, (v or {}).get("reason")) not in seen:
                        seen.append((k, (v or {}).get("reason")))
            d = miss.deployment()
            return d if (cond(d, "Progressing") or {}).get("reason") == "ProgressDeadlineExceeded" else None
        d = wait_for(stalled, 45, "the update of miss reported stuck", miss, interval=0.3)
        print("  (b) the kubelet reported for app: %s" % seen)
        stuck = time.time() - t0
        stuck_pod = next((p for p in miss.pods() if state_of(p) == "Updating"), None)
        check(stuck_pod is not None, "no pod of miss in Updating:\n" + miss.pod_table())
        sp = stuck_pod["metadata"]["name"]
        check(images(stuck_pod)["app"] == MISSING_V2, "pod %s runs %s" % (sp, images(stuck_pod)))
        for ctype in ("Progressing", OURS):
            message = cond(d, ctype)["message"]
            check(sp in message and "asked for image " + tc.V2 in message and MISSING_V2 in message,
                  "%s does not name pod, asked and got: %s" % (ctype, message))
        print("  (b) miss: stuck %.1f s after the change (progressDeadlineSeconds 12): %s" % (
            stuck, cond(d, "Progressing")["message"]))
        pulls = miss.events_with("PodImageNotRunning", "Deployment", name=miss.name)
        check(pulls and all(sp in e["message"] and tc.V2 in e["message"] and MISSING_V2 in e["message"]
                            and e["type"] == "Warning" for e in pulls),
              "PodImageNotRunning Events: %s" % [event_line(e) for e in miss.events()])
        code, out = rollout_status(miss, timeout="20s")
        check(code != 0 and "exceeded its progress deadline" in out, "rollout status of miss: %d %s" % (code, out))
        status = inplace(miss, "status", "deploy/miss", rc=None).stdout
        check("asked for image %s, the API server stored %s" % (tc.V2, MISSING_V2) in status and "stuck" in status,
              "kubectl inplace status:\n" + status)
        other = [n for n in before_miss if n != sp]
        check(all(state_of(p) == "Normal" and images(p)["app"] == tc.V1 for p in miss.pods()
                  if p["metadata"]["name"] in other), "the second pod of miss moved:\n" + miss.pod_table())

        # (c) a bounded number of pod writes.
        time.sleep(3)  # a loop that kept writing would show it now
        writes = pod_patches(s, app.ns, t0 - 1)
        print("  (c) the loop's pod patches per pod: %s (bound %d)" % (writes, MAX_POD_PATCHES))
        for n in list(before) + [sp]:
            check(1 <= writes.get(n, 0) <= MAX_POD_PATCHES, "pod %s: %d pod patches by the loop, bound %d" % (
                n, writes.get(n, 0), MAX_POD_PATCHES))
    finally:
        s.tools.kubectl("delete", "mutatingwebhookconfiguration", name, "--ignore-not-found", check_rc=False)
        server.kill()
        server.wait()
        # The stuck update ends with its Deployment; the mirror names go (no other scenario sees them).
        s.tools.kubectl("delete", "deployment", "miss", "-n", app.ns, "--ignore-not-found", "--wait=false",
                        check_rc=False)
        for mirror in (MIRROR_V1, MIRROR_V2):
            s.tools.ctr("images", "rm", mirror, check_rc=False)


SCENARIOS = [w06_pod_image_rewriter]
