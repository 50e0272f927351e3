"""Object storage with etcd-like semantics: one global resourceVersion counter, per-resource event
history for watches (with compaction), optimistic concurrency, finalizers, consistent paginated lists
from snapshots, and the registry strategies (defaulting, status/spec reset, generation, validation).

Stored objects are immutable dicts; every write builds a new dict and its JSON encoding once, so lists
and watch events reuse the bytes.
"""

import base64
import bisect
import collections
import json
import threading
import time
import uuid

import klabels
import kpatch
import kvalidation as kv
from kerrors import ApiError, FieldError, GoLiteral


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def clone(obj):
    """A deep copy of a JSON-like value (faster than copy.deepcopy)."""
    return json.loads(json.dumps(obj))


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class GroupResource:
    def __init__(self, group, resource):
        self.group = group
        self.resource = resource

    def qualified(self):
        return self.resource + ("." + self.group if self.group else "")


_META_ORDER = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")


def _ordered(obj, kind, api_version):
    meta = obj.get("metadata") or {}
    m = {k: meta[k] for k in _META_ORDER if k in meta}
    m.update((k, v) for k, v in meta.items() if k not in m)
    out = {"kind": kind, "apiVersion": api_version, "metadata": m}
    for k in ("spec", "status"):
        if k in obj:
            out[k] = obj[k]
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    return out


# ----------------------------------------------------------------------------------------------
# Resource types and their registry strategies.

class ResourceType:
    plural = ""
    kind = ""
    group = ""
    version = "v1"
    namespaced = True
    has_status = False
    has_scale = False
    has_generation = False
    return_deleted_object = False
    allow_create_on_update = False  # PUT of a missing object creates it
    allow_unconditional_update = True  # PUT without metadata.resourceVersion is allowed
    smp_schema = kpatch.GENERIC
    storage = None  # storage key; defaults to the qualified plural
    field_labels = ("metadata.name", "metadata.namespace")

    def __init__(self):
        self.gr = GroupResource(self.group, self.plural)
        self.api_version = (self.group + "/" + self.version) if self.group else self.version
        self.key = self.storage or self.gr.qualified()
        self.list_kind = self.kind + "List"
        self._prefix = ('{"kind":%s,"apiVersion":%s,' % (json.dumps(self.kind), json.dumps(self.api_version))).encode()

    # -- (de)serialisation ------------------------------------------------------------------
    def encode_full(self, entry):
        return entry.body

    def encode_item(self, entry):
        """List items carry no kind/apiVersion, as kube-apiserver's typed lists."""
        body = entry.body
        if body.startswith(self._prefix):
            return b"{" + body[len(self._prefix):]
        return body

    def view(self, obj):
        return obj

    def from_view(self, obj):
        return obj

    def selectable_fields(self, obj):
        meta = obj.get("metadata") or {}
        return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}

    # -- strategy -----------------------------------------------------------------------------
    def default(self, obj):
        pass

    def admit_create(self, obj):
        pass

    def prepare_create(self, obj):
        if self.has_generation:
            obj["metadata"]["generation"] = 1

    def prepare_update(self, new, old):
        if self.has_status:
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        if self.has_generation:
            gen = (old.get("metadata") or {}).get("generation", 1)
            if self.generation_changed(new, old):
                gen += 1
            new["metadata"]["generation"] = gen

    def generation_changed(self, new, old):
        return not kv.semantic_equal(new.get("spec"), old.get("spec"))

    def prepare_status_update(self, new, old):
        new["spec"] = clone(old.get("spec"))
        if new["spec"] is None:
            new.pop("spec")

    def validate(self, obj):
        return kv.validate_object_meta(obj.get("metadata"))

    def validate_update(self, new, old):
        return self.validate(new) + kv.validate_object_meta_update(new, old)

    def validate_status_update(self, new, old):
        return kv.validate_workload_status_update(new, old)


class Pods(ResourceType):
    plural, kind = "pods", "Pod"
    has_status = True
    has_generation = True
    return_deleted_object = True
    smp_schema = kpatch.POD
    field_labels = ("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                    "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                    "status.podIP", "status.nominatedNodeName")

    def selectable_fields(self, obj):
        f = super().selectable_fields(obj)
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        f["spec.nodeName"] = spec.get("nodeName", "")
        f["spec.restartPolicy"] = spec.get("restartPolicy", "")
        f["spec.schedulerName"] = spec.get("schedulerName", "")
        f["spec.serviceAccountName"] = spec.get("serviceAccountName", "")
        f["spec.hostNetwork"] = "true" if spec.get("hostNetwork") else "false"
        f["status.phase"] = status.get("phase", "")
        f["status.podIP"] = status.get("podIP", "")
        f["status.nominatedNodeName"] = status.get("nominatedNodeName", "")
        return f

    def default(self, obj):
        kv.default_pod(obj)

    def admit_create(self, obj):
        kv.admit_pod_create(obj)

    def prepare_create(self, obj):
        super().prepare_create(obj)
        obj["status"] = {"phase": "Pending", "qosClass": kv.qos_class(obj.get("spec"))}

    def prepare_status_update(self, new, old):
        super().prepare_status_update(new, old)
        nm, om = new["metadata"], old.get("metadata") or {}
        if "ownerReferences" in om:
            nm["ownerReferences"] = clone(om["ownerReferences"])
        else:
            nm.pop("ownerReferences", None)
        st = new.get("status")
        if isinstance(st, dict) and not st.get("qosClass") and (old.get("status") or {}).get("qosClass"):
            st["qosClass"] = old["status"]["qosClass"]

    def validate(self, obj):
        return kv.validate_pod(obj)

    def validate_update(self, new, old):
        return kv.validate_pod_update(new, old)

    def validate_status_update(self, new, old):
        return kv.validate_pod_status_update(new, old)


class Deployments(ResourceType):
    plural, kind, group = "deployments", "Deployment", "apps"
    has_status = True
    has_scale = True
    has_generation = True
    smp_schema = kpatch.DEPLOYMENT

    def default(self, obj):
        kv.default_deployment(obj)

    def prepare_create(self, obj):
        super().prepare_create(obj)
        obj["status"] = {}

    def generation_changed(self, new, old):
        return (not kv.semantic_equal(new.get("spec"), old.get("spec")) or
                not kv.semantic_equal((new.get("metadata") or {}).get("annotations"),
                                      (old.get("metadata") or {}).get("annotations")))

    def prepare_status_update(self, new, old):
        super().prepare_status_update(new, old)
        om = old.get("metadata") or {}
        if "labels" in om:
            new["metadata"]["labels"] = clone(om["labels"])
        else:
            new["metadata"].pop("labels", None)

    def validate(self, obj):
        return kv.validate_deployment(obj)

    def validate_update(self, new, old):
        return kv.validate_deployment_update(new, old)


class ReplicaSets(ResourceType):
    plural, kind, group = "replicasets", "ReplicaSet", "apps"
    has_status = True
    has_scale = True
    has_generation = True
    smp_schema = kpatch.REPLICASET
    field_labels = ("metadata.name", "metadata.namespace", "status.replicas")

    def selectable_fields(self, obj):
        f = super().selectable_fields(obj)
        f["status.replicas"] = str((obj.get("status") or {}).get("replicas", 0))
        return f

    def default(self, obj):
        kv.default_replicaset(obj)

    def prepare_create(self, obj):
        super().prepare_create(obj)
        obj["status"] = {"replicas": 0}

    def validate(self, obj):
        return kv.validate_replicaset(obj)

    def validate_update(self, new, old):
        return kv.validate_replicaset_update(new, old)


class StatefulSets(ResourceType):
    """Stored, listed and watched (the loop watches the opted-in ones) with the object checks every resource gets;
    no StatefulSet validation and no controller: the scenarios on this server run Deployments, StatefulSets run on
    the real cluster (tests/cluster/scenarios_statefulset.py)."""
    plural, kind, group = "statefulsets", "StatefulSet", "apps"
    has_status = True
    has_generation = True


class Leases(ResourceType):
    plural, kind, group = "leases", "Lease", "coordination.k8s.io"
    allow_create_on_update = True
    allow_unconditional_update = False

    def validate(self, obj):
        return kv.validate_lease(obj)

    def validate_update(self, new, old):
        return kv.validate_lease_update(new, old)


class Events(ResourceType):
    plural, kind = "events", "Event"
    allow_create_on_update = True
    field_labels = ("metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
                    "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
                    "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent",
                    "source", "type")

    def selectable_fields(self, obj):
        f = super().selectable_fields(obj)
        io = obj.get("involvedObject") or {}
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
            f["involvedObject." + k] = io.get(k, "")
        f["reason"] = obj.get("reason", "")
        f["reportingComponent"] = obj.get("reportingComponent", "")
        f["source"] = (obj.get("source") or {}).get("component", "")
        f["type"] = obj.get("type", "")
        return f

    def validate(self, obj):
        return kv.validate_event(obj)

    def validate_update(self, new, old):
        return kv.validate_event(new) + kv.validate_object_meta_update(new, old)


_EVENTS_V1_MAP = [  # (events.k8s.io/v1 field, core/v1 field)
    ("regarding", "involvedObject"), ("note", "message"), ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"), ("reportingController", "reportingComponent"),
]


class EventsV1(Events):
    """events.k8s.io/v1: a view over the same storage as core/v1 events (as in kube-apiserver)."""
    group = "events.k8s.io"
    storage = "events"
    field_labels = ("metadata.name", "metadata.namespace")

    def view(self, obj):
        out = {}
        for k, v in obj.items():
            for new, old in _EVENTS_V1_MAP:
                if k == old:
                    k = new
                    break
            out[k] = v
        out["kind"] = self.kind
        out["apiVersion"] = self.api_version
        return _ordered(out, self.kind, self.api_version)

    def from_view(self, obj):
        out = {}
        for k, v in obj.items():
            for new, old in _EVENTS_V1_MAP:
                if k == new:
                    k = old
                    break
            out[k] = v
        out["kind"] = "Event"
        out["apiVersion"] = "v1"
        return out

    def encode_full(self, entry):
        return dumps(self.view(entry.obj))

    def encode_item(self, entry):
        v = self.view(entry.obj)
        v.pop("kind", None)
        v.pop("apiVersion", None)
        return dumps(v)

    def selectable_fields(self, obj):
        return ResourceType.selectable_fields(self, obj)

    def validate(self, obj):
        return kv.validate_event(obj, events_api=True)


RESOURCES = [Pods(), Deployments(), ReplicaSets(), StatefulSets(), Leases(), Events(), EventsV1()]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KEY = {r.key: r for r in RESOURCES if r.storage is None}
BY_KIND = {r.kind: r for r in BY_KEY.values()}


def resource(key):
    return BY_KEY[key]


# ----------------------------------------------------------------------------------------------

class Entry:
    """One stored version. Current versions keep their decoded object; versions that only the
    watch history still references drop it (it is decoded again from the bytes if needed) and keep
    the small label/field attributes that watch filtering needs."""
    __slots__ = ("_obj", "body", "rv", "_attrs")

    def __init__(self, obj, body, rv):
        self._obj = obj
        self.body = body
        self.rv = rv
        self._attrs = None

    @property
    def obj(self):
        o = self._obj
        return o if o is not None else json.loads(self.body)

    def attrs(self):
        a = self._attrs
        if a is None:
            o = self.obj
            srt = BY_KIND.get(o.get("kind"))
            a = self._attrs = (dict((o.get("metadata") or {}).get("labels") or {}),
                               srt.selectable_fields(o) if srt else {})
        return a

    def release(self):
        self.attrs()
        self._obj = None


class EventLog:
    def __init__(self):
        self.events = []  # (rv, type, entry, old_entry)
        self.rvs = []
        self.offset = 0  # absolute index of events[0]
        self.compacted_rv = 0  # events with rv <= compacted_rv are gone

    def end(self):
        return self.offset + len(self.events)

    def append(self, ev):
        self.events.append(ev)
        self.rvs.append(ev[0])

    def trim(self, limit):
        if len(self.events) > limit:
            drop = len(self.events) - limit + limit // 10
            self.compacted_rv = max(self.compacted_rv, self.rvs[drop - 1])
            del self.events[:drop]
            del self.rvs[:drop]
            self.offset += drop

    def compact(self, rv):
        n = bisect.bisect_right(self.rvs, rv)
        del self.events[:n]
        del self.rvs[:n]
        self.offset += n
        self.compacted_rv = max(self.compacted_rv, rv)


def _parse_rv(s, what="resource version"):
    try:
        v = int(s)
        if v < 0:
            raise ValueError
        return v
    except (TypeError, ValueError):
        raise ApiError.bad_request('invalid %s: %s' % (what, s))


def _continue_encode(rv, start, snap):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\u0000", "snap": snap},
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _continue_decode(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        d = json.loads(raw)
        if d.get("v") != "meta.k8s.io/v1":
            raise ValueError("unsupported version")
        return int(d["rv"]), d["start"].rstrip("\u0000"), d.get("snap")
    except Exception as e:  # noqa: BLE001 - any malformed token is a 400
        raise ApiError.bad_request("continue key is not valid: %s" % e)


class Store:
    def __init__(self, history_limit=20000):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = 1
        self.data = collections.defaultdict(lambda: collections.defaultdict(dict))  # key -> ns -> name -> Entry
        self.logs = collections.defaultdict(EventLog)
        self.owner_index = collections.defaultdict(set)  # owner uid -> {(key, ns, name)}
        self.uid_index = {}  # uid -> (key, ns, name)
        self.listeners = []
        self.history_limit = history_limit
        self.compacted_rv = 0
        self.snapshots = collections.OrderedDict()
        self.snapshot_seq = 0
        self.delete_policies = {}  # uid -> propagationPolicy requested when it was deleted

    # -- helpers --------------------------------------------------------------------------------
    def current_rv(self):
        with self.lock:
            return self.rv

    def _objects(self, rt, ns):
        d = self.data[rt.key]
        if ns:
            return list(d[ns].values()) if ns in d else []
        out = []
        for per_ns in d.values():
            out.extend(per_ns.values())
        return out

    def get_entry(self, rt, ns, name):
        with self.lock:
            per_ns = self.data[rt.key].get(ns)
            return per_ns.get(name) if per_ns else None

    def get(self, rt, ns, name):
        e = self.get_entry(rt, ns, name)
        if e is None:
            raise ApiError.not_found(rt.gr, name)
        return e

    def lookup_uid(self, uid):
        with self.lock:
            loc = self.uid_index.get(uid)
            if not loc:
                return None
            key, ns, name = loc
            return self.data[key][ns].get(name)

    def dependents(self, uid):
        with self.lock:
            out = []
            for key, ns, name in self.owner_index.get(uid, ()):
                e = self.data[key][ns].get(name)
                if e is not None:
                    out.append((key, e))
            return out

    def list_entries(self, rt, ns):
        with self.lock:
            return self._objects(rt, ns)

    # -- commit ---------------------------------------------------------------------------------
    def _store_entry(self, rt, obj, rv):
        srt = BY_KEY[rt.key]
        obj = drop_nulls(obj)
        obj["metadata"]["resourceVersion"] = str(rv)
        obj = _ordered(obj, srt.kind, srt.api_version)
        return Entry(obj, dumps(obj), rv)

    def _index(self, key, old, new):
        def refs(e):
            if e is None:
                return set()
            return {r.get("uid") for r in (e.obj["metadata"].get("ownerReferences") or []) if isinstance(r, dict)}

        base = (old or new).obj["metadata"]
        loc = (key, base.get("namespace", ""), base["name"])
        for uid in refs(old) - refs(new):
            s = self.owner_index.get(uid)
            if s:
                s.discard(loc)
                if not s:
                    del self.owner_index[uid]
        for uid in refs(new) - refs(old):
            self.owner_index[uid].add(loc)
        if new is None:
            self.uid_index.pop(base.get("uid"), None)
        else:
            self.uid_index[base.get("uid")] = loc

    def _commit(self, rt, etype, new, old):
        """new: the stored entry (for DELETED the deleted object stamped with the deletion RV)."""
        meta = new.obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        if etype == "DELETED":
            del self.data[rt.key][ns][name]
            if not self.data[rt.key][ns]:
                del self.data[rt.key][ns]
            self._index(rt.key, old, None)
        else:
            self.data[rt.key][ns][name] = new
            self._index(rt.key, old, new)
        self.rv = new.rv
        log = self.logs[rt.key]
        log.append((new.rv, etype, new, old))
        log.trim(self.history_limit)
        self.cond.notify_all()
        srt = BY_KEY[rt.key]
        new_obj, old_obj = new.obj, old.obj if old else None
        if old is not None:
            old.release()
        if etype == "DELETED":
            new.release()
        for fn in self.listeners:
            fn(srt, etype, new_obj, old_obj)

    # -- create ---------------------------------------------------------------------------------
    def create(self, rt, ns, obj, dry_run=False, internal=False, admit=None):
        """Creates obj. admit (a kadmission.Binding, or None when no webhook is configured) runs the
        mutating webhooks after defaulting and the built-in admission plugins, and the validating
        ones after validation, both outside the store lock, as kube-apiserver's create handler does."""
        if not isinstance(obj, dict):
            raise ApiError.bad_request("Object 'Kind' is missing in the request body")
        obj = clone(obj)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if meta.get("namespace") and meta["namespace"] != ns:
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent on "
                                       "the request")
        meta["namespace"] = ns
        if meta.get("resourceVersion"):
            raise ApiError.bad_request("resourceVersion can not be set for Create requests")
        rt.default(obj)
        rt.admit_create(obj)
        if admit is not None:
            obj = admit.mutate(obj, None)
            meta = obj.get("metadata")
            if not isinstance(meta, dict):
                raise ApiError.bad_request("metadata must be an object")
            if meta.get("namespace") and meta["namespace"] != ns:
                raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                           "sent on the request")
            meta["namespace"] = ns
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                  "selfLink"):
            meta.pop(k, None)
        rt.prepare_create(obj)
        meta["creationTimestamp"] = now_rfc3339()
        meta["uid"] = str(uuid.uuid4())
        if admit is None:
            with self.lock:
                self._generate_name(rt, ns, meta)
                self._validate_create(rt, obj)
                return self._commit_create(rt, ns, obj, dry_run)
        with self.lock:
            generated = self._generate_name(rt, ns, meta)
        self._validate_create(rt, obj)
        admit.validate(obj, None)
        with self.lock:
            if generated and self.get_entry(rt, ns, meta["name"]) is not None:
                self._generate_name(rt, ns, meta, force=True)
            return self._commit_create(rt, ns, obj, dry_run)

    def _generate_name(self, rt, ns, meta, force=False):
        if (force or not meta.get("name")) and meta.get("generateName"):
            for _ in range(100):
                candidate = meta["generateName"] + kv.random_suffix()
                if self.get_entry(rt, ns, candidate) is None:
                    meta["name"] = candidate
                    return True
        return False

    @staticmethod
    def _validate_create(rt, obj):
        errs = rt.validate(obj)
        if errs:
            meta = obj["metadata"]
            raise ApiError.invalid(rt.group, rt.kind, meta.get("name") or meta.get("generateName") or "", errs)

    def _commit_create(self, rt, ns, obj, dry_run):
        meta = obj["metadata"]
        if self.get_entry(rt, ns, meta["name"]) is not None:
            raise ApiError.already_exists(rt.gr, meta["name"])
        if dry_run:
            srt = BY_KEY[rt.key]
            obj = _ordered(drop_nulls(obj), srt.kind, srt.api_version)
            return Entry(obj, dumps(obj), 0)
        entry = self._store_entry(rt, obj, self.rv + 1)
        self._commit(rt, "ADDED", entry, None)
        return entry

    # -- update / patch ---------------------------------------------------------------------------
    def update(self, rt, ns, name, mutate, subresource=None, dry_run=False, admit=None):
        """GuaranteedUpdate: mutate(current_obj_copy) returns the desired object. Applies the
        optimistic-concurrency check, strategies and validation; a no-op write is not stored.
        Returns the resulting Entry.

        With admit (a kadmission.Binding), the mutating webhooks run on the desired object after
        defaulting and the validating ones after validation, outside the lock; if the object changed
        meanwhile, a request without a resourceVersion starts again from the new state (patches are
        re-applied, admission runs again) and one with a resourceVersion gets 409."""
        if admit is None:
            with self.lock:
                cur = self.get(rt, ns, name)
                old = cur.obj
                new = self._desired(rt, ns, name, mutate(json.loads(cur.body)))
                self._check_rv(rt, name, new, cur)
                rt.default(new)
                kv.reset_system_meta_on_update(new, old)
                self._prepare_and_validate(rt, name, new, old, subresource)
                return self._commit_update(rt, cur, new, old, dry_run)
        for _ in range(100):
            with self.lock:
                cur = self.get(rt, ns, name)
                body = cur.body
                old = cur.obj
            new = self._desired(rt, ns, name, mutate(json.loads(body)))
            rt.default(new)
            new = admit.mutate(new, old)
            new = self._desired(rt, ns, name, new)
            self._check_rv(rt, name, new, cur)
            kv.reset_system_meta_on_update(new, old)
            self._prepare_and_validate(rt, name, new, old, subresource)
            admit.validate(new, old)
            with self.lock:
                if self.get_entry(rt, ns, name) is not cur:
                    # As GuaranteedUpdate: start again from the new state. A request that carried
                    # a resourceVersion then fails the check above with 409.
                    continue
                return self._commit_update(rt, cur, new, old, dry_run)
        raise ApiError.stale(rt.gr, name)

    @staticmethod
    def _desired(rt, ns, name, new):
        if not isinstance(new, dict):
            raise ApiError.bad_request("the body of the request must be a JSON object")
        new = clone(new)
        meta = new.get("metadata")
        if meta is None:
            meta = new["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if meta.get("namespace") and meta["namespace"] != ns:
            raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent "
                                       "on the request")
        meta["namespace"] = ns
        if meta.get("name") != name:
            raise ApiError.bad_request("the name of the object (%s) does not match the name on the URL (%s)" %
                                       (meta.get("name") or "", name))
        return new

    @staticmethod
    def _check_rv(rt, name, new, cur):
        want_rv = new["metadata"].get("resourceVersion")
        if want_rv:
            if _parse_rv(want_rv) != cur.rv:
                raise ApiError.stale(rt.gr, name)
        elif not rt.allow_unconditional_update:
            raise ApiError.invalid(rt.group, rt.plural, name, [FieldError.invalid(
                "metadata.resourceVersion", GoLiteral("0x0"), "must be specified for an update")])
        return want_rv

    @staticmethod
    def _prepare_and_validate(rt, name, new, old, subresource):
        if subresource == "binding":  # internal only: the simulated scheduler
            errs = []
        elif subresource == "status":
            rt.prepare_status_update(new, old)
            errs = rt.validate_status_update(new, old)
        else:
            rt.prepare_update(new, old)
            errs = rt.validate_update(new, old)
        if errs:
            raise ApiError.invalid(rt.group, rt.kind, name, errs)

    def _commit_update(self, rt, cur, new, old, dry_run):
        meta = new["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        srt = BY_KEY[rt.key]
        new = _ordered(drop_nulls(new), srt.kind, srt.api_version)
        if old["metadata"].get("deletionTimestamp") and not meta.get("finalizers"):
            # Finalizers emptied on an object being deleted: it goes away now (the stored
            # state, not the update, is what the DELETED event and the answer carry).
            if dry_run:
                return cur
            return self._remove(rt, cur)
        if new == old or kv.semantic_equal(new, old):
            return cur
        if dry_run:
            return Entry(new, dumps(new), cur.rv)
        entry = self._store_entry(rt, new, self.rv + 1)
        self._commit(rt, "MODIFIED", entry, cur)
        return entry

    def _remove(self, rt, cur):
        obj = json.loads(cur.body)
        entry = self._store_entry(rt, obj, self.rv + 1)
        self._commit(rt, "DELETED", entry, cur)
        return cur

    # -- delete ---------------------------------------------------------------------------------
    def delete(self, rt, ns, name, options=None, dry_run=False, admit=None):
        """Returns (entry, deleted_now). With admit, DELETE admission runs (outside the lock) on the
        current object after the preconditions are checked, as the storage's conditional delete
        does; if the object changes meanwhile, it runs again."""
        options = options or {}
        if admit is None:
            with self.lock:
                return self._delete_locked(rt, ns, name, options, dry_run)
        for _ in range(100):
            with self.lock:
                cur = self.get(rt, ns, name)
            self._check_preconditions(rt, name, cur.obj["metadata"], options)
            admit.delete(cur.obj)
            with self.lock:
                if self.get_entry(rt, ns, name) is not cur:
                    continue
                return self._delete_locked(rt, ns, name, options, dry_run)
        raise ApiError.stale(rt.gr, name)

    @staticmethod
    def _check_preconditions(rt, name, meta, options):
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise ApiError.conflict(rt.gr, name, "Precondition failed: UID in precondition: %s, UID in object "
                                                 "meta: %s" % (pre["uid"], meta.get("uid")))
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise ApiError.conflict(rt.gr, name, "Precondition failed: ResourceVersion in precondition: %s, "
                                                 "ResourceVersion in object meta: %s" %
                                    (pre["resourceVersion"], meta.get("resourceVersion")))

    def _delete_locked(self, rt, ns, name, options, dry_run):
        cur = self.get(rt, ns, name)
        meta = cur.obj["metadata"]
        self._check_preconditions(rt, name, meta, options)
        policy = options.get("propagationPolicy")
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return cur, False
            new = json.loads(cur.body)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if dry_run:
                return Entry(new, dumps(new), cur.rv), False
            if policy:
                self.delete_policies[meta.get("uid")] = policy
            entry = self._store_entry(rt, new, self.rv + 1)
            self._commit(rt, "MODIFIED", entry, cur)
            return entry, False
        if dry_run:
            return cur, True
        if policy:
            self.delete_policies[meta.get("uid")] = policy
        return self._remove(rt, cur), True

    # -- list -----------------------------------------------------------------------------------
    def list(self, rt, ns, lreqs, freqs, limit=0, cont=None, rv_param=None, rv_match=None):
        """Returns (entries, rv, continue_token, remaining_item_count)."""
        with self.lock:
            if rv_match == "Exact" and rv_param:
                r = _parse_rv(rv_param)
                if r < self.compacted_rv:
                    raise ApiError.expired("The resourceVersion for the provided list is too old.")
            snap = None
            start = ""
            list_rv = self.rv
            if cont:
                tok_rv, start, snap_id = _continue_decode(cont)
                if tok_rv < self.compacted_rv:
                    new_tok = _continue_encode(-1, start, None)
                    raise ApiError.expired(
                        "The provided continue parameter is too old to display a consistent list result. You can "
                        "start a new list without the continue parameter, or use the continue token in this "
                        "response to retrieve the remainder of the results. Continuing with the provided token "
                        "results in an inconsistent list - objects that were created, modified, or deleted between "
                        "the time the first chunk was returned and now may show up in the list.",
                        metadata={"continue": new_tok})
                s = self.snapshots.get(snap_id)
                if s is not None and s[0] == tok_rv and s[1] == rt.key and s[2] == ns:
                    snap = s[3]
                    list_rv = tok_rv
                elif tok_rv >= 0:
                    list_rv = tok_rv
            if snap is None:
                entries = self._objects(rt, ns)
                entries.sort(key=_sort_key)
                keys = None
            else:
                entries = snap
            if not limit or limit <= 0:
                out = [e for e in entries if _matches(rt, e, lreqs, freqs)]
                if start:
                    out = [e for e in out if _sort_key(e) > start]
                return out, list_rv, None, None
            keys = [_sort_key(e) for e in entries]
            pos = bisect.bisect_right(keys, start) if start else 0
            out = []
            i = pos
            while i < len(entries) and len(out) < limit:
                e = entries[i]
                if _matches(rt, e, lreqs, freqs):
                    out.append(e)
                i += 1
            more = any(_matches(rt, e, lreqs, freqs) for e in entries[i:]) if (lreqs or freqs) else i < len(
                entries)
            if not more:
                return out, list_rv, None, None
            if snap is None:
                self.snapshot_seq += 1
                snap_id = self.snapshot_seq
                self.snapshots[snap_id] = (list_rv, rt.key, ns, entries)
                while len(self.snapshots) > 32:
                    self.snapshots.popitem(last=False)
            token = _continue_encode(list_rv, _sort_key(out[-1]), snap_id)
            remaining = None if (lreqs or freqs) else len(entries) - i
            return out, list_rv, token, remaining

    # -- watch ----------------------------------------------------------------------------------
    def watch_open(self, rt, ns, lreqs, freqs, rv_param, send_initial):
        """Returns (initial entries, log position, rv). Raises ApiError(410) for a compacted RV."""
        with self.lock:
            log = self.logs[rt.key]
            if send_initial or rv_param in (None, "", "0"):
                initial = [e for e in self._objects(rt, ns) if _matches(rt, e, lreqs, freqs)]
                initial.sort(key=_sort_key)
                return initial, log.end(), self.rv
            r = _parse_rv(rv_param)
            floor = max(log.compacted_rv, self.compacted_rv)
            if r < floor:
                raise ApiError.expired("too old resource version: %d (%d)" % (r, floor))
            idx = bisect.bisect_right(log.rvs, r)
            return [], log.offset + idx, max(r, 0)

    def watch_next(self, rt, pos, timeout):
        """Waits up to timeout for events after pos. Returns (events, new_pos, current_rv) or raises
        ApiError(410) when this watcher fell behind the retained history."""
        with self.lock:
            log = self.logs[rt.key]
            if pos >= log.end() and timeout > 0:
                self.cond.wait(timeout)
            if pos < log.offset:
                raise ApiError.expired("The resourceVersion for the provided watch is too old.")
            evs = log.events[pos - log.offset:]
            return evs, log.end(), self.rv

    def compact(self):
        with self.lock:
            rv = self.rv
            self.compacted_rv = rv
            for log in self.logs.values():
                log.compact(rv)
            for k in [k for k, s in self.snapshots.items() if s[0] < rv]:
                del self.snapshots[k]
            self.cond.notify_all()
            return rv

    def reset(self):
        with self.lock:
            for key, per_ns in list(self.data.items()):
                rt = BY_KEY.get(key)
                for ns, objs in list(per_ns.items()):
                    for name, e in list(objs.items()):
                        self._remove(rt, e)
            self.delete_policies.clear()


def drop_nulls(v):
    """`v` without the object members whose value is null, at every depth."""
    if isinstance(v, dict):
        return {k: drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_nulls(x) for x in v]
    return v


def _sort_key(e):
    """etcd key order: <namespace>/<name> compared as strings."""
    f = e.attrs()[1]
    return f.get("metadata.namespace", "") + "/" + f.get("metadata.name", "")


def _matches(rt, entry, lreqs, freqs):
    if not lreqs and not freqs:
        return True
    labels, fields = entry.attrs()
    if lreqs and not klabels.labels_match(lreqs, labels):
        return False
    if freqs and not klabels.fields_match(freqs, fields):
        return False
    return True


def matches(rt, entry, lreqs, freqs):
    return _matches(rt, entry, lreqs, freqs)
