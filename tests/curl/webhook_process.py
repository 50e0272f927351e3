"""Starts the real inplace-webhook binary on free loopback ports for a test, and stops it."""
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Webhook:
    def __init__(self, binary, cert_dir, extra_args=(), log_path=None):
        self.binary = binary
        self.cert_dir = cert_dir
        self.port = free_port()
        self.probe_port = free_port()
        self.extra_args = list(extra_args)
        self.log_path = log_path
        self.proc = None
        self._log = None

    def start(self, cert=None, key=None):
        cert = cert or os.path.join(self.cert_dir, "tls.crt")
        key = key or os.path.join(self.cert_dir, "tls.key")
        args = [self.binary, "serve", "--bind-address", "127.0.0.1",
                "--port", str(self.port), "--probe-port", str(self.probe_port),
                "--tls-cert-file", cert, "--tls-private-key-file", key,
                "--log-format", "json", "--shutdown-delay-seconds", "0", "--disable-loop",
                *self.extra_args]
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=self._log)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"webhook exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("webhook did not become ready within 10 s")

    def url(self, path):
        return f"https://localhost:{self.port}{path}"

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def metric(self, name_with_labels):
        for line in self.metrics().splitlines():
            if line.startswith(name_with_labels + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        return self.proc.returncode if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def curl(webhook, path, body_path=None, data=None, content_type="application/json", extra=()):
    """POSTs with curl over HTTPS, verifying the server certificate against the dev CA (no -k).
    Returns (http_status, body bytes)."""
    args = ["curl", "-sS", "--http1.1", "--cacert", os.path.join(webhook.cert_dir, "ca.crt"),
            "-H", f"Content-Type: {content_type}", "-o", "-", "-w", "\n%{http_code}", *extra]
    if body_path is not None:
        args += ["--data-binary", "@" + body_path]
    elif data is not None:
        args += ["--data-binary", "@-"]
    args.append(webhook.url(path) + "?timeout=10s")
    out = subprocess.run(args, input=data, capture_output=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"curl failed ({out.returncode}): {out.stderr.decode()}")
    body, _, status = out.stdout.rpartition(b"\n")
    return int(status), body
