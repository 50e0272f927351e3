#!/usr/bin/env python3
"""Admission webhooks in the test API server (tests/apiserver/kadmission.py): unit tests of the
matchers and the review checks, then the server calling a scripted webhook and the real
inplace-webhook binary with the chart's configuration (tests/e2e/webhook-config.yaml).

    python3 tests/apiserver/test_admission.py [WEBHOOK_BINARY [SOURCE_DIR [CERT_DIR]]]

or IW_WEBHOOK_BINARY / IW_SOURCE_DIR / IW_CERT_DIR. Without a binary and certificates only the unit
tests run (the rest is skipped).
"""

import base64
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)

import kadmission  # noqa: E402
import klabels  # noqa: E402
from test_apiserver import ApiServer, Client, wait_until  # noqa: E402


def _arg(i, env, default=None):
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if len(args) > i:
        return args[i]
    return os.environ.get(env, default)


SOURCE_DIR = os.path.abspath(_arg(1, "IW_SOURCE_DIR", os.path.join(HERE, "..", "..")))
BINARY = _arg(0, "IW_WEBHOOK_BINARY")
BINARY = os.path.abspath(BINARY) if BINARY else None
CERT_DIR = _arg(2, "IW_CERT_DIR", os.path.join(os.path.dirname(BINARY), "certs") if BINARY else None)
CERT_DIR = os.path.abspath(CERT_DIR) if CERT_DIR else None
CONFIG = os.path.join(SOURCE_DIR, "tests", "e2e", "webhook-config.yaml")
HAVE_CERTS = bool(CERT_DIR) and all(os.path.exists(os.path.join(CERT_DIR, f)) for f in ("ca.crt", "tls.crt",
                                                                                          "tls.key"))
HAVE_BINARY = bool(BINARY) and os.access(BINARY, os.X_OK) and HAVE_CERTS
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "curl"))

ENABLED = "inplace-webhook.io/enabled"
STATE = "inplace-webhook.io/state"
IN_PROGRESS = "inplace-webhook.io/in-progress"
CONTROLLER = "system:serviceaccount:inplace-webhook:inplace-webhook"
USERS = {
    "alice-token": {"username": "alice", "groups": ["devs"]},
    "controller-token": {"username": CONTROLLER, "groups": ["system:serviceaccounts",
                                                            "system:serviceaccounts:inplace-webhook"]},
}


def load_yaml_docs(path):
    with open(path, "rb") as f:
        return kadmission.load_documents(f.read())


def deployment(name, replicas=2, image="nginx:1.26", enabled=True):
    labels = {"app": name}
    if enabled:
        labels[ENABLED] = "true"
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {ENABLED: "true"} if enabled else {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def image_patch(image):
    return {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}


# ----------------------------------------------------------------------------------------------
# Unit tests: matchers, review checks, configuration validation.

class RuleMatchTest(unittest.TestCase):
    DEPLOY = ("apps", "v1", "deployments")
    POD = ("", "v1", "pods")

    def rule(self, resources, ops=("UPDATE",), groups=("apps",), versions=("v1",), scope=None):
        r = {"operations": list(ops), "apiGroups": list(groups), "apiVersions": list(versions),
             "resources": list(resources)}
        if scope:
            r["scope"] = scope
        return r

    def test_rules_with_subresources_and_wildcards(self):
        cases = [
            # resources, request subresource, operation, expected
            (["deployments"], "", "UPDATE", True),
            (["deployments"], "scale", "UPDATE", False),  # a main-resource rule never matches a subresource
            (["deployments"], "status", "UPDATE", False),
            (["deployments/scale"], "scale", "UPDATE", True),
            (["deployments/scale"], "", "UPDATE", False),
            (["deployments/*"], "status", "UPDATE", True),
            (["deployments/*"], "", "UPDATE", True),  # sub "*" matches the main resource too (rules.go)
            (["*"], "", "UPDATE", True),
            (["*"], "scale", "UPDATE", False),  # "*" is every main resource, no subresource
            (["*/scale"], "scale", "UPDATE", True),
            (["*/scale"], "status", "UPDATE", False),
            (["*/*"], "status", "UPDATE", True),
            (["replicasets"], "", "UPDATE", False),
            (["deployments"], "", "CREATE", False),
        ]
        for resources, sub, op, want in cases:
            with self.subTest(resources=resources, sub=sub, op=op):
                self.assertEqual(kadmission.rule_matches(self.rule(resources), op, self.DEPLOY, sub, "ns"), want)

    def test_operations_groups_versions_and_scope(self):
        pod_rule = self.rule(["pods"], ops=("*",), groups=("",))
        self.assertTrue(kadmission.rule_matches(pod_rule, "DELETE", self.POD, "", "ns"))
        self.assertFalse(kadmission.rule_matches(pod_rule, "DELETE", self.DEPLOY, "", "ns"))
        any_group = self.rule(["deployments"], groups=("*",), versions=("*",))
        self.assertTrue(kadmission.rule_matches(any_group, "UPDATE", ("extensions", "v1beta1", "deployments"), "",
                                                "ns"))
        self.assertTrue(kadmission.rule_matches(self.rule(["deployments"], scope="Namespaced"), "UPDATE",
                                                self.DEPLOY, "", "ns"))
        self.assertFalse(kadmission.rule_matches(self.rule(["deployments"], scope="Cluster"), "UPDATE",
                                                 self.DEPLOY, "", "ns"))
        self.assertTrue(kadmission.rule_matches(self.rule(["deployments"], scope="*"), "UPDATE", self.DEPLOY, "",
                                                "ns"))


class SelectorTest(unittest.TestCase):
    def reqs(self, sel):
        return klabels.selector_struct_to_reqs(sel)

    def obj(self, labels):
        return {"metadata": {"labels": labels}}

    def test_object_selector_match_expressions(self):
        sel = {"matchLabels": {ENABLED: "true"},
               "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]},
                                    {"key": "legacy", "operator": "DoesNotExist"},
                                    {"key": "team", "operator": "NotIn", "values": ["ops"]},
                                    {"key": "app", "operator": "Exists"}]}
        reqs = self.reqs(sel)
        base = {ENABLED: "true", "tier": "web", "app": "x"}
        cases = [
            (base, True),
            (dict(base, team="dev"), True),
            (dict(base, team="ops"), False),  # NotIn
            (dict(base, legacy="1"), False),  # DoesNotExist
            ({k: v for k, v in base.items() if k != "app"}, False),  # Exists
            (dict(base, tier="db"), False),  # In
            (dict(base, **{ENABLED: "false"}), False),
        ]
        for labels, want in cases:
            with self.subTest(labels=labels):
                self.assertEqual(kadmission.object_selector_matches(reqs, self.obj(labels), None), want)

    def test_object_or_old_object(self):
        reqs = self.reqs({"matchLabels": {ENABLED: "true"}})
        on, off = self.obj({ENABLED: "true"}), self.obj({})
        self.assertTrue(kadmission.object_selector_matches(reqs, off, on))  # opting out is still seen
        self.assertTrue(kadmission.object_selector_matches(reqs, on, off))
        self.assertTrue(kadmission.object_selector_matches(reqs, None, on))  # DELETE: the old object
        self.assertFalse(kadmission.object_selector_matches(reqs, off, None))
        self.assertFalse(kadmission.object_selector_matches(reqs, {"kind": "Scale", "metadata": {}}, None))
        self.assertTrue(kadmission.object_selector_matches(self.reqs({}), off, None))  # empty: everything

    def test_namespace_selector_uses_the_name_label(self):
        reqs = self.reqs({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                "values": ["kube-system", "inplace-webhook"]}]})
        deploy = ("apps", "v1", "deployments")
        self.assertTrue(kadmission.namespace_selector_matches(reqs, "default", deploy))
        self.assertFalse(kadmission.namespace_selector_matches(reqs, "kube-system", deploy))
        self.assertFalse(kadmission.namespace_selector_matches(reqs, "inplace-webhook", deploy))
        # Cluster-scoped requests (other than for namespaces) are never exempted by it.
        self.assertTrue(kadmission.namespace_selector_matches(reqs, "", ("", "v1", "nodes")))


class ReviewCheckTest(unittest.TestCase):
    class Hook:
        name = "h.example.com"

    def check(self, review, uid="u1", mutating=True, api_version=kadmission.ADMISSION_V1, status=200):
        return kadmission.verify_response(self.Hook, uid, mutating, api_version, status, "application/json",
                                          json.dumps(review).encode())

    def v1(self, **kw):
        resp = {"uid": "u1"}
        resp.update(kw)
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}

    def test_invalid_responses_are_call_errors(self):
        patch = base64.b64encode(b'[{"op":"add","path":"/x","value":1}]').decode()
        cases = [
            (self.v1(allowed=True, uid="other"), True, 'expected response.uid="u1", got "other"'),
            ({"kind": "AdmissionReview", "response": {"uid": "u1", "allowed": True}}, True,
             "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=AdmissionReview"),
            (self.v1(allowed=True, patch=patch), True, "webhook returned response.patch but not response.patchType"),
            (self.v1(allowed=True, patchType="JSONPatch"), True,
             "webhook returned response.patchType but not response.patch"),
            (self.v1(allowed=True, patch=patch, patchType="JSONPatch"), False,
             "validating webhook may not return response.patch"),
            ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, True, "webhook response was absent"),
        ]
        for review, mutating, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(kadmission.CallError) as cm:
                    self.check(review, mutating=mutating)
                self.assertIn(msg, str(cm.exception))
                self.assertTrue(str(cm.exception).startswith('failed calling webhook "h.example.com": '))

    def test_non_200_and_v1beta1(self):
        with self.assertRaisesRegex(kadmission.CallError, "an error on the server"):
            self.check({}, status=500)
        # v1beta1 answers are checked leniently: no uid, no GVK; a patch is a JSONPatch.
        patch = base64.b64encode(b"[]").decode()
        out = self.check({"response": {"allowed": True, "patch": patch}}, api_version=kadmission.ADMISSION_V1BETA1)
        self.assertEqual(out["patchType"], "JSONPatch")

    def test_denial_status(self):
        cases = [
            ({"code": 403, "message": "no", "reason": "Forbidden"}, 403,
             'admission webhook "w.x.io" denied the request: no'),
            ({"code": 200, "message": "no"}, 400, 'admission webhook "w.x.io" denied the request: no'),
            ({"reason": "Because"}, 400, 'admission webhook "w.x.io" denied the request: Because'),
            (None, 400, 'admission webhook "w.x.io" denied the request without explanation'),
        ]
        for status, code, message in cases:
            with self.subTest(status=status):
                err = kadmission.denial("w.x.io", status)
                self.assertEqual((err.code, err.message), (code, message))
                self.assertEqual(err.status()["status"], "Failure")

    def test_warning_headers(self):
        h = kadmission.warning_headers(["a", 'say "hi"', "a", ""])
        self.assertEqual(h, [("Warning", '299 - "a"'), ("Warning", '299 - "say \\"hi\\""')])


class ConfigTest(unittest.TestCase):
    def hook(self, **kw):
        h = {"name": "a.b.example.io", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "clientConfig": {"url": "https://localhost:1/x"},
             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}
        h.update(kw)
        return h

    def doc(self, *hooks, kind="MutatingWebhookConfiguration"):
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "c"},
                "webhooks": list(hooks)}

    def test_refuses_what_kube_apiserver_refuses(self):
        chain = kadmission.Chain()
        bad = [
            (self.hook(sideEffects="Some"), "sideEffects"),
            (self.hook(sideEffects=None), "sideEffects"),
            (self.hook(timeoutSeconds=31), "timeoutSeconds"),
            (self.hook(admissionReviewVersions=[]), "admissionReviewVersions"),
            (self.hook(clientConfig={"url": "http://localhost/x"}), "'https' is the only allowed URL scheme"),
            (self.hook(name="short.name"), "at least three segments"),
            (self.hook(failurePolicy="Sometimes"), "failurePolicy"),
            (self.hook(objectSelector={"matchExpressions": [{"key": "a", "operator": "In"}]}), "values"),
        ]
        for h, msg in bad:
            with self.subTest(msg=msg):
                with self.assertRaisesRegex(kadmission.ConfigError, re.escape(msg)):
                    chain.add([self.doc(h)])
        with self.assertRaisesRegex(kadmission.ConfigError, "reinvocationPolicy"):
            chain.add([self.doc(self.hook(reinvocationPolicy="IfNeeded"), kind="ValidatingWebhookConfiguration")])
        self.assertFalse(chain.active())  # nothing of a refused batch is kept

    def test_defaults_order_and_documents(self):
        chain = kadmission.Chain()
        text = "\n---\n".join(json.dumps(d) for d in (
            self.doc(self.hook(name="z.b.example.io"), self.hook(name="a.b.example.io")),
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ignored"}},
            dict(self.doc(self.hook(name="m.b.example.io")), metadata={"name": "a-config"})))
        self.assertEqual(chain.add(kadmission.load_documents(text)), 2)
        # Configurations in name order, webhooks in the order listed (not by webhook name).
        self.assertEqual([h.name for h in chain.mutating], ["m.b.example.io", "z.b.example.io", "a.b.example.io"])
        h = chain.mutating[0]
        self.assertEqual((h.failure_policy, h.timeout, h.match_policy, h.reinvoke_if_needed),
                         ("Fail", 10, "Equivalent", False))
        self.assertEqual(h.uid, "a-config/m.b.example.io/0")


# ----------------------------------------------------------------------------------------------
# A scripted webhook (HTTPS with the dev certificate) for the API server to call.

class FakeWebhook:
    """Answers reviews with functions set per path: fn(request) -> response dict, or a tuple
    (http_status, body bytes), or ("sleep", seconds)."""

    def __init__(self, cert_dir):
        self.reviews = []
        self.handlers = {}
        self.lock = threading.Lock()
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                review = json.loads(body)
                path, _, query = self.path.partition("?")
                with fake.lock:
                    fake.reviews.append((path, query, review))
                    fn = fake.handlers.get(path)
                out = fn(review["request"]) if fn else {"allowed": True}
                if isinstance(out, tuple) and out[0] == "sleep":
                    time.sleep(out[1])
                    out = {"allowed": True}
                if isinstance(out, tuple):
                    status, data = out
                else:
                    status = 200
                    resp = dict(out)
                    resp.setdefault("uid", review["request"]["uid"])
                    data = json.dumps({"apiVersion": review.get("apiVersion"), "kind": "AdmissionReview",
                                       "response": resp}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(cert_dir, "tls.crt"), os.path.join(cert_dir, "tls.key"))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a caller that timed out and left
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        with open(os.path.join(cert_dir, "ca.crt"), "rb") as f:
            self.ca_bundle = base64.b64encode(f.read()).decode()

    def url(self, path):
        return "https://localhost:%d%s" % (self.port, path)

    def requests(self, path):
        with self.lock:
            return [r["request"] for p, _, r in self.reviews if p == path]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def patch_of(ops):
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def webhook_doc(kind, config_name, *hooks):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": config_name},
            "webhooks": list(hooks)}


def hook_spec(name, url, ca, resources=("pods",), groups=("",), ops=("CREATE",), **kw):
    h = {"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
         "clientConfig": {"url": url, "caBundle": ca},
         "rules": [{"operations": list(ops), "apiGroups": list(groups), "apiVersions": ["v1"],
                    "resources": list(resources)}]}
    h.update(kw)
    return h


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}


_counter = [0]


class ServerCase(unittest.TestCase):
    server_args = ()

    @classmethod
    def start_server(cls, *extra):
        cls.tmp = tempfile.mkdtemp(prefix="iw-admission-test-")
        cls.users_file = os.path.join(cls.tmp, "users.json")
        with open(cls.users_file, "w") as f:
            json.dump(USERS, f)
        cls.srv = ApiServer("--users-file", cls.users_file, *extra)

    @classmethod
    def stop_server(cls):
        errors = cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        return errors

    def setUp(self):
        _counter[0] += 1
        self.ns = "a%d-%s" % (_counter[0], self._testMethodName.replace("_", "-")[5:30].strip("-").lower())
        self.alice = Client(self.srv.port, token="alice-token")
        self.ctl = Client(self.srv.port, token="controller-token")
        self.alice.ok("DELETE", "/_test/admission")

    def tearDown(self):
        self.alice.close()
        self.ctl.close()

    def path(self, resource, name=None, sub=None):
        group = "/api/v1" if resource in ("pods", "events") else "/apis/apps/v1"
        p = "%s/namespaces/%s/%s" % (group, self.ns, resource)
        return p + ("/" + name if name else "") + ("/" + sub if sub else "")

    def calls(self, **match):
        """This test's webhook calls (its namespace) from the server's admission log."""
        match.setdefault("namespace", self.ns)
        items = self.alice.ok("GET", "/_test/admission")["items"]
        return [c for c in items if all(c.get(k) == v for k, v in match.items())]

    def set_webhooks(self, docs):
        self.alice.ok("DELETE", "/_test/webhooks")
        if docs:
            self.alice.ok("POST", "/_test/webhooks", docs)


@unittest.skipUnless(HAVE_CERTS, "needs the dev certificates (IW_CERT_DIR)")
class ScriptedWebhookTest(ServerCase):
    """The API server's side of the protocol, against a webhook whose answers the test scripts."""

    @classmethod
    def setUpClass(cls):
        cls.fake = FakeWebhook(CERT_DIR)
        cls.start_server()

    @classmethod
    def tearDownClass(cls):
        errors = cls.stop_server()
        cls.fake.stop()
        if errors:
            raise AssertionError("the server logged internal errors:\n" + "\n".join(errors))

    def setUp(self):
        super().setUp()
        self.fake.handlers.clear()
        with self.fake.lock:
            self.fake.reviews.clear()

    def tearDown(self):
        self.set_webhooks([])
        super().tearDown()

    def reqs(self, path):
        """The review requests of this test (its namespace) that the fake webhook got on path."""
        return [r for r in self.fake.requests(path) if r.get("namespace") == self.ns]

    def mutating(self, name, path, **kw):
        return hook_spec(name, self.fake.url(path), self.fake.ca_bundle, **kw)

    def test_review_shape_patch_defaulting_and_warnings(self):
        self.fake.handlers["/m"] = lambda req: dict(patch_of([
            {"op": "add", "path": "/metadata/labels/stamped", "value": "yes"},
            {"op": "add", "path": "/spec/containers/-", "value": {"name": "side", "image": "busybox"}}]),
            warnings=["first warning", "first warning", 'quoted "w"'])
        self.set_webhooks([webhook_doc("MutatingWebhookConfiguration", "m", self.mutating("m.test.io", "/m"))])
        code, obj, resp = self.alice.request("POST", self.path("pods") + "?fieldManager=kubectl", pod("p"))
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["metadata"]["labels"]["stamped"], "yes")
        side = obj["spec"]["containers"][1]
        # Defaulting runs again on the patched object.
        self.assertEqual((side["imagePullPolicy"], side["terminationMessagePath"]), ("Always", "/dev/termination-log"))
        self.assertEqual(resp.headers.get_all("Warning"), ['299 - "first warning"', '299 - "quoted \\"w\\""'])
        (path, query, review), = self.fake.reviews
        self.assertEqual(query, "timeout=5s")
        req = review["request"]
        self.assertEqual((review["apiVersion"], review["kind"]), ("admission.k8s.io/v1", "AdmissionReview"))
        self.assertEqual(req["kind"], {"group": "", "version": "v1", "kind": "Pod"})
        self.assertEqual(req["resource"], {"group": "", "version": "v1", "resource": "pods"})
        self.assertEqual(req["requestKind"], req["kind"])
        self.assertEqual((req["operation"], req["namespace"], req["name"], req["dryRun"]),
                         ("CREATE", self.ns, "p", False))
        self.assertEqual(req["userInfo"], {"username": "alice", "groups": ["devs", "system:authenticated"]})
        self.assertIsNone(req["oldObject"])
        self.assertEqual(req["options"], {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                                          "fieldManager": "kubectl"})
        # Built-in admission ran before the webhook (service account token volume, tolerations).
        self.assertEqual(req["object"]["spec"]["serviceAccountName"], "default")
        self.assertNotIn("uid", req["object"]["metadata"])

    def test_denial_and_failure_policies(self):
        self.fake.handlers["/deny"] = lambda req: {"allowed": False, "status": {"code": 200, "message": "nope"}}
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", self.mutating("deny.test.io",
                                                                                             "/deny"))])
        code, obj, _ = self.alice.request("POST", self.path("pods"), pod("p"))
        self.assertEqual((code, obj["message"], obj["status"]), (400, 'admission webhook "deny.test.io" denied the '
                                                                      'request: nope', "Failure"))
        self.assertEqual(self.alice.request("GET", self.path("pods", "p"))[0], 404)
        # A call that fails: Fail -> 500, Ignore -> admitted. Each failure mode in turn.
        failures = [
            ("/status500", lambda req: (500, b"boom"), "failed to call webhook: an error on the server"),
            ("/baduid", lambda req: {"allowed": True, "uid": "x"}, 'expected response.uid='),
            ("/notjson", lambda req: (200, b"<html>"), "couldn't get version/kind; json parse error"),
            ("/badpatch", lambda req: {"allowed": True, "patchType": "JSONPatch",
                                       "patch": base64.b64encode(b"{}").decode()},
             "received undecodable patch in webhook response"),
            ("/slow", lambda req: ("sleep", 1.5), "context deadline exceeded"),
        ]
        for i, (path, fn, msg) in enumerate(failures):
            with self.subTest(path=path):
                self.fake.handlers[path] = fn
                for policy, want in (("Fail", 500), ("Ignore", 201)):
                    self.set_webhooks([webhook_doc("MutatingWebhookConfiguration", "m", self.mutating(
                        "fail.test.io", path, failurePolicy=policy, timeoutSeconds=1))])
                    name = "f%d-%s" % (i, policy.lower())
                    code, obj, _ = self.alice.request("POST", self.path("pods"), pod(name))
                    self.assertEqual(code, want, obj)
                    if want == 500:
                        self.assertEqual(obj["reason"], "InternalError")
                        self.assertTrue(obj["message"].startswith(
                            'Internal error occurred: failed calling webhook "fail.test.io": '), obj["message"])
                        self.assertIn(msg, obj["message"])
        # A connection that cannot be made at all.
        self.set_webhooks([webhook_doc("MutatingWebhookConfiguration", "m", hook_spec(
            "down.test.io", "https://127.0.0.1:1/x", self.fake.ca_bundle))])
        code, obj, _ = self.alice.request("POST", self.path("pods"), pod("down"))
        self.assertEqual(code, 500)
        self.assertIn('Post "https://127.0.0.1:1/x?timeout=5s": dial tcp 127.0.0.1:1: connect: connection refused',
                      obj["message"])

    def test_reinvocation(self):
        # a.test.io (IfNeeded) runs first and sets a label from the annotation; b.test.io then
        # changes the annotation, so a.test.io runs once more; c.test.io (Never) does not.
        def first(req):
            ann = req["object"]["metadata"].get("annotations", {}).get("n", "0")
            return patch_of([{"op": "add", "path": "/metadata/labels/seen", "value": ann}])

        self.fake.handlers["/a"] = first
        self.fake.handlers["/b"] = lambda req: patch_of([{"op": "add", "path": "/metadata/annotations",
                                                          "value": {"n": "1"}}])
        self.fake.handlers["/c"] = lambda req: {"allowed": True}
        self.set_webhooks([webhook_doc("MutatingWebhookConfiguration", "m",
                                       self.mutating("a.test.io", "/a", reinvocationPolicy="IfNeeded"),
                                       self.mutating("c.test.io", "/c", reinvocationPolicy="Never"),
                                       self.mutating("b.test.io", "/b", reinvocationPolicy="IfNeeded"))])
        obj = self.alice.ok("POST", self.path("pods"), pod("p"))
        self.assertEqual(obj["metadata"]["labels"]["seen"], "1")
        # Round 1 reinvokes a.test.io; its change there makes b.test.io (IfNeeded, invoked before)
        # eligible too, exactly as the dispatcher's reinvocation context works.
        self.assertEqual([(c["webhook"], c["round"]) for c in self.calls(name="p")],
                         [("a.test.io", 0), ("c.test.io", 0), ("b.test.io", 0), ("a.test.io", 1), ("b.test.io", 1)])
        # The reinvoked webhook sees the object as the later webhook left it.
        self.assertEqual(self.reqs("/a")[1]["object"]["metadata"]["annotations"], {"n": "1"})

    def test_dry_run_update_delete_and_subresources(self):
        hooks = [self.mutating("all.test.io", "/v", ops=("*",), resources=("pods", "pods/status",
                                                                             "deployments/scale"),
                               groups=("", "apps"))]
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", *hooks)])
        self.ctl.ok("POST", self.path("pods") + "?dryRun=All", pod("p"))
        self.assertEqual(self.alice.request("GET", self.path("pods", "p"))[0], 404)
        self.ctl.ok("POST", self.path("pods"), pod("p"))
        self.ctl.ok("PATCH", self.path("pods", "p"), {"metadata": {"labels": {"x": "1"}}})
        self.ctl.ok("DELETE", self.path("pods", "p"))
        reqs = self.reqs("/v")
        user_reqs = [r for r in reqs if r["userInfo"]["username"] == CONTROLLER]
        # (A write that meets a concurrent one, here the kubelet's, runs admission again.)
        ops = [(r["operation"], r["dryRun"]) for r in user_reqs]
        ops = [o for i, o in enumerate(ops) if i == 0 or ops[i - 1] != o]
        self.assertEqual(ops, [("CREATE", True), ("CREATE", False), ("UPDATE", False), ("DELETE", False)])
        user_reqs = [r for i, r in enumerate(user_reqs)
                     if i == 0 or (r["operation"], r["dryRun"]) != (user_reqs[i - 1]["operation"],
                                                                    user_reqs[i - 1]["dryRun"])]
        self.assertEqual(user_reqs[0]["options"]["dryRun"], ["All"])
        upd, dele = user_reqs[2], user_reqs[3]
        self.assertEqual(upd["object"]["metadata"]["labels"], {"x": "1"})
        self.assertFalse(upd["oldObject"]["metadata"].get("labels"))
        self.assertEqual(upd["options"], {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})
        self.assertIsNone(dele["object"])
        self.assertEqual(dele["oldObject"]["metadata"]["name"], "p")
        self.assertEqual(dele["options"]["kind"], "DeleteOptions")
        # The kubelet's status writes are pods/status requests, as its node identity.
        kubelet = [r for r in reqs if r["userInfo"]["username"] == "system:node:sim-node-1"]
        self.assertTrue(kubelet)
        self.assertTrue(all(r.get("subResource") == "status" and r["kind"]["kind"] == "Pod" for r in kubelet))

    def test_scale_subresource_sends_a_scale(self):
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", self.mutating(
            "scale.test.io", "/scale", ops=("UPDATE",), groups=("apps",), resources=("deployments/scale",)))])
        self.alice.ok("POST", self.path("deployments"), deployment("web", enabled=False))
        self.alice.ok("PATCH", self.path("deployments", "web", "scale"), {"spec": {"replicas": 3}})
        req = self.reqs("/scale")[-1]  # the last try, if a concurrent write made it start again
        self.assertEqual(req["kind"], {"group": "autoscaling", "version": "v1", "kind": "Scale"})
        self.assertEqual(req["resource"], {"group": "apps", "version": "v1", "resource": "deployments"})
        self.assertEqual(req["subResource"], "scale")
        self.assertEqual((req["object"]["spec"]["replicas"], req["oldObject"]["spec"]["replicas"]), (3, 2))
        self.assertEqual(req["object"]["status"]["selector"], "app=web")

    def once(self, method, path, body=None, token=None):
        c = Client(self.srv.port, token=token)
        try:
            return c.request(method, path, body)[0]
        finally:
            c.close()

    def test_match_policy_equivalent_events(self):
        # A rule for core/v1 events also catches events.k8s.io/v1 writes under Equivalent (the
        # webhook gets the core/v1 form and requestKind names the original), not under Exact.
        hook = self.mutating("ev.test.io", "/ev", resources=("events",))
        exact = dict(self.mutating("exact.test.io", "/exact", resources=("events",)), matchPolicy="Exact")
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", hook, exact)])
        ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
              "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "test.io/c",
              "reportingInstance": "i", "action": "Test", "reason": "Testing", "type": "Normal",
              "regarding": {"kind": "Pod", "name": "p", "namespace": self.ns}, "note": "hello"}
        self.alice.ok("POST", "/apis/events.k8s.io/v1/namespaces/%s/events" % self.ns, ev)
        (req,) = self.reqs("/ev")
        self.assertEqual(req["kind"], {"group": "", "version": "v1", "kind": "Event"})
        self.assertEqual(req["requestKind"], {"group": "events.k8s.io", "version": "v1", "kind": "Event"})
        self.assertEqual(req["object"]["message"], "hello")  # converted: note -> message
        self.assertEqual(self.reqs("/exact"), [])

    def test_v1beta1_review_and_patch_on_delete(self):
        # The first version the webhook accepts that the server knows is sent; v1beta1 answers
        # need neither uid nor apiVersion/kind.
        self.fake.handlers["/b1"] = lambda req: {"allowed": True, "uid": ""}
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", self.mutating(
            "b1.test.io", "/b1", admissionReviewVersions=["v2", "v1beta1", "v1"]))])
        self.alice.ok("POST", self.path("pods"), pod("p"))
        with self.fake.lock:
            self.assertEqual([r["apiVersion"] for _, _, r in self.fake.reviews], ["admission.k8s.io/v1beta1"])
        # A mutating webhook may not patch a DELETE: an internal error, whatever its failurePolicy.
        self.fake.handlers["/del"] = lambda req: patch_of([{"op": "add", "path": "/x", "value": 1}])
        self.set_webhooks([webhook_doc("MutatingWebhookConfiguration", "m", self.mutating(
            "del.test.io", "/del", ops=("DELETE",), failurePolicy="Ignore"))])
        code, err, _ = self.alice.request("DELETE", self.path("pods", "p"))
        self.assertEqual((code, err["message"]), (500, 'Internal error occurred: admission webhook "del.test.io" '
                                                       'attempted to modify the object, which is not supported for '
                                                       'this operation'))
        self.assertEqual(self.alice.request("GET", self.path("pods", "p"))[0], 200)

    def test_users_file(self):
        self.assertEqual(self.once("GET", self.path("pods"), token="nobody"), 401)
        self.assertEqual(self.once("GET", self.path("pods")), 200)  # no token: system:anonymous
        users = dict(USERS, **{"bob-token": {"username": "bob"}})
        with open(self.users_file + ".new", "w") as f:
            json.dump(users, f)
        os.replace(self.users_file + ".new", self.users_file)
        self.set_webhooks([webhook_doc("ValidatingWebhookConfiguration", "v", self.mutating("u.test.io", "/u"))])
        wait_until(lambda: self.once("POST", self.path("pods"), pod("b"), token="bob-token") == 201, 5, msg="bob")
        (req,) = self.reqs("/u")
        self.assertEqual(req["userInfo"], {"username": "bob", "groups": ["system:authenticated"]})


# ----------------------------------------------------------------------------------------------
# The real webhook binary with the chart's configuration.

@unittest.skipUnless(HAVE_BINARY, "needs the inplace-webhook binary and the dev certificates")
class RealWebhookTest(ServerCase):
    @classmethod
    def setUpClass(cls):
        from webhook_process import Webhook  # noqa: PLC0415 - tests/curl helper
        cls.tmp_wh = tempfile.mkdtemp(prefix="iw-admission-webhook-")
        cls.webhook = Webhook(BINARY, CERT_DIR, log_path=os.path.join(cls.tmp_wh, "webhook.log")).start()
        cls.start_server("--webhook-config", CONFIG, "--webhook-resolve", "127.0.0.1:%d" % cls.webhook.port,
                         "--webhook-ca", os.path.join(CERT_DIR, "ca.crt"))

    @classmethod
    def tearDownClass(cls):
        errors = cls.stop_server()
        cls.webhook.stop()
        shutil.rmtree(cls.tmp_wh, ignore_errors=True)
        if errors:
            raise AssertionError("the server logged internal errors:\n" + "\n".join(errors))

    def tearDown(self):
        self.alice.ok("POST", "/_test/reset")  # back to the configuration from --webhook-config
        super().tearDown()

    def rolled_out(self, name, replicas=2):
        def done():
            d = self.alice.ok("GET", self.path("deployments", name))
            st = d.get("status") or {}
            return (st.get("observedGeneration") == d["metadata"]["generation"] and
                    st.get("updatedReplicas") == replicas and st.get("availableReplicas") == replicas and
                    st.get("replicas") == replicas) and d

        return wait_until(done, 15, msg="rollout of " + name)

    def start_in_place_update(self, name="web"):
        self.alice.ok("POST", self.path("deployments"), deployment(name))
        self.rolled_out(name)
        code, obj, resp = self.alice.request("PATCH", self.path("deployments", name), image_patch("nginx:1.27"),
                                             "application/strategic-merge-patch+json")
        self.assertEqual(code, 200, obj)
        return obj, resp

    def test_user_image_change_is_stored_paused_with_warning(self):
        obj, resp = self.start_in_place_update()
        self.assertTrue(obj["spec"]["paused"])
        state = json.loads(obj["metadata"]["annotations"][IN_PROGRESS])
        self.assertTrue(state["pausedByUs"])
        self.assertNotEqual(state["from"], state["to"])
        self.assertTrue(any("in-place update" in w for w in resp.headers.get_all("Warning") or []),
                        resp.headers.get_all("Warning"))
        stored = self.alice.ok("GET", self.path("deployments", "web"))
        self.assertEqual(stored["metadata"]["annotations"][IN_PROGRESS], obj["metadata"]["annotations"][IN_PROGRESS])
        self.assertEqual(stored["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27")
        # Paused: the Deployment controller rolls nothing, the pods keep the old image.
        self.alice.ok("GET", "/_test/idle")
        images = {p["spec"]["containers"][0]["image"] for p in self.alice.ok("GET", self.path("pods"))["items"]}
        self.assertEqual(images, {"nginx:1.26"})
        calls = self.calls(webhook="mutate-deployments.inplace-webhook.io", user="alice")
        self.assertTrue(calls and all(c["allowed"] for c in calls))

    def test_controller_change_is_stored_untouched(self):
        self.ctl.ok("POST", self.path("deployments"), deployment("web"))
        self.rolled_out("web")
        obj = self.ctl.ok("PATCH", self.path("deployments", "web"), image_patch("nginx:1.27"),
                          "application/strategic-merge-patch+json")
        self.assertFalse(obj["spec"].get("paused", False))
        self.assertNotIn(IN_PROGRESS, obj["metadata"].get("annotations") or {})
        self.rolled_out("web")  # the native rollout ran

    def test_hand_edit_of_in_progress_is_denied(self):
        obj, _ = self.start_in_place_update()
        # With the mutating webhook answering, a hand edit is put back by it (state comes from the
        # stored object): the write succeeds and changes nothing of ours.
        code, edited, _ = self.alice.patch(self.path("deployments", "web"),
                                           {"metadata": {"annotations": {IN_PROGRESS: "{}"}}})
        self.assertEqual(code, 200, edited)
        self.assertEqual(edited["metadata"]["annotations"][IN_PROGRESS], obj["metadata"]["annotations"][IN_PROGRESS])
        # When the mutating webhook is skipped (failurePolicy Ignore, unreachable), the validating
        # webhook denies it, and says how to abort.
        docs = load_yaml_docs(CONFIG)
        for d in docs:
            if d["kind"] == "MutatingWebhookConfiguration":
                for h in d["webhooks"]:
                    h["failurePolicy"] = "Ignore"
                    h["clientConfig"] = {"url": "https://127.0.0.1:1/mutate/deployments"}
        self.set_webhooks(docs)
        self.alice.ok("DELETE", "/_test/admission")
        for patch in ({"metadata": {"annotations": {IN_PROGRESS: "{}"}}}, {"spec": {"paused": False}}):
            with self.subTest(patch=patch):
                code, err, _ = self.alice.patch(self.path("deployments", "web"), patch)
                self.assertEqual(code, 403, err)
                self.assertEqual(err["reason"], "Forbidden")
                self.assertTrue(err["message"].startswith(
                    'admission webhook "validate-deployments.inplace-webhook.io" denied the request: '), err)
                self.assertIn("inplace-webhook.io/abort", err["message"])
        failed_open = self.calls(webhook="mutate-deployments.inplace-webhook.io")
        self.assertTrue(failed_open and all("connection refused" in c["error"] for c in failed_open))

    def test_scale_subresource_is_not_sent_to_the_webhook(self):
        self.alice.ok("POST", self.path("deployments"), deployment("web"))
        self.rolled_out("web")
        self.alice.ok("DELETE", "/_test/admission")
        scale = self.alice.ok("PATCH", self.path("deployments", "web", "scale"), {"spec": {"replicas": 3}})
        self.assertEqual(scale["spec"]["replicas"], 3)
        self.assertEqual(self.calls(subResource="scale"), [])
        self.assertEqual(self.calls(resource="apps/v1/deployments", user="alice"), [])
        self.rolled_out("web", 3)

    def test_replicaset_controller_pods_get_the_state_label(self):
        self.alice.ok("POST", self.path("deployments"), deployment("web"))
        self.alice.ok("POST", self.path("deployments"), deployment("plain", enabled=False))
        self.rolled_out("web")
        self.rolled_out("plain")
        for p in self.alice.ok("GET", self.path("pods"))["items"]:
            labels = p["metadata"]["labels"]
            if labels["app"] == "web":
                self.assertEqual(labels.get(STATE), "Normal")
                self.assertIn("inplace-webhook.io/state-timestamp", p["metadata"].get("annotations") or {})
            else:
                self.assertNotIn(STATE, labels)
        calls = self.calls(webhook="mutate-pods.inplace-webhook.io")
        self.assertEqual(len(calls), 2)  # only the opted-in template's pods (objectSelector)
        for c in calls:
            self.assertEqual((c["user"], c["operation"], c["name"], c["patched"]),
                             ("system:serviceaccount:kube-system:replicaset-controller", "CREATE", "", True))

    def test_user_changing_the_state_label_is_denied(self):
        self.alice.ok("POST", self.path("deployments"), deployment("web", replicas=1))
        self.rolled_out("web", 1)
        (p,) = self.alice.ok("GET", self.path("pods"))["items"]
        patch = {"metadata": {"labels": {STATE: "Updating"}}}
        code, err, _ = self.alice.patch(self.path("pods", p["metadata"]["name"]), patch)
        self.assertEqual(code, 403, err)
        self.assertIn('admission webhook "validate-pods.inplace-webhook.io" denied the request', err["message"])
        self.assertIn(STATE, err["message"])
        code, obj, _ = self.ctl.patch(self.path("pods", p["metadata"]["name"]), patch)
        self.assertEqual((code, obj["metadata"]["labels"][STATE]), (200, "Updating"))

    def test_failure_policy_with_the_webhook_stopped(self):
        self.alice.ok("POST", self.path("deployments"), deployment("web", replicas=1))
        self.rolled_out("web", 1)
        (p,) = self.alice.ok("GET", self.path("pods"))["items"]
        self.webhook.stop()
        try:
            # mutate-deployments is Fail: the user's update is refused.
            code, err, _ = self.alice.request("PATCH", self.path("deployments", "web"), image_patch("nginx:1.27"),
                                              "application/strategic-merge-patch+json")
            self.assertEqual(code, 500, err)
            self.assertEqual(err["reason"], "InternalError")
            self.assertIn('Internal error occurred: failed calling webhook "mutate-deployments.inplace-webhook.io": '
                          'failed to call webhook: Post "https://inplace-webhook.inplace-webhook.svc:443/mutate/'
                          'deployments?timeout=10s": dial tcp 127.0.0.1:%d: connect: connection refused'
                          % self.webhook.port, err["message"])
            # validate-pods and mutate-pods are Ignore: pod writes and the ReplicaSet's pod
            # creations go through, without the state label.
            code, obj, _ = self.alice.patch(self.path("pods", p["metadata"]["name"]),
                                            {"metadata": {"labels": {STATE: "Updated"}}})
            self.assertEqual(code, 200, obj)
            self.ctl.ok("PATCH", self.path("deployments", "web", "scale"), {"spec": {"replicas": 2}})
            wait_until(lambda: len(self.alice.ok("GET", self.path("pods"))["items"]) == 2, msg="second pod")
            new = [x for x in self.alice.ok("GET", self.path("pods"))["items"]
                   if x["metadata"]["name"] != p["metadata"]["name"]]
            self.assertNotIn(STATE, new[0]["metadata"]["labels"])
        finally:
            self.webhook.start()
        code, obj, _ = self.alice.request("PATCH", self.path("deployments", "web"), image_patch("nginx:1.27"),
                                          "application/strategic-merge-patch+json")
        self.assertEqual(code, 200, obj)

    def test_reinvocation_after_a_later_webhook(self):
        # A second mutating configuration, ordered after the chart's, touches the Deployment: the
        # chart's mutate-deployments (reinvocationPolicy IfNeeded) runs again on the result and
        # must keep its decision (pausedByUs stays true although paused is true by then).
        fake = FakeWebhook(CERT_DIR)
        try:
            fake.handlers["/touch"] = lambda req: patch_of([
                {"op": "add", "path": "/metadata/annotations/example.com~1touched", "value": "yes"}])
            self.alice.ok("POST", "/_test/webhooks", webhook_doc("MutatingWebhookConfiguration", "zz-touch", hook_spec(
                "touch.example.com", fake.url("/touch"), fake.ca_bundle, resources=("deployments",),
                groups=("apps",), ops=("UPDATE",))))
            obj, _ = self.start_in_place_update()
        finally:
            fake.stop()
        self.assertEqual(obj["metadata"]["annotations"]["example.com/touched"], "yes")
        self.assertTrue(obj["spec"]["paused"])
        self.assertTrue(json.loads(obj["metadata"]["annotations"][IN_PROGRESS])["pausedByUs"])
        rounds = [(c["webhook"], c["round"]) for c in self.calls(type="mutating", user="alice")]
        self.assertEqual(rounds[-3:], [("mutate-deployments.inplace-webhook.io", 0), ("touch.example.com", 0),
                                       ("mutate-deployments.inplace-webhook.io", 1)])

    def test_dry_run(self):
        self.alice.ok("POST", self.path("deployments"), deployment("web"))
        before = self.rolled_out("web")
        code, obj, resp = self.alice.request("PATCH", self.path("deployments", "web") + "?dryRun=All",
                                             image_patch("nginx:1.27"), "application/strategic-merge-patch+json")
        self.assertEqual(code, 200, obj)
        self.assertTrue(obj["spec"]["paused"])  # the answer shows the mutation...
        self.assertIn(IN_PROGRESS, obj["metadata"]["annotations"])
        self.assertTrue(resp.headers.get_all("Warning"))
        after = self.alice.ok("GET", self.path("deployments", "web"))  # ...nothing is stored
        self.assertEqual(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"])
        calls = self.calls(user="alice", operation="UPDATE")
        self.assertTrue(calls and all(c["dryRun"] for c in calls))


# ----------------------------------------------------------------------------------------------
# tests/e2e/webhook-config.yaml is the chart's configuration.

class ChartSyncTest(unittest.TestCase):
    """Parses the chart's template text (no Helm here) for what matters to admission: names,
    paths, rules, selectors, policies; the values come from values.yaml."""

    CHART = os.path.join(SOURCE_DIR, "charts", "inplace-webhook")

    def template_hooks(self):
        import yaml  # noqa: PLC0415
        with open(os.path.join(self.CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        with open(os.path.join(self.CHART, "templates", "webhooks.yaml")) as f:
            text = f.read()
        with open(os.path.join(self.CHART, "templates", "_helpers.tpl")) as f:
            helpers = f.read()

        def value(expr):
            node = values
            for part in expr.strip().lstrip(".").split(".")[1:]:
                node = node[part]
            return node

        def resolve(line):
            return re.sub(r"\{\{-?\s*(\.Values\.[A-Za-z0-9_.]+)\s*-?\}\}", lambda m: str(value(m.group(1))), line)

        # What the default values leave out: a `{{- if .Values.X }}` block whose value is false (its own
        # nested with/if/range blocks counted to find its end).
        def drop_disabled(text):
            out, skip, depth = [], False, 0
            for line in text.splitlines(keepends=True):
                m = re.match(r"\s*\{\{-? if (\.Values\.[A-Za-z0-9_.]+) -?\}\}\s*$", line)
                if not skip and m and not value(m.group(1)):
                    skip, depth = True, 1
                    continue
                if skip:
                    if re.match(r"\s*\{\{-? (if|with|range) ", line):
                        depth += 1
                    elif re.match(r"\s*\{\{-? end -?\}\}", line):
                        depth -= 1
                        skip = depth > 0
                    continue
                out.append(line)
            return "".join(out)

        text = drop_disabled(text)
        obj_sel = re.search(r'define "inplace-webhook.objectSelector" -\}\}\n(.*?)\{\{- end', helpers, re.S).group(1)
        object_selector = yaml.safe_load(obj_sel)
        hooks = {}
        for kind_doc in re.split(r"^---$", text, flags=re.M):
            kind = re.search(r"^kind: (\w+)", kind_doc, re.M)
            if not kind:
                continue
            for block in re.split(r"^  - name: ", kind_doc, flags=re.M)[1:]:
                lines = [resolve(x) for x in ("name: " + block).splitlines()
                         if "{{" not in x or ".Values." in x]
                lines = [x for x in lines if "{{" not in x]
                # Drop the selector/client blocks filled by helpers; keep literal fields.
                doc = yaml.safe_load("\n".join(x[4:] if x.startswith("    ") else x for x in lines))
                doc.pop("namespaceSelector", None)
                doc["objectSelector"] = object_selector
                hooks[doc["name"]] = (kind.group(1), doc)
        return hooks, values

    def test_config_matches_the_chart_template(self):
        hooks, values = self.template_hooks()
        config = {}
        for d in load_yaml_docs(CONFIG):
            for h in d["webhooks"]:
                config[h["name"]] = (d["kind"], h)
        self.assertEqual(sorted(config), sorted(hooks))
        for name, (kind, want) in hooks.items():
            got_kind, got = config[name]
            with self.subTest(webhook=name):
                self.assertEqual(got_kind, kind)
                for field in ("rules", "failurePolicy", "sideEffects", "matchPolicy", "reinvocationPolicy",
                              "admissionReviewVersions", "timeoutSeconds", "objectSelector"):
                    self.assertEqual(got.get(field), want.get(field), field)
                self.assertEqual(got["clientConfig"]["service"]["path"], want["clientConfig"]["service"]["path"])
                self.assertEqual(got["clientConfig"]["service"]["port"], values["service"]["port"])
                ns_sel = got["namespaceSelector"]["matchExpressions"]
                self.assertEqual(ns_sel, [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                           "values": ["kube-system", "inplace-webhook"] +
                                                     values["webhooks"]["excludeNamespaces"]}])
        # And the server accepts it.
        self.assertEqual(kadmission.Chain().add(load_yaml_docs(CONFIG)), 2)


if __name__ == "__main__":
    if BINARY and not HAVE_BINARY:  # given a binary, never skip silently
        sys.exit("test_admission.py: %s is not executable, or the certificates are missing in %s (ca.crt, "
                 "tls.crt, tls.key)" % (BINARY, CERT_DIR))
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")], verbosity=1)
