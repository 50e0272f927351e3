"""The end-to-end harness: the test API server (tests/apiserver/server.py) calling our real webhook
through a Service-like TCP proxy, the inplace-webhook binary running the loop against it, API clients
that act as users, and the checks and diagnostics the scenarios share.

    cluster = Cluster(binary, source_dir, cert_dir, workdir)
    cluster.start()                       # API server + proxy, webhook configurations loaded
    iw = cluster.start_webhook("iw-a")    # inplace-webhook serve --api-server ... (webhook + loop)
    alice = cluster.user                  # requests as the user "alice"
    ...
    cluster.stop()

Standard library only, like the test API server.
"""

import calendar
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "curl"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from webhook_process import free_port, sanitizer_findings, stop_process  # noqa: E402
import kube  # noqa: E402
from kube import ApiError, Failure, RestVerbs, check, format_table, parse_warnings, wait_for  # noqa: E402,F401

STATE = "inplace-webhook.io/state"
ENABLED = "inplace-webhook.io/enabled"
LIFECYCLE = "inplace-webhook.io/lifecycle"
POLICY = "inplace-webhook.io/policy"
IN_PROGRESS = "inplace-webhook.io/in-progress"
ABORT = "inplace-webhook.io/abort"
REVISION = "deployment.kubernetes.io/revision"
UPDATE_STATE = "inplace-webhook.io/update-state"
STATE_TIMESTAMP = "inplace-webhook.io/state-timestamp"
READY_GATE = "inplace-webhook.io/ready"
LEASE_NAMESPACE = "inplace-webhook"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/inplace-webhook" % LEASE_NAMESPACE

# Who is who. The API server maps each bearer token to a user (--users-file); the webhook exempts the
# controller's own identity (--controller-user), and the simulated controllers write as their own
# service accounts.
CONTROLLER_USER = "system:serviceaccount:inplace-webhook:inplace-webhook"
USERS = {
    "iw-loop-token": {"username": CONTROLLER_USER,
                      "groups": ["system:serviceaccounts", "system:serviceaccounts:inplace-webhook"]},
    "alice-token": {"username": "alice", "groups": ["developers"]},
    "lb-token": {"username": "system:serviceaccount:lb-system:lb-controller",
                 "groups": ["system:serviceaccounts", "system:serviceaccounts:lb-system"]},
    "observer-token": {"username": "e2e-observer", "groups": ["viewers"]},
}

# The loop's periods in the tests (the defaults are 2 s and 15 s).
LOOP_RESYNC_MS = 500


# ---------------------------------------------------------------------------------------------
# API access


class Kube(RestVerbs):
    """Requests to the API server as one user (a bearer token). Reads are retried on 429/5xx, so
    the tests keep working while faults are injected; writes are not, unless asked."""

    def __init__(self, port, token, name):
        self.port = port
        self.token = token
        self.name = name
        self.last_warnings = []

    def request(self, method, path, body=None, ctype="application/json", query=None, retries=None):
        if query:
            path = path + "?" + urllib.parse.urlencode(query)
        if retries is None:
            retries = 40 if method == "GET" else 0
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        for attempt in range(retries + 1):
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json",
                           "User-Agent": "e2e-test/" + self.name}
                if data is not None:
                    headers["Content-Type"] = ctype
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                warnings = parse_warnings(resp.headers.get_all("Warning") or [])
            finally:
                conn.close()
            try:
                obj = json.loads(raw) if raw else {}
            except ValueError:
                obj = raw.decode("utf-8", "replace")
            if resp.status in (429, 500, 503, 504) and attempt < retries:
                time.sleep(0.05)
                continue
            self.last_warnings = warnings
            if resp.status >= 300:
                raise ApiError(method, path, resp.status, obj)
            return obj


def deployments_path(ns, name=""):
    return "/apis/apps/v1/namespaces/%s/deployments%s" % (ns, "/" + name if name else "")


def replicasets_path(ns):
    return "/apis/apps/v1/namespaces/%s/replicasets" % ns


def pods_path(ns, name=""):
    return "/api/v1/namespaces/%s/pods%s" % (ns, "/" + name if name else "")


def events_path(ns):
    return "/api/v1/namespaces/%s/events" % ns


# ---------------------------------------------------------------------------------------------
# Processes


class ServiceProxy:
    """What a Kubernetes Service does for the webhook: the API server dials one address (its
    --webhook-resolve), and each TCP connection is forwarded to a live backend, round robin. A
    backend that refuses the connection is skipped, as kube-proxy skips endpoints that are not
    ready; with no backend the connection is closed (the API server applies the failurePolicy)."""

    def __init__(self):
        self.port = free_port()
        self.backends = []
        self.lock = threading.Lock()
        self.next = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        self.stopped = False
        self.conns = set()
        threading.Thread(target=self._accept, daemon=True, name="proxy").start()

    def set_backends(self, ports):
        with self.lock:
            self.backends = list(ports)

    def add_backend(self, port):
        with self.lock:
            self.backends.append(port)

    def remove_backend(self, port):
        with self.lock:
            self.backends = [p for p in self.backends if p != port]

    def _dial(self):
        with self.lock:
            ports = list(self.backends)
            start = self.next
            self.next += 1
        for i in range(len(ports)):
            port = ports[(start + i) % len(ports)]
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
        return None

    def _accept(self):
        while not self.stopped:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _pipe(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve(self, client):
        upstream = self._dial()
        if upstream is None:
            client.close()
            return
        upstream.settimeout(None)
        with self.lock:
            self.conns.update((client, upstream))
        t = threading.Thread(target=self._pipe, args=(upstream, client), daemon=True)
        t.start()
        self._pipe(client, upstream)
        t.join()
        with self.lock:
            self.conns.discard(client)
            self.conns.discard(upstream)
        client.close()
        upstream.close()

    def drop_connections_to(self, port):
        """Closes forwarded connections whose upstream is `port` (a killed backend's TCP peers see
        a reset; this makes it immediate for the proxy's side too)."""
        with self.lock:
            conns = [c for c in self.conns if _peer_port(c) == port]
        _shut(conns)

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        _shut(conns)


def _shut(conns):
    for c in conns:
        try:
            c.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _peer_port(s):
    try:
        return s.getpeername()[1]
    except OSError:
        return None


def loop_period_args(binary):
    """A short safety resync for the tests (the loop is watch-driven; the resync only re-plans
    from its caches)."""
    del binary
    return ["--loop-resync-period-ms", str(LOOP_RESYNC_MS)]


class WebhookProcess:
    """One replica of inplace-webhook: the HTTPS webhook and the in-place loop."""

    def __init__(self, cluster, identity, leader_elect, extra_args=()):
        self.cluster = cluster
        self.identity = identity
        self.port = free_port()
        self.probe_port = free_port()
        self.log_path = os.path.join(cluster.workdir, "webhook-%s.log" % identity)
        args = [cluster.binary, "serve", "--bind-address", "127.0.0.1",
                "--port", str(self.port), "--probe-port", str(self.probe_port),
                "--tls-cert-file", os.path.join(cluster.cert_dir, "tls.crt"),
                "--tls-private-key-file", os.path.join(cluster.cert_dir, "tls.key"),
                "--log-format", "text", "--shutdown-delay-seconds", "0",
                "--controller-user", CONTROLLER_USER,
                "--api-server", "http://127.0.0.1:%d" % cluster.api_port,
                "--token-file", cluster.loop_token_file,
                "--leader-elect", "true" if leader_elect else "false",
                "--leader-election-namespace", LEASE_NAMESPACE,
                *loop_period_args(cluster.binary), *extra_args]
        env = dict(os.environ, POD_NAME=identity)
        self._log = open(self.log_path, "ab")
        self._log.write(("--- %s: %s\n" % (time.strftime("%H:%M:%S"), " ".join(args))).encode())
        self._log.flush()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=self._log, env=env)
        deadline = time.time() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("inplace-webhook %s exited with %d; log:\n%s"
                                   % (identity, self.proc.returncode, self.log_tail()))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.probe_port, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("inplace-webhook %s not ready in 15 s; log:\n%s" % (identity, self.log_tail()))
            time.sleep(0.05)
        cluster.proxy.add_backend(self.port)

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        """SIGKILL: no Lease release, no goodbye."""
        self.cluster.proxy.remove_backend(self.port)
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self.cluster.proxy.drop_connections_to(self.port)
        self._log.close()

    def stop(self, timeout=20):
        """SIGTERM (releases the Lease); returns the exit code."""
        self.cluster.proxy.remove_backend(self.port)
        if not stop_process(self.proc, timeout):
            raise Failure("inplace-webhook %s did not exit within %d s of SIGTERM" % (self.identity, timeout))
        self.cluster.proxy.drop_connections_to(self.port)
        if not self._log.closed:
            self._log.close()
        return self.proc.returncode

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    def sanitizer_findings(self):
        """This process's sanitizer reports (sanitizer builds), "" when there is none."""
        return sanitizer_findings(self.proc.pid, self.log_path)

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.probe_port, timeout=5) as r:
            return r.read().decode()


class Cluster:
    """The test API server with its simulation and our webhook configurations, reached through a
    ServiceProxy that plays the webhook's Service."""

    def __init__(self, binary, source_dir, cert_dir, workdir, webhook_config=None):
        self.binary = os.path.abspath(binary)
        self.source_dir = os.path.abspath(source_dir)
        self.cert_dir = os.path.abspath(cert_dir)
        self.workdir = workdir
        self.webhook_config = webhook_config or os.path.join(self.source_dir, "tests", "e2e", "webhook-config.yaml")
        self.proc = None
        self.proxy = None
        self.webhooks = []
        self.api_port = None

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        users_file = os.path.join(self.workdir, "users.json")
        with open(users_file, "w") as f:
            json.dump(USERS, f)
        self.loop_token_file = os.path.join(self.workdir, "loop-token")
        with open(self.loop_token_file, "w") as f:
            f.write("iw-loop-token\n")
        self.proxy = ServiceProxy()
        port_file = os.path.join(self.workdir, "apiserver.port")
        self.api_log = os.path.join(self.workdir, "apiserver.log")
        args = [sys.executable, os.path.join(self.source_dir, "tests", "apiserver", "server.py"),
                "--port", "0", "--port-file", port_file, "--log-file", self.api_log,
                "--users-file", users_file, "--webhook-config", self.webhook_config,
                "--webhook-resolve", "127.0.0.1:%d" % self.proxy.port,
                "--webhook-ca", os.path.join(self.cert_dir, "ca.crt")]
        self._stderr = open(os.path.join(self.workdir, "apiserver.stderr"), "wb")
        self.proc = subprocess.Popen(args, stdout=self._stderr, stderr=self._stderr)
        deadline = time.time() + 15
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                self._stderr.close()
                with open(os.path.join(self.workdir, "apiserver.stderr")) as f:
                    raise RuntimeError("test API server did not start:\n" + f.read())
            time.sleep(0.02)
        with open(port_file) as f:
            self.api_port = int(f.read().strip())
        self.user = Kube(self.api_port, "alice-token", "alice")
        self.lb = Kube(self.api_port, "lb-token", "lb-controller")
        self.observer = Kube(self.api_port, "observer-token", "observer")
        configs = self.test_get("/_test/webhooks").get("items") or []
        check(configs, "the API server loaded no webhook configuration from %s" % self.webhook_config)
        return self

    def start_webhook(self, identity="iw-0", leader_elect=False, extra_args=()):
        w = WebhookProcess(self, identity, leader_elect, extra_args)
        self.webhooks.append(w)
        return w

    # -- /_test control API --------------------------------------------------------------------
    def _test(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.api_port, timeout=30)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        obj = json.loads(raw) if raw else {}
        if resp.status >= 300 and not (path.startswith("/_test/idle") and resp.status == 504):
            raise RuntimeError("%s %s: HTTP %d %s" % (method, path, resp.status, raw[:500]))
        return obj

    def test_get(self, path):
        return self._test("GET", path)

    def sim(self, **settings):
        return self._test("POST", "/_test/sim", settings)

    def faults(self, cfg):
        """Replaces the fault configuration; None clears it (and its `injected` count)."""
        if cfg is None:
            return self._test("DELETE", "/_test/faults")
        return self._test("POST", "/_test/faults", cfg)

    def faults_injected(self):
        return self._test("GET", "/_test/faults").get("injected", 0)

    def requests_log(self):
        return self._test("GET", "/_test/requests").get("items") or []

    def admission_log(self):
        return self._test("GET", "/_test/admission").get("items") or []

    def idle(self, timeout_ms=10000):
        return self._test("GET", "/_test/idle?timeoutMs=%d" % timeout_ms).get("idle")

    # -- teardown ------------------------------------------------------------------------------
    def api_log_problems(self):
        try:
            with open(self.api_log) as f:
                log = f.read()
        except OSError:
            return []
        return [line for line in log.splitlines()
                if "Traceback" in line or "internal error" in line or "controller error" in line]

    def stop(self):
        for w in self.webhooks:
            if w.alive():
                try:
                    w.stop()
                except Failure:
                    pass
        if self.proc is not None:
            stop_process(self.proc, 10)
        if self.proxy is not None:
            self.proxy.stop()


# ---------------------------------------------------------------------------------------------
# Objects


def deployment(name, replicas=3, image="nginx:1.25", lifecycle=None, policy=None, gate=False,
               max_unavailable=None, max_surge=None, paused=False, sidecar=True, extra_labels=None):
    """An opted-in Deployment: label on the Deployment and on its pod template, an `app`
    container (and a `sidecar` whose image never changes, to show it is not restarted)."""
    labels = {"app": name, ENABLED: "true", "version": "v1"}
    labels.update(extra_labels or {})
    containers = [{"name": "app", "image": image, "ports": [{"containerPort": 80}]}]
    if sidecar:
        containers.append({"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "infinity"]})
    annotations = {}
    if lifecycle is not None:
        annotations[LIFECYCLE] = json.dumps(lifecycle)
    if policy is not None:
        annotations[POLICY] = json.dumps(policy)
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}}
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
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name, ENABLED: "true"}, "annotations": annotations},
            "spec": spec}


def labels_of(o):
    return (o.get("metadata") or {}).get("labels") or {}


def annotations_of(o):
    return (o.get("metadata") or {}).get("annotations") or {}


def rfc3339_seconds(text):
    """Seconds since the epoch of an RFC 3339 UTC timestamp with whole seconds, as the webhook writes."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


state_of = kube.state_of  # as the loop reads it: the label, or Updating from the kubelet's report


def condition(obj, ctype):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c.get("status")
    return None


def is_ready(pod):
    return condition(pod, "Ready") == "True"


def images(pod):
    return {c["name"]: c["image"] for c in pod["spec"]["containers"]}


def restart_counts(pod):
    return {s["name"]: s.get("restartCount", 0) for s in (pod.get("status") or {}).get("containerStatuses") or []}


def live(pods):
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


# ---------------------------------------------------------------------------------------------
# A Deployment under test


class App:
    """One Deployment in its own namespace, and what the scenarios ask about it."""

    def __init__(self, cluster, ns, name):
        self.c = cluster
        self.ns = ns
        self.name = name

    # reads (as the observer)
    def deployment(self):
        return self.c.observer.get(deployments_path(self.ns, self.name))

    def pods(self):
        sel = "app=" + self.name
        return sorted(live(self.c.observer.items(pods_path(self.ns), labelSelector=sel)),
                      key=lambda p: p["metadata"]["name"])

    def all_pods(self):
        return self.c.observer.items(pods_path(self.ns), labelSelector="app=" + self.name)

    def replicasets(self):
        return sorted(self.c.observer.items(replicasets_path(self.ns), labelSelector="app=" + self.name),
                      key=lambda r: r["metadata"]["name"])

    def events(self):
        return sorted(self.c.observer.items(events_path(self.ns)),
                      key=lambda e: (e.get("firstTimestamp") or e.get("eventTime") or "",
                                     e["metadata"].get("creationTimestamp") or "",
                                     int(e["metadata"].get("resourceVersion") or 0)))

    def events_with(self, reason, kind=None, name=None):
        return [e for e in self.events() if e.get("reason") == reason
                and (kind is None or e["involvedObject"].get("kind") == kind)
                and (name is None or e["involvedObject"].get("name") == name)]

    # writes (as the user)
    def create(self, obj):
        obj = json.loads(json.dumps(obj))
        obj["metadata"]["namespace"] = self.ns
        return self.c.user.create(deployments_path(self.ns), obj)

    def set_image(self, container, image):
        """What `kubectl set image deploy/NAME container=image` sends. Returns (object, warnings)."""
        d = self.c.user.strategic_patch(deployments_path(self.ns, self.name),
                                        {"spec": {"template": {"spec": {"containers": [
                                            {"name": container, "image": image}]}}}})
        return d, self.c.user.last_warnings

    def patch(self, patch):
        """A merge patch as the user (kubectl patch --type merge). Returns (object, warnings)."""
        d = self.c.user.merge_patch(deployments_path(self.ns, self.name), patch)
        return d, self.c.user.last_warnings

    def edit(self, mutate):
        """GET, change, PUT as the user (kubectl edit). Returns (object, warnings)."""
        for _ in range(10):
            d = self.c.user.get(deployments_path(self.ns, self.name))
            mutate(d)
            try:
                out = self.c.user.put(deployments_path(self.ns, self.name), d)
                return out, self.c.user.last_warnings
            except ApiError as e:
                if e.code != 409:
                    raise
        raise Failure("could not update the Deployment: conflicts")

    def rollout_undo(self):
        """What `kubectl rollout undo deploy/NAME` (kubectl v0.37 DeploymentRollbacker, to revision 0)
        sends as the user: the ReplicaSet of the second newest revision among those the Deployment
        controls, its template (without pod-template-hash) and its annotations (but the Deployment's
        last-applied, revision and rollback keys) in one JSON patch. Returns (object, warnings, the
        ReplicaSet rolled back to)."""
        d = self.c.user.get(deployments_path(self.ns, self.name))
        check(not d["spec"].get("paused"), "kubectl rollout undo refuses a paused Deployment")
        uid = d["metadata"]["uid"]
        selector = ",".join("%s=%s" % kv for kv in sorted(d["spec"]["selector"]["matchLabels"].items()))
        owned = [r for r in self.c.user.items(replicasets_path(self.ns), labelSelector=selector)
                 if any(o.get("controller") and o.get("uid") == uid
                        for o in r["metadata"].get("ownerReferences") or [])]
        by_revision = sorted(owned, key=lambda r: int(annotations_of(r).get(REVISION) or 0))
        check(len(by_revision) >= 2, "kubectl rollout undo: no rollout history found")
        rs = by_revision[-2]
        template = json.loads(json.dumps(rs["spec"]["template"]))
        template["metadata"].get("labels", {}).pop("pod-template-hash", None)
        skip = ("kubectl.kubernetes.io/last-applied-configuration", REVISION,
                "deployment.kubernetes.io/revision-history", "deployment.kubernetes.io/desired-replicas",
                "deployment.kubernetes.io/max-replicas", "deprecated.deployment.rollback.to")
        ann = {k: v for k, v in annotations_of(d).items() if k in skip}
        ann.update({k: v for k, v in annotations_of(rs).items() if k not in skip})
        out = self.c.user.request("PATCH", deployments_path(self.ns, self.name), [
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": ann}], "application/json-patch+json")
        return out, self.c.user.last_warnings, rs

    # states
    def rollout_complete(self, replicas=None):
        """The Deployment controller reports the rollout complete and every pod runs and is Ready."""
        d = self.deployment()
        st = d.get("status") or {}
        want = d["spec"]["replicas"] if replicas is None else replicas
        pods = self.pods()
        return (st.get("observedGeneration") == d["metadata"]["generation"]
                and st.get("updatedReplicas") == want and st.get("replicas") == want
                and st.get("availableReplicas") == want and len(pods) == want
                and all(p["status"].get("phase") == "Running" and is_ready(p) for p in pods))

    def in_place_done(self):
        """No in-place update recorded, and every pod Normal and Ready."""
        d = self.deployment()
        if IN_PROGRESS in annotations_of(d):
            return False
        pods = self.pods()
        return (len(pods) == d["spec"]["replicas"]
                and all(state_of(p) == "Normal" and is_ready(p) for p in pods))

    def wait_created(self, timeout=20):
        wait_for(self.rollout_complete, timeout, "the initial rollout of %s/%s" % (self.ns, self.name), self)
        # The loop's resync sets the readiness gate True on new pods; wait until it settles.
        wait_for(lambda: all(is_ready(p) for p in self.pods()), timeout, "pods Ready", self)
        return self.pods()

    # diagnostics
    def pod_table(self, pods=None):
        pods = self.pods() if pods is None else pods
        rows = [("NAME", "UID", "READY", "STATUS", "RESTARTS", "IMAGES", "STATE", "FINALIZERS")]
        for p in pods:
            cs = (p.get("status") or {}).get("containerStatuses") or []
            ready = sum(1 for c in cs if c.get("ready"))
            rows.append((p["metadata"]["name"], p["metadata"]["uid"][:8],
                         "%d/%d%s" % (ready, len(p["spec"]["containers"]), "" if is_ready(p) else " (NotReady)"),
                         (p.get("status") or {}).get("phase", "?")
                         + (" deleting" if p["metadata"].get("deletionTimestamp") else ""),
                         ",".join("%s=%d" % kv for kv in sorted(restart_counts(p).items())),
                         ",".join("%s=%s" % kv for kv in sorted(images(p).items())),
                         state_of(p), ",".join(p["metadata"].get("finalizers") or []) or "-"))
        return format_table(rows)

    def describe(self, webhooks=()):
        """Everything needed to understand a failure."""
        out = []
        try:
            d = self.deployment()
            out.append("Deployment %s/%s: generation=%s paused=%s annotations=%s\n  status=%s" % (
                self.ns, self.name, d["metadata"].get("generation"), d["spec"].get("paused", False),
                json.dumps(annotations_of(d), sort_keys=True),
                json.dumps(d.get("status"), sort_keys=True)))
            out.append("  template images=%s labels=%s" % (
                {c["name"]: c["image"] for c in d["spec"]["template"]["spec"]["containers"]},
                d["spec"]["template"]["metadata"].get("labels")))
        except Exception as e:  # noqa: BLE001 - diagnostics must not fail
            out.append("Deployment: %s" % e)
        try:
            for rs in self.replicasets():
                out.append("ReplicaSet %s: replicas=%s/%s images=%s annotations=%s" % (
                    rs["metadata"]["name"], (rs.get("status") or {}).get("replicas"), rs["spec"].get("replicas"),
                    {c["name"]: c["image"] for c in rs["spec"]["template"]["spec"]["containers"]},
                    sorted(annotations_of(rs))))
        except Exception as e:  # noqa: BLE001
            out.append("ReplicaSets: %s" % e)
        try:
            out.append("Pods:\n" + self.pod_table(sorted(self.all_pods(), key=lambda p: p["metadata"]["name"])))
        except Exception as e:  # noqa: BLE001
            out.append("Pods: %s" % e)
        try:
            out.append("Events:")
            for e in self.events():
                out.append("  " + event_line(e))
        except Exception as e:  # noqa: BLE001
            out.append("Events: %s" % e)
        for w in webhooks:
            out.append("--- tail of %s (%s):\n%s" % (w.identity, w.log_path, w.log_tail(40)))
        return "\n".join(out)


def event_line(e):
    io = e.get("involvedObject") or {}
    src = e.get("reportingComponent") or (e.get("source") or {}).get("component") or ""
    inst = e.get("reportingInstance") or ""
    return "%-7s %-24s %s/%s (%s%s): %s" % (e.get("type", ""), e.get("reason", ""), io.get("kind", ""),
                                            io.get("name", ""), src, "/" + inst if inst else "",
                                            e.get("message", ""))


class PodSampler(kube.PodSampler):
    """kube.PodSampler over the Deployment's pods as the observer lists them."""

    def __init__(self, app, interval=0.02):
        super().__init__(lambda: app.c.observer.items(pods_path(app.ns), labelSelector="app=" + app.name),
                         interval)


# ---------------------------------------------------------------------------------------------
# The hook handler (what an LB controller would do)


def set_finalizer(kube, ns, pod_name, finalizer, present):
    """Adds or removes a finalizer with a resourceVersion precondition; retries on conflict."""
    for _ in range(50):
        pod = kube.get(pods_path(ns, pod_name))
        fins = list(pod["metadata"].get("finalizers") or [])
        if (finalizer in fins) == present:
            return pod
        fins = fins + [finalizer] if present else [f for f in fins if f != finalizer]
        try:
            return kube.merge_patch(pods_path(ns, pod_name), {"metadata": {
                "finalizers": fins, "resourceVersion": pod["metadata"]["resourceVersion"]}})
        except ApiError as e:
            if e.code not in (409, 429, 500, 503):
                raise
            time.sleep(0.02)
    raise Failure("could not change finalizer %s on %s" % (finalizer, pod_name))


def set_label(kube, ns, pod_name, key, value):
    """Sets (or with value None removes) a pod label with a resourceVersion precondition."""
    for _ in range(50):
        pod = kube.get(pods_path(ns, pod_name))
        if labels_of(pod).get(key) == value:
            return pod
        try:
            return kube.merge_patch(pods_path(ns, pod_name), {"metadata": {
                "labels": {key: value}, "resourceVersion": pod["metadata"]["resourceVersion"]}})
        except ApiError as e:
            if e.code not in (409, 429, 500, 503):
                raise
            time.sleep(0.02)
    raise Failure("could not set label %s on %s" % (key, pod_name))
