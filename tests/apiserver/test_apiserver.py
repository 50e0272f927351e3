#!/usr/bin/env python3
"""Tests of the test API server (tests/apiserver/server.py), black box over HTTP, plus unit tests
of its strategic-merge-patch implementation. Run: python3 tests/apiserver/test_apiserver.py"""

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

import kpatch  # noqa: E402
from kerrors import ApiError  # noqa: E402

SERVER = os.path.join(HERE, "server.py")


class ApiServer:
    """The server in a subprocess on a free port."""

    def __init__(self, *extra):
        self.dir = tempfile.mkdtemp(prefix="iw-apiserver-test-")
        self.port_file = os.path.join(self.dir, "port")
        self.log_file = os.path.join(self.dir, "server.log")
        args = [sys.executable, SERVER, "--port", "0", "--port-file", self.port_file, "--log-file", self.log_file,
                "--bookmark-interval-ms", "200"]
        self.proc = subprocess.Popen(args + list(extra))
        deadline = time.time() + 10
        while not os.path.exists(self.port_file):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("test API server did not start")
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())

    def stop(self):
        """Stops the server; returns the log lines that report internal errors."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        try:
            with open(self.log_file) as f:
                log = f.read()
        except OSError:
            log = ""
        shutil.rmtree(self.dir, ignore_errors=True)
        return [line for line in log.splitlines() if "Traceback" in line or "internal error" in line or
                " failed:" in line]


class Client:
    def __init__(self, port, token=None, tls_context=None):
        self.port = port
        self.token = token
        self.tls = tls_context
        self.conn = None

    def _connect(self):
        if self.tls is not None:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30, context=self.tls)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method, path, body=None, ctype="application/json", headers=None):
        if self.conn is None:
            self.conn = self._connect()
        h = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            if ctype:
                h["Content-Type"] = ctype
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        h.setdefault("User-Agent", "iw-apiserver-test")
        try:
            self.conn.request(method, path, body=data, headers=h)
            resp = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = self._connect()
            self.conn.request(method, path, body=data, headers=h)
            resp = self.conn.getresponse()
        raw = resp.read()
        ct = resp.getheader("Content-Type") or ""
        obj = json.loads(raw) if raw and ct.startswith("application/json") else raw
        return resp.status, obj, resp

    def get(self, path):
        return self.request("GET", path)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def post(self, path, body, ctype="application/json"):
        return self.request("POST", path, body, ctype)

    def put(self, path, body):
        return self.request("PUT", path, body)

    def patch(self, path, body, ctype="application/merge-patch+json"):
        return self.request("PATCH", path, body, ctype)

    def delete(self, path, body=None):
        return self.request("DELETE", path, body)

    def ok(self, method, path, body=None, ctype=None):
        if ctype is None:
            ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        code, obj, _ = self.request(method, path, body, ctype)
        if code >= 300:
            raise AssertionError("%s %s -> %d %s" % (method, path, code, obj))
        return obj


class Watch:
    """A watch stream read by a background thread into a list of events."""

    def __init__(self, port, path, token=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path
        if token:
            req += "Authorization: Bearer %s\r\n" % token
        self.sock.sendall((req + "\r\n").encode())
        self.events = []
        self.status = None
        self.headers = {}
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.raw_chunks = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        f = self.sock.makefile("rb")
        try:
            line = f.readline()
            self.status = int(line.split()[1])
            while True:
                h = f.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, v = h.decode().split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
            buf = b""
            while True:
                size_line = f.readline()
                if not size_line:
                    break
                size = int(size_line.strip(), 16)
                if size == 0:
                    break
                chunk = f.read(size)
                f.readline()
                self.raw_chunks += 1
                buf += chunk
                while b"\n" in buf:
                    one, buf = buf.split(b"\n", 1)
                    if one.strip():
                        with self.lock:
                            self.events.append(json.loads(one))
        except (OSError, ValueError):
            pass
        finally:
            self.done.set()

    def wait_for(self, pred, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                for ev in self.events:
                    if pred(ev):
                        return ev
            if self.done.is_set():
                with self.lock:
                    for ev in self.events:
                        if pred(ev):
                            return ev
                return None
            time.sleep(0.01)
        return None

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def wait_until(fn, timeout=10.0, interval=0.02, msg="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last: %r)" % (msg, last))


def pod(name, image="nginx:1.25", labels=None, **spec):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": "x"}},
            "spec": {"containers": [{"name": "app", "image": image}]}}
    body["spec"].update(spec)
    return body


def deployment(name, replicas=3, image="nginx:1.25", paused=False, max_surge=1, max_unavailable=1, labels=None):
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "paused": paused, "selector": {"matchLabels": dict(labels)},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


SRV = None
_ns_counter = [0]


def setUpModule():
    global SRV
    SRV = ApiServer()


def tearDownModule():
    errors = SRV.stop()
    if errors:
        raise AssertionError("the server logged internal errors:\n" + "\n".join(errors))


class Base(unittest.TestCase):
    def setUp(self):
        _ns_counter[0] += 1
        self.ns = "t%d-%s" % (_ns_counter[0], self._testMethodName.replace("_", "-")[5:30].strip("-").lower())
        self.c = Client(SRV.port)

    def tearDown(self):
        self.c.ok("DELETE", "/_test/faults")
        self.c.ok("POST", "/_test/sim", {"kubelet": True, "replicaSetController": True, "deploymentController": True,
                                         "restartDelayMs": 100, "notReadyMs": 100, "startupDelayMs": 50})
        self.c.close()

    def pods_path(self, name=None):
        return "/api/v1/namespaces/%s/pods%s" % (self.ns, "/" + name if name else "")

    def deploy_path(self, name=None):
        return "/apis/apps/v1/namespaces/%s/deployments%s" % (self.ns, "/" + name if name else "")

    def rs_path(self, name=None):
        return "/apis/apps/v1/namespaces/%s/replicasets%s" % (self.ns, "/" + name if name else "")

    def sim(self, **settings):
        self.c.ok("POST", "/_test/sim", settings)

    def idle(self):
        self.c.ok("GET", "/_test/idle?timeoutMs=10000")

    def list_pods(self, selector=None):
        path = self.pods_path() + ("?labelSelector=" + selector if selector else "")
        return self.c.ok("GET", path)["items"]


# ----------------------------------------------------------------------------------------------
# REST semantics

class RestTest(Base):
    def test_resource_version_is_global_and_monotonic(self):
        rvs = []
        for i in range(3):
            rvs.append(int(self.c.ok("POST", self.pods_path(), pod("p%d" % i))["metadata"]["resourceVersion"]))
            lease = {"metadata": {"name": "l%d" % i}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
            rvs.append(int(self.c.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % self.ns,
                                     lease)["metadata"]["resourceVersion"]))
        p = self.c.ok("PATCH", self.pods_path("p0"), {"metadata": {"labels": {"x": "y"}}},
                      "application/merge-patch+json")
        rvs.append(int(p["metadata"]["resourceVersion"]))
        self.assertEqual(rvs, sorted(rvs))
        self.assertEqual(len(set(rvs)), len(rvs))
        lst = self.c.ok("GET", self.pods_path())
        self.assertGreaterEqual(int(lst["metadata"]["resourceVersion"]), rvs[-1])
        self.assertIsInstance(lst["metadata"]["resourceVersion"], str)

    def test_create_sets_system_fields_and_generate_name(self):
        p = self.c.ok("POST", self.pods_path(), {"metadata": {"generateName": "web-"}, "spec": {
            "containers": [{"name": "app", "image": "nginx"}]}})
        m = p["metadata"]
        self.assertTrue(m["name"].startswith("web-") and len(m["name"]) == len("web-") + 5)
        self.assertTrue(m["uid"] and m["creationTimestamp"].endswith("Z"))
        self.assertEqual(m["namespace"], self.ns)
        self.assertEqual(p["kind"], "Pod")
        self.assertEqual(p["status"]["phase"], "Pending")
        c = p["spec"]["containers"][0]
        self.assertEqual(c["imagePullPolicy"], "Always")  # untagged image defaults to Always
        self.assertEqual(c["terminationMessagePath"], "/dev/termination-log")
        d = self.c.ok("POST", self.deploy_path(), deployment("d"))
        self.assertEqual(d["metadata"]["generation"], 1)
        self.assertEqual(d["spec"]["revisionHistoryLimit"], 10)
        code, body, _ = self.c.post(self.pods_path(), pod(m["name"]))
        self.assertEqual(code, 409)
        self.assertEqual(body["reason"], "AlreadyExists")
        self.assertEqual(body["message"], 'pods "%s" already exists' % m["name"])
        code, body, _ = self.c.post(self.pods_path(), dict(pod("rv"), metadata={"name": "rv",
                                                                                "resourceVersion": "5"}))
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))

    def test_not_found_status_body(self):
        code, body, resp = self.c.get(self.pods_path("x"))
        self.assertEqual(code, 404)
        self.assertEqual(resp.getheader("Content-Type"), "application/json")
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": 'pods "x" not found', "reason": "NotFound",
                                "details": {"name": "x", "kind": "pods"}, "code": 404})
        code, body, _ = self.c.get(self.deploy_path("y"))
        self.assertEqual(body["message"], 'deployments.apps "y" not found')
        self.assertEqual(body["details"], {"name": "y", "group": "apps", "kind": "deployments"})
        code, body, _ = self.c.get("/api/v1/namespaces/%s/widgets" % self.ns)
        self.assertEqual((code, body["reason"]), (404, "NotFound"))

    def test_stale_update_and_stale_patch_conflict(self):
        self.sim(kubelet=False)
        p1 = self.c.ok("POST", self.pods_path(), pod("p"))
        p2 = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"labels": {"v": "2"}}},
                       "application/merge-patch+json")
        stale = dict(p1)
        stale["metadata"] = dict(p1["metadata"], labels={"v": "3"})
        code, body, _ = self.c.put(self.pods_path("p"), stale)
        self.assertEqual(code, 409)
        self.assertEqual(body["reason"], "Conflict")
        self.assertEqual(body["message"], 'Operation cannot be fulfilled on pods "p": the object has been modified; '
                                          'please apply your changes to the latest version and try again')
        self.assertEqual(body["details"], {"name": "p", "kind": "pods"})
        for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            code, body, _ = self.c.patch(self.pods_path("p"), {"metadata": {
                "resourceVersion": p1["metadata"]["resourceVersion"], "labels": {"v": "4"}}}, ctype)
            self.assertEqual((code, body["reason"]), (409, "Conflict"), ctype)
        code, body, _ = self.c.patch(self.pods_path("p"), [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": p1["metadata"]["resourceVersion"]},
            {"op": "add", "path": "/metadata/labels/v", "value": "5"}], "application/json-patch+json")
        self.assertEqual(code, 409)
        # Current RV passes; no RV at all is an unconditional update.
        cur = dict(p2)
        cur["metadata"] = dict(p2["metadata"], labels={"v": "6"})
        self.assertEqual(self.c.put(self.pods_path("p"), cur)[0], 200)
        cur["metadata"] = dict(cur["metadata"], labels={"v": "7"})
        del cur["metadata"]["resourceVersion"]
        code, body, _ = self.c.put(self.pods_path("p"), cur)
        self.assertEqual((code, body["metadata"]["labels"]), (200, {"v": "7"}))

    def test_noop_update_keeps_resource_version(self):
        self.sim(kubelet=False)
        p = self.c.ok("POST", self.pods_path(), pod("p"))
        again = self.c.ok("PUT", self.pods_path("p"), p)
        self.assertEqual(again["metadata"]["resourceVersion"], p["metadata"]["resourceVersion"])

    def test_invalid_object_answers_422_with_causes(self):
        bad = pod("p", labels={"app": "x" * 64, "bad key!": "v"})
        code, body, _ = self.c.post(self.pods_path(), bad)
        self.assertEqual(code, 422)
        self.assertEqual(body["reason"], "Invalid")
        self.assertTrue(body["message"].startswith('Pod "p" is invalid: ['), body["message"])
        self.assertIn("must be no more than 63 characters", body["message"])
        self.assertEqual(body["details"]["kind"], "Pod")
        fields = {c["field"] for c in body["details"]["causes"]}
        self.assertEqual(fields, {"metadata.labels"})
        self.assertTrue(all(c["reason"] == "FieldValueInvalid" for c in body["details"]["causes"]))
        code, body, _ = self.c.post(self.pods_path(), {"metadata": {"name": "n"}, "spec": {"containers": []}})
        self.assertEqual(code, 422)
        self.assertEqual(body["message"], 'Pod "n" is invalid: spec.containers: Required value')
        code, body, _ = self.c.post(self.pods_path(), pod("p", annotations=None) | {
            "metadata": {"name": "q", "annotations": {"a/b/c": "x"}}})
        self.assertEqual(code, 422)

    def test_deployment_validation(self):
        d = deployment("d", labels={"app": "d"})
        d["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
        code, body, _ = self.c.post(self.deploy_path(), d)
        self.assertEqual(code, 422)
        self.assertIn("spec.template.metadata.labels: Invalid value", body["message"])
        self.assertIn("`selector` does not match template `labels`", body["message"])
        self.assertTrue(body["message"].startswith('Deployment.apps "d" is invalid'))
        self.assertEqual(body["details"]["group"], "apps")
        d = deployment("d", max_surge=0, max_unavailable=0)
        code, body, _ = self.c.post(self.deploy_path(), d)
        self.assertEqual(code, 422)
        self.assertIn("may not be 0 when `maxSurge` is 0", body["message"])
        self.sim(deploymentController=False)
        self.c.ok("POST", self.deploy_path(), deployment("ok"))
        code, body, _ = self.c.patch(self.deploy_path("ok"), {"spec": {"selector": {"matchLabels": {
            "app": "ok", "x": "y"}}, "template": {"metadata": {"labels": {"x": "y"}}}}})
        self.assertEqual(code, 422)
        self.assertIn("spec.selector: Invalid value", body["message"])
        self.assertIn("field is immutable", body["message"])
        rs = {"metadata": {"name": "rs"}, "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
                                                   "template": {"metadata": {"labels": {"a": "c"}}, "spec": {
                                                       "containers": [{"name": "c", "image": "i"}]}}}}
        code, body, _ = self.c.post(self.rs_path(), rs)
        self.assertEqual(code, 422)
        self.assertIn("`selector` does not match template `labels`", body["message"])
        # ValidateReplicaSetSpec words an empty selector as the Deployment's; ValidateOwnerReferences
        # (apimachinery v0.37): per-index paths, Required "must not be empty", one controller.
        rs["spec"]["selector"] = {}
        code, body, _ = self.c.post(self.rs_path(), rs)
        self.assertEqual(code, 422)
        self.assertIn("spec.selector: Invalid value", body["message"])
        self.assertIn("empty selector is invalid for deployment", body["message"])
        rs["spec"]["selector"] = {"matchLabels": {"a": "c"}}
        owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a", "uid": "u1", "controller": True}
        rs["metadata"]["ownerReferences"] = [owner, dict(owner, name="b", uid="u2")]
        code, body, _ = self.c.post(self.rs_path(), rs)
        self.assertEqual(code, 422)
        self.assertIn('Only one reference can have Controller set to true. Found "true" in references for '
                      'Deployment/a and Deployment/b', body["message"])
        rs["metadata"]["ownerReferences"] = [dict(owner, uid=""), dict(owner, apiVersion="a/b/c", controller=False)]
        code, body, _ = self.c.post(self.rs_path(), rs)
        self.assertEqual(code, 422)
        causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
        self.assertEqual(causes, {("metadata.ownerReferences[0].uid", "FieldValueRequired"),
                                  ("metadata.ownerReferences[1].apiVersion", "FieldValueInvalid")}, body["message"])
        self.assertIn("metadata.ownerReferences[0].uid: Required value: must not be empty", body["message"])
        self.assertIn("must be <group>/<version> or <version>", body["message"])
        rs["metadata"]["ownerReferences"] = [owner]
        self.assertEqual(self.c.post(self.rs_path(), rs)[0], 201)

    def test_unsupported_media_type(self):
        self.c.ok("POST", self.pods_path(), pod("p"))
        code, body, _ = self.c.patch(self.pods_path("p"), {"metadata": {}}, "text/plain")
        self.assertEqual(code, 415)
        self.assertEqual(body["reason"], "UnsupportedMediaType")
        self.assertEqual(body["kind"], "Status")
        self.assertTrue(body["message"].startswith("the body of the request was in an unknown format"))
        code, body, _ = self.c.patch(self.pods_path("p"), {"metadata": {}}, "application/json")
        self.assertEqual(code, 415)
        code, body, _ = self.c.post(self.pods_path(), pod("q"), "text/plain")
        self.assertEqual(code, 415)

    def test_merge_patch_and_null_removal(self):
        self.c.ok("POST", self.pods_path(), pod("p", labels={"a": "1", "b": "2"}))
        p = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"labels": {"a": None, "c": "3"}}},
                      "application/merge-patch+json")
        self.assertEqual(p["metadata"]["labels"], {"b": "2", "c": "3"})

    def test_json_patch_including_test_op(self):
        self.c.ok("POST", self.pods_path(), pod("p", labels={"a": "1"}))
        ok = [{"op": "test", "path": "/metadata/labels/a", "value": "1"},
              {"op": "add", "path": "/metadata/labels/inplace-webhook.io~1state", "value": "Updating"},
              {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"}]
        p = self.c.ok("PATCH", self.pods_path("p"), ok, "application/json-patch+json")
        self.assertEqual(p["metadata"]["labels"]["inplace-webhook.io/state"], "Updating")
        self.assertEqual(p["spec"]["containers"][0]["image"], "nginx:1.27")
        failing = [{"op": "test", "path": "/metadata/labels/a", "value": "2"},
                   {"op": "add", "path": "/metadata/labels/b", "value": "x"}]
        code, body, _ = self.c.patch(self.pods_path("p"), failing, "application/json-patch+json")
        self.assertEqual((code, body["reason"]), (422, "Invalid"))
        self.assertNotIn("b", self.c.ok("GET", self.pods_path("p"))["metadata"]["labels"])
        code, body, _ = self.c.patch(self.pods_path("p"), [{"op": "remove", "path": "/metadata/labels/nope"}],
                                     "application/json-patch+json")
        self.assertEqual(code, 422)
        code, body, _ = self.c.patch(self.pods_path("p"), "{not json", "application/json-patch+json")
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))

    def test_strategic_merge_patch(self):
        self.sim(kubelet=False)
        body = pod("p")
        body["spec"]["containers"] = [
            {"name": "app", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "busybox:1.36"}]
        self.c.ok("POST", self.pods_path(), body)
        p = self.c.ok("PATCH", self.pods_path("p"), {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}},
                      "application/strategic-merge-patch+json")
        self.assertEqual([(c["name"], c["image"]) for c in p["spec"]["containers"]],
                         [("app", "nginx:1.25"), ("side", "busybox:2")])
        self.assertEqual(p["spec"]["containers"][0]["env"], [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        # Conditions merge by type through pods/status; labels: null removes.
        st = self.c.ok("PATCH", self.pods_path("p") + "/status", {"status": {"conditions": [
            {"type": "inplace-webhook.io/ready", "status": "False"}]}}, "application/strategic-merge-patch+json")
        st = self.c.ok("PATCH", self.pods_path("p") + "/status", {"status": {"conditions": [
            {"type": "Custom", "status": "True"}]}}, "application/strategic-merge-patch+json")
        self.assertEqual({c["type"] for c in st["status"]["conditions"]}, {"inplace-webhook.io/ready", "Custom"})
        p = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"labels": {"app": None}, "finalizers": ["a.io/f"]}},
                      "application/strategic-merge-patch+json")
        self.assertNotIn("app", p["metadata"].get("labels") or {})
        p = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"finalizers": ["b.io/f"]}},
                      "application/strategic-merge-patch+json")
        self.assertEqual(p["metadata"]["finalizers"], ["a.io/f", "b.io/f"])
        p = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/f"]}},
                      "application/strategic-merge-patch+json")
        self.assertEqual(p["metadata"]["finalizers"], ["b.io/f"])
        self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"finalizers": None}},
                  "application/strategic-merge-patch+json")
        # $patch: delete of a list element (a Deployment template's env var) and $patch: replace.
        self.sim(deploymentController=False)
        d = deployment("d")
        d["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"},
                                                                 {"name": "B", "value": "2"}]
        self.c.ok("POST", self.deploy_path(), d)
        d = self.c.ok("PATCH", self.deploy_path("d"), {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "env": [{"name": "A", "$patch": "delete"}]}]}}}}, "application/strategic-merge-patch+json")
        self.assertEqual(d["spec"]["template"]["spec"]["containers"][0]["env"], [{"name": "B", "value": "2"}])
        d = self.c.ok("PATCH", self.deploy_path("d"), {"spec": {"template": {"metadata": {"labels": {
            "$patch": "replace", "app": "d", "new": "x"}}}}}, "application/strategic-merge-patch+json")
        self.assertEqual(d["spec"]["template"]["metadata"]["labels"], {"app": "d", "new": "x"})
        code, body, _ = self.c.patch(self.deploy_path("d"), {"spec": {"template": {"spec": {"containers": [
            {"image": "no-name"}]}}}}, "application/strategic-merge-patch+json")
        self.assertEqual(code, 500)
        self.assertIn("does not contain declared merge key: name", body["message"])

    def test_status_subresource(self):
        self.sim(kubelet=False)
        p = self.c.ok("POST", self.pods_path(), pod("p"))
        # The main resource ignores status.
        p["status"] = {"phase": "Failed"}
        p = self.c.ok("PUT", self.pods_path("p"), p)
        self.assertEqual(p["status"]["phase"], "Pending")
        # pods/status changes status only (spec changes are dropped, labels are allowed).
        p["status"] = dict(p["status"], phase="Running", conditions=[{"type": "Ready", "status": "True"}])
        p["spec"]["containers"][0]["image"] = "other:1"
        p["metadata"]["labels"] = {"via": "status"}
        s = self.c.ok("PUT", self.pods_path("p") + "/status", p)
        self.assertEqual(s["status"]["phase"], "Running")
        self.assertEqual(s["spec"]["containers"][0]["image"], "nginx:1.25")
        self.assertEqual(s["metadata"]["labels"], {"via": "status"})
        self.assertEqual(s["metadata"]["generation"], 1)
        s = self.c.ok("PATCH", self.pods_path("p") + "/status", {"status": {"phase": "Succeeded"},
                                                                 "spec": {"nodeName": "x"}})
        self.assertEqual(s["status"]["phase"], "Succeeded")
        self.assertNotIn("nodeName", s["spec"])
        self.assertEqual(self.c.get(self.pods_path("p") + "/status")[1]["status"]["phase"], "Succeeded")

    def test_generation_rules(self):
        self.sim(kubelet=False, deploymentController=False)
        p = self.c.ok("POST", self.pods_path(), pod("p"))
        self.assertEqual(p["metadata"]["generation"], 1)
        p = self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"labels": {"x": "y"}}})
        self.assertEqual(p["metadata"]["generation"], 1)
        p = self.c.ok("PATCH", self.pods_path("p"), {"spec": {"containers": [{"name": "app", "image": "n:2"}]}},
                      "application/strategic-merge-patch+json")
        self.assertEqual(p["metadata"]["generation"], 2)
        self.c.ok("POST", self.deploy_path(), deployment("d"))
        d = self.c.ok("PATCH", self.deploy_path("d"), {"metadata": {"annotations": {"a": "b"}}})
        self.assertEqual(d["metadata"]["generation"], 2)
        d = self.c.ok("PATCH", self.deploy_path("d"), {"metadata": {"labels": {"a": "b"}}})
        self.assertEqual(d["metadata"]["generation"], 2)
        d = self.c.ok("PATCH", self.deploy_path("d") + "/status", {"status": {"replicas": 7}})
        self.assertEqual((d["metadata"]["generation"], d["status"]["replicas"]), (2, 7))
        d = self.c.ok("PATCH", self.deploy_path("d"), {"spec": {"paused": True}})
        self.assertEqual(d["metadata"]["generation"], 3)

    def test_pod_update_validation(self):
        self.sim(kubelet=False)
        p = self.c.ok("POST", self.pods_path(), pod("p"))
        p["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
        code, body, _ = self.c.put(self.pods_path("p"), p)
        self.assertEqual(code, 422)
        self.assertTrue(body["message"].startswith(
            'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
            '`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,'
            '`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` '
            '(allow it to be set to 1 if it was previously negative)'), body["message"])
        self.assertEqual(body["details"]["causes"][0]["field"], "spec")
        self.assertEqual(body["details"]["causes"][0]["reason"], "FieldValueForbidden")
        code, _, _ = self.c.patch(self.pods_path("p"), {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}]}}, "application/strategic-merge-patch+json")
        self.assertEqual(code, 200)
        code, body, _ = self.c.patch(self.pods_path("p"), {"spec": {"terminationGracePeriodSeconds": 5}})
        self.assertEqual(code, 422)
        code, body, _ = self.c.patch(self.pods_path("p"), {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}, {"name": "b", "image": "x"}]}})
        self.assertEqual(code, 422)
        self.assertIn("pod updates may not add or remove containers", body["message"])
        tol = self.c.ok("GET", self.pods_path("p"))["spec"]["tolerations"]
        code, _, _ = self.c.patch(self.pods_path("p"), {"spec": {"tolerations": tol + [
            {"key": "k", "operator": "Exists"}]}})
        self.assertEqual(code, 200)
        code, body, _ = self.c.patch(self.pods_path("p"), {"spec": {"tolerations": tol[:1]}})
        self.assertEqual(code, 422)
        self.assertIn("existing toleration can not be modified except its tolerationSeconds", body["message"])
        code, _, _ = self.c.patch(self.pods_path("p"), {"spec": {"activeDeadlineSeconds": 100}})
        self.assertEqual(code, 200)
        code, _, _ = self.c.patch(self.pods_path("p"), {"spec": {"activeDeadlineSeconds": 200}})
        self.assertEqual(code, 422)

    def test_label_and_field_selectors(self):
        self.sim(kubelet=False)
        for name, labels in (("a", {"app": "web", "tier": "fe"}), ("b", {"app": "web", "tier": "be"}),
                             ("c", {"app": "db"}), ("d", {"other": "1"})):
            self.c.ok("POST", self.pods_path(), pod(name, labels=labels))

        def names(sel, field=None):
            q = "?labelSelector=" + sel.replace(" ", "%20")
            if field:
                q += "&fieldSelector=" + field
            return sorted(p["metadata"]["name"] for p in self.c.ok("GET", self.pods_path() + q)["items"])

        self.assertEqual(names("app=web"), ["a", "b"])
        self.assertEqual(names("app==web,tier=fe"), ["a"])
        self.assertEqual(names("app!=web"), ["c", "d"])
        self.assertEqual(names("app in (web,db)"), ["a", "b", "c"])
        self.assertEqual(names("app notin (web)"), ["c", "d"])
        self.assertEqual(names("tier"), ["a", "b"])
        self.assertEqual(names("!tier"), ["c", "d"])
        self.assertEqual(names("", "metadata.name=c"), ["c"])
        self.assertEqual(names("app", "metadata.name!=a"), ["b", "c"])
        self.assertEqual(names("", "status.phase=Pending"), ["a", "b", "c", "d"])
        self.assertEqual(names("", "spec.nodeName="), ["a", "b", "c", "d"])
        code, body, _ = self.c.get(self.pods_path() + "?fieldSelector=spec.bogus=1")
        self.assertEqual((code, body["reason"]), (400, "BadRequest"))
        code, body, _ = self.c.get(self.pods_path() + "?labelSelector=app%20in%20()")
        self.assertEqual(code, 400)
        all_ns = self.c.ok("GET", "/api/v1/pods?labelSelector=app%3Ddb")["items"]
        self.assertIn(("c", self.ns), [(p["metadata"]["name"], p["metadata"]["namespace"]) for p in all_ns])

    def test_pagination(self):
        self.sim(kubelet=False)
        for i in range(7):
            self.c.ok("POST", self.pods_path(), pod("p%d" % i))
        first = self.c.ok("GET", self.pods_path() + "?limit=3")
        self.assertEqual([p["metadata"]["name"] for p in first["items"]], ["p0", "p1", "p2"])
        self.assertNotIn("kind", first["items"][0])  # typed list items carry no kind
        self.assertEqual(first["kind"], "PodList")
        self.assertEqual(first["metadata"]["remainingItemCount"], 4)
        rv = first["metadata"]["resourceVersion"]
        # Writes between pages do not show up: pages come from the first page's snapshot.
        self.c.ok("POST", self.pods_path(), pod("p3a"))
        self.c.ok("DELETE", self.pods_path("p5"))
        names = [p["metadata"]["name"] for p in first["items"]]
        token = first["metadata"]["continue"]
        while token:
            page = self.c.ok("GET", self.pods_path() + "?limit=3&continue=" + token)
            self.assertEqual(page["metadata"]["resourceVersion"], rv)
            names += [p["metadata"]["name"] for p in page["items"]]
            token = page["metadata"].get("continue")
        self.assertEqual(names, ["p%d" % i for i in range(7)])
        # A continue token older than the compacted history is 410 Expired.
        first = self.c.ok("GET", self.pods_path() + "?limit=2")
        self.c.ok("POST", self.pods_path(), pod("later"))
        self.c.ok("POST", "/_test/compact")
        code, body, _ = self.c.get(self.pods_path() + "?limit=2&continue=" + first["metadata"]["continue"])
        self.assertEqual((code, body["reason"]), (410, "Expired"))
        self.assertTrue(body["metadata"].get("continue"))
        code, body, _ = self.c.get(self.pods_path() + "?limit=2&continue=garbage")
        self.assertEqual(code, 400)

    def test_watch_from_resource_version_with_selectors(self):
        self.sim(kubelet=False)
        self.c.ok("POST", self.pods_path(), pod("before"))
        rv = self.c.ok("GET", self.pods_path())["metadata"]["resourceVersion"]
        w = Watch(SRV.port, self.pods_path() + "?watch=true&resourceVersion=%s&labelSelector=app%%3Dx" % rv)
        try:
            self.c.ok("POST", self.pods_path(), pod("a"))
            self.c.ok("POST", self.pods_path(), pod("other", labels={"app": "y"}))
            self.c.ok("PATCH", self.pods_path("a"), {"metadata": {"labels": {"v": "1"}}})
            self.c.ok("PATCH", self.pods_path("a"), {"metadata": {"labels": {"app": "gone"}}})
            self.c.ok("PATCH", self.pods_path("other"), {"metadata": {"labels": {"app": "x"}}})
            self.c.ok("DELETE", self.pods_path("other"))
            self.assertIsNotNone(w.wait_for(lambda e: e["type"] == "DELETED" and
                                            e["object"]["metadata"]["name"] == "other"))
            evs = [(e["type"], e["object"]["metadata"]["name"]) for e in w.snapshot()]
            self.assertEqual(evs, [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "other"),
                                   ("DELETED", "other")])
            self.assertEqual(w.status, 200)
            self.assertEqual(w.headers.get("transfer-encoding"), "chunked")
            self.assertEqual(w.snapshot()[0]["object"]["kind"], "Pod")
            rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in w.snapshot()]
            self.assertEqual(rvs, sorted(rvs))
        finally:
            w.close()
        # A namespaced watch sees only its namespace.
        other = "/api/v1/namespaces/%s-other/pods" % self.ns
        w = Watch(SRV.port, self.pods_path() + "?watch=true&resourceVersion=" +
                  self.c.ok("GET", self.pods_path())["metadata"]["resourceVersion"])
        try:
            self.c.ok("POST", other, pod("elsewhere"))
            self.c.ok("POST", self.pods_path(), pod("here"))
            self.assertIsNotNone(w.wait_for(lambda e: e["object"]["metadata"]["name"] == "here"))
            self.assertEqual([e["object"]["metadata"]["name"] for e in w.snapshot()], ["here"])
        finally:
            w.close()
        # Without resourceVersion: synthetic ADDED for the current state first.
        w = Watch(SRV.port, self.pods_path() + "?watch=1&timeoutSeconds=1")
        try:
            self.assertIsNotNone(w.wait_for(lambda e: e["object"]["metadata"]["name"] == "before"))
            self.assertTrue(w.done.wait(5), "timeoutSeconds ends the watch")
        finally:
            w.close()

    def test_watch_bookmarks(self):
        self.sim(kubelet=False)
        w = Watch(SRV.port, self.pods_path() + "?watch=true&allowWatchBookmarks=true&resourceVersion=%s" %
                  self.c.ok("GET", self.pods_path())["metadata"]["resourceVersion"])
        try:
            self.c.ok("POST", self.pods_path(), pod("a"))
            bm = w.wait_for(lambda e: e["type"] == "BOOKMARK", timeout=3)
            self.assertIsNotNone(bm)
            self.assertEqual(set(bm["object"]["metadata"]), {"resourceVersion"})
            self.assertEqual(bm["object"]["kind"], "Pod")
            self.assertGreaterEqual(int(bm["object"]["metadata"]["resourceVersion"]),
                                    int(w.snapshot()[0]["object"]["metadata"]["resourceVersion"]))
        finally:
            w.close()
        w = Watch(SRV.port, self.pods_path() + "?watch=true&allowWatchBookmarks=true&sendInitialEvents=true"
                                               "&resourceVersionMatch=NotOlderThan")
        try:
            end = w.wait_for(lambda e: e["type"] == "BOOKMARK")
            self.assertEqual(end["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})
            self.assertEqual(w.snapshot()[0]["type"], "ADDED")
        finally:
            w.close()

    def test_watch_410_after_compaction(self):
        self.sim(kubelet=False)
        old_rv = self.c.ok("POST", self.pods_path(), pod("a"))["metadata"]["resourceVersion"]
        self.c.ok("POST", self.pods_path(), pod("b"))
        compacted = self.c.ok("POST", "/_test/compact")["resourceVersion"]
        w = Watch(SRV.port, self.pods_path() + "?watch=true&resourceVersion=" + old_rv)
        try:
            self.assertTrue(w.done.wait(5))
            evs = w.snapshot()
            self.assertEqual(len(evs), 1)
            self.assertEqual(evs[0]["type"], "ERROR")
            self.assertEqual(evs[0]["object"], {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                "status": "Failure", "message": "too old resource version: %s (%s)" %
                                                (old_rv, compacted), "reason": "Expired", "code": 410})
        finally:
            w.close()
        # Watching from the compacted RV itself works.
        w = Watch(SRV.port, self.pods_path() + "?watch=true&resourceVersion=" + compacted)
        try:
            self.c.ok("POST", self.pods_path(), pod("c"))
            self.assertIsNotNone(w.wait_for(lambda e: e["type"] == "ADDED"))
        finally:
            w.close()

    def test_finalizers_delay_deletion(self):
        self.sim(kubelet=False)
        self.c.ok("POST", self.pods_path(), dict(pod("p"), metadata={"name": "p", "finalizers": ["a.io/hold"]}))
        code, body, _ = self.c.delete(self.pods_path("p"))
        self.assertEqual(code, 200)
        self.assertTrue(body["metadata"]["deletionTimestamp"])
        got = self.c.ok("GET", self.pods_path("p"))
        self.assertTrue(got["metadata"]["deletionTimestamp"])
        code, body, _ = self.c.patch(self.pods_path("p"), {"metadata": {"finalizers": ["a.io/hold", "b.io/new"]}})
        self.assertEqual(code, 422)
        self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"finalizers": None}})
        self.assertEqual(self.c.get(self.pods_path("p"))[0], 404)
        # Deleting a Deployment answers a Success Status (pods answer the object).
        self.sim(deploymentController=False)
        self.c.ok("POST", self.deploy_path(), deployment("d"))
        code, body, _ = self.c.delete(self.deploy_path("d"))
        self.assertEqual((code, body["kind"], body["status"]), (200, "Status", "Success"))
        self.assertEqual(body["details"]["name"], "d")
        code, body, _ = self.c.delete(self.pods_path("p"))
        self.assertEqual(code, 404)

    def test_lease_put_creates_and_requires_resource_version(self):
        path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/inplace-webhook" % self.ns
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "inplace-webhook"},
                 "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
        code, created, _ = self.c.put(path, lease)
        self.assertEqual(code, 201)
        code, body, _ = self.c.put(path, dict(lease, spec={"holderIdentity": "b", "leaseDurationSeconds": 15}))
        self.assertEqual(code, 422)
        self.assertEqual(body["message"], 'leases.coordination.k8s.io "inplace-webhook" is invalid: '
                                          'metadata.resourceVersion: Invalid value: 0x0: must be specified for an '
                                          'update')
        ok = dict(created, spec={"holderIdentity": "b", "leaseDurationSeconds": 15})
        self.assertEqual(self.c.put(path, ok)[0], 200)
        self.assertEqual(self.c.put(path, ok)[0], 409)
        bad = self.c.ok("GET", path)
        bad["spec"]["leaseDurationSeconds"] = 0
        code, body, _ = self.c.put(path, bad)
        self.assertEqual(code, 422)
        self.assertIn("spec.leaseDurationSeconds", body["message"])
        code, _, _ = self.c.put("/api/v1/namespaces/%s/pods/nope" % self.ns, pod("nope"))
        self.assertEqual(code, 404)

    def test_delete_preconditions(self):
        p = self.c.ok("POST", self.pods_path(), pod("p"))
        code, body, _ = self.c.delete(self.pods_path("p"), {"preconditions": {"uid": "nope"}})
        self.assertEqual((code, body["reason"]), (409, "Conflict"))
        code, _, _ = self.c.delete(self.pods_path("p"), {"preconditions": {"uid": p["metadata"]["uid"]}})
        self.assertEqual(code, 200)

    def test_scale_subresource(self):
        self.sim(deploymentController=False)
        self.c.ok("POST", self.deploy_path(), deployment("d", replicas=2))
        s = self.c.ok("GET", self.deploy_path("d") + "/scale")
        self.assertEqual((s["kind"], s["apiVersion"], s["spec"]["replicas"], s["status"]["selector"]),
                         ("Scale", "autoscaling/v1", 2, "app=d"))
        s = self.c.ok("PATCH", self.deploy_path("d") + "/scale", {"spec": {"replicas": 5}})
        self.assertEqual(s["spec"]["replicas"], 5)
        self.assertEqual(self.c.ok("GET", self.deploy_path("d"))["spec"]["replicas"], 5)
        s["metadata"]["resourceVersion"] = "1"
        code, _, _ = self.c.put(self.deploy_path("d") + "/scale", s)
        self.assertEqual(code, 409)

    def test_events_both_apis(self):
        ev = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": self.ns},
              "reason": "Started", "message": "hello", "type": "Normal", "source": {"component": "me"}}
        self.c.ok("POST", "/api/v1/namespaces/%s/events" % self.ns, ev)
        got = self.c.ok("GET", "/apis/events.k8s.io/v1/namespaces/%s/events/e1" % self.ns)
        self.assertEqual((got["apiVersion"], got["note"], got["regarding"]["name"]),
                         ("events.k8s.io/v1", "hello", "p"))
        bad = {"metadata": {"name": "e2"}, "regarding": {"kind": "Pod", "name": "p", "namespace": self.ns},
               "reason": "R", "note": "n", "type": "Normal"}
        code, body, _ = self.c.post("/apis/events.k8s.io/v1/namespaces/%s/events" % self.ns, bad)
        self.assertEqual(code, 422)
        self.assertIn("eventTime: Required value", body["message"])
        good = dict(bad, eventTime="2024-01-01T00:00:00.000000Z", reportingController="inplace-webhook.io/loop",
                    reportingInstance="pod-1", action="Update")
        self.c.ok("POST", "/apis/events.k8s.io/v1/namespaces/%s/events" % self.ns, good)
        core = self.c.ok("GET", "/api/v1/namespaces/%s/events/e2" % self.ns)
        self.assertEqual((core["message"], core["involvedObject"]["name"]), ("n", "p"))
        code, body, _ = self.c.post("/api/v1/namespaces/%s/events" % self.ns, dict(ev, metadata={"name": "e3"},
                                    involvedObject={"kind": "Pod", "name": "p", "namespace": "elsewhere"}))
        self.assertEqual(code, 422)
        self.assertIn("does not match event.namespace", body["message"])

    def test_keep_alive_and_discovery(self):
        conn = http.client.HTTPConnection("127.0.0.1", SRV.port, timeout=10)
        for _ in range(20):
            conn.request("GET", "/api/v1/namespaces/%s/pods" % self.ns)
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.version, 11)
        conn.request("GET", "/apis/apps/v1")
        r = conn.getresponse()
        names = {x["name"] for x in json.loads(r.read())["resources"]}
        self.assertTrue({"deployments", "deployments/status", "deployments/scale", "replicasets"} <= names)
        conn.request("GET", "/healthz")
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ok"))
        conn.close()

    def test_request_log(self):
        self.c.ok("DELETE", "/_test/requests")
        self.c.ok("POST", self.deploy_path(), deployment("d", replicas=1))
        self.c.patch(self.deploy_path("d"), {"metadata": {"labels": {"a": "b"}}},
                     "application/strategic-merge-patch+json")
        wait_until(lambda: len(self.list_pods()) == 1, msg="pod")
        self.idle()
        items = self.c.ok("GET", "/_test/requests")["items"]
        mine = [i for i in items if i["path"].startswith("/apis/apps/v1/namespaces/" + self.ns)]
        self.assertEqual([(i["method"], i["code"]) for i in mine], [("POST", 201), ("PATCH", 200)])
        self.assertEqual(mine[1]["contentType"], "application/strategic-merge-patch+json")
        self.assertEqual(mine[1]["userAgent"], "iw-apiserver-test")
        self.assertEqual(mine[1]["verb"], "patch")
        # Controller writes (RS, pods, status) are not logged; only our own GETs of pods are.
        self.assertFalse([i for i in items if i["method"] != "GET" and "/replicasets" in i["path"]])
        # A watch is in the log while it is still open.
        w = Watch(SRV.port, self.pods_path() + "?watch=true&allowWatchBookmarks=true")
        try:
            wait_until(lambda: [i for i in self.c.ok("GET", "/_test/requests")["items"]
                                if i["verb"] == "watch" and i["path"] == self.pods_path()], msg="watch logged")
        finally:
            w.close()


# ----------------------------------------------------------------------------------------------
# Fault injection and authentication

class FaultTest(Base):
    def test_error_rate_with_retry_after(self):
        self.c.ok("POST", self.pods_path(), pod("p"))
        self.c.ok("POST", "/_test/faults", {"errorRate": 1.0, "errorCode": 429, "retryAfterSeconds": 2,
                                            "matchMethods": ["PATCH"], "matchPath": "/pods/"})
        code, body, resp = self.c.patch(self.pods_path("p"), {"metadata": {"labels": {"a": "b"}}})
        self.assertEqual((code, body["reason"], resp.getheader("Retry-After")), (429, "TooManyRequests", "2"))
        self.assertEqual(body["details"]["retryAfterSeconds"], 2)
        self.assertEqual(self.c.get(self.pods_path("p"))[0], 200)  # GET does not match
        self.c.ok("POST", "/_test/faults", {"errorRate": 1.0, "errorCode": 500})
        code, body, _ = self.c.get(self.pods_path("p"))
        self.assertEqual((code, body["kind"], body["reason"]), (500, "Status", "InternalError"))
        self.c.ok("POST", "/_test/faults", {"errorRate": 0.5, "errorCode": 503, "seed": 7})
        codes = [self.c.get(self.pods_path("p"))[0] for _ in range(40)]
        self.assertTrue(5 < codes.count(503) < 35, codes)
        self.assertEqual(set(codes), {200, 503})
        self.c.ok("DELETE", "/_test/faults")
        self.assertEqual(self.c.get(self.pods_path("p"))[0], 200)

    def test_conflict_on_first_write(self):
        self.c.ok("POST", self.pods_path(), pod("p"))
        self.c.ok("POST", self.pods_path(), pod("q"))
        self.c.ok("POST", "/_test/faults", {"conflictOnFirstWrite": True})
        for name in ("p", "q"):
            code, body, _ = self.c.patch(self.pods_path(name), {"metadata": {"labels": {"a": "b"}}})
            self.assertEqual((code, body["reason"]), (409, "Conflict"))
            self.assertIn("the object has been modified", body["message"])
            code, _, _ = self.c.patch(self.pods_path(name), {"metadata": {"labels": {"a": "b"}}})
            self.assertEqual(code, 200)

    def test_close_watch_after_events_and_latency(self):
        self.sim(kubelet=False)
        for i in range(5):
            self.c.ok("POST", self.pods_path(), pod("p%d" % i))
        self.c.ok("POST", "/_test/faults", {"closeWatchAfterEvents": 2, "latencyMs": 150})
        t0 = time.time()
        w = Watch(SRV.port, self.pods_path() + "?watch=true")
        try:
            self.assertTrue(w.done.wait(5))
            self.assertEqual(len(w.snapshot()), 2)
            self.assertGreaterEqual(time.time() - t0, 0.15)
        finally:
            w.close()


def get_once(port, path, **kw):
    c = Client(port, **kw)
    try:
        return c.get(path)
    finally:
        c.close()


class ResetTest(unittest.TestCase):
    def test_reset_wipes_objects_and_settings(self):
        srv = ApiServer()
        c = Client(srv.port)
        try:
            c.ok("POST", "/_test/sim", {"kubelet": False, "restartDelayMs": 5})
            c.ok("POST", "/_test/faults", {"latencyMs": 1})
            c.ok("POST", "/api/v1/namespaces/a/pods", pod("p"))
            w = Watch(srv.port, "/api/v1/namespaces/a/pods?watch=true")
            try:
                self.assertIsNotNone(w.wait_for(lambda e: e["type"] == "ADDED"))
                c.ok("POST", "/_test/reset")
                self.assertIsNotNone(w.wait_for(lambda e: e["type"] == "DELETED"))
            finally:
                w.close()
            self.assertEqual(c.ok("GET", "/api/v1/namespaces/a/pods")["items"], [])
            self.assertEqual(c.ok("GET", "/_test/sim")["restartDelayMs"], 100)
            self.assertNotIn("latencyMs", c.ok("GET", "/_test/faults"))
            self.assertEqual(c.ok("GET", "/_test/requests")["items"][-1]["path"], "/api/v1/namespaces/a/pods")
        finally:
            c.close()
            self.assertEqual(srv.stop(), [])


class AuthTlsTest(unittest.TestCase):
    def test_bearer_token_is_reread_on_every_request(self):
        tmp = tempfile.mkdtemp()
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write("first-token\n")
        srv = ApiServer("--token-file", token_file)
        try:
            code, body, _ = get_once(srv.port, "/api/v1/namespaces/default/pods")
            self.assertEqual((code, body["kind"], body["reason"]), (401, "Status", "Unauthorized"))
            self.assertEqual(get_once(srv.port, "/api/v1/namespaces/default/pods", token="first-token")[0], 200)
            self.assertEqual(get_once(srv.port, "/healthz")[0], 200)
            with open(token_file + ".new", "w") as f:
                f.write("second-token")
            os.replace(token_file + ".new", token_file)
            self.assertEqual(get_once(srv.port, "/api/v1/namespaces/default/pods", token="first-token")[0], 401)
            self.assertEqual(get_once(srv.port, "/api/v1/namespaces/default/pods", token="second-token")[0], 200)
        finally:
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)

    @unittest.skipUnless(shutil.which("openssl"), "openssl not installed")
    def test_tls(self):
        tmp = tempfile.mkdtemp()
        crt, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        srv = ApiServer("--tls-cert", crt, "--tls-key", key)
        try:
            ctx = ssl.create_default_context(cafile=crt)
            c = Client(srv.port, tls_context=ctx)
            self.assertEqual(c.get("/api/v1/namespaces/default/pods")[0], 200)
            self.assertEqual(c.get("/api/v1/namespaces/default/pods")[0], 200)
            c.close()
        finally:
            srv.stop()
            shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# Cluster simulation

class SimulationTest(Base):
    def rss(self):
        return self.c.ok("GET", self.rs_path())["items"]

    def wait_rollout(self, name, timeout=15):
        def done():
            d = self.c.ok("GET", self.deploy_path(name))
            st = d.get("status") or {}
            r = d["spec"]["replicas"]
            return (st.get("observedGeneration") == d["metadata"]["generation"] and st.get("updatedReplicas") == r
                    and st.get("availableReplicas") == r and st.get("replicas") == r) and d

        return wait_until(done, timeout, msg="rollout of " + name)

    def test_kubelet_runs_pods(self):
        p = self.c.ok("POST", self.pods_path(), pod("p", image="nginx:1.27"))
        self.assertEqual(p["spec"]["serviceAccountName"], "default")
        p = wait_until(lambda: (lambda x: x if x["status"].get("phase") == "Running" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in x["status"]["conditions"]) else None)(
            self.c.ok("GET", self.pods_path("p"))), msg="pod running")
        cs = p["status"]["containerStatuses"][0]
        self.assertEqual(cs["image"], "docker.io/library/nginx:1.27")
        self.assertTrue(cs["imageID"].startswith("docker.io/library/nginx@sha256:"))
        self.assertTrue(cs["containerID"].startswith("containerd://"))
        self.assertEqual((cs["restartCount"], cs["ready"], cs["started"]), (0, True, True))
        self.assertIn("running", cs["state"])
        self.assertTrue(p["status"]["podIP"] and p["status"]["hostIP"] and p["spec"]["nodeName"])
        types = {c["type"] for c in p["status"]["conditions"]}
        self.assertTrue({"PodScheduled", "Initialized", "ContainersReady", "Ready"} <= types)
        self.c.ok("DELETE", self.pods_path("p"))
        self.assertEqual(self.c.get(self.pods_path("p"))[0], 404)

    def test_kubelet_restarts_only_the_changed_container(self):
        self.sim(restartDelayMs=50, notReadyMs=300)
        body = pod("p")
        body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
        self.c.ok("POST", self.pods_path(), body)

        def ready_pod():
            x = self.c.ok("GET", self.pods_path("p"))
            return x if all(c["ready"] for c in x["status"].get("containerStatuses") or [{"ready": False}]) else None

        before = {c["name"]: c for c in wait_until(ready_pod, msg="ready")["status"]["containerStatuses"]}
        self.c.ok("PATCH", self.pods_path("p"), {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
                  "application/strategic-merge-patch+json")

        def restarted():
            x = self.c.ok("GET", self.pods_path("p"))
            cs = {c["name"]: c for c in x["status"]["containerStatuses"]}
            return (x, cs) if cs["app"]["restartCount"] == 1 else None

        x, after = wait_until(restarted, msg="restart")
        app = after["app"]
        self.assertNotEqual(app["containerID"], before["app"]["containerID"])
        self.assertNotEqual(app["imageID"], before["app"]["imageID"])
        self.assertEqual(app["image"], "docker.io/library/nginx:1.27")
        self.assertFalse(app["ready"])  # notReadyMs after the restart
        self.assertIn("terminated", app["lastState"])
        ready = {c["type"]: c for c in x["status"]["conditions"]}["Ready"]
        self.assertEqual((ready["status"], ready["reason"]), ("False", "ContainersNotReady"))
        self.assertEqual(after["side"], before["side"])
        final = {c["name"]: c for c in wait_until(ready_pod, msg="ready again")["status"]["containerStatuses"]}
        self.assertEqual(final["side"]["restartCount"], 0)
        # Labels restart nothing; a retag to the same digest keeps the imageID.
        self.c.ok("PATCH", self.pods_path("p"), {"metadata": {"labels": {"new": "label"}}})
        self.c.ok("POST", "/_test/images", {"nginx:stable": "nginx:1.27"})
        self.c.ok("PATCH", self.pods_path("p"), {"spec": {"containers": [
            {"name": "app", "image": "docker.io/library/nginx:stable"}]}}, "application/strategic-merge-patch+json")

        def restarted2():
            cs = {c["name"]: c for c in self.c.ok("GET", self.pods_path("p"))["status"]["containerStatuses"]}
            return cs if cs["app"]["restartCount"] == 2 else None

        cs = wait_until(restarted2, msg="second restart")
        self.assertEqual(cs["app"]["imageID"], final["app"]["imageID"])
        self.assertNotEqual(cs["app"]["containerID"], final["app"]["containerID"])
        self.assertEqual(cs["app"]["image"], "docker.io/library/nginx:stable")
        self.assertEqual(cs["side"]["restartCount"], 0)

    def test_readiness_gate(self):
        self.c.ok("POST", self.pods_path(), pod("p", readinessGates=[{"conditionType": "inplace-webhook.io/ready"}]))

        def ready_cond():
            x = self.c.ok("GET", self.pods_path("p"))
            conds = {c["type"]: c for c in x["status"].get("conditions") or []}
            return conds.get("Ready") if conds.get("ContainersReady", {}).get("status") == "True" else None

        r = wait_until(ready_cond, msg="containers ready")
        self.assertEqual((r["status"], r["reason"]), ("False", "ReadinessGatesNotReady"))
        self.assertIn('corresponding condition of pod readiness gate "inplace-webhook.io/ready" does not exist',
                      r["message"])
        self.c.ok("PATCH", self.pods_path("p") + "/status", {"status": {"conditions": [
            {"type": "inplace-webhook.io/ready", "status": "True"}]}}, "application/strategic-merge-patch+json")
        wait_until(lambda: ready_cond()["status"] == "True", msg="Ready after gate")
        self.c.ok("PATCH", self.pods_path("p") + "/status", {"status": {"conditions": [
            {"type": "inplace-webhook.io/ready", "status": "False"}]}}, "application/strategic-merge-patch+json")
        r = wait_until(lambda: (lambda c: c if c["status"] == "False" else None)(ready_cond()), msg="gate False")
        self.assertIn('is not "True", but False', r["message"])

    def test_native_rolling_update_respects_max_unavailable(self):
        self.sim(startupDelayMs=60)
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=4, max_surge=1, max_unavailable=1))
        self.wait_rollout("web")
        [old_rs] = self.rss()
        old_pods = {p["metadata"]["uid"] for p in self.list_pods()}
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        observations = 0
        deadline = time.time() + 20
        while time.time() < deadline:
            pods = self.list_pods()
            ready = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []))
            self.assertGreaterEqual(ready, 3, "maxUnavailable=1 of 4 violated")
            self.assertLessEqual(len(pods), 5, "maxSurge=1 of 4 violated")
            observations += 1
            d = self.c.ok("GET", self.deploy_path("web"))
            st = d["status"]
            if (st.get("updatedReplicas") == 4 and st.get("availableReplicas") == 4 and st.get("replicas") == 4 and
                    st.get("observedGeneration") == d["metadata"]["generation"]):
                break
            time.sleep(0.01)
        self.assertGreater(observations, 3)
        rss = {rs["metadata"]["name"]: rs for rs in self.rss()}
        self.assertEqual(len(rss), 2)
        new_rs = [rs for n, rs in rss.items() if n != old_rs["metadata"]["name"]][0]
        self.assertEqual(rss[old_rs["metadata"]["name"]]["spec"]["replicas"], 0)
        self.assertEqual(new_rs["spec"]["replicas"], 4)
        self.assertEqual(new_rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "2")
        self.assertEqual(d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "2")
        wait_until(lambda: len(self.list_pods()) == 4, msg="old pods gone")
        pods = self.list_pods()
        self.assertFalse({p["metadata"]["uid"] for p in pods} & old_pods, "all pods recreated")
        for p in pods:
            ref = [r for r in p["metadata"]["ownerReferences"] if r.get("controller")][0]
            self.assertEqual(ref["name"], new_rs["metadata"]["name"])
            self.assertEqual(p["metadata"]["labels"]["pod-template-hash"],
                             new_rs["metadata"]["labels"]["pod-template-hash"])
        conds = {c["type"]: c for c in d["status"]["conditions"]}
        self.assertEqual(conds["Progressing"]["reason"], "NewReplicaSetAvailable")
        self.assertEqual(conds["Available"]["status"], "True")
        events = self.c.ok("GET", "/api/v1/namespaces/%s/events?fieldSelector=reason=ScalingReplicaSet" % self.ns)
        self.assertTrue(any("Scaled up replica set %s" % new_rs["metadata"]["name"] in e["message"]
                            for e in events["items"]))

    def test_paused_deployment_then_in_place_finish_step(self):
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=3))
        self.wait_rollout("web")
        [rs] = self.rss()
        pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.list_pods()}
        self.assertEqual(len(pods_before), 3)
        # What our webhook does: pause + change the template in one update.
        d = self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": True, "template": {"spec": {
            "containers": [{"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        gen = d["metadata"]["generation"]
        d = wait_until(lambda: (lambda x: x if x["status"].get("observedGeneration") == gen else None)(
            self.c.ok("GET", self.deploy_path("web"))), msg="observedGeneration while paused")
        self.assertEqual(d["status"].get("updatedReplicas", 0), 0)
        prog = {c["type"]: c for c in d["status"]["conditions"]}["Progressing"]
        self.assertEqual((prog["status"], prog["reason"]), ("Unknown", "DeploymentPaused"))
        self.idle()
        time.sleep(0.2)
        self.assertEqual(len(self.rss()), 1, "paused: no new ReplicaSet")
        self.assertEqual({p["metadata"]["name"]: p["metadata"]["uid"] for p in self.list_pods()}, pods_before)
        # The loop updates pods in place (images), then patches the RS template to the stored
        # Deployment template plus its pod-template-hash label.
        for name in pods_before:
            self.c.ok("PATCH", self.pods_path(name), {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}},
                      "application/strategic-merge-patch+json")
        stored = self.c.ok("GET", self.deploy_path("web"))
        template = json.loads(json.dumps(stored["spec"]["template"]))
        h = rs["metadata"]["labels"]["pod-template-hash"]
        template["metadata"]["labels"]["pod-template-hash"] = h
        self.c.ok("PATCH", self.rs_path(rs["metadata"]["name"]), [
            {"op": "test", "path": "/metadata/resourceVersion", "value": self.c.ok(
                "GET", self.rs_path(rs["metadata"]["name"]))["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/spec/template", "value": template}], "application/json-patch+json")
        d = wait_until(lambda: (lambda x: x if x["status"].get("updatedReplicas") == 3 and x["status"].get(
            "observedGeneration") == x["metadata"]["generation"] else None)(self.c.ok("GET", self.deploy_path("web"))),
            msg="updatedReplicas == replicas while paused")
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": False}})
        d = self.wait_rollout("web")
        self.idle()
        time.sleep(0.3)
        rss = self.rss()
        self.assertEqual([r["metadata"]["name"] for r in rss], [rs["metadata"]["name"]], "no new ReplicaSet")
        self.assertEqual(rss[0]["spec"]["replicas"], 3)
        self.assertEqual(rss[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1")
        self.assertEqual({p["metadata"]["name"]: p["metadata"]["uid"] for p in self.list_pods()}, pods_before,
                         "no pod recreated")
        prog = {c["type"]: c for c in self.c.ok("GET", self.deploy_path("web"))["status"]["conditions"]}
        self.assertEqual(prog["Progressing"]["reason"], "NewReplicaSetAvailable")

    def test_in_place_finish_with_history_replicaset(self):
        """The loop's finish (DESIGN.md §8.1) while paused: a zero-replica ReplicaSet created for the
        template the pods leave (the active one's revision), the active one's template patched to the
        target. The ReplicaSet controller keeps the new one at 0 pods; the Deployment controller adopts
        the active one and, still paused, gives it max(old)+1 (getNewReplicaSet); the unpause rolls
        nothing; DELETE of a ReplicaSet answers a Success Status."""
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=2))
        d = self.wait_rollout("web")
        [rs] = self.rss()
        name = rs["metadata"]["name"]
        self.assertEqual(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1")
        pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in self.list_pods()}
        left = json.loads(json.dumps(rs["spec"]["template"]))
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": True, "template": {"spec": {
            "containers": [{"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        for pname in pods_before:
            self.c.ok("PATCH", self.pods_path(pname), {"spec": {"containers": [
                {"name": "app", "image": "nginx:1.27"}]}}, "application/strategic-merge-patch+json")
        left["metadata"]["labels"]["pod-template-hash"] = "h1st0ry"
        history = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": "web-h1st0ry", "labels": dict(left["metadata"]["labels"]),
                                "annotations": {"deployment.kubernetes.io/revision": "1"},
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                     "uid": d["metadata"]["uid"], "controller": True}]},
                   "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "h1st0ry"}},
                            "template": left}}
        code, created, _ = self.c.post(self.rs_path(), history)
        self.assertEqual(code, 201, created)
        self.assertEqual(created["metadata"]["generation"], 1)
        target = json.loads(json.dumps(self.c.ok("GET", self.deploy_path("web"))["spec"]["template"]))
        target["metadata"]["labels"]["pod-template-hash"] = rs["metadata"]["labels"]["pod-template-hash"]
        self.c.ok("PATCH", self.rs_path(name), {"spec": {"template": target}})

        def adopted():
            x = self.c.ok("GET", self.deploy_path("web"))
            st = x["status"]
            return (st.get("observedGeneration") == x["metadata"]["generation"] and st.get("updatedReplicas") == 2
                    and x["metadata"]["annotations"].get("deployment.kubernetes.io/revision") == "2") and x

        d = wait_until(adopted, msg="the paused Deployment adopting the patched ReplicaSet at revision 2")
        self.assertTrue(d["spec"]["paused"])
        active = self.c.ok("GET", self.rs_path(name))
        self.assertEqual(active["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "2")
        self.assertEqual(active["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"], "1")
        self.idle()
        h = self.c.ok("GET", self.rs_path("web-h1st0ry"))
        self.assertEqual(h["status"], {"replicas": 0, "observedGeneration": 1})
        self.assertEqual(h["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1")
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": None}},
                  "application/strategic-merge-patch+json")  # kubectl rollout resume
        self.wait_rollout("web")
        self.idle()
        time.sleep(0.3)
        self.assertEqual(sorted(r["metadata"]["name"] for r in self.rss()), sorted([name, "web-h1st0ry"]))
        self.assertEqual({p["metadata"]["name"]: p["metadata"]["uid"] for p in self.list_pods()}, pods_before,
                         "no pod recreated")
        code, body, _ = self.c.request("DELETE", self.rs_path("web-h1st0ry"))
        self.assertEqual(code, 200)
        self.assertEqual((body["kind"], body["status"], body["details"]["name"], body["details"]["kind"]),
                         ("Status", "Success", "web-h1st0ry", "replicasets"))
        self.assertEqual(self.c.request("GET", self.rs_path("web-h1st0ry"))[0], 404)

    def test_wrong_finish_step_recreates_pods(self):
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=2))
        self.wait_rollout("web")
        [rs] = self.rss()
        before = {p["metadata"]["uid"] for p in self.list_pods()}
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": True, "template": {"spec": {
            "containers": [{"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        # Unpausing without patching the ReplicaSet: the controller rolls out a new ReplicaSet.
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": False}})
        self.wait_rollout("web")
        wait_until(lambda: len(self.list_pods()) == 2, msg="old pods gone")
        self.assertEqual(len(self.rss()), 2)
        self.assertFalse({p["metadata"]["uid"] for p in self.list_pods()} & before)

    def test_oldest_matching_replicaset_wins(self):
        """FindNewReplicaSet picks the oldest ReplicaSet whose template matches: after T1 → T2, an
        in-place return to T1 that patches RS2 but leaves the zero-replica RS1 (= T1) alone makes
        the unpause roll every pod to RS1."""
        self.sim(startupDelayMs=10)
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=2))
        self.wait_rollout("web")
        [rs1] = self.rss()
        time.sleep(1.0)  # creationTimestamp has second resolution; make RS2 strictly younger
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        self.wait_rollout("web")
        wait_until(lambda: len(self.list_pods()) == 2, msg="rollout to RS2 settled")
        rs2 = [r for r in self.rss() if r["metadata"]["uid"] != rs1["metadata"]["uid"]][0]
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": True, "template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.25"}]}}}}, "application/strategic-merge-patch+json")
        # Paused, the matching RS1 is already "the new ReplicaSet": it gets the next revision.
        wait_until(lambda: self.c.ok("GET", self.rs_path(rs1["metadata"]["name"]))["metadata"]["annotations"][
            "deployment.kubernetes.io/revision"] == "3", msg="RS1 revision bumped")
        d = self.c.ok("GET", self.deploy_path("web"))
        self.assertEqual(d["status"].get("updatedReplicas", 0), 0)
        stored = d["spec"]["template"]
        template = json.loads(json.dumps(stored))
        template["metadata"]["labels"]["pod-template-hash"] = rs2["metadata"]["labels"]["pod-template-hash"]
        self.c.ok("PATCH", self.rs_path(rs2["metadata"]["name"]), {"spec": {"template": template}})
        pods_before = {p["metadata"]["uid"] for p in self.list_pods()}
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"paused": False}})
        self.wait_rollout("web")
        wait_until(lambda: len(self.list_pods()) == 2 and not {p["metadata"]["uid"] for p in self.list_pods()}
                   & pods_before, msg="pods recreated under RS1")
        rss = {r["metadata"]["uid"]: r for r in self.rss()}
        self.assertEqual(rss[rs1["metadata"]["uid"]]["spec"]["replicas"], 2)
        self.assertEqual(rss[rs2["metadata"]["uid"]]["spec"]["replicas"], 0)

    def test_replicaset_replaces_deleted_pods_and_gc(self):
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=2))
        self.wait_rollout("web")
        victim = self.list_pods()[0]["metadata"]["name"]
        self.c.ok("DELETE", self.pods_path(victim))
        wait_until(lambda: len(self.list_pods()) == 2 and victim not in
                   [p["metadata"]["name"] for p in self.list_pods()], msg="replacement pod")
        self.c.ok("PATCH", self.deploy_path("web") + "/scale", {"spec": {"replicas": 1}})
        wait_until(lambda: len(self.list_pods()) == 1, msg="scale down")
        self.c.ok("DELETE", self.deploy_path("web"))
        wait_until(lambda: not self.rss() and not self.list_pods(), msg="garbage collection")

    def test_min_ready_seconds_delays_availability(self):
        d = deployment("web", replicas=2)
        d["spec"]["minReadySeconds"] = 2
        t0 = time.time()
        self.c.ok("POST", self.deploy_path(), d)

        def ready_not_available():
            st = self.c.ok("GET", self.deploy_path("web"))["status"]
            return st.get("readyReplicas") == 2 and not st.get("availableReplicas")

        wait_until(ready_not_available, msg="ready but not yet available")
        self.wait_rollout("web")
        # Ready times have second resolution (as metav1.Time in JSON), so availability may come up
        # to a second early, as on a real cluster.
        self.assertGreaterEqual(time.time() - t0, 1.0)
        [rs] = self.rss()
        self.assertEqual((rs["spec"]["minReadySeconds"], rs["status"]["availableReplicas"]), (2, 2))

    def test_orphan_propagation_and_adoption(self):
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=1))
        self.wait_rollout("web")
        [rs] = self.rss()
        self.c.ok("DELETE", self.deploy_path("web"), {"propagationPolicy": "Orphan"})
        wait_until(lambda: not [r for r in self.rss() if r["metadata"].get("ownerReferences")], msg="orphaned RS")
        self.assertEqual(len(self.list_pods()), 1)
        # A new Deployment with the same selector and template adopts the orphan and rolls nothing.
        pod_uids = {p["metadata"]["uid"] for p in self.list_pods()}
        self.c.ok("POST", self.deploy_path(), deployment("web", replicas=1))
        self.wait_rollout("web")
        self.idle()
        rss = self.rss()
        self.assertEqual([r["metadata"]["uid"] for r in rss], [rs["metadata"]["uid"]])
        self.assertEqual(rss[0]["metadata"]["ownerReferences"][0]["kind"], "Deployment")
        self.assertEqual({p["metadata"]["uid"] for p in self.list_pods()}, pod_uids)

    def test_recreate_strategy(self):
        d = deployment("web", replicas=2)
        d["spec"]["strategy"] = {"type": "Recreate"}
        self.c.ok("POST", self.deploy_path(), d)
        self.wait_rollout("web")
        self.c.ok("PATCH", self.deploy_path("web"), {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}]}}}}, "application/strategic-merge-patch+json")
        self.wait_rollout("web")
        rss = {r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r for r in self.rss()}
        self.assertEqual((rss["1"]["spec"]["replicas"], rss["2"]["spec"]["replicas"]), (0, 2))


# ----------------------------------------------------------------------------------------------
# Strategic merge patch, unit level

class StrategicMergeTest(unittest.TestCase):
    def smp(self, original, patch, schema=kpatch.POD):
        return kpatch.strategic_merge(original, patch, schema)

    def test_cases(self):
        cases = [
            # (name, original, patch, expected)
            ("tolerations are replaced", {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}},
             {"spec": {"tolerations": [{"key": "c"}]}}, {"spec": {"tolerations": [{"key": "c"}]}}),
            ("readinessGates are atomic", {"spec": {"readinessGates": [{"conditionType": "a"}]}},
             {"spec": {"readinessGates": [{"conditionType": "b"}]}},
             {"spec": {"readinessGates": [{"conditionType": "b"}]}}),
            ("ownerReferences merge by uid", {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}},
             {"metadata": {"ownerReferences": [{"uid": "1", "controller": True}, {"uid": "2", "name": "b"}]}},
             {"metadata": {"ownerReferences": [{"uid": "1", "name": "a", "controller": True},
                                               {"uid": "2", "name": "b"}]}}),
            ("ports merge by containerPort",
             {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}},
             {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}},
             {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http",
                                                               "protocol": "TCP"}]}]}}),
            ("volumes merge by name", {"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b"}]}},
             {"spec": {"volumes": [{"name": "b", "secret": {"secretName": "s"}}]}},
             {"spec": {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b", "secret": {"secretName": "s"}}]}}),
            ("$retainKeys", {"spec": {"volumes": [{"name": "a", "emptyDir": {}}]}},
             {"spec": {"volumes": [{"name": "a", "$retainKeys": ["name", "secret"], "secret": {"secretName": "s"}}]}},
             {"spec": {"volumes": [{"name": "a", "secret": {"secretName": "s"}}]}}),
            ("list $patch: replace", {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
             {"spec": {"containers": [{"$patch": "replace"}, {"name": "c"}]}}, {"spec": {"containers": [
                 {"name": "c"}]}}),
            ("map $patch: delete", {"metadata": {"labels": {"a": "1"}, "name": "x"}},
             {"metadata": {"labels": {"$patch": "delete"}}}, {"metadata": {"name": "x"}}),
            ("$setElementOrder", {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
             {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                       "containers": [{"name": "a", "image": "i"}]}},
             {"spec": {"containers": [{"name": "b"}, {"name": "a", "image": "i"}]}}),
            ("unknown lists are replaced", {"spec": {"args": ["a", "b"]}}, {"spec": {"args": ["c"]}},
             {"spec": {"args": ["c"]}}),
        ]
        for name, original, patch, expected in cases:
            with self.subTest(name):
                self.assertEqual(self.smp(original, patch), expected)

    def test_bad_directive(self):
        with self.assertRaises(ApiError) as cm:
            self.smp({}, {"metadata": {"$patch": "explode"}})
        self.assertEqual(cm.exception.code, 400)


if __name__ == "__main__":
    unittest.main(verbosity=2)
