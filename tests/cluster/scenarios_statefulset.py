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
from kube import (ENABLED, IN_PROGRESS, PodSampler, annotations_of, check, container_statuses, event_line, images,
                  is_ready, labels_of, live, ns_path, snapshot, wait_for)

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


def statefulset(name, replicas=3, image=tc.V1, size="64Mi", opted_in=False):
    """A StatefulSet (opted in to the product, StatefulSet and template, when `opted_in`): the httpd-demo `app`
    container (the readiness probe of tc.deployment()) with the volume `data` at MOUNT, and a `sidecar` whose image
    never changes; pod management and update strategy left to the API server's defaults (OrderedReady,
    RollingUpdate with partition 0)."""
    app = {"name": "app", "image": image, "ports": [{"name": "http", "containerPort": 8080}],
           "env": [{"name": "STOP_DELAY_SECONDS", "value": "0"}],
           "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1,
                              "failureThreshold": 1},
           "volumeMounts": [{"name": "data", "mountPath": MOUNT}]}
    labels = dict({"app": name}, **({ENABLED: "true"} if opted_in else {}))
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": 10,
                                           "containers": [app, {"name": "sidecar", "image": tc.HOLDER}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                                        "resources": {"requests": {"storage": size}}}}]}}


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

    def create_statefulset(self, replicas=3, timeout=150, opted_in=False):
        """The namespace, the volumes, then the Service and the StatefulSet applied by alice; waits for every ordinal
        Ready and every claim Bound (OrderedReady: one pod after the other). Returns the pods."""
        self.setup_namespace()
        create_volumes(self.s, self.ns, self.name, replicas)
        self.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            headless_service(self.name), statefulset(self.name, replicas, opted_in=opted_in)]}))
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
        with PodSampler(app.all_pods, interval=0.2) as sampler:
            t0 = time.time()
            app.kubectl("set", "image", "statefulset/web", "app=" + tc.V2)
            out, _ = app.kubectl("rollout", "status", "statefulset/web", "--timeout=180s", timeout=200)
            t1 = time.time()
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
        check(first_by_name(by_controller) == first_by_name(deletes) and len(by_controller) == 3,
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
        down, most = not_ready_seconds(sampler, names)
        restarts = container_restarts(sampler.samples + [(t1, after)], before)
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
              "(+%d final by the kubelet), %d pod creations, %d container restarts, not Ready %.1f s in total (%s), "
              "at most %d at once, %d Warning Events"
              % (len(after), t1 - t0, len(by_controller), len(deletes) - len(by_controller), len(creates), restarts,
                 sum(down.values()), ", ".join("%s %.1f s" % (n, down[n]) for n in names), most, len(warnings)))


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


def s01_hold_statefulset_controller(s):
    """The StatefulSet hold (DESIGN.md §4.8) against the real StatefulSet controller, with webhooks.statefulSets
    on (the suite installs the chart so). An eligible image change of an opted-in StatefulSet is recorded
    (in-progress) and the spec stays as alice wrote it (partition 0, RollingUpdate); the controller makes its new
    revision and tries to delete the highest ordinal, and the webhook refuses it (audit log: 403, the product's reason; a FailedDelete Event): no pod is
    deleted, and `kubectl rollout status` waits ("0 out of 3 new pods"). The loop's pod write, played here (the
    image and controller-revision-hash of web-2), moves web-2 in place (same UID, app restarted once): the
    controller counts it as updated ("1 out of 3") and goes on to web-1, refused in turn. The abort hands the rest
    to the native rolling update: web-1 and web-0 are recreated, web-2 is not, and rollout status completes with one
    revision current and updated."""
    with statefulset_app(s, "s01") as app:
        before = snapshot(app.create_statefulset(replicas=3, opted_in=True))
        names = app.ordinals(3)
        rev0 = app.statefulset()["status"]["currentRevision"]
        t0 = time.time()
        _, warnings = app.kubectl("set", "image", "statefulset/web", "app=" + tc.V2)
        tc.expect_warning(warnings, "3 pods will be updated in place, highest ordinal first")
        sts = app.statefulset()
        record = json.loads(annotations_of(sts).get(IN_PROGRESS) or "null")
        check(record and record["from"] != record["to"], "the webhook recorded %s" % record)
        check(sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
              or sts["spec"]["updateStrategy"].get("rollingUpdate", {}).get("partition") == 0,
              "the update strategy is not as alice wrote it: %s" % sts["spec"]["updateStrategy"])
        wait_for(lambda: (lambda st: st.get("observedGeneration") == app.statefulset()["metadata"]["generation"]
                          and st.get("updateRevision") not in (None, rev0))(app.statefulset()["status"]),
                 30, "the StatefulSet controller's new revision", interval=0.2)
        wait_for(lambda: [n for _, n, _ in refused_deletes(s, app.ns, t0)][:1] == [names[2]], 30,
                 "the controller's DELETE of %s, refused" % names[2], interval=0.5)
        time.sleep(tc.SETTLE)
        now = snapshot(app.pods())
        check(all(now[n]["uid"] == before[n]["uid"] for n in names), "a pod was replaced:\n%s" % app.pod_table())
        check(not pod_writes(s, app.ns, t0, "delete"), "pods deleted: %s" % pod_writes(s, app.ns, t0, "delete"))
        _, pod, message = refused_deletes(s, app.ns, t0)[0]
        check("is updated in place by inplace-webhook" in message, "the refusal says: %s" % message)
        check("Waiting for partitioned roll out to finish: 0 out of 3 new pods have been updated" in
              rollout_status_now(app), "kubectl rollout status: %s" % rollout_status_now(app))
        failed = [e for e in app.events() if e.get("reason") == "FailedDelete"]
        check(any("updated in place by inplace-webhook" in e.get("message", "") for e in failed),
              "no FailedDelete Event with the product's reason: %s" % [event_line(e) for e in failed])
        # The loop's pod write for web-2 (played by admin here): the new image and the update revision.
        update_rev = app.statefulset()["status"]["updateRevision"]
        t1 = time.time()
        s.api.strategic_patch(ns_path(app.ns, "pods", names[2]), {
            "metadata": {"labels": {REVISION_LABEL: update_rev}},
            "spec": {"containers": [{"name": "app", "image": tc.V2}]}})
        wait_for(lambda: (lambda p: is_ready(p) and container_statuses(p)["app"].get("restartCount", 0) >= 1)(
            s.api.get(ns_path(app.ns, "pods", names[2]))), 60, "%s restarted in place and Ready" % names[2],
            interval=0.2)
        wait_for(lambda: app.statefulset()["status"].get("updatedReplicas") == 1, 30,
                 "the controller counting %s as updated" % names[2], interval=0.2)
        wait_for(lambda: [n for _, n, _ in refused_deletes(s, app.ns, t1)][:1] == [names[1]], 30,
                 "the controller's DELETE of %s, refused" % names[1], interval=0.5)
        check("1 out of 3 new pods have been updated" in rollout_status_now(app),
              "kubectl rollout status: %s" % rollout_status_now(app))
        mid = snapshot(app.pods())
        check(all(mid[n]["uid"] == before[n]["uid"] for n in names), "a pod was replaced:\n%s" % app.pod_table())
        check(not pod_writes(s, app.ns, t0, "delete"), "pods deleted: %s" % pod_writes(s, app.ns, t0, "delete"))
        # The abort: the native rolling update takes the rest.
        t2 = time.time()
        app.kubectl("annotate", "statefulset/web", "inplace-webhook.io/abort=true")
        out, _ = app.kubectl("rollout", "status", "statefulset/web", "--timeout=180s", timeout=200)
        check("partitioned roll out complete: 3 new pods have been updated" in out, "rollout status: %s" % out)
        wait_for(app.rolled_out, 30, "the StatefulSet controller's status at the new revision", app,
                 interval=0.2)
        after = snapshot(app.pods())
        check(after[names[2]]["uid"] == before[names[2]]["uid"], "%s (moved in place) was recreated" % names[2])
        check(all(after[n]["uid"] != before[n]["uid"] for n in names[:2]), "not recreated:\n%s" % app.pod_table())
        deleted = first_by_name(w for w in pod_writes(s, app.ns, t2, "delete") if w[2] == STATEFULSET_CONTROLLER)
        check(deleted == [names[1], names[0]], "the controller deleted %s after the abort" % deleted)
        refused = refused_deletes(s, app.ns, t0)
        print("  refused DELETEs: %s" % ", ".join("%s at +%.1f s" % (n, t - t0) for t, n, _ in refused))
        print("  refusal: %s" % refused[0][2])


SCENARIOS = [s00_native_statefulset_rollout, s01_hold_statefulset_controller]
