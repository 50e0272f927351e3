#!/usr/bin/env python3
"""A test Kubernetes API server: the REST surface of kube-apiserver for pods, deployments,
replicasets, statefulsets (stored only), leases and events, with a simulated kubelet, ReplicaSet and Deployment controller,
admission webhooks called as kube-apiserver calls them, fault injection and a /_test control API.
Python 3 standard library only (python3-yaml for YAML webhook configurations). See README.md.

    python3 tests/apiserver/server.py --port 0 --port-file PATH [--token-file F] [--users-file F]
        [--tls-cert F --tls-key F] [--log-file F]
        [--webhook-config F ...] [--webhook-resolve HOST:PORT] [--webhook-ca F]
"""

import argparse
import json
import os
import random
import re
import select
import signal
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kadmission  # noqa: E402
import klabels  # noqa: E402
import kpatch  # noqa: E402
import ksim  # noqa: E402
import kstore  # noqa: E402
from kerrors import ApiError, FieldError  # noqa: E402

MAX_BODY = 3 * 1024 * 1024
PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json"]
BODY_TYPES = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
VERSION_INFO = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-iw-test", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z", "goVersion": "go1.22.5",
                "compiler": "gc", "platform": "linux/amd64"}


def _bool_param(v):
    return v is not None and v.lower() in ("true", "1", "t", "yes")


class Faults:
    """Fault injection as configured by POST /_test/faults."""

    def __init__(self):
        self.lock = threading.Lock()
        self.clear()

    def clear(self):
        with self.lock:
            self.cfg = {}
            self.rng = random.Random(1)
            self.path_re = None
            self.conflicted = set()
            self.injected = 0

    def set(self, cfg):
        if not isinstance(cfg, dict):
            raise ApiError.bad_request("faults must be a JSON object")
        path_re = None
        if cfg.get("matchPath"):
            try:
                path_re = re.compile(cfg["matchPath"])
            except re.error as e:
                raise ApiError.bad_request("matchPath: %s" % e)
        with self.lock:
            self.cfg = dict(cfg)
            self.rng = random.Random(cfg.get("seed", 1))
            self.path_re = path_re
            self.conflicted = set()
            self.injected = 0

    def get(self):
        with self.lock:
            return dict(self.cfg, injected=self.injected)

    def matches(self, method, verb, path):
        with self.lock:
            cfg = self.cfg
            if not cfg:
                return False
            if self.path_re is not None and not self.path_re.search(path):
                return False
            methods = cfg.get("matchMethods")
            if methods:
                wanted = {m.upper() for m in methods}
                if method.upper() not in wanted and verb.upper() not in wanted:
                    return False
            return True

    def latency(self):
        with self.lock:
            return float(self.cfg.get("latencyMs") or 0) / 1000.0

    def pick_error(self):
        with self.lock:
            rate = float(self.cfg.get("errorRate") or 0)
            limit = self.cfg.get("maxErrors")
            if rate <= 0 or (limit is not None and self.injected >= int(limit)):
                return None
            if self.rng.random() >= rate:
                return None
            self.injected += 1
            code = int(self.cfg.get("errorCode") or 500)
            retry = int(self.cfg.get("retryAfterSeconds") or 1)
        if code == 429:
            return ApiError.too_many_requests(retry)
        if code == 500:
            return ApiError.internal("injected fault")
        if code == 503:
            return ApiError(503, "ServiceUnavailable", "injected fault: the server is currently unable to handle the "
                                                       "request", {"retryAfterSeconds": retry},
                            headers={"Retry-After": str(retry)})
        if code == 504:
            return ApiError.timeout("injected fault", retry)
        return ApiError.generic(code)

    def first_write_conflict(self, key):
        with self.lock:
            if not self.cfg.get("conflictOnFirstWrite") or key in self.conflicted:
                return False
            self.conflicted.add(key)
            self.injected += 1
            return True

    def close_watch_after(self):
        with self.lock:
            n = self.cfg.get("closeWatchAfterEvents")
            return int(n) if n else 0


class RequestLog:
    def __init__(self, limit=100000):
        self.lock = threading.Lock()
        self.items = []
        self.limit = limit

    def add(self, item):
        with self.lock:
            self.items.append(item)
            if len(self.items) > self.limit:
                del self.items[: len(self.items) - self.limit]

    def get(self):
        with self.lock:
            return list(self.items)

    def clear(self):
        with self.lock:
            self.items = []


class Route:
    def __init__(self, rt, ns, name=None, sub=None, watch=False):
        self.rt = rt
        self.ns = ns
        self.name = name
        self.sub = sub
        self.watch = watch


class App:
    """Everything the handlers share."""

    def __init__(self, args):
        self.args = args
        self.store = kstore.Store(history_limit=args.history_limit)
        self.faults = Faults()
        self.requests = RequestLog()
        self.bookmark_interval = args.bookmark_interval_ms / 1000.0
        self.log_lock = threading.Lock()
        self.log_file = open(args.log_file, "a", buffering=1) if args.log_file else None
        self.auth = kadmission.Authenticator(args.token_file, args.users_file, log=self.log)
        self.admission = kadmission.Chain(resolve=args.webhook_resolve, default_ca=args.webhook_ca_pem,
                                          log=self.log)
        self.sim = ksim.Simulation(self.store, log=self.log, admission=self.admission)
        self.store.listeners.append(self.sim.on_event)
        self.port = 0

    def log(self, msg):
        if self.log_file:
            with self.log_lock:
                self.log_file.write("%s %s\n" % (time.strftime("%H:%M:%S"), msg))

    def bind(self, handler, rt, operation, ns, name, subresource="", dry_run=False, options=None, **kw):
        """The admission binding of one client request (None when no webhook is configured)."""
        return self.admission.bind(rt, operation, ns, name, handler._user, subresource=subresource or "",
                                   dry_run=dry_run, options=options, warnings=handler._warnings, **kw)


# ----------------------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "iw-test-apiserver"
    sys_version = ""
    _warnings = ()
    _user = kadmission.ANONYMOUS

    def setup(self):
        if self.server.tls_context is not None:
            self.request.settimeout(10)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.request.close()
                raise
            self.request.settimeout(None)
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def send_error(self, code, message=None, explain=None):
        """http.server's own errors (bad request line, unknown method) as Status bodies too."""
        self.close_connection = True
        self._reqinfo = None
        self._logged = True
        err = ApiError.generic(code, message)
        try:
            self.send_json(code, err.status())
        except OSError:
            pass

    def log_message(self, fmt, *args):
        self.server.app.log("%s %s" % (self.address_string(), fmt % args))

    @property
    def app(self):
        return self.server.app

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- plumbing --------------------------------------------------------------------------------
    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is %d" % MAX_BODY)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.rfile.read(n)
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is %d" % MAX_BODY)
        return self.rfile.read(n) if n > 0 else b""

    def send_bytes(self, code, body, content_type="application/json", headers=None):
        reason = self.responses.get(code, ("",))[0]
        lines = ["HTTP/1.1 %d %s" % (code, reason),
                 "Content-Type: " + content_type,
                 "Content-Length: %d" % len(body),
                 "Cache-Control: no-cache, private",
                 "Date: " + self.date_time_string()]
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        if self._warnings:
            for k, v in kadmission.warning_headers(self._warnings):
                lines.append("%s: %s" % (k, v))
        if self.close_connection:
            lines.append("Connection: close")
        self._code = code
        self.log_request_once()  # before answering: a client that reads the log next sees this call
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def send_json(self, code, obj, headers=None):
        self.send_bytes(code, kstore.dumps(obj), headers=headers)

    def send_error_status(self, err):
        self.send_json(err.code, err.status(), headers=err.headers)

    def dispatch(self, method):
        self._code = 0
        self._logged = False
        self._reqinfo = None
        self._warnings = []
        self._user = kadmission.ANONYMOUS
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        raw_query = url.query
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(raw_query, keep_blank_values=True).items()}
        ctype = self.headers.get("Content-Type") or ""
        body = b""
        verb = method.lower()
        try:
            body = self.read_body()
        except ApiError as e:
            self.close_connection = True
            self.send_error_status(e)
            return
        except (ValueError, OSError):
            self.close_connection = True
            self.send_error_status(ApiError.bad_request("malformed request body"))
            return
        if path.startswith("/_test/") or path in ("/healthz", "/readyz", "/livez"):
            try:
                self.handle_control(method, path, query, body)
            except ApiError as e:
                self.send_error_status(e)
            except Exception as e:  # noqa: BLE001
                self.send_error_status(ApiError.internal(repr(e)))
            return
        self._reqinfo = dict(method=method, verb=verb, path=path, query=raw_query, contentType=ctype,
                             userAgent=self.headers.get("User-Agent") or "",
                             body=body[:65536].decode("utf-8", "replace"))
        try:
            verb = self.verb_of(method, path, query)
            self._reqinfo["verb"] = verb
            user = self.app.auth.authenticate(self.headers.get("Authorization"))
            if user is None:
                raise ApiError.unauthorized()
            self._user = user
            self._reqinfo["user"] = user["username"]
            faults = self.app.faults
            self._fault_match = faults.matches(method, verb, path)
            if self._fault_match:
                lat = faults.latency()
                if lat > 0:
                    time.sleep(lat)
                err = faults.pick_error()
                if err is not None:
                    raise err
            self.handle_api(method, path, query, body, ctype)
        except ApiError as e:
            if not self._code:
                self.send_error_status(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - a bug here must still answer with a Status
            self.app.log("internal error: %s" % traceback.format_exc())
            if not self._code:
                self.send_error_status(ApiError.internal(repr(e)))
        finally:
            self.log_request_once()

    def log_request_once(self):
        """Adds this request to the /_test/requests log (watches are logged when they start)."""
        if self._logged or self._reqinfo is None:
            return
        self._logged = True
        self.app.requests.add(dict(self._reqinfo, code=self._code, time=time.time()))

    def verb_of(self, method, path, query):
        if method == "GET":
            if _bool_param(query.get("watch")) or "/watch/" in path:
                return "watch"
            parts = [p for p in path.split("/") if p]
            core = parts[2:] if parts[:1] == ["api"] else parts[3:]
            if core[:1] == ["namespaces"]:
                core = core[2:]
            return "get" if len(core) >= 2 else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())

    # -- /_test ----------------------------------------------------------------------------------
    def parse_json_body(self, body, default=None):
        if not body.strip():
            return default
        try:
            return json.loads(body)
        except ValueError as e:
            raise ApiError.bad_request("invalid JSON: %s" % e)

    def handle_control(self, method, path, query, body):
        app = self.app
        if path in ("/healthz", "/readyz", "/livez"):
            self.send_bytes(200, b"ok", content_type="text/plain; charset=utf-8")
            return
        if path == "/_test/compact" and method == "POST":
            rv = app.store.compact()
            self.send_json(200, {"resourceVersion": str(rv)})
        elif path == "/_test/sim":
            if method == "POST":
                app.sim.update_settings(self.parse_json_body(body, {}))
                bm = app.sim.settings.get("bookmarkIntervalMs")
                if bm:
                    app.bookmark_interval = bm / 1000.0
            settings = dict(app.sim.settings, bookmarkIntervalMs=int(app.bookmark_interval * 1000))
            self.send_json(200, settings)
        elif path == "/_test/images":
            if method == "POST":
                app.sim.set_images(self.parse_json_body(body, {}))
            elif method == "DELETE":
                app.sim.clear_images()
            self.send_json(200, app.sim.images())
        elif path == "/_test/faults":
            if method == "POST":
                app.faults.set(self.parse_json_body(body, {}))
            elif method == "DELETE":
                app.faults.clear()
            self.send_json(200, app.faults.get())
        elif path == "/_test/requests":
            if method == "DELETE":
                app.requests.clear()
                self.send_json(200, {"items": []})
            else:
                self.send_json(200, {"items": app.requests.get()})
        elif path == "/_test/webhooks":
            if method == "POST":
                try:
                    n = app.admission.add(kadmission.load_documents(body))
                except kadmission.ConfigError as e:
                    raise ApiError(422, "Invalid", str(e))
                if n == 0:
                    raise ApiError.bad_request("no MutatingWebhookConfiguration or ValidatingWebhookConfiguration "
                                               "in the body")
            elif method == "DELETE":
                app.admission.clear()
            self.send_json(200, {"items": app.admission.list_configs()})
        elif path == "/_test/admission":
            if method == "DELETE":
                app.admission.clear_call_log()
            self.send_json(200, {"items": [] if method == "DELETE" else app.admission.call_log()})
        elif path == "/_test/reset" and method == "POST":
            app.admission.restore_startup()
            app.admission.clear_call_log()
            app.faults.clear()
            app.sim.reset()
            app.store.reset()
            app.requests.clear()
            app.bookmark_interval = app.args.bookmark_interval_ms / 1000.0
            self.send_json(200, {"resourceVersion": str(app.store.current_rv())})
        elif path == "/_test/idle":
            timeout = float(query.get("timeoutMs") or 10000) / 1000.0
            idle = app.sim.wait_idle(timeout)
            self.send_json(200 if idle else 504, {"idle": idle, "resourceVersion": str(app.store.current_rv())})
        else:
            raise ApiError.not_found_path()

    # -- API routing -----------------------------------------------------------------------------
    def route(self, path):
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        if not parts:
            return "root", None
        if parts[0] == "api":
            if len(parts) == 1:
                return "api", None
            if parts[1] != "v1":
                return None, None
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return "apis", None
            if len(parts) == 2:
                return "group", parts[1]
            group, version, rest = parts[1], parts[2], parts[3:]
        elif parts == ["version"]:
            return "version", None
        else:
            return None, None
        if not rest:
            return "resources", (group, version)
        watch = False
        if rest[0] == "watch":
            watch = True
            rest = rest[1:]
        if group == "" and rest[0] == "namespaces" and (len(rest) <= 2):
            return "namespace", rest[1] if len(rest) == 2 else None
        ns = ""
        if rest[0] == "namespaces":
            if len(rest) < 3:
                return None, None
            ns = rest[1]
            rest = rest[2:]
        rt = kstore.BY_PATH.get((group, version, rest[0]))
        if rt is None or len(rest) > 3:
            return None, None
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        if sub is not None and not ((sub == "status" and rt.has_status) or (sub == "scale" and rt.has_scale)):
            return None, None
        return "resource", Route(rt, ns, name, sub, watch)

    def handle_api(self, method, path, query, body, ctype):
        if path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
            # Who the caller is, as kube-apiserver answers it (nothing is stored).
            if method != "POST":
                raise ApiError.generic(405)
            info = {k: v for k, v in self._user.items() if k in ("username", "uid", "groups", "extra")}
            return self.send_json(201, {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                                        "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}})
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            # May the caller do this? This server authorizes every authenticated request, so always yes, as
            # kube-apiserver answers for a user whose RBAC grants it (nothing is stored).
            if method != "POST":
                raise ApiError.generic(405)
            review = self.parse_json_body(body, {})
            if not isinstance(review, dict):
                raise ApiError.bad_request("Object 'Kind' is missing")
            return self.send_json(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                                        "metadata": {"creationTimestamp": None}, "spec": review.get("spec") or {},
                                        "status": {"allowed": True, "reason": "this API server authorizes every "
                                                                             "authenticated request"}})
        kind, r = self.route(path)
        if kind is None:
            raise ApiError.not_found_path()
        if kind != "resource":
            if method != "GET":
                raise ApiError.generic(405)
            return self.handle_discovery(kind, r)
        if r.name is None:
            if method == "GET":
                if r.watch or _bool_param(query.get("watch")):
                    return self.do_watch(r, query)
                return self.do_list(r, query)
            if method == "POST":
                if not r.ns:
                    raise ApiError.generic(405)
                return self.do_create(r, query, body, ctype)
            if method == "DELETE":
                return self.do_delete_collection(r, query, body)
            raise ApiError.generic(405)
        if r.watch:
            if method != "GET":
                raise ApiError.generic(405)
            query = dict(query, fieldSelector=",".join(
                x for x in ("metadata.name=" + r.name, query.get("fieldSelector")) if x))
            r.name = None
            return self.do_watch(r, query)
        if method == "GET":
            e = self.app.store.get(r.rt, r.ns, r.name)
            if r.sub == "scale":
                return self.send_json(200, self.to_scale(r.rt, e.obj))
            return self.send_bytes(200, r.rt.encode_full(e))
        if method in ("PUT", "PATCH"):
            return self.do_update(r, method, query, body, ctype)
        if method == "DELETE":
            if r.sub:
                raise ApiError.generic(405)
            return self.do_delete(r, query, body)
        raise ApiError.generic(405)

    def handle_discovery(self, kind, arg):
        if kind == "version":
            return self.send_json(200, VERSION_INFO)
        if kind == "api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:%d" % self.app.port}]})
        if kind == "apis" or kind == "group":
            groups = {}
            for rt in kstore.RESOURCES:
                if rt.group:
                    groups.setdefault(rt.group, rt.version)
            items = [{"name": g, "versions": [{"groupVersion": g + "/" + v, "version": v}],
                      "preferredVersion": {"groupVersion": g + "/" + v, "version": v}}
                     for g, v in sorted(groups.items())]
            if kind == "group":
                for it in items:
                    if it["name"] == arg:
                        return self.send_json(200, dict(it, kind="APIGroup", apiVersion="v1"))
                raise ApiError.not_found_path()
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": items})
        if kind == "resources":
            group, version = arg
            rts = [rt for rt in kstore.RESOURCES if rt.group == group and rt.version == version]
            if not rts:
                raise ApiError.not_found_path()
            res = []
            for rt in rts:
                res.append({"name": rt.plural, "singularName": rt.kind.lower(), "namespaced": True, "kind": rt.kind,
                            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                      "watch"]})
                if rt.has_status:
                    res.append({"name": rt.plural + "/status", "singularName": "", "namespaced": True,
                                "kind": rt.kind, "verbs": ["get", "patch", "update"]})
                if rt.has_scale:
                    res.append({"name": rt.plural + "/scale", "singularName": "", "namespaced": True,
                                "group": "autoscaling", "version": "v1", "kind": "Scale",
                                "verbs": ["get", "patch", "update"]})
            if group == "":
                res.append({"name": "namespaces", "singularName": "namespace", "namespaced": False,
                            "kind": "Namespace", "verbs": ["get", "list"]})
            return self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                        "groupVersion": (group + "/" + version) if group else version,
                                        "resources": res})
        if kind == "namespace":
            if arg is None:
                names = set()
                with self.app.store.lock:
                    for per_ns in self.app.store.data.values():
                        names.update(per_ns.keys())
                names.update(("default", "kube-system"))
                items = [self.namespace_obj(n) for n in sorted(names)]
                return self.send_json(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {
                    "resourceVersion": str(self.app.store.current_rv())}, "items": items})
            return self.send_json(200, dict(self.namespace_obj(arg), kind="Namespace", apiVersion="v1"))
        if kind == "root":
            return self.send_json(200, {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]})
        raise ApiError.not_found_path()

    @staticmethod
    def namespace_obj(name):
        return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    # -- verbs -----------------------------------------------------------------------------------
    def selectors(self, rt, query):
        lreqs = klabels.parse_label_selector(query.get("labelSelector"))
        freqs = klabels.parse_field_selector(query.get("fieldSelector"))
        for k, _, _ in freqs:
            if k not in rt.field_labels:
                raise ApiError.bad_request('field label not supported: %s' % k)
        return lreqs, freqs

    def do_list(self, r, query):
        rt = r.rt
        lreqs, freqs = self.selectors(rt, query)
        limit = 0
        if query.get("limit"):
            try:
                limit = int(query["limit"])
            except ValueError:
                raise ApiError.bad_request('limit: Invalid value: "%s": must be an integer' % query["limit"])
        rv_param = query.get("resourceVersion")
        if rv_param and rv_param != "0" and not query.get("continue"):
            want = kstore._parse_rv(rv_param)
            deadline = time.time() + 3.0
            while self.app.store.current_rv() < want:
                if time.time() >= deadline:
                    raise ApiError.timeout("Too large resource version: %d, current: %d" %
                                           (want, self.app.store.current_rv()), 1,
                                           [{"reason": "ResourceVersionTooLarge",
                                             "message": "Too large resource version"}])
                time.sleep(0.02)
        entries, rv, token, remaining = self.app.store.list(
            rt, r.ns, lreqs, freqs, limit, query.get("continue"), rv_param, query.get("resourceVersionMatch"))
        meta = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        head = kstore.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})[:-1]
        body = head + b',"items":[' + b",".join(rt.encode_item(e) for e in entries) + b"]}"
        self.send_bytes(200, body)

    def decode_object(self, rt, body, ctype):
        mt = ctype.split(";")[0].strip().lower()
        if mt and mt not in ("application/json", "application/yaml", "*/*"):
            raise ApiError.unsupported_media_type(BODY_TYPES)
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError.bad_request("couldn't get version/kind; json parse error: %s" % e)
        if not isinstance(obj, dict):
            raise ApiError.bad_request("Object 'Kind' is missing in '%s'" % body[:200].decode("utf-8", "replace"))
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise ApiError.bad_request('%s in version "%s" cannot be handled as a %s: no kind "%s" is registered for '
                                       'version "%s" in scheme "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"'
                                       % (kind, api_version or rt.version, rt.kind, kind, api_version or rt.version))
        if api_version and api_version != rt.api_version:
            raise ApiError.bad_request("the API version in the data (%s) does not match the expected API version (%s)"
                                       % (api_version, rt.api_version))
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        return obj

    def dry_run(self, query, body_opts=None):
        v = query.get("dryRun")
        if v is None and body_opts:
            v = body_opts.get("dryRun")
            if isinstance(v, list):
                v = v[0] if v else None
        if v is None:
            return False
        if v != "All":
            raise ApiError.bad_request('Invalid dryRun value "%s": supported values: "All"' % v)
        return True

    def do_create(self, r, query, body, ctype):
        rt = r.rt
        obj = rt.from_view(self.decode_object(rt, body, ctype))
        dry = self.dry_run(query)
        admit = self.app.bind(self, rt, "CREATE", r.ns, "", dry_run=dry,
                              options=kadmission.options_for("CREATE", dry, query.get("fieldManager")),
                              in_tree=self.in_tree_plugins(rt))
        e = self.app.store.create(rt, r.ns, obj, dry_run=dry, admit=admit)
        self.send_bytes(201, rt.encode_full(e))

    @staticmethod
    def in_tree_plugins(rt):
        """The built-in mutating admission plugins of a CREATE (run again on reinvocation)."""
        def run(obj):
            obj = kstore.clone(obj)
            rt.admit_create(obj)
            return obj
        return run if rt.kind == "Pod" else None

    def to_scale(self, rt, obj):
        meta = obj["metadata"]
        status = obj.get("status") or {}
        sel = (obj.get("spec") or {}).get("selector") or {}
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                             if k in meta},
                "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
                "status": {"replicas": status.get("replicas", 0), "selector": klabels.selector_struct_to_string(sel)}}

    def apply_patch(self, schema, current, body, ctype):
        mt = ctype.split(";")[0].strip().lower()
        if mt not in PATCH_TYPES:
            raise ApiError.unsupported_media_type(PATCH_TYPES)
        try:
            patch = json.loads(body or b"null")
        except ValueError as e:
            if mt == "application/merge-patch+json":
                raise ApiError.bad_request("Invalid JSON Patch")
            raise ApiError.bad_request("error decoding patch: %s" % e)
        if mt == "application/json-patch+json":
            return kpatch.json_patch(current, patch)
        if mt == "application/merge-patch+json":
            if not isinstance(patch, dict):
                raise ApiError.bad_request("Invalid JSON Patch")
            return kpatch.merge_patch(current, patch)
        return kpatch.strategic_merge(current, patch, schema)

    def do_update(self, r, method, query, body, ctype):
        rt, store = r.rt, self.app.store
        dry = self.dry_run(query)
        options = kadmission.options_for("UPDATE", dry, query.get("fieldManager"))
        if method == "PUT":
            new_body = self.decode_object(rt, body, ctype) if r.sub != "scale" else self.decode_scale(body, ctype)
        elif ctype.split(";")[0].strip().lower() not in PATCH_TYPES:
            raise ApiError.unsupported_media_type(PATCH_TYPES)
        if self._fault_match:
            if store.get_entry(rt, r.ns, r.name) is not None and \
                    self.app.faults.first_write_conflict((rt.key, r.ns, r.name)):
                raise ApiError.stale(rt.gr, r.name)

        if r.sub == "scale":
            admit = self.app.bind(self, rt, "UPDATE", r.ns, r.name, "scale", dry, options,
                                  kind=("autoscaling", "v1", "Scale"),
                                  to_versioned=lambda o: self.to_scale(rt, o), mutate_in_store=False)

            def mutate(cur):
                scale = self.to_scale(rt, cur)
                if method == "PUT":
                    want = new_body
                else:
                    want = self.apply_patch(kpatch.GENERIC, scale, body, ctype)
                if not isinstance(want, dict):
                    raise ApiError.bad_request("the body of the request must be a Scale object")
                if admit is not None:
                    want = admit.mutate_versioned(want, scale)
                    if not isinstance(want, dict):
                        raise ApiError.bad_request("the body of the request must be a Scale object")
                replicas = (want.get("spec") or {}).get("replicas", 0)
                if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                    raise ApiError.invalid("autoscaling", "Scale", r.name, [FieldError.invalid(
                        "spec.replicas", replicas, "must be greater than or equal to 0")])
                wmeta = want.get("metadata") or {}
                if wmeta.get("name") not in (None, r.name):
                    raise ApiError.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                               % (wmeta.get("name"), r.name))
                cur.setdefault("spec", {})["replicas"] = replicas
                cur["metadata"]["resourceVersion"] = wmeta.get("resourceVersion") or ""
                return cur

            e = store.update(rt, r.ns, r.name, mutate, subresource=None, dry_run=dry, admit=admit)
            return self.send_json(200, self.to_scale(rt, e.obj))

        def mutate(cur):
            if method == "PUT":
                return rt.from_view(new_body)
            view = rt.view(cur)
            patched = self.apply_patch(rt.smp_schema, view, body, ctype)
            if not isinstance(patched, dict):
                raise ApiError.bad_request("the patched object is not a JSON object")
            return rt.from_view(patched)

        admit = self.app.bind(self, rt, "UPDATE", r.ns, r.name, r.sub, dry, options)
        try:
            e = store.update(rt, r.ns, r.name, mutate, subresource=r.sub, dry_run=dry, admit=admit)
        except ApiError as err:
            if not (err.code == 404 and method == "PUT" and rt.allow_create_on_update and not r.sub):
                raise
            body_obj = rt.from_view(new_body)
            if (body_obj.get("metadata") or {}).get("name") != r.name:
                raise ApiError.bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                                           % ((body_obj.get("metadata") or {}).get("name") or "", r.name))
            body_obj["metadata"].pop("resourceVersion", None)
            admit = self.app.bind(self, rt, "CREATE", r.ns, r.name, dry_run=dry,
                                  options=kadmission.options_for("CREATE", dry, query.get("fieldManager")))
            e = store.create(rt, r.ns, body_obj, dry_run=dry, admit=admit)
            return self.send_bytes(201, rt.encode_full(e))
        self.send_bytes(200, rt.encode_full(e))

    def decode_scale(self, body, ctype):
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise ApiError.bad_request("couldn't get version/kind; json parse error: %s" % e)
        if not isinstance(obj, dict):
            raise ApiError.bad_request("Object 'Kind' is missing")
        return obj

    def delete_options(self, query, body):
        opts = {}
        if body.strip():
            try:
                opts = json.loads(body)
            except ValueError as e:
                raise ApiError.bad_request("json parse error: %s" % e)
            if not isinstance(opts, dict):
                raise ApiError.bad_request("DeleteOptions must be an object")
        if query.get("propagationPolicy"):
            opts["propagationPolicy"] = query["propagationPolicy"]
        if opts.get("propagationPolicy") not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError.invalid("meta.k8s.io", "DeleteOptions", "", [FieldError.not_supported(
                "propagationPolicy", opts["propagationPolicy"], ["Foreground", "Background", "Orphan", "nil"])])
        return opts

    def do_delete(self, r, query, body):
        rt = r.rt
        opts = self.delete_options(query, body)
        dry = self.dry_run(query, opts)
        admit = self.app.bind(self, rt, "DELETE", r.ns, r.name, dry_run=dry,
                              options=kadmission.options_for("DELETE", dry, delete_options=opts))
        e, deleted = self.app.store.delete(rt, r.ns, r.name, opts, dry_run=dry, admit=admit)
        if not deleted or rt.return_deleted_object:
            code = 202 if (not deleted and opts.get("orphanDependents") is False) else 200
            return self.send_bytes(code, rt.encode_full(e))
        meta = e.obj["metadata"]
        details = {"name": meta["name"]}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        details["uid"] = meta.get("uid")
        self.send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                             "details": details})

    def do_delete_collection(self, r, query, body):
        rt = r.rt
        if not r.ns:
            raise ApiError.generic(405)
        lreqs, freqs = self.selectors(rt, query)
        opts = self.delete_options(query, body)
        dry = self.dry_run(query, opts)
        entries, rv, _, _ = self.app.store.list(rt, r.ns, lreqs, freqs)
        out = []
        for e in entries:
            name = e.obj["metadata"]["name"]
            admit = self.app.bind(self, rt, "DELETE", r.ns, name, dry_run=dry,
                                  options=kadmission.options_for("DELETE", dry, delete_options=opts))
            try:
                d, _ = self.app.store.delete(rt, r.ns, name, opts, dry_run=dry, admit=admit)
                out.append(d)
            except ApiError as err:
                if err.code != 404:
                    raise
        head = kstore.dumps({"kind": rt.list_kind, "apiVersion": rt.api_version,
                             "metadata": {"resourceVersion": str(self.app.store.current_rv())}})[:-1]
        self.send_bytes(200, head + b',"items":[' + b",".join(rt.encode_item(e) for e in out) + b"]}")

    # -- watch -----------------------------------------------------------------------------------
    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def client_gone(self):
        """True once the client closed a watch connection (it sends nothing while watching)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            if self.server.tls_context is None:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            self.connection.setblocking(False)
            try:
                return self.connection.recv(1) == b""
            except ssl.SSLWantReadError:
                return False
            finally:
                self.connection.setblocking(True)
        except ssl.SSLZeroReturnError:
            return True
        except (OSError, ValueError):
            return True

    def do_watch(self, r, query):
        rt, store, app = r.rt, self.app.store, self.app
        lreqs, freqs = self.selectors(rt, query)
        allow_bookmarks = _bool_param(query.get("allowWatchBookmarks"))
        send_initial = query.get("sendInitialEvents")
        rv_match = query.get("resourceVersionMatch")
        if send_initial is not None:
            errs = []
            if not allow_bookmarks:
                errs.append(FieldError.forbidden("allowWatchBookmarks",
                                                 "sendInitialEvents requires setting allowWatchBookmarks to true"))
            if rv_match != "NotOlderThan":
                errs.append(FieldError.forbidden("resourceVersionMatch", "sendInitialEvents requires setting "
                                                                         "resourceVersionMatch to NotOlderThan"))
            if errs:
                raise ApiError.invalid("meta.k8s.io", "ListOptions", "", errs)
        elif rv_match:
            raise ApiError.invalid("meta.k8s.io", "ListOptions", "", [FieldError.forbidden(
                "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                                        "provided")])
        send_initial = _bool_param(send_initial)
        timeout = 1800.0
        if query.get("timeoutSeconds"):
            try:
                timeout = float(query["timeoutSeconds"])
            except ValueError:
                raise ApiError.bad_request("timeoutSeconds: must be an integer")
        close_after = app.faults.close_watch_after() if self._fault_match else 0
        try:
            initial, pos, rv = store.watch_open(rt, r.ns, lreqs, freqs, query.get("resourceVersion"), send_initial)
            expired = None
        except ApiError as e:
            if e.code != 410:
                raise
            initial, pos, rv, expired = [], 0, 0, e
        head = ["HTTP/1.1 200 OK", "Content-Type: application/json", "Transfer-Encoding: chunked",
                "Cache-Control: no-cache, private", "Date: " + self.date_time_string()]
        self._code = 200
        self.log_request_once()
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
        sent = 0
        kind_prefix = b'{"type":"%s","object":'

        def emit(etype, payload):
            self.write_chunk(kind_prefix % etype.encode() + payload + b"}\n")

        def bookmark(rv_, initial_end=False):
            meta = {"resourceVersion": str(rv_)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            emit("BOOKMARK", kstore.dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}))

        try:
            if expired is not None:
                emit("ERROR", kstore.dumps(expired.status()))
                self.write_chunk(b"")
                return
            for e in initial:
                emit("ADDED", rt.encode_full(e))
                sent += 1
                if close_after and sent >= close_after:
                    self.write_chunk(b"")
                    return
            if send_initial:
                bookmark(rv, initial_end=True)
            deadline = time.time() + timeout
            last_bookmark = time.time()
            while True:
                now = time.time()
                if now >= deadline:
                    break
                wait = min(deadline - now, 0.5)
                if allow_bookmarks:
                    wait = max(0.0, min(wait, last_bookmark + app.bookmark_interval - now))
                try:
                    events, pos, cur_rv = store.watch_next(rt, pos, wait)
                except ApiError as e:
                    emit("ERROR", kstore.dumps(e.status()))
                    break
                for ev_rv, etype, new, old in events:
                    if ev_rv <= rv:  # a watch from a future resourceVersion starts after it
                        continue
                    if r.ns and new.attrs()[1].get("metadata.namespace") != r.ns:
                        continue
                    out_type = self._filter_event(rt, etype, new, old, lreqs, freqs)
                    if out_type is None:
                        continue
                    emit(out_type, rt.encode_full(new))
                    sent += 1
                    if close_after and sent >= close_after:
                        self.write_chunk(b"")
                        return
                if allow_bookmarks and time.time() - last_bookmark >= app.bookmark_interval:
                    bookmark(cur_rv)
                    last_bookmark = time.time()
                if not events and self.client_gone():
                    self.close_connection = True
                    return
            self.write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    @staticmethod
    def _filter_event(rt, etype, new, old, lreqs, freqs):
        if not lreqs and not freqs:
            return etype
        if etype == "ADDED":
            return "ADDED" if kstore.matches(rt, new, lreqs, freqs) else None
        if etype == "DELETED":
            return "DELETED" if kstore.matches(rt, old or new, lreqs, freqs) else None
        cur = kstore.matches(rt, new, lreqs, freqs)
        prev = old is not None and kstore.matches(rt, old, lreqs, freqs)
        if cur and prev:
            return "MODIFIED"
        if cur:
            return "ADDED"
        if prev:
            return "DELETED"
        return None


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, addr, app, tls_context):
        self.app = app
        self.tls_context = tls_context
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        self.app.log("connection error from %s: %s" % (client_address, sys.exc_info()[1]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--port-file")
    p.add_argument("--token-file")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--log-file")
    p.add_argument("--bookmark-interval-ms", type=int, default=1000)
    p.add_argument("--history-limit", type=int, default=20000,
                   help="watch events kept per resource before the oldest are compacted")
    p.add_argument("--users-file", help='JSON {"<bearer token>": {"username": ..., "groups": [...]}}, re-read '
                                        "when it changes; other tokens get 401")
    p.add_argument("--webhook-config", action="append", default=[], metavar="FILE",
                   help="YAML/JSON file with admissionregistration.k8s.io/v1 Mutating/ValidatingWebhook"
                        "Configuration objects (repeatable; other documents are ignored)")
    p.add_argument("--webhook-resolve", metavar="HOST:PORT",
                   help="where webhook service references connect (default 127.0.0.1:<service port>); TLS "
                        "still verifies <service>.<namespace>.svc")
    p.add_argument("--webhook-ca", metavar="FILE", help="PEM CA bundle for webhooks whose caBundle is empty")
    args = p.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    args.webhook_ca_pem = None
    if args.webhook_ca:
        try:
            with open(args.webhook_ca) as f:
                args.webhook_ca_pem = f.read()
        except OSError as e:
            p.error("--webhook-ca: %s" % e)
    if args.webhook_resolve:
        host, _, port = args.webhook_resolve.rpartition(":")
        if not host or not port.isdigit():
            p.error("--webhook-resolve must be HOST:PORT")
        args.webhook_resolve = (host.strip("[]"), int(port))
    if args.users_file:
        try:
            kadmission.read_users(args.users_file)
        except (OSError, ValueError) as e:
            p.error("--users-file: %s" % e)
    ctx = None
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
    app = App(args)
    for path in args.webhook_config:
        try:
            with open(path, "rb") as f:
                app.admission.add(kadmission.load_documents(f.read()), startup=True)
        except (OSError, kadmission.ConfigError) as e:
            p.error("--webhook-config %s: %s" % (path, e))
    server = Server((args.bind_address, args.port), app, ctx)
    app.port = server.server_address[1]
    app.sim.start()
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    if args.port_file:
        tmp = args.port_file + ".tmp.%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write("%d\n" % app.port)
        os.replace(tmp, args.port_file)
    app.log("listening on %s:%d%s" % (args.bind_address, app.port, " (TLS)" if ctx else ""))
    while not stop.wait(0.5):
        pass
    app.sim.stop()
    server.shutdown()
    server.server_close()
    app.log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
