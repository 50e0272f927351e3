"""Cluster simulation: a kubelet (plus scheduler binding), the ReplicaSet controller, the Deployment
controller (after kubernetes/kubernetes pkg/controller/deployment) and a garbage collector.

All controllers run on one worker thread fed by the store's write events (event driven, deduplicated
keys, timers for delays), and write through the same Store code paths as clients: every write bumps
the resourceVersion, produces watch events, is checked for conflicts and passes through the admission
webhooks as the component's own identity (reads stay direct). Controller writes are not subject to
fault injection and are not in the request log.
"""

import calendar
import collections
import functools
import hashlib
import heapq
import itertools
import json
import secrets
import threading
import time
import traceback

import kadmission
import klabels
import kstore
import kvalidation as kv
from kerrors import ApiError

PODS = kstore.resource("pods")
RSS = kstore.resource("replicasets.apps")
DEPLOYS = kstore.resource("deployments.apps")
EVENTS = kstore.resource("events")

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
SKIP_COPY = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED_REPLICAS,
             MAX_REPLICAS, "deprecated.deployment.rollback.to"}
MAX_REV_HISTORY_CHARS = 2000
NODE_NAME = "sim-node-1"
BATCH_SECONDS = 0.005  # owners (ReplicaSet, Deployment) sync at most this long after a child changed
HOST_IP = "10.0.0.11"

# The identities the components' writes carry, as on a real cluster (admission webhooks see them).
KUBELET = kadmission.node_user(NODE_NAME)
RS_CONTROLLER = kadmission.service_account_user("kube-system", "replicaset-controller")
DEPLOY_CONTROLLER = kadmission.service_account_user("kube-system", "deployment-controller")
GC_CONTROLLER = kadmission.service_account_user("kube-system", "generic-garbage-collector")
SCHEDULER = {"username": "system:kube-scheduler", "groups": ["system:authenticated"]}
COMPONENT_USERS = {"replicaset-controller": RS_CONTROLLER, "deployment-controller": DEPLOY_CONTROLLER,
                   "kubelet": KUBELET, "default-scheduler": SCHEDULER}

DEFAULT_SETTINGS = {
    "kubelet": True,
    "replicaSetController": True,
    "deploymentController": True,
    "garbageCollector": True,
    "events": True,
    "restartDelayMs": 100,
    "notReadyMs": 100,
    "startupDelayMs": 50,
}


class Retry(Exception):
    """Abort the current sync and requeue the key (a conflict or a missing object)."""


def now_ts():
    return kstore.now_rfc3339()


@functools.lru_cache(maxsize=8192)
def parse_ts(s):
    """RFC 3339 UTC timestamp (seconds resolution) to epoch seconds; 0 when unparseable."""
    if not s or len(s) < 20:
        return 0.0
    try:
        return float(calendar.timegm((int(s[0:4]), int(s[5:7]), int(s[8:10]), int(s[11:13]), int(s[14:16]),
                                      int(s[17:19]), 0, 0, 0)))
    except ValueError:
        return 0.0


def controller_ref(obj):
    for r in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(r, dict) and r.get("controller"):
            return r
    return None


def make_controller_ref(obj, kind, api_version):
    m = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": m["name"], "uid": m["uid"], "controller": True,
            "blockOwnerDeletion": True}


# ----------------------------------------------------------------------------------------------
# Images as a container runtime reports them.

def normalize_image(image):
    """docker reference normalisation: (repository, tag, digest, full reference)."""
    ref, digest = image, None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    i = ref.find("/")
    first = ref[:i] if i != -1 else ""
    if i == -1 or ("." not in first and ":" not in first and first != "localhost" and first.lower() == first):
        domain, rest = "docker.io", ref
    else:
        domain, rest = first, ref[i + 1:]
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in rest:
        rest = "library/" + rest
    name, tag = rest, None
    j = rest.rfind(":")
    if j != -1 and "/" not in rest[j:]:
        name, tag = rest[:j], rest[j + 1:]
    if tag is None and digest is None:
        tag = "latest"
    repo = domain + "/" + name
    full = repo + (":" + tag if tag else "") + ("@" + digest if digest else "")
    return repo, tag, digest, full


# ----------------------------------------------------------------------------------------------
# Deployment util (pkg/controller/deployment/util)

def fnv32a(data):
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(s):
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in s)


def compute_hash(template, collision_count):
    data = json.dumps(kv.semantic_normalize(template), sort_keys=True, separators=(",", ":")).encode()
    h = fnv32a(data)
    if collision_count is not None:
        for b in int(collision_count).to_bytes(4, "little", signed=False):
            h ^= b
            h = (h * 0x01000193) & 0xFFFFFFFF
    return safe_encode(str(h))


def equal_ignore_hash(t1, t2):
    a, b = kstore.clone(t1 or {}), kstore.clone(t2 or {})
    for t in (a, b):
        labels = (t.get("metadata") or {}).get("labels")
        if labels:
            labels.pop(HASH_LABEL, None)
    return kv.semantic_equal(a, b)


def revision(rs):
    try:
        return int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0") or 0)
    except ValueError:
        return 0


def max_revision(rss):
    m = 0
    for rs in rss:
        m = max(m, revision(rs))
    return m


def rs_replicas(rs):
    return (rs.get("spec") or {}).get("replicas", 1)


def rs_status(rs, key):
    return (rs.get("status") or {}).get(key, 0)


def creation_key(obj):
    m = obj["metadata"]
    return (m.get("creationTimestamp") or "", m["name"])


def scaled_value(v, total, round_up):
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.endswith("%"):
        pct = int(v[:-1])
        x = pct * total
        return -(-x // 100) if round_up else x // 100
    return 0


def is_rolling(d):
    return ((d.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def resolve_fenceposts(d):
    spec = d["spec"]
    ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    desired = spec.get("replicas", 1)
    surge = scaled_value(ru.get("maxSurge", 0) if ru.get("maxSurge") is not None else 0, desired, True)
    unavailable = scaled_value(ru.get("maxUnavailable", 0) if ru.get("maxUnavailable") is not None else 0, desired,
                               False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d):
    if not is_rolling(d):
        return 0
    return resolve_fenceposts(d)[0]


def max_unavailable(d):
    replicas = d["spec"].get("replicas", 1)
    if not is_rolling(d) or replicas == 0:
        return 0
    u = resolve_fenceposts(d)[1]
    return min(u, replicas)


def get_condition(status, ctype):
    for c in (status or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def new_condition(ctype, status, reason, message):
    t = now_ts()
    return {"type": ctype, "status": status, "lastUpdateTime": t, "lastTransitionTime": t, "reason": reason,
            "message": message}


def set_condition(status, cond):
    cur = get_condition(status, cond["type"])
    if cur is not None and cur.get("status") == cond["status"] and cur.get("reason") == cond["reason"]:
        return
    if cur is not None and cur.get("status") == cond["status"]:
        cond["lastTransitionTime"] = cur.get("lastTransitionTime")
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]] + [cond]


def remove_condition(status, ctype):
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != ctype]


def has_progress_deadline(d):
    pds = d["spec"].get("progressDeadlineSeconds")
    return pds is not None and pds != 2147483647


def active_rss(rss):
    return [rs for rs in rss if rs is not None and rs_replicas(rs) > 0]


def sum_spec(rss):
    return sum(rs_replicas(rs) for rs in rss if rs is not None)


def sum_status(rss, key):
    return sum(rs_status(rs, key) for rs in rss if rs is not None)


def set_replicas_annotations(rs, desired, maximum):
    ann = rs["metadata"].setdefault("annotations", {})
    updated = False
    if ann.get(DESIRED_REPLICAS) != str(desired):
        ann[DESIRED_REPLICAS] = str(desired)
        updated = True
    if ann.get(MAX_REPLICAS) != str(maximum):
        ann[MAX_REPLICAS] = str(maximum)
        updated = True
    return updated


def replicas_annotations_need_update(rs, desired, maximum):
    ann = rs["metadata"].get("annotations") or {}
    return ann.get(DESIRED_REPLICAS) != str(desired) or ann.get(MAX_REPLICAS) != str(maximum)


def copy_deployment_annotations(d, rs):
    changed = False
    ann = rs["metadata"].setdefault("annotations", {})
    for k, v in ((d["metadata"].get("annotations")) or {}).items():
        if k in SKIP_COPY or ann.get(k) == v and k in ann:
            continue
        ann[k] = v
        changed = True
    return changed


def set_new_rs_annotations(d, rs, new_revision, exists):
    changed = copy_deployment_annotations(d, rs)
    ann = rs["metadata"].setdefault("annotations", {})
    old_revision = ann.get(REVISION, "")
    try:
        old_int = int(old_revision) if old_revision else 0
    except ValueError:
        return False
    new_int = int(new_revision)
    if old_int < new_int:
        ann[REVISION] = new_revision
        changed = True
    if old_revision and old_int < new_int:
        hist = ann.get(REVISION_HISTORY, "")
        olds = hist.split(",")
        if len(olds[0]) == 0:
            ann[REVISION_HISTORY] = old_revision
        else:
            total = len(hist) + len(old_revision) + 1
            start = 0
            while total > MAX_REV_HISTORY_CHARS and start < len(olds):
                total -= len(olds[start]) + 1
                start += 1
            if total <= MAX_REV_HISTORY_CHARS:
                ann[REVISION_HISTORY] = ",".join(olds[start:] + [old_revision])
    if not exists:
        replicas = d["spec"].get("replicas", 1)
        if set_replicas_annotations(rs, replicas, replicas + max_surge(d)):
            changed = True
    return changed


def find_new_rs(d, rss):
    for rs in sorted(rss, key=creation_key):
        if equal_ignore_hash(rs["spec"].get("template"), d["spec"].get("template")):
            return rs
    return None


def find_old_rss(d, rss):
    new = find_new_rs(d, rss)
    old, all_old = [], []
    for rs in rss:
        if new is not None and rs["metadata"]["uid"] == new["metadata"]["uid"]:
            continue
        all_old.append(rs)
        if rs_replicas(rs) != 0:
            old.append(rs)
    return old, all_old


def deployment_complete(d, status):
    r = d["spec"].get("replicas", 1)
    return (status.get("updatedReplicas", 0) == r and status.get("replicas", 0) == r and
            status.get("availableReplicas", 0) == r and
            status.get("observedGeneration", 0) >= d["metadata"].get("generation", 0))


def deployment_progressing(d, new):
    old = d.get("status") or {}
    old_old = old.get("replicas", 0) - old.get("updatedReplicas", 0)
    new_old = new.get("replicas", 0) - new.get("updatedReplicas", 0)
    return (new.get("updatedReplicas", 0) > old.get("updatedReplicas", 0) or new_old < old_old or
            new.get("readyReplicas", 0) > old.get("readyReplicas", 0) or
            new.get("availableReplicas", 0) > old.get("availableReplicas", 0))


def pod_ready_condition(pod):
    return get_condition(pod.get("status"), "Ready")


def pod_is_ready(pod):
    c = pod_ready_condition(pod)
    return c is not None and c.get("status") == "True"


def pod_active(pod):
    return (not pod["metadata"].get("deletionTimestamp") and
            (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def omit_zero(d, keys):
    for k in keys:
        if d.get(k) == 0:
            del d[k]
    return d


# ----------------------------------------------------------------------------------------------

class Simulation:
    def __init__(self, store, log=None, admission=None):
        self.store = store
        self.admission = admission  # kadmission.Chain: the components' writes pass the webhooks too
        self.log = log or (lambda msg: None)
        self.settings = dict(DEFAULT_SETTINGS)
        self.cv = threading.Condition()
        self.queue = collections.OrderedDict()
        self.timers = []
        self.seq = itertools.count()
        self.busy = False
        self.stopping = False
        self.thread = None
        self.backoff = {}
        self.aliases = {}
        self.kubelet = {}  # (ns, name) -> pod runtime state (of the pod with st["uid"])
        self.next_ip = 2
        self.soon = set()  # keys waiting in timers for a batched sync
        self.orphan_pods = collections.defaultdict(set)
        self.orphan_rss = collections.defaultdict(set)

    # -- control ---------------------------------------------------------------------------------
    def start(self):
        self.thread = threading.Thread(target=self.run, name="sim", daemon=True)
        self.thread.start()

    def stop(self):
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        if self.thread is not None:
            self.thread.join(5)

    def update_settings(self, patch):
        if not isinstance(patch, dict):
            raise ApiError.bad_request("settings must be a JSON object")
        with self.cv:
            for k, v in patch.items():
                if k in ("kubelet", "replicaSetController", "deploymentController", "garbageCollector", "events"):
                    self.settings[k] = bool(v)
                elif k in ("restartDelayMs", "notReadyMs", "startupDelayMs", "bookmarkIntervalMs"):
                    if not isinstance(v, (int, float)) or v < 0:
                        raise ApiError.bad_request("%s must be a non-negative number" % k)
                    self.settings[k] = v
                else:
                    raise ApiError.bad_request("unknown simulation setting %r" % k)
        self.resync()

    def resync(self):
        """Re-examine every object (after a controller was switched on)."""
        keys = []
        with self.store.lock:
            for rt, kind in ((PODS, "pod"), (RSS, "rs"), (DEPLOYS, "deploy")):
                for e in self.store._objects(rt, ""):
                    m = e.obj["metadata"]
                    keys.append((kind, m.get("namespace", ""), m["name"]))
        with self.cv:
            for k in keys:
                self.queue[k] = None
            self.cv.notify_all()

    def reset(self):
        with self.cv:
            self.settings = dict(DEFAULT_SETTINGS)
            self.aliases = {}
            self.backoff = {}

    def set_images(self, mapping):
        if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in mapping.items()):
            raise ApiError.bad_request('images must be a JSON object {"alias":"target"}')
        with self.cv:
            for alias, target in mapping.items():
                self.aliases[normalize_image(alias)[3]] = normalize_image(target)[3]

    def clear_images(self):
        with self.cv:
            self.aliases = {}

    def images(self):
        with self.cv:
            return dict(self.aliases)

    def image_id(self, image):
        full = normalize_image(image)[3]
        with self.cv:
            for _ in range(10):
                if full not in self.aliases:
                    break
                full = self.aliases[full]
        repo, tag, digest, full = normalize_image(full)
        if digest is None:
            digest = "sha256:" + hashlib.sha256(full.encode()).hexdigest()
        return repo + "@" + digest

    def wait_idle(self, timeout):
        deadline = time.time() + timeout
        with self.cv:
            while True:
                pending = [t for t in self.timers if not t[3]]
                if not self.queue and not self.busy and not pending:
                    return True
                left = deadline - time.time()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.05))

    # -- queue -----------------------------------------------------------------------------------
    def enqueue(self, key):
        with self.cv:
            self.queue[key] = None
            self.cv.notify_all()

    def enqueue_after(self, key, delay, background=False):
        with self.cv:
            heapq.heappush(self.timers, (time.time() + max(0.0, delay), next(self.seq), key, background))
            self.cv.notify_all()

    def on_event(self, rt, etype, new, old):
        """Store listener (called under the store lock): route the change to the controllers."""
        meta = new["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        keys = []
        parents = []  # syncs of owners, batched over a few milliseconds
        if rt is PODS:
            keys.append(("pod", ns, name))
            for o in (new, old):
                ref = controller_ref(o) if o else None
                if ref and ref.get("kind") == "ReplicaSet":
                    parents.append(("rs", ns, ref.get("name")))
            if etype != "DELETED" and controller_ref(new) is None and not meta.get("deletionTimestamp"):
                self.orphan_pods[ns].add(name)
                keys.append(("orphan-pod", ns, ""))
            else:
                self.orphan_pods[ns].discard(name)
        elif rt is RSS:
            keys.append(("rs", ns, name))
            for o in (new, old):
                ref = controller_ref(o) if o else None
                if ref and ref.get("kind") == "Deployment":
                    parents.append(("deploy", ns, ref.get("name")))
            if etype != "DELETED" and controller_ref(new) is None and not meta.get("deletionTimestamp"):
                self.orphan_rss[ns].add(name)
                keys.append(("orphan-rs", ns, ""))
            else:
                self.orphan_rss[ns].discard(name)
        elif rt is DEPLOYS:
            keys.append(("deploy", ns, name))
        if etype == "DELETED" and meta.get("uid"):
            keys.append(("gc", meta["uid"], ""))
        with self.cv:
            for k in keys:
                self.queue[k] = None
            due = time.time() + BATCH_SECONDS
            for k in parents:
                if k not in self.queue and k not in self.soon:
                    self.soon.add(k)
                    heapq.heappush(self.timers, (due, next(self.seq), k, False))
            self.cv.notify_all()

    def run(self):
        import os
        if os.environ.get("IW_SIM_PROFILE"):
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
            try:
                self._run()
            finally:
                prof.disable()
                prof.dump_stats(os.environ["IW_SIM_PROFILE"])
        else:
            self._run()

    def _run(self):
        while True:
            with self.cv:
                if self.stopping:
                    return
                now = time.time()
                while self.timers and self.timers[0][0] <= now:
                    _, _, key, _ = heapq.heappop(self.timers)
                    self.soon.discard(key)
                    self.queue[key] = None
                if not self.queue:
                    self.busy = False
                    self.cv.notify_all()
                    timeout = min(self.timers[0][0] - now, 1.0) if self.timers else 1.0
                    self.cv.wait(timeout)
                    continue
                key, _ = self.queue.popitem(last=False)
                self.busy = True
            try:
                self.process(key)
                self.backoff.pop(key, None)
            except Retry:
                self.enqueue_after(key, 0.005)
            except ApiError as e:
                if e.code == 409 or e.code == 404:
                    self.enqueue_after(key, 0.005)
                else:
                    self.log("sim %s: %s" % (key, e.message))
                    self._backoff(key)
            except Exception:  # noqa: BLE001 - the worker must survive any bug
                self.log("sim %s failed: %s" % (key, traceback.format_exc()))
                self._backoff(key)

    def _backoff(self, key):
        n = self.backoff.get(key, 0)
        self.backoff[key] = n + 1
        delay = min(0.05 * (2 ** n), 60.0)
        self.enqueue_after(key, delay, background=delay > 1.0)

    def process(self, key):
        kind = key[0]
        s = self.settings
        if kind == "pod":
            if s["kubelet"]:
                self.sync_pod(key[1], key[2])
        elif kind == "rs":
            if s["replicaSetController"]:
                self.sync_rs(key[1], key[2])
        elif kind == "deploy":
            if s["deploymentController"]:
                self.sync_deployment(key[1], key[2])
        elif kind == "orphan-pod":
            if s["replicaSetController"]:
                for e in self.store.list_entries(RSS, key[1]):
                    self.enqueue(("rs", key[1], e.obj["metadata"]["name"]))
        elif kind == "orphan-rs":
            if s["deploymentController"]:
                for e in self.store.list_entries(DEPLOYS, key[1]):
                    self.enqueue(("deploy", key[1], e.obj["metadata"]["name"]))
        elif kind == "gc":
            if s["garbageCollector"]:
                self.gc(key[1])

    # -- writes ----------------------------------------------------------------------------------
    def admit(self, rt, operation, ns, name, user, subresource="", **kw):
        """Admission for a component's write (reads stay direct, as from an informer cache)."""
        if self.admission is None:
            return None
        return self.admission.bind(rt, operation, ns, name, user, subresource=subresource, **kw)

    def update(self, rt, obj, user, subresource=None):
        """Writes obj (carrying the resourceVersion it was read at) as user; returns the stored object."""
        m = obj["metadata"]
        ns = m.get("namespace", "")
        e = self.store.update(rt, ns, m["name"], lambda cur: obj, subresource=subresource,
                              admit=self.admit(rt, "UPDATE", ns, m["name"], user, subresource or ""))
        return kstore.clone(e.obj)

    def create(self, rt, ns, obj, user):
        in_tree = None
        if rt is PODS:
            def in_tree(o):
                o = kstore.clone(o)
                rt.admit_create(o)
                return o
        return self.store.create(rt, ns, obj, admit=self.admit(rt, "CREATE", ns, "", user, in_tree=in_tree))

    def delete(self, rt, ns, name, user, options=None):
        admit = self.admit(rt, "DELETE", ns, name, user,
                          options=kadmission.options_for("DELETE", delete_options=options))
        return self.store.delete(rt, ns, name, options, admit=admit)

    def record_event(self, obj, etype, reason, message, component):
        if not self.settings["events"]:
            return
        m = obj["metadata"]
        ts = now_ts()
        ev = {"metadata": {"name": "%s.%x" % (m["name"], time.time_ns()), "namespace": m.get("namespace", "")},
              "involvedObject": {"kind": obj.get("kind"), "namespace": m.get("namespace", ""), "name": m["name"],
                                 "uid": m.get("uid"), "apiVersion": obj.get("apiVersion"),
                                 "resourceVersion": m.get("resourceVersion")},
              "reason": reason, "message": message, "source": {"component": component}, "firstTimestamp": ts,
              "lastTimestamp": ts, "count": 1, "type": etype, "reportingComponent": component,
              "reportingInstance": ""}
        try:
            self.create(EVENTS, m.get("namespace", ""), ev, COMPONENT_USERS.get(component, kadmission.ANONYMOUS))
        except ApiError as e:
            self.log("event not recorded: %s" % e.message)

    # -- garbage collector ------------------------------------------------------------------------
    def gc(self, uid):
        policy = self.store.delete_policies.pop(uid, "Background")
        for key, e in self.store.dependents(uid):
            rt = kstore.BY_KEY[key]
            obj = kstore.clone(e.obj)
            refs = obj["metadata"].get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid]
            alive = [r for r in others if self.store.lookup_uid(r.get("uid")) is not None]
            if policy == "Orphan" or alive:
                obj["metadata"]["ownerReferences"] = others
                self.update(rt, obj, GC_CONTROLLER)
            else:
                try:
                    self.delete(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], GC_CONTROLLER,
                                {"propagationPolicy": "Background"})
                except ApiError as err:
                    if err.code != 404:
                        raise

    # -- kubelet ---------------------------------------------------------------------------------
    def sync_pod(self, ns, name):
        e = self.store.get_entry(PODS, ns, name)
        key = (ns, name)
        if e is None:
            self.kubelet.pop(key, None)
            return
        pod = kstore.clone(e.obj)
        uid = pod["metadata"]["uid"]
        if key in self.kubelet and self.kubelet[key]["uid"] != uid:
            del self.kubelet[key]
        spec = pod.get("spec") or {}
        now = time.time()
        if not spec.get("nodeName"):
            self.bind(pod)
            return
        st = self.kubelet.get(key)
        if st is None:
            st = {"uid": uid, "start_at": now + self.settings["startupDelayMs"] / 1000.0, "containers": {},
                  "ip": None, "start_time": now_ts()}
            self.kubelet[key] = st
        status = kstore.clone(pod.get("status") or {})
        wake = []
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        started = now >= st["start_at"]
        if not started:
            wake.append(st["start_at"])
        elif st["ip"] is None:
            st["ip"] = "10.244.%d.%d" % (self.next_ip // 250, self.next_ip % 250 + 2)
            self.next_ip += 1
        statuses = []
        for c in spec.get("containers") or []:
            cname, image = c.get("name"), c.get("image")
            cs = st["containers"].get(cname)
            if started and cs is None:
                cs = {"image": image, "imageID": self.image_id(image), "id": secrets.token_hex(32),
                      "restarts": 0, "startedAt": now_ts(), "ready_at": now, "restart_at": None, "last": None}
                st["containers"][cname] = cs
            if cs is None:
                statuses.append({"name": cname, "state": {"waiting": {"reason": "ContainerCreating"}},
                                 "lastState": {}, "ready": False, "restartCount": 0, "image": image, "imageID": "",
                                 "started": False})
                continue
            if deleting:
                if cs.get("terminated") is None:
                    cs["terminated"] = {"exitCode": 0, "reason": "Completed", "startedAt": cs["startedAt"],
                                        "finishedAt": now_ts(), "containerID": "containerd://" + cs["id"]}
            elif image != cs["image"]:
                if cs["restart_at"] is None:
                    cs["restart_at"] = now + self.settings["restartDelayMs"] / 1000.0
                if now >= cs["restart_at"]:
                    cs["last"] = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": cs["startedAt"],
                                                 "finishedAt": now_ts(), "containerID": "containerd://" + cs["id"]}}
                    cs.update(image=image, imageID=self.image_id(image), id=secrets.token_hex(32),
                              restarts=cs["restarts"] + 1, startedAt=now_ts(),
                              ready_at=now + self.settings["notReadyMs"] / 1000.0, restart_at=None)
                else:
                    wake.append(cs["restart_at"])
            else:
                cs["restart_at"] = None
            ready = not deleting and now >= cs["ready_at"]
            if not deleting and not ready:
                wake.append(cs["ready_at"])
            if deleting:
                state = {"terminated": cs["terminated"]}
            else:
                state = {"running": {"startedAt": cs["startedAt"]}}
            statuses.append({"name": cname, "state": state, "lastState": cs["last"] or {}, "ready": ready,
                             "restartCount": cs["restarts"], "image": normalize_image(cs["image"])[3],
                             "imageID": cs["imageID"], "containerID": "containerd://" + cs["id"],
                             "started": not deleting})
        statuses.sort(key=lambda x: x["name"])
        init_statuses = []
        for c in spec.get("initContainers") or []:
            if started:
                init_statuses.append({"name": c.get("name"), "state": {"terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": st["start_time"], "finishedAt": st["start_time"],
                    "containerID": "containerd://" + hashlib.sha256((uid + c.get("name", "")).encode()).hexdigest()}},
                    "lastState": {}, "ready": True, "restartCount": 0, "image": normalize_image(c.get("image", ""))[3],
                    "imageID": self.image_id(c.get("image", "")), "started": False})
            else:
                init_statuses.append({"name": c.get("name"), "state": {"waiting": {"reason": "PodInitializing"}},
                                      "lastState": {}, "ready": False, "restartCount": 0, "image": c.get("image"),
                                      "imageID": "", "started": False})
        unready = [s["name"] for s in statuses if not s["ready"]]
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        owned = []

        def cond(ctype, ok, reason=None, message=None):
            c = {"type": ctype, "status": "True" if ok else "False"}
            if reason:
                c["reason"] = reason
            if message:
                c["message"] = message
            prev = conds.get(ctype)
            if prev is not None and prev.get("status") == c["status"]:
                c["lastTransitionTime"] = prev.get("lastTransitionTime") or now_ts()
            else:
                c["lastTransitionTime"] = now_ts()
            owned.append(c)

        cond("PodReadyToStartContainers", started and not deleting)
        cond("Initialized", started or not spec.get("initContainers"),
             None if started or not spec.get("initContainers") else "ContainersNotInitialized",
             None if started or not spec.get("initContainers") else
             "containers with incomplete status: [%s]" % " ".join(c.get("name") for c in spec["initContainers"]))
        if deleting:
            containers_ready, reason, msg = False, "PodCompleted", None
        elif unready:
            containers_ready, reason = False, "ContainersNotReady"
            msg = "containers with unready status: [%s]" % " ".join(unready)
        else:
            containers_ready, reason, msg = True, None, None
        gate_msgs = []
        for g in spec.get("readinessGates") or []:
            gc = conds.get(g.get("conditionType"))
            if gc is None:
                gate_msgs.append('corresponding condition of pod readiness gate "%s" does not exist.' %
                                 g.get("conditionType"))
            elif gc.get("status") != "True":
                gate_msgs.append('the status of pod readiness gate "%s" is not "True", but %s' %
                                 (g.get("conditionType"), gc.get("status")))
        if not containers_ready:
            cond("Ready", False, reason, msg)
        elif gate_msgs:
            cond("Ready", False, "ReadinessGatesNotReady", ", ".join(gate_msgs))
        else:
            cond("Ready", True)
        cond("ContainersReady", containers_ready, reason, msg)
        sched = conds.get("PodScheduled") or {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_ts()}
        owned.append(sched)
        owned_types = {c["type"] for c in owned}
        status["conditions"] = owned + [c for c in status.get("conditions") or [] if c.get("type") not in owned_types]
        if deleting:
            status["phase"] = "Succeeded"
        else:
            status["phase"] = "Running" if started else "Pending"
        status["hostIP"] = HOST_IP
        status["hostIPs"] = [{"ip": HOST_IP}]
        if st["ip"]:
            status["podIP"] = st["ip"]
            status["podIPs"] = [{"ip": st["ip"]}]
        status["startTime"] = st["start_time"]
        status["containerStatuses"] = statuses
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        if not kv.semantic_equal(status, pod.get("status")):
            pod["status"] = status
            self.update(PODS, pod, KUBELET, subresource="status")
        if wake:
            self.enqueue_after(("pod", ns, name), max(0.0, min(wake) - time.time()))

    def bind(self, pod):
        """The scheduler: binding sets spec.nodeName and the PodScheduled condition."""
        m = pod["metadata"]

        def mutate(cur):
            cur["spec"]["nodeName"] = NODE_NAME
            st = cur.setdefault("status", {})
            st["conditions"] = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"] + [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_ts()}]
            return cur

        ns = m.get("namespace", "")
        admit = self.admit(PODS, "CREATE", ns, m["name"], SCHEDULER, "binding", kind=("", "v1", "Binding"))
        if admit is not None:  # POST pods/NAME/binding: the webhooks see the Binding
            binding = {"kind": "Binding", "apiVersion": "v1",
                       "metadata": {"name": m["name"], "namespace": ns, "uid": m.get("uid")},
                       "target": {"kind": "Node", "name": NODE_NAME}}
            admit.mutate_versioned(binding, None)
            admit.chain.validate(admit.attributes(binding, None), admit.warnings)
        self.store.update(PODS, ns, m["name"], mutate, subresource="binding")

    # -- ReplicaSet controller ---------------------------------------------------------------------
    def sync_rs(self, ns, name):
        e = self.store.get_entry(RSS, ns, name)
        if e is None:
            return
        rs = kstore.clone(e.obj)
        uid = rs["metadata"]["uid"]
        spec = rs.get("spec") or {}
        selector = spec.get("selector")
        deleting = bool(rs["metadata"].get("deletionTimestamp"))
        sel_reqs = klabels.selector_struct_to_reqs(selector)
        if sel_reqs is None:
            return
        pods = []
        for key, pe in self.store.dependents(uid):
            if key != "pods":
                continue
            ref = controller_ref(pe.obj)
            if not ref or ref.get("uid") != uid:
                continue
            pod = pe.obj
            if not klabels.labels_match(sel_reqs, pod["metadata"].get("labels") or {}):
                # Release: the pod no longer matches the selector.
                if not deleting:
                    p = kstore.clone(pod)
                    p["metadata"]["ownerReferences"] = [r for r in p["metadata"].get("ownerReferences") or []
                                                        if r.get("uid") != uid]
                    self.update(PODS, p, RS_CONTROLLER)
                continue
            pods.append(pod)
        if not deleting:
            for pname in sorted(self.orphan_pods.get(ns, ())):
                pe = self.store.get_entry(PODS, ns, pname)
                if pe is None or controller_ref(pe.obj) is not None or pe.obj["metadata"].get("deletionTimestamp"):
                    continue
                if klabels.selector_struct_matches(selector, pe.obj["metadata"].get("labels") or {}):
                    p = kstore.clone(pe.obj)
                    p["metadata"].setdefault("ownerReferences", []).append(
                        make_controller_ref(rs, "ReplicaSet", "apps/v1"))
                    pods.append(self.update(PODS, p, RS_CONTROLLER))
        active = [p for p in pods if pod_active(p)]
        replicas = spec.get("replicas", 1)
        diff = len(active) - replicas
        if not deleting and diff < 0:
            template = spec.get("template") or {}
            for _ in range(min(-diff, 500)):
                tmeta = template.get("metadata") or {}
                pod = {"metadata": {"generateName": name + "-", "namespace": ns,
                                    "labels": kstore.clone(tmeta.get("labels") or {}),
                                    "ownerReferences": [make_controller_ref(rs, "ReplicaSet", "apps/v1")]},
                       "spec": kstore.clone(template.get("spec") or {})}
                if tmeta.get("annotations"):
                    pod["metadata"]["annotations"] = kstore.clone(tmeta["annotations"])
                if tmeta.get("finalizers"):
                    pod["metadata"]["finalizers"] = list(tmeta["finalizers"])
                try:
                    created = self.create(PODS, ns, pod, RS_CONTROLLER)
                except ApiError as err:
                    self.record_event(rs, "Warning", "FailedCreate", "Error creating: " + err.message,
                                      "replicaset-controller")
                    raise
                self.record_event(rs, "Normal", "SuccessfulCreate",
                                  "Created pod: " + created.obj["metadata"]["name"], "replicaset-controller")
        elif not deleting and diff > 0:
            for pod in self.pods_to_delete(active, diff):
                try:
                    self.delete(PODS, ns, pod["metadata"]["name"], RS_CONTROLLER)
                except ApiError as err:
                    if err.code != 404:
                        raise
                self.record_event(rs, "Normal", "SuccessfulDelete", "Deleted pod: " + pod["metadata"]["name"],
                                  "replicaset-controller")
        # Status from the pods seen at the start of the sync (as the real controller does).
        now = time.time()
        min_ready = spec.get("minReadySeconds", 0) or 0
        tlabels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready = available = fully = 0
        wake = None
        for p in active:
            plabels = p["metadata"].get("labels") or {}
            if all(plabels.get(k) == v for k, v in tlabels.items()):
                fully += 1
            if pod_is_ready(p):
                ready += 1
                since = parse_ts(pod_ready_condition(p).get("lastTransitionTime"))
                if min_ready <= 0 or since + min_ready <= now:
                    available += 1
                else:
                    t = since + min_ready
                    wake = t if wake is None else min(wake, t)
        status = kstore.clone(rs.get("status") or {})
        status.update(replicas=len(active), fullyLabeledReplicas=fully, readyReplicas=ready,
                      availableReplicas=available, observedGeneration=rs["metadata"].get("generation", 0))
        omit_zero(status, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"))
        if not kv.semantic_equal(status, rs.get("status")):
            rs["status"] = status
            self.update(RSS, rs, RS_CONTROLLER, subresource="status")
        if wake is not None:
            self.enqueue_after(("rs", ns, name), wake - now + 0.01)

    @staticmethod
    def pods_to_delete(pods, n):
        """controller.ActivePodsWithRanks ordering: the first pods are deleted first."""
        phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}

        def rank(p):
            spec, status = p.get("spec") or {}, p.get("status") or {}
            ready = pod_is_ready(p)
            ready_since = parse_ts(pod_ready_condition(p).get("lastTransitionTime")) if ready else 0
            restarts = max([c.get("restartCount", 0) for c in status.get("containerStatuses") or []] or [0])
            created = p["metadata"].get("creationTimestamp") or ""
            return (1 if spec.get("nodeName") else 0, phase_rank.get(status.get("phase"), 0), 1 if ready else 0,
                    -ready_since, -restarts, _neg(created), _neg(p["metadata"]["name"]))

        return sorted(pods, key=rank)[:n]

    # -- Deployment controller ---------------------------------------------------------------------
    def sync_deployment(self, ns, name):
        e = self.store.get_entry(DEPLOYS, ns, name)
        if e is None:
            return
        d = kstore.clone(e.obj)
        if klabels.selector_struct_is_empty(d["spec"].get("selector")):
            self.record_event(d, "Warning", "SelectingAll", "This deployment is selecting all pods. A non-empty "
                                                            "selector is required.", "deployment-controller")
            return
        rss = self.rss_for_deployment(d)
        if d["metadata"].get("deletionTimestamp"):
            new_rs, old = self.get_all_rss_and_sync_revision(d, rss, False)
            return self.sync_deployment_status([*old, new_rs], new_rs, d)
        self.check_paused_conditions(d)
        if d["spec"].get("paused"):
            return self.sync(d, rss)
        if self.is_scaling_event(d, rss):
            return self.sync(d, rss)
        if is_rolling(d):
            return self.rollout_rolling(d, rss)
        return self.rollout_recreate(d, rss)

    def rss_for_deployment(self, d):
        uid = d["metadata"]["uid"]
        ns = d["metadata"].get("namespace", "")
        selector = d["spec"].get("selector")
        deleting = bool(d["metadata"].get("deletionTimestamp"))
        out = []
        for key, e in self.store.dependents(uid):
            if key != "replicasets.apps":
                continue
            ref = controller_ref(e.obj)
            if not ref or ref.get("uid") != uid:
                continue
            rs = kstore.clone(e.obj)
            if not klabels.selector_struct_matches(selector, rs["metadata"].get("labels") or {}):
                if not deleting:
                    rs["metadata"]["ownerReferences"] = [r for r in rs["metadata"].get("ownerReferences") or []
                                                         if r.get("uid") != uid]
                    self.update(RSS, rs, DEPLOY_CONTROLLER)
                continue
            out.append(rs)
        if not deleting:
            for rname in sorted(self.orphan_rss.get(ns, ())):
                e = self.store.get_entry(RSS, ns, rname)
                if e is None or controller_ref(e.obj) is not None or e.obj["metadata"].get("deletionTimestamp"):
                    continue
                if klabels.selector_struct_matches(selector, e.obj["metadata"].get("labels") or {}):
                    rs = kstore.clone(e.obj)
                    rs["metadata"].setdefault("ownerReferences", []).append(
                        make_controller_ref(d, "Deployment", "apps/v1"))
                    out.append(self.update(RSS, rs, DEPLOY_CONTROLLER))
        return out

    def write_status(self, d):
        """UpdateStatus(d): status and annotations (the status strategy keeps spec and labels)."""
        stored = self.update(DEPLOYS, d, DEPLOY_CONTROLLER, subresource="status")
        d["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
        return d

    def update_rs(self, rs):
        stored = self.update(RSS, rs, DEPLOY_CONTROLLER)
        rs.clear()
        rs.update(stored)
        return rs

    def check_paused_conditions(self, d):
        if not has_progress_deadline(d):
            return
        status = d.setdefault("status", {})
        cond = get_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == "ProgressDeadlineExceeded":
            return
        paused_exists = cond is not None and cond.get("reason") == "DeploymentPaused"
        if d["spec"].get("paused") and not paused_exists:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused"))
        elif not d["spec"].get("paused") and paused_exists:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentResumed",
                                                "Deployment is resumed"))
        else:
            return
        self.write_status(d)

    def get_all_rss_and_sync_revision(self, d, rss, create):
        _, all_old = find_old_rss(d, rss)
        new_rs = self.get_new_rs(d, rss, all_old, create)
        return new_rs, all_old

    def get_new_rs(self, d, rss, old_rss, create):
        existing = find_new_rs(d, rss)
        new_revision = str(max_revision(old_rss) + 1)
        status = d.setdefault("status", {})
        if existing is not None:
            rs = existing
            ann_updated = set_new_rs_annotations(d, rs, new_revision, True)
            mrs_update = (rs["spec"].get("minReadySeconds", 0) or 0) != (d["spec"].get("minReadySeconds", 0) or 0)
            if ann_updated or mrs_update:
                rs["spec"]["minReadySeconds"] = d["spec"].get("minReadySeconds", 0) or 0
                if rs["spec"]["minReadySeconds"] == 0:
                    del rs["spec"]["minReadySeconds"]
                return self.update_rs(rs)
            needs = self.set_deployment_revision(d, (rs["metadata"].get("annotations") or {}).get(REVISION, ""))
            if has_progress_deadline(d) and get_condition(status, "Progressing") is None:
                set_condition(status, new_condition("Progressing", "True", "FoundNewReplicaSet",
                                                    'Found new replica set "%s"' % rs["metadata"]["name"]))
                needs = True
            if needs:
                self.write_status(d)
            return rs
        if not create:
            return None
        template = kstore.clone(d["spec"].get("template") or {})
        h = compute_hash(template, status.get("collisionCount"))
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = dict(tmeta.get("labels") or {}, **{HASH_LABEL: h})
        selector = kstore.clone(d["spec"].get("selector") or {})
        selector["matchLabels"] = dict(selector.get("matchLabels") or {}, **{HASH_LABEL: h})
        ns = d["metadata"].get("namespace", "")
        rs_name = d["metadata"]["name"] + "-" + h
        rs = {"kind": "ReplicaSet", "apiVersion": "apps/v1",
              "metadata": {"name": rs_name, "namespace": ns, "labels": dict(tmeta["labels"]),
                           "ownerReferences": [make_controller_ref(d, "Deployment", "apps/v1")]},
              "spec": {"replicas": 0, "selector": selector, "template": template}}
        if d["spec"].get("minReadySeconds"):
            rs["spec"]["minReadySeconds"] = d["spec"]["minReadySeconds"]
        count = self.new_rs_new_replicas(d, old_rss + [rs], rs)
        rs["spec"]["replicas"] = count
        set_new_rs_annotations(d, rs, new_revision, False)
        already = False
        try:
            created = kstore.clone(self.create(RSS, ns, rs, DEPLOY_CONTROLLER).obj)
        except ApiError as err:
            if err.code != 409 or err.reason != "AlreadyExists":
                raise
            cur = self.store.get_entry(RSS, ns, rs_name)
            if cur is None:
                raise Retry()
            ref = controller_ref(cur.obj)
            if ref and ref.get("uid") == d["metadata"]["uid"] and equal_ignore_hash(
                    d["spec"].get("template"), cur.obj["spec"].get("template")):
                created = kstore.clone(cur.obj)
                already = True
            else:
                status["collisionCount"] = (status.get("collisionCount") or 0) + 1
                self.write_status(d)
                raise Retry()
        if not already and count > 0:
            self.record_event(d, "Normal", "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d" %
                              (rs_name, count), "deployment-controller")
        needs = self.set_deployment_revision(d, new_revision)
        if not already and has_progress_deadline(d):
            set_condition(status, new_condition("Progressing", "True", "NewReplicaSetCreated",
                                                'Created new replica set "%s"' % rs_name))
            needs = True
        if needs:
            self.write_status(d)
        return created

    @staticmethod
    def set_deployment_revision(d, rev):
        ann = d["metadata"].setdefault("annotations", {})
        if ann.get(REVISION) != rev:
            ann[REVISION] = rev
            return True
        return False

    @staticmethod
    def new_rs_new_replicas(d, all_rss, new_rs):
        replicas = d["spec"].get("replicas", 1)
        if is_rolling(d):
            ru = (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}
            surge = scaled_value(ru.get("maxSurge", 0) if ru.get("maxSurge") is not None else 0, replicas, True)
            current = sum_spec(all_rss)
            max_total = replicas + surge
            if current >= max_total:
                return rs_replicas(new_rs)
            up = min(max_total - current, replicas - rs_replicas(new_rs))
            return rs_replicas(new_rs) + up
        return replicas

    def is_scaling_event(self, d, rss):
        new_rs, old = self.get_all_rss_and_sync_revision(d, rss, False)
        for rs in active_rss([*old, new_rs]):
            desired = (rs["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS)
            if desired is None:
                continue
            try:
                if int(desired) != d["spec"].get("replicas", 1):
                    return True
            except ValueError:
                continue
        return False

    def sync(self, d, rss):
        new_rs, old = self.get_all_rss_and_sync_revision(d, rss, False)
        self.scale(d, new_rs, old)
        if d["spec"].get("paused"):
            self.cleanup(old, d)
        return self.sync_deployment_status([*old, new_rs], new_rs, d)

    def scale(self, d, new_rs, old_rss):
        replicas = d["spec"].get("replicas", 1)
        latest = self.find_active_or_latest(new_rs, old_rss)
        if latest is not None:
            if rs_replicas(latest) == replicas:
                return
            self.scale_rs_and_record(latest, replicas, d)
            return
        if self.is_saturated(d, new_rs):
            for old in active_rss(old_rss):
                self.scale_rs_and_record(old, 0, d)
            return
        if is_rolling(d):
            all_rss = active_rss([*old_rss, new_rs])
            total = sum_spec(all_rss)
            allowed = replicas + max_surge(d) if replicas > 0 else 0
            to_add = allowed - total
            if to_add > 0:
                all_rss.sort(key=lambda rs: (-rs_replicas(rs), _neg_key(creation_key(rs))))
                op = "up"
            elif to_add < 0:
                all_rss.sort(key=lambda rs: (-rs_replicas(rs), creation_key(rs)))
                op = "down"
            else:
                op = ""
            added = 0
            sizes = {}
            for rs in all_rss:
                if to_add != 0:
                    prop = self.proportion(rs, d, to_add, added)
                    sizes[rs["metadata"]["name"]] = rs_replicas(rs) + prop
                    added += prop
                else:
                    sizes[rs["metadata"]["name"]] = rs_replicas(rs)
            for i, rs in enumerate(all_rss):
                n = rs["metadata"]["name"]
                if i == 0 and to_add != 0:
                    sizes[n] = max(0, sizes[n] + to_add - added)
                self.scale_rs(rs, sizes[n], d, op)

    @staticmethod
    def find_active_or_latest(new_rs, old_rss):
        if new_rs is None and not old_rss:
            return None
        olds = sorted(old_rss, key=creation_key, reverse=True)
        active = active_rss([*olds, new_rs])
        if not active:
            return new_rs if new_rs is not None else olds[0]
        if len(active) == 1:
            return active[0]
        return None

    @staticmethod
    def is_saturated(d, rs):
        if rs is None:
            return False
        try:
            desired = int((rs["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS, ""))
        except ValueError:
            return False
        r = d["spec"].get("replicas", 1)
        return rs_replicas(rs) == r and desired == r and rs_status(rs, "availableReplicas") == r

    @staticmethod
    def proportion(rs, d, to_add, added):
        if rs is None or rs_replicas(rs) == 0 or to_add == 0 or to_add == added:
            return 0
        replicas = d["spec"].get("replicas", 1)
        if replicas == 0:
            fraction = -rs_replicas(rs)
        else:
            dep_replicas = replicas + max_surge(d)
            try:
                annotated = int((rs["metadata"].get("annotations") or {}).get(MAX_REPLICAS, ""))
            except ValueError:
                annotated = (d.get("status") or {}).get("replicas", 0)
            if annotated == 0:
                fraction = 0
            else:
                x = rs_replicas(rs) * dep_replicas / annotated
                fraction = int(x + 0.5) if x >= 0 else -int(-x + 0.5)
                fraction -= rs_replicas(rs)
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    def scale_rs_and_record(self, rs, new_scale, d):
        if rs_replicas(rs) == new_scale:
            return False
        op = "up" if rs_replicas(rs) < new_scale else "down"
        return self.scale_rs(rs, new_scale, d, op)

    def scale_rs(self, rs, new_scale, d, op):
        replicas = d["spec"].get("replicas", 1)
        size_update = rs_replicas(rs) != new_scale
        ann_update = replicas_annotations_need_update(rs, replicas, replicas + max_surge(d))
        if not size_update and not ann_update:
            return False
        old_scale = rs_replicas(rs)
        rs["spec"]["replicas"] = new_scale
        set_replicas_annotations(rs, replicas, replicas + max_surge(d))
        self.update_rs(rs)
        if size_update:
            self.record_event(d, "Normal", "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d" %
                              (op, rs["metadata"]["name"], old_scale, new_scale), "deployment-controller")
        return size_update

    def cleanup(self, old_rss, d):
        limit = d["spec"].get("revisionHistoryLimit")
        if limit is None:
            return
        alive = [rs for rs in old_rss if not rs["metadata"].get("deletionTimestamp")]
        diff = len(alive) - limit
        if diff <= 0:
            return
        alive.sort(key=lambda rs: (revision(rs), creation_key(rs)))
        for rs in alive[:diff]:
            if (rs_status(rs, "replicas") != 0 or rs_replicas(rs) != 0 or
                    rs["metadata"].get("generation", 0) > rs_status(rs, "observedGeneration")):
                continue
            try:
                self.delete(RSS, rs["metadata"].get("namespace", ""), rs["metadata"]["name"], DEPLOY_CONTROLLER)
            except ApiError as err:
                if err.code != 404:
                    raise

    def calculate_status(self, all_rss, new_rs, d):
        available = sum_status(all_rss, "availableReplicas")
        total = sum_spec(all_rss)
        unavailable = max(0, total - available)
        old = d.get("status") or {}
        status = {"observedGeneration": d["metadata"].get("generation", 0),
                  "replicas": sum_status(all_rss, "replicas"),
                  "updatedReplicas": sum_status([new_rs], "replicas"),
                  "readyReplicas": sum_status(all_rss, "readyReplicas"),
                  "availableReplicas": available, "unavailableReplicas": unavailable}
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        status["conditions"] = kstore.clone(old.get("conditions") or [])
        if available >= d["spec"].get("replicas", 1) - max_unavailable(d):
            set_condition(status, new_condition("Available", "True", "MinimumReplicasAvailable",
                                                "Deployment has minimum availability."))
        else:
            set_condition(status, new_condition("Available", "False", "MinimumReplicasUnavailable",
                                                "Deployment does not have minimum availability."))
        return status

    @staticmethod
    def _normal_status(status):
        s = omit_zero(dict(status), ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                                     "availableReplicas", "unavailableReplicas"))
        if not s.get("conditions"):
            s.pop("conditions", None)
        return s

    def sync_deployment_status(self, all_rss, new_rs, d):
        all_rss = [rs for rs in all_rss if rs is not None]
        status = self._normal_status(self.calculate_status(all_rss, new_rs, d))
        if kv.semantic_equal(status, d.get("status")):
            return
        d["status"] = status
        self.write_status(d)

    def sync_rollout_status(self, all_rss, new_rs, d):
        all_rss = [rs for rs in all_rss if rs is not None]
        new = self.calculate_status(all_rss, new_rs, d)
        if not has_progress_deadline(d):
            remove_condition(new, "Progressing")
        cur = get_condition(d.get("status"), "Progressing")
        complete = (new["replicas"] == new["updatedReplicas"] and cur is not None and
                    cur.get("reason") == "NewReplicaSetAvailable")
        wake = None
        if has_progress_deadline(d) and not complete:
            rs_name = new_rs["metadata"]["name"] if new_rs is not None else None
            if deployment_complete(d, new):
                msg = ('ReplicaSet "%s" has successfully progressed.' % rs_name if rs_name else
                       'Deployment "%s" has successfully progressed.' % d["metadata"]["name"])
                set_condition(new, new_condition("Progressing", "True", "NewReplicaSetAvailable", msg))
            elif deployment_progressing(d, new):
                msg = ('ReplicaSet "%s" is progressing.' % rs_name if rs_name else
                       'Deployment "%s" is progressing.' % d["metadata"]["name"])
                c = new_condition("Progressing", "True", "ReplicaSetUpdated", msg)
                if cur is not None:
                    if cur.get("status") == "True":
                        c["lastTransitionTime"] = cur.get("lastTransitionTime")
                    remove_condition(new, "Progressing")
                set_condition(new, c)
            else:
                pc = get_condition(new, "Progressing")
                if pc is not None and pc.get("reason") not in ("NewReplicaSetAvailable",):
                    if pc.get("reason") == "ProgressDeadlineExceeded":
                        pass
                    else:
                        due = parse_ts(pc.get("lastUpdateTime")) + d["spec"]["progressDeadlineSeconds"]
                        if due < time.time():
                            msg = ('ReplicaSet "%s" has timed out progressing.' % rs_name if rs_name else
                                   'Deployment "%s" has timed out progressing.' % d["metadata"]["name"])
                            set_condition(new, new_condition("Progressing", "False", "ProgressDeadlineExceeded", msg))
                        else:
                            wake = due - time.time() + 1
        new = self._normal_status(new)
        if not kv.semantic_equal(new, d.get("status")):
            d["status"] = new
            self.write_status(d)
        if wake is not None:
            m = d["metadata"]
            self.enqueue_after(("deploy", m.get("namespace", ""), m["name"]), wake, background=True)

    def rollout_rolling(self, d, rss):
        new_rs, old = self.get_all_rss_and_sync_revision(d, rss, True)
        if new_rs is None:
            raise Retry()
        all_rss = [*old, new_rs]
        if self.reconcile_new_rs(all_rss, new_rs, d):
            return self.sync_rollout_status(all_rss, new_rs, d)
        if self.reconcile_old_rss(all_rss, active_rss(old), new_rs, d):
            return self.sync_rollout_status(all_rss, new_rs, d)
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup(old, d)
        return self.sync_rollout_status(all_rss, new_rs, d)

    def reconcile_new_rs(self, all_rss, new_rs, d):
        replicas = d["spec"].get("replicas", 1)
        if rs_replicas(new_rs) == replicas:
            return False
        if rs_replicas(new_rs) > replicas:
            return self.scale_rs_and_record(new_rs, replicas, d)
        count = self.new_rs_new_replicas(d, all_rss, new_rs)
        return self.scale_rs_and_record(new_rs, count, d)

    def reconcile_old_rss(self, all_rss, old_rss, new_rs, d):
        old_count = sum_spec(old_rss)
        if old_count == 0:
            return False
        all_count = sum_spec(all_rss)
        min_available = d["spec"].get("replicas", 1) - max_unavailable(d)
        new_unavailable = rs_replicas(new_rs) - rs_status(new_rs, "availableReplicas")
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        cleaned = self.cleanup_unhealthy(old_rss, d, max_scaled_down)
        scaled = self.scale_down_old_for_rolling([*old_rss, new_rs], old_rss, d)
        return cleaned + scaled > 0

    def cleanup_unhealthy(self, old_rss, d, max_cleanup):
        old_rss.sort(key=creation_key)
        total = 0
        for rs in old_rss:
            if total >= max_cleanup:
                break
            if rs_replicas(rs) == 0 or rs_replicas(rs) == rs_status(rs, "availableReplicas"):
                continue
            n = min(max_cleanup - total, rs_replicas(rs) - rs_status(rs, "availableReplicas"))
            self.scale_rs_and_record(rs, rs_replicas(rs) - n, d)
            total += n
        return total

    def scale_down_old_for_rolling(self, all_rss, old_rss, d):
        min_available = d["spec"].get("replicas", 1) - max_unavailable(d)
        available = sum_status(all_rss, "availableReplicas")
        if available <= min_available:
            return 0
        old_rss.sort(key=creation_key)
        total = 0
        to_scale = available - min_available
        for rs in old_rss:
            if total >= to_scale:
                break
            if rs_replicas(rs) == 0:
                continue
            n = min(rs_replicas(rs), to_scale - total)
            self.scale_rs_and_record(rs, rs_replicas(rs) - n, d)
            total += n
        return total

    def rollout_recreate(self, d, rss):
        new_rs, old = self.get_all_rss_and_sync_revision(d, rss, False)
        all_rss = [*old, new_rs]
        active_old = active_rss(old)
        scaled = False
        for rs in active_old:
            if self.scale_rs_and_record(rs, 0, d):
                scaled = True
        if scaled:
            return self.sync_rollout_status(all_rss, new_rs, d)
        if self.old_pods_running(new_rs, old):
            return self.sync_rollout_status(all_rss, new_rs, d)
        if new_rs is None:
            new_rs, old = self.get_all_rss_and_sync_revision(d, rss, True)
            if new_rs is None:
                raise Retry()
            all_rss = [*old, new_rs]
        self.scale_rs_and_record(new_rs, d["spec"].get("replicas", 1), d)
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup(old, d)
        return self.sync_rollout_status(all_rss, new_rs, d)

    def old_pods_running(self, new_rs, old_rss):
        if sum_status(old_rss, "replicas") > 0:
            return True
        for rs in old_rss:
            for key, e in self.store.dependents(rs["metadata"]["uid"]):
                if key == "pods" and (e.obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    return True
        return False


class _neg:
    """Reverse ordering for strings inside sort keys."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return self.v > other.v

    def __eq__(self, other):
        return self.v == other.v


def _neg_key(t):
    return tuple(_neg(x) for x in t)
