#!/usr/bin/env python3
"""Hostile clients against the real binary on loopback (issue 13 items 1 and 2).

  hostile_test.py BINARY SOURCE_DIR CERT_DIR [--only connections|memory] [--seconds N]

connections: thousands of TLS connections that complete the handshake and send nothing, and
  hundreds of plain TCP connections to the probe port, opened again as soon as the server closes
  them, held for N seconds. Meanwhile valid reviews (on a keep-alive connection, and on a fresh
  connection each) and /healthz (a fresh connection each, as the kubelet probes) must keep being
  answered; their latencies are printed (p50/p99/max).

memory: the server runs in a 256 MiB memory cgroup (v1 hierarchy, as root; the chart's limit).
  Parallel size-legal reviews made of millions of tiny JSON values, uploads that stop short of
  their Content-Length, slow chunked uploads and clients that send reviews and never read the answers
  are sent at once for N seconds, with the partial heads below from addresses of their own (as pods'; the
  valid traffic comes from 127.0.0.1, as the API server's and the kubelet's do; --memory-without-partial-heads
  leaves them out). The server must
  survive (no OOM kill), keep answering valid reviews, shed what does not fit (413, 503 with
  Retry-After) and count it in /metrics; the cgroup's max_usage and the process's peak RSS are
  printed. Without the cgroup hierarchy (or not root) the memory part is skipped with a message.

Prints one line 'N passed, N failed' at the end; exits 1 when a check failed.
"""
import argparse
import json
import multiprocessing
import os
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "curl"))
from webhook_process import free_port, sanitizer_findings  # noqa: E402

MIB = 1024 * 1024
CGROUP_ROOT = "/sys/fs/cgroup/memory"

POD_REVIEW = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
        "uid": "0b5a7f0e-1111-4a4a-9c9c-00000000beef",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"generateName": "web-", "namespace": "default", "labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        "oldObject": None, "dryRun": False,
    },
}).encode()

results = {"passed": 0, "failed": 0}


def check(ok, what):
    results["passed" if ok else "failed"] += 1
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)


def percentiles(samples):
    if not samples:
        return "no samples"
    s = sorted(samples)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] * 1000  # noqa: E731
    return "n=%d p50=%.1f ms p99=%.1f ms max=%.1f ms" % (len(s), pick(0.5), pick(0.99), s[-1] * 1000)


class Server:
    """The binary with the chart's flags, optionally started inside a memory cgroup."""

    def __init__(self, binary, cert_dir, extra_args=(), cgroup=None):
        self.port, self.probe_port = free_port(), free_port()
        self.log_path = tempfile.mktemp(prefix="iw-hostile-", suffix=".log")
        args = [binary, "serve", "--bind-address", "127.0.0.1", "--port", str(self.port),
                "--probe-port", str(self.probe_port),
                "--tls-cert-file", os.path.join(cert_dir, "tls.crt"),
                "--tls-private-key-file", os.path.join(cert_dir, "tls.key"),
                "--log-level", "error", "--shutdown-delay-seconds", "0", "--disable-loop", *extra_args]

        def enter_cgroup():
            if cgroup:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=self._log, preexec_fn=enter_cgroup)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %s; see %s" % (self.proc.returncode, self.log_path))
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.probe_port, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("server not ready; see " + self.log_path)

    def metric(self, name):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.probe_port, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
        return 0.0

    def peak_rss_mib(self):
        try:
            for line in open("/proc/%d/status" % self.proc.pid):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return -1

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        findings = sanitizer_findings(self.proc.pid, self.log_path)
        check(not findings, "no sanitizer report from the server" + ("" if not findings else ": %s" % findings))
        return self.proc.returncode


def tls_context(cert_dir):
    ctx = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
    return ctx


def read_response(sock):
    """(status, headers dict, body) of one response with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode()] = value.strip().decode()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the response body")
        rest += chunk
    return status, headers, rest[:length]


def post_head(length, path="/mutate/pods", chunked=False):
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: %d" % length
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s\r\n\r\n"
            % (path.encode(), framing))


class ValidTraffic:
    """Valid reviews and /healthz while an attack is held: every answer's latency, every failure."""

    def __init__(self, server, ctx, interval=0.02):
        self.server, self.ctx, self.interval = server, ctx, interval
        self.keepalive, self.fresh, self.healthz = [], [], []
        self.failures = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._keepalive, self._fresh, self._healthz)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _review(self, sock):
        sock.sendall(post_head(len(POD_REVIEW)) + POD_REVIEW)
        status, _, body = read_response(sock)
        if status != 200 or not json.loads(body)["response"]["allowed"]:
            raise RuntimeError("review answered %d" % status)

    def _connect(self):
        raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        return self.ctx.wrap_socket(raw, server_hostname="localhost")

    def _keepalive(self):
        # As the API server does: one connection reused; a new one if the server closed it.
        sock = None
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                if sock is None:
                    sock = self._connect()
                self._review(sock)
                self.keepalive.append(time.monotonic() - start)
            except (OSError, ConnectionError, RuntimeError, ValueError) as e:
                if sock is not None:
                    sock.close()
                    sock = None
                    try:  # closed while idle (evicted or timed out): the client retries at once
                        sock = self._connect()
                        self._review(sock)
                        self.keepalive.append(time.monotonic() - start)
                        continue
                    except (OSError, ConnectionError, RuntimeError, ValueError) as e2:
                        e = e2
                        sock = None
                self.failures.append("keep-alive review: %r" % e)
            time.sleep(self.interval)

    def _fresh(self):
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                with self._connect() as sock:
                    self._review(sock)
                self.fresh.append(time.monotonic() - start)
            except (OSError, ConnectionError, RuntimeError, ValueError) as e:
                self.failures.append("review on a new connection: %r" % e)
            time.sleep(self.interval)

    def _healthz(self):
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                with socket.create_connection(("127.0.0.1", self.server.probe_port), timeout=10) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    status, _, _ = read_response(s)
                    if status != 200:
                        raise RuntimeError("/healthz answered %d" % status)
                self.healthz.append(time.monotonic() - start)
            except (OSError, ConnectionError, RuntimeError) as e:
                self.failures.append("/healthz: %r" % e)
            time.sleep(self.interval)

    def report(self, label):
        print("  %s: keep-alive reviews %s" % (label, percentiles(self.keepalive)))
        print("  %s: reviews on a new TLS connection %s" % (label, percentiles(self.fresh)))
        print("  %s: /healthz on a new connection %s" % (label, percentiles(self.healthz)))
        if self.failures:
            print("  %s: %d failures, first: %s" % (label, len(self.failures), self.failures[:3]))


class IdleHolder:
    """Keeps up to `count` idle connections open (TLS: handshake done, then nothing), opening a
    new one whenever the server closes one. Runs in its own process, so that the attack does not
    share the measuring client's interpreter lock."""

    def __init__(self, port, count, ctx=None, threads=4, head=b"", source=None):
        self.port, self.count, self.ctx, self.nthreads, self.head = port, count, ctx, threads, head
        self.source = (source, 0) if source else None  # the attacker's own address (a pod's), else 127.0.0.1
        self._opened = multiprocessing.Value("l", 0)
        self._closed = multiprocessing.Value("l", 0)
        self._stop = multiprocessing.Event()
        self.proc = multiprocessing.Process(target=self._main, daemon=True)

    def start(self):
        self.proc.start()
        return self

    @property
    def opened(self):
        return self._opened.value

    @property
    def closed_by_server(self):
        return self._closed.value

    def _main(self):
        threads = [threading.Thread(target=self._run, args=(self.count // self.nthreads,))
                   for _ in range(self.nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _open(self):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=self.source)
        s = raw if self.ctx is None else self.ctx.wrap_socket(raw, server_hostname="localhost")
        if self.head:
            s.sendall(self.head)  # part of a request head, never finished
        return s

    def _run(self, share):
        mine = []
        sel = selectors.DefaultSelector()
        while not self._stop.is_set():
            while len(mine) < share and not self._stop.is_set():
                try:
                    s = self._open()
                except (OSError, ssl.SSLError):
                    break  # the server did not take it in time (evictions under way): try again
                s.setblocking(False)
                mine.append(s)
                sel.register(s, selectors.EVENT_READ)
                with self._opened.get_lock():
                    self._opened.value += 1
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    if s.recv(1) != b"":
                        continue
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue
                except (OSError, ssl.SSLError):
                    pass
                sel.unregister(s)
                s.close()
                mine.remove(s)
                with self._closed.get_lock():
                    self._closed.value += 1
        for s in mine:
            s.close()

    def join(self):
        self._stop.set()
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


def attack_connections(binary, cert_dir, seconds):
    print("connections: %d s of 2,000 idle TLS connections on the webhook port and 500 idle TCP "
          "connections on the probe port (--max-connections 256, --max-probe-connections 64)" % seconds)
    server = Server(binary, cert_dir, ["--first-request-timeout-seconds", "2"])
    ctx = tls_context(cert_dir)
    try:
        baseline = ValidTraffic(server, ctx).start()
        time.sleep(2)
        baseline.join()
        baseline.report("no attack")
        tls = IdleHolder(server.port, 2000, ctx, threads=4).start()
        plain = IdleHolder(server.probe_port, 500, None, threads=2).start()
        time.sleep(2)  # the attack builds up
        traffic = ValidTraffic(server, ctx).start()
        time.sleep(seconds)
        traffic.join()
        opened_tls, opened_plain = tls.opened, plain.opened
        evicted = server.metric('inplace_webhook_connections_closed_total{port="webhook",reason="evicted_idle"}')
        timed_out = server.metric(
            'inplace_webhook_connections_closed_total{port="webhook",reason="first_request_timeout"}')
        probe_evicted = server.metric(
            'inplace_webhook_connections_closed_total{port="probes",reason="evicted_idle"}')
        open_now = server.metric("inplace_webhook_open_connections")
        tls.join()
        plain.join()
        traffic.report("under attack")
        print("  attacker: %d TLS connections opened (%d closed by the server), %d probe-port connections "
              "opened; server: %d evicted idle, %d closed by the first-request timeout on the webhook port, "
              "%d evicted on the probe port, %d open at the end"
              % (opened_tls, tls.closed_by_server, opened_plain, evicted, timed_out, probe_evicted, open_now))
        check(opened_tls > 256 * 2, "the attacker opened far more TLS connections than --max-connections (%d)"
              % opened_tls)
        check(evicted > 0 and probe_evicted > 0, "the server closed idle connections to make room on both ports")
        check(not traffic.failures, "every valid review and /healthz was answered during the attack (%d failures)"
              % len(traffic.failures))
        check(len(traffic.fresh) > 20 and len(traffic.healthz) > 20 and len(traffic.keepalive) > 20,
              "valid traffic kept flowing (%d/%d/%d answers)"
              % (len(traffic.keepalive), len(traffic.fresh), len(traffic.healthz)))
        worst = max(traffic.keepalive + traffic.fresh + traffic.healthz or [99])
        # The API server's webhook timeout is 10 s at most; a backlogged connection waited forever
        # before. The figures above are the real result; the bound only catches a regression.
        check(worst < 2.0, "the slowest valid answer under attack took %.0f ms (< 2 s)" % (worst * 1000))
    finally:
        check(server.proc.poll() is None, "the server is still running after the connection attack")
        server.stop()


def cgroup_create():
    if os.geteuid() != 0 or not os.path.isdir(CGROUP_ROOT):
        return None, "needs root and the cgroup v1 memory hierarchy at " + CGROUP_ROOT
    path = os.path.join(CGROUP_ROOT, "iw-hostile-%d" % os.getpid())
    try:
        os.mkdir(path)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(256 * MIB))
        swap = os.path.join(path, "memory.memsw.limit_in_bytes")
        if os.path.exists(swap):
            with open(swap, "w") as f:
                f.write(str(256 * MIB))
    except OSError as e:
        return None, "cannot set up a memory cgroup: %s" % e
    return path, ""


def cgroup_read(path, name):
    with open(os.path.join(path, name)) as f:
        return f.read()


def oom_kills(path):
    for line in cgroup_read(path, "memory.oom_control").splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def hostile_bodies(server, ctx, stop, counts):
    """Size-legal (< 7 MiB) reviews made of millions of tiny JSON values, sent back to back."""
    values = 3_400_000
    body = (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":['
            + b"0," * values + b'0]}}')
    assert len(body) < 7 * MIB
    while not stop.is_set():
        try:
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=20),
                                 server_hostname="localhost") as s:
                s.sendall(post_head(len(body)) + body)
                status, headers, _ = read_response(s)
                counts[status] = counts.get(status, 0) + 1
        except (OSError, ConnectionError, ssl.SSLError) as e:
            counts["error"] = counts.get("error", 0) + 1
            counts["last_error"] = repr(e)


def stalled_upload(server, ctx, stop, counts):
    """Sends 6.5 MiB of a 7 MiB Content-Length and stops: held until the read timeout, unless the
    server refuses it first."""
    declared = 7 * MIB - 4096
    while not stop.is_set():
        try:
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=20),
                                 server_hostname="localhost") as s:
                s.sendall(post_head(declared) + b" " * (6 * MIB + MIB // 2))
                s.settimeout(15)
                status, _, _ = read_response(s)
                counts[status] = counts.get(status, 0) + 1
        except (OSError, ConnectionError, ssl.SSLError, ValueError):
            counts["closed"] = counts.get("closed", 0) + 1


def slow_chunked(server, ctx, stop, counts):
    """A chunked upload of up to 7 MiB in 64 KiB chunks, one every 40 ms."""
    while not stop.is_set():
        try:
            with ctx.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=20),
                                 server_hostname="localhost") as s:
                s.sendall(post_head(0, chunked=True))
                chunk = b"10000\r\n" + b" " * 65536 + b"\r\n"
                sent = 0
                s.settimeout(0.04)
                status = None
                while sent < 7 * MIB - 128 * 1024 and not stop.is_set():
                    s.sendall(chunk)
                    sent += 65536
                    try:
                        status, headers, _ = read_response(s)
                        if status == 503:
                            counts["retry_after"] = headers.get("retry-after")
                        break
                    except (socket.timeout, ssl.SSLWantReadError):
                        pass
                if status is None:
                    s.settimeout(15)
                    s.sendall(b"0\r\n\r\n")
                    status, _, _ = read_response(s)
                counts[status] = counts.get(status, 0) + 1
        except (OSError, ConnectionError, ssl.SSLError, ValueError):
            counts["closed"] = counts.get("closed", 0) + 1


def non_reading(server, ctx, stop, counts):
    """Sends valid reviews back to back on one connection and never reads an answer: the answers fill the
    kernel's buffers, then wait in the server; the connection is held until the server closes it (its write
    deadline) or 12 s pass, then opened again."""
    burst = (post_head(len(POD_REVIEW)) + POD_REVIEW) * 16
    while not stop.is_set():
        sent = 0
        try:
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # A small receive window, as an attacker would choose: what the unread answers hold is
            # then the server's side, which must stay bounded.
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            raw.settimeout(20)
            raw.connect(("127.0.0.1", server.port))
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.settimeout(1)
                try:
                    while not stop.is_set():
                        s.sendall(burst)
                        sent += 16
                except (socket.timeout, ssl.SSLWantWriteError):
                    counts["blocked"] = counts.get("blocked", 0) + 1  # the server stopped reading
                held = time.monotonic() + 12
                while not stop.is_set() and time.monotonic() < held:
                    time.sleep(0.2)
        except (OSError, ConnectionError, ssl.SSLError):
            counts["closed"] = counts.get("closed", 0) + 1
        counts["reviews"] = counts.get("reviews", 0) + sent


def attack_memory(binary, cert_dir, seconds, with_partial_heads=False):
    cgroup, why = cgroup_create()
    if cgroup is None:
        print("memory: SKIPPED: %s" % why)
        return
    print("memory: %d s in a 256 MiB memory cgroup: 6 parallel 7 MiB reviews of 3.4 million JSON values "
          "each, 12 uploads that stop 0.5 MiB short, 12 slow chunked uploads of 7 MiB, 24 clients that send "
          "reviews and never read the answers%s" % (seconds, ", and the partial heads (1,000 TLS connections on "
                                                   "the webhook port, 300 on the probe port)"
                                                   if with_partial_heads else ""))
    server = None
    try:
        server = Server(binary, cert_dir, cgroup=cgroup)
        ctx = tls_context(cert_dir)
        stop = threading.Event()
        bodies, stalled, chunked, unread = {}, {}, {}, {}
        attackers = ([threading.Thread(target=hostile_bodies, args=(server, ctx, stop, bodies), daemon=True)
                      for _ in range(6)]
                     + [threading.Thread(target=stalled_upload, args=(server, ctx, stop, stalled), daemon=True)
                        for _ in range(12)]
                     + [threading.Thread(target=slow_chunked, args=(server, ctx, stop, chunked), daemon=True)
                        for _ in range(12)]
                     + [threading.Thread(target=non_reading, args=(server, ctx, stop, unread), daemon=True)
                        for _ in range(24)])
        # From addresses of their own, as pods in the cluster are: the valid traffic (the API server's, the
        # kubelet's) comes from 127.0.0.1.
        holders = ([h.start() for h in partial_head_holders(server, ctx, ("127.0.0.2", "127.0.0.3"))]
                   if with_partial_heads else [])
        for t in attackers:
            t.start()
        time.sleep(1)
        traffic = ValidTraffic(server, ctx, interval=0.05).start()
        time.sleep(seconds)
        traffic.join()
        stop.set()
        for t in attackers:
            t.join(20)
        for h in holders:
            h.join()
        alive = server.proc.poll() is None
        shed_budget = shed_values = shed_answers = -1
        if alive:
            shed_answers = server.metric('inplace_webhook_requests_shed_total{reason="answer_memory_budget"}')
            shed_budget = server.metric('inplace_webhook_requests_shed_total{reason="memory_budget"}')
            shed_values = server.metric('inplace_webhook_requests_shed_total{reason="too_many_json_values"}')
        peak = server.peak_rss_mib()
        max_usage = int(cgroup_read(cgroup, "memory.max_usage_in_bytes")) / MIB
        traffic.report("under attack")
        print("  hostile-value reviews answered: %s" % {k: v for k, v in bodies.items() if k != "last_error"})
        # A chunked upload that got through whole is answered 400: its body (spaces) is no JSON.
        print("  stalled uploads: %s; slow chunked uploads: %s" % (stalled, chunked))
        print("  clients that never read: %s" % unread)
        print("  shed: memory_budget=%d answer_memory_budget=%d too_many_json_values=%d; peak RSS %.1f MiB; "
              "cgroup max_usage %.1f MiB (limit 256 MiB), OOM kills %d"
              % (shed_budget, shed_answers, shed_values, peak, max_usage, oom_kills(cgroup)))
        check(unread.get("blocked", 0) > 0 and unread.get("reviews", 0) > 1000,
              "clients that never read sent reviews until the server stopped reading (%s)" % unread)
        if holders:
            print("  partial heads: %d TLS and %d probe-port connections opened"
                  % (holders[0].opened, holders[1].opened))
            check(holders[0].opened > 256 and holders[1].opened > 64,
                  "the partial heads opened more than the connection limits (%d, %d)"
                  % (holders[0].opened, holders[1].opened))
        check(alive and oom_kills(cgroup) == 0, "the server survived in 256 MiB (no OOM kill)")
        check(bodies.get(413, 0) > 0, "reviews of millions of values are refused with 413 (%d)" % bodies.get(413, 0))
        check(shed_values >= bodies.get(413, 0) > 0, "... and counted in /metrics (%d)" % shed_values)
        check(shed_budget > 0 and chunked.get("retry_after") == "1",
              "uploads over the byte budget are refused with 503 and Retry-After: 1 and counted (%d)" % shed_budget)
        check(not traffic.failures, "every valid review and /healthz was answered (%d failures)"
              % len(traffic.failures))
        check(len(traffic.fresh) > 10 and len(traffic.keepalive) > 10, "valid reviews kept flowing (%d/%d)"
              % (len(traffic.keepalive), len(traffic.fresh)))
        check(max_usage < 200, "the cgroup's peak stayed well under its limit (%.1f MiB < 200 MiB)" % max_usage)
    finally:
        if server is not None:
            server.stop()
        try:
            os.rmdir(cgroup)
        except OSError:
            pass


def partial_head_holders(server, ctx, sources=(None, None)):
    """1,000 TLS connections to the webhook port and 300 plain ones to the probe port, each holding part of a request
    head and never finishing it (not started), from the two `sources` addresses (None: 127.0.0.1, the valid
    traffic's own)."""
    return (IdleHolder(server.port, 1000, ctx, threads=4,
                       head=b"POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                       source=sources[0]),
            IdleHolder(server.probe_port, 300, None, threads=2, head=b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
                       source=sources[1]))


def attack_partial_heads(binary, cert_dir, seconds):
    print("partial heads: %d s of 1,000 TLS connections on the webhook port and 300 TCP connections on the probe "
          "port, each holding part of a request head and never finishing it (limits 256 and 64)" % seconds)
    server = Server(binary, cert_dir, [])
    ctx = tls_context(cert_dir)
    try:
        tls, plain = (h.start() for h in partial_head_holders(server, ctx))
        time.sleep(2)  # the attack builds up
        traffic = ValidTraffic(server, ctx).start()
        time.sleep(seconds)
        traffic.join()
        opened_tls, opened_plain = tls.opened, plain.opened
        tls.join()
        plain.join()
        traffic.report("under partial heads")
        # Read once the attack has stopped: the counters are totals.
        metric = 'inplace_webhook_connections_closed_total{port="%s",reason="%s"}'
        evicted = server.metric(metric % ("webhook", "evicted_idle"))
        probe_evicted = server.metric(metric % ("probes", "evicted_idle"))
        header = server.metric(metric % ("webhook", "header_timeout"))
        probe_header = server.metric(metric % ("probes", "header_timeout"))
        print("  attacker: %d TLS and %d probe-port connections opened; server: evicted %d / %d, header timeouts "
              "%d / %d (webhook / probes)" % (opened_tls, opened_plain, evicted, probe_evicted, header, probe_header))
        check(opened_tls > 256 * 2 and opened_plain > 64 * 2,
              "the attacker opened several times the connection limits (%d, %d)" % (opened_tls, opened_plain))
        check(not traffic.failures, "every valid review and /healthz was answered under partial heads (%d failures)"
              % len(traffic.failures))
        check(len(traffic.fresh) > 20 and len(traffic.healthz) > 20 and len(traffic.keepalive) > 20,
              "valid traffic kept flowing (%d/%d/%d answers)"
              % (len(traffic.keepalive), len(traffic.fresh), len(traffic.healthz)))
        for name, samples in (("keep-alive reviews", traffic.keepalive), ("reviews on a new connection",
                              traffic.fresh), ("/healthz", traffic.healthz)):
            ordered = sorted(samples) or [99]
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            check(p99 < 0.1, "%s under partial heads: p99 %.0f ms (< 100 ms)" % (name, p99 * 1000))
            check(ordered[-1] < 1.0, "%s under partial heads: slowest %.0f ms (< 1 s)" % (name, ordered[-1] * 1000))
    finally:
        check(server.proc.poll() is None, "the server is still running after the partial-head attack")
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("source")
    ap.add_argument("cert_dir")
    ap.add_argument("--only", choices=("connections", "partial", "memory"))
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--partial-seconds", type=int, default=60, help="how long the partial heads are held")
    ap.add_argument("--memory-without-partial-heads", action="store_true",
                    help="leave the partial-head floods of both ports out of the memory attack")
    a = ap.parse_args()
    started = time.monotonic()
    if a.only in (None, "connections"):
        attack_connections(a.binary, a.cert_dir, a.seconds)
    if a.only in (None, "partial"):
        attack_partial_heads(a.binary, a.cert_dir, a.partial_seconds)
    if a.only in (None, "memory"):
        attack_memory(a.binary, a.cert_dir, a.seconds, not a.memory_without_partial_heads)
    print("hostile: %.0f s" % (time.monotonic() - started))
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    sys.exit(1 if results["failed"] else 0)


if __name__ == "__main__":
    main()
