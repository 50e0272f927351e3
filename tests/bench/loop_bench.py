#!/usr/bin/env python3
"""`make bench-loop`: the in-place loop (the real binary, `serve --api-server`) against the test
Kubernetes API server (tests/apiserver/server.py) with instant kubelet restarts.

  loop_bench.py BINARY SOURCE_DIR CERT_DIR OUT_DIR [--pods 1000] [--idle-pods 10000]
                [--idle-seconds 30] [--skip-hooks] [--skip-idle]

1. A Deployment of --pods opted-in pods (maxUnavailable 25%, no hooks) gets a new image. The
   Deployment UPDATE goes through the webhook: the script posts the AdmissionReview to
   /mutate/deployments, applies the JSONPatch it answers, checks the result with
   /validate/deployments, and PUTs it to the API server. Then: wall time until the loop drops
   `in-progress`, the loop's API writes per pod (PATCH/PUT/POST with the loop's User-Agent, from
   the server's request log, by kind), its reads, its CPU time and RSS (from /proc).
2. The same with the `inPlaceUpdate` hook (pre and post: labelsHandler lb=on), played by the script
   as an LB controller would: it watches the pods, removes `lb` from pods held in PreparingUpdate and
   puts it back on pods held in Updated.
3. Idle with --idle-pods opted-in pods cached: RSS growth per cached pod when they arrive by watch
   and when a restarted loop lists them, the informer's own estimate (ApproxBytes), and CPU time and
   API requests over --idle-seconds without changes.

Checks that every update happened in place (same pod UIDs, one restart of the changed container,
no new ReplicaSet). Prints a markdown table and writes OUT_DIR/results.md and results.json.
"""
import argparse
import base64
import copy
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "curl"))
import json_patch  # noqa: E402
from webhook_process import free_port, stop_process  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ENABLED = "inplace-webhook.io/enabled"
STATE = "inplace-webhook.io/state"
IN_PROGRESS = "inplace-webhook.io/in-progress"
LIFECYCLE = "inplace-webhook.io/lifecycle"
LOOP_AGENT = "inplace-webhook/"
WRITE_METHODS = ("POST", "PUT", "PATCH")


def wait_until(what, predicate, timeout, interval=0.1):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# ----------------------------------------------------------------------------------------------
# Processes


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def memory_kib(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


class ApiServer:
    """tests/apiserver/server.py on a free port, with a keep-alive JSON client."""

    def __init__(self, source_dir, out_dir):
        self.port_file = os.path.join(out_dir, "apiserver.port")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.log = open(os.path.join(out_dir, "apiserver.out"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(source_dir, "tests", "apiserver", "server.py"), "--port", "0",
             "--port-file", self.port_file, "--log-file", os.path.join(out_dir, "apiserver.log")],
            stdout=self.log, stderr=self.log)
        self.port = int(wait_until("the test API server's port file",
                                   lambda: os.path.exists(self.port_file) and open(self.port_file).read().strip(),
                                   30))
        self.conn = None
        self.lock = threading.Lock()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None, content_type="application/json", ok=(200, 201)):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        headers = {"Content-Type": content_type, "User-Agent": "loop-bench"} if data is not None else {
            "User-Agent": "loop-bench"}
        with self.lock:
            for attempt in range(2):
                try:
                    if self.conn is None:
                        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                    self.conn.request(method, path, body=data, headers=headers)
                    resp = self.conn.getresponse()
                    raw = resp.read()
                    break
                except (OSError, http.client.HTTPException):
                    self.conn = None
                    if attempt == 1:
                        raise
        out = json.loads(raw) if raw and raw[:1] in (b"{", b"[") else raw
        if ok and resp.status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {raw[:500]!r}")
        return resp.status, out

    def get(self, path):
        return self.call("GET", path)[1]

    def stop(self):
        stop_process(self.proc, 15)
        self.log.close()


class Loop:
    """inplace-webhook serve: the webhook on HTTPS and the loop against the test API server."""

    def __init__(self, binary, cert_dir, api_url, log_path):
        self.cert_dir = cert_dir
        self.port = free_port()
        self.probe_port = free_port()
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, "serve", "--bind-address", "127.0.0.1", "--port", str(self.port),
             "--probe-port", str(self.probe_port), "--tls-cert-file", os.path.join(cert_dir, "tls.crt"),
             "--tls-private-key-file", os.path.join(cert_dir, "tls.key"), "--log-format", "json",
             "--shutdown-delay-seconds", "0", "--api-server", api_url, "--leader-elect", "false",
             # The test API server here has no authentication: the loop's identity is anonymous.
             "--controller-user", "system:anonymous"],
            stdout=self.log, stderr=self.log)
        self.ssl = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
        wait_until("the webhook's /readyz", self._ready, 30)

    def _ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"inplace-webhook exited with {self.proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    @property
    def pid(self):
        return self.proc.pid

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def cached(self, resource):
        return self.metrics().get(f'inplace_webhook_informer_objects{{resource="{resource}"}}')

    def review(self, path, request):
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": request}).encode()
        conn = http.client.HTTPSConnection("localhost", self.port, context=self.ssl, timeout=30)
        try:
            conn.request("POST", path + "?timeout=10s", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"webhook {path}: HTTP {resp.status}: {raw[:300]!r}")
        return json.loads(raw)["response"]

    def stop(self):
        stop_process(self.proc, 20)
        self.log.close()


# ----------------------------------------------------------------------------------------------
# Kubernetes objects


def deployments_path(ns, name=""):
    return f"/apis/apps/v1/namespaces/{ns}/deployments" + (f"/{name}" if name else "")


def pods_path(ns):
    return f"/api/v1/namespaces/{ns}/pods"


def deployment(ns, replicas, hooks=False):
    labels = {"app": "web", ENABLED: "true"}
    template_labels = dict(labels)
    annotations = {}
    if hooks:
        template_labels["lb"] = "on"  # the hook label comes with the template (Kruise's pattern)
        annotations[LIFECYCLE] = json.dumps({"inPlaceUpdate": {"labelsHandler": {"lb": "on"}}})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.25"},
                                        {"name": "sidecar", "image": "busybox:1.36"}]},
            },
        },
    }


def create_deployment(api, ns, replicas, hooks=False, timeout=600):
    api.call("POST", deployments_path(ns), deployment(ns, replicas, hooks))

    def ready():
        d = api.get(deployments_path(ns, "web"))
        return d.get("status", {}).get("readyReplicas", 0) == replicas
    wait_until(f"{replicas} ready pods", ready, timeout, 0.5)
    api.call("GET", "/_test/idle?timeoutMs=60000")


def list_pods(api, ns):
    return api.get(pods_path(ns) + "?labelSelector=" + urllib.request.quote(ENABLED + "=true"))["items"]


# RFC 6902, as much as the webhook's answers use.
def update_through_webhook(api, loop, ns, image):
    """kubectl set image, as the API server would run it: mutate, validate, store."""
    old = api.get(deployments_path(ns, "web"))
    new = copy.deepcopy(old)
    for c in new["spec"]["template"]["spec"]["containers"]:
        if c["name"] == "app":
            c["image"] = image
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "web", "namespace": ns, "operation": "UPDATE",
        "userInfo": {"username": "bench-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": new, "oldObject": old, "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    }
    answer = loop.review("/mutate/deployments", request)
    if not answer.get("allowed") or answer.get("patchType") != "JSONPatch":
        raise RuntimeError(f"the webhook did not intercept the update: {answer}")
    mutated = json_patch.apply(new, json.loads(base64.b64decode(answer["patch"])))
    if IN_PROGRESS not in mutated["metadata"].get("annotations", {}) or not mutated["spec"].get("paused"):
        raise RuntimeError(f"the webhook's patch did not start an in-place update: {answer}")
    check = dict(request, uid=str(uuid.uuid4()), object=mutated)
    verdict = loop.review("/validate/deployments", check)
    if not verdict.get("allowed"):
        raise RuntimeError(f"the validating webhook refused the mutated object: {verdict}")
    api.call("PUT", deployments_path(ns, "web"), mutated)
    return answer.get("warnings", [])


# ----------------------------------------------------------------------------------------------
# The LB controller that plays the hooks


class LoadBalancer(threading.Thread):
    """Watches the pods of `ns`; deregisters (removes `lb`) pods the loop holds in PreparingUpdate
    and registers (sets lb=on) pods it holds in Updated."""

    def __init__(self, api, ns):
        super().__init__(daemon=True)
        self.api = api
        self.ns = ns
        self.stopping = threading.Event()
        self.patches = 0
        self.error = None
        self.conn = None

    def run(self):
        try:
            self._run()
        except Exception as e:  # reported by the main thread
            if not self.stopping.is_set():
                self.error = e

    def _run(self):
        rv = self.api.get(pods_path(self.ns) + "?limit=1")["metadata"]["resourceVersion"]
        for pod in list_pods(self.api, self.ns):
            self.react(pod)
        while not self.stopping.is_set():
            self.conn = http.client.HTTPConnection("127.0.0.1", self.api.port, timeout=600)
            self.conn.request("GET", pods_path(self.ns) + "?watch=1&allowWatchBookmarks=true&resourceVersion="
                              + rv + "&timeoutSeconds=600", headers={"User-Agent": "loop-bench-lb"})
            resp = self.conn.getresponse()
            while not self.stopping.is_set():
                line = resp.readline()
                if not line:
                    break
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise RuntimeError(f"LB watch: {event}")
                rv = event["object"]["metadata"].get("resourceVersion", rv)
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.react(event["object"])

    def react(self, pod):
        labels = pod["metadata"].get("labels", {})
        state = labels.get(STATE)
        if state == "PreparingUpdate" and "lb" in labels:
            self._label(pod, None)
        elif state == "Updated" and "lb" not in labels:
            self._label(pod, "on")

    def _label(self, pod, value):
        path = f"{pods_path(self.ns)}/{pod['metadata']['name']}"
        body = {"metadata": {"labels": {"lb": value}, "resourceVersion": pod["metadata"]["resourceVersion"]}}
        status, _ = self.api.call("PATCH", path, body, "application/merge-patch+json", ok=None)
        if status == 200:
            self.patches += 1

    def stop(self):
        self.stopping.set()
        if self.conn is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except (OSError, AttributeError):
                pass
        self.join(timeout=10)


# ----------------------------------------------------------------------------------------------
# Measurements


def loop_requests(api):
    items = api.get("/_test/requests")["items"]
    return [r for r in items if (r.get("userAgent") or "").startswith(LOOP_AGENT)]


def classify(request):
    path = request["path"]
    if "/events" in path:
        return "events"
    if path.endswith("/status") and "/pods/" in path:
        return "pods/status"
    for kind in ("pods", "replicasets", "deployments", "leases"):
        if f"/{kind}" in path:
            return kind
    return "other"


def summarize_requests(requests, pods):
    writes = {}
    reads = {}
    conflicts = 0
    for r in requests:
        kind = classify(r)
        if r["method"] in WRITE_METHODS:
            writes[kind] = writes.get(kind, 0) + 1
            conflicts += r.get("code") == 409
        else:
            verb = r.get("verb") or r["method"]
            reads[verb] = reads.get(verb, 0) + 1
    total = sum(writes.values())
    pod_writes = writes.get("pods", 0) + writes.get("pods/status", 0)
    return {"writes": writes, "reads": reads, "conflicts": conflicts, "writes_total": total,
            "writes_per_pod": total / pods, "pod_writes_per_pod": pod_writes / pods,
            "event_writes_per_pod": writes.get("events", 0) / pods,
            "rollout_writes": total - pod_writes - writes.get("events", 0)}


def run_update(api, loop, ns, pods, hooks, image="nginx:1.27"):
    print(f"== {pods} pods, {'pre and post hooks' if hooks else 'no hooks'}", flush=True)
    create_deployment(api, ns, pods, hooks)
    wait_until("the loop's pod cache", lambda: (loop.cached("pods") or 0) >= pods, 120)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in list_pods(api, ns)}
    lb = LoadBalancer(api, ns) if hooks else None
    if lb:
        lb.start()
        time.sleep(0.5)  # its watch is open
    api.call("DELETE", "/_test/requests")
    cpu0 = cpu_seconds(loop.pid)
    mem0 = memory_kib(loop.pid)
    m0 = loop.metrics()
    t0 = time.time()
    warnings = update_through_webhook(api, loop, ns, image)

    def done():
        d = api.get(deployments_path(ns, "web"))
        return IN_PROGRESS not in d["metadata"].get("annotations", {}) and not d["spec"].get("paused")
    wait_until("the in-place update to complete", done, 1800, 0.1)
    wall = time.time() - t0
    cpu1 = cpu_seconds(loop.pid)
    mem1 = memory_kib(loop.pid)
    m1 = loop.metrics()
    requests = loop_requests(api)
    if lb:
        lb.stop()
        if lb.error:
            raise lb.error

    # In place: same pods, the changed container restarted once, no new ReplicaSet.
    problems = []
    after = list_pods(api, ns)
    if {p["metadata"]["name"]: p["metadata"]["uid"] for p in after} != before:
        problems.append("pods were recreated")
    for p in after:
        labels = p["metadata"].get("labels", {})
        images = {c["name"]: c["image"] for c in p["spec"]["containers"]}
        restarts = {c["name"]: c["restartCount"] for c in p["status"]["containerStatuses"]}
        if images["app"] != image or restarts != {"app": 1, "sidecar": 0} or labels.get(STATE, "Normal") != "Normal":
            problems.append(f"pod {p['metadata']['name']}: images {images}, restarts {restarts}, "
                            f"state {labels.get(STATE)}")
            break
        if hooks and labels.get("lb") != "on":
            problems.append(f"pod {p['metadata']['name']} is not registered with the LB")
            break
    # One ReplicaSet with pods (the finish keeps the old template as a zero-replica history ReplicaSet, for
    # `kubectl rollout history` and undo).
    rs = api.get(f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"]
    if len([r for r in rs if r["spec"].get("replicas", 0) > 0]) != 1 or len(rs) > 2:
        problems.append(f"{len(rs)} ReplicaSets: {[(r['metadata']['name'], r['spec'].get('replicas')) for r in rs]}")
    if problems:
        raise RuntimeError(f"the update was not done in place: {problems}")

    def delta(name):
        return m1.get(name, 0) - m0.get(name, 0)
    out = {
        "pods": pods, "hooks": hooks, "wall_seconds": wall, "cpu_seconds": cpu1 - cpu0,
        "rss_kib_before": mem0["VmRSS"], "rss_kib_after": mem1["VmRSS"], "rss_kib_peak": mem1["VmHWM"],
        "requests": summarize_requests(requests, pods),
        "passes": {src: delta(f'inplace_webhook_loop_passes_total{{source="{src}"}}')
                   for src in ("cache", "api", "deferred")},
        "loop_conflicts": delta("inplace_webhook_loop_conflicts_total"),
        "lb_patches": lb.patches if lb else 0,
        "warnings": warnings,
    }
    print(json.dumps(out, indent=1), flush=True)
    api.call("DELETE", deployments_path(ns, "web"))
    wait_until("the pods to be gone", lambda: not list_pods(api, ns), 300, 0.5)
    api.call("GET", "/_test/idle?timeoutMs=60000")
    return out


def settle(loop, seconds=2.0):
    """Waits until the loop's caches apply no event for `seconds` (and its heap trim has run)."""
    def quiet():
        a = sum(v for k, v in loop.metrics().items() if k.startswith("inplace_webhook_informer_events_total"))
        time.sleep(seconds)
        b = sum(v for k, v in loop.metrics().items() if k.startswith("inplace_webhook_informer_events_total"))
        return a == b
    wait_until("the loop's caches to settle", quiet, 300, 0)


def run_idle(api, binary, cert_dir, out_dir, pods, seconds):
    print(f"== idle with {pods} opted-in pods", flush=True)
    api.call("POST", "/_test/reset")
    api.call("POST", "/_test/sim", {"restartDelayMs": 0, "notReadyMs": 0, "startupDelayMs": 0})
    log = os.path.join(out_dir, "loop.log")
    loop = Loop(binary, cert_dir, api.url, log)
    try:
        wait_until("the loop's caches", lambda: loop.cached("pods") is not None, 60)
        settle(loop)
        rss_empty = memory_kib(loop.pid)["VmRSS"]
        create_deployment(api, "bench-idle", pods, timeout=1800)
        wait_until("the loop's pod cache", lambda: (loop.cached("pods") or 0) >= pods, 600, 0.5)
        settle(loop)
        m = loop.metrics()
        cached = m['inplace_webhook_informer_objects{resource="pods"}']
        approx = m['inplace_webhook_informer_bytes{resource="pods"}']
        rss_watch = memory_kib(loop.pid)["VmRSS"]

        api.call("DELETE", "/_test/requests")
        e0 = sum(v for k, v in loop.metrics().items() if k.startswith("inplace_webhook_informer_events_total"))
        cpu0 = cpu_seconds(loop.pid)
        time.sleep(seconds)
        cpu1 = cpu_seconds(loop.pid)
        e1 = sum(v for k, v in loop.metrics().items() if k.startswith("inplace_webhook_informer_events_total"))
        idle_requests = loop_requests(api)
        rss_idle = memory_kib(loop.pid)["VmRSS"]
    finally:
        loop.stop()
    # A restarted loop lists them all at once.
    loop = Loop(binary, cert_dir, api.url, log)
    try:
        wait_until("the loop's pod cache after a restart", lambda: (loop.cached("pods") or 0) >= pods, 600, 0.5)
        settle(loop)
        mem = memory_kib(loop.pid)
    finally:
        loop.stop()
    out = {
        "pods": pods, "cached": cached, "approx_bytes_per_pod": approx / cached,
        "rss_kib_empty": rss_empty, "rss_kib_watch": rss_watch, "rss_kib_idle_end": rss_idle,
        "rss_bytes_per_pod_watch": (rss_watch - rss_empty) * 1024 / pods,
        "rss_kib_relisted": mem["VmRSS"], "rss_kib_relist_peak": mem["VmHWM"],
        "rss_bytes_per_pod_relisted": (mem["VmRSS"] - rss_empty) * 1024 / pods,
        "idle_seconds": seconds, "idle_cpu_seconds": cpu1 - cpu0,
        "idle_requests": len(idle_requests), "idle_events": e1 - e0,
    }
    print(json.dumps(out, indent=1), flush=True)
    return out


# ----------------------------------------------------------------------------------------------
# Report


def table(results):
    rows = []
    for u in results["updates"]:
        r = u["requests"]
        name = f"{u['pods']} pods, " + ("pre+post hooks" if u["hooks"] else "no hooks")
        target = 4 if u["hooks"] else 2
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["writes"].items()))
        reads = ", ".join(f"{k} {v}" for k, v in sorted(r["reads"].items())) or "none"
        rows += [
            (name, "wall time (webhook admission to in-progress dropped)", f"{u['wall_seconds']:.1f} s", ""),
            (name, "API writes per pod: the pod (pods, pods/status)", f"{r['pod_writes_per_pod']:.3f}",
             f"≤ {target}"),
            (name, "API writes per pod: Events", f"{r['event_writes_per_pod']:.3f}", ""),
            (name, "API writes per pod: all (PATCH/PUT/POST)", f"{r['writes_per_pod']:.3f}", f"≤ {target}"),
            (name, "API writes per rollout: ReplicaSets, Deployment", f"{r['rollout_writes']}", ""),
            (name, "writes by kind; of which 409", f"{kinds}; {r['conflicts']}", ""),
            (name, "API reads (informers: LIST once, WATCH)", reads, ""),
            (name, "plans from caches / API reads / deferred",
             f"{u['passes']['cache']:.0f} / {u['passes']['api']:.0f} / {u['passes']['deferred']:.0f}", ""),
            (name, "CPU time (whole process)", f"{u['cpu_seconds']:.2f} s", ""),
            (name, "RSS before → after (peak)",
             f"{u['rss_kib_before'] / 1024:.1f} → {u['rss_kib_after'] / 1024:.1f} MiB "
             f"({u['rss_kib_peak'] / 1024:.1f})", ""),
        ]
    i = results.get("idle")
    if i:
        name = f"idle, {i['pods']} pods cached"
        rows += [
            (name, "informer ApproxBytes per cached pod", f"{i['approx_bytes_per_pod']:.0f} B", "≤ 2048 B"),
            (name, "RSS growth per pod, pods arriving by watch", f"{i['rss_bytes_per_pod_watch']:.0f} B", "≤ 2048 B"),
            (name, "RSS growth per pod, restarted loop (LIST)", f"{i['rss_bytes_per_pod_relisted']:.0f} B",
             "≤ 2048 B"),
            (name, "RSS: empty / pods by watch / after restart (LIST peak)",
             f"{i['rss_kib_empty'] / 1024:.1f} / {i['rss_kib_watch'] / 1024:.1f} / "
             f"{i['rss_kib_relisted'] / 1024:.1f} MiB ({i['rss_kib_relist_peak'] / 1024:.1f})", ""),
            (name, f"CPU time over {i['idle_seconds']} s without changes", f"{i['idle_cpu_seconds']:.2f} s", "~0"),
            (name, f"API requests / cache events over {i['idle_seconds']} s",
             f"{i['idle_requests']} / {i['idle_events']:.0f}", "0"),
        ]
    out = ["| scenario | measure | value | target |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("source_dir")
    ap.add_argument("cert_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--idle-pods", type=int, default=10000)
    ap.add_argument("--idle-seconds", type=int, default=30)
    ap.add_argument("--skip-hooks", action="store_true")
    ap.add_argument("--skip-idle", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    binary = os.path.abspath(args.binary)

    api = ApiServer(os.path.abspath(args.source_dir), args.out_dir)
    results = {"updates": [], "machine": {"cpus": os.cpu_count()}}
    try:
        # Kubelet restarts are instant: the figures are the loop's, not a simulated runtime's.
        api.call("POST", "/_test/sim", {"restartDelayMs": 0, "notReadyMs": 0, "startupDelayMs": 0})
        results["sim"] = api.get("/_test/sim")
        loop = Loop(binary, args.cert_dir, api.url, os.path.join(args.out_dir, "loop.log"))
        try:
            results["updates"].append(run_update(api, loop, "bench", args.pods, hooks=False))
            if not args.skip_hooks:
                results["updates"].append(run_update(api, loop, "bench-hooks", args.pods, hooks=True))
        finally:
            loop.stop()
        if not args.skip_idle:
            results["idle"] = run_idle(api, binary, args.cert_dir, args.out_dir, args.idle_pods, args.idle_seconds)
    finally:
        api.stop()
    md = table(results)
    print()
    print(md)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
