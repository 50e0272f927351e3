#!/usr/bin/env python3
"""Soak: the webhook at ~80% of its measured maximum rate for MINUTES minutes, with the serving
certificate rotated every 30 s (a Secret-volume `..data` symlink swap) and one request in a hundred
malformed. Reports failed valid requests (target 0) and RSS and open file descriptors sampled every
10 s (flat from minute 2 to the end).

  soak.py BINARY SOURCE_DIR OUT_DIR [--minutes 10] [--connections 128]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "curl"))
import bench  # noqa: E402
from webhook_process import Webhook  # noqa: E402


def make_certs(src, d):
    subprocess.run([os.path.join(src, "certs", "gen-dev-certs.sh"), d], check=True, capture_output=True,
                   env=dict(os.environ, FORCE="1"))


def swap(dirpath, target):
    tmp = os.path.join(dirpath, "..data_tmp")
    os.symlink(target, tmp)
    os.rename(tmp, os.path.join(dirpath, "..data"))


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def soak_wrk(url, body, connections, delay_ms, seconds):
    """wrk with soak.lua: one malformed request in a hundred, `delay_ms` between a connection's
    requests. Returns soak.lua's summary (requests, ok, malformed_answered, failed, ...)."""
    env = dict(os.environ, BODY_FILE=body, MALFORMED_EVERY="100", DELAY_MS=str(delay_ms))
    out = subprocess.run(["wrk", "-t", "2", "-c", str(connections), "-d", f"{seconds}s",
                          "--timeout", "10s", "-s", os.path.join(HERE, "soak.lua"), url],
                         capture_output=True, text=True, env=env, timeout=seconds + 120)
    return next(json.loads(l) for l in out.stdout.splitlines() if l.startswith("{"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--connections", type=int, default=128, help="for measuring the maximum")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    reviews = os.path.join(a.out, "reviews")
    subprocess.run([sys.executable, os.path.join(HERE, "make_reviews.py"), a.source, reviews], check=True)
    body = os.path.join(reviews, "pod-5k.json")
    vol = os.path.join(a.out, "secret-volume")
    shutil.rmtree(vol, ignore_errors=True)
    os.makedirs(vol)
    for g in ("gen0", "gen1"):
        make_certs(a.source, os.path.join(vol, g))
    os.symlink("gen0", os.path.join(vol, "..data"))
    for f in ("tls.crt", "tls.key"):
        os.symlink(os.path.join("..data", f), os.path.join(vol, f))
    hook = Webhook(a.binary, os.path.join(vol, "gen0"), extra_args=["--log-level", "warn"],
                   log_path=os.path.join(a.out, "webhook.log"))
    hook.start(cert=os.path.join(vol, "tls.crt"), key=os.path.join(vol, "tls.key"))
    url = f"https://127.0.0.1:{hook.port}/mutate/pods"
    try:
        peak = bench.wrk(url, body, a.connections, 5)
        rate = peak["requests"] / (peak["duration_us"] / 1e6)
        target = 0.8 * rate
        # wrk paces each connection by whole milliseconds between requests: with a 1 ms pause,
        # the connection count sets the rate. Calibrate it on short runs (no rotation yet).
        delay_ms = 1
        connections = max(8, int(target * 0.0015))
        for _ in range(4):
            trial = soak_wrk(url, body, connections, delay_ms, 4)
            got = trial["requests"] / 4
            print(f"  calibration: {connections} connections -> {got:.0f} req/s", flush=True)
            # A long run with rotations settles a few percent below a short one: aim at or
            # just above the target.
            if target <= got <= 1.05 * target:
                break
            connections = max(8, min(240, round(connections * 1.02 * target / got)))
        print(f"max {rate:.0f} req/s; soak target {target:.0f} req/s with {connections} connections, "
              f"{delay_ms} ms pause per request", flush=True)
        stop = threading.Event()
        samples, rotations = [], [0]
        start = time.time()

        def rotate():
            gen = 0
            while not stop.wait(30):
                gen ^= 1
                make_certs(a.source, os.path.join(vol, f"gen{gen}"))
                swap(vol, f"gen{gen}")
                rotations[0] += 1

        def sample():
            while not stop.wait(10):
                samples.append((time.time() - start, bench.rss_kib([hook.proc.pid]), fds(hook.proc.pid)))

        threads = [threading.Thread(target=rotate), threading.Thread(target=sample)]
        for t in threads:
            t.start()
        result = soak_wrk(url, body, connections, delay_ms, int(a.minutes * 60))
        stop.set()
        for t in threads:
            t.join()
        reloads = hook.metric("inplace_webhook_certificate_reloads_total")
        errors = hook.metric("inplace_webhook_certificate_reload_errors_total")
    finally:
        hook.stop()
    after2 = [s for s in samples if s[0] >= 120]
    report = {"minutes": a.minutes, "max_rps": rate, "target_rps": target, "connections": connections,
              "achieved_rps": result["requests"] / (a.minutes * 60), **result,
              "rotations": rotations[0], "reloads": reloads, "reload_errors": errors,
              "rss_kib_min2_to_end": [min(s[1] for s in after2), max(s[1] for s in after2)] if after2 else None,
              "fds_min2_to_end": [min(s[2] for s in after2), max(s[2] for s in after2)] if after2 else None,
              "samples": samples}
    json.dump(report, open(os.path.join(a.out, "soak.json"), "w"), indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1))
    return 0 if result["failed"] == 0 and result["socket_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
