"""Issue 13, items 1 and 2 on the real cluster: a client inside the cluster network cannot starve the webhook pods
of connections nor get them OOM-killed under the chart's 256Mi limit, while the real API server's admission calls
go on (DESIGN.md §9.1, §9.2). The attacker runs in the node's network namespace (where the API server and the
kubelet's probes come from) and targets every webhook pod's IP directly."""

import json
import os
import subprocess
import time

import test_cluster as tc
from kube import check, container_statuses, metric_samples

NETNS = "/run/netns/" + os.environ.get("INPLACE_CLUSTER_NETNS", "inplace-cluster")

# The attacker: idle connections (sending nothing, reopened as soon as the server closes them) to each target, or
# hostile bodies. Prints a JSON summary when its time is up.
ATTACKER = r'''
import json, selectors, socket, ssl, sys, threading, time
mode, seconds, targets = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
end = time.time() + seconds
counts = {"opened": 0, "closed_by_server": 0, "answers": {}}
lock = threading.Lock()
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE

def bump(key, n=1):
    with lock:
        counts[key] = counts.get(key, 0) + n

def answer(status):
    with lock:
        counts["answers"][str(status)] = counts["answers"].get(str(status), 0) + 1

def idle(host, port, share):
    mine, sel = [], selectors.DefaultSelector()
    while time.time() < end:
        while len(mine) < share and time.time() < end:
            try:
                s = socket.create_connection((host, port), timeout=3)
            except OSError:
                break
            s.setblocking(False); mine.append(s); sel.register(s, selectors.EVENT_READ); bump("opened")
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                if s.recv(1) != b"":
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            sel.unregister(s); s.close(); mine.remove(s); bump("closed_by_server")
    for s in mine:
        s.close()

def status_of(s):
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return int(data.split()[1])

BODY = (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
        + b"0," * 3400000 + b"0]}}")

def post(host, port, head_and_body, stall=False):
    while time.time() < end:
        try:
            with ctx.wrap_socket(socket.create_connection((host, port), timeout=15)) as s:
                s.sendall(head_and_body)
                answer(status_of(s))
        except (OSError, ConnectionError, ValueError):
            answer("closed")

def head(length):
    return b"POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % length

threads = []
for host, port, count in targets:
    if mode == "idle":
        threads += [threading.Thread(target=idle, args=(host, port, count // 4)) for _ in range(4)]
    else:
        threads += [threading.Thread(target=post, args=(host, port, head(len(BODY)) + BODY)) for _ in range(3)]
        threads += [threading.Thread(target=post, args=(host, port, head(7 * 1024 * 1024 - 4096) + b" " * (6 * 1024 * 1024 + 512 * 1024)))
                    for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(counts))
'''


def start_attacker(mode, seconds, targets):
    return subprocess.Popen(["nsenter", "--net=" + NETNS, "python3", "-c", ATTACKER, mode, str(seconds),
                             json.dumps(targets)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def pod_metrics(pod):
    p = subprocess.run(["nsenter", "--net=" + NETNS, "python3", "-c",
                        "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
                        "http://%s:8080/metrics" % pod["status"]["podIP"]], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, "cannot read /metrics of %s: %s" % (pod["metadata"]["name"], p.stderr[-300:]))
    return p.stdout


def metric(text, name, **labels):
    return sum(v for l, v in metric_samples(text, name) if all(l.get(k) == want for k, want in labels.items()))


def admissions_while(app, attacker, seconds):
    """Writes to the opted-in Deployment (each an UPDATE the real API server sends through the mutating and the
    validating Deployment webhook, failurePolicy Fail: refused if no answer comes) until the attacker ends: their
    latencies. Each write is read back."""
    latencies = []
    deadline = time.time() + seconds
    i = 0
    while time.time() < deadline and attacker.poll() is None:
        i += 1
        start = time.time()
        app.kubectl("annotate", "deploy/web", "hostile.example.com/tick=%d" % i, "--overwrite")
        latencies.append(time.time() - start)
        got = (app.deployment()["metadata"].get("annotations") or {}).get("hostile.example.com/tick")
        check(got == str(i), "write %d went through admission (annotation %r)" % (i, got))
        time.sleep(0.2)
    return latencies


def webhook_durations(s):
    """kube-apiserver's own histogram of the Deployment webhooks' calls (the time each call took, as the API
    server measured it): {le: count} summed over both webhooks, "+Inf" the total."""
    out = {}
    text = s.tools.kubectl("get", "--raw", "/metrics").stdout
    for labels, value in metric_samples(text, "apiserver_admission_webhook_admission_duration_seconds_bucket"):
        if "deployment" in labels.get("name", "") and labels.get("operation") == "UPDATE":
            out[labels["le"]] = out.get(labels["le"], 0) + value
    return out


def summary(latencies):
    s = sorted(latencies)
    return "n=%d p50=%.0f ms p99=%.0f ms max=%.0f ms" % (
        len(s), s[len(s) // 2] * 1000, s[min(len(s) - 1, int(len(s) * 0.99))] * 1000, s[-1] * 1000)


def restarts(pods):
    return {p["metadata"]["name"]: container_statuses(p)["webhook"]["restartCount"] for p in pods}


def h01_idle_connections_do_not_starve_admission(s):
    """Thousands of idle connections held open against every webhook pod's HTTPS port and hundreds against its probe
    port (the chart's --max-connections 256, probe bound 64): the real API server's admission calls keep being
    answered in milliseconds, the kubelet's liveness and readiness probes keep passing (no restart, still Ready),
    and the pods report the idle connections they closed to make room."""
    app = tc.App(s, "h01")
    app.create(tc.deployment("web", replicas=1))
    pods = s.webhook_pods()
    check(pods, "webhook pods")
    before = restarts(pods)
    targets = [[p["status"]["podIP"], 8443, 1200] for p in pods] + [[p["status"]["podIP"], 8080, 300] for p in pods]
    attacker = start_attacker("idle", 25, targets)
    time.sleep(4)  # the attack builds up: every pod is at its limits
    durations_before = webhook_durations(s)
    latencies = admissions_while(app, attacker, 20)
    durations_after = webhook_durations(s)
    out, err = attacker.communicate(timeout=60)
    check(attacker.returncode == 0, "attacker failed: %s" % err[-500:])
    counts = json.loads(out)
    calls = {le: n - durations_before.get(le, 0) for le, n in durations_after.items()}
    print("    attacker: %s; admissions under attack: %s; the API server's webhook calls by duration: %s"
          % (counts, summary(latencies), {le: int(n) for le, n in sorted(calls.items(), key=lambda kv: float(kv[0]))}))
    check(counts["opened"] > 3 * 256 * len(pods), "the attacker opened %d connections" % counts["opened"])
    # Each write was admitted and read back (admissions_while); how many fit in 20 s depends on kubectl's own start-up
    # on a loaded machine (the attacker's 100,000 connections share its cores: 9 writes in one CI run, 17 in
    # another), not on the webhook. What the webhook itself took is what the API server measured of its calls.
    check(len(latencies) >= 5 and max(latencies) < 5, "admissions kept being answered: %s" % summary(latencies))
    total = calls.get("+Inf", 0)
    check(total >= 2 * len(latencies), "the API server called both Deployment webhooks for each write (%d calls for "
          "%d writes)" % (total, len(latencies)))
    check(calls.get("2.5", 0) == total, "every webhook call under attack took under 2.5 s as the API server measured "
          "it: %s" % calls)
    check(max(latencies) < 5, "every admission under attack answered within 5 s (max %.0f ms)" % (max(latencies) * 1000))
    for p in pods:
        text = pod_metrics(p)
        evicted = metric(text, "inplace_webhook_connections_closed_total", port="webhook", reason="evicted_idle")
        probe = metric(text, "inplace_webhook_connections_closed_total", port="probes", reason="evicted_idle")
        print("    %s: evicted idle webhook=%d probes=%d" % (p["metadata"]["name"], evicted, probe))
        check(evicted > 0 and probe > 0, "%s closed idle connections on both ports" % p["metadata"]["name"])
    after = s.webhook_pods()
    check(restarts(after) == before, "no webhook container restarted (liveness held): %s -> %s"
          % (before, restarts(after)))
    check(all(tc.is_ready(p) for p in after), "every webhook pod is still Ready")


def h02_hostile_bodies_do_not_oom_the_webhook(s):
    """Against every webhook pod under the chart's 256Mi memory limit: three parallel 7 MiB reviews of 3.4 million
    JSON values each and six uploads that stop 0.5 MiB short of their Content-Length, for 20 s. No container is
    OOM-killed or restarted (the kubelet's restartCount and lastState), admissions through the real API server keep
    being answered, and the pods count what they shed (413 for the values, 503 for the byte budget)."""
    app = tc.App(s, "h02")
    app.create(tc.deployment("web", replicas=1))
    pods = s.webhook_pods()
    before = restarts(pods)
    attacker = start_attacker("memory", 20, [[p["status"]["podIP"], 8443, 0] for p in pods])
    time.sleep(2)
    latencies = admissions_while(app, attacker, 20)
    out, err = attacker.communicate(timeout=90)
    check(attacker.returncode == 0, "attacker failed: %s" % err[-500:])
    counts = json.loads(out)
    print("    attacker answers: %s; admissions under attack: %s" % (counts["answers"], summary(latencies)))
    # Each write is a kubectl run and a read back: on a loaded machine (the version matrix beside it) 6 fit in 20 s,
    # alone 40. Every one of them went through both webhooks (failurePolicy Fail) or the scenario failed above.
    check(len(latencies) >= 5, "admissions kept being answered (%d)" % len(latencies))
    after = s.webhook_pods()
    for p in after:
        cs = container_statuses(p)["webhook"]
        check(not ((cs.get("lastState") or {}).get("terminated")), "%s was terminated: %s"
              % (p["metadata"]["name"], cs.get("lastState")))
        text = pod_metrics(p)
        values = metric(text, "inplace_webhook_requests_shed_total", reason="too_many_json_values")
        budget = metric(text, "inplace_webhook_requests_shed_total", reason="memory_budget")
        print("    %s: shed too_many_json_values=%d memory_budget=%d" % (p["metadata"]["name"], values, budget))
        check(values + budget > 0, "%s shed hostile requests" % p["metadata"]["name"])
    check(restarts(after) == before, "no webhook container restarted: %s -> %s" % (before, restarts(after)))
    check(counts["answers"].get("413", 0) + counts["answers"].get("503", 0) > 0, "the attacker was refused")


SCENARIOS = [h01_idle_connections_do_not_starve_admission, h02_hostile_bodies_do_not_oom_the_webhook]
