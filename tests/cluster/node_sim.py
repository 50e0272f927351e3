"""Simulated nodes for scale runs on the real control plane: registers Nodes (tainted and labelled so that only
pods meant for them land there), keeps their Leases and Ready condition fresh as a kubelet does, and plays the
kubelet for the pods the real scheduler binds to them, writing pod status through the real API server:

- a new pod: Running, a containerID/imageID per container, Ready after `start_delay`
- a container whose spec image changed (an in-place update): restarted as the kubelet restarts it (new
  containerID, the new image and imageID, restartCount + 1), Ready again after `start_delay`
- a pod being deleted: its containers stopped, then the final DELETE with grace period 0, as the kubelet's

A start takes `start_delay` for each pod on its own, as a kubelet's pod workers start pods side by side: a pod
waiting out its start holds no worker (a timer queues it again when it is due).

Ready follows the kubelet's rule, readiness gates included (a gate condition that is not True keeps the pod not
Ready), and the pod's other conditions (the loop's gate) are kept: status is written as a strategic merge patch.
The real kubelet's behaviour is what the real node in the same cluster shows; this plays only its API traffic,
one status write per change, for hundreds of pods at once.

    sim = NodeSim(api, nodes=10, pods_per_node=200).start()
    ...
    sim.stop()     # deletes its Nodes (the pods bound to them go with the garbage collector)

Standard library only (kube.Api for the calls).
"""

import hashlib
import heapq
import queue
import threading
import time
import uuid

from kube import ApiError

SIM_LABEL = "inplace-webhook.io/simulated-node"
TAINT = {"key": SIM_LABEL, "value": "true", "effect": "NoSchedule"}


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class NodeSim:
    def __init__(self, api, nodes=10, pods_per_node=200, start_delay=0.2, workers=16, prefix="sim-node"):
        self.api = api
        self.names = ["%s-%d" % (prefix, i) for i in range(nodes)]
        self.pods_per_node = pods_per_node
        self.start_delay = start_delay
        self.work = queue.Queue()
        self.workers = workers
        self.stopping = threading.Event()
        self.latest = {}  # pod key -> the newest object seen, while queued
        self.deleted = set()  # uids whose final DELETE was sent
        self.busy = set()  # pods a worker is syncing: one sync per pod at a time
        self.starting = {}  # pod key -> (what it starts: uid and images, when that start is done, newest object)
        self.timers = []  # heap of (due time, pod key): starts to look at again
        self.lock = threading.Lock()
        self.errors = []

    # --- nodes --------------------------------------------------------------------------------------------
    def _node(self, name):
        cap = {"cpu": "64", "memory": "256Gi", "pods": str(self.pods_per_node)}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {SIM_LABEL: "true", "kubernetes.io/hostname": name,
                                                      "kubernetes.io/os": "linux"}},
                "spec": {"taints": [TAINT]},
                "status": {"capacity": cap, "allocatable": cap}}

    def _node_status(self):
        t = now_rfc3339()
        return {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated",
             "lastHeartbeatTime": t, "lastTransitionTime": t}],
            "nodeInfo": {"kubeletVersion": "v0.0.0-simulated", "containerRuntimeVersion": "simulated://0"}}}

    def _heartbeat(self):
        while not self.stopping.is_set():
            for name in self.names:
                try:
                    self.api.request("PATCH", "/api/v1/nodes/%s/status" % name, self._node_status(),
                                     "application/strategic-merge-patch+json")
                    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name
                    body = {"spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                     "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}}
                    try:
                        self.api.merge_patch(lease, body)
                    except ApiError as e:
                        if e.code != 404:
                            raise
                        body["metadata"] = {"name": name, "namespace": "kube-node-lease"}
                        self.api.create("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", body)
                except Exception as e:  # noqa: BLE001 - keep beating
                    self.errors.append("heartbeat %s: %s" % (name, e))
            self.stopping.wait(8)

    # --- pods ---------------------------------------------------------------------------------------------
    def _watch(self):
        """Watches every pod, keeps those bound to our nodes; re-lists after an error or expiry."""
        mine = set(self.names)
        while not self.stopping.is_set():
            try:
                lst = self.api.get("/api/v1/pods", fieldSelector="spec.nodeName!=")
                for p in lst.get("items") or []:
                    if p["spec"].get("nodeName") in mine:
                        self._enqueue(p)
                rv = lst["metadata"]["resourceVersion"]
                for _, ev in self.api.watch("/api/v1/pods", rv, self.stopping, fieldSelector="spec.nodeName!="):
                    if ev.get("type") == "ERROR":
                        break
                    p = ev.get("object") or {}
                    if ev.get("type") in ("ADDED", "MODIFIED") and p.get("spec", {}).get("nodeName") in mine:
                        self._enqueue(p)
                    elif ev.get("type") == "DELETED":
                        with self.lock:
                            self.latest.pop(self._key(p), None)
                            self.starting.pop(self._key(p), None)
            except Exception as e:  # noqa: BLE001 - re-list
                if not self.stopping.is_set():
                    self.errors.append("watch: %s" % e)
                    time.sleep(0.5)

    def _enqueue(self, p, newer=True):
        """A work queue over the latest object per pod, as an informer's: a key is queued once at a time. An
        object that is not `newer` (a timer's) is queued only when no newer one waits."""
        key = self._key(p)
        with self.lock:
            queued = key in self.latest
            if newer or not queued:
                self.latest[key] = p
        if not queued:
            self.work.put(key)

    def _timer(self):
        """Queues each pod again when its start is due."""
        while not self.stopping.is_set():
            with self.lock:
                due = []
                while self.timers and self.timers[0][0] <= time.time():
                    due.append(heapq.heappop(self.timers)[1])
                ready = [self.starting[k][2] for k in due if k in self.starting]
            for p in ready:
                self._enqueue(p, newer=False)
            self.stopping.wait(0.02)

    def _started(self, key, p, what):
        """Whether the start of `what` (the pod's uid and images) is done; the first call begins it."""
        now = time.time()
        with self.lock:
            cur = self.starting.get(key)
            if cur is None or cur[0] != what:
                self.starting[key] = (what, now + self.start_delay, p)
                heapq.heappush(self.timers, (now + self.start_delay, key))
                return False
            self.starting[key] = (what, cur[1], p)  # the newest object, for the timer to queue
            return now >= cur[1]

    @staticmethod
    def _key(p):
        return "%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])

    def _worker(self):
        while not self.stopping.is_set():
            try:
                key = self.work.get(timeout=0.2)
            except queue.Empty:
                continue
            with self.lock:
                busy = key in self.busy
                if busy:
                    self.work.put(key)  # another worker syncs it: look again after
                    p = None
                else:
                    p = self.latest.pop(key, None)
                    if p is not None:
                        self.busy.add(key)
            if busy:
                time.sleep(0.02)
            if p is None:
                continue
            try:
                self._sync(p)
            except ApiError as e:
                if e.code not in (404, 409):
                    self.errors.append("sync %s: %s" % (key, e))
            except Exception as e:  # noqa: BLE001
                self.errors.append("sync %s: %s" % (key, e))
            finally:
                with self.lock:
                    self.busy.discard(key)

    def _sync(self, p):
        key = self._key(p)
        path = "/api/v1/namespaces/%s/pods/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])
        if p["metadata"].get("deletionTimestamp"):
            # Containers stopped at once; the kubelet's final delete, once per pod.
            with self.lock:
                if p["metadata"]["uid"] in self.deleted:
                    return
                self.deleted.add(p["metadata"]["uid"])
            self.api.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                                              "preconditions": {"uid": p["metadata"]["uid"]}})
            return
        want = {c["name"]: c["image"] for c in p["spec"]["containers"]}
        st = p.get("status") or {}
        have = {c["name"]: c for c in st.get("containerStatuses") or []}
        changed = [n for n, img in want.items() if n not in have or have[n].get("image") != img]
        ready_now = all(h.get("ready") for h in have.values()) and have and not changed
        gates_ok = all(self._cond(p, g["conditionType"]) == "True" for g in p["spec"].get("readinessGates") or [])
        if not changed and (self._cond(p, "Ready") == "True") == (ready_now and gates_ok):
            return  # nothing to report
        if changed and self.start_delay > 0:
            what = (p["metadata"]["uid"], tuple(sorted(want.items())))
            if not self._started(key, p, what):
                return  # starting: the timer queues the pod again when its start is done
        with self.lock:
            self.starting.pop(key, None)
        t = now_rfc3339()
        statuses = []
        for c in p["spec"]["containers"]:
            name, img = c["name"], c["image"]
            old = have.get(name)
            if old is None or name in changed:
                statuses.append({"name": name, "image": img, "imageID": self._image_id(img),
                                 "containerID": "simulated://" + uuid.uuid4().hex, "ready": True, "started": True,
                                 "restartCount": (old or {}).get("restartCount", -1) + 1,
                                 "state": {"running": {"startedAt": t}}})
            else:
                statuses.append(old)
        ready = gates_ok
        conds = [{"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
                 {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
                 {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": t,
                  **({} if ready else {"reason": "ReadinessGatesNotReady"})}]
        patch = {"status": {"phase": "Running", "hostIP": "10.251.0.1", "podIP": st.get("podIP") or self._ip(key),
                            "startTime": st.get("startTime") or t, "conditions": conds,
                            "containerStatuses": statuses}}
        patch["status"]["podIPs"] = [{"ip": patch["status"]["podIP"]}]
        self.api.request("PATCH", path + "/status", patch, "application/strategic-merge-patch+json")

    @staticmethod
    def _cond(p, ctype):
        for c in (p.get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return c.get("status")
        return None

    @staticmethod
    def _image_id(image):
        return "sha256:" + hashlib.sha256(image.encode()).hexdigest()

    @staticmethod
    def _ip(key):
        h = int(hashlib.sha256(key.encode()).hexdigest(), 16)
        return "10.252.%d.%d" % ((h >> 8) % 250, h % 250 + 2)

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self):
        for name in self.names:
            try:
                self.api.create("/api/v1/nodes", self._node(name))
            except ApiError as e:
                if e.code != 409:
                    raise
            self.api.request("PATCH", "/api/v1/nodes/%s/status" % name,
                             {"status": self._node(name)["status"] | self._node_status()["status"]},
                             "application/strategic-merge-patch+json")
        for target in [self._heartbeat, self._watch, self._timer] + [self._worker] * self.workers:
            threading.Thread(target=target, daemon=True).start()
        return self

    def stop(self):
        self.stopping.set()
        for name in self.names:
            try:
                self.api.delete("/api/v1/nodes/" + name)
            except ApiError:
                pass
