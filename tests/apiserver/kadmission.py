"""Admission webhooks, called as kube-apiserver calls them (k8s.io/apiserver
pkg/admission/plugin/webhook: generic/webhook.go ShouldCallHook, predicates/{rules,object,namespace},
mutating/dispatcher.go with its reinvocation context, validating/dispatcher.go,
request/admissionreview.go, errors/statuserror.go, and pkg/util/webhook for the client).

The store calls a Binding (one request's attributes) at the two points where kube-apiserver runs
admission: mutate() after decoding and defaulting, validate() after the built-in validation, both
outside the store lock. Configurations are admissionregistration.k8s.io/v1
Mutating/ValidatingWebhookConfiguration objects.
"""

import base64
import http.client
import json
import os
import select
import socket
import ssl
import threading
import time
import uuid

import klabels
import kpatch
import kstore
import kvalidation as kv
from kerrors import ApiError

MUTATING_KIND = "MutatingWebhookConfiguration"
VALIDATING_KIND = "ValidatingWebhookConfiguration"
CONFIG_API_VERSION = "admissionregistration.k8s.io/v1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_V1BETA1 = "admission.k8s.io/v1beta1"
USER_AGENT = "kube-apiserver-admission"


class ConfigError(ValueError):
    """A webhook configuration kube-apiserver would refuse to store."""


# ----------------------------------------------------------------------------------------------
# Users as the authenticators report them.

def service_account_user(namespace, name):
    return {"username": "system:serviceaccount:%s:%s" % (namespace, name),
            "groups": ["system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"]}


def node_user(node):
    return {"username": "system:node:" + node, "groups": ["system:nodes", "system:authenticated"]}


ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
ADMIN = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}


def authenticated(user):
    """A user from the users file, with the group every authenticated user gets."""
    out = {"username": str(user.get("username") or "")}
    groups = [str(g) for g in user.get("groups") or []]
    if "system:authenticated" not in groups and out["username"] != "system:anonymous":
        groups.append("system:authenticated")
    out["groups"] = groups
    if user.get("uid"):
        out["uid"] = str(user["uid"])
    if user.get("extra"):
        out["extra"] = {str(k): [str(x) for x in v] for k, v in user["extra"].items()}
    return out


# ----------------------------------------------------------------------------------------------
# Loading configurations.

def load_documents(data):
    """The objects in a file or request body: JSON (an object, a list, or a List with items) or
    multi-document YAML."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    try:
        docs = [json.loads(data)]
    except ValueError:
        import yaml  # noqa: PLC0415 - only YAML files pay for the import
        try:
            docs = [d for d in yaml.safe_load_all(data)]
        except yaml.YAMLError as e:
            raise ConfigError("cannot parse webhook configuration: %s" % e)
    out = []

    def add(d):
        if d is None:
            return
        if isinstance(d, list):
            for x in d:
                add(x)
        elif isinstance(d, dict) and isinstance(d.get("items"), list) and "webhooks" not in d:
            for x in d["items"]:
                add(x)
        elif isinstance(d, dict):
            out.append(d)
        else:
            raise ConfigError("a webhook configuration document must be an object, not %r" % type(d).__name__)

    for d in docs:
        add(d)
    return out


_OPERATIONS = ("*", "CREATE", "UPDATE", "DELETE", "CONNECT")


def _string_list(v, path, errs, required=True):
    if v is None:
        if required:
            errs.append("%s: Required value" % path)
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        errs.append("%s: must be a list of strings" % path)
        return []
    if required and not v:
        errs.append("%s: Required value" % path)
    return v


def _validate_rule(rule, path, errs):
    if not isinstance(rule, dict):
        errs.append("%s: must be an object" % path)
        return
    ops = _string_list(rule.get("operations"), path + ".operations", errs)
    for o in ops:
        if o not in _OPERATIONS:
            errs.append('%s.operations: Unsupported value: "%s"' % (path, o))
    if "*" in ops and len(ops) > 1:
        errs.append("%s.operations: Invalid value: if '*' is present, must not specify other operations" % path)
    groups = _string_list(rule.get("apiGroups"), path + ".apiGroups", errs)
    if "*" in groups and len(groups) > 1:
        errs.append("%s.apiGroups: Invalid value: if '*' is present, must not specify other API groups" % path)
    versions = _string_list(rule.get("apiVersions"), path + ".apiVersions", errs)
    if "*" in versions and len(versions) > 1:
        errs.append("%s.apiVersions: Invalid value: if '*' is present, must not specify other API versions" % path)
    for v in versions:
        if v == "":
            errs.append("%s.apiVersions: Required value: version must not be empty" % path)
    resources = _string_list(rule.get("resources"), path + ".resources", errs)
    for r in resources:
        if r == "":
            errs.append("%s.resources: Required value" % path)
        elif r.count("/") > 1 or r.startswith("/") or r.endswith("/"):
            errs.append('%s.resources: Invalid value: "%s": must be "resource" or "resource/subresource"' % (path, r))
    scope = rule.get("scope", "*")
    if scope not in ("*", "Cluster", "Namespaced"):
        errs.append('%s.scope: Unsupported value: "%s": supported values: "*", "Cluster", "Namespaced"' %
                    (path, scope))


class Webhook:
    """One entry of webhooks[] (admissionregistration/v1 defaults applied), with its client."""

    def __init__(self, kind, config_name, index, spec, chain):
        self.mutating = kind == MUTATING_KIND
        self.config_name = config_name
        self.index = index
        self.spec = spec
        self.name = spec["name"]
        self.uid = "%s/%s/%d" % (config_name, self.name, index)
        self.rules = spec.get("rules") or []
        self.failure_policy = spec.get("failurePolicy") or "Fail"
        self.side_effects = spec.get("sideEffects")
        self.timeout = int(spec.get("timeoutSeconds") or 10)
        self.review_versions = list(spec.get("admissionReviewVersions") or [])
        self.match_policy = spec.get("matchPolicy") or "Equivalent"
        self.reinvoke_if_needed = self.mutating and spec.get("reinvocationPolicy") == "IfNeeded"
        self.object_selector = klabels.selector_struct_to_reqs(spec.get("objectSelector") or {})
        self.namespace_selector = klabels.selector_struct_to_reqs(spec.get("namespaceSelector") or {})
        cc = spec.get("clientConfig") or {}
        self.client, self.url_base, self.path = chain.client_for(cc)


def parse_configuration(doc, chain):
    """The webhooks of one Mutating/ValidatingWebhookConfiguration, or None for other kinds.
    Raises ConfigError with kube-apiserver-like field messages for a configuration it would refuse."""
    if not isinstance(doc, dict) or doc.get("kind") not in (MUTATING_KIND, VALIDATING_KIND):
        return None
    kind = doc["kind"]
    if doc.get("apiVersion") != CONFIG_API_VERSION:
        raise ConfigError("%s: apiVersion must be %s, not %r" % (kind, CONFIG_API_VERSION, doc.get("apiVersion")))
    name = (doc.get("metadata") or {}).get("name") or ""
    errs = []
    if not name:
        errs.append("metadata.name: Required value")
    hooks = doc.get("webhooks") or []
    if not isinstance(hooks, list):
        raise ConfigError("%s %s: webhooks must be a list" % (kind, name))
    seen = set()
    for i, h in enumerate(hooks):
        p = "webhooks[%d]" % i
        if not isinstance(h, dict):
            errs.append("%s: must be an object" % p)
            continue
        hn = h.get("name") or ""
        if not hn:
            errs.append("%s.name: Required value" % p)
        else:
            if hn in seen:
                errs.append('%s.name: Duplicate value: "%s"' % (p, hn))
            seen.add(hn)
            if len(hn.split(".")) < 3 or klabels.is_dns1123_subdomain(hn):
                errs.append('%s.name: Invalid value: "%s": should be a domain with at least three segments '
                            'separated by dots' % (p, hn))
        for j, r in enumerate(h.get("rules") or []):
            _validate_rule(r, "%s.rules[%d]" % (p, j), errs)
        fp = h.get("failurePolicy", "Fail")
        if fp not in ("Fail", "Ignore"):
            errs.append('%s.failurePolicy: Unsupported value: "%s": supported values: "Fail", "Ignore"' % (p, fp))
        se = h.get("sideEffects")
        if se not in ("None", "NoneOnDryRun"):
            errs.append('%s.sideEffects: Unsupported value: %s: supported values: "None", "NoneOnDryRun"' %
                        (p, json.dumps(se)))
        mp = h.get("matchPolicy", "Equivalent")
        if mp not in ("Exact", "Equivalent"):
            errs.append('%s.matchPolicy: Unsupported value: "%s": supported values: "Equivalent", "Exact"' % (p, mp))
        if kind == MUTATING_KIND:
            rp = h.get("reinvocationPolicy", "Never")
            if rp not in ("Never", "IfNeeded"):
                errs.append('%s.reinvocationPolicy: Unsupported value: "%s": supported values: "IfNeeded", "Never"'
                            % (p, rp))
        elif "reinvocationPolicy" in h:
            errs.append("%s.reinvocationPolicy: Forbidden: only mutating webhooks have one" % p)
        ts = h.get("timeoutSeconds", 10)
        if not isinstance(ts, int) or isinstance(ts, bool) or not 1 <= ts <= 30:
            errs.append("%s.timeoutSeconds: Invalid value: %s: the timeout value must be between 1 and 30 seconds"
                        % (p, json.dumps(ts)))
        versions = _string_list(h.get("admissionReviewVersions"), p + ".admissionReviewVersions", errs)
        if versions and not any(v in ("v1", "v1beta1") for v in versions):
            errs.append('%s.admissionReviewVersions: Invalid value: %s: must include at least one of v1, v1beta1'
                        % (p, json.dumps(versions)))
        for sel in ("objectSelector", "namespaceSelector"):
            if h.get(sel) is not None:
                errs.extend(str(e) for e in klabels.validate_label_selector(h[sel], "%s.%s" % (p, sel)))
        if h.get("matchConditions"):
            errs.append("%s.matchConditions: Forbidden: CEL match conditions are not supported by the test API "
                        "server" % p)
        errs.extend(_validate_client_config(h.get("clientConfig"), p + ".clientConfig"))
    if errs:
        raise ConfigError('%s.admissionregistration.k8s.io "%s" is invalid: %s' %
                          (kind, name, errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))
    return [Webhook(kind, name, i, h, chain) for i, h in enumerate(hooks)]


def _validate_client_config(cc, path):
    if not isinstance(cc, dict):
        return ["%s: Required value" % path]
    errs = []
    url, svc = cc.get("url"), cc.get("service")
    if (url is None) == (svc is None):
        errs.append("%s: Required value: exactly one of url or service is required" % path)
    if url is not None:
        try:
            u = urllib_parse(url)
        except ValueError:
            u = None
        if u is None or u.scheme != "https":
            errs.append('%s.url: Invalid value: "%s": \'https\' is the only allowed URL scheme' % (path, url))
        elif not u.hostname:
            errs.append("%s.url: Invalid value: host must be specified" % path)
        elif u.username or u.password or u.query or u.fragment:
            errs.append("%s.url: Invalid value: user information, query parameters and fragments are not "
                        "permitted" % path)
    if isinstance(svc, dict):
        if not svc.get("name"):
            errs.append("%s.service.name: Required value" % path)
        if not svc.get("namespace"):
            errs.append("%s.service.namespace: Required value" % path)
        port = svc.get("port", 443)
        if not isinstance(port, int) or not 1 <= port <= 65535:
            errs.append("%s.service.port: Invalid value: %s: port is not valid" % (path, json.dumps(port)))
        sp = svc.get("path")
        if sp is not None and not (isinstance(sp, str) and sp.startswith("/")):
            errs.append('%s.service.path: Invalid value: %s: must start with a \'/\'' % (path, json.dumps(sp)))
    elif svc is not None:
        errs.append("%s.service: must be an object" % path)
    ca = cc.get("caBundle")
    if ca:
        try:
            pem = base64.b64decode(ca, validate=True).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            pem = ""
        if "-----BEGIN CERTIFICATE-----" not in pem:
            errs.append("%s.caBundle: Invalid value: must be base64 of a PEM certificate bundle" % path)
    return errs


def urllib_parse(url):
    import urllib.parse  # noqa: PLC0415
    return urllib.parse.urlsplit(url)


# ----------------------------------------------------------------------------------------------
# Matching: rules (predicates/rules/rules.go), label selectors (predicates/object, namespace).

def _exact_or_wildcard(items, requested):
    return any(i == "*" or i == requested for i in items or [])


def _split_resource(s):
    res, _, sub = s.partition("/")
    return res, sub


def rule_matches(rule, operation, resource, subresource, namespace):
    """rules.Matcher.Matches: scope, operation, group, version, resource/subresource."""
    group, version, plural = resource
    scope = rule.get("scope") or "*"
    if scope == "Namespaced":
        if plural == "namespaces" and group == "" or not namespace:
            return False
    elif scope == "Cluster":
        if not (plural == "namespaces" and group == "" or not namespace):
            return False
    elif scope != "*":
        return False
    ops = rule.get("operations") or []
    if not any(o == "*" or o == operation for o in ops):
        return False
    if not _exact_or_wildcard(rule.get("apiGroups"), group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions"), version):
        return False
    for r in rule.get("resources") or []:
        res, sub = _split_resource(r)
        if (res == "*" or res == plural) and (sub == "*" or sub == subresource):
            return True
    return False


def _labels_of(obj):
    if not isinstance(obj, dict):
        return None
    meta = obj.get("metadata")
    return (meta.get("labels") or {}) if isinstance(meta, dict) else {}


def object_selector_matches(reqs, obj, old):
    """MatchObjectSelector: an empty selector matches everything, otherwise the object OR the old
    object must match (a missing object, e.g. on DELETE, never does)."""
    if not reqs:
        return True
    for o in (obj, old):
        labels = _labels_of(o)
        if labels is not None and klabels.labels_match(reqs, labels):
            return True
    return False


def namespace_labels(namespace):
    """The test server makes namespaces up; each has the label kube-apiserver sets on every one."""
    return {NAMESPACE_NAME_LABEL: namespace}


def namespace_selector_matches(reqs, namespace, resource):
    """MatchNamespaceSelector: cluster-scoped requests (other than for namespaces) are never
    exempted; an empty selector matches everything."""
    if not namespace and resource[2] != "namespaces":
        return True
    if not reqs:
        return True
    return klabels.labels_match(reqs, namespace_labels(namespace))


# matchPolicy Equivalent: resources served by more than one group/version over the same storage.
def _events_to_core(obj):
    return kstore.BY_PATH[("events.k8s.io", "v1", "events")].from_view(obj)


def _events_to_v1(obj):
    return kstore.BY_PATH[("events.k8s.io", "v1", "events")].view(obj)


EQUIVALENTS = {
    ("events.k8s.io", "v1", "events"): [(("", "v1", "events"), ("", "v1", "Event"), _events_to_core, _events_to_v1)],
    ("", "v1", "events"): [(("events.k8s.io", "v1", "events"), ("events.k8s.io", "v1", "Event"), _events_to_v1,
                            _events_to_core)],
}


class Attributes:
    """admission.Attributes of one request, with the object in the request's version."""

    def __init__(self, operation, kind, resource, subresource, namespace, name, user, dry_run, options, obj, old):
        self.operation = operation
        self.kind = kind  # (group, version, kind)
        self.resource = resource  # (group, version, resource)
        self.subresource = subresource or ""
        self.namespace = namespace or ""
        self.name = name or ""
        self.user = user or ANONYMOUS
        self.dry_run = bool(dry_run)
        self.options = options
        self.object = obj
        self.old_object = old


class Invocation:
    def __init__(self, hook, resource, kind, to_hook=None, from_hook=None):
        self.hook = hook
        self.resource = resource
        self.kind = kind
        self.to_hook = to_hook  # request version -> the webhook's version (matchPolicy Equivalent)
        self.from_hook = from_hook


def should_call(hook, a):
    """generic.Webhook.ShouldCallHook: namespaceSelector, objectSelector, then the rules (and the
    equivalent resources under matchPolicy Equivalent). Returns an Invocation or None."""
    if not namespace_selector_matches(hook.namespace_selector, a.namespace, a.resource):
        return None
    if not object_selector_matches(hook.object_selector, a.object, a.old_object):
        return None
    for r in hook.rules:
        if rule_matches(r, a.operation, a.resource, a.subresource, a.namespace):
            return Invocation(hook, a.resource, a.kind)
    if hook.match_policy == "Equivalent" and not a.subresource:
        for r in hook.rules:
            for gvr, gvk, to_hook, from_hook in EQUIVALENTS.get(a.resource, ()):
                if rule_matches(r, a.operation, gvr, a.subresource, a.namespace):
                    return Invocation(hook, gvr, gvk, to_hook, from_hook)
    return None


# ----------------------------------------------------------------------------------------------
# The client (pkg/util/webhook: HTTPS only, SNI <svc>.<ns>.svc for services, ALPN http/1.1).

class CallError(Exception):
    """webhookutil.ErrCallingWebhook: subject to failurePolicy."""

    def __init__(self, webhook, reason):
        super().__init__(reason)
        self.webhook = webhook
        self.reason = reason

    def __str__(self):
        return 'failed calling webhook "%s": %s' % (self.webhook, self.reason)


class _Connection(http.client.HTTPConnection):
    default_port = 443

    def __init__(self, client, timeout):
        super().__init__(client.server_name, client.port, timeout=timeout)
        self.client = client

    def connect(self):
        c = self.client
        try:
            sock = socket.create_connection((c.dial_host, c.dial_port), self.timeout)
        except socket.timeout:
            raise _Failure("dial tcp %s:%d: i/o timeout" % (c.dial_host, c.dial_port))
        except ConnectionRefusedError:
            raise _Failure("dial tcp %s:%d: connect: connection refused" % (c.dial_host, c.dial_port))
        except OSError as e:
            raise _Failure("dial tcp %s:%d: connect: %s" % (c.dial_host, c.dial_port, e.strerror or e))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = c.context.wrap_socket(sock, server_hostname=c.server_name)
        except socket.timeout:
            sock.close()
            raise _Failure("net/http: TLS handshake timeout")
        except ssl.SSLCertVerificationError as e:
            sock.close()
            raise _Failure("tls: failed to verify certificate: x509: %s" % (e.verify_message or e.reason or e))
        except (ssl.SSLError, OSError) as e:
            sock.close()
            raise _Failure("remote error: tls: %s" % (getattr(e, "reason", None) or e))


class _Failure(Exception):
    pass


class Client:
    """HTTPS to one endpoint, with a pool of keep-alive connections (Go's transport keeps idle
    connections; one that the server closed is noticed and dropped before it is reused)."""

    def __init__(self, dial_host, dial_port, server_name, port, ca_pem):
        self.dial_host = dial_host
        self.dial_port = dial_port
        self.server_name = server_name
        self.port = port
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if ca_pem:
            ctx.load_verify_locations(cadata=ca_pem)
        else:
            ctx.load_default_certs()
        ctx.set_alpn_protocols(["http/1.1"])
        self.context = ctx
        self.lock = threading.Lock()
        self.idle = []

    def _take(self, timeout):
        with self.lock:
            while self.idle:
                conn = self.idle.pop()
                try:
                    readable, _, _ = select.select([conn.sock], [], [], 0)
                except (OSError, ValueError):
                    readable = True
                if readable:  # closed by the server (or unexpected bytes): never reuse it
                    conn.close()
                    continue
                conn.timeout = timeout
                conn.sock.settimeout(timeout)
                return conn
        return _Connection(self, timeout)

    def _give(self, conn):
        with self.lock:
            if len(self.idle) < 25:
                self.idle.append(conn)
                return
        conn.close()

    def post(self, url, path, body, timeout):
        """POSTs body; returns (status, content_type, bytes). Raises _Failure with a Go-like reason."""
        conn = self._take(timeout)
        prefix = 'Post "%s": ' % url
        try:
            conn.request("POST", path, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json, */*", "User-Agent": USER_AGENT})
            resp = conn.getresponse()
            data = resp.read()
        except _Failure as e:
            conn.close()
            raise _Failure(prefix + str(e))
        except socket.timeout:
            conn.close()
            raise _Failure(prefix + "context deadline exceeded")
        except (http.client.RemoteDisconnected, http.client.IncompleteRead, ConnectionResetError, BrokenPipeError):
            conn.close()
            raise _Failure(prefix + "EOF")
        except (http.client.HTTPException, ssl.SSLError, OSError) as e:
            conn.close()
            raise _Failure(prefix + str(e))
        if resp.will_close:
            conn.close()
        else:
            self._give(conn)
        return resp.status, resp.getheader("Content-Type") or "", data

    def close(self):
        with self.lock:
            for c in self.idle:
                c.close()
            self.idle = []


_GENERIC = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: "forbidden",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    413: "the server has rejected the request because the request body is too large",
    415: "the server responded with the status code 415 but did not return more information",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    504: "the server was unable to return a response in the time allotted, but may still be processing the "
         "request",
}


def _unexpected_status(code, ctype, body):
    """client-go's error for a non-2xx answer: the Status in the body, or NewGenericServerResponse."""
    try:
        obj = json.loads(body)
        if isinstance(obj, dict) and obj.get("kind") == "Status" and obj.get("message"):
            return obj["message"]
    except ValueError:
        pass
    text = body.decode("utf-8", "replace").strip() if ctype.startswith("text/") else ""
    if code >= 500 and code != 504:
        return 'an error on the server ("%s") has prevented the request from succeeding' % (
            text or "unknown")
    msg = _GENERIC.get(code, "the server responded with the status code %d but did not return more "
                             "information" % code)
    return msg


# ----------------------------------------------------------------------------------------------
# Reviews (request/admissionreview.go) and denials (errors/statuserror.go).

def _gvk(t):
    return {"group": t[0], "version": t[1], "kind": t[2]}


def _gvr(t):
    return {"group": t[0], "version": t[1], "resource": t[2]}


def review_version(hook):
    for v in hook.review_versions:
        if v == "v1":
            return ADMISSION_V1
        if v == "v1beta1":
            return ADMISSION_V1BETA1
    return None


def build_review(inv, a, obj, old, api_version, uid):
    user = {"username": a.user.get("username", "")}
    if a.user.get("uid"):
        user["uid"] = a.user["uid"]
    if a.user.get("groups"):
        user["groups"] = list(a.user["groups"])
    if a.user.get("extra"):
        user["extra"] = a.user["extra"]
    req = {"uid": uid, "kind": _gvk(inv.kind), "resource": _gvr(inv.resource)}
    if a.subresource:
        req["subResource"] = a.subresource
    req["requestKind"] = _gvk(a.kind)
    req["requestResource"] = _gvr(a.resource)
    if a.subresource:
        req["requestSubResource"] = a.subresource
    if a.name:
        req["name"] = a.name
    if a.namespace:
        req["namespace"] = a.namespace
    req.update(operation=a.operation, userInfo=user, object=obj, oldObject=old, dryRun=a.dry_run,
               options=a.options)
    return {"kind": "AdmissionReview", "apiVersion": api_version, "request": req}


def verify_response(hook, uid, mutating, api_version, status, ctype, body):
    """Decodes and checks a webhook's answer as VerifyAdmissionResponse does. Returns the response
    dict with 'patch' decoded to bytes (or None). Raises CallError."""
    if not 200 <= status <= 206:
        raise CallError(hook.name, "failed to call webhook: " + _unexpected_status(status, ctype, body))
    try:
        review = json.loads(body)
    except ValueError as e:
        raise CallError(hook.name, "failed to call webhook: couldn't get version/kind; json parse error: %s" % e)
    if not isinstance(review, dict):
        raise CallError(hook.name, "failed to call webhook: couldn't get version/kind; json parse error: "
                                   "not an object")
    resp = review.get("response")
    if not isinstance(resp, dict):
        raise CallError(hook.name, "received invalid webhook response: webhook response was absent")
    raw_patch = resp.get("patch")
    patch = None
    if raw_patch is not None:
        try:
            patch = base64.b64decode(raw_patch, validate=True) if raw_patch else b""
        except (ValueError, TypeError) as e:
            raise CallError(hook.name, "failed to call webhook: illegal base64 data in response.patch: %s" % e)
    if api_version == ADMISSION_V1:
        if resp.get("uid") != uid:
            raise CallError(hook.name, 'received invalid webhook response: expected response.uid="%s", got "%s"' %
                            (uid, resp.get("uid") or ""))
        got_av, got_kind = review.get("apiVersion") or "", review.get("kind") or ""
        if got_av != ADMISSION_V1 or got_kind != "AdmissionReview":
            gv = got_av if "/" in got_av else "/" + got_av
            raise CallError(hook.name, "received invalid webhook response: expected webhook response of "
                                       "admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s" % (gv, got_kind))
        patch_type = resp.get("patchType")
        if mutating:
            if patch and patch_type is None:
                raise CallError(hook.name, "received invalid webhook response: webhook returned response.patch but "
                                           "not response.patchType")
            if not patch and patch_type is not None:
                raise CallError(hook.name, "received invalid webhook response: webhook returned "
                                           "response.patchType but not response.patch")
            if patch_type is not None and patch_type == "":
                raise CallError(hook.name, 'received invalid webhook response: webhook returned invalid '
                                           'response.patchType of ""')
        else:
            if patch:
                raise CallError(hook.name, "received invalid webhook response: validating webhook may not return "
                                           "response.patch")
            if patch_type is not None:
                raise CallError(hook.name, "received invalid webhook response: validating webhook may not return "
                                           "response.patchType")
    else:  # v1beta1: neither uid nor GVK were verified; a patch is taken as JSONPatch
        patch_type = "JSONPatch" if patch else None
        if not mutating:
            patch = None
    out = dict(resp)
    out["patch"] = patch if mutating else None
    out["patchType"] = patch_type
    if not isinstance(out.get("allowed"), bool):
        out["allowed"] = bool(out.get("allowed"))
    return out


def denial(webhook_name, result):
    """ToStatusErr: the Status the client gets when a webhook says allowed:false."""
    result = dict(result) if isinstance(result, dict) else {}
    code = result.get("code")
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        code = 400
    denied_by = 'admission webhook "%s" denied the request' % webhook_name
    if result.get("message"):
        message = "%s: %s" % (denied_by, result["message"])
    elif result.get("reason"):
        message = "%s: %s" % (denied_by, result["reason"])
    else:
        message = denied_by + " without explanation"
    status = {"kind": "Status", "apiVersion": "v1", "metadata": result.get("metadata") or {}, "status": "Failure",
              "message": message}
    if result.get("reason"):
        status["reason"] = result["reason"]
    if result.get("details"):
        status["details"] = result["details"]
    status["code"] = code
    return ApiError.from_status(status)


def _timeout_param(seconds):
    return "%ds" % seconds if seconds < 60 else "%dm%ds" % (seconds // 60, seconds % 60)


# ----------------------------------------------------------------------------------------------

class Chain:
    """The MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins of one server."""

    def __init__(self, resolve=None, default_ca=None, log=None, call_log_limit=20000):
        self.lock = threading.Lock()
        self.resolve = resolve  # (host, port) that service references connect to, else 127.0.0.1:<port>
        self.default_ca = default_ca  # PEM used when a webhook's caBundle is empty
        self.log = log or (lambda msg: None)
        self.configs = {}  # (kind, name) -> configuration object
        self.startup = {}
        self.mutating = []
        self.validating = []
        self.clients = {}
        self.calls = []
        self.call_log_limit = call_log_limit

    # -- configuration ------------------------------------------------------------------------
    def client_for(self, cc):
        ca_pem = None
        if cc.get("caBundle"):
            ca_pem = base64.b64decode(cc["caBundle"]).decode("ascii")
        elif self.default_ca:
            ca_pem = self.default_ca
        if cc.get("url") is not None:
            u = urllib_parse(cc["url"])
            port = u.port or 443
            dial = (u.hostname, port)
            server_name = u.hostname
            host = u.hostname if ":" not in u.hostname else "[%s]" % u.hostname
            url_base = "https://%s:%d" % (host, port) if u.port else "https://" + host
            path = u.path or "/"
        else:
            svc = cc["service"]
            port = int(svc.get("port") or 443)
            server_name = "%s.%s.svc" % (svc["name"], svc["namespace"])
            dial = self.resolve or ("127.0.0.1", port)
            url_base = "https://%s:%d" % (server_name, port)
            path = svc.get("path") or "/"
        key = (dial, server_name, port, ca_pem)
        with self.lock:
            c = self.clients.get(key)
            if c is None:
                try:
                    c = Client(dial[0], dial[1], server_name, port, ca_pem)
                except ssl.SSLError as e:
                    raise ConfigError("clientConfig.caBundle: Invalid value: cannot load the CA bundle: %s" % e)
                self.clients[key] = c
        return c, url_base, path

    def _rebuild(self):
        mutating, validating = [], []
        for (kind, name) in sorted(self.configs, key=lambda k: (k[1], k[0])):
            hooks = parse_configuration(self.configs[(kind, name)], self)
            (mutating if kind == MUTATING_KIND else validating).extend(hooks)
        self.mutating, self.validating = mutating, validating

    def add(self, docs, startup=False):
        """Adds (or replaces, by kind and name) configurations. Other kinds are ignored. Raises
        ConfigError and changes nothing if one is invalid. Returns the number of configurations."""
        parsed = {}
        for d in docs:
            if parse_configuration(d, self) is None:
                continue
            parsed[(d["kind"], d["metadata"]["name"])] = kstore.clone(d)
        with self.lock:
            self.configs.update(parsed)
            if startup:
                self.startup.update(parsed)
        self._rebuild()
        return len(parsed)

    def clear(self):
        with self.lock:
            self.configs = {}
        self._rebuild()

    def restore_startup(self):
        with self.lock:
            self.configs = dict(self.startup)
        self._rebuild()

    def list_configs(self):
        with self.lock:
            return [self.configs[k] for k in sorted(self.configs, key=lambda k: (k[1], k[0]))]

    def active(self):
        return bool(self.mutating or self.validating)

    # -- the call log (GET /_test/admission) ----------------------------------------------------
    def record(self, item):
        with self.lock:
            self.calls.append(item)
            if len(self.calls) > self.call_log_limit:
                del self.calls[: len(self.calls) - self.call_log_limit]

    def call_log(self):
        with self.lock:
            return list(self.calls)

    def clear_call_log(self):
        with self.lock:
            self.calls = []

    # -- one call -------------------------------------------------------------------------------
    def _call(self, inv, a, obj, old, mutating, round_, warnings):
        """Sends one review. Returns the verified response dict. Raises CallError or ApiError."""
        hook = inv.hook
        if a.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise ApiError.bad_request('admission webhook "%s" does not support dry run' % hook.name)
        api_version = review_version(hook)
        started = time.time()
        entry = {"webhook": hook.name, "configuration": hook.config_name,
                 "type": "mutating" if mutating else "validating", "round": round_, "operation": a.operation,
                 "resource": "/".join(x for x in (inv.resource[0], inv.resource[1], inv.resource[2]) if x),
                 "subResource": a.subresource, "namespace": a.namespace, "name": a.name,
                 "user": a.user.get("username", ""), "dryRun": a.dry_run, "time": started}
        try:
            if api_version is None:
                raise CallError(hook.name, "could not create admission objects: webhook does not accept known "
                                           "AdmissionReview versions (v1, v1beta1)")
            uid = str(uuid.uuid4())
            entry["uid"] = uid
            review = build_review(inv, a, obj, old, api_version, uid)
            body = kstore.dumps(review)
            query = "?timeout=" + _timeout_param(hook.timeout)
            try:
                status, ctype, data = hook.client.post(hook.url_base + hook.path + query, hook.path + query, body,
                                                       hook.timeout)
            except _Failure as e:
                raise CallError(hook.name, "failed to call webhook: %s" % e)
            resp = verify_response(hook, uid, mutating, api_version, status, ctype, data)
            for w in resp.get("warnings") or []:
                if isinstance(w, str):
                    warnings.append(w)
            entry["allowed"] = resp["allowed"]
            entry["patched"] = bool(resp.get("patch"))
            if not resp["allowed"]:
                st = resp.get("status") if isinstance(resp.get("status"), dict) else {}
                entry["status"] = st
            return resp
        except CallError as e:
            entry["error"] = str(e)
            raise
        finally:
            entry["durationMs"] = round((time.time() - started) * 1000, 3)
            self.record(entry)

    # -- mutating ---------------------------------------------------------------------------------
    def mutate(self, a, warnings, defaulter=None, in_tree=None):
        """Runs the mutating webhooks on a.object (in place of it) with one reinvocation round, as
        the admission chain's reinvoker and the mutating dispatcher do. Returns the object."""
        hooks = self.mutating
        if not hooks:
            return a.object
        state = {"previous": set(), "reinvoke": set(), "last": None, "should_reinvoke": False}
        self._dispatch_mutating(a, hooks, state, 0, warnings, defaulter)
        if state["should_reinvoke"]:
            if in_tree is not None and a.object is not None:
                a.object = in_tree(a.object)  # the in-tree mutating plugins run again first
            self._dispatch_mutating(a, hooks, state, 1, warnings, defaulter)
        return a.object

    @staticmethod
    def _require_reinvoking(state):
        if state["previous"]:
            state["reinvoke"] |= state["previous"]
            state["previous"] = set()

    def _dispatch_mutating(self, a, hooks, state, round_, warnings, defaulter):
        if round_ == 1 and not kv.semantic_equal(state["last"], a.object):
            self._require_reinvoking(state)
        try:
            for hook in hooks:
                inv = should_call(hook, a)
                if inv is None:
                    continue
                if round_ == 1 and hook.uid not in state["reinvoke"]:
                    continue
                try:
                    changed = self._call_mutating(inv, a, round_, warnings, defaulter)
                    err = None
                except CallError as e:
                    changed, err = False, e
                if changed:
                    self._require_reinvoking(state)
                    state["should_reinvoke"] = True
                if hook.reinvoke_if_needed:
                    state["previous"].add(hook.uid)
                if err is None:
                    continue
                if hook.failure_policy == "Ignore":
                    self.log("failed calling webhook, failing open %s: %s" % (hook.name, err))
                    continue
                self.log("failed calling webhook, failing closed %s: %s" % (hook.name, err))
                raise ApiError.internal(str(err))
        finally:
            state["last"] = kstore.clone(a.object) if a.object is not None else None

    def _call_mutating(self, inv, a, round_, warnings, defaulter):
        hook = inv.hook
        obj = a.object
        old = a.old_object
        if inv.to_hook is not None:
            obj = inv.to_hook(obj) if obj is not None else None
            old = inv.to_hook(old) if old is not None else None
        resp = self._call(inv, a, obj, old, True, round_, warnings)
        if not resp["allowed"]:
            raise denial(hook.name, resp.get("status"))
        patch = resp.get("patch")
        if not patch:
            return False
        try:
            ops = json.loads(patch)
            if not isinstance(ops, list):
                raise ValueError("json: cannot unmarshal %s into Go value of type jsonpatch.Patch" %
                                 type(ops).__name__)
        except ValueError as e:
            raise CallError(hook.name, "received undecodable patch in webhook response: %s" % e)
        if not ops:
            return False
        if obj is None:
            raise ApiError.internal('admission webhook "%s" attempted to modify the object, which is not supported '
                                    'for this operation' % hook.name)
        try:
            patched = kpatch.json_patch(obj, ops, wrap_errors=False)
        except kpatch.JsonPatchError as e:
            raise ApiError.internal(str(e))
        except ApiError as e:
            raise ApiError.internal(e.message)
        if not isinstance(patched, dict):
            raise ApiError.internal("json: cannot unmarshal %s into Go value of type %s" %
                                    (type(patched).__name__, inv.kind[2]))
        if patched.get("kind") != obj.get("kind") or patched.get("apiVersion") != obj.get("apiVersion"):
            raise ApiError.internal("the patched object's kind/apiVersion (%s, %s) is not the webhook's (%s, %s)" %
                                    (patched.get("apiVersion"), patched.get("kind"), obj.get("apiVersion"),
                                     obj.get("kind")))
        patched = kstore.drop_nulls(patched)
        changed = not kv.semantic_equal(obj, patched)
        if inv.from_hook is not None:
            patched = inv.from_hook(patched)
        if defaulter is not None:
            defaulter(patched)
        a.object = patched
        return changed

    # -- validating -------------------------------------------------------------------------------
    def validate(self, a, warnings):
        """Calls every matching validating webhook (in parallel, as the dispatcher does); the first
        error in configuration order wins."""
        invs = []
        for hook in self.validating:
            inv = should_call(hook, a)
            if inv is not None:
                invs.append(inv)
        if not invs:
            return
        results = [None] * len(invs)
        local_warnings = [[] for _ in invs]

        def run(i):
            try:
                results[i] = self._call_validating(invs[i], a, local_warnings[i])
            except Exception as e:  # noqa: BLE001 - handed to the caller below
                results[i] = e

        if len(invs) == 1:
            run(0)
        else:
            threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(invs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for w in local_warnings:
            warnings.extend(w)
        for r in results:
            if isinstance(r, Exception):
                raise r

    def _call_validating(self, inv, a, warnings):
        hook = inv.hook
        obj, old = a.object, a.old_object
        if inv.to_hook is not None:
            obj = inv.to_hook(obj) if obj is not None else None
            old = inv.to_hook(old) if old is not None else None
        try:
            resp = self._call(inv, a, obj, old, False, 0, warnings)
        except CallError as e:
            if hook.failure_policy == "Ignore":
                self.log("failed calling webhook, failing open %s: %s" % (hook.name, e))
                return None
            self.log("failed calling webhook, failing closed %s: %s" % (hook.name, e))
            return ApiError.internal(str(e))
        if not resp["allowed"]:
            return denial(hook.name, resp.get("status"))
        return None

    # -- per-request bindings ---------------------------------------------------------------------
    def bind(self, rt, operation, namespace, name, user, subresource="", dry_run=False, options=None,
             warnings=None, **kw):
        """The admission hooks of one request, or None when no webhook is configured."""
        if not self.active():
            return None
        return Binding(self, rt, operation, namespace, name, user, subresource, dry_run, options, warnings, **kw)


def options_for(operation, dry_run=False, field_manager=None, delete_options=None):
    """The CreateOptions/UpdateOptions/DeleteOptions a review carries."""
    kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(operation)
    if kind is None:
        return None
    out = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if operation == "DELETE" and delete_options:
        for k, v in delete_options.items():
            if k not in ("kind", "apiVersion", "dryRun"):
                out[k] = v
    if dry_run:
        out["dryRun"] = ["All"]
    if field_manager and operation != "DELETE":
        out["fieldManager"] = field_manager
    return out


class Binding:
    """What the store needs of admission for one write: mutate(obj, old) and validate(obj, old),
    objects in storage form. kind/resource default to the resource type's; to_versioned and
    from_versioned convert to the version the request was made in (events.k8s.io/v1 events, or a
    Scale for the scale subresource, whose mutation the caller runs itself: mutate_in_store=False)."""

    def __init__(self, chain, rt, operation, namespace, name, user, subresource, dry_run, options, warnings,
                 kind=None, resource=None, to_versioned=None, from_versioned=None, mutate_in_store=True,
                 in_tree=None):
        self.chain = chain
        self.rt = rt
        self.operation = operation
        self.namespace = namespace
        self.name = name
        self.user = user
        self.subresource = subresource or ""
        self.dry_run = dry_run
        self.options = options if options is not None else options_for(operation, dry_run)
        self.warnings = warnings if warnings is not None else []
        self.kind = kind or (rt.group, rt.version, rt.kind)
        self.resource = resource or (rt.group, rt.version, rt.plural)
        self.to_versioned = to_versioned or (rt.view if rt.view.__func__ is not kstore.ResourceType.view else None)
        self.from_versioned = from_versioned or (rt.from_view if self.to_versioned is not None else None)
        self.mutate_in_store = mutate_in_store
        self.in_tree = in_tree

    def _v(self, obj):
        if obj is None or self.to_versioned is None:
            return obj
        return self.to_versioned(obj)

    def attributes(self, obj, old):
        name = self.name or ((obj or {}).get("metadata") or {}).get("name") or ""
        return Attributes(self.operation, self.kind, self.resource, self.subresource, self.namespace, name, self.user,
                          self.dry_run, self.options, obj, old)

    def mutate_versioned(self, obj, old):
        """Runs the mutating webhooks on objects already in the request's version."""
        a = self.attributes(kstore.clone(obj) if obj is not None else None, old)
        return self.chain.mutate(a, self.warnings, defaulter=self._defaulter(), in_tree=self.in_tree)

    def _defaulter(self):
        """Defaulting after each patch, for objects of the resource's own kind and storage version."""
        if self.to_versioned is not None or self.kind[2] != self.rt.kind:
            return None
        return self.rt.default

    def mutate(self, obj, old):
        if not self.mutate_in_store:
            return obj
        out = self.mutate_versioned(self._v(obj), self._v(old))
        if out is not None and self.from_versioned is not None:
            out = self.from_versioned(out)
        return out

    def validate(self, obj, old):
        self.chain.validate(self.attributes(self._v(obj), self._v(old)), self.warnings)

    def delete(self, old):
        """DELETE admission: mutating (no object; a patch is an error), then validating."""
        v_old = self._v(old)
        self.chain.mutate(self.attributes(None, v_old), self.warnings)
        self.chain.validate(self.attributes(None, v_old), self.warnings)


def read_users(path):
    """The users file: {"<token>": {"username": ..., "groups": [...], "uid": ...}}."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("the users file must hold a JSON object {token: user}")
    out = {}
    for token, user in data.items():
        if not isinstance(user, dict) or not isinstance(user.get("username"), str) or not user["username"]:
            raise ValueError("user of token %r needs a username" % (token[:4] + "..."))
        out[token] = authenticated(user)
    return out


class Authenticator:
    """Bearer tokens: --token-file (one token, user system:admin) and --users-file (many), both
    re-read when they change. Without either, every request is system:anonymous."""

    def __init__(self, token_file=None, users_file=None, log=None):
        self.token_file = token_file
        self.users_file = users_file
        self.log = log or (lambda msg: None)
        self.lock = threading.Lock()
        self.users = {}
        self.users_stamp = None

    def _users(self):
        try:
            st = os.stat(self.users_file)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return {}
        with self.lock:
            if stamp != self.users_stamp:
                try:
                    self.users = read_users(self.users_file)
                except (OSError, ValueError) as e:
                    self.log("users file %s: %s (keeping the previous users)" % (self.users_file, e))
                self.users_stamp = stamp
            return self.users

    def _fixed_token(self):
        try:
            with open(self.token_file) as f:
                return f.read().strip()
        except OSError:
            return ""

    def authenticate(self, header):
        """The user of a request with this Authorization header, or None for 401."""
        token = None
        if header:
            scheme, _, rest = header.partition(" ")
            if scheme.lower() == "bearer" and rest.strip():
                token = rest.strip()
        if not self.token_file and not self.users_file:
            return ANONYMOUS
        if token is None:
            return None if self.token_file else ANONYMOUS
        if self.token_file:
            fixed = self._fixed_token()
            if fixed and token == fixed:
                return ADMIN
        if self.users_file:
            user = self._users().get(token)
            if user is not None:
                return user
        return None


def warning_headers(warnings):
    """The Warning headers kube-apiserver sends: deduplicated, `299 - "<text>"`, and truncated to
    256 bytes each once they exceed 4 KiB in total."""
    seen, texts = set(), []
    for w in warnings:
        w = "".join(ch if ch.isprintable() or ch == "\t" else " " for ch in str(w))
        if w and w not in seen:
            seen.add(w)
            texts.append(w)

    def fmt(t):
        return '299 - "%s"' % t.replace("\\", "\\\\").replace('"', '\\"')

    if sum(len(fmt(t).encode()) for t in texts) > 4096:
        texts = [t if len(t.encode()) <= 256 else t.encode()[:256].decode("utf-8", "ignore") for t in texts]
    return [("Warning", fmt(t)) for t in texts]
