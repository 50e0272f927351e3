"""Issue 12, items 2, 3, 4 and 10 on the real cluster: completion from what containerd and the kubelet report,
the readiness gate without ever writing Ready, availability as the Deployment controller counts it, and no request
lost through a Service during an in-place update."""

import json
import os
import subprocess
import sys
import threading
import time

import test_cluster as tc
from kube import (READY_GATE, Failure, check, condition, container_statuses, images, is_ready,  # noqa: F401
                  snapshot, wait_for)

V2 = tc.V2
V201 = "localhost/httpd-demo:v2.0.1"  # the same image as :v2 (one digest, two tags)
HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.environ.get("INPLACE_CLUSTER_NETNS", "inplace-cluster")


def containerd_digest(s, ref):
    """The digest of the image record `ref` in containerd (ctr images ls: the DIGEST column)."""
    for line in s.tools.ctr("images", "ls").splitlines():
        f = line.split()
        if f and f[0] == ref:
            return f[2]
    raise Failure("containerd has no image %s" % ref)


def r02_same_digest_references_complete(s):
    """A new reference to the image the pods already run (a tag moved to a patch tag, v2 -> v2.0.1, same digest;
    then `tag@sha256:<digest>` of it) completes in place: containerd reports the record's first tag and digest, not
    the spec's reference, yet the update ends with exactly one restart of the changed container."""
    app = tc.App(s, "r02")
    before = snapshot(app.create(tc.deployment("web", replicas=2, image=V2)))
    rs0 = app.rs_names()
    digest = containerd_digest(s, V2)
    check(digest == containerd_digest(s, V201), "%s and %s are not the same image in containerd" % (V2, V201))

    def update_in_place(ref):
        """`kubectl set image` to `ref`, in place; the pods, each of which the kubelet reports under another
        name than the spec's (containerd's first tag): what makes this case."""
        _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + ref)
        tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
        _, pods = tc.finish(app, before, rs0, restarted={"app"}, timeout=60)
        for p in pods:
            cs = container_statuses(p)["app"]
            check(cs["image"] != ref, "the kubelet reports image %s for %s: the case this shows did not arise"
                  % (cs["image"], p["metadata"]["name"]))
        return pods

    for p in update_in_place(V201):
        # Kubelets report observedGeneration from 1.34 (m00 checks which do): where they do, the status is the
        # current spec's; before, the replaced container is the only evidence (DESIGN.md §8.2).
        if "observedGeneration" not in p["status"]:
            continue
        check(p["status"].get("observedGeneration") == p["metadata"].get("generation"),
              "pod %s observedGeneration %s, generation %s" % (p["metadata"]["name"],
                                                                p["status"].get("observedGeneration"),
                                                                p["metadata"].get("generation")))

    # A Renovate-style pin of the same image. A registry pull records the repo digest `name@sha256:...` next to
    # the tag; the imported image has none, so record it as a pull would.
    s.tools.ctr("images", "tag", V2, "localhost/httpd-demo@" + digest)
    pinned = V201 + "@" + digest
    before, rs0 = snapshot(app.pods()), app.rs_names()
    update_in_place(pinned)


def endpoint_states(s, ns, service):
    """{pod name: endpoint conditions.ready} from the EndpointSlice controller's slices of `service`; a pod
    without an endpoint is absent."""
    out = {}
    for sl in s.api.items("/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % ns,
                          labelSelector="kubernetes.io/service-name=" + service):
        for e in sl.get("endpoints") or []:
            ref = e.get("targetRef") or {}
            if ref.get("kind") == "Pod":
                out[ref["name"]] = bool((e.get("conditions") or {}).get("ready"))
    return out


def create_service(app, port=8080):
    app.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": app.name},
        "spec": {"selector": {"app": app.name}, "ports": [{"port": 80, "targetPort": port}]}}))
    return json.loads(app.kubectl("get", "service", app.name, "-o", "json")[0])["spec"]["clusterIP"]


class Sampler(tc.PodSampler):
    """Every `interval` s: (time, pods, endpoint readiness per pod) from the real API."""

    def __init__(self, app, interval=0.2):
        super().__init__(lambda: (app.all_pods(), endpoint_states(app.s, app.ns, app.name)), interval)


def r03_draining_pod_stays_out_of_endpoints(s):
    """A pod draining for its update (markPodNotReady, gracePeriodSeconds 20) stays out of its Service's
    EndpointSlice for the whole grace period, as the real EndpointSlice controller publishes it, sampled every 0.2 s:
    the loop writes only its gate and the kubelet computes Ready from it (a Ready of ours would be overwritten by
    the kubelet's periodic status sync); after the update the pod is back in the slice."""
    grace = 20
    app = tc.App(s, "r03")
    pods = app.create(tc.deployment("web", replicas=2, gate=True,
                                    lifecycle={"preUpdate": {"markPodNotReady": True}},
                                    policy={"gracePeriodSeconds": grace}))
    create_service(app)
    wait_for(lambda: (lambda e: len(e) == 2 and all(e.values()))(endpoint_states(s, app.ns, app.name)), 30,
             "both pods ready in the EndpointSlice", app)
    before, rs0 = snapshot(pods), app.rs_names()
    with Sampler(app) as sampler:
        app.kubectl("set", "image", "deploy/web", "app=" + V2)
        tc.finish(app, before, rs0, restarted={"app"}, timeout=grace * 2 + 60)
        wait_for(lambda: (lambda e: len(e) == 2 and all(e.values()))(endpoint_states(s, app.ns, app.name)), 30,
                 "both pods back in the EndpointSlice", app)
    check(not sampler.errors, "sampling failed: %s" % sampler.errors[:3])
    lags = []
    for name in before:
        timeline = [(t, next((p for p in ps if p["metadata"]["name"] == name), None), eps.get(name))
                    for t, (ps, eps) in sampler.samples]
        timeline = [(t, p, e) for t, p, e in timeline if p is not None]
        gate_false = next((t for t, p, _ in timeline if condition(p, READY_GATE) == "False"), None)
        written = next((t for t, p, _ in timeline if images(p)["app"] == V2), None)
        check(gate_false is not None and written is not None, "pod %s: gate never False or never updated" % name)
        out = next((t for t, _, e in timeline if t >= gate_false and not e), None)
        check(out is not None and out < written, "pod %s never left the EndpointSlice before its update" % name)
        lags.append(out - gate_false)
        check(out - gate_false <= 3, "pod %s left the EndpointSlice %.1f s after its gate went False"
              % (name, out - gate_false))
        check(written - out >= grace - 3, "pod %s out of the EndpointSlice only %.1f s before its update (grace %d)"
              % (name, written - out, grace))
        back = [(t, p) for t, p, e in timeline if out <= t < written and e]
        check(not back, "pod %s back in the EndpointSlice (ready) at +%.1f s of its %d s drain (Ready=%s)"
              % (name, back[0][0] - out if back else 0, grace, condition(back[0][1], "Ready") if back else None))
        # A sample lists the pods first and reads the slice after, so the sample in which the pod leaves the slice
        # may still show it Ready: Ready must not come back once a sample has shown it not Ready.
        not_ready = next((t for t, p, _ in timeline if t >= gate_false and not is_ready(p)), None)
        check(not_ready is not None and not_ready < written, "pod %s never not Ready before its update" % name)
        ready_again = [t for t, p, _ in timeline if not_ready <= t < written and is_ready(p)]
        check(not ready_again, "pod %s Ready again during its drain at +%.1f s" % (name, ready_again[0] - not_ready
                                                                                   if ready_again else 0))
    print("  r03: out of the EndpointSlice %s s after the gate went False; drain %d s each"
          % (", ".join("%.1f" % x for x in lags), grace), flush=True)


def r04_available_replicas_never_below_budget(s):
    """replicas 4, maxUnavailable 1, minReadySeconds 6: the Deployment controller's status.availableReplicas,
    sampled every 0.1 s through the in-place update, never drops below replicas - maxUnavailable = 3; the next
    pod starts only once the last one counts as available, and the finish waits for it too."""
    replicas, min_ready = 4, 6
    app = tc.App(s, "r04")
    d = tc.deployment("web", replicas=replicas, max_unavailable=1, max_surge=0)
    d["spec"]["minReadySeconds"] = min_ready
    before = snapshot(app.create(d, timeout=120))
    rs0 = app.rs_names()
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                st = app.deployment().get("status") or {}
                samples.append((time.time(), st.get("availableReplicas", 0), st.get("updatedReplicas", 0)))
            except Exception:  # noqa: BLE001 - a failed read is no sample
                pass
            stop.wait(0.1)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        app.kubectl("set", "image", "deploy/web", "app=" + V2)
        tc.finish(app, before, rs0, restarted={"app"}, timeout=replicas * (min_ready + 20) + 30)
    finally:
        stop.set()
        t.join()
    check(len(samples) > 100, "too few samples: %d" % len(samples))
    low = min(a for _, a, _ in samples)
    print("  r04: %d samples, availableReplicas min %d, max %d" % (len(samples), low, max(a for _, a, _ in samples)),
          flush=True)
    check(low >= replicas - 1, "availableReplicas dropped to %d (replicas %d, maxUnavailable 1): %s" % (
        low, replicas, [(round(t0 - samples[0][0], 1), a) for t0, a, _ in samples if a < replicas - 1][:10]))
    check(any(a == replicas - 1 for _, a, _ in samples), "availableReplicas never went below %d: nothing was updated?"
          % replicas)


LOADGEN = r"""
import http.client, json, os, sys, threading, time
host, seconds, workers, out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
stop = time.time() + seconds
results = []
lock = threading.Lock()
def run():
    while time.time() < stop and not os.path.exists(out + ".stop"):
        t = time.time()
        try:
            # A request slow on a starved machine is not lost: only an error or 10 s without an answer counts.
            c = http.client.HTTPConnection(host, 80, timeout=10)
            c.request("GET", "/")
            r = c.getresponse()
            body = r.read()
            ok = r.status == 200 and b"httpd-demo" in body
            err = "" if ok else "HTTP %d" % r.status
            c.close()
        except Exception as e:
            ok, err = False, type(e).__name__ + ": " + str(e)
        with lock:
            results.append((t, ok, err))
        time.sleep(0.01)
ts = [threading.Thread(target=run) for _ in range(workers)]
[x.start() for x in ts]
[x.join() for x in ts]
json.dump(results, open(out, "w"))
"""


class Load:
    """Requests to the Service's ClusterIP from the node's network namespace (where kube-proxy's iptables rules
    DNAT them to a pod), one connection per request, `workers` at a time, until stopped."""

    def __init__(self, s, ip, seconds, workers=4):
        self.out = os.path.join(s.env.run, "r10-load-%d.json" % int(time.time() * 1000))
        self.proc = subprocess.Popen(["nsenter", "--net=/run/netns/" + NETNS, "--", sys.executable, "-c", LOADGEN,
                                      ip, str(seconds), str(workers), self.out])

    def stop(self):
        open(self.out + ".stop", "w").close()

    def results(self):
        self.stop()
        self.proc.wait(timeout=60)
        with open(self.out) as f:
            return json.load(f)


def count(results, start, end):
    inside = [r for r in results if start <= r[0] <= end]
    failed = [r for r in inside if not r[1]]
    return len(inside), failed


def r10_no_request_lost(s):
    """Steady load through a Service (kube-proxy, iptables) on a workload that stops gracefully
    (STOP_DELAY_SECONDS 5): an in-place update with the default settings (the readiness gate, no lifecycle or
    policy annotation: the gate goes False and the default drain passes before the pod write) fails no request,
    as the native rollout of the same Deployment fails none."""
    app = tc.App(s, "r10")
    d = tc.deployment("web", replicas=3, gate=True, stop_delay=5)
    before = snapshot(app.create(d, timeout=120))
    rs0 = app.rs_names()
    ip = create_service(app)
    wait_for(lambda: (lambda e: len(e) == 3 and all(e.values()))(endpoint_states(s, app.ns, app.name)), 30,
             "the pods ready in the EndpointSlice", app)

    # kube-proxy programs the new Service a moment after its EndpointSlice is ready: until then a connection to the
    # ClusterIP is refused, which is no request of the update's to count.
    probe = ("import http.client,sys,time\nend=time.time()+30\nwhile time.time()<end:\n try:\n"
             "  c=http.client.HTTPConnection(sys.argv[1],80,timeout=2);c.request('GET','/');"
             "c.getresponse().read();sys.exit(0)\n except Exception:\n  time.sleep(0.2)\nsys.exit(1)\n")
    routed = subprocess.run(["nsenter", "--net=/run/netns/" + NETNS, "--", sys.executable, "-c", probe, ip])
    check(routed.returncode == 0, "the Service %s does not answer through kube-proxy" % ip)

    def measured(change, done, timeout):
        load = Load(s, ip, timeout + 10)
        time.sleep(3)  # a steady state first
        start = time.time()
        change()
        done()
        end = time.time()
        time.sleep(2)
        results = load.results()
        total, failed = count(results, start - 3, end + 2)
        return total, failed, end - start

    # In place, default settings.
    total, failed, took = measured(lambda: app.kubectl("set", "image", "deploy/web", "app=" + V2),
                                   lambda: tc.finish(app, before, rs0, restarted={"app"}, timeout=120), 150)
    print("  r10: in place: %d requests, %d failed, %.1f s; first failures: %s" % (total, len(failed), took,
                                                                              failed[:5]), flush=True)
    if failed:  # when, against what the kubelet and the loop reported
        bursts = []
        for f in sorted(r[0] for r in failed):
            if bursts and f - bursts[-1][1] < 1.0:
                bursts[-1][1] = f
                bursts[-1][2] += 1
            else:
                bursts.append([f, f, 1])
        stamp = (lambda a: time.strftime("%H:%M:%S", time.gmtime(a)) + ".%03d" % (a % 1 * 1000))
        print("  r10: failure bursts (UTC): %s" % [(stamp(a), round(b - a, 2), n) for a, b, n in bursts], flush=True)
        for e in app.events():
            if e.get("reason") in ("InPlaceUpdateProgressing", "Killing", "Started"):
                print("    %s %s %s %s" % (e.get("lastTimestamp"), e["involvedObject"]["name"][-5:], e["reason"],
                                          (e.get("message") or "")[:60]), flush=True)
    uids = {p["metadata"]["uid"] for p in app.pods()}
    check(total > 200, "too few requests: %d" % total)
    # The native rollout of the same Deployment: an env change is not eligible.
    n_total, n_failed, n_took = measured(
        lambda: app.kubectl("set", "env", "deploy/web", "NATIVE=1"),
        # Until the last old pod is gone (not only out of the live ones): its graceful stop is in the window.
        lambda: wait_for(lambda: app.rollout_complete()
                         and not uids & {p["metadata"]["uid"] for p in app.all_pods()},
                         150, "the native rollout", app),
        160)
    print("  r10: native: %d requests, %d failed, %.1f s" % (n_total, len(n_failed), n_took), flush=True)
    check(not n_failed, "the native rollout failed %d requests: %s" % (len(n_failed), n_failed[:5]))
    check(not failed, "the in-place update failed %d of %d requests (the native rollout none): %s"
          % (len(failed), total, failed[:5]))


SCENARIOS = [r02_same_digest_references_complete, r03_draining_pod_stays_out_of_endpoints,
             r04_available_replicas_never_below_budget, r10_no_request_lost]
