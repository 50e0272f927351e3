#!/usr/bin/env python3
"""The real-cluster suite: the product installed with the real helm into the real cluster of cluster/up.sh
(upstream kube-apiserver, controllers, scheduler, a kubelet on containerd + runc), driven with the real kubectl,
and every check made on what the real components report: pod UID, IP and node, the kubelet's containerID and
restartCount per container, the Deployment controller's status and conditions, the API server's audit log.

    python3 tests/cluster/test_cluster.py RUN_DIR SOURCE_DIR --image REF [--binary B --certs DIR] [-k NAME]
        [--no-install]

RUN_DIR is cluster/lib.sh's state directory of a running cluster whose containerd holds the images of
cluster/images/build.sh and `make image`. The suite installs the chart once (release inplace-webhook in
namespace inplace-webhook), runs each scenario in its own namespace, and uninstalls at the end as the README
says. Prints `N scenarios passed, M failed` last.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "curl"))

from fault_proxy import FaultProxy  # noqa: E402
from kube import (ABORT, GATE_SENT, IN_PROGRESS, LIFECYCLE, POLICY, READY_GATE, STATE_TIMESTAMP, Api,  # noqa: E402
                  ApiError,
                  AuditLog, ClusterEnv, Failure, PodSampler, Tools, annotations_of, check, condition,
                  container_statuses, event_line, format_table, images, is_ready, labels_of, live, metric_samples,
                  ns_path, openssl_cert, rfc3339_micro, snapshot, state_of, wait_for, warnings_of, ENABLED, STATE)
from webhook_process import free_port  # noqa: E402

# Scenario modules (tests/cluster/scenarios_*.py) import this file as `test_cluster`: one copy of it, not two.
if __name__ == "__main__":
    sys.modules.setdefault("test_cluster", sys.modules[__name__])

V1, V2 = "localhost/httpd-demo:v1", "localhost/httpd-demo:v2"
HOLDER = "localhost/inplace-pause:1"  # the sidecar's image: it never changes, so it must never restart
RELEASE, RELEASE_NS = "inplace-webhook", "inplace-webhook"
CONTROLLER_USER = "system:serviceaccount:%s:%s" % (RELEASE_NS, RELEASE)
FINALIZER = "lb.example.com/registered"
HANDLER_LABEL = "lb.example.com/registered"
SETTLE = 2.0  # seconds: long enough for a loop (or a controller) that was going to act wrongly to have done it
EVENT_WAIT = 10.0  # seconds: for an Event the loop creates after the write a scenario has just seen


class Suite:
    def __init__(self, env, source_dir, image, binary=None, certs=None):
        self.binary = binary  # the product binary on the host (the fault scenario runs its loop outside)
        self.uninstalls = []  # (start, end) of each uninstall of the release
        self.certs = certs
        self.env = env
        self.source = source_dir
        self.image = image  # localhost/inplace-webhook:VERSION
        self.api = Api(env, "admin")
        self.tools = Tools(env)
        self.audit = AuditLog(env)

    # --- the product ---------------------------------------------------------------------------------------
    def helm_values(self, extra=()):
        repo, tag = self.image.rsplit(":", 1)
        return ["--set", "image.repository=" + repo, "--set", "image.tag=" + tag,
                "--set", "image.pullPolicy=Never",
                "--set-json", 'server.extraArgs=["--loop-resync-period-ms=2000"]',
                "--set", "log.level=debug"] + list(extra)

    def install(self, extra=(), upgrade=False, loop=True):
        verb = ["upgrade", "--install"] if upgrade else ["install"]
        self.tools.helm(*(verb + [RELEASE, os.path.join(self.source, "charts", "inplace-webhook"),
                                  "-n", RELEASE_NS, "--create-namespace", "--wait", "--timeout", "120s"]
                                 + self.helm_values(extra)),
                        timeout=180)
        self.wait_webhook_ready(loop)

    def wait_webhook_ready(self, loop=True):
        # --wait saw the pods Ready; the Service must also have ready endpoints, and with the loop on, a
        # Ready pod holds the Lease.
        wait_for(lambda: any(all((e.get("conditions") or {}).get("ready") for e in sl.get("endpoints") or [])
                             and sl.get("endpoints") for sl in self.api.items(
                                 "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % RELEASE_NS,
                                 labelSelector="kubernetes.io/service-name=" + RELEASE)),
                 60, "the webhook Service's endpoints")
        # ... and kube-proxy must route its ClusterIP (a moment after the slice; until then the API server's call is
        # refused): a server-side dry run through the Deployment webhooks.
        probe = {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "webhook-probe", "namespace": "default", "labels": {ENABLED: "true"}},
                 "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "webhook-probe"}},
                          "template": {"metadata": {"labels": {"app": "webhook-probe", ENABLED: "true"}},
                                       "spec": {"containers": [{"name": "app", "image": V1}]}}}}

        def reached():
            p = self.tools.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe), check_rc=False)
            return p.returncode == 0 or "failed calling webhook" not in p.stderr
        wait_for(reached, 60, "the API server to reach the webhook")
        if loop:
            wait_for(lambda: self.lease_holder() in {p["metadata"]["name"] for p in self.controller_pods()
                                                     if is_ready(p)}, 60, "a Ready controller pod to hold the Lease")

    def webhook_pods(self):
        """The pods that serve admission (--role=webhook, no token)."""
        return live(self.api.items(ns_path(RELEASE_NS, "pods"), labelSelector="app.kubernetes.io/instance=%s,"
                                   "app.kubernetes.io/component=webhook" % RELEASE))

    def controller_pods(self):
        """The pods that run the loop (--role=controller; the Lease holder is one of them)."""
        return live(self.api.items(ns_path(RELEASE_NS, "pods"), labelSelector="app.kubernetes.io/instance=%s,"
                                   "app.kubernetes.io/component=controller" % RELEASE))

    def lease(self):
        return self.api.get_or_none(ns_path(RELEASE_NS, "leases", "inplace-webhook", group="coordination.k8s.io/v1"))

    def lease_identity(self):
        return ((self.lease() or {}).get("spec") or {}).get("holderIdentity")

    def lease_holder(self):
        """The webhook pod that holds the Lease (the identity is POD-NAME_random, as client-go's)."""
        holder = self.lease_identity()
        return holder.rsplit("_", 1)[0] if holder else None

    def webhook_logs(self, tail=60):
        out = []
        for p in self.webhook_pods() + self.controller_pods():
            r = self.tools.kubectl("logs", "-n", RELEASE_NS, p["metadata"]["name"], "--tail", str(tail),
                                   check_rc=False)
            out.append("--- %s:\n%s%s" % (p["metadata"]["name"], r.stdout, r.stderr))
        return "\n".join(out)


class App:
    """One Deployment in its own namespace; alice's kubectl changes it, admin reads it."""

    def __init__(self, suite, ns, name="web"):
        self.s = suite
        self.api = suite.api
        self.ns = ns
        self.name = name
        self.selector = "app=" + name

    def setup_namespace(self):
        # A namespace left by an earlier run on the same cluster goes first.
        self.s.tools.kubectl("delete", "namespace", self.ns, "--ignore-not-found", "--wait=true", timeout=180)
        self.s.tools.kubectl("create", "namespace", self.ns)
        self.s.tools.kubectl("create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", self.ns)

    def kubectl(self, *args, **kw):
        """kubectl as alice in the app's namespace; returns (stdout, admission warnings)."""
        p = self.s.tools.kubectl(*(list(args) + ["-n", self.ns]), user="alice", **kw)
        return p.stdout, warnings_of(p.stderr)

    # reads
    def deployment(self):
        return self.api.get(ns_path(self.ns, "deployments", self.name, group="apps/v1"))

    def pods(self):
        return sorted(live(self.api.items(ns_path(self.ns, "pods"), labelSelector=self.selector)),
                      key=lambda p: p["metadata"]["name"])

    def all_pods(self):
        return self.api.items(ns_path(self.ns, "pods"), labelSelector=self.selector)

    def replicasets(self):
        return sorted(self.api.items(ns_path(self.ns, "replicasets", group="apps/v1"), labelSelector=self.selector),
                      key=lambda r: r["metadata"]["name"])

    def rs_names(self):
        return [r["metadata"]["name"] for r in self.replicasets()]

    def events(self):
        return sorted(self.api.items(ns_path(self.ns, "events")),
                      key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                     int(e["metadata"].get("resourceVersion") or 0)))

    def events_with(self, reason, kind=None, name=None, wait=0):
        """The Events with this reason. The loop creates an Event after the write it reports, so a state just read
        back may not have its Event yet: up to `wait` seconds are given for the first one to appear."""
        deadline = time.time() + wait
        while True:
            found = [e for e in self.events() if e.get("reason") == reason
                     and (kind is None or e["involvedObject"].get("kind") == kind)
                     and (name is None or e["involvedObject"].get("name") == name)]
            if found or time.time() >= deadline:
                return found
            time.sleep(0.2)

    def count_events(self, reason, kind=None, name=None, wait=0):
        return sum(int(e.get("count") or 1) for e in self.events_with(reason, kind, name, wait))

    # states
    def rollout_complete(self):
        """What `kubectl rollout status` waits for, plus every pod Running and Ready."""
        d = self.deployment()
        st = d.get("status") or {}
        want = d["spec"]["replicas"]
        pods = self.pods()
        return (st.get("observedGeneration") == d["metadata"]["generation"]
                and st.get("updatedReplicas") == want and st.get("replicas") == want
                and st.get("availableReplicas") == want and len(pods) == want
                and all(p["status"].get("phase") == "Running" and is_ready(p) for p in pods))

    def in_place_done(self):
        d = self.deployment()
        if IN_PROGRESS in annotations_of(d):
            return False
        pods = self.pods()
        return len(pods) == d["spec"]["replicas"] and all(state_of(p) == "Normal" and is_ready(p) for p in pods)

    def create(self, obj, timeout=90):
        self.setup_namespace()
        self.kubectl("apply", "-f", "-", stdin=json.dumps(obj))
        wait_for(self.rollout_complete, timeout, "the initial rollout of %s/%s" % (self.ns, self.name), self)
        return self.pods()

    # hook handler (an LB controller, as admin)
    def _patch_metadata(self, pod_name, change, what):
        """Merge-patches the pod's metadata with change(pod) (None: already as wanted), with a resourceVersion
        precondition, re-reading on conflict."""
        path = ns_path(self.ns, "pods", pod_name)
        for _ in range(50):
            pod = self.api.get(path)
            metadata = change(pod)
            if metadata is None:
                return
            try:
                self.api.merge_patch(path, {"metadata": dict(metadata,
                                                             resourceVersion=pod["metadata"]["resourceVersion"])})
                return
            except ApiError as e:
                if e.code != 409:
                    raise
        raise Failure("could not change the %s of %s" % (what, pod_name))

    def set_finalizer(self, pod_name, present):
        def change(pod):
            fins = list(pod["metadata"].get("finalizers") or [])
            if (FINALIZER in fins) == present:
                return None
            return {"finalizers": fins + [FINALIZER] if present else [f for f in fins if f != FINALIZER]}
        self._patch_metadata(pod_name, change, "finalizer")

    def set_label(self, pod_name, value):
        self._patch_metadata(pod_name, lambda pod: None if labels_of(pod).get(HANDLER_LABEL) == value
                             else {"labels": {HANDLER_LABEL: value}}, "handler label")

    # diagnostics
    def pod_table(self, pods=None):
        pods = self.all_pods() if pods is None else pods
        rows = [("NAME", "UID", "IP", "READY", "STATUS", "RESTARTS", "IMAGES (spec | status)", "STATE", "FINALIZERS")]
        for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
            cs = container_statuses(p)
            rows.append((p["metadata"]["name"], p["metadata"]["uid"][:8], (p.get("status") or {}).get("podIP"),
                         "%d/%d%s" % (sum(1 for c in cs.values() if c.get("ready")), len(p["spec"]["containers"]),
                                      "" if is_ready(p) else " NotReady"),
                         (p.get("status") or {}).get("phase", "?") + (" deleting" if p["metadata"].get(
                             "deletionTimestamp") else ""),
                         ",".join("%s=%d" % (n, s.get("restartCount", 0)) for n, s in sorted(cs.items())),
                         ",".join("%s=%s|%s" % (n, i, (cs.get(n) or {}).get("image", "-"))
                                  for n, i in sorted(images(p).items())),
                         state_of(p), ",".join(p["metadata"].get("finalizers") or []) or "-"))
        return format_table(rows)

    def describe(self):
        out = []
        try:
            d = self.deployment()
            out.append("Deployment %s/%s: generation=%s paused=%s annotations=%s\n  status=%s" % (
                self.ns, self.name, d["metadata"].get("generation"), d["spec"].get("paused", False),
                json.dumps(annotations_of(d), sort_keys=True), json.dumps(d.get("status"), sort_keys=True)))
            out.append("  template images=%s labels=%s" % (images(d), d["spec"]["template"]["metadata"].get("labels")))
            for rs in self.replicasets():
                out.append("ReplicaSet %s: replicas=%s/%s images=%s" % (
                    rs["metadata"]["name"], (rs.get("status") or {}).get("replicas"), rs["spec"].get("replicas"),
                    images(rs)))
            out.append("Pods:\n" + self.pod_table())
            out.append("Events:\n" + "\n".join("  " + event_line(e) for e in self.events()))
        except Exception as e:  # noqa: BLE001 - diagnostics must not fail
            out.append("(diagnostics failed: %s)" % e)
        return "\n".join(out)


def deployment(name, replicas=3, image=V1, lifecycle=None, policy=None, gate=False, max_unavailable=None,
               max_surge=None, paused=False, stop_delay=0):
    """An opted-in Deployment: the httpd-demo `app` container with a readiness probe the kubelet runs, and a
    `sidecar` whose image never changes (to show the kubelet restarts only the changed container)."""
    labels = {"app": name, ENABLED: "true", "version": "v1"}
    app = {"name": "app", "image": image, "ports": [{"containerPort": 8080}],
           "env": [{"name": "STOP_DELAY_SECONDS", "value": str(stop_delay)}],
           "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1,
                              "failureThreshold": 1}}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels},
                         "spec": {"terminationGracePeriodSeconds": 10 + stop_delay,
                                  "containers": [app, {"name": "sidecar", "image": HOLDER}]}}}
    if gate:
        spec["template"]["spec"]["readinessGates"] = [{"conditionType": READY_GATE}]
    if max_unavailable is not None or max_surge is not None:
        ru = {}
        if max_unavailable is not None:
            ru["maxUnavailable"] = max_unavailable
        if max_surge is not None:
            ru["maxSurge"] = max_surge
        spec["strategy"] = {"type": "RollingUpdate", "rollingUpdate": ru}
    if paused:
        spec["paused"] = True
    annotations = {}
    if lifecycle is not None:
        annotations[LIFECYCLE] = json.dumps(lifecycle)
    if policy is not None:
        annotations[POLICY] = json.dumps(policy)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name, ENABLED: "true"}, "annotations": annotations},
            "spec": spec}


# ---------------------------------------------------------------------------------------------
# Shared checks


def expect_warning(warnings, text):
    check(any(text in w for w in warnings), "kubectl printed no warning containing %r; got %s" % (text, warnings))


def expect_in_progress(app, paused_by_us=True):
    d = app.deployment()
    rec = annotations_of(d).get(IN_PROGRESS)
    check(rec is not None, "the webhook did not record in-progress")
    check(d["spec"].get("paused") is True, "the webhook did not pause the Deployment")
    check(json.loads(rec).get("pausedByUs") is paused_by_us, "in-progress pausedByUs: %s" % rec)


def finish(app, before, rs_before, restarted, paused=False, timeout=90):
    """Waits for the in-place update to end and checks what the real components report: the Deployment
    controller's status, the same ReplicaSets, and per pod the same UID, IP and node, the images, and from the
    kubelet a new containerID and restartCount +1 for exactly the containers in `restarted`."""
    wait_for(app.in_place_done, timeout, "the in-place update of %s/%s to finish" % (app.ns, app.name), app)
    time.sleep(SETTLE)  # a late mistake (a new ReplicaSet, a re-pause, a restart) shows up now
    d = app.deployment()
    ann = annotations_of(d)
    check(IN_PROGRESS not in ann and ABORT not in ann, "bookkeeping left on the Deployment: %s" % ann)
    check(bool(d["spec"].get("paused")) == paused, "Deployment paused=%s, expected %s" % (d["spec"].get("paused"),
                                                                                         paused))
    d = wait_for(lambda: (lambda d: d if (d.get("status") or {}).get("observedGeneration")
                          == d["metadata"]["generation"] else None)(app.deployment()),
                 20, "the Deployment controller to observe it", app)
    st = d["status"]
    want = d["spec"]["replicas"]
    check(st.get("updatedReplicas") == want == st.get("replicas") == st.get("availableReplicas")
          == st.get("readyReplicas"), "Deployment status as the controller wrote it: %s" % st)
    if not paused:
        check(condition(d, "Progressing", "reason") == "NewReplicaSetAvailable",
              "Progressing condition: %s" % condition(d, "Progressing", "reason"))
    # The pods' ReplicaSet (one of those before) holds the template now; a ReplicaSet added since has no replicas
    # (the history of a template the pods left, one per in-place update); a native rollout would have made one with
    # replicas instead.
    rss = app.replicasets()
    added = [r for r in rss if r["metadata"]["name"] not in rs_before]
    check(all(not r["spec"].get("replicas") for r in added),
          "ReplicaSets changed: %s, before %s (a native rollout ran)" % (app.rs_names(), rs_before))
    active = [r for r in rss if r["spec"].get("replicas")]
    check(len(active) == 1 and images(active[0]) == images(d) and active[0]["metadata"]["name"] in rs_before,
          "the active ReplicaSet's template: %s vs %s" % ([(r["metadata"]["name"], images(r)) for r in active],
                                                          images(d)))
    check(max(revision(r) for r in rss) == revision(active[0]) and revision(active[0]) == revision(d),
          "the active ReplicaSet has revision %s, the Deployment %s, the newest is %s"
          % (revision(active[0]), revision(d), max(revision(r) for r in rss)))
    check(all(p["metadata"]["ownerReferences"][0]["uid"] == active[0]["metadata"]["uid"] for p in app.pods()),
          "the pods' owner is not the active ReplicaSet")
    pods = app.pods()
    after = snapshot(pods)
    check(sorted(after) == sorted(before), "pod names changed: %s -> %s" % (sorted(before), sorted(after)))
    want_images = images(d)
    want_labels = d["spec"]["template"]["metadata"]["labels"]
    for p in pods:
        name = p["metadata"]["name"]
        a, b = after[name], before[name]
        for k in ("uid", "ip", "node"):
            check(a[k] == b[k], "pod %s: %s %s -> %s (it was recreated or moved)" % (name, k, b[k], a[k]))
        check(images(p) == want_images, "pod %s runs %s, the template says %s" % (name, images(p), want_images))
        for k, v in want_labels.items():
            check(labels_of(p).get(k) == v, "pod %s label %s=%s, template %s" % (name, k, labels_of(p).get(k), v))
        cs = container_statuses(p)
        for c, (cid, restarts) in a["containers"].items():
            old_cid, old_restarts = b["containers"][c]
            if c in restarted:
                check(cid != old_cid and restarts == old_restarts + 1,
                      "pod %s container %s: containerID %s -> %s, restartCount %d -> %d; expected one restart"
                      % (name, c, old_cid, cid, old_restarts, restarts))
            else:
                check(cid == old_cid and restarts == old_restarts,
                      "pod %s container %s restarted (containerID %s -> %s, restartCount %d -> %d)"
                      % (name, c, old_cid, cid, old_restarts, restarts))
            check(cs[c].get("ready") and "running" in (cs[c].get("state") or {}),
                  "pod %s container %s not running and ready: %s" % (name, c, cs[c].get("state")))
    return app.deployment(), pods


def revision(obj):
    """deployment.kubernetes.io/revision of a Deployment or ReplicaSet, as a number (0 when absent)."""
    return int(annotations_of(obj).get("deployment.kubernetes.io/revision") or 0)


def pod_image_writes(suite, app, image, since):
    """The loop's writes of `image` to pods of the app (from the API server's audit log), per pod."""
    out = {}
    for e in suite.audit.writes(since, user=CONTROLLER_USER, ns=app.ns, resource="pods", subresource=""):
        if image in json.dumps(e.get("requestObject") or {}) and (e.get("responseStatus") or {}).get("code", 0) < 300:
            out.setdefault(e["objectRef"]["name"], []).append(e)
    return out


def writers(suite, ns, since, until=None):
    """The loop instances (from the User-Agent's identity) that wrote pods of `ns` in the window."""
    out = set()
    for e in suite.audit.writes(since, user=CONTROLLER_USER, ns=ns, resource="pods"):
        if until is None or e["_time"] <= until:
            out.add(e.get("userAgent", "").rpartition("(")[2].rstrip(")").rsplit("_", 1)[0])
    return out


def hold_one_pod(app, release):
    """Releases the first pod that reaches PreparingUpdate, lets it finish, and returns (updated, held) once a
    second pod waits in PreparingUpdate."""
    first = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    release(first)
    wait_for(lambda: any(p["metadata"]["name"] == first and state_of(p) == "Normal" and images(p)["app"] == V2
                         and is_ready(p) for p in app.pods()), 40, "pod %s updated" % first, app)
    held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                    "a second pod in PreparingUpdate", app)["metadata"]["name"]
    return first, held


def create_label_hooked(app, replicas=3):
    """An opted-in Deployment with a label as pre-update hook, every pod registered by the LB controller."""
    app.create(deployment("web", replicas=replicas, lifecycle={"preUpdate": {"labelsHandler": {HANDLER_LABEL: "true"}}}))
    for p in app.pods():
        app.set_label(p["metadata"]["name"], "true")


def release_until_done(app, release, timeout, after):
    """Plays the hook handler until the in-place update is done: release(pod) for every pod, every 0.1 s."""
    deadline = time.time() + timeout
    while not app.in_place_done():
        check(time.time() < deadline, "the update did not finish %s" % after)
        for p in app.pods():
            release(p)
        time.sleep(0.1)


def play_hooks(app, names, armed, release, rearm, hold, timeout, each_round=None, tick=0.05):
    """Plays the LB controller of a pre- and post-update hook until the in-place update of `names` is done: a pod
    waiting in PreparingUpdate with its hook armed(pod) is released (release(pod)) after `hold` s, one waiting in
    Updated with it disarmed is re-armed (rearm(pod)) after `hold` s. each_round(pods, track) runs first on every
    round's pods. Checks that no pod returned to Normal before its post-update hook was met and that every pod went
    through both hooks; returns {pod: {"preparing", "released", "updated", "rearmed": time}}."""
    track = {n: {} for n in names}
    deadline = time.time() + timeout
    while not app.in_place_done():
        check(time.time() < deadline, "the update did not finish in %d s" % timeout)
        now, pods = time.time(), app.pods()
        if each_round:
            each_round(pods, track)
        for p in pods:
            name, st, on = p["metadata"]["name"], state_of(p), armed(p)
            r = track[name]
            if st == "PreparingUpdate" and on and "released" not in r:
                r.setdefault("preparing", now)
                if now - r["preparing"] >= hold:
                    release(p)
                    r["released"] = time.time()
            if st == "Updated" and not on and "rearmed" not in r:
                r.setdefault("updated", now)
                if now - r["updated"] >= hold:
                    rearm(p)
                    r["rearmed"] = time.time()
            if "released" in r and st == "Normal":
                check("rearmed" in r, "pod %s returned to Normal before its post-update hook was met" % name)
        time.sleep(tick)
    for name, r in track.items():
        check({"preparing", "released", "updated", "rearmed"} <= set(r), "pod %s skipped a hook: %s" % (name, sorted(r)))
    return track


# ---------------------------------------------------------------------------------------------
# Scenarios


def apiserver_webhook_calls(s):
    """kube-apiserver's own count of admission webhook calls, {(webhook name, type, code): count}."""
    out = {}
    text = s.tools.kubectl("get", "--raw", "/metrics").stdout
    for labels, value in metric_samples(text, "apiserver_admission_webhook_request_total"):
        key = (labels.get("name"), labels.get("type"), labels.get("code"))
        out[key] = out.get(key, 0) + value
    return out


def c00_installed_as_a_user_installs_it(s):
    """helm install put the webhook pods on the real node from the local image; kube-apiserver calls them through
    the chart's Service; one replica holds the Lease; the loop's identity has exactly the chart's RBAC."""
    pods = s.webhook_pods()
    check(len(pods) == 2 and all(is_ready(p) for p in pods), "two Ready webhook pods: %s" % len(pods))
    digest = None
    for line in s.tools.ctr("images", "ls").splitlines():
        f = line.split()
        if f and f[0] == s.image:
            digest = f[2]
    check(digest, "containerd has no image %s" % s.image)
    # containerd reports the image's config digest as imageID when the image has no repo digest (an imported one).
    config = json.loads(s.tools.ctr("content", "get", digest))["config"]["digest"]
    for p in pods:
        cs = container_statuses(p)["webhook"]
        check(p["spec"]["nodeName"] == "inplace-node" and cs["image"] == s.image,
              "pod %s on %s runs %s" % (p["metadata"]["name"], p["spec"]["nodeName"], cs["image"]))
        check(cs.get("imageID", "").endswith((digest, config)), "pod %s imageID %s, containerd's %s is %s (config %s)"
              % (p["metadata"]["name"], cs.get("imageID"), s.image, digest, config))
        check(p["spec"]["securityContext"].get("runAsNonRoot") and cs.get("restartCount") == 0,
              "pod %s: runAsNonRoot, no restart" % p["metadata"]["name"])
    controllers = s.controller_pods()
    check(len(controllers) == 2 and all(is_ready(p) for p in controllers), "two Ready controller pods: %s"
          % len(controllers))
    check(s.lease_holder() in {p["metadata"]["name"] for p in controllers}, "the Lease holder is not a controller pod")
    # kube-apiserver calls the webhooks through the Service: an opted-in Deployment and its pod go through them.
    before = apiserver_webhook_calls(s)
    app = App(s, "c00")
    app.create(deployment("web", replicas=1))
    after = apiserver_webhook_calls(s)
    for name, kind in (("validate-deployments.inplace-webhook.io", "validating"),
                       ("mutate-pods.inplace-webhook.io", "admit")):
        key = (name, kind, "200")
        check(after.get(key, 0) > before.get(key, 0), "kube-apiserver made no successful call to %s: %s"
              % (name, {k: v for k, v in after.items() if k[0] == name}))
    # Exactly the chart's RBAC: what the loop needs is allowed, nothing else.
    sa = "--as=" + CONTROLLER_USER

    def can(*args):
        return s.tools.kubectl("auth", "can-i", sa, *args, check_rc=False).stdout.strip() == "yes"
    allowed = [("patch", "pods", "-A"), ("watch", "pods", "-A"), ("patch", "pods/status", "-A"),
               ("patch", "deployments.apps", "-A"), ("list", "replicasets.apps", "-A"),
               ("patch", "replicasets.apps", "-A"), ("create", "replicasets.apps", "-A"),
               ("delete", "replicasets.apps", "-A"), ("patch", "deployments.apps", "--subresource=status", "-A"),
               ("create", "events", "-A"), ("update", "leases.coordination.k8s.io/inplace-webhook", "-n", RELEASE_NS),
               ("create", "leases.coordination.k8s.io", "-n", RELEASE_NS)]
    denied = [("create", "pods", "-A"), ("delete", "pods", "-A"), ("update", "pods", "-A"), ("get", "secrets", "-A"),
              ("update", "deployments.apps", "-A"), ("delete", "deployments.apps", "-A"),
              ("update", "replicasets.apps", "-A"), ("patch", "nodes"), ("update", "leases.coordination.k8s.io",
                                                                         "-n", "kube-system"),
              ("update", "leases.coordination.k8s.io/someone-else", "-n", RELEASE_NS),
              ("create", "pods/eviction", "-A"), ("*", "*", "-A")]
    wrong = [a for a in allowed if not can(*a)] + [("not denied",) + d for d in denied if can(*d)]
    check(not wrong, "the loop's RBAC differs from the chart's: %s" % wrong)
    bindings = json.loads(s.tools.kubectl("get", "clusterrolebindings,rolebindings", "-A", "-o", "json").stdout)
    mine = [b["metadata"]["name"] + "->" + b["roleRef"]["name"] for b in bindings["items"]
            for subj in b.get("subjects") or [] if subj.get("kind") == "ServiceAccount"
            and subj.get("name") == RELEASE and subj.get("namespace") == RELEASE_NS]
    check(sorted(mine) == sorted(["inplace-webhook->inplace-webhook",
                                  "inplace-webhook-leader-election->inplace-webhook-leader-election"]),
          "bindings of the loop's ServiceAccount: %s" % mine)


def c01_image_then_labels(s):
    """kubectl set image, then kubectl label of the template, on 3 replicas: in place on the real kubelet."""
    app = App(s, "c01")
    before = snapshot(app.create(deployment("web", replicas=3)))
    rs0 = app.rs_names()
    check(len(rs0) == 1, "one ReplicaSet after creation: %s" % rs0)
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V2)
    expect_warning(warnings, "in-place update: 3 pods will be updated")
    expect_in_progress(app)
    finish(app, before, rs0, restarted={"app"})
    for p in app.pods():
        cs = container_statuses(p)["app"]
        check(cs["image"] == V2, "the kubelet reports image %s for %s" % (cs["image"], p["metadata"]["name"]))
        check(cs.get("imageID", "").startswith("sha256:") or "@sha256:" in cs.get("imageID", ""),
              "imageID %s" % cs.get("imageID"))
    check(app.count_events("InPlaceUpdateStarted", "Deployment") == 1, "one InPlaceUpdateStarted Event")
    check(app.count_events("InPlaceUpdateCompleted", "Deployment", wait=EVENT_WAIT) == 1,
          "one InPlaceUpdateCompleted Event")
    # Progress is told on the Deployment (one Event with each report of progress, at most every 2 s); a pod's
    # ordinary steps make no Event of ours (its own Events are the kubelet's: Killing, Pulled, Started).
    progress = [e["message"] for e in app.events_with("InPlaceUpdateProgressing", "Deployment")]
    check(progress and all(re.match(r"in-place update: [0-3]/3 pods updated to template ", m) for m in progress),
          "progress Events on the Deployment: %s" % progress)
    ours = [(e["reason"], e["involvedObject"]["name"]) for e in app.events()
            if (e.get("source") or {}).get("component") == "inplace-webhook" and e["involvedObject"]["kind"] == "Pod"]
    check(not ours, "Events of ours on pods of an update that nothing held: %s" % ours)
    for p in app.pods():
        check(app.count_events("Killing", "Pod", p["metadata"]["name"]) >= 1,
              "the kubelet reported no Killing of the old container of %s" % p["metadata"]["name"])

    before = snapshot(app.pods())
    _, warnings = app.kubectl("patch", "deploy/web", "--type", "merge", "-p",
                              json.dumps({"spec": {"template": {"metadata": {"labels": {"version": "v2",
                                                                                          "tier": "frontend"}}}}}))
    expect_warning(warnings, "in-place update: 3 pods will be updated")
    finish(app, before, rs0, restarted=set())
    # The Service-facing view: the new labels select the same pods.
    out, _ = app.kubectl("get", "pods", "-l", "tier=frontend,version=v2", "-o", "name")
    check(len(out.split()) == 3, "pods selected by the new labels: %s" % out)


def c02_pre_and_post_hooks(s):
    """A finalizer as pre- and post-update hook, held by the test as an LB controller would."""
    app = App(s, "c02")
    hooks = {"preUpdate": {"finalizersHandler": [FINALIZER]}, "postUpdate": {"finalizersHandler": [FINALIZER]}}
    app.create(deployment("web", replicas=3, lifecycle=hooks))
    for p in app.pods():
        app.set_finalizer(p["metadata"]["name"], True)
    before, rs0 = snapshot(app.pods()), app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    expect_in_progress(app)
    armed = lambda p: FINALIZER in (p["metadata"].get("finalizers") or [])  # noqa: E731

    def before_release(pods, track):
        for p in pods:
            name = p["metadata"]["name"]
            if "released" not in track[name]:
                check(state_of(p) in ("Normal", "PreparingUpdate") and images(p)["app"] == V1
                      and container_statuses(p)["app"]["restartCount"] == before[name]["containers"]["app"][1],
                      "pod %s is %s with image %s before its pre-update hook was released"
                      % (name, state_of(p), images(p)))

    play_hooks(app, before, armed, lambda p: app.set_finalizer(p["metadata"]["name"], False),
               lambda p: app.set_finalizer(p["metadata"]["name"], True), hold=1.0, timeout=120,
               each_round=before_release)
    finish(app, before, rs0, restarted={"app"})
    for p in app.pods():
        check(FINALIZER in p["metadata"].get("finalizers", []), "pod %s lost its finalizer" % p["metadata"]["name"])
        app.set_finalizer(p["metadata"]["name"], False)  # so that the namespace can go


def c03_mark_not_ready_grace(s):
    """markPodNotReady + gracePeriodSeconds through the readiness gate: out of Ready for the grace period."""
    grace = 2
    app = App(s, "c03")
    pods = app.create(deployment("web", replicas=2, gate=True, lifecycle={"preUpdate": {"markPodNotReady": True}},
                                 policy={"gracePeriodSeconds": grace}))
    for p in pods:
        check(condition(p, READY_GATE) == "True", "the gate is not True on new pod %s" % p["metadata"]["name"])
    before, rs0 = snapshot(pods), app.rs_names()
    with PodSampler(app.all_pods) as sampler:
        app.kubectl("set", "image", "deploy/web", "app=" + V2)
        finish(app, before, rs0, restarted={"app"})
    for name, (timeline, gate_false, written) in drain_timelines(sampler, before, V2, grace).items():
        last = timeline[-1][1]
        check(is_ready(last) and condition(last, READY_GATE) == "True", "pod %s not Ready again" % name)
        # The drain's gate write carries its send time to the millisecond, in the gate's whole second; the
        # gate's return to True removes it.
        for _, p in timeline:
            if condition(p, READY_GATE) != "False":
                continue
            sent = annotations_of(p).get(GATE_SENT) or ""
            ltt = condition(p, READY_GATE, "lastTransitionTime")
            check(len(sent) == 24 and sent[:19] + "Z" == ltt, "pod %s: gate False since %s with %s=%r"
                  % (name, ltt, GATE_SENT, sent))
        check(GATE_SENT not in annotations_of(last), "pod %s keeps %s after the update" % (name, GATE_SENT))


def drain_timelines(sampler, names, image, grace):
    """Per pod of `names`, from a PodSampler's samples: (its timeline [(time, pod)], when its gate went False, when
    its spec first had `image` for container app), both as the sample times that first showed them. Checks both
    happened and that the pod write can have come no sooner than `grace` seconds after the gate went False: a LIST
    shows the pod as it was at some moment between its request and its answer, so the gate went False after the
    request of the last sample that showed it True, and the write came before the answer of the first sample that
    showed it; a loaded machine widens that window, never turns a correct drain into a failure."""
    out = {}
    for name in names:
        timeline = [(t, p, sent) for (t, ps), sent in zip(sampler.samples, sampler.started)
                    for p in ps if p["metadata"]["name"] == name]
        first_false = next((i for i, (_, p, _) in enumerate(timeline) if condition(p, READY_GATE) == "False"), None)
        first_new = next((i for i, (_, p, _) in enumerate(timeline) if images(p)["app"] == image), None)
        check(first_false is not None and first_new is not None, "pod %s: gate never False or never updated" % name)
        gate_false, written = timeline[first_false][0], timeline[first_new][0]
        gate_after = timeline[max(first_false - 1, 0)][2]
        check(written - gate_after >= grace,
              "pod %s written at most %.2f s after its gate went False (grace %d; first seen %.2f s apart)"
              % (name, written - gate_after, grace, written - gate_false))
        out[name] = ([(t, p) for t, p, _ in timeline], gate_false, written)
    return out


def c04_max_unavailable(s):
    """maxUnavailable 40% of 5 (= 2) held at every sampled instant, and used."""
    app = App(s, "c04")
    replicas, budget = 5, 2
    before = snapshot(app.create(deployment("web", replicas=replicas, max_unavailable="40%", max_surge=1,
                                            stop_delay=2)))
    rs0 = app.rs_names()
    with PodSampler(app.all_pods) as sampler:
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V2)
        finish(app, before, rs0, restarted={"app"})
    worst, worst_at = 0, None
    for _, pods in sampler.samples:
        ok = [p for p in pods if state_of(p) == "Normal" and is_ready(p) and not p["metadata"].get("deletionTimestamp")]
        if replicas - len(ok) > worst:
            worst, worst_at = replicas - len(ok), pods
    check(len(sampler.samples) > 20, "too few samples")
    check(worst <= budget, "%d pods unavailable at once, budget %d:\n%s" % (worst, budget,
                                                                            app.pod_table(worst_at or [])))
    check(worst == budget, "at most %d pods were updated at once; the budget of %d was not used" % (worst, budget))


def c05_hook_timeout(s):
    """A pre-update hook never released: HookTimeout once, the pod waits, nothing is deleted; then released."""
    app = App(s, "c05")
    app.create(deployment("web", replicas=3,
                          lifecycle={"preUpdate": {"finalizersHandler": [FINALIZER], "timeoutSeconds": 2}}))
    for p in app.pods():
        app.set_finalizer(p["metadata"]["name"], True)
    before, rs0 = snapshot(app.pods()), app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    stuck = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                     "a pod in PreparingUpdate", app)["metadata"]["name"]
    wait_for(lambda: app.events_with("HookTimeout", "Pod", stuck) and app.events_with("HookTimeout", "Deployment"),
             20, "HookTimeout Events on the pod and the Deployment", app)
    entered = rfc3339_micro(annotations_of(s.api.get(ns_path(app.ns, "pods", stuck)))[STATE_TIMESTAMP])
    reported = rfc3339_micro(app.events_with("HookTimeout", "Pod", stuck)[0]["firstTimestamp"])
    check(reported - entered >= 2, "HookTimeout %d s after PreparingUpdate; timeoutSeconds is 2" % (reported - entered))
    time.sleep(SETTLE)
    for p in app.pods():
        name = p["metadata"]["name"]
        check(p["metadata"]["uid"] == before[name]["uid"] and images(p)["app"] == V1,
              "pod %s was recreated or updated while its hook was held" % name)
        check(state_of(p) == ("PreparingUpdate" if name == stuck else "Normal"), "pod %s is %s" % (name, state_of(p)))
    check(app.count_events("HookTimeout", "Pod", stuck) == 1, "HookTimeout reported more than once")
    check(stuck in app.events_with("HookTimeout", "Deployment")[0]["message"], "the Deployment's Event names no pod")
    release_until_done(app, lambda p: state_of(p) == "PreparingUpdate" and FINALIZER in (
        p["metadata"].get("finalizers") or []) and app.set_finalizer(p["metadata"]["name"], False), 90,
        "after the hooks were released")
    finish(app, before, rs0, restarted={"app"})


def kill_loop_process(s, pod_name):
    """SIGKILLs the controller container's process of `pod_name` on the node, through containerd (as the OOM
    killer or a node problem would); the kubelet restarts the container."""
    pod = s.api.get(ns_path(RELEASE_NS, "pods", pod_name))
    cid = container_statuses(pod)["controller"]["containerID"].split("://", 1)[1]
    s.tools.ctr("tasks", "kill", "--signal", "SIGKILL", cid)
    return container_statuses(pod)["controller"]["restartCount"]


def c06_killed_mid_update(s):
    """The leader's process SIGKILLed while a pod waits in Updating: the Lease changes hands only after it
    expired, nobody writes meanwhile, and every pod is written exactly once."""
    app = App(s, "c06")
    before = snapshot(app.create(deployment("web", replicas=3, stop_delay=4)))
    rs0 = app.rs_names()
    t0 = time.time()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    pod = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "Updating"), None), 40,
                   "a pod in Updating", app)["metadata"]["name"]
    leader, identity = s.lease_holder(), s.lease_identity()
    restarts = kill_loop_process(s, leader)
    t_kill = time.time()
    check(state_of(s.api.get(ns_path(app.ns, "pods", pod))) == "Updating", "pod %s left Updating" % pod)
    # No release from a killed process: the next holder (the standby, or the restarted container under a new
    # identity) takes the Lease only once it has expired (15 s after the last renewal), and nobody writes pods
    # meanwhile.
    wait_for(lambda: s.lease_identity() not in (None, identity), 40, "another identity to take the Lease")
    t_take = time.time()
    check(t_take - t_kill >= 10, "the Lease was taken %.1f s after the kill, before it expired" % (t_take - t_kill))
    check(not writers(s, app.ns, t_kill + 0.5, t_take - 0.5), "pods were written while nobody led: %s"
          % writers(s, app.ns, t_kill + 0.5, t_take - 0.5))
    finish(app, before, rs0, restarted={"app"}, timeout=120)
    writes = pod_image_writes(s, app, V2, t0)
    for name in before:
        check(len(writes.get(name, [])) == 1, "pod %s got %d image writes, expected 1" % (name,
                                                                                      len(writes.get(name, []))))
    check(app.count_events("InPlaceUpdateCompleted", "Deployment", wait=EVENT_WAIT) == 1,
          "one InPlaceUpdateCompleted")
    wait_for(lambda: container_statuses(s.api.get(ns_path(RELEASE_NS, "pods", leader)))["controller"]
             .get("restartCount", 0) == restarts + 1, 60, "the kubelet to restart the killed controller container")
    s.wait_webhook_ready()


def c07_leader_handover(s):
    """Two replicas: only the Lease holder writes pods; deleting it (SIGTERM) hands over within seconds."""
    app = App(s, "c07")
    before = snapshot(app.create(deployment("web", replicas=3, stop_delay=3)))
    rs0 = app.rs_names()
    leader = s.lease_holder()
    check(len(s.controller_pods()) == 2, "two controller replicas expected")
    t0 = time.time()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    wait_for(lambda: any(images(p)["app"] == V2 and state_of(p) == "Normal" and is_ready(p) for p in app.pods())
             and any(state_of(p) == "Updating" for p in app.pods()), 60, "one pod done and one updating", app)
    t_stop = time.time()
    s.tools.kubectl("delete", "pod", "-n", RELEASE_NS, leader, "--wait=false")
    new = wait_for(lambda: (lambda h: h if h and h != leader else None)(s.lease_holder()), 30,
                   "another replica to take the Lease")
    t_take = time.time()
    # The standby, or the replacement pod the ReplicaSet started, whichever retried first.
    check(new != leader, "the Lease stayed with %s" % leader)
    check(t_take - t_stop < 15, "takeover took %.1f s after SIGTERM (the Lease was not released)" % (t_take - t_stop))
    finish(app, before, rs0, restarted={"app"}, timeout=120)
    check(writers(s, app.ns, t0, t_stop) <= {leader}, "pods written by %s while %s led"
          % (writers(s, app.ns, t0, t_stop), leader))
    check(writers(s, app.ns, t_take + 0.5) <= {new}, "pods written by %s after %s took over"
          % (writers(s, app.ns, t_take + 0.5), new))
    by = {(e.get("reportingInstance") or "").rsplit("_", 1)[0]
          for e in app.events_with("InPlaceUpdateCompleted", "Deployment")}
    check(by == {new}, "InPlaceUpdateCompleted reported by %s" % by)
    s.wait_webhook_ready()


def c08_abort(s):
    """abort with one pod updated and one held in a hook: the update is handed back, the native rollout runs."""
    app = App(s, "c08")
    create_label_hooked(app)
    original = snapshot(app.pods())
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    updated, held = hold_one_pod(app, lambda n: app.set_label(n, None))
    app.kubectl("annotate", "deploy/web", ABORT + "=true")
    wait_for(lambda: IN_PROGRESS not in annotations_of(app.deployment()), 20, "the loop to abort", app)
    d = app.deployment()
    check(not d["spec"].get("paused") and ABORT not in annotations_of(d), "not handed back: %s" % annotations_of(d))
    check(app.events_with("InPlaceUpdateAborted", "Deployment", wait=EVENT_WAIT), "no InPlaceUpdateAborted Event")
    wait_for(lambda: app.rollout_complete() and len(app.rs_names()) == 2, 120, "the native rollout", app)
    pods = app.pods()
    check(all(p["metadata"]["uid"] not in {o["uid"] for o in original.values()} for p in pods),
          "the native rollout kept old pods")
    check(all(images(p)["app"] == V2 and state_of(p) == "Normal" for p in pods), "new pods are not right")
    check(app.count_events("InPlaceUpdateStarted", "Deployment") == 1, "the in-place update restarted")


def c09_non_eligible_mid_update(s):
    """kubectl set env while an in-place update is held in a hook: the native rollout finishes it."""
    app = App(s, "c09")
    create_label_hooked(app)
    rs0 = app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    hold_one_pod(app, lambda n: app.set_label(n, None))
    app.kubectl("set", "env", "deploy/web", "-c", "app", "MODE=blue")
    d = app.deployment()
    check(not d["spec"].get("paused") and IN_PROGRESS not in annotations_of(d), "still paused/in progress: %s"
          % annotations_of(d))
    wait_for(lambda: app.rollout_complete() and len(app.rs_names()) == 2, 120, "the native rollout", app)
    time.sleep(SETTLE)
    check(len(set(app.rs_names()) - set(rs0)) == 1, "expected one new ReplicaSet")
    for p in app.pods():
        env = {e["name"]: e.get("value") for e in p["spec"]["containers"][0].get("env") or []}
        check(env.get("MODE") == "blue" and images(p)["app"] == V2 and state_of(p) == "Normal",
              "pod %s: env %s image %s state %s" % (p["metadata"]["name"], env, images(p)["app"], state_of(p)))
    out, _ = app.kubectl("rollout", "status", "deploy/web", "--timeout=10s")
    check("successfully rolled out" in out, "kubectl rollout status: %s" % out)


def c10_user_pause_kept(s):
    """kubectl rollout pause, then an eligible change: no pod is touched while the user's pause holds; kubectl
    rollout resume runs it in place, and the Deployment unpauses when it is done (DESIGN.md §8.5)."""
    app = App(s, "c10")
    before = snapshot(app.create(deployment("web", replicas=3)))
    rs0 = app.rs_names()
    app.kubectl("rollout", "pause", "deploy/web")
    wait_for(lambda: app.deployment()["status"].get("observedGeneration") == app.deployment()["metadata"]["generation"],
             20, "the pause to be observed", app)
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V2)
    expect_warning(warnings, "in-place update")
    expect_in_progress(app, paused_by_us=False)
    wait_for(lambda: app.events_with("InPlaceUpdatePaused", kind="Deployment"), 20,
             "the loop to report the update held by the user's pause", app)
    time.sleep(SETTLE)
    check(snapshot(app.pods()) == before and all(images(p)["app"] == V1 for p in app.pods()),
          "a pod was touched while the user's pause held the update")
    _, warnings = app.kubectl("rollout", "resume", "deploy/web")
    expect_warning(warnings, "in-place update resumed")
    expect_in_progress(app, paused_by_us=True)
    finish(app, before, rs0, restarted={"app"}, paused=False)


def c11_scale_mid_update(s):
    """kubectl scale up, and a write of the scale subresource down, while an update is held in a hook: every
    pod the ReplicaSet owns ends at the template."""
    app = App(s, "c11")
    create_label_hooked(app)
    rs0 = app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    hold_one_pod(app, lambda n: app.set_label(n, None))
    app.kubectl("scale", "deploy/web", "--replicas=5")
    wait_for(lambda: len(app.pods()) == 5 and all(p["status"].get("phase") == "Running" for p in app.pods()), 60,
             "the scale-up to 5", app)
    # The scale subresource, as an autoscaler writes it.
    s.api.merge_patch(ns_path(app.ns, "deployments", "web", group="apps/v1") + "/scale", {"spec": {"replicas": 4}})
    release_until_done(app, lambda p: labels_of(p).get(HANDLER_LABEL) and app.set_label(p["metadata"]["name"], None),
                       120, "after the scale changes")
    time.sleep(SETTLE)
    d = app.deployment()
    check(d["spec"]["replicas"] == 4, "replicas %s" % d["spec"]["replicas"])
    active = [r["metadata"]["name"] for r in app.replicasets() if r["spec"].get("replicas")]
    check(active == [n for n in rs0 if n in active] and len(active) == 1,
          "a native rollout ran: %s (with replicas: %s)" % (app.rs_names(), active))
    pods = app.pods()
    check(len(pods) == 4 and all(images(p)["app"] == V2 and is_ready(p) and state_of(p) == "Normal" for p in pods),
          "pods after the scale changes:\n%s" % app.pod_table(pods))
    check(not d["spec"].get("paused") and IN_PROGRESS not in annotations_of(d), "not finished: %s" % annotations_of(d))


def c12_helm_upgrade_mid_update(s):
    """helm upgrade of the product (its pods roll) while an update is held in a hook: the update completes."""
    app = App(s, "c12")
    create_label_hooked(app)
    before, rs0 = snapshot(app.pods()), app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + V2)
    hold_one_pod(app, lambda n: app.set_label(n, None))
    old_pods = {p["metadata"]["uid"] for p in s.webhook_pods() + s.controller_pods()}
    s.install(extra=["--set", "podAnnotations.upgraded=c12"], upgrade=True)
    check(not old_pods & {p["metadata"]["uid"] for p in s.webhook_pods() + s.controller_pods()},
          "helm upgrade did not roll the pods")
    release_until_done(app, lambda p: state_of(p) == "PreparingUpdate" and app.set_label(p["metadata"]["name"], None),
                       120, "after the upgrade")
    finish(app, before, rs0, restarted={"app"})


def c13_api_faults(s):
    """The loop behind a fault proxy (20% 500s and a 409 on each first write, then 10% 429s): the updates
    complete correctly. The chart's pods keep serving admission with their loop off (--disable-loop); the loop
    under test is the same binary on the host, as the chart's ServiceAccount (a token from the TokenRequest API)."""
    check(s.binary, "--binary is needed for this scenario")
    s.install(extra=["--set-json", 'server.extraArgs=["--disable-loop"]'], upgrade=True, loop=False)
    workdir = os.path.join(s.env.run, "c13")
    os.makedirs(workdir, exist_ok=True)
    token = os.path.join(workdir, "token")
    with open(token, "w") as f:
        f.write(s.tools.kubectl("create", "token", RELEASE, "-n", RELEASE_NS, "--duration=1h").stdout.strip())
    crt, key = openssl_cert(workdir, "proxy", "fault-proxy", san="IP:127.0.0.1",
                            ca=(os.path.join(s.env.pki, "ca.crt"), os.path.join(s.env.pki, "ca.key")))
    proxy = FaultProxy(s.env.server, os.path.join(s.env.pki, "ca.crt"), crt, key).start()
    log = open(os.path.join(workdir, "loop.log"), "w")
    loop = subprocess.Popen([s.binary, "serve", "--bind-address", "127.0.0.1", "--port", str(free_port()),
                             "--probe-port", str(free_port()),
                             "--tls-cert-file", os.path.join(s.certs, "tls.crt"),
                             "--tls-private-key-file", os.path.join(s.certs, "tls.key"),
                             "--api-server", "https://127.0.0.1:%d" % proxy.port, "--token-file", token,
                             "--certificate-authority", os.path.join(s.env.pki, "ca.crt"),
                             "--leader-elect=false", "--loop-resync-period-ms=2000", "--log-format", "text"],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, POD_NAME="loop-behind-proxy"))
    try:
        app = App(s, "c13")
        before = snapshot(app.create(deployment("web", replicas=3)))
        rs0 = app.rs_names()
        proxy.faults(error_rate=0.2, error_code=500, conflict_on_first_write=True, seed=7)
        app.kubectl("set", "image", "deploy/web", "app=" + V2)
        finish(app, before, rs0, restarted={"app"}, timeout=120)
        codes = {c for _, _, c in proxy.log}
        check(proxy.injected > 0 and {409, 500} <= codes, "the loop saw no injected 409/500: %s" % sorted(codes))
        proxy.faults()
        before = snapshot(app.pods())
        app.kubectl("label", "deploy/web", "--overwrite", "unrelated=1")  # a write the webhook just allows
        proxy.faults(error_rate=0.1, error_code=429, retry_after=1, conflict_on_first_write=True, seed=11)
        app.kubectl("patch", "deploy/web", "--type", "merge", "-p",
                    json.dumps({"spec": {"template": {"metadata": {"labels": {"version": "v2"}}}}}))
        injected = proxy.injected
        finish(app, before, rs0, restarted=set(), timeout=120)
        check(proxy.injected > injected, "no 429 was injected")
        check(loop.poll() is None, "the loop exited: see %s" % log.name)
    finally:
        loop.terminate()
        try:
            loop.wait(20)
        except subprocess.TimeoutExpired:
            loop.kill()
        proxy.stop()
        log.close()
        s.install(upgrade=True)


def c15_deletion_never_blocked(s):
    """An opted-in Deployment whose settings the webhook refuses (created while the validating webhook was
    away): edits are refused, but foreground deletion (kubectl delete --cascade=foreground, Argo CD's default) and
    the removal of a finalizer from a Deployment being deleted go through."""
    app = App(s, "c15")
    app.setup_namespace()
    vwc = json.loads(s.tools.kubectl("get", "validatingwebhookconfiguration", RELEASE, "-o", "json").stdout)
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        vwc["metadata"].pop(k, None)
    bad = {"preUpdate": {"labelsHandler": ["lb"]}}  # malformed (a list, not a map): refused by the validator
    s.tools.kubectl("delete", "validatingwebhookconfiguration", RELEASE)
    try:
        for name in ("web", "held"):
            d = deployment(name, replicas=2, lifecycle=bad)
            if name == "held":
                d["metadata"]["finalizers"] = ["example.com/hold"]
            s.tools.kubectl("create", "-n", app.ns, "-f", "-", stdin=json.dumps(d))
    finally:
        s.tools.kubectl("create", "-f", "-", stdin=json.dumps(vwc))
    time.sleep(1)  # the API server's webhook configuration cache
    p = s.tools.kubectl("label", "deploy/web", "-n", app.ns, "touched=yes", user="alice", check_rc=False)
    check(p.returncode != 0 and "labelsHandler must be" in p.stderr, "an edit of the invalid Deployment was not refused: %s"
          % p.stderr)
    wait_for(lambda: len(app.pods()) == 2, 60, "the pods of c15/web", app)
    # Foreground: the API server sets deletionTimestamp and the foregroundDeletion finalizer; the garbage
    # collector deletes the ReplicaSet and its pods, then removes the finalizer (an UPDATE our webhooks see).
    app.kubectl("delete", "deploy/web", "--cascade=foreground", "--timeout=90s", timeout=120)
    check(s.api.get_or_none(ns_path(app.ns, "deployments", "web", group="apps/v1")) is None, "c15/web still there")
    check(not app.pods() and not app.replicasets(), "the dependents of c15/web are still there")
    # A finalizer of the user's: deleting leaves the Deployment terminating until the finalizer is removed,
    # a metadata edit of a Deployment being deleted.
    app.kubectl("delete", "deploy/held", "--wait=false")
    path = ns_path(app.ns, "deployments", "held", group="apps/v1")
    wait_for(lambda: s.api.get(path)["metadata"].get("deletionTimestamp"), 20, "deletionTimestamp on held")
    app.kubectl("patch", "deploy/held", "--type", "json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for(lambda: s.api.get_or_none(path) is None, 30, "c15/held to be deleted")


# The README's uninstall step that sets the readiness gate True on every pod that still declares it (pods being
# drained when the loop stopped); scenarios_gate.py checks the README says exactly these.
GATE_PODS = ('{{range .items}}{{$p := .}}{{range .spec.readinessGates}}{{if eq .conditionType '
             '"inplace-webhook.io/ready"}}{{$p.metadata.namespace}} {{$p.metadata.name}}{{"\\n"}}{{end}}{{end}}{{end}}')
GATE_TRUE = '{"status":{"conditions":[{"type":"inplace-webhook.io/ready","status":"True"}]}}'


def uninstall_as_readme_says(s):
    """README "Install with Helm": the webhook configurations first, then helm uninstall, then the namespace
    (which holds the Lease the loop made), then the readiness gate released on every pod that still has it."""
    started = time.time()
    s.tools.kubectl("delete", "mutatingwebhookconfiguration/" + RELEASE, "validatingwebhookconfiguration/" + RELEASE)
    s.tools.helm("uninstall", RELEASE, "-n", RELEASE_NS, "--wait", "--timeout", "120s", timeout=180)
    s.tools.kubectl("delete", "namespace", RELEASE_NS, "--wait=true", timeout=180)
    out = s.tools.kubectl("get", "pods", "-A", "-l", ENABLED + "=true", "-o", "go-template=" + GATE_PODS).stdout
    for line in out.splitlines():
        ns, pod = line.split()
        s.tools.kubectl("patch", "pod", pod, "-n", ns, "--subresource=status", "-p", GATE_TRUE)
    # helm removes the RBAC while the pods still run their termination grace: the leader's last Lease renewals
    # are refused then (and it stops leading), which is the uninstall, not a missing rule.
    s.uninstalls.append((started, time.time()))
    left = []
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations", "clusterroles",
                 "clusterrolebindings", "validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        left += s.tools.kubectl("get", kind, "-o", "name").stdout.split()
    left = [o for o in left if RELEASE in o]
    check(not left, "left in the cluster after uninstall: %s" % left)


def c14_secret_mode_and_uninstall(s):
    """The README's uninstall leaves nothing; certificates.mode=secret with the user's own Secret and CA works;
    uninstalled again, nothing is left and Deployments are no longer paused by anything."""
    uninstall_as_readme_says(s)
    d = os.path.join(s.env.run, "c14")
    os.makedirs(d, exist_ok=True)
    svc = "%s.%s.svc" % (RELEASE, RELEASE_NS)
    ca = openssl_cert(d, "ca", "my-webhook-ca")
    crt, key = openssl_cert(d, "tls", svc, san="DNS:%s,DNS:%s.cluster.local" % (svc, svc), ca=ca)
    s.tools.kubectl("create", "namespace", RELEASE_NS)
    s.tools.kubectl("create", "secret", "tls", "my-webhook-tls", "-n", RELEASE_NS, "--cert", crt, "--key", key)
    s.install(extra=["--set", "certificates.mode=secret", "--set", "certificates.secret.name=my-webhook-tls",
                     "--set-file", "certificates.secret.caBundle=" + ca[0]])
    app = App(s, "c14")
    before = snapshot(app.create(deployment("web", replicas=2)))
    rs0 = app.rs_names()
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + V2)
    expect_warning(warnings, "in-place update: 2 pods will be updated")
    finish(app, before, rs0, restarted={"app"})
    uninstall_as_readme_says(s)
    # With nothing of ours running, a change of the formerly opted-in Deployment takes the native rollout.
    app.kubectl("set", "image", "deploy/web", "app=" + V1)
    wait_for(lambda: app.rollout_complete() and len(app.rs_names()) == 2, 120, "the native rollout", app)
    check(not app.deployment()["spec"].get("paused"), "paused with nothing of ours installed")


def pod_updates_completed(s, pod_name):
    """inplace_webhook_pod_updates_completed_total as the controller pod `pod_name` reports it on /metrics."""
    text = s.tools.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics"
                           % (RELEASE_NS, pod_name)).stdout
    for line in text.splitlines():
        if line.startswith("inplace_webhook_pod_updates_completed_total "):
            return float(line.split()[1])
    raise Failure("no inplace_webhook_pod_updates_completed_total on %s:\n%s" % (pod_name, text[-500:]))


def c16_drain_off_one_write_per_pod(s):
    """The drain off (policy gracePeriodSeconds 0) and no hook: one pod write per pod. The write leaves the state label
    Normal and marks its update-state completesOnReport; the pod is Updating until the kubelet reports the new
    container, then Normal with no further write (DESIGN.md §4.3). Counted from the audit log; the completions from
    the leader's metrics."""
    app = App(s, "c16")
    before = snapshot(app.create(deployment("web", replicas=3, policy={"gracePeriodSeconds": 0})))
    rs0 = app.rs_names()
    leader = s.lease_holder()
    completed0 = pod_updates_completed(s, leader)
    since = time.time()
    with PodSampler(app.all_pods) as sampler:
        app.kubectl("set", "image", "deploy/web", "app=" + V2)
        expect_in_progress(app)
        finish(app, before, rs0, restarted={"app"})
    seen = [p for _, pods in sampler.samples for p in pods if p["metadata"]["name"] in before]
    labels = {labels_of(p).get(STATE, "Normal") for p in seen}
    check(labels == {"Normal"}, "state labels seen during the update: %s (the write leaves Normal)" % labels)
    updating = {p["metadata"]["name"] for p in seen if state_of(p) == "Updating"}
    check(updating, "no sample showed a pod written and not yet restarted (Updating from the kubelet's report)")
    for p in app.pods():
        record = json.loads(annotations_of(p)["inplace-webhook.io/update-state"])
        check(record.get("completesOnReport") is True, "pod %s: update-state %s" % (p["metadata"]["name"], record))
        check(state_of(p) == "Normal", "pod %s reads %s after the update" % (p["metadata"]["name"], state_of(p)))
    writes = {}
    for sub in ("", "status"):
        for e in s.audit.writes(since, user=CONTROLLER_USER, ns=app.ns, resource="pods", subresource=sub):
            key = (e["objectRef"]["name"], sub or "pod")
            writes[key] = writes.get(key, 0) + 1
    print("  c16: the controller's writes per pod: %s; seen Updating: %s" % (dict(sorted(writes.items())),
                                                                          sorted(updating)))
    check(writes == {(name, "pod"): 1 for name in before},
          "the controller's writes per pod, expected one pod write each and no status write: %s" % writes)
    if s.lease_holder() == leader:
        # The counter is the controller's, shared with the scenarios that run beside this one: at least these 3.
        done = pod_updates_completed(s, leader) - completed0
        check(done >= 3, "inplace_webhook_pod_updates_completed_total rose by %s on %s, expected at least 3"
              % (done, leader))


SCENARIOS = [c00_installed_as_a_user_installs_it, c01_image_then_labels, c02_pre_and_post_hooks, c03_mark_not_ready_grace, c04_max_unavailable,
             c05_hook_timeout, c06_killed_mid_update, c07_leader_handover, c08_abort, c09_non_eligible_mid_update,
             c10_user_pause_kept, c11_scale_mid_update, c12_helm_upgrade_mid_update, c13_api_faults,
             c15_deletion_never_blocked, c16_drain_off_one_write_per_pod]


def start_test_webhook(s, name, script, args):
    """One of the test's own webhooks (tests/cluster/SCRIPT, serving with mutating_webhook.py) inside the cluster's
    network namespace, where the API server calls https://127.0.0.1:PORT, with a certificate the cluster's CA signs;
    its files in the run directory's NAME/. Returns (process, port) once it listens; the caller ends the process."""
    workdir = os.path.join(s.env.run, name)
    os.makedirs(workdir, exist_ok=True)
    crt, key = openssl_cert(workdir, name, name + "-webhook", san="IP:127.0.0.1",
                            ca=(os.path.join(s.env.pki, "ca.crt"), os.path.join(s.env.pki, "ca.key")))
    port_file = os.path.join(workdir, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    netns = "/run/netns/" + os.environ.get("INPLACE_CLUSTER_NETNS", "inplace-cluster")
    server = subprocess.Popen(["nsenter", "--net=" + netns, "python3",
                               os.path.join(os.path.dirname(os.path.abspath(__file__)), script),
                               "--cert", crt, "--key", key, "--port-file", port_file] + list(args))
    try:
        wait_for(lambda: os.path.exists(port_file), 10, "the test webhook %s to listen" % script)
    except Exception:
        server.kill()
        raise
    with open(port_file) as f:
        return server, f.read()


def all_scenarios():
    """The scenarios above, then those of every tests/cluster/scenarios_*.py (its SCENARIOS list, in file name
    order), and last the one that uninstalls."""
    import glob
    import importlib
    out = list(SCENARIOS)
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios_*.py"))):
        out += importlib.import_module(os.path.basename(path)[:-3]).SCENARIOS
    return out + [c14_secret_mode_and_uninstall]


def shard(chosen, index, count, durations_file):
    """The scenarios of shard `index` (1-based) of `count`: longest first onto the least loaded shard, by the
    seconds each took in a measured run (tests/cluster/durations.txt; 30 s when not listed), in suite order
    within the shard. The uninstall scenario runs last in whichever shard it lands in."""
    seconds = {}
    if os.path.exists(durations_file):
        with open(durations_file) as f:
            for line in f:
                parts = line.split("#", 1)[0].split()
                if len(parts) == 2:
                    seconds[parts[0]] = float(parts[1])
    load = [0.0] * count
    home = {}
    for fn in sorted(chosen, key=lambda f: -seconds.get(f.__name__, 30.0)):
        i = min(range(count), key=lambda k: (load[k], k))
        home[fn.__name__] = i
        load[i] += seconds.get(fn.__name__, 30.0)
    return [f for f in chosen if home[f.__name__] == index - 1]


# The most writes the loop may make to one object (a pod, a Deployment with its status, a ReplicaSet) in any 60 s,
# asserted after every scenario from the API server's audit log (each PASS line prints the scenario's peak): an
# update's steps cost a few writes per object and the progress condition is written at most every 2 s (peaks of
# 11-34 measured, the most in w02 and w01), while a write fight (the loop undoing what a controller copies back)
# costs hundreds (issue 28: 1,205 ReplicaSet writes in 40 s).
MAX_LOOP_WRITES_PER_OBJECT_MINUTE = 60


def loop_write_peak(s, since):
    """The largest number of the loop's writes to one object in a 60 s window since `since`: (count, object)."""
    times = {}
    for e in s.audit.writes(since, user=CONTROLLER_USER):
        ref = e.get("objectRef") or {}
        if ref.get("resource") in ("events", "leases", "selfsubjectreviews", "selfsubjectaccessreviews"):
            continue
        key = "%s %s/%s" % (ref.get("resource"), ref.get("namespace", ""), ref.get("name", ""))
        times.setdefault(key, []).append(e["_time"])
    peak, worst = 0, None
    for key, ts in times.items():
        ts.sort()
        lo = 0
        for hi, t in enumerate(ts):
            while t - ts[lo] > 60:
                lo += 1
            if hi - lo + 1 > peak:
                peak, worst = hi - lo + 1, key
    return peak, worst


def run_one(s, fn):
    started = time.time()
    ns = fn.__name__.split("_", 1)[0]
    try:
        fn(s)
        bad = [e for e in s.audit.writes(started, user=CONTROLLER_USER)
               if (e.get("responseStatus") or {}).get("code") == 403
               and (e.get("annotations") or {}).get("authorization.k8s.io/decision") != "allow"  # not admission
               and not any(a <= e["_time"] <= b for a, b in s.uninstalls)]
        check(not bad, "the loop was refused by RBAC: %s" % [(e["verb"], e["objectRef"]) for e in bad[:5]])
        peak, worst = loop_write_peak(s, started)
        check(peak <= MAX_LOOP_WRITES_PER_OBJECT_MINUTE, "the loop wrote %s %d times within 60 s (at most %d)"
              % (worst, peak, MAX_LOOP_WRITES_PER_OBJECT_MINUTE))
        print("PASS %-32s %5.1f s  (loop writes per object, peak in 60 s: %d)"
              % (fn.__name__, time.time() - started, peak), flush=True)
        ok = True
    except Exception as e:  # noqa: BLE001 - report and go on with the next scenario
        text = str(e) if isinstance(e, Failure) else traceback.format_exc()
        # The FAIL line carries the whole message (a command's stderr included), its lines joined: the matrix's
        # summary shows each FAIL line, and a CI log shown cut keeps that summary.
        print("FAIL %-32s %5.1f s: %s" % (fn.__name__, time.time() - started,
                                          " | ".join(l.strip() for l in text.strip().splitlines() if l.strip())),
              flush=True)
        print("  (%s)" % (fn.__doc__ or "").strip())
        print(App(s, ns).describe())
        print(s.webhook_logs())
        ok = False
    # Leave nothing that holds the namespace (hook finalizers), then remove it.
    try:
        for p in s.api.items(ns_path(ns, "pods")):
            if FINALIZER in (p["metadata"].get("finalizers") or []):
                App(s, ns).set_finalizer(p["metadata"]["name"], False)
        s.tools.kubectl("delete", "namespace", ns, "--wait=false", check_rc=False)
    except Exception:  # noqa: BLE001
        pass
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("source_dir")
    p.add_argument("--image", required=True, help="the product image in containerd, e.g. localhost/inplace-webhook:0.1.0")
    p.add_argument("--binary", help="the product binary, for the scenario that runs its loop behind a fault proxy")
    p.add_argument("--certs", help="a serving certificate directory (tls.crt, tls.key) for that binary")
    p.add_argument("-k", dest="only", action="append", default=[], help="run scenarios whose name contains this")
    p.add_argument("--no-install", action="store_true", help="the chart is already installed")
    p.add_argument("--shard", help="I/N: run only the I-th of N shards of the chosen scenarios (each shard on its "
                   "own cluster; tests/cluster/matrix.sh)")
    args = p.parse_args()
    s = Suite(ClusterEnv(args.run_dir), args.source_dir, args.image, args.binary, args.certs)
    chosen = [f for f in all_scenarios() if not args.only or any(k in f.__name__ for k in args.only)]
    if not chosen:
        p.error("no scenario matches %s" % args.only)
    if args.shard:
        index, count = (int(x) for x in args.shard.split("/"))
        chosen = shard(chosen, index, count, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                          "durations.txt"))
        print("shard %d/%d: %s" % (index, count, " ".join(f.__name__ for f in chosen)), flush=True)
    started = time.time()
    if not args.no_install:
        s.install()
    failed = [f.__name__ for f in chosen if not run_one(s, f)]
    print("%d/%d scenarios passed in %.0f s" % (len(chosen) - len(failed), len(chosen), time.time() - started))
    if failed:
        print("failed: " + " ".join(failed))
    print("%d scenarios passed, %d failed" % (len(chosen) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
