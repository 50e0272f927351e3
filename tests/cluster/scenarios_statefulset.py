"""StatefulSets on the real cluster, before the product updates them in place: the fixtures the StatefulSet scenarios
share (a namespace, one hostPath PersistentVolume per ordinal bound through the StatefulSet's volumeClaimTemplates, a
headless Service, a StatefulSet of the httpd-demo image with the OrderedReady and RollingUpdate defaults) and the
baseline they are measured against: what the StatefulSet controller itself does on an image change. Nothing here is
opted in to the product (no inplace-webhook.io/enabled label).

The volumes are directories under the cluster's state directory (cluster/lib.sh RUN, `hostpath/NAMESPACE/CLAIM`):
the kubelet runs in the host's mount namespace (only its network namespace is the cluster's), so the node's path is
the host's, and cluster/down.sh removes the directory with the rest of the cluster. The PersistentVolumes are
removed with the scenario (their claims go with its namespace)."""

import contextlib
import json
import os
import re
import shutil
import time

import test_cluster as tc
import threading
from scenarios_plugin import inplace, rows

from kube import (ENABLED, IN_PROGRESS, LIFECYCLE, POLICY, PodSampler, annotations_of, check, container_statuses, event_line,
                  images, is_ready, labels_of, live, ns_path, snapshot, state_of, wait_for)

# kube-controller-manager runs with --use-service-account-credentials: each controller has its own identity.
STATEFULSET_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"
REVISION_LABEL = "controller-revision-hash"
VOLUME_LABEL = "cluster-test.example.com/namespace"  # the PersistentVolumes made for a scenario's namespace
WORKLOAD_UID = 65532  # httpd-demo runs as "nonroot" (cluster/images/build.sh): it owns its volume's directory
MOUNT, MARK = "/data", "who"  # where the volume is mounted, and the file each pod writes there


def claim_name(name, ordinal):
    """The claim the StatefulSet controller makes for ordinal `ordinal` from the volumeClaimTemplate `data`."""
    return "data-%s-%d" % (name, ordinal)


def volume_dir(s, ns, claim):
    """The node's directory behind claim `claim` of namespace `ns`."""
    return os.path.join(s.env.run, "hostpath", ns, claim)


def statefulset(name, replicas=3, image=tc.V1, size="64Mi", opted_in=False, partition=None, lifecycle=None):
    """A StatefulSet (opted in to the product, StatefulSet and template, when `opted_in`): the httpd-demo `app`
    container (the readiness probe of tc.deployment()) with the volume `data` at MOUNT, and a `sidecar` whose image
    never changes; pod management and update strategy left to the API server's defaults (OrderedReady,
    RollingUpdate with partition 0) unless `partition` is given; `lifecycle` is the product's hook annotation."""
    app = {"name": "app", "image": image, "ports": [{"name": "http", "containerPort": 8080}],
           "env": [{"name": "STOP_DELAY_SECONDS", "value": "0"}],
           "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1,
                              "failureThreshold": 1},
           "volumeMounts": [{"name": "data", "mountPath": MOUNT}]}
    labels = dict({"app": name}, **({ENABLED: "true"} if opted_in else {}))
    annotations = {LIFECYCLE: json.dumps(lifecycle)} if lifecycle else {}
    strategy = ({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}}
                if partition is not None else {})
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": dict(strategy, **{"replicas": replicas, "serviceName": name,
                                      "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": 10,
                                           "containers": [app, {"name": "sidecar", "image": tc.HOLDER}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                                        "resources": {"requests": {"storage": size}}}}]})}


def headless_service(name):
    """The StatefulSet's governing Service (serviceName): headless, selecting its pods."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"name": "http", "port": 8080}]}}


def create_volumes(s, ns, name, replicas, size="64Mi"):
    """One hostPath PersistentVolume per ordinal, pre-bound (claimRef) to the claim the StatefulSet's
    volumeClaimTemplate makes for it, with no storage class (no provisioner is asked; the PV binder binds them):
    PV NS-data-NAME-i is the directory volume_dir(data-NAME-i), owned by the image's user. PVs and directories left by
    an earlier run in the namespace go first (the namespace, and with it their claims, must be gone)."""
    s.tools.kubectl("delete", "persistentvolumes", "-l", "%s=%s" % (VOLUME_LABEL, ns), "--ignore-not-found",
                    "--wait=true", timeout=120)
    shutil.rmtree(os.path.join(s.env.run, "hostpath", ns), ignore_errors=True)
    for i in range(replicas):
        claim = claim_name(name, i)
        path = volume_dir(s, ns, claim)
        os.makedirs(path)
        os.chown(path, WORKLOAD_UID, WORKLOAD_UID)
        s.api.create("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "%s-%s" % (ns, claim), "labels": {VOLUME_LABEL: ns}},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                     "claimRef": {"namespace": ns, "name": claim},
                     "hostPath": {"path": path, "type": "Directory"}}})


def delete_volumes(s, ns):
    """Deletes the namespace's PersistentVolumes; each goes once its claim is gone (the PV protection controller)."""
    s.tools.kubectl("delete", "persistentvolumes", "-l", "%s=%s" % (VOLUME_LABEL, ns), "--ignore-not-found",
                    "--wait=false", check_rc=False)


class StatefulApp(tc.App):
    """One StatefulSet (pods NAME-0..N-1, claims data-NAME-i) and its headless Service in their own namespace;
    alice's kubectl changes them, admin reads them."""

    def statefulset(self):
        return self.api.get(ns_path(self.ns, "statefulsets", self.name, group="apps/v1"))

    def claims(self):
        return sorted(self.api.items(ns_path(self.ns, "persistentvolumeclaims")), key=lambda c: c["metadata"]["name"])

    def volumes(self):
        return sorted(self.api.items("/api/v1/persistentvolumes", labelSelector="%s=%s" % (VOLUME_LABEL, self.ns)),
                      key=lambda v: v["metadata"]["name"])

    def revisions(self):
        """The StatefulSet's ControllerRevisions, oldest first."""
        return sorted(self.api.items(ns_path(self.ns, "controllerrevisions", group="apps/v1"),
                                     labelSelector=self.selector), key=lambda r: r.get("revision", 0))

    def ordinals(self, replicas):
        return ["%s-%d" % (self.name, i) for i in range(replicas)]

    def rolled_out(self):
        """The StatefulSet controller's status at the template (one revision current and updated, every replica ready)
        and what it says seen on the pods and claims: ordinals 0..N-1 Ready at the update revision, claims Bound."""
        sts = self.statefulset()
        st = sts.get("status") or {}
        want = sts["spec"]["replicas"]
        pods, claims = self.pods(), self.claims()
        return (st.get("observedGeneration") == sts["metadata"]["generation"]
                and st.get("currentRevision") == st.get("updateRevision")
                and st.get("replicas") == st.get("readyReplicas") == st.get("currentReplicas")
                == st.get("updatedReplicas") == want
                and [p["metadata"]["name"] for p in pods] == self.ordinals(want)
                and all(is_ready(p) and labels_of(p).get(REVISION_LABEL) == st["updateRevision"] for p in pods)
                and [c["metadata"]["name"] for c in claims] == [claim_name(self.name, i) for i in range(want)]
                and all((c.get("status") or {}).get("phase") == "Bound" for c in claims))

    def create_statefulset(self, replicas=3, timeout=150, opted_in=False, field_manager=None, **kw):
        """The namespace, the volumes, then the Service and the StatefulSet applied by alice (server-side by
        `field_manager` when given, as a GitOps tool applies); waits for every ordinal Ready and every claim Bound
        (OrderedReady: one pod after the other). Returns the pods."""
        self.setup_namespace()
        create_volumes(self.s, self.ns, self.name, replicas)
        how = ["--server-side", "--field-manager=" + field_manager] if field_manager else []
        self.kubectl("apply", *how, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            headless_service(self.name), statefulset(self.name, replicas, opted_in=opted_in, **kw)]}))
        wait_for(self.rolled_out, timeout, "the StatefulSet %s/%s's %d pods Ready and claims Bound"
                 % (self.ns, self.name, replicas), self, interval=0.2)
        for c in self.claims():
            check(c["spec"].get("volumeName") == "%s-%s" % (self.ns, c["metadata"]["name"]),
                  "claim %s bound to %s, not its own volume" % (c["metadata"]["name"], c["spec"].get("volumeName")))
        return self.pods()

    def exec_app(self, pod, *command):
        """`kubectl exec` as alice into the pod's `app` container (App.kubectl puts -n last, which would be part of
        the command after --); returns its stdout."""
        return self.s.tools.kubectl("exec", "-n", self.ns, pod, "-c", "app", "--", *command, user="alice").stdout

    def write_marks(self):
        """Each pod writes a file naming itself (name and UID) into its volume (kubectl exec as alice); the file is
        then on the node in the directory of the pod's own claim. Returns {pod: text}."""
        marks = {}
        for p in self.pods():
            name = p["metadata"]["name"]
            text = "%s %s" % (name, p["metadata"]["uid"])
            self.exec_app(name, "sh", "-c", "echo %s > %s/%s" % (text, MOUNT, MARK))
            marks[name] = text
        check(self.read_marks() == marks, "the files written: %s, expected %s" % (self.read_marks(), marks))
        return marks

    def read_marks(self):
        """{pod: the file as the pod reads it in its volume}, checked against the node's directory of its claim."""
        out = {}
        for p in self.pods():
            name = p["metadata"]["name"]
            text = self.exec_app(name, "cat", "%s/%s" % (MOUNT, MARK))
            with open(os.path.join(volume_dir(self.s, self.ns, "data-" + name), MARK)) as f:
                on_node = f.read()
            check(text == on_node, "pod %s reads %r, the node's directory of its claim holds %r"
                  % (name, text, on_node))
            out[name] = text.strip()
        return out

    def history(self):
        """`kubectl rollout history` as the user reads it: [revision, ...], oldest first."""
        out, _ = self.kubectl("rollout", "history", "statefulset/" + self.name)
        return [int(m.group(1)) for m in re.finditer(r"^(\d+)\s", out, re.M)]

    def describe(self):
        out = []
        try:
            sts = self.s.api.get_or_none(ns_path(self.ns, "statefulsets", self.name, group="apps/v1"))
            if sts is not None:
                out.append("StatefulSet %s/%s: generation=%s updateStrategy=%s images=%s\n  status=%s" % (
                    self.ns, self.name, sts["metadata"].get("generation"),
                    json.dumps(sts["spec"].get("updateStrategy")), images(sts),
                    json.dumps(sts.get("status"), sort_keys=True)))
            for r in self.revisions():
                out.append("ControllerRevision %s: revision %s" % (r["metadata"]["name"], r.get("revision")))
            for c in self.claims():
                out.append("PVC %s: %s volume=%s" % (c["metadata"]["name"], (c.get("status") or {}).get("phase"),
                                                    c["spec"].get("volumeName")))
            for v in self.volumes():
                out.append("PV %s: %s claim=%s path=%s" % (v["metadata"]["name"], (v.get("status") or {}).get("phase"),
                                                          (v["spec"].get("claimRef") or {}).get("name"),
                                                          v["spec"]["hostPath"]["path"]))
            out.append("Pods:\n" + self.pod_table())
            out.append("Events:\n" + "\n".join("  " + event_line(e) for e in self.events()))
        except Exception as e:  # noqa: BLE001 - diagnostics must not fail
            out.append("(diagnostics failed: %s)" % e)
        return "\n".join(out)


@contextlib.contextmanager
def statefulset_app(s, ns, name="web"):
    """A StatefulApp for a scenario: on a failure prints its StatefulSet, claims, volumes, pods and Events (the
    suite's own report after the FAIL line describes Deployments); in every case deletes its PersistentVolumes,
    which go with the namespace the suite deletes after the scenario."""
    app = StatefulApp(s, ns, name)
    try:
        yield app
    except Exception:
        print("%s: the StatefulSet as the cluster reports it:\n%s" % (ns, app.describe()))
        raise
    finally:
        delete_volumes(s, ns)


PROGRESS = "inplace-webhook.io/progress"
PROGRESS_DEADLINE = "inplace-webhook.io/progress-deadline-seconds"


def progress_of(app):
    """The loop's progress report on the StatefulSet (its annotation, JSON), or {}."""
    return json.loads(annotations_of(app.statefulset()).get(PROGRESS) or "{}")


def statefulset_stalled(s, ns, name="web"):
    """inplace_webhook_statefulset_update_stalled{statefulset_namespace=ns,statefulset=name} as the leader reports it
    on /metrics, or None when it has no such series."""
    text = s.tools.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics"
                           % (tc.RELEASE_NS, s.lease_holder())).stdout
    m = re.search(r'^inplace_webhook_statefulset_update_stalled\{statefulset_namespace="%s",statefulset="%s"\} (\S+)$'
                  % (re.escape(ns), re.escape(name)), text, re.M)
    return float(m.group(1)) if m else None


def pod_writes(s, ns, since, verb):
    """The successful pod writes with `verb` (create, delete) in `ns` since `since`, from the audit log, oldest
    first: [(time, pod name, username)]."""
    out = []
    for e in s.audit.writes(since, ns=ns, resource="pods", subresource=""):
        if e.get("verb") != verb or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        name = (e.get("objectRef") or {}).get("name") or ((e.get("requestObject") or {}).get("metadata") or {}).get(
            "name")
        out.append((e["_time"], name, (e.get("user") or {}).get("username")))
    return sorted(out)


def first_by_name(writes):
    """[pod name, ...] in the order of each name's first write."""
    out = []
    for _, name, _ in writes:
        if name not in out:
            out.append(name)
    return out


def not_ready_seconds(sampler, names):
    """From the samples: {pod name: seconds no live (not deleting) pod of that name was Ready}, and the most names
    not Ready in one sample. Each sample counts until the next one (~0.2 s resolution)."""
    down = {n: 0.0 for n in names}
    most = 0
    for (t, pods), (t_next, _) in zip(sampler.samples, sampler.samples[1:]):
        serving = {p["metadata"]["name"] for p in live(pods) if is_ready(p)}
        out = [n for n in names if n not in serving]
        most = max(most, len(out))
        for n in out:
            down[n] += t_next - t
    return down, most


def container_restarts(samples, before):
    """Container restarts seen in the samples [(time, pods)]: for each pod UID its highest restartCount sum, less
    what the pods of `before` (a snapshot) had already (a new pod starts at 0)."""
    start = {b["uid"]: sum(r for _, r in b["containers"].values()) for b in before.values()}
    high = dict(start)
    for _, pods in samples:
        for p in pods:
            uid = p["metadata"]["uid"]
            high[uid] = max(high.get(uid, 0), sum(c.get("restartCount", 0) for c in container_statuses(p).values()))
    return sum(n - start.get(uid, 0) for uid, n in high.items())


def timed_image_change(app, image, then=None, change=None):
    """`kubectl set image` of the `app` container (or the kubectl command `change`, a list of its arguments), then
    `kubectl rollout status` until done, the pods sampled every 0.2 s throughout (and through then(), when given).
    Returns (sampler, t0, t1, rollout status output, warnings)."""
    with PodSampler(app.all_pods, interval=0.2) as sampler:
        t0 = time.time()
        _, warnings = app.kubectl(*(change or ["set", "image", "statefulset/" + app.name, "app=" + image]))
        out, _ = app.kubectl("rollout", "status", "statefulset/" + app.name, "--timeout=180s", timeout=200)
        t1 = time.time()
        if then is not None:
            then()
    return sampler, t0, t1, out, warnings


def disruption(sampler, names, before, after, t1):
    """What every rollout line prints of the samples: "N container restarts, not Ready X s in total (each pod's),
    at most M at once" (README "Performance")."""
    down, most = not_ready_seconds(sampler, names)
    restarts = container_restarts(sampler.samples + [(t1, after)], before)
    return "%d container restarts, not Ready %.1f s in total (%s), at most %d at once" % (
        restarts, sum(down.values()), ", ".join("%s %.1f s" % (n, down[n]) for n in names), most)


def event_counts(app):
    """{Event name: count} of the namespace's Events now."""
    return {e["metadata"]["name"]: int(e.get("count") or 1) for e in app.events()}


def warnings_since(app, counts):
    """The Warning Events raised or repeated since event_counts() gave `counts`."""
    return [e for e in app.events() if e.get("type") == "Warning"
            and int(e.get("count") or 1) > counts.get(e["metadata"]["name"], 0)]


def s00_native_statefulset_rollout(s):
    """The baseline for in-place StatefulSet updates: `kubectl set image` on a 3-replica StatefulSet not opted in
    (OrderedReady, RollingUpdate) and `kubectl rollout status` until done. Natively every pod is deleted and
    recreated (new UID), highest ordinal first, each by the StatefulSet controller (audit log), and comes back on its
    own claim with the file it wrote there; the controller's status ends with one revision current and updated, and
    the history lists 2 revisions. Prints the wall time, deletions, creations, restarts and the seconds each ordinal
    was not Ready (sampled every 0.2 s)."""
    with statefulset_app(s, "s00") as app:
        pods = app.create_statefulset(replicas=3)
        names = app.ordinals(3)
        marks = app.write_marks()
        before = snapshot(pods)
        rev0 = app.statefulset()["status"]["currentRevision"]
        check(app.history() == [1], "history of a new StatefulSet: %s" % app.history())
        events0 = event_counts(app)
        sampler, t0, t1, out, _ = timed_image_change(app, tc.V2)
        # The API server defaults rollingUpdate.partition to 0, so kubectl's rollout status takes its partition
        # branch: it waits for updatedReplicas and readyReplicas, not for currentRevision. Was that set when it ended?
        st = app.statefulset()["status"]
        at_exit = st.get("currentRevision") == st.get("updateRevision")
        wait_for(app.rolled_out, 10, "the StatefulSet controller's status at the new revision", app, interval=0.2)
        sts = app.statefulset()
        st = sts["status"]
        check(st["updateRevision"] != rev0, "no new revision: %s" % st)
        check(st["currentRevision"] == st["updateRevision"] and st.get("updatedReplicas") == st.get("currentReplicas")
              == st.get("readyReplicas") == 3, "the StatefulSet's status: %s" % st)
        after = app.pods()
        for p in after:
            name = p["metadata"]["name"]
            check(p["metadata"]["uid"] != before[name]["uid"], "pod %s kept its UID %s (not recreated)"
                  % (name, before[name]["uid"]))
            check(images(p) == {"app": tc.V2, "sidecar": tc.HOLDER}, "pod %s runs %s" % (name, images(p)))
            check(labels_of(p).get(REVISION_LABEL) == st["updateRevision"], "pod %s at revision %s, not %s"
                  % (name, labels_of(p).get(REVISION_LABEL), st["updateRevision"]))
        # Highest ordinal first: as the samples saw the new pods appear, as their creationTimestamps say, and as the
        # audit log's deletions and creations are ordered.
        seen = {}
        for t, sample in sampler.samples:
            for p in sample:
                if p["metadata"]["uid"] != before[p["metadata"]["name"]]["uid"]:
                    seen.setdefault(p["metadata"]["name"], t)
        descending = list(reversed(names))
        check(sorted(seen, key=seen.get) == descending, "new pods appeared in the order %s"
              % sorted(seen, key=seen.get))
        created = [p["metadata"]["creationTimestamp"] for p in sorted(after, key=lambda p: p["metadata"]["name"],
                                                                      reverse=True)]
        check(created == sorted(created), "creationTimestamps of %s: %s" % (descending, created))
        deletes, creates = pod_writes(s, app.ns, t0, "delete"), pod_writes(s, app.ns, t0, "create")
        by_controller = [w for w in deletes if w[2] == STATEFULSET_CONTROLLER]
        check(first_by_name(deletes) == descending, "pods deleted in the order %s" % first_by_name(deletes))
        # The controller may send a pod's DELETE twice: a sync that runs before its informer has seen the first
        # DELETE's deletionTimestamp deletes again (the API server answers 200 and the pod's grace period runs on).
        # So the check counts the pods it deleted, one per ordinal; the 3 creations below show no pod went twice.
        check(first_by_name(by_controller) == first_by_name(deletes),
              "the StatefulSet controller's pod deletions: %s; all: %s" % (by_controller, deletes))
        # The kubelet ends a graceful deletion with a DELETE of its own (grace period 0, the pod's UID as
        # precondition): the only other writer of a pod deletion.
        node_user = "system:node:%s" % before[names[0]]["node"]
        others = [w for w in deletes if w[2] not in (STATEFULSET_CONTROLLER, node_user)]
        check(not others, "pod deletions by someone else: %s" % others)
        check([(n, u) for _, n, u in creates] == [(n, STATEFULSET_CONTROLLER) for n in descending],
              "pod creations: %s" % creates)
        check(app.read_marks() == marks, "the files on the volumes after the rollout: %s, written %s"
              % (app.read_marks(), marks))
        check(app.history() == [1, 2], "kubectl rollout history: %s" % app.history())
        check(len(app.revisions()) == 2, "ControllerRevisions: %s" % [r["metadata"]["name"] for r in app.revisions()])
        warnings = warnings_since(app, events0)
        now = snapshot(after)
        for n in names:
            print("  %s: uid %s -> %s, ip %s -> %s, node %s -> %s" % (n, before[n]["uid"][:8], now[n]["uid"][:8],
                                                                    before[n]["ip"], now[n]["ip"], before[n]["node"],
                                                                    now[n]["node"]))
        print("  kubectl rollout status: %s" % out.strip().splitlines()[-1])
        print("  status at kubectl's exit: currentRevision %s updateRevision" % ("==" if at_exit else "!="))
        print("  pod deletions: %s" % ", ".join("%s by %s" % (n, u) for _, n, u in deletes))
        for e in warnings:
            print("  during the rollout: " + event_line(e))
        print("native statefulset rollout: %d pods, %.1f s (image change to rollout status done), %d pod deletions "
              "(%d DELETEs by the controller, +%d final by the kubelet), %d pod creations, %s, %d Warning Events"
              % (len(after), t1 - t0, len(first_by_name(by_controller)), len(by_controller),
                 len(deletes) - len(by_controller), len(creates),
                 disruption(sampler, names, before, after, t1), len(warnings)))


def refused_deletes(s, ns, since):
    """The StatefulSet controller's pod DELETEs refused by admission since `since`: [(time, pod, message)]."""
    out = []
    for e in s.audit.writes(since, ns=ns, resource="pods", subresource="", user=STATEFULSET_CONTROLLER):
        st = e.get("responseStatus") or {}
        if e.get("verb") == "delete" and st.get("code", 0) >= 400:
            out.append((e["_time"], (e.get("objectRef") or {}).get("name"), st.get("message", "")))
    return sorted(out)


def rollout_status_now(app):
    """`kubectl rollout status --watch=false` as alice: its one line (it exits 0 either way when not done)."""
    out, _ = app.kubectl("rollout", "status", "statefulset/" + app.name, "--watch=false")
    return out.strip()


def dns_records(app):
    """What the cluster's DNS serves for the headless Service's pods: {hostname: (address, ready)} from its
    EndpointSlices (the records NAME-i.web.NS.svc are made from these), and each pod's own hostname/subdomain."""
    out = {}
    for es in app.api.items(ns_path(app.ns, "endpointslices", group="discovery.k8s.io/v1"),
                            labelSelector="kubernetes.io/service-name=" + app.name):
        for e in es.get("endpoints") or []:
            out[e.get("hostname")] = (tuple(e.get("addresses") or []), (e.get("conditions") or {}).get("ready"))
    pods = {p["metadata"]["name"]: (p["spec"].get("hostname"), p["spec"].get("subdomain")) for p in app.pods()}
    return out, pods


def first_seen(sampler, names, pred):
    """{pod name: time of the first sample in which pred(pod) held}."""
    seen = {}
    for t, sample in sampler.samples:
        for p in sample:
            if p["metadata"]["name"] in names and pred(p):
                seen.setdefault(p["metadata"]["name"], t)
    return seen


def s01_statefulset_in_place(s):
    """The in-place counterpart of s00 (the same StatefulSet, opted in): `kubectl set image` and `kubectl rollout
    status` until done. Every pod keeps its UID, IP, node, claim, the file it wrote there and its DNS record
    (EndpointSlice hostname and address); only `app` restarts, once per pod; pods move highest ordinal first, one at
    a time (the default maxUnavailable); the StatefulSet controller deletes and creates no pod (audit log: its
    DELETEs refused while a pod waits its turn, if any) and its status ends as after s00 (one revision current and
    updated, 3 updated, current and ready; rollout history [1, 2]); the record is gone. Prints the figures of s00's
    line for the README's side-by-side table. Then back to V1 by `kubectl rollout undo` with the drain off, in place
    again (history [2, 3])."""
    with statefulset_app(s, "s01") as app:
        pods = app.create_statefulset(replicas=3, opted_in=True)
        names = app.ordinals(3)
        marks = app.write_marks()
        before = snapshot(pods)
        dns0 = dns_records(app)
        rev0 = app.statefulset()["status"]["currentRevision"]
        events0 = event_counts(app)
        sampler, t0, t1, out, warnings = timed_image_change(app, tc.V2, then=lambda: wait_for(
            lambda: app.rolled_out() and IN_PROGRESS not in annotations_of(app.statefulset()), 30,
            "the StatefulSet controller's status at the new revision and the record gone", app, interval=0.2))
        tc.expect_warning(warnings, "3 pods will be updated in place, highest ordinal first")
        check("partitioned roll out complete: 3 new pods have been updated" in out, "rollout status: %s" % out)
        st = app.statefulset()["status"]
        check(st["updateRevision"] != rev0 and st["currentRevision"] == st["updateRevision"]
              and st.get("updatedReplicas") == st.get("currentReplicas") == st.get("readyReplicas") == 3,
              "the StatefulSet's status: %s" % st)
        after = app.pods()
        now = snapshot(after)
        for p in after:
            n = p["metadata"]["name"]
            check((now[n]["uid"], now[n]["ip"], now[n]["node"]) == (before[n]["uid"], before[n]["ip"], before[n]["node"]),
                  "pod %s: uid/ip/node %s, before %s" % (n, (now[n]["uid"], now[n]["ip"], now[n]["node"]),
                                                         (before[n]["uid"], before[n]["ip"], before[n]["node"])))
            check(images(p) == {"app": tc.V2, "sidecar": tc.HOLDER}, "pod %s runs %s" % (n, images(p)))
            check(labels_of(p).get(REVISION_LABEL) == st["updateRevision"], "pod %s at revision %s"
                  % (n, labels_of(p).get(REVISION_LABEL)))
            restarts = {c: now[n]["containers"][c][1] - before[n]["containers"][c][1] for c in ("app", "sidecar")}
            check(restarts == {"app": 1, "sidecar": 0}, "pod %s restarted %s" % (n, restarts))
        moved = first_seen(sampler, names, lambda p: images(p).get("app") == tc.V2)
        check(sorted(moved, key=moved.get) == list(reversed(names)), "pods moved in the order %s"
              % sorted(moved, key=moved.get))
        deletes, creates = pod_writes(s, app.ns, t0, "delete"), pod_writes(s, app.ns, t0, "create")
        check(not deletes and not creates, "pods deleted %s, created %s" % (deletes, creates))
        check(app.read_marks() == marks, "the files on the volumes: %s, written %s" % (app.read_marks(), marks))
        dns1 = dns_records(app)
        check(dns1 == dns0, "DNS records (EndpointSlice hostnames, pods' hostname/subdomain) %s, before %s"
              % (dns1, dns0))
        check(app.history() == [1, 2], "kubectl rollout history: %s" % app.history())
        refused = refused_deletes(s, app.ns, t0)
        warned = warnings_since(app, events0)
        print("  refused DELETEs: %s" % (", ".join("%s at +%.1f s" % (n, t - t0) for t, n, _ in refused) or "none"))
        for e in warned:
            print("  during the update: " + event_line(e))
        print("in-place statefulset rollout: %d pods, %.1f s (image change to rollout status done), %d pod deletions, "
              "%d pod creations, %s, %d Warning Events"
              % (len(after), t1 - t0, len(deletes), len(creates), disruption(sampler, names, before, after, t1),
                 len(warned)))
        # Once more with the drain off (the default drain holds each pod out of its Service 3 s before the restart):
        # back to V1 by `kubectl rollout undo`, the policy annotation written first (not a template change: no
        # update of its own).
        app.kubectl("annotate", "statefulset/web", POLICY + '={"gracePeriodSeconds":0}')
        check(IN_PROGRESS not in annotations_of(app.statefulset()), "the policy annotation started an update")
        before2 = snapshot(after)
        sampler2, t2, t3, out2, undo_warnings = timed_image_change(
            app, tc.V1, change=["rollout", "undo", "statefulset/web"], then=lambda: wait_for(
                lambda: app.rolled_out() and IN_PROGRESS not in annotations_of(app.statefulset()), 30,
                "the update back to %s done" % tc.V1, app, interval=0.2))
        tc.expect_warning(undo_warnings, "3 pods will be updated in place, highest ordinal first")
        check("partitioned roll out complete: 3 new pods have been updated" in out2, "rollout status: %s" % out2)
        check(app.history() == [2, 3], "kubectl rollout history after the undo: %s" % app.history())
        after2 = app.pods()
        now2 = snapshot(after2)
        check(all(now2[n]["uid"] == before[n]["uid"] and images(p)["app"] == tc.V1
                  for n, p in zip(names, after2)), "back to %s:\n%s" % (tc.V1, app.pod_table()))
        check(not pod_writes(s, app.ns, t2, "delete") and not pod_writes(s, app.ns, t2, "create"),
              "pods deleted or created with the drain off")
        print("in-place statefulset rollout, drain off: %d pods, %.1f s (image change to rollout status done), "
              "0 pod deletions, 0 pod creations, %s"
              % (len(after2), t3 - t2, disruption(sampler2, names, before2, after2, t3)))


def s02_statefulset_partition_and_hook(s):
    """A staged in-place update with a pre-update hook (the LB controller's label, played here), and the StatefulSet
    hold under it: the StatefulSet has partition 2. After the image change web-2 waits in PreparingUpdate on its hook
    while the StatefulSet controller's DELETE of it is refused (audit log: 403 with the product's reason; a
    FailedDelete Event) and `kubectl rollout status` waits ("0 out of 1"); released, web-2 moves in place and the
    partitioned rollout is complete ("1 new pods") while web-1 and web-0 stay at the old revision. Lowering the
    partition to 0 goes on in place: web-1 then web-0, each held by its hook, while `kubectl rollout status`, started
    then, waits and succeeds at the end. No pod is deleted or created, every UID is kept. Then an env change (not
    eligible) rolls natively: the controller recreates every pod. Last, an image change held on web-2's hook is
    aborted: the native rolling update recreates every pod, web-2 first, and the record goes.
    Along the way, what a user reads (issue 31 item 4): `kubectl inplace status sts/web` names the held pod and what it
    waits on; held past the StatefulSet's progress-deadline-seconds (5) the update is reported stalled (the progress
    annotation ProgressDeadlineExceeded naming the deadline, the leader's
    inplace_webhook_statefulset_update_stalled 1, `kubectl inplace status --watch` exits 1) and released it is not
    (0); `kubectl inplace pause` holds the update (web-2, already moving, finishes; the partition lowered, nothing
    starts) and `resume` lets it go on; a server-side apply of the user's manifest by a GitOps field manager finds no drift (`kubectl diff
    --server-side`) and changes nothing of the update; the completion and the abort (`kubectl inplace abort sts/web`)
    are in the progress annotation."""
    hook = {"preUpdate": {"labelsHandler": {tc.HANDLER_LABEL: "true"}}}
    with statefulset_app(s, "s02") as app:
        pods = app.create_statefulset(replicas=3, opted_in=True, partition=2, lifecycle=hook, field_manager="gitops")
        names = app.ordinals(3)
        for n in names:
            app.set_label(n, "true")
        bad = s.tools.kubectl("annotate", "statefulset/web", PROGRESS_DEADLINE + "=5s", "-n", app.ns, user="alice",
                              check_rc=False)
        check(bad.returncode != 0 and PROGRESS_DEADLINE in bad.stderr, "a deadline of 5s: %s" % bad.stderr)
        app.kubectl("annotate", "statefulset/web", PROGRESS_DEADLINE + "=5")
        before = snapshot(app.pods())
        t0 = time.time()
        _, warnings = app.kubectl("set", "image", "statefulset/web", "app=" + tc.V2)
        tc.expect_warning(warnings, "1 pod will be updated in place, highest ordinal first; 2 below partition 2 stay")
        record = json.loads(annotations_of(app.statefulset()).get(IN_PROGRESS) or "null")
        check(record and record["from"] != record["to"], "the webhook recorded %s" % record)
        wait_for(lambda: state_of(s.api.get(ns_path(app.ns, "pods", names[2]))) == "PreparingUpdate", 30,
                 "%s held by its pre-update hook" % names[2], app, interval=0.2)
        wait_for(lambda: [n for _, n, _ in refused_deletes(s, app.ns, t0)][:1] == [names[2]], 30,
                 "the controller's DELETE of %s, refused" % names[2], app, interval=0.5)
        _, _, message = refused_deletes(s, app.ns, t0)[0]
        check("is updated in place by inplace-webhook" in message, "the refusal says: %s" % message)
        check("0 out of 1 new pods have been updated" in rollout_status_now(app),
              "kubectl rollout status: %s" % rollout_status_now(app))
        # What the user reads while web-2 is held: the plugin's status, then the stall past the deadline.
        out = inplace(app, "status", "sts/web").stdout
        print("  kubectl inplace status sts/web:\n" + "\n".join("    " + line for line in out.splitlines()))
        table = rows(out)
        check(re.search(r"\] 0/1 pods updated", out) and "sts/web" in out.splitlines()[0], "status:\n%s" % out)
        check(table.get(names[2], ("",))[0] == "PreparingUpdate" and "hook" in table[names[2]][1]
              and all(table.get(n, ("",))[0] == "Normal" for n in names[:2]), "status rows:\n%s" % out)
        report = wait_for(lambda: progress_of(app).get("reason") == "ProgressDeadlineExceeded" and progress_of(app),
                          30, "the stall reported in %s" % PROGRESS, app, interval=0.5)
        check(report["status"] == "False" and "no progress for 5s (%s)" % PROGRESS_DEADLINE in report["message"],
              "the stall: %s" % report)
        stalled_at = time.time()
        check(wait_for(lambda: statefulset_stalled(s, app.ns) == 1, 20, "the stalled gauge at 1", app, interval=0.5), "")
        watched = inplace(app, "status", "sts/web", "--watch", "--timeout=60s", rc=1)
        check("in-place update stuck" in watched.stdout, "status --watch:\n%s" % watched.stdout)
        print("  stalled %.1f s after the image change: %s; status --watch exited 1" % (
            stalled_at - t0, report["message"]))
        # The user's pause: web-2, already moving, finishes; no further pod starts until the resume (below).
        inplace(app, "pause", "sts/web")
        held = annotations_of(app.statefulset())
        check(json.loads(held[IN_PROGRESS])["pausedByUs"] is False and "inplace-webhook.io/pause" not in held,
              "after kubectl inplace pause: %s" % held)
        check("paused by user: yes" in inplace(app, "status", "sts/web").stdout, "status after the pause")
        # The GitOps tool that created it applies the user's manifest (now at V2) server-side while the update runs:
        # nothing of the StatefulSet is held, so it finds no drift, and its apply changes nothing of the update.
        manifest = json.dumps(statefulset(app.name, 3, image=tc.V2, opted_in=True, partition=2, lifecycle=hook))
        record_before = annotations_of(app.statefulset()).get(IN_PROGRESS)
        gitops = dict(user="alice", stdin=manifest, check_rc=False)
        diff = s.tools.kubectl("diff", "--server-side", "--field-manager=gitops", "-f", "-", "-n", app.ns, **gitops)
        check(diff.returncode == 0, "kubectl diff --server-side of the user's manifest during the update (exit %d):\n%s%s"
              % (diff.returncode, diff.stdout, diff.stderr[-500:]))
        applied = s.tools.kubectl("apply", "--server-side", "--field-manager=gitops", "-f", "-", "-n", app.ns, **gitops)
        check(applied.returncode == 0, "kubectl apply --server-side during the update: %s" % applied.stderr[-500:])
        check(annotations_of(app.statefulset()).get(IN_PROGRESS) == record_before, "the apply changed the record")
        print("  kubectl diff --server-side of the user's manifest during the update: no drift; applied: %s"
              % applied.stdout.strip())
        check([state_of(p) for p in app.pods()][:2] == ["Normal", "Normal"], "below the partition:\n%s"
              % app.pod_table())
        app.set_label(names[2], None)  # the LB controller deregisters web-2: the hook is met
        wait_for(lambda: app.statefulset()["status"].get("updatedReplicas") == 1
                 and all(state_of(p) == "Normal" and is_ready(p) for p in app.pods()), 60,
                 "%s moved in place and counted as updated" % names[2], app, interval=0.2)
        app.set_label(names[2], "true")
        time.sleep(tc.SETTLE)
        mid = app.pods()
        check([images(p)["app"] for p in mid] == [tc.V1, tc.V1, tc.V2], "images with partition 2:\n%s"
              % app.pod_table())
        check("partitioned roll out complete: 1 new pods have been updated" in rollout_status_now(app),
              "kubectl rollout status: %s" % rollout_status_now(app))
        check(IN_PROGRESS in annotations_of(app.statefulset()), "the record is gone with the partition at 2")
        # (Progress is reported at most every 2 s.)
        wait_for(lambda: progress_of(app).get("status") == "True"
                 and progress_of(app).get("message", "").startswith("1/1 pods updated"), 10,
                 "the progress report 1/1 with the partition at 2", app, interval=0.2)
        check(wait_for(lambda: statefulset_stalled(s, app.ns) == 0, 20, "the stalled gauge back at 0", app, interval=0.5), "")
        # The partition lowered while paused: nothing starts; resumed, the rest in place, kubectl rollout status
        # waiting meanwhile.
        app.kubectl("patch", "statefulset/web", "-p", json.dumps(
            {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}))
        time.sleep(tc.SETTLE)
        check([(state_of(p), images(p)["app"]) for p in app.pods()][:2] == [("Normal", tc.V1)] * 2,
              "a pod started while the update was paused:\n%s" % app.pod_table())
        inplace(app, "resume", "sts/web")
        check(json.loads(annotations_of(app.statefulset())[IN_PROGRESS])["pausedByUs"] is True, "not resumed")
        status = {}

        def rollout_status():
            try:
                status["out"], _ = app.kubectl("rollout", "status", "statefulset/web", "--timeout=120s", timeout=140)
            except Exception as e:  # noqa: BLE001 - reported below
                status["error"] = e
        watcher = threading.Thread(target=rollout_status)
        watcher.start()
        released, deadline = [], time.time() + 90
        while not (app.rolled_out() and IN_PROGRESS not in annotations_of(app.statefulset())):
            check(time.time() < deadline, "the update did not finish:\n%s" % app.pod_table())
            for p in app.pods():
                n = p["metadata"]["name"]
                if state_of(p) == "PreparingUpdate" and labels_of(p).get(tc.HANDLER_LABEL) == "true":
                    check(watcher.is_alive(), "kubectl rollout status ended before %s moved: %s" % (n, status))
                    app.set_label(n, None)
                    released.append(n)
                elif state_of(p) == "Normal" and labels_of(p).get(tc.HANDLER_LABEL) is None:
                    app.set_label(n, "true")
            time.sleep(0.1)
        watcher.join(30)
        check("partitioned roll out complete: 3 new pods have been updated" in status.get("out", ""),
              "kubectl rollout status: %s" % status)
        check(released == [names[1], names[0]], "hooks met in the order %s" % released)
        # (The report is the end's last write, after the record's removal.)
        report = wait_for(lambda: progress_of(app).get("reason") == "InPlaceUpdateCompleted" and progress_of(app),
                          10, "the completion in the progress report (%s)" % progress_of(app), app, interval=0.2)
        check(report["message"].startswith("3/3 pods updated"), "the progress report at the end: %s" % report)
        after = snapshot(app.pods())
        check(all(after[n]["uid"] == before[n]["uid"] for n in names), "a pod was replaced:\n%s" % app.pod_table())
        deletes, creates = pod_writes(s, app.ns, t0, "delete"), pod_writes(s, app.ns, t0, "create")
        check(not deletes and not creates, "pods deleted %s, created %s" % (deletes, creates))
        failed = [e for e in app.events() if e.get("reason") == "FailedDelete"]
        check(any("updated in place by inplace-webhook" in e.get("message", "") for e in failed),
              "no FailedDelete Event with the product's reason: %s" % [event_line(e) for e in failed])
        refused = refused_deletes(s, app.ns, t0)
        print("  refused DELETEs: %s" % ", ".join("%s at +%.1f s" % (n, t - t0) for t, n, _ in refused))
        # Not eligible: the native rolling update.
        t1 = time.time()
        _, warnings = app.kubectl("set", "env", "statefulset/web", "-c", "app", "MODE=native")
        out, _ = app.kubectl("rollout", "status", "statefulset/web", "--timeout=180s", timeout=200)
        wait_for(app.rolled_out, 30, "the StatefulSet controller's status at the new revision", app, interval=0.2)
        check(IN_PROGRESS not in annotations_of(app.statefulset()), "an env change was recorded")
        native = snapshot(app.pods())
        check(all(native[n]["uid"] != after[n]["uid"] for n in names), "not recreated:\n%s" % app.pod_table())
        deleted = first_by_name(w for w in pod_writes(s, app.ns, t1, "delete") if w[2] == STATEFULSET_CONTROLLER)
        check(deleted == list(reversed(names)), "the controller deleted %s for the env change" % deleted)
        print("  env change: %s; warnings %s" % (out.strip().splitlines()[-1], warnings))
        # The abort: an image change held on web-2's hook, then handed to the native rolling update.
        for n in names:
            app.set_label(n, "true")
        before_abort = snapshot(app.pods())
        app.kubectl("set", "image", "statefulset/web", "app=" + tc.V1)
        wait_for(lambda: state_of(s.api.get(ns_path(app.ns, "pods", names[2]))) == "PreparingUpdate", 30,
                 "%s held by its pre-update hook" % names[2], app, interval=0.2)
        t2 = time.time()
        inplace(app, "abort", "sts/web")
        out, _ = app.kubectl("rollout", "status", "statefulset/web", "--timeout=180s", timeout=200)
        check("partitioned roll out complete: 3 new pods have been updated" in out, "rollout status: %s" % out)
        wait_for(lambda: app.rolled_out() and IN_PROGRESS not in annotations_of(app.statefulset()), 30,
                 "the native rolling update done and the record gone", app, interval=0.2)
        aborted = app.pods()
        check(all(p["metadata"]["uid"] != before_abort[p["metadata"]["name"]]["uid"] and images(p)["app"] == tc.V1
                  and state_of(p) == "Normal" for p in aborted), "after the abort:\n%s" % app.pod_table())
        deleted = first_by_name(w for w in pod_writes(s, app.ns, t2, "delete") if w[2] == STATEFULSET_CONTROLLER)
        check(deleted == list(reversed(names)), "the controller deleted %s after the abort" % deleted)
        check(any(e.get("reason") == "InPlaceUpdateAborted" for e in app.events()), "no InPlaceUpdateAborted Event")
        wait_for(lambda: progress_of(app).get("reason") == "InPlaceUpdateAborted", 10,
                 "the abort in the progress report (%s)" % progress_of(app), app, interval=0.2)
        print("  abort: %s; the controller recreated %s" % (out.strip().splitlines()[-1], ", ".join(deleted)))


SCENARIOS = [s00_native_statefulset_rollout, s01_statefulset_in_place, s02_statefulset_partition_and_hook]
