#!/usr/bin/env python3
"""`make bench-first-sync`: peak RSS and time of the loop's first sync in a big cluster.

  first_sync_bench.py BINARY CERT_DIR OUT_DIR [--replicasets 20000] [--pods 10000]
                      [--compare OTHER_BINARY] [--max-peak-mib N]

The lists come from a fixture server (this script with --serve, a separate process): the real
kube-apiserver's list wire format (limit + continue, a resourceVersion per page, watches that
stay open and send nothing), with objects shaped like the real ones, managedFields included:

- 1 opted-in Deployment per 10 opted-in pods (10 replicas), each with 1 active and 4 history
  ReplicaSets (opted-in templates); the other ReplicaSets belong to not-opted-in Deployments
  (1 active with 3 replicas, 4 history each). Their pods are not opted in, so the loop's pod
  informer (`labelSelector=inplace-webhook.io/enabled=true`) never receives them.
- 50 namespaces.

For each binary (`serve --api-server` against the fixture, no leader election): the time from the
process start to the loop's "caches synced" log line, the peak RSS (VmHWM, /proc) once synced,
the RSS a few seconds later (after the loop's malloc_trim), the informers' own estimate of the
bytes they hold (inplace_webhook_informer_bytes), and the list requests the fixture served (pages
per resource). A run with no objects gives the process's baseline. Exits 1 if a binary's peak
exceeds --max-peak-mib (when given) or if the caches do not hold every object.
Writes OUT_DIR/results.md and results.json.
"""
import argparse
import copy
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "curl"))
from webhook_process import free_port, stop_process  # noqa: E402

ENABLED = "inplace-webhook.io/enabled"
NAMESPACES = 50
LIST_RV = "987654"


# ----------------------------------------------------------------------------------------------
# Objects shaped like the real ones (kube-controller-manager and kubelet fields, managedFields)


def container(name, image):
    return {
        "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                           "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1,
                           "failureThreshold": 3},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }


def template(app, opted, hash_):
    labels = {"app": app, "team": "payments", "pod-template-hash": hash_}
    if opted:
        labels[ENABLED] = "true"
    spec = {
        "containers": [container("app", f"registry.example.com/{app}:1.{hash_[:2]}"),
                       container("sidecar", "registry.example.com/envoy:1.30")],
        "volumes": [{"name": "config", "configMap": {"name": app + "-config", "defaultMode": 420}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "securityContext": {}, "schedulerName": "default-scheduler",
    }
    if opted:
        spec["readinessGates"] = [{"conditionType": "inplace-webhook.io/InPlaceUpdateReady"}]
    return {"metadata": {"labels": labels, "annotations": {"prometheus.io/scrape": "true"}},
            "spec": spec}


def managed(manager, operation, subresource=None):
    fields = {"f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}},
                             "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                             "f:ownerReferences": {".": {}, 'k:{"uid":"x"}': {}}},
              "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                  "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                  "f:spec": {"f:containers": {'k:{"name":"app"}': {
                      ".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                      "f:ports": {}, "f:readinessProbe": {}, "f:resources": {}}}}}}}
    m = {"manager": manager, "operation": operation, "apiVersion": "apps/v1",
         "time": "2026-11-30T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        m["subresource"] = subresource
    return m


def owner(kind, name, uid):
    api = "apps/v1"
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True,
             "blockOwnerDeletion": True}]


def deployment(ns, name, uid, replicas, opted, hash_):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "resourceVersion": "1000",
                     "generation": 5, "creationTimestamp": "2026-11-01T10:00:00Z",
                     "labels": {"app": name}, "annotations": {"deployment.kubernetes.io/revision": "5"},
                     "managedFields": [managed("kubectl", "Update"),
                                       managed("kube-controller-manager", "Update", "status")]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template(name, opted, hash_), "strategy": {
                     "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
                 "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": 5, "replicas": replicas, "updatedReplicas": replicas,
                   "readyReplicas": replicas, "availableReplicas": replicas, "conditions": [
                       {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "lastUpdateTime": "2026-11-01T10:01:00Z", "lastTransitionTime": "2026-11-01T10:01:00Z",
                        "message": "Deployment has minimum availability."},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                        "lastUpdateTime": "2026-11-01T10:01:00Z", "lastTransitionTime": "2026-11-01T10:00:00Z",
                        "message": f'ReplicaSet "{name}-{hash_}" has successfully progressed.'}]},
    }


def replicaset(ns, dname, duid, hash_, uid, replicas, opted, revision):
    t = template(dname, opted, hash_)
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{dname}-{hash_}", "namespace": ns, "uid": uid, "resourceVersion": "2000",
                     "generation": 1, "creationTimestamp": "2026-11-01T10:00:00Z",
                     "labels": dict(t["metadata"]["labels"]),
                     "annotations": {"deployment.kubernetes.io/desired-replicas": str(replicas),
                                     "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                                     "deployment.kubernetes.io/revision": str(revision)},
                     "ownerReferences": owner("Deployment", dname, duid),
                     "managedFields": [managed("kube-controller-manager", "Update"),
                                       managed("kube-controller-manager", "Update", "status")]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": dname, "pod-template-hash": hash_}},
                 "template": t},
        "status": {"replicas": replicas, "fullyLabeledReplicas": replicas, "readyReplicas": replicas,
                   "availableReplicas": replicas, "observedGeneration": 1},
    }


def pod(ns, rs, i):
    meta = rs["metadata"]
    name = f"{meta['name']}-{i:05x}"
    t = rs["spec"]["template"]
    statuses = [{"name": c["name"], "image": c["image"], "imageID": c["image"] + "@sha256:" + "ab" * 32,
                 "containerID": "containerd://" + ("%032x" % (i + 1)) + meta["uid"].encode().hex()[:32],
                 "ready": True, "started": True, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-11-01T10:00:05Z"}}, "lastState": {}}
                for c in t["spec"]["containers"]]
    conds = [{"type": ty, "status": "True", "lastProbeTime": None, "lastTransitionTime": "2026-11-01T10:00:06Z"}
             for ty in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled",
                        "inplace-webhook.io/InPlaceUpdateReady")]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "generateName": meta["name"] + "-", "namespace": ns,
                     "uid": f"{meta['uid']}-{i:05d}", "resourceVersion": "3000",
                     "creationTimestamp": "2026-11-01T10:00:00Z",
                     "labels": dict(t["metadata"]["labels"]),
                     "annotations": {"inplace-webhook.io/state": "Normal"},
                     "ownerReferences": owner("ReplicaSet", meta["name"], meta["uid"]),
                     "managedFields": [managed("kube-controller-manager", "Update"),
                                       managed("kubelet", "Update", "status")]},
        "spec": dict(copy.deepcopy(t["spec"]), nodeName=f"node-{i % 40}", serviceAccountName="default",
                     tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                   "effect": "NoExecute", "tolerationSeconds": 300}]),
        "status": {"phase": "Running", "conditions": conds, "hostIP": "10.0.0.1", "podIP": "10.244.1.2",
                   "podIPs": [{"ip": "10.244.1.2"}], "startTime": "2026-11-01T10:00:01Z", "qosClass": "Burstable",
                   "containerStatuses": statuses},
    }


def generate(n_rs, n_pods):
    """(deployments, replicasets, pods): lists of (namespace, labels, encoded JSON)."""
    out = {"deployments": [], "replicasets": [], "pods": []}

    def add(kind, obj):
        m = obj["metadata"]
        out[kind].append((m["namespace"], m.get("labels") or {}, json.dumps(obj, separators=(",", ":")).encode()))

    opted = n_pods // 10
    plain = max(0, (n_rs - 5 * opted) // 5)
    for d in range(opted + plain):
        ns = f"team-{d % NAMESPACES:02d}"
        is_opted = d < opted
        name = f"{'web' if is_opted else 'svc'}-{d:05d}"
        duid = f"d-{d:08d}"
        replicas = 10 if is_opted else 3
        hashes = [f"{(d * 7 + k) % 0xfffff:05x}h{k}" for k in range(5)]
        add("deployments", deployment(ns, name, duid, replicas, is_opted, hashes[-1]))
        for k, h in enumerate(hashes):
            active = k == len(hashes) - 1
            rs = replicaset(ns, name, duid, h, f"rs-{d:08d}-{k}", replicas if active else 0, is_opted, k + 1)
            add("replicasets", rs)
            if active and is_opted:
                for i in range(replicas):
                    add("pods", pod(ns, rs, i))
    return out


# ----------------------------------------------------------------------------------------------
# The fixture server


class Fixture:
    def __init__(self, objects):
        self.objects = objects
        self.lock = threading.Lock()
        self.lists = {k: 0 for k in objects}  # list requests (pages) served
        self.unpaged = {k: 0 for k in objects}
        self.watches = 0
        self.stopping = threading.Event()


PATHS = {
    "deployments": re.compile(r"^/apis/apps/v1/(?:namespaces/([^/]+)/)?deployments$"),
    "replicasets": re.compile(r"^/apis/apps/v1/(?:namespaces/([^/]+)/)?replicasets$"),
    "pods": re.compile(r"^/api/v1/(?:namespaces/([^/]+)/)?pods$"),
}


def parse_selector(text):
    """Equality requirements only ("a=b,c=d"); None when there is something else."""
    reqs = []
    for part in filter(None, (text or "").split(",")):
        k, sep, v = part.partition("=")
        if not sep or k.endswith("!"):
            return None
        reqs.append((k.strip(), v.lstrip("=").strip()))
    return reqs


def make_handler(fixture):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, code, body):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def status(self, code, reason, message):
            self.send(code, json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": message, "reason": reason, "code": code}).encode())

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(url.query))
            for kind, rx in PATHS.items():
                m = rx.match(url.path)
                if m:
                    return self.collection(kind, m.group(1), q)
            self.status(404, "NotFound", f"{url.path} not found")

        def collection(self, kind, ns, q):
            if q.get("watch") in ("true", "1"):
                return self.watch(q)
            reqs = parse_selector(q.get("labelSelector"))
            if reqs is None:
                return self.status(400, "BadRequest", "this fixture supports only equality selectors")
            items = [e for e in fixture.objects[kind]
                     if (ns is None or e[0] == ns) and all(e[1].get(k) == v for k, v in reqs)]
            limit = int(q.get("limit") or 0)
            start = int(q.get("continue") or 0)
            end = len(items) if limit <= 0 else min(len(items), start + limit)
            meta = {"resourceVersion": LIST_RV}
            if end < len(items):
                meta["continue"] = str(end)
                meta["remainingItemCount"] = len(items) - end
            with fixture.lock:
                fixture.lists[kind] += 1
                if limit <= 0:
                    fixture.unpaged[kind] += 1
            list_kind = {"deployments": "DeploymentList", "replicasets": "ReplicaSetList", "pods": "PodList"}[kind]
            head = json.dumps({"kind": list_kind, "apiVersion": "v1" if kind == "pods" else "apps/v1",
                               "metadata": meta}).encode()[:-1]
            self.send(200, head + b',"items":[' + b",".join(e[2] for e in items[start:end]) + b"]}")

        def watch(self, q):
            with fixture.lock:
                fixture.watches += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            fixture.stopping.wait(float(q.get("timeoutSeconds") or 300))
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            if self.path.startswith("/apis/authentication.k8s.io/v1/selfsubjectreviews"):
                body["status"] = {"userInfo": {"username": fixture.user, "groups": ["system:authenticated"]}}
            elif self.path.startswith("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"):
                body["status"] = {"allowed": True}
            self.send(201, json.dumps(body).encode())

    return Handler


def serve(args):
    objects = generate(args.replicasets, args.pods)
    fixture = Fixture(objects)
    fixture.user = args.user
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fixture))
    server.daemon_threads = True
    sizes = {k: sum(len(e[2]) for e in v) for k, v in objects.items()}
    counts = {k: len(v) for k, v in objects.items()}
    stats_path = args.serve + ".stats"

    def dump_stats():
        while True:
            with fixture.lock:
                s = {"lists": dict(fixture.lists), "unpaged": dict(fixture.unpaged), "watches": fixture.watches,
                     "counts": counts, "bytes": sizes}
            with open(stats_path + ".tmp", "w") as f:
                json.dump(s, f)
            os.replace(stats_path + ".tmp", stats_path)
            time.sleep(0.2)

    threading.Thread(target=dump_stats, daemon=True).start()
    with open(args.serve + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.serve + ".tmp", args.serve)
    server.serve_forever()


# ----------------------------------------------------------------------------------------------
# The measurement


def memory_kib(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


class FixtureProcess:
    def __init__(self, out_dir, replicasets, pods, user):
        self.port_file = os.path.join(out_dir, f"fixture-{replicasets}-{pods}.port")
        for p in (self.port_file, self.port_file + ".stats"):
            if os.path.exists(p):
                os.unlink(p)
        self.log = open(os.path.join(out_dir, "fixture.out"), "ab")
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", self.port_file,
                                      "--replicasets", str(replicasets), "--pods", str(pods), "--user", user,
                                      "x", "x", "x"], stdout=self.log, stderr=self.log)
        deadline = time.time() + 600
        while not os.path.exists(self.port_file) or not os.path.exists(self.port_file + ".stats"):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("the fixture server did not start (see fixture.out)")
            time.sleep(0.1)
        self.port = int(open(self.port_file).read())

    def stats(self):
        time.sleep(0.3)
        return json.load(open(self.port_file + ".stats"))

    def stop(self):
        stop_process(self.proc, 10)
        self.log.close()


USER = "system:serviceaccount:inplace-webhook:inplace-webhook"


def run_binary(binary, cert_dir, out_dir, api_args, label, settle):
    """One first sync: `serve` with `api_args` (--api-server and its credentials), measured."""
    port, probe = free_port(), free_port()
    log_path = os.path.join(out_dir, f"{label}.log")
    log = open(log_path, "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [binary, "serve", "--bind-address", "127.0.0.1", "--port", str(port), "--probe-port", str(probe),
         "--tls-cert-file", os.path.join(cert_dir, "tls.crt"),
         "--tls-private-key-file", os.path.join(cert_dir, "tls.key"), "--log-format", "json",
         "--shutdown-delay-seconds", "0", *api_args, "--leader-elect", "false", "--controller-user", USER],
        stdout=log, stderr=log)
    try:
        synced = None
        deadline = t0 + 600
        while synced is None:
            if proc.poll() is not None:
                raise RuntimeError(f"{binary} exited with {proc.returncode} (see {log_path})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{binary}: no 'caches synced' within 600 s (see {log_path})")
            with open(log_path, "rb") as f:
                if b"caches synced" in f.read():
                    synced = time.monotonic() - t0
                    break
            time.sleep(0.02)
        peak = memory_kib(proc.pid)["VmHWM"]
        time.sleep(settle)  # the loop hands freed list memory back (malloc_trim) shortly after the sync
        mem = memory_kib(proc.pid)
        m = metrics(probe)
        cached = {r: int(m.get(f'inplace_webhook_informer_objects{{resource="{r}"}}', -1))
                  for r in ("deployments", "replicasets", "pods")}
        held = {r: int(m.get(f'inplace_webhook_informer_bytes{{resource="{r}"}}', -1))
                for r in ("deployments", "replicasets", "pods")}
        return {"binary": binary, "firstSyncSeconds": round(synced, 2), "peakKiB": max(peak, mem["VmHWM"]),
                "rssAfterKiB": mem["VmRSS"], "cached": cached, "cacheBytes": held}
    finally:
        stop_process(proc, 20)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("cert_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--replicasets", type=int, default=20000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--compare", action="append", default=[], help="another binary to measure the same way")
    ap.add_argument("--max-peak-mib", type=float, default=0, help="fail when the (first) binary's peak exceeds it")
    ap.add_argument("--settle-seconds", type=float, default=6.0)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--user", default=USER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args)

    os.makedirs(args.out_dir, exist_ok=True)
    binaries = [os.path.abspath(args.binary)] + [os.path.abspath(b) for b in args.compare]
    results = {"replicasets": args.replicasets, "pods": args.pods, "runs": []}
    ok = True
    for n_rs, n_pods, what in ((0, 0, "baseline"), (args.replicasets, args.pods, "big")):
        fixture = FixtureProcess(args.out_dir, n_rs, n_pods, USER)
        try:
            served = fixture.stats()
            for i, binary in enumerate(binaries):
                before = fixture.stats()["lists"]
                r = run_binary(binary, args.cert_dir, args.out_dir,
                               ["--api-server", f"http://127.0.0.1:{fixture.port}"], f"{what}-{i}",
                               args.settle_seconds)
                after = fixture.stats()
                r["pages"] = {k: after["lists"][k] - before[k] for k in before}
                r["fixture"] = what
                r["objects"] = served["counts"]
                r["fixtureBytes"] = served["bytes"]
                results["runs"].append(r)
                print(json.dumps(r), flush=True)
                if r["cached"] != served["counts"]:
                    print(f"FAIL: {binary} cached {r['cached']}, the fixture serves {served['counts']}")
                    ok = False
                if i == 0 and what == "big" and args.max_peak_mib and r["peakKiB"] > args.max_peak_mib * 1024:
                    print(f"FAIL: peak RSS {r['peakKiB'] / 1024:.1f} MiB > {args.max_peak_mib} MiB")
                    ok = False
        finally:
            fixture.stop()

    lines = ["| binary | objects (deploy/rs/pods) | list bytes served | pages (deploy/rs/pods) | first sync | "
             "peak RSS | RSS after trim | cache estimate |", "|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        o, p = r["objects"], r["pages"]
        lines.append("| {} | {}/{}/{} | {:.1f} MiB | {}/{}/{} | {:.2f} s | {:.1f} MiB | {:.1f} MiB | {:.1f} MiB |".format(
            os.path.basename(r["binary"]), o["deployments"], o["replicasets"], o["pods"],
            sum(r["fixtureBytes"].values()) / 2 ** 20, p["deployments"], p["replicasets"], p["pods"],
            r["firstSyncSeconds"], r["peakKiB"] / 1024, r["rssAfterKiB"] / 1024,
            sum(max(0, v) for v in r["cacheBytes"].values()) / 2 ** 20))
    md = "\n".join(lines)
    print(md)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main() or 0)
