"""A fault-injecting HTTPS proxy in front of the real kube-apiserver, for the one thing the real cluster cannot do
on its own: answer exactly the errors a test asks for. The loop under test is pointed at it (--api-server);
everything it does not fault is forwarded unchanged (watches stream through), so every other answer is the
real API server's.

    proxy = FaultProxy(upstream="https://10.250.0.2:6443", upstream_ca=CA, cert=CRT, key=KEY)
    proxy.start()                 # listens on 127.0.0.1:proxy.port
    proxy.faults(error_rate=0.2, error_code=500, conflict_on_first_write=True, seed=7)
    ...
    proxy.injected, proxy.log     # how many faults; (method, path, code) of every request
    proxy.stop()

Faults: `error_rate` of requests (watches excepted) answered `error_code` with a metav1 Status (429s carry
Retry-After: `retry_after`); with `conflict_on_first_write`, the first PATCH/PUT to each object is answered 409
Conflict, as when another writer got there first.

Standard library only.
"""

import json
import random
import socket
import ssl
import threading
import urllib.parse

REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


class FaultProxy:
    def __init__(self, upstream, upstream_ca, cert, key):
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname, u.port or 443)
        self.up_ctx = ssl.create_default_context(cafile=upstream_ca)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.cfg = {}
        self.rng = random.Random(0)
        self.written = set()
        self.injected = 0
        self.log = []
        self.stopping = False
        self.conns = set()

    def faults(self, error_rate=0.0, error_code=500, retry_after=1, conflict_on_first_write=False, seed=0):
        with self.lock:
            self.cfg = {"rate": error_rate, "code": error_code, "retry": retry_after,
                        "conflict": conflict_on_first_write}
            self.rng = random.Random(seed)
            self.written = set()

    def start(self):
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()
        return self

    def stop(self):
        self.stopping = True
        self.sock.close()
        with self.lock:
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _accept(self):
        while not self.stopping:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _decide(self, method, path, query):
        """The fault for this request, or None to forward it."""
        with self.lock:
            if "watch=true" in query or "watch=1" in query:
                return None
            if self.cfg.get("conflict") and method in ("PATCH", "PUT") and path not in self.written:
                self.written.add(path)
                return 409
            if self.cfg.get("rate") and self.rng.random() < self.cfg["rate"]:
                return self.cfg["code"]
            return None

    def _serve(self, raw):
        with self.lock:
            self.conns.add(raw)
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        try:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = [line for line in lines[1:] if line]
                length = 0
                for h in headers:
                    k, _, v = h.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                while len(buf) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                body, buf = buf[:length], buf[length:]
                path, _, query = target.partition("?")
                code = self._decide(method, path, query)
                if code is not None:
                    with self.lock:
                        self.injected += 1
                        self.log.append((method, path, code))
                    self._answer(conn, code)
                    continue
                status = self._forward(conn, method, target, headers, body)
                with self.lock:
                    self.log.append((method, path, status))
                return  # the upstream answer carried Connection: close
        except (OSError, ssl.SSLError, ValueError):
            return
        finally:
            with self.lock:
                self.conns.discard(raw)
            try:
                conn.close()
            except OSError:
                pass

    def _answer(self, conn, code):
        reason = REASONS.get(code, "InternalError")
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                           "reason": reason, "message": "injected by the test's fault proxy"}).encode()
        extra = "Retry-After: %d\r\n" % self.cfg.get("retry", 1) if code == 429 else ""
        conn.sendall(("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                      % (code, reason, len(body), extra)).encode() + body)

    def _forward(self, conn, method, target, headers, body):
        up = self.up_ctx.wrap_socket(socket.create_connection(self.upstream, timeout=60),
                                     server_hostname=self.upstream[0])
        try:
            kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in ("connection", "host")]
            head = "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n%s\r\n" % (
                method, target, self.upstream[0], self.upstream[1], "".join(h + "\r\n" for h in kept))
            up.sendall(head.encode("latin-1") + body)
            up.settimeout(None)
            first = True
            status = 0
            while True:
                chunk = up.recv(65536)
                if not chunk:
                    return status
                if first:
                    first = False
                    try:
                        status = int(chunk.split(b" ", 2)[1])
                    except (IndexError, ValueError):
                        status = 0
                conn.sendall(chunk)
        finally:
            up.close()
