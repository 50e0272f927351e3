#!/usr/bin/env python3
"""`make bench`: the webhook over HTTPS keep-alive on loopback, driven by wrk, against nginx returning a
fixed AdmissionReview over TLS on the same machine in the same run.

  bench.py BINARY SOURCE_DIR CERT_DIR OUT_DIR [--seconds N] [--connections 1,8,64]

For each review (5 KB Pod CREATE, 9 KB Deployment UPDATE on the in-place path, 256 KB Pod CREATE) and
each connection count: requests/s, p50/p99/p99.9 latency, errors, server CPU time per request (utime +
stime from /proc, all of the server's processes), and RSS idle and at peak under load. Our figures are
also given as ratios to nginx's. Writes OUT_DIR/results.md (the table README.md shows, with the date and the
commit) and OUT_DIR/results.json.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "curl"))
from webhook_process import Webhook, curl, free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
REVIEWS = [("pod-5k", "/mutate/pods", "Pod CREATE ~5 KB"),
           ("deploy-9k", "/mutate/deployments", "Deployment UPDATE ~9 KB (in-place path)"),
           ("pod-256k", "/mutate/pods", "Pod CREATE ~256 KB")]
CONNECTIONS = (1, 8, 64)


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / TICK


def faults_and_switches(pids):
    """Minor page faults (/proc/PID/stat, the whole process) and context switches, voluntary + involuntary, of
    every thread (/proc/PID/task/*/status), summed over `pids`: per request, they tell a server that touches fresh
    memory or wakes more often per request."""
    faults = switches = 0
    for pid in pids:
        try:
            faults += int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[7])  # minflt
            for tid in os.listdir(f"/proc/{pid}/task"):
                for line in open(f"/proc/{pid}/task/{tid}/status"):
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        switches += int(line.split()[1])
        except OSError:
            pass
    return faults, switches


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def children(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class Nginx:
    def __init__(self, out, cert_dir, reviews_dir):
        self.dir = os.path.join(os.path.abspath(out), "nginx")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        locations = ""
        for name, _, _ in REVIEWS:
            answer = open(os.path.join(reviews_dir, name + ".nginx-answer.json")).read().replace("'", "\\'")
            locations += f"""
        location = /{name} {{
            default_type application/json;
            return 200 '{answer}';
        }}"""
        conf = f"""
worker_processes 2;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_buffer_size 1m;
    client_max_body_size 8m;
    keepalive_requests 1000000;
    keepalive_timeout 90s;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    server {{
        listen 127.0.0.1:{self.port} ssl;
        ssl_certificate {cert_dir}/tls.crt;
        ssl_certificate_key {cert_dir}/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        {locations}
    }}
}}
"""
        open(os.path.join(self.dir, "nginx.conf"), "w").write(conf)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(["nginx", "-c", os.path.join(self.dir, "nginx.conf"), "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start")

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.wait(timeout=10)


def wrk(url, body_file, connections, seconds):
    env = dict(os.environ, BODY_FILE=body_file)
    threads = min(2, connections)
    out = subprocess.run(["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
                          "--timeout", "10s", "-s", os.path.join(HERE, "post.lua"), url],
                         capture_output=True, text=True, env=env, timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"wrk printed no result: {out.stdout}\n{out.stderr}")


def measure(pids, url, body_file, connections, seconds):
    wrk(url, body_file, connections, 1)  # warm-up: connections, caches, pools
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kib(pids()))
            time.sleep(0.1)
    t = threading.Thread(target=sample)
    t.start()
    procs = pids()  # one list for both readings (nginx's runs ps)
    cpu0, (faults0, switches0) = cpu_seconds(procs), faults_and_switches(procs)
    r = wrk(url, body_file, connections, seconds)
    procs = pids()
    cpu1, (faults1, switches1) = cpu_seconds(procs), faults_and_switches(procs)
    stop.set()
    t.join()
    errors = sum(r["errors"].values())
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["cpu_us_per_req"] = (cpu1 - cpu0) * 1e6 / max(1, r["requests"])
    r["faults_per_req"] = (faults1 - faults0) / max(1, r["requests"])
    r["switches_per_req"] = (switches1 - switches0) / max(1, r["requests"])
    r["rss_peak_kib"] = peak[0]
    r["error_count"] = errors
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("source")
    ap.add_argument("cert_dir")
    ap.add_argument("out")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", default=",".join(map(str, CONNECTIONS)))
    a = ap.parse_args()
    conns = [int(c) for c in a.connections.split(",")]
    os.makedirs(a.out, exist_ok=True)
    reviews = os.path.join(a.out, "reviews")
    subprocess.run([sys.executable, os.path.join(HERE, "make_reviews.py"), a.source, reviews], check=True)

    hook = Webhook(a.binary, a.cert_dir, extra_args=["--log-level", "warn"],
                   log_path=os.path.join(a.out, "webhook.log")).start()
    try:
        nginx = Nginx(a.out, os.path.abspath(a.cert_dir), reviews).start()
    except Exception:
        hook.stop()
        raise
    results = {"machine": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                           "model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                          if l.startswith("model name")), "?")},
               "seconds": a.seconds, "cells": [], "date": time.strftime("%Y-%m-%d", time.gmtime()),
               "commit": subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or "unknown"}
    try:
        # Each review must be answered correctly before it is measured.
        for name, path, _ in REVIEWS:
            status, body = curl(hook, path, body_path=os.path.join(reviews, name + ".json"))
            resp = json.loads(body)["response"]
            assert status == 200 and resp["allowed"] and "patch" in resp, (name, body[:300])
        time.sleep(1)
        results["rss_idle_kib"] = {"inplace-webhook": rss_kib([hook.proc.pid]), "nginx": rss_kib(nginx.pids())}
        for name, path, label in REVIEWS:
            body_file = os.path.join(reviews, name + ".json")
            for c in conns:
                ours = measure(lambda: [hook.proc.pid], f"https://127.0.0.1:{hook.port}{path}", body_file, c, a.seconds)
                ref = measure(nginx.pids, f"https://127.0.0.1:{nginx.port}/{name}", body_file, c, a.seconds)
                cell = {"review": name, "label": label, "connections": c, "ours": ours, "nginx": ref,
                        "cpu_ratio": ours["cpu_us_per_req"] / max(1e-9, ref["cpu_us_per_req"]),
                        "rps_ratio": ours["rps"] / max(1e-9, ref["rps"])}
                results["cells"].append(cell)
                print(f"{name:10} c={c:<3} ours {ours['rps']:8.0f} req/s p99 {ours['p99_us']/1000:6.2f} ms "
                      f"cpu {ours['cpu_us_per_req']:6.1f} us/req faults {ours['faults_per_req']:5.2f} switches "
                      f"{ours['switches_per_req']:5.2f} /req rss {ours['rss_peak_kib']/1024:5.1f} MiB err {ours['error_count']} | "
                      f"nginx {ref['rps']:8.0f} req/s cpu {ref['cpu_us_per_req']:6.1f} us/req faults {ref['faults_per_req']:5.2f} "
                      f"switches {ref['switches_per_req']:5.2f} /req | cpu x{cell['cpu_ratio']:.2f}",
                      flush=True)
        results["rss_after_kib"] = rss_kib([hook.proc.pid])
    finally:
        hook.stop()
        nginx.stop()
    json.dump(results, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    md = render(results)
    open(os.path.join(a.out, "results.md"), "w").write(md)
    print()
    print(md)


# README.md's webhook table is render()'s output as a run printed it (tests/bench/test_readme_tables.py checks that
# the two keep the same shape): the caption, the RSS line, then one row per review and connection count.
CAPTION = "`make bench`, %s, commit %s, %s, %d CPUs, Linux %s; %d s per cell, wrk on the same machine"
RSS_LINE = "RSS idle: inplace-webhook %.1f MiB, nginx (master + 2 workers) %.1f MiB."
HEADER = ("| review | conns | req/s | p50 ms | p99 ms | p99.9 ms | errors | CPU µs/req | CPU × nginx | req/s × nginx "
          "| peak RSS MiB | nginx req/s | nginx CPU µs/req |")
ALIGN = "|---|" + "---|" * 12


def caption_of(r):
    m = r["machine"]
    return CAPTION % (r["date"], r["commit"], m["model"], m["cpus"], m["kernel"], r["seconds"])


def row(c):
    o, n = c["ours"], c["nginx"]
    return (f"| {c['label']} | {c['connections']} | {o['rps']:.0f} | {o['p50_us']/1000:.2f} | {o['p99_us']/1000:.2f} | "
            f"{o['p999_us']/1000:.2f} | {o['error_count']} | {o['cpu_us_per_req']:.1f} | {c['cpu_ratio']:.2f} | "
            f"{c['rps_ratio']:.2f} | {o['rss_peak_kib']/1024:.1f} | {n['rps']:.0f} | {n['cpu_us_per_req']:.1f} |")


def render(r):
    lines = [caption_of(r), "",
             RSS_LINE % (r['rss_idle_kib']['inplace-webhook'] / 1024, r['rss_idle_kib']['nginx'] / 1024), "",
             HEADER, ALIGN]
    lines += [row(c) for c in r["cells"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
