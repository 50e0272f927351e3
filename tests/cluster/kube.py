"""Access to the real cluster (cluster/up.sh) for the real-cluster suite: the pinned kubectl and helm as a user
runs them, a small REST client over TLS with client certificates for fast reads (the samplers list pods
every few tens of milliseconds, which kubectl cannot), the API server's audit log (who wrote what), and
containerd's view of the node through ctr.

Identities (certificates made by cluster/pki.sh):
  admin   system:masters: installs the chart, plays the hook handler (an LB controller), reads
  alice   group developers, bound to the `edit` ClusterRole in each scenario's namespace: the user whose
          kubectl commands change Deployments
The product's loop runs in the cluster as the chart's ServiceAccount with exactly the chart's RBAC.

Standard library only.
"""

import calendar
import http.client
import json
import os
import re
import shlex
import ssl
import subprocess
import threading
import time
import urllib.parse

STATE = "inplace-webhook.io/state"
ENABLED = "inplace-webhook.io/enabled"
LIFECYCLE = "inplace-webhook.io/lifecycle"
POLICY = "inplace-webhook.io/policy"
IN_PROGRESS = "inplace-webhook.io/in-progress"
ABORT = "inplace-webhook.io/abort"
STATE_TIMESTAMP = "inplace-webhook.io/state-timestamp"
READY_GATE = "inplace-webhook.io/ready"
GATE_SENT = "inplace-webhook.io/gate-sent"


class Failure(AssertionError):
    """A scenario's check failed."""


def check(cond, message):
    if not cond:
        raise Failure(message)


class ClusterEnv:
    """Where the running cluster is: cluster/lib.sh's state directory."""

    def __init__(self, run_dir):
        self.run = run_dir
        self.pki = os.path.join(run_dir, "pki")
        self.bin = os.path.join(run_dir, "bin")
        self.logs = os.path.join(run_dir, "logs")
        self.audit_log = os.path.join(self.logs, "audit.log")
        with open(os.path.join(self.pki, "admin.kubeconfig")) as f:
            self.server = re.search(r"server: (\S+)", f.read()).group(1)
        self.containerd_sock = os.path.join(run_dir, "containerd", "containerd.sock")

    def kubeconfig(self, user):
        return os.path.join(self.pki, "%s.kubeconfig" % user)

    def tool(self, name):
        return os.path.join(self.bin, name)


class ApiError(Exception):
    def __init__(self, method, path, code, body):
        self.code = code
        self.body = body
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        message = body.get("message", body) if isinstance(body, dict) else body
        super().__init__("%s %s: HTTP %d %s: %s" % (method, path, code, reason, message))


WARNING_RE = re.compile(r'^\s*\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"')


def parse_warnings(values):
    """The texts of `Warning: 299 - "text"` headers, as kubectl prints them."""
    out = []
    for v in values:
        m = WARNING_RE.match(v)
        if m:
            out.append(re.sub(r"\\(.)", r"\1", m.group(1)))
    return out


class RestVerbs:
    """The REST verbs over a subclass's request(method, path, body=None, ctype=..., query=None)."""

    def get(self, path, **query):
        return self.request("GET", path, query=query or None)

    def get_or_none(self, path):
        try:
            return self.get(path)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def items(self, path, **query):
        return self.get(path, **query).get("items") or []

    def create(self, path, obj):
        return self.request("POST", path, obj)

    def put(self, path, obj):
        return self.request("PUT", path, obj)

    def merge_patch(self, path, patch):
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def strategic_patch(self, path, patch):
        return self.request("PATCH", path, patch, "application/strategic-merge-patch+json")

    def delete(self, path):
        return self.request("DELETE", path)


class Api(RestVerbs):
    """REST calls as one certificate identity. Reads are retried on 429/5xx; writes are not."""

    def __init__(self, env, user):
        self.env = env
        self.user = user
        u = urllib.parse.urlsplit(env.server)
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=os.path.join(env.pki, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(env.pki, "%s.crt" % user), os.path.join(env.pki, "%s.key" % user))
        self.local = threading.local()
        self.last_warnings = []

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            self.local.conn = c
        return c

    def request(self, method, path, body=None, ctype="application/json", query=None, retries=None):
        if query:
            path = path + "?" + urllib.parse.urlencode(query)
        if retries is None:
            retries = 20 if method == "GET" else 0
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(retries + 1):
            headers = {"Accept": "application/json", "User-Agent": "cluster-test/" + self.user}
            if data is not None:
                headers["Content-Type"] = ctype
            try:
                c = self._conn()
                c.request(method, path, body=data, headers=headers)
                resp = c.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                self.local.conn = None
                if attempt < retries:
                    time.sleep(0.1)
                    continue
                raise
            try:
                obj = json.loads(raw) if raw else {}
            except ValueError:
                obj = raw.decode("utf-8", "replace")
            if resp.status in (429, 500, 503, 504) and attempt < retries:
                time.sleep(0.1)
                continue
            self.last_warnings = parse_warnings(resp.headers.get_all("Warning") or [])
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, obj)
            return obj

    def watch(self, path, resource_version, stopping, timeout=600, **params):
        """One watch of `path` from `resource_version` (no bookmarks), on a connection of its own: yields
        (seconds since the epoch at which its line arrived, event) until the stream ends or `stopping` is set.
        Raises RuntimeError when the API server refuses it."""
        query = dict(params, watch="1", allowWatchBookmarks="false", resourceVersion=resource_version)
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        try:
            conn.request("GET", path + "?" + urllib.parse.urlencode(query))
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError("watch: HTTP %d" % resp.status)
            while not stopping.is_set():
                line = resp.readline()
                if not line:
                    return
                yield time.time(), json.loads(line)
        finally:
            conn.close()


def ns_path(ns, resource, name="", group=None):
    base = "/api/v1" if group is None else "/apis/" + group
    return "%s/namespaces/%s/%s%s" % (base, ns, resource, "/" + name if name else "")


class Tools:
    """The pinned command-line tools, run as a user would run them."""

    def __init__(self, env):
        self.env = env

    def run(self, tool, *args, user="admin", stdin=None, check_rc=True, timeout=120):
        envv = dict(os.environ, KUBECONFIG=self.env.kubeconfig(user), PATH=self.env.bin + ":" + os.environ["PATH"],
                    HELM_CACHE_HOME=os.path.join(self.env.run, "helm", "cache"),
                    HELM_CONFIG_HOME=os.path.join(self.env.run, "helm", "config"),
                    HELM_DATA_HOME=os.path.join(self.env.run, "helm", "data"))
        p = subprocess.run([self.env.tool(tool)] + [str(a) for a in args], input=stdin, capture_output=True,
                           text=True, env=envv, timeout=timeout)
        if check_rc and p.returncode != 0:
            raise Failure("%s %s exited %d:\n%s%s" % (tool, " ".join(shlex.quote(str(a)) for a in args), p.returncode,
                                                      p.stdout, p.stderr))
        return p

    def kubectl(self, *args, **kw):
        return self.run("kubectl", *args, **kw)

    def helm(self, *args, **kw):
        return self.run("helm", *args, **kw)

    def ctr(self, *args, check_rc=True):
        p = subprocess.run([self.env.tool("ctr"), "--address", self.env.containerd_sock, "-n", "k8s.io"] + list(args),
                           capture_output=True, text=True, timeout=60)
        if check_rc and p.returncode != 0:
            raise Failure("ctr %s: %s" % (" ".join(args), p.stderr))
        return p.stdout


def metric_samples(text, name):
    """The samples of metric `name` in Prometheus text: [(labels dict, value)]."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = {}
            for kv in line[line.index("{") + 1:line.rindex("}")].split(","):
                k, _, v = kv.partition("=")
                labels[k] = v.strip('"')
            out.append((labels, float(line.rsplit(" ", 1)[1])))
        elif line.startswith(name + " "):  # a sample without labels (a histogram's _count and _sum)
            out.append(({}, float(line.rsplit(" ", 1)[1])))
    return out


def openssl_cert(directory, name, cn, san=None, ca=None):
    """NAME.key and NAME.crt in `directory`: a P-256 key and a certificate for CN with the given
    subjectAltName, self-signed or signed by `ca` (a (crt, key) pair)."""
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
           "-subj", "/CN=" + cn, "-keyout", os.path.join(directory, name + ".key"),
           "-out", os.path.join(directory, name + ".crt")]
    if san:
        cmd += ["-addext", "subjectAltName=" + san]
    if ca:
        cmd += ["-CA", ca[0], "-CAkey", ca[1]]
    subprocess.run(cmd, check=True, capture_output=True)
    return os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")


def warnings_of(stderr):
    """The admission warnings kubectl printed ("Warning: text")."""
    return [line[len("Warning: "):] for line in stderr.splitlines() if line.startswith("Warning: ")]


class AuditLog:
    """The API server's audit log (cluster/audit-policy.yaml: writes of the objects the product touches at
    Request level). Each entry: user, userAgent, verb, objectRef, requestObject, responseStatus, timestamps."""

    def __init__(self, env):
        self.path = env.audit_log
        self.offsets = {}  # inode → bytes of that file parsed so far (whole lines only)
        self.parsed = []  # its ResponseComplete entries, each with "_time"

    def _files(self):
        """The log and the backups the API server rotated it into (its logger renames `audit.log` to
        `audit-<time>.log` at 100 MB and starts a new one), oldest first, each with its inode: a rotated file keeps
        its inode, so what was read of it is not read again."""
        directory, name = os.path.split(self.path)
        stem, ext = os.path.splitext(name)
        out = []
        for f in os.listdir(directory) if os.path.isdir(directory) else []:
            if f == name or (f.startswith(stem + "-") and f.endswith(ext)):
                path = os.path.join(directory, f)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                out.append((st.st_mtime, st.st_ino, path))
        return [(ino, path) for _, ino, path in sorted(out)]

    def _read_new(self):
        """Parses what the API server appended since the last call, in every file; each byte is read once."""
        for ino, path in self._files():
            offset = self.offsets.get(ino, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
            self.offsets[ino] = offset + end
            for line in data[:end].splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("stage") == "ResponseComplete":
                    e["_time"] = rfc3339_micro(e.get("requestReceivedTimestamp", ""))
                    self.parsed.append(e)

    def entries(self, since=0.0):
        self._read_new()
        return [e for e in self.parsed if e["_time"] >= since]

    # Questions asked by POST that the API server answers and stores nothing of: not writes.
    REVIEWS = {"selfsubjectreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews",
               "localsubjectaccessreviews", "tokenreviews"}

    def writes(self, since=0.0, user=None, ns=None, resource=None, subresource=None):
        """Requests that may change stored state (create, update, patch, delete; not the review questions)."""
        out = []
        for e in self.entries(since):
            ref = e.get("objectRef") or {}
            if e.get("verb") not in ("create", "update", "patch", "delete") or ref.get("resource") in self.REVIEWS:
                continue
            if user is not None and (e.get("user") or {}).get("username") != user:
                continue
            if ns is not None and ref.get("namespace") != ns:
                continue
            if resource is not None and ref.get("resource") != resource:
                continue
            if subresource is not None and ref.get("subresource", "") != subresource:
                continue
            out.append(e)
        return out


def rfc3339_micro(text):
    """Seconds since the epoch of an RFC 3339 timestamp such as 2026-12-01T19:40:01.123456Z."""
    if not text:
        return 0.0
    m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z", text)
    if not m:
        return 0.0
    secs = calendar.timegm(tuple(int(g) for g in m.groups()[:6]) + (0, 0, 0))
    return secs + (float(m.group(7)) if m.group(7) else 0.0)


def wait_for(cond, timeout, what, context=None, interval=0.05):
    """Polls `cond` until it returns a true value (returned), or fails after `timeout` seconds. `context` (the
    object under test) is for the caller's readability; the failure report describes it."""
    deadline = time.time() + timeout
    last_error = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Failure:
            raise
        except Exception as e:  # noqa: BLE001 - keep polling through transient errors
            last_error = e
        if time.time() > deadline:
            raise Failure("timed out after %.0f s waiting for %s%s" % (
                timeout, what, "" if last_error is None else " (last error: %s)" % last_error))
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# What the real components report about a pod


def labels_of(o):
    return (o.get("metadata") or {}).get("labels") or {}


def annotations_of(o):
    return (o.get("metadata") or {}).get("annotations") or {}


def state_of(pod):
    """Where the pod stands, as the loop reads it (hooks/pod_state.h StateOf): its state label, except that a pod
    labelled Normal and opted in, whose update-state says the write left it Normal ("completesOnReport"), reads as
    Updating until the kubelet has replaced every recorded container (the product's completion also checks the image
    the new container runs; a test that needs that asks the product: `kubectl inplace status`)."""
    state = labels_of(pod).get(STATE, "Normal")
    if state != "Normal" or labels_of(pod).get(ENABLED) != "true":
        return state
    try:
        record = json.loads(annotations_of(pod).get("inplace-webhook.io/update-state") or "{}")
    except ValueError:
        return state
    if not isinstance(record, dict) or record.get("completesOnReport") is not True:
        return state
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    for name, rec in (record.get("lastContainerStatuses") or {}).items():
        now = (statuses.get(name) or {}).get("containerID") or ""
        if not now or now == (rec or {}).get("containerID"):
            return "Updating"
    return state


def condition(obj, ctype, field="status"):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c.get(field)
    return None


def is_ready(pod):
    return condition(pod, "Ready") == "True"


def images(obj):
    spec = obj["spec"]["template"]["spec"] if "template" in obj["spec"] else obj["spec"]
    return {c["name"]: c["image"] for c in spec["containers"]}


def container_statuses(pod):
    return {s["name"]: s for s in (pod.get("status") or {}).get("containerStatuses") or []}


def live(pods):
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def snapshot(pods):
    """What must survive an in-place update, per pod name: uid, IP, node, and per container the
    (containerID, restartCount) the kubelet reports."""
    out = {}
    for p in pods:
        st = p.get("status") or {}
        out[p["metadata"]["name"]] = {
            "uid": p["metadata"]["uid"], "ip": st.get("podIP"), "node": p["spec"].get("nodeName"),
            "containers": {n: (s.get("containerID"), s.get("restartCount", 0))
                           for n, s in container_statuses(p).items()},
        }
    return out


def format_table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)


def event_line(e):
    io = e.get("involvedObject") or {}
    src = e.get("reportingComponent") or (e.get("source") or {}).get("component") or ""
    inst = e.get("reportingInstance") or ""
    return "%-7s %-24s %s/%s (%s%s) x%s: %s" % (e.get("type", ""), e.get("reason", ""), io.get("kind", ""),
                                                io.get("name", ""), src, "/" + inst if inst else "",
                                                e.get("count", 1), e.get("message", ""))


class PodSampler:
    """Calls list_pods() continuously on a thread; each sample is one consistent LIST. `samples` holds
    (time, [pod]) in order, the time being when the LIST returned; `started[i]` is when samples[i]'s LIST was sent
    (what it shows was true at some moment between the two)."""

    def __init__(self, list_pods, interval=0.05):
        self.list_pods, self.interval = list_pods, interval
        self.samples = []
        self.started = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")

    def _run(self):
        while not self._stop.is_set():
            try:
                sent = time.time()
                pods = self.list_pods()
                self.started.append(sent)
                self.samples.append((time.time(), pods))
            except Exception as e:  # noqa: BLE001
                self.errors.append(e)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
