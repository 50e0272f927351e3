#!/usr/bin/env python3
"""`make bench-first-sync-apiserver`: the loop's first sync against the real kube-apiserver and etcd.

  first_sync_apiserver.py BINARY SOURCE_DIR CERT_DIR OUT_DIR [--replicasets 20000] [--pods 10000]
                          [--max-peak-mib N]

`make bench-first-sync` measures against a fixture server that imitates kube-apiserver's list wire format. This
runs the same measurement against the pinned kube-apiserver and etcd themselves (cluster/upstream builds), started
on 127.0.0.1 for the run with no controllers, so that the paging (limit + continue from etcd's snapshot), the
objects' encoding and the managedFields are the API server's own:

- the objects of first_sync_bench.generate(): 1 opted-in Deployment per 10 opted-in pods, each with 1 active and
  4 history ReplicaSets, and not-opted-in Deployments with theirs, in 50 namespaces; created through the API
  (Deployments first, so the ReplicaSets' and pods' owner references carry the real uids), then their status
  written through the status subresource as the controllers and the kubelet would;
- no kube-controller-manager, scheduler or kubelet: nothing changes the objects while the loop lists them (pods
  keep the nodeName they were created with; the ServiceAccount admission plugin is off, as no controller makes
  the namespaces' default ServiceAccounts);
- authentication by a static token (--token-auth-file), authorization AlwaysAllow: the loop's identity check
  (SelfSubjectReview) and access check (SelfSubjectAccessReview) get the API server's real answers.

Then first_sync_bench.run_binary with `--api-server https://127.0.0.1:PORT` (no leader election): the time
from the process start to "caches synced", the peak RSS (VmHWM), the RSS after the loop's malloc_trim, and what
the caches hold. A run before the objects are created gives the baseline. Exits 1 if the caches do not hold
every object, or the peak exceeds --max-peak-mib. Writes OUT_DIR/results.md and results.json.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "curl"))
import first_sync_bench as fsb  # noqa: E402
from webhook_process import free_port, stop_process  # noqa: E402

TOKEN = "first-sync-bench-token"


def upstream_bin(source, component):
    """The bin directory of the pinned build of `component` (built on first use, cached outside the tree)."""
    out = subprocess.run([os.path.join(source, "cluster", "upstream", "build.sh"), component],
                         check=True, capture_output=True, text=True).stdout
    return os.path.join(out.strip().splitlines()[-1], "bin")


class ApiServer:
    """etcd and kube-apiserver on 127.0.0.1, state under `work`."""

    def __init__(self, source, work):
        self.work = work
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.join(work, "logs"))
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.pki = os.path.join(work, "pki")
        subprocess.run([os.path.join(source, "cluster", "pki.sh"), self.pki, self.url], check=True,
                       capture_output=True)
        with open(os.path.join(work, "tokens.csv"), "w") as f:
            f.write('%s,%s,bench-uid,"system:authenticated"\n' % (TOKEN, fsb.USER))
        self.token_file = os.path.join(work, "token")
        with open(self.token_file, "w") as f:
            f.write(TOKEN)
        k8s, etcd = upstream_bin(source, "kubernetes"), upstream_bin(source, "etcd")
        client, peer = free_port(), free_port()
        self.procs = []
        self._start("etcd", [os.path.join(etcd, "etcd"), "--name", "bench", "--data-dir", os.path.join(work, "etcd"),
                             "--listen-client-urls", "http://127.0.0.1:%d" % client,
                             "--advertise-client-urls", "http://127.0.0.1:%d" % client,
                             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
                             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
                             "--initial-cluster", "bench=http://127.0.0.1:%d" % peer,
                             "--listen-metrics-urls", "http://127.0.0.1:%d" % free_port(),
                             "--unsafe-no-fsync", "--quota-backend-bytes", str(4 << 30), "--log-level", "warn"])
        p = self.pki
        self._start("kube-apiserver", [
            os.path.join(k8s, "kube-apiserver"), "--etcd-servers", "http://127.0.0.1:%d" % client,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--endpoint-reconciler-type", "none",
            "--tls-cert-file", p + "/apiserver.crt", "--tls-private-key-file", p + "/apiserver.key",
            "--token-auth-file", os.path.join(work, "tokens.csv"), "--authorization-mode", "AlwaysAllow",
            "--disable-admission-plugins", "ServiceAccount",
            "--service-cluster-ip-range", "10.96.0.0/16",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", p + "/sa.pub", "--service-account-signing-key-file", p + "/sa.key",
            "--profiling=false", "--v=1"])
        self.ctx = ssl.create_default_context(cafile=os.path.join(p, "ca.crt"))
        deadline = time.time() + 120
        while True:
            try:
                if self.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or any(proc.poll() is not None for proc in self.procs):
                raise RuntimeError("kube-apiserver did not become ready (see %s/logs)" % work)
            time.sleep(0.3)

    def _start(self, name, argv):
        log = open(os.path.join(self.work, "logs", name + ".log"), "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log))
        log.close()

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + TOKEN,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def must(self, method, path, body=None):
        for attempt in range(8):
            code, text = self.request(method, path, body)
            if code < 300:
                return json.loads(text)
            if code not in (429, 500, 503, 504):
                raise RuntimeError("%s %s: %d %s" % (method, path, code, text[:300]))
            time.sleep(0.2 * (attempt + 1))
        raise RuntimeError("%s %s: still %d" % (method, path, code))

    def stop(self):
        for proc in reversed(self.procs):
            stop_process(proc, 20)


def collection(kind, ns):
    return ("/api/v1/namespaces/%s/pods" if kind == "pods" else "/apis/apps/v1/namespaces/%s/" + kind) % ns


def create_with_status(api, kind, obj):
    """POST the object without what the API server sets, then PUT its status; returns the stored object."""
    body = json.loads(json.dumps(obj))
    status = body.pop("status", None)
    meta = body["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(k, None)
    meta.pop("generateName", None)
    ns = meta["namespace"]
    stored = api.must("POST", collection(kind, ns), body)
    if status:
        if kind == "deployments":
            status["observedGeneration"] = stored["metadata"].get("generation", 1)
        stored["status"] = status
        stored = api.must("PUT", collection(kind, ns) + "/" + meta["name"] + "/status", stored)
    return stored


def populate(api, n_rs, n_pods, threads=8):
    """Creates generate()'s objects, each Deployment's ReplicaSets and pods owned by the real uids."""
    objects = fsb.generate(n_rs, n_pods)
    by_deployment = {}  # fake Deployment uid -> ([deployment], [replicasets], [pods])
    rs_owner = {}  # fake ReplicaSet uid -> fake Deployment uid
    for kind in ("deployments", "replicasets", "pods"):
        for _, _, text in objects[kind]:
            o = json.loads(text)
            if kind == "deployments":
                by_deployment[o["metadata"]["uid"]] = ([o], [], [])
            elif kind == "replicasets":
                duid = o["metadata"]["ownerReferences"][0]["uid"]
                rs_owner[o["metadata"]["uid"]] = duid
                by_deployment[duid][1].append(o)
            else:
                by_deployment[rs_owner[o["metadata"]["ownerReferences"][0]["uid"]]][2].append(o)
    for ns in sorted({json.loads(t)["metadata"]["namespace"] for _, _, t in objects["deployments"]}):
        api.must("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    def one(group):
        deployments, replicasets, pods = group
        d = create_with_status(api, "deployments", deployments[0])
        real = {}
        for rs in replicasets:
            rs["metadata"]["ownerReferences"][0]["uid"] = d["metadata"]["uid"]
            real[rs["metadata"]["uid"]] = create_with_status(api, "replicasets", rs)["metadata"]["uid"]
        for p in pods:
            p["metadata"]["ownerReferences"][0]["uid"] = real[p["metadata"]["ownerReferences"][0]["uid"]]
            create_with_status(api, "pods", p)
        return 1 + len(replicasets) + len(pods)

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        created = sum(pool.map(one, by_deployment.values()))
    counts = {k: len(v) for k, v in objects.items()}
    return counts, created, time.monotonic() - t0


def stored_bytes(api, kind):
    """Bytes of the JSON list the API server sends for all of `kind` (what an unpaged list would carry)."""
    path = "/api/v1/pods" if kind == "pods" else "/apis/apps/v1/" + kind
    return len(api.request("GET", path)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("source_dir")
    ap.add_argument("cert_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--replicasets", type=int, default=20000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--max-peak-mib", type=float, default=0)
    ap.add_argument("--settle-seconds", type=float, default=6.0)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    binary = os.path.abspath(args.binary)
    api = ApiServer(os.path.abspath(args.source_dir), os.path.join(os.path.abspath(args.out_dir), "apiserver"))
    ok = True
    runs = []
    try:
        api_args = ["--api-server", api.url, "--token-file", api.token_file,
                    "--certificate-authority", os.path.join(api.pki, "ca.crt")]
        base = fsb.run_binary(binary, args.cert_dir, args.out_dir, api_args, "baseline", args.settle_seconds)
        base["objects"] = {"deployments": 0, "replicasets": 0, "pods": 0}
        runs.append(base)
        print(json.dumps(base), flush=True)
        counts, created, took = populate(api, args.replicasets, args.pods)
        print("created %d objects in %.0f s (%.0f/s, status included)" % (created, took, created / took), flush=True)
        big = fsb.run_binary(binary, args.cert_dir, args.out_dir, api_args, "big", args.settle_seconds)
        big["objects"] = counts
        big["listBytes"] = {k: stored_bytes(api, k) for k in counts}
        runs.append(big)
        print(json.dumps(big), flush=True)
        if big["cached"] != counts:
            print("FAIL: the caches hold %s, the API server has %s" % (big["cached"], counts))
            ok = False
        if args.max_peak_mib and big["peakKiB"] > args.max_peak_mib * 1024:
            print("FAIL: peak RSS %.1f MiB > %s MiB" % (big["peakKiB"] / 1024, args.max_peak_mib))
            ok = False
    finally:
        api.stop()
    lines = ["| run | objects (deploy/rs/pods) | unpaged list bytes | first sync | peak RSS | RSS after trim | "
             "cache estimate |", "|---|---|---|---|---|---|---|"]
    for label, r in zip(("baseline", "big"), runs):
        o = r["objects"]
        lines.append("| %s | %d/%d/%d | %.1f MiB | %.2f s | %.1f MiB | %.1f MiB | %.1f MiB |" % (
            label, o["deployments"], o["replicasets"], o["pods"], sum((r.get("listBytes") or {}).values()) / 2 ** 20,
            r["firstSyncSeconds"], r["peakKiB"] / 1024, r["rssAfterKiB"] / 1024,
            sum(max(0, v) for v in r["cacheBytes"].values()) / 2 ** 20))
    md = "\n".join(lines)
    print(md)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"replicasets": args.replicasets, "pods": args.pods, "runs": runs}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main() or 0)
