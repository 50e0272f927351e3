"""Starts the real inplace-webhook binary on free loopback ports for a test, and stops it."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

# What ASan, LSan, UBSan and TSan print at the top of a report.
SANITIZER_REPORT_RE = re.compile(r"(ERROR|WARNING): (Address|Leak|Thread|UndefinedBehavior)Sanitizer"
                                 r"|: runtime error: ")


def sanitizer_findings(pid, log_path=None):
    """The sanitizer reports of process `pid` as one text ("" when there is none): its report
    files in $IW_SANITIZER_REPORTS (set for every test of a sanitizer build, see CMakeLists.txt;
    ASan and TSan write there) and the report lines of its log (UBSan always writes to stderr)."""
    out = []
    reports = os.environ.get("IW_SANITIZER_REPORTS")
    if reports and os.path.isdir(reports) and pid is not None:
        for name in sorted(os.listdir(reports)):
            if name.endswith(".%d" % pid):
                with open(os.path.join(reports, name), "rb") as f:
                    out.append("--- %s:\n%s" % (name, f.read().decode("utf-8", "replace")))
    if log_path and os.path.exists(log_path):
        with open(log_path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        hits = [i for i, line in enumerate(lines) if SANITIZER_REPORT_RE.search(line)]
        if hits:
            out.append("--- %s:\n%s" % (log_path, "\n".join(lines[hits[0]:hits[0] + 60])))
    return "\n".join(out)


class SanitizerFinding(AssertionError):
    """A sanitizer reported an error in a process the test started."""


def stop_process(proc, timeout):
    """SIGTERM, then SIGKILL if `proc` has not exited `timeout` seconds later. Returns whether it
    exited without the SIGKILL (also when it had exited before)."""
    if proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


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
        # Always a file, so that a sanitizer report on stderr is seen.
        self.log_path = log_path or tempfile.mktemp(prefix="iw-webhook-", suffix=".log")
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
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=self._log)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.check_sanitizers()
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
        if self.proc:
            stop_process(self.proc, 15)
        if self._log is not None:
            self._log.close()
        self.check_sanitizers()
        return self.proc.returncode if self.proc else None

    def check_sanitizers(self):
        """Raises SanitizerFinding if a sanitizer reported anything in this server process."""
        if self.proc is None:
            return
        findings = sanitizer_findings(self.proc.pid, self.log_path)
        if findings:
            raise SanitizerFinding(f"sanitizer report from inplace-webhook (pid {self.proc.pid}):\n{findings}")

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
