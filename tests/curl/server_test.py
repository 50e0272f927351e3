#!/usr/bin/env python3
"""The server at its edges, over real sockets: bad input of every kind, TLS settings, keep-alive,
certificate hot reload, graceful shutdown, and the offline `review` command.

  server_test.py BINARY SOURCE_DIR CERT_DIR
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webhook_process import Webhook, free_port  # noqa: E402

BINARY = SOURCE = CERT_DIR = None

POD_REVIEW = {
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
        "uid": "0b5a7f0e-1111-4a4a-9c9c-000000000001",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"generateName": "web-", "namespace": "default", "labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "app", "image": "nginx"}]}},
        "oldObject": None, "dryRun": False,
    },
}


def context(ca=None):
    ctx = ssl.create_default_context(cafile=ca or os.path.join(CERT_DIR, "ca.crt"))
    return ctx


def https(hook, ca=None):
    return http.client.HTTPSConnection("localhost", hook.port, context=context(ca), timeout=10)


def post(conn, path, body, content_type="application/json"):
    conn.request("POST", path, body=body, headers={"Content-Type": content_type})
    resp = conn.getresponse()
    return resp.status, resp.read()


def make_certs(directory, service="inplace-webhook"):
    env = dict(os.environ, FORCE="1")
    subprocess.run([os.path.join(SOURCE, "certs", "gen-dev-certs.sh"), directory, service], check=True,
                   env=env, capture_output=True)


def fingerprint_seen(hook, ca):
    """SHA-256 of the certificate the server presents now."""
    ctx = context(ca)
    with socket.create_connection(("127.0.0.1", hook.port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            import hashlib
            return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest()


class BadInput(unittest.TestCase):
    """Each bad request gets a clear error and the server keeps serving."""

    @classmethod
    def setUpClass(cls):
        cls.hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-bad-")).start()

    @classmethod
    def tearDownClass(cls):
        cls.hook.stop()

    def tearDown(self):
        self.assertTrue(self.hook.alive(), "server died")
        status, body = post(https(self.hook), "/mutate/pods", json.dumps(POD_REVIEW))
        self.assertEqual(status, 200, body)
        self.assertTrue(json.loads(body)["response"]["allowed"])

    def plain(self, status, body, code, fragment):
        self.assertEqual(status, code, body)
        doc = json.loads(body)
        self.assertEqual(doc["kind"], "Status")
        self.assertEqual(doc["code"], code)
        self.assertIn(fragment, doc["message"])

    def in_review(self, status, body, code, fragment):
        self.assertEqual(status, 200, body)
        resp = json.loads(body)["response"]
        self.assertFalse(resp["allowed"])
        self.assertEqual(resp["status"]["code"], code)
        self.assertIn(fragment, resp["status"]["message"])
        self.assertEqual(resp["uid"], POD_REVIEW["request"]["uid"])

    def test_empty_body(self):
        self.plain(*post(https(self.hook), "/mutate/pods", b""), 400, "empty")

    def test_not_json(self):
        self.plain(*post(https(self.hook), "/mutate/pods", b"hello"), 400, "not valid JSON")

    def test_truncated_json(self):
        self.plain(*post(https(self.hook), "/mutate/pods", json.dumps(POD_REVIEW)[:-20]), 400, "not valid JSON")

    def test_wrong_content_type(self):
        self.plain(*post(https(self.hook), "/mutate/pods", json.dumps(POD_REVIEW), "text/plain"), 415,
                   "expected application/json")

    def test_charset_parameter_is_accepted(self):
        status, body = post(https(self.hook), "/mutate/pods", json.dumps(POD_REVIEW),
                            "application/json; charset=utf-8")
        self.assertEqual(status, 200)

    def test_body_over_limit(self):
        big = b'{"request":"' + b"x" * (7 * 1024 * 1024 + 10) + b'"}'
        self.plain(*post(https(self.hook), "/mutate/pods", big), 413, "limit is 7340032 bytes")

    def test_json_not_a_review(self):
        self.plain(*post(https(self.hook), "/mutate/pods", b"[1,2,3]"), 400, "not an AdmissionReview")
        self.plain(*post(https(self.hook), "/mutate/pods", b'{"kind":"Pod","apiVersion":"v1"}'), 400,
                   "kind AdmissionReview")

    def test_unknown_version(self):
        doc = dict(POD_REVIEW, apiVersion="admission.k8s.io/v2")
        self.plain(*post(https(self.hook), "/mutate/pods", json.dumps(doc)), 400, "unsupported")

    def test_no_request(self):
        self.plain(*post(https(self.hook), "/mutate/pods", b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}'),
                   400, "no request")

    def test_no_uid(self):
        doc = json.loads(json.dumps(POD_REVIEW))
        del doc["request"]["uid"]
        self.plain(*post(https(self.hook), "/mutate/pods", json.dumps(doc)), 400, "no uid")

    def test_deep_nesting(self):
        self.plain(*post(https(self.hook), "/mutate/pods", b"[" * 200000), 400, "nested deeper")
        body = json.dumps(POD_REVIEW).replace('"labels": {"app": "web"}', '"labels": ' + "[" * 100000 + "]" * 100000)
        self.plain(*post(https(self.hook), "/mutate/pods", body), 400, "nested deeper")

    def test_wrong_field_types(self):
        for mutate in (lambda r: r["object"]["metadata"].__setitem__("labels", ["a", "b"]),
                       lambda r: r.__setitem__("operation", 7),
                       lambda r: r.__setitem__("object", "a string"),
                       lambda r: r.__setitem__("userInfo", []),
                       lambda r: r.__setitem__("kind", "Pod")):
            doc = json.loads(json.dumps(POD_REVIEW))
            doc["request"]["object"]["metadata"]["labels"]["inplace-webhook.io/enabled"] = "true"
            mutate(doc["request"])
            status, body = post(https(self.hook), "/mutate/pods", json.dumps(doc))
            self.in_review(status, body, 400, "")

    def test_invalid_utf8(self):
        body = json.dumps(POD_REVIEW).encode().replace(b'"web-"', b'"\xff\xfe"')
        self.plain(*post(https(self.hook), "/mutate/pods", body), 400, "not valid JSON")

    def test_wrong_method_and_path(self):
        conn = https(self.hook)
        conn.request("GET", "/mutate/pods")
        r = conn.getresponse()
        self.plain(r.status, r.read(), 405, "use POST")
        self.plain(*post(conn, "/mutate/nothing", json.dumps(POD_REVIEW)), 404, "no webhook at")

    def test_query_string_is_ignored_for_routing(self):
        status, body = post(https(self.hook), "/mutate/pods?timeout=10s", json.dumps(POD_REVIEW))
        self.assertEqual(status, 200)

    def test_plaintext_http_on_tls_port(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.hook.port, timeout=5)
        with self.assertRaises((ConnectionError, http.client.HTTPException, OSError)):
            post(conn, "/mutate/pods", json.dumps(POD_REVIEW))

    def test_garbage_on_tls_port(self):
        for junk in (b"\x16\x03\x01\x00\x05hello", os.urandom(4096), b"\x00" * 100):
            with socket.create_connection(("127.0.0.1", self.hook.port), timeout=5) as s:
                s.sendall(junk)
                s.settimeout(5)
                try:
                    s.recv(100)
                except OSError:
                    pass

    def test_hundreds_of_connections_opened_and_dropped(self):
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", self.hook.port), timeout=5)
            if i % 3 == 1:
                s.sendall(b"\x16\x03\x01")
            s.close()
        # Half-open TLS handshakes, dropped.
        for _ in range(50):
            raw = socket.create_connection(("127.0.0.1", self.hook.port), timeout=5)
            ctx = context()
            tls = ctx.wrap_socket(raw, server_hostname="localhost", do_handshake_on_connect=False)
            try:
                tls.do_handshake()
            except OSError:
                pass
            tls.close()

    def test_handler_errors_are_counted_not_fatal(self):
        # A review with an operation the handlers do not expect for the route still gets an answer.
        doc = json.loads(json.dumps(POD_REVIEW))
        doc["request"]["operation"] = "CONNECT"
        doc["request"]["object"] = None
        status, body = post(https(self.hook), "/mutate/pods", json.dumps(doc))
        self.assertEqual(status, 200)


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-tls-")).start()

    @classmethod
    def tearDownClass(cls):
        cls.hook.stop()

    def handshake(self, ctx):
        with socket.create_connection(("127.0.0.1", self.hook.port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.version(), tls.selected_alpn_protocol(), tls.cipher()

    def test_tls_1_1_refused(self):
        ctx = context()
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
        with self.assertRaises(ssl.SSLError):
            self.handshake(ctx)

    def test_tls_1_2_uses_aead_ciphers(self):
        ctx = context()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        version, _, cipher = self.handshake(ctx)
        self.assertEqual(version, "TLSv1.2")
        self.assertTrue("GCM" in cipher[0] or "CHACHA20" in cipher[0], cipher)
        ctx.set_ciphers("AES128-SHA")  # no forward secrecy, CBC
        with self.assertRaises(ssl.SSLError):
            self.handshake(ctx)

    def test_tls_1_3(self):
        self.assertEqual(self.handshake(context())[0], "TLSv1.3")

    def test_alpn_http11_only_client_connects(self):
        ctx = context()
        ctx.set_alpn_protocols(["http/1.1"])
        version, alpn, _ = self.handshake(ctx)
        self.assertIn(alpn, (None, "http/1.1"))
        ctx = context()
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        self.handshake(ctx)

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        conn = https(self.hook)
        for _ in range(50):
            status, _ = post(conn, "/mutate/pods", json.dumps(POD_REVIEW))
            self.assertEqual(status, 200)
        # Still open after an idle pause longer than cpp-httplib's 5 s default.
        time.sleep(6)
        status, _ = post(conn, "/validate/pods", json.dumps(POD_REVIEW))
        self.assertEqual(status, 200)

    def test_64_concurrent_keep_alive_connections_all_served(self):
        conns = [https(self.hook) for _ in range(64)]
        for c in conns:
            post(c, "/mutate/pods", json.dumps(POD_REVIEW))
        errors = []

        def work(c):
            try:
                for _ in range(5):
                    s, _ = post(c, "/mutate/pods", json.dumps(POD_REVIEW))
                    if s != 200:
                        errors.append(s)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(c,)) for c in conns]
        start = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errors, [])
        self.assertLess(time.time() - start, 20, "a connection starved")


class ClientCertificates(unittest.TestCase):
    def test_client_ca_required_and_verified(self):
        d = tempfile.mkdtemp()
        try:
            make_certs(d + "/client")
            hook = Webhook(BINARY, CERT_DIR, extra_args=["--client-ca-file", d + "/client/ca.crt"],
                           log_path=d + "/log")
            # Probe readiness works without client certs (plain HTTP).
            hook.start()
            try:
                with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                    post(https(hook), "/mutate/pods", json.dumps(POD_REVIEW))
                ctx = context()
                ctx.load_cert_chain(d + "/client/tls.crt", d + "/client/tls.key")
                conn = http.client.HTTPSConnection("localhost", hook.port, context=ctx, timeout=10)
                self.assertEqual(post(conn, "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
            finally:
                hook.stop()
        finally:
            shutil.rmtree(d)


class CertificateReload(unittest.TestCase):
    """Kubernetes Secret volumes swap a `..data` symlink; the server must follow without restart."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        # Two CA+cert generations, laid out as a Secret volume: tls.crt -> ..data/tls.crt.
        for gen in ("gen1", "gen2"):
            make_certs(os.path.join(self.dir, gen))
        os.symlink("gen1", os.path.join(self.dir, "..data"))
        for f in ("tls.crt", "tls.key"):
            os.symlink(os.path.join("..data", f), os.path.join(self.dir, f))
        self.hook = Webhook(BINARY, self.dir + "/gen1", log_path=self.dir + "/log",
                            extra_args=["--cert-check-interval-ms", "200"])
        self.hook.start(cert=self.dir + "/tls.crt", key=self.dir + "/tls.key")

    def tearDown(self):
        self.hook.stop()
        shutil.rmtree(self.dir)

    def swap(self, target):
        tmp = os.path.join(self.dir, "..data_tmp")
        os.symlink(target, tmp)
        os.rename(tmp, os.path.join(self.dir, "..data"))

    def wait_for(self, predicate, seconds=5):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        return False

    def test_symlink_swap_reloads_and_bad_pair_is_refused(self):
        gen1_ca, gen2_ca = self.dir + "/gen1/ca.crt", self.dir + "/gen2/ca.crt"
        first = fingerprint_seen(self.hook, gen1_ca)
        self.swap("gen2")
        self.assertTrue(self.wait_for(lambda: self.hook.metric("inplace_webhook_certificate_reloads_total") == 1))
        second = fingerprint_seen(self.hook, gen2_ca)
        self.assertNotEqual(first, second)
        # Keep-alive clients and new ones keep working with the new chain.
        self.assertEqual(post(https(self.hook, gen2_ca), "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)

        # A generation whose key does not match the certificate is refused; gen2 keeps serving.
        bad = os.path.join(self.dir, "bad")
        os.mkdir(bad)
        shutil.copy(self.dir + "/gen1/tls.crt", bad + "/tls.crt")
        shutil.copy(self.dir + "/gen2/tls.key", bad + "/tls.key")
        self.swap("bad")
        self.assertTrue(self.wait_for(
            lambda: self.hook.metric("inplace_webhook_certificate_reload_errors_total") >= 1))
        self.assertEqual(fingerprint_seen(self.hook, gen2_ca), second)

        # Garbage files are refused the same way.
        garbage = os.path.join(self.dir, "garbage")
        os.mkdir(garbage)
        open(garbage + "/tls.crt", "w").write("not a certificate")
        open(garbage + "/tls.key", "w").write("not a key")
        self.swap("garbage")
        self.assertTrue(self.wait_for(
            lambda: self.hook.metric("inplace_webhook_certificate_reload_errors_total") >= 2))
        self.assertEqual(fingerprint_seen(self.hook, gen2_ca), second)

        # Back to a good pair: served again.
        self.swap("gen1")
        self.assertTrue(self.wait_for(lambda: self.hook.metric("inplace_webhook_certificate_reloads_total") == 2))
        self.assertEqual(fingerprint_seen(self.hook, gen1_ca), first)


class Shutdown(unittest.TestCase):
    def test_sigterm_finishes_in_flight_and_exits_zero(self):
        hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-stop-")).start()
        idle = https(hook)
        self.assertEqual(post(idle, "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
        # A review half sent when SIGTERM comes.
        body = json.dumps(POD_REVIEW).encode()
        busy = tls_socket(hook)
        busy.sendall(post_head("/mutate/pods", len(body)) + body[:100])
        time.sleep(0.2)
        hook.proc.send_signal(15)
        # The idle keep-alive connection is closed at once...
        idle.sock.settimeout(5)
        self.assertEqual(idle.sock.recv(1), b"")
        # ...the half-sent review is still answered, with Connection: close...
        busy.sendall(body[100:])
        head, answer = read_response(busy)
        self.assertIn(b"HTTP/1.1 200", head)
        self.assertIn(b"Connection: close", head)
        self.assertTrue(json.loads(answer)["response"]["allowed"])
        # ...and the process exits 0 with its port closed.
        self.assertEqual(hook.proc.wait(timeout=15), 0)
        self.assertEqual(hook.stop(), 0)
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", hook.port), timeout=2).close()

    def test_shutdown_grace_bounds_the_wait_for_requests_under_way(self):
        # --shutdown-delay-seconds 1 --shutdown-grace-seconds 2: a review finished 1.5 s after
        # SIGTERM is answered; one never finished is cut when the grace ends, and the process
        # exits by delay + grace, long before the 10 s read timeout would have ended it.
        hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-stop-"),
                       extra_args=["--shutdown-delay-seconds", "1", "--shutdown-grace-seconds", "2"]).start()
        body = json.dumps(POD_REVIEW).encode()
        late, stuck = tls_socket(hook), tls_socket(hook)
        for s in (late, stuck):
            s.sendall(post_head("/mutate/pods", len(body)) + body[:100])
        time.sleep(0.2)
        start = time.monotonic()
        hook.proc.send_signal(15)
        time.sleep(1.5)
        late.sendall(body[100:])
        head, answer = read_response(late)
        self.assertIn(b"HTTP/1.1 200", head)
        self.assertTrue(json.loads(answer)["response"]["allowed"])
        self.assertEqual(hook.proc.wait(timeout=15), 0)
        elapsed = time.monotonic() - start
        self.assertGreaterEqual(elapsed, 2.5, "exited before the grace was over")
        self.assertLess(elapsed, 3.5, "exited after more than delay + grace")
        stuck.settimeout(1)
        try:
            self.assertEqual(stuck.recv(1), b"")
        except (ConnectionResetError, ssl.SSLError):
            pass
        hook.stop()

    def test_readyz_fails_during_shutdown_delay(self):
        hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-stop-"),
                       extra_args=["--shutdown-delay-seconds", "3"]).start()
        readyz = f"http://127.0.0.1:{hook.probe_port}/readyz"
        self.assertEqual(urllib.request.urlopen(readyz, timeout=5).status, 200)
        start = time.time()
        hook.proc.send_signal(15)
        deadline = time.time() + 2
        status = 200
        while status == 200 and time.time() < deadline:
            try:
                status = urllib.request.urlopen(readyz, timeout=5).status
            except urllib.error.HTTPError as e:
                status = e.code
        self.assertEqual(status, 503)
        # Still serving reviews while endpoints notice.
        self.assertEqual(post(https(hook), "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
        self.assertEqual(hook.proc.wait(timeout=15), 0)
        self.assertGreaterEqual(time.time() - start, 2.5)
        hook.stop()


def tls_socket(hook, timeout=10):
    raw = socket.create_connection(("127.0.0.1", hook.port), timeout=timeout)
    return context().wrap_socket(raw, server_hostname="localhost")


def post_head(path, length, extra=b""):
    """The request line and headers of a JSON POST of `length` bytes, as a client sends them."""
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n"
            % (path.encode(), extra, length))


def read_response(sock):
    """Reads one HTTP response with a Content-Length body: (head bytes, body bytes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head: %r" % data)
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the response body")
        rest += chunk
    return head, rest[:length]


class Http(unittest.TestCase):
    """HTTP/1.1 framing over TLS as clients other than the API server use it."""

    @classmethod
    def setUpClass(cls):
        cls.hook = Webhook(BINARY, CERT_DIR, log_path=tempfile.mktemp(prefix="iw-http-"),
                           extra_args=["--max-connections", "3", "--read-timeout-seconds", "1"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.hook.stop()

    def test_expect_100_continue(self):
        body = json.dumps(POD_REVIEW).encode()
        s = tls_socket(self.hook)
        s.sendall(post_head("/mutate/pods", len(body), b"Expect: 100-continue\r\n"))
        interim = b""
        while b"\r\n\r\n" not in interim:
            chunk = s.recv(1)
            self.assertNotEqual(chunk, b"", "closed instead of 100 Continue")
            interim += chunk
        self.assertEqual(interim, b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        head, answer = read_response(s)
        self.assertIn(b"HTTP/1.1 200", head)
        self.assertTrue(json.loads(answer)["response"]["allowed"])
        s.close()

    def test_chunked_body(self):
        body = json.dumps(POD_REVIEW).encode()
        conn = https(self.hook)
        conn.request("POST", "/mutate/pods", body=iter([body[:700], body[700:]]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(json.loads(resp.read())["response"]["uid"], POD_REVIEW["request"]["uid"])
        conn.close()

    def test_pipelined_reviews_answered_in_order(self):
        s = tls_socket(self.hook)
        wire = b""
        uids = []
        for i in range(3):
            doc = json.loads(json.dumps(POD_REVIEW))
            doc["request"]["uid"] = "pipelined-%d" % i
            uids.append(doc["request"]["uid"])
            body = json.dumps(doc).encode()
            wire += post_head("/validate/pods", len(body)) + body
        s.sendall(wire)
        got = [json.loads(read_response(s)[1])["response"]["uid"] for _ in uids]
        self.assertEqual(got, uids)
        s.close()

    def test_malformed_request_line_and_headers(self):
        for bad, code in ((b"POST /mutate/pods HTTP/9.9\r\n\r\n", b"505"),
                          (b"POST /mutate/pods HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"400"),
                          (b"POST /mutate/pods HTTP/1.1\r\nBad Header: x\r\n\r\n", b"400"),
                          (b"POST /mutate/pods HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", b"501"),
                          (b"POST /mutate/pods HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", b"431")):
            s = tls_socket(self.hook)
            s.sendall(bad)
            head, answer = read_response(s)
            self.assertTrue(head.startswith(b"HTTP/1.1 " + code), (bad[:60], head))
            self.assertIn(b"Connection: close", head)
            self.assertEqual(json.loads(answer)["kind"], "Status")
            s.settimeout(5)
            self.assertEqual(s.recv(1), b"")  # closed after the answer
            s.close()

    def test_slow_request_is_cut_at_the_read_timeout(self):
        s = tls_socket(self.hook)
        s.sendall(b"POST /mutate/pods HTTP/1.1\r\nHost: x\r\n")
        s.settimeout(10)
        start = time.time()
        try:
            self.assertEqual(s.recv(1), b"")
        except ConnectionResetError:
            pass
        self.assertLess(time.time() - start, 5)
        s.close()

    def wait_for_open_connections(self, n):
        deadline = time.time() + 5
        while self.hook.metric("inplace_webhook_open_connections") != n and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.hook.metric("inplace_webhook_open_connections"), n)

    def test_at_the_limit_the_longest_idle_connection_makes_room(self):
        # --max-connections 3: three idle keep-alive connections; a fourth is served at once and
        # the one idle longest is closed for it.
        self.wait_for_open_connections(0)
        held = [https(self.hook) for _ in range(3)]
        for c in held:
            self.assertEqual(post(c, "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
        self.assertEqual(self.hook.metric("inplace_webhook_open_connections"), 3)
        before = self.hook.metric('inplace_webhook_connections_closed_total{port="webhook",reason="evicted_idle"}')
        fourth = https(self.hook)
        self.assertEqual(post(fourth, "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
        held[0].sock.settimeout(5)
        try:
            self.assertEqual(held[0].sock.recv(1), b"")
        except ConnectionResetError:
            pass
        self.assertEqual(self.hook.metric(
            'inplace_webhook_connections_closed_total{port="webhook",reason="evicted_idle"}'), before + 1)
        for c in held[1:]:  # the others are still served
            self.assertEqual(post(c, "/mutate/pods", json.dumps(POD_REVIEW))[0], 200)
        for c in held + [fourth]:
            c.close()
        self.wait_for_open_connections(0)

    def test_at_the_limit_with_every_connection_busy_a_new_one_waits(self):
        # Three reviews half sent: none may be closed, so a fourth waits in the backlog (its TLS
        # handshake does not complete) until one of them is answered.
        self.wait_for_open_connections(0)
        body = json.dumps(POD_REVIEW).encode()
        busy = [tls_socket(self.hook) for _ in range(3)]
        for s in busy:
            s.sendall(post_head("/mutate/pods", len(body)) + body[:50])
        self.wait_for_open_connections(3)
        done = threading.Event()

        def fourth():
            conn = https(self.hook)
            if post(conn, "/mutate/pods", json.dumps(POD_REVIEW))[0] == 200:
                done.set()
            conn.close()
        t = threading.Thread(target=fourth)
        t.start()
        self.assertFalse(done.wait(0.7), "a fourth connection was served while three were busy")
        busy[0].sendall(body[50:])
        self.assertIn(b"HTTP/1.1 200", read_response(busy[0])[0])
        self.assertTrue(done.wait(10), "the waiting connection was not served once one was idle")
        t.join()
        for s in busy:
            s.close()
        self.wait_for_open_connections(0)


class Cli(unittest.TestCase):
    def run_review(self, path, body):
        return subprocess.run([BINARY, "review", "--path", path], input=body, capture_output=True, timeout=30)

    def test_review_allowed(self):
        out = self.run_review("/mutate/pods", json.dumps(POD_REVIEW).encode())
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(json.loads(out.stdout)["response"]["allowed"])

    def test_review_invalid(self):
        out = self.run_review("/mutate/pods", b"{")
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"not valid JSON", out.stderr)

    def test_review_unknown_path(self):
        self.assertEqual(self.run_review("/nope", b"{}").returncode, 2)

    def test_help_and_bad_flags(self):
        out = subprocess.run([BINARY, "serve", "--help"], capture_output=True)
        self.assertEqual(out.returncode, 0)
        for flag in (b"--tls-cert-file", b"--probe-port", b"--max-request-bytes", b"--client-ca-file",
                     b"--log-format", b"--controller-user", b"--idle-timeout-seconds"):
            self.assertIn(flag, out.stdout)
        self.assertEqual(subprocess.run([BINARY, "serve", "--port", "x"], capture_output=True).returncode, 2)
        self.assertEqual(subprocess.run([BINARY, "nonsense"], capture_output=True).returncode, 2)
        bad = subprocess.run([BINARY, "serve", "--tls-cert-file", "/nonexistent", "--tls-private-key-file",
                              "/nonexistent", "--port", str(free_port()), "--probe-port", "-1"],
                             capture_output=True, timeout=10)
        self.assertEqual(bad.returncode, 1)
        self.assertIn(b"certificate file: cannot read /nonexistent: No such file or directory", bad.stderr)


if __name__ == "__main__":
    BINARY, SOURCE, CERT_DIR = sys.argv[1:4]
    sys.argv = sys.argv[:1] + sys.argv[4:]
    unittest.main(verbosity=2)
