#!/usr/bin/env python3
"""Scale on the real control plane: a 1,000-pod Deployment (maxUnavailable 25%) updated in place by the product with
its default drain, again with the drain off (policy gracePeriodSeconds 0), and side by side a native rolling update of
the same Deployment spec (not opted in), on the same cluster: upstream
kube-apiserver, controller manager and scheduler, with the pods on simulated nodes (tests/cluster/node_sim.py
plays their kubelets' API traffic). Reports wall time, API requests by verb and resource from kube-apiserver's
own /metrics (apiserver_request_total: every client, the controllers and the node simulator included), the
admission webhook calls it made (apiserver_admission_webhook_request_total), container restarts, pod creations and
deletions, and the product's own writes from the API server's audit log. Prints the
table README.md shows (--table FILE also writes it), headed by the date, commit and Kubernetes version of the run.

    python3 tests/bench/cluster_bench.py RUN_DIR SOURCE_DIR --image localhost/inplace-webhook:VERSION \
        [--replicas 1000] [--scale-up-during N] [--skip-native] [--skip-no-drain] [--out FILE.json] [--table FILE.md]
        [--fleet N]

--scale-up-during N: once the in-place update has started, the Deployment is scaled up by N through the scale
subresource (as an HPA writes it); for each new pod, the time from its creation (the ADDED event of a pod watch, and
its creationTimestamp) to its readiness-gate condition True (the MODIFIED event that shows it) is reported: p50, p99
and max. --skip-native: the in-place half only. --fleet N: instead, N opted-in Deployments of --replicas pods each
in one namespace, their images changed at once with the default drain: each Deployment's time, the slowest over
the fastest, the requests and the product's writes, and the controller processes' peak RSS and CPU (from /proc).

RUN_DIR is a running cluster (cluster/up.sh) with the images imported; the chart is installed here.
`make bench-cluster` starts the cluster, runs this and stops it.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))

from kube import READY_GATE, ClusterEnv, annotations_of, condition, ns_path, rfc3339_micro, metric_samples, container_statuses, images, is_ready, state_of, wait_for, IN_PROGRESS  # noqa: E402
from node_sim import SIM_LABEL, TAINT, NodeSim  # noqa: E402
from test_cluster import (CONTROLLER_USER, RELEASE_NS, V2, App, Suite, apiserver_webhook_calls,  # noqa: E402
                          deployment)


def request_counts(s):
    """apiserver_request_total summed over codes and scopes: {(verb, resource[/subresource]): count}."""
    out = {}
    for labels, value in metric_samples(s.tools.kubectl("get", "--raw", "/metrics").stdout, "apiserver_request_total"):
        res = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
        key = (labels.get("verb", ""), res)
        out[key] = out.get(key, 0) + value
    return out


def webhook_calls(s):
    """The API server's admission webhook calls (test_cluster.apiserver_webhook_calls), {webhook name: count}."""
    out = {}
    for (name, _, _), n in apiserver_webhook_calls(s).items():
        out[name] = out.get(name, 0) + n
    return out


def delta(after, before):
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


def bench_deployment(name, replicas, opted_in, drain=True):
    d = deployment(name, replicas=replicas, max_unavailable="25%", max_surge="25%",
                   policy=None if drain else {"gracePeriodSeconds": 0})
    spec = d["spec"]["template"]["spec"]
    spec["containers"] = [spec["containers"][0]]  # one container: the one whose image changes
    spec["containers"][0].pop("readinessProbe")   # the simulated kubelet reports Ready itself
    spec["nodeSelector"] = {SIM_LABEL: "true"}
    spec["tolerations"] = [{"key": TAINT["key"], "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    if not opted_in:
        d["metadata"]["labels"].pop("inplace-webhook.io/enabled")
        d["spec"]["template"]["metadata"]["labels"].pop("inplace-webhook.io/enabled")
    return d


class GateWatch:
    """Watches the pods of a namespace from a resourceVersion: for each pod, the local time of its ADDED event, its
    creationTimestamp and the local time of the first event that shows the readiness-gate condition True."""

    def __init__(self, api, ns, rv):
        self.api, self.ns, self.rv = api, ns, rv
        self.added, self.created, self.gate = {}, {}, {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()

    def _run(self):
        try:
            for t, ev in self.api.watch(ns_path(self.ns, "pods"), self.rv, self.stopping, timeout=900):
                if ev.get("type") not in ("ADDED", "MODIFIED"):
                    continue
                p = ev["object"]
                name = p["metadata"]["name"]
                with self.lock:
                    if ev["type"] == "ADDED" and name not in self.added:
                        self.added[name] = t
                        self.created[name] = rfc3339_micro(p["metadata"]["creationTimestamp"])
                    if name not in self.gate and condition(p, READY_GATE) == "True":
                        self.gate[name] = t
        except Exception as e:  # noqa: BLE001 - reported with the figures
            self.errors.append(str(e))

    def latencies(self):
        """{pod: (seconds from the ADDED event, seconds from creationTimestamp)} of the pods whose gate turned True."""
        with self.lock:
            return {n: (self.gate[n] - self.added[n], self.gate[n] - self.created[n])
                    for n in self.added if n in self.gate}


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))] if v else None  # nearest rank


GATE_METRIC = "inplace_webhook_gate_latency_seconds"


def gate_histogram(s):
    """The product's own inplace_webhook_gate_latency_seconds, summed over its pods (the leader's counts):
    {le: count} plus "count" and "sum"."""
    out = {}
    for p in s.api.items(ns_path(RELEASE_NS, "pods")):
        text = s.tools.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics"
                               % (RELEASE_NS, p["metadata"]["name"]), check_rc=False).stdout
        for suffix in ("_bucket", "_count", "_sum"):
            for labels, value in metric_samples(text, GATE_METRIC + suffix):
                key = labels.get("le", suffix[1:])
                out[key] = out.get(key, 0) + value
    return out


def scale_up_during(s, app, extra, replicas):
    """Waits until the in-place update has started (pods out of Normal), then scales the Deployment up by `extra`
    through the scale subresource; returns the GateWatch that follows the new pods."""
    wait_for(lambda: any(state_of(p) not in ("Normal", None) for p in app.pods()), 300,
             "the in-place update to start", interval=0.5)
    rv = s.api.get(ns_path(app.ns, "pods"), limit="1")["metadata"]["resourceVersion"]
    watch = GateWatch(s.api, app.ns, rv).start()
    scale = ns_path(app.ns, "deployments", app.name, group="apps/v1") + "/scale"
    s.api.merge_patch(scale, {"spec": {"replicas": replicas + extra}})
    return watch


def gate_report(watch, old_uids_names, extra):
    lat = {n: v for n, v in watch.latencies().items() if n not in old_uids_names}
    out = {"new_pods": extra, "gated_pods": len(lat)}
    for i, label in ((0, "from_added_event"), (1, "from_creation_timestamp")):
        vals = [v[i] for v in lat.values()]
        out[label] = {"p50": round(percentile(vals, 0.5), 3) if vals else None,
                      "p99": round(percentile(vals, 0.99), 3) if vals else None,
                      "max": round(max(vals), 3) if vals else None}
    if watch.errors:
        out["watch_errors"] = watch.errors[:3]
    return out


def write_kind(e):
    """What one of the product's writes (an audit event) did: "gate False", "gate True", "pod", "status", or
    the resource written."""
    ref = e.get("objectRef") or {}
    if ref.get("resource") != "pods":
        return "%s%s" % (ref.get("resource"), "/" + ref["subresource"] if ref.get("subresource") else "")
    if ref.get("subresource") == "status":
        for c in (((e.get("requestObject") or {}).get("status") or {}).get("conditions") or []):
            if c.get("type") == READY_GATE:
                return "gate " + str(c.get("status"))
        return "pods/status"
    return "pods" if not ref.get("subresource") else "pods/" + ref["subresource"]


def timeline(own, t0, gap=0.5):
    """Where the product's writes fell in time: one line per run of writes of one kind with no pause over `gap`
    seconds ("12.3-13.5 s: 250 gate False"), so a person sees what the update waited on between them."""
    runs = []
    for e in sorted(own, key=lambda e: e["_time"]):
        t, kind = e["_time"] - t0, write_kind(e)
        if runs and runs[-1][2] == kind and t - runs[-1][1] <= gap:
            runs[-1][1], runs[-1][3] = t, runs[-1][3] + 1
        else:
            runs.append([t, t, kind, 1])
    return ["%.1f-%.1f s: %d %s" % (a, b, n, k) for a, b, k, n in runs]


def run_case(s, app, replicas, in_place, scale_up=0):
    pods = app.pods()
    uids = {p["metadata"]["uid"] for p in pods}
    restarts0 = sum(c.get("restartCount", 0) for p in pods for c in container_statuses(p).values())
    before, calls_before = request_counts(s), webhook_calls(s)
    t0 = time.time()
    app.kubectl("set", "image", "deploy/" + app.name, "app=" + V2)
    gates_before = gate_histogram(s) if scale_up else None
    watch = scale_up_during(s, app, scale_up, replicas) if scale_up else None
    names = {p["metadata"]["name"] for p in pods}
    replicas += scale_up

    def done():
        d = app.deployment()
        st = d.get("status") or {}
        if in_place and (IN_PROGRESS in annotations_of(d) or d["spec"].get("paused")):
            return False
        ps = app.pods()
        return (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas") == replicas
                and st.get("availableReplicas") == replicas and st.get("replicas") == replicas
                and len(ps) == replicas and all(images(p)["app"] == V2 and is_ready(p) for p in ps)
                and (not in_place or all(state_of(p) == "Normal" for p in ps)))
    wait_for(done, 900, "the %s update of %d pods" % ("in-place" if in_place else "native", replicas), interval=1.0)
    wall = time.time() - t0
    time.sleep(3)  # let the last status writes land before counting
    counts = delta(request_counts(s), before)
    calls = {k: int(v) for k, v in delta(webhook_calls(s), calls_before).items()}
    pods = app.pods()
    restarts = sum(c.get("restartCount", 0) for p in pods for c in container_statuses(p).values()) - restarts0
    kept = len(uids & {p["metadata"]["uid"] for p in pods})
    extra = {}
    if watch:
        watch.stop()
        extra["scale_up_gate_seconds"] = gate_report(watch, names, scale_up)
        # The product's own view of the same gates (those of the scale-up: the delta over the update).
        gates_after = gate_histogram(s)
        extra["scale_up_gate_metric"] = {k: round(v - gates_before.get(k, 0), 3) for k, v in gates_after.items()}
    # The product's own writes, from the API server's audit log (its controller's service account; pods, their
    # status and resize, Deployments, ReplicaSets: every object it writes but Events and its Lease).
    own = [e for e in s.audit.writes(t0, user=CONTROLLER_USER) if e["objectRef"].get("resource") != "leases"]
    for line in timeline(own, t0):
        print("  " + line)
    return {**extra, "wall_seconds": round(wall, 1), "requests": counts,
            "product_writes": len(own), "product_writes_per_pod": round(len(own) / max(replicas, 1), 2),
            "total_requests": int(sum(counts.values())),
            "webhook_calls": sum(calls.values()), "webhook_calls_by_name": calls,
            "pod_creations": int(counts.get(("POST", "pods"), 0)),
            "pod_deletions": int(counts.get(("DELETE", "pods"), 0)),
            "container_restarts": restarts, "pods_kept": kept}


# The cases of a run, in the table's column order: (key, column heading, opted in, drain on).
CASES = (("in_place", "in place", True, True), ("in_place_no_drain", "in place, drain off", True, False),
         ("native", "native rolling update", False, True))
# The table's fixed rows: (label, key of a case's results); then one row per `VERB resource` with at least 10
# requests in some case, the busiest first. README.md's rollout table is this table as a run printed it
# (tests/bench/test_readme_tables.py checks that the two keep the same shape).
ROWS = (("wall time (s)", "wall_seconds"), ("API requests, all clients", "total_requests"),
        ("admission webhook calls (the API server's)", "webhook_calls"),
        ("the product's writes (audit log)", "product_writes"), ("the product's writes per pod", "product_writes_per_pod"),
        ("pods kept (same UID)", "pods_kept"), ("pod creations", "pod_creations"),
        ("pod deletions", "pod_deletions"), ("container restarts", "container_restarts"))
CAPTION = "`make bench-cluster`, %s, commit %s, Kubernetes %s, %d CPUs, %d pods per Deployment"


def heading(replicas):
    return "| %s pods, image change | %s |" % ("{:,}".format(replicas), " | ".join(c[1] for c in CASES))


def table(results, replicas, caption):
    cases = [c[0] for c in CASES]
    keys = sorted({k for c in cases if c in results for k in results[c]["requests"]},
                  key=lambda k: (-sum(results[c]["requests"].get(k, 0) for c in cases if c in results), k))
    cell = lambda c, key: str(results[c][key]) if c in results else "–"  # noqa: E731
    rows = [caption, "", heading(replicas), "|---|" + "---:|" * len(cases)]
    for label, key in ROWS:
        rows.append("| %s | %s |" % (label, " | ".join(cell(c, key) for c in cases)))
    for k in keys:
        counts = [results[c]["requests"].get(k, 0) if c in results else 0 for c in cases]
        if max(counts) >= 10:
            rows.append("| `%s %s` | %s |" % (k[0], k[1], " | ".join(
                str(int(n)) if c in results else "–" for n, c in zip(counts, cases))))
    return "\n".join(rows)


def caption_of(s, replicas):
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    version = json.loads(s.tools.kubectl("version", "-o", "json").stdout).get("serverVersion", {}).get("gitVersion", "?")
    return CAPTION % (time.strftime("%Y-%m-%d", time.gmtime()), commit, version, os.cpu_count() or 0, replicas)


def controller_processes():
    """The product's controller processes on this host (the cluster's pods run here): {pid: (peak RSS in bytes,
    CPU seconds user + system)}, from /proc (VmHWM: the most the process ever held resident)."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            if not argv or not argv[0].endswith(b"inplace-webhook") or b"--role=controller" not in argv:
                continue
            with open("/proc/%s/status" % pid) as f:
                hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rpartition(")")[2].split()
            out[int(pid)] = (hwm, (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return out


def run_fleet(s, deployments, replicas):
    """`deployments` opted-in Deployments of `replicas` pods each in one namespace, their image changed at once
    (`kubectl set image --all`) with the default drain: the wall time to the last one done, each one's time from
    the change (done: in-progress gone, the controller's status at the new template, every pod available), the
    slowest over the fastest, the API requests and the product's writes, and the controller processes' peak RSS and
    CPU during the update."""
    app = App(s, "bench-fleet", name="bench-0")
    app.setup_namespace()
    t = time.time()
    names = ["bench-%d" % i for i in range(deployments)]
    for name in names:
        s.api.create(ns_path(app.ns, "deployments", group="apps/v1"), bench_deployment(name, replicas, True))
    total = deployments * replicas

    def available():
        return sum((d.get("status") or {}).get("availableReplicas", 0)
                   for d in s.api.items(ns_path(app.ns, "deployments", group="apps/v1")))
    wait_for(lambda: available() == total, 3600, "%d pods available" % total, interval=5.0)
    print("fleet: %d Deployments, %d pods created and Ready in %.0f s" % (deployments, total, time.time() - t),
          flush=True)
    procs0 = controller_processes()
    before = request_counts(s)
    t0 = time.time()
    app.kubectl("set", "image", "deployments", "--all", "app=" + V2)
    done_at = {}
    while len(done_at) < deployments:
        if time.time() - t0 > 3600:
            raise RuntimeError("fleet: %d of %d Deployments done after an hour" % (len(done_at), deployments))
        for d in s.api.items(ns_path(app.ns, "deployments", group="apps/v1")):
            name, st = d["metadata"]["name"], d.get("status") or {}
            if name in done_at or IN_PROGRESS in annotations_of(d) or d["spec"].get("paused"):
                continue
            if (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas") == replicas
                    and st.get("availableReplicas") == replicas and st.get("replicas") == replicas
                    and d["spec"]["template"]["spec"]["containers"][0]["image"] == V2):
                done_at[name] = time.time() - t0
        time.sleep(1.0)
    wall = max(done_at.values())
    time.sleep(3)
    counts = delta(request_counts(s), before)
    procs = controller_processes()
    pods = s.api.items(ns_path(app.ns, "pods"))
    restarts = sum(c.get("restartCount", 0) for p in pods for c in container_statuses(p).values())
    own = [e for e in s.audit.writes(t0, user=CONTROLLER_USER) if e["objectRef"].get("resource") != "leases"]
    times = sorted(done_at.values())
    return {"deployments": deployments, "replicas_each": replicas, "pods": total, "wall_seconds": round(wall, 1),
            "deployment_seconds": {"min": round(times[0], 1), "p50": round(percentile(times, 0.5), 1),
                                   "max": round(times[-1], 1)},
            "slowest_over_fastest": round(times[-1] / max(times[0], 0.001), 2),
            "total_requests": int(sum(counts.values())), "requests": counts,
            "product_writes": len(own), "product_writes_per_pod": round(len(own) / total, 2),
            "pods_at_v2": sum(1 for p in pods if images(p)["app"] == V2), "container_restarts": restarts,
            "controller_peak_rss_mib": round(max((v[0] for v in procs.values()), default=0) / 2**20, 1),
            "controller_cpu_seconds": round(sum(v[1] - procs0.get(pid, (0, 0))[1] for pid, v in procs.items()), 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("source_dir")
    p.add_argument("--image", required=True)
    p.add_argument("--replicas", type=int, default=1000)
    p.add_argument("--scale-up-during", type=int, default=0, metavar="N")
    p.add_argument("--skip-native", action="store_true")
    p.add_argument("--skip-no-drain", action="store_true", help="leave out the in-place case with the drain off")
    p.add_argument("--table", help="also write the Markdown table (as README.md shows it) to this file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a chart value for the install (helm --set), e.g. controller.kubeApiQPS=200")
    p.add_argument("--fleet", type=int, default=0, metavar="N",
                   help="instead of the cases: N Deployments of --replicas pods each, updated at once (fairness)")
    p.add_argument("--out")
    args = p.parse_args()
    s = Suite(ClusterEnv(args.run_dir), args.source_dir, args.image)
    s.install(extra=[a for kv in args.set for a in ("--set", kv)], upgrade=True)  # or a release already there
    # Room for a case's pods beside the previous case's, still terminating (its namespace is deleted without waiting).
    if args.fleet:
        pods = args.fleet * args.replicas
        sim = NodeSim(s.api, nodes=max(2, (pods * 5 // 4 + 199) // 200), pods_per_node=200).start()
        try:
            result = run_fleet(s, args.fleet, args.replicas)
        finally:
            sim.stop()
        print("fleet: %s" % {k: v for k, v in result.items() if k != "requests"}, flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(dict(result, requests={" ".join(k): v for k, v in result["requests"].items()}), f,
                          indent=1, sort_keys=True)
        return 0 if not sim.errors and result["pods_at_v2"] == pods else 1
    nodes = max(2, (args.replicas * 9 // 4 + 199) // 200)
    sim = NodeSim(s.api, nodes=nodes, pods_per_node=200).start()
    results = {}
    previous = None
    try:
        for case, _, opted_in, drain in CASES:
            if (case == "native" and args.skip_native) or (case == "in_place_no_drain" and args.skip_no_drain):
                continue
            app = App(s, "bench-" + case.replace("_", "-"), name="bench")
            t = time.time()
            app.create(bench_deployment("bench", args.replicas, opted_in, drain), timeout=900)
            print("%s: %d pods created and Ready in %.0f s" % (case, args.replicas, time.time() - t), flush=True)
            if previous:  # the previous case's pods deleted before this case counts requests (cluster-wide)
                t = time.time()
                wait_for(lambda: s.tools.kubectl("get", "namespace", previous, check_rc=False).returncode != 0,
                         900, "namespace %s to be deleted" % previous, interval=2.0)
                print("%s: namespace %s gone after %.0f s more" % (case, previous, time.time() - t), flush=True)
            results[case] = run_case(s, app, args.replicas, in_place=opted_in,
                                     scale_up=args.scale_up_during if case == "in_place" else 0)
            print("%s: %s" % (case, {k: v for k, v in results[case].items() if k != "requests"}), flush=True)
            s.tools.kubectl("delete", "namespace", app.ns, "--wait=false")
            previous = app.ns
    finally:
        sim.stop()
    if sim.errors:
        print("node simulator errors (%d), first: %s" % (len(sim.errors), sim.errors[:5]))
    text = table(results, args.replicas, caption_of(s, args.replicas))
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({c: dict(r, requests={" ".join(k): v for k, v in r["requests"].items()})
                       for c, r in results.items()}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
