#!/usr/bin/env python3
"""Checks of the Helm chart that need neither a cluster nor helm.

    check_chart.py SOURCE_DIR

Runs every check, prints `ok - NAME` or `FAIL - NAME` with one line per violation, and ends with
`N passed, N failed`; exits 1 if any check failed. Needs Python 3 and PyYAML (Debian: python3-yaml).

What is checked (charts/inplace-webhook unless said otherwise):
- every non-template YAML file parses, values.schema.json is JSON;
- Chart.yaml: apiVersion v2, name, SemVer version, version == appVersion == the VERSION file (one version for
  the binary, the chart and the image: README "Releasing");
- values.yaml (and tests/chart/values-*.yaml) validate against values.schema.json, with a small
  JSON-Schema validator for the keywords the schema uses; every schema key has a default in
  values.yaml; a table of bad values is rejected and a table of good ones accepted;
- every .Values.x.y a template reads exists in values.yaml, and every value is read somewhere;
- the webhook paths in the templates are exactly the routes of hooks/routes.cpp (mutating routes in
  the MutatingWebhookConfiguration), with the rules, selectors and settings of the contract;
- the RBAC rules grant exactly the rows of tests/chart/api-calls.md, and that table matches the API
  calls the C++ sources under hooks/ and server/ make (see api-calls.md for how calls are found);
- every flag the Deployment passes to `serve` is one the binary defines (server/ cxxopts options);
- contract defaults (replicas, failure policies, security context, ports), image uid, README values
  table, NOTES.txt, labels.
The checker's own parsers are exercised on small inputs first (self-test), so a parser that finds
nothing cannot make a check pass.
"""

import json
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpp_api_calls import (BUILDER_RESOURCES, ApiCallFinder, Source, builders_from_header,  # noqa: E402
                           client_wired, cxxopts_flags, parse_routes, strip_cpp_comments)

try:
    import yaml
except ImportError:  # pragma: no cover
    print("FAIL - python3-yaml is not installed (Debian: apt-get install python3-yaml)")
    print("0 passed, 1 failed")
    sys.exit(1)


# ----------------------------------------------------------------------------------------------
# Small utilities


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rel(root, path):
    return os.path.relpath(path, root)


def dig(tree, dotted):
    """Value at a dotted path in nested dicts, or KeyError."""
    node = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def deep_merge(base, override):
    """A copy of base with override merged in; an override value of DELETE removes the key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    out = dict(base)
    for k, v in override.items():
        if v is DELETE:
            out.pop(k, None)
        elif k in out:
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


DELETE = object()


# ----------------------------------------------------------------------------------------------
# JSON Schema, the subset values.schema.json uses


SCHEMA_ANNOTATIONS = {"$schema", "$comment", "title", "description", "default", "examples"}
SCHEMA_KEYWORDS = {"type", "properties", "additionalProperties", "required", "enum", "items",
                   "minimum", "maximum", "pattern"}


def json_type_ok(value, t):
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    raise ValueError("unknown JSON Schema type %r" % t)


def schema_errors(schema, value, path="(root)"):
    """Violations of `schema` by `value`, as 'path: message' strings. Unsupported keywords are
    errors too, so a misspelt keyword cannot silently turn a rule off."""
    errors = []
    if schema is True or schema == {}:
        return errors
    if schema is False:
        return ["%s: not allowed" % path]
    unknown = set(schema) - SCHEMA_KEYWORDS - SCHEMA_ANNOTATIONS
    if unknown:
        errors.append("%s: schema uses unsupported keyword(s) %s" % (path, sorted(unknown)))
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(json_type_ok(value, t) for t in types):
            return errors + ["%s: %r is not of type %s" % (path, value, "/".join(types))]
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %s" % (path, value, schema["enum"]))
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if is_number and "minimum" in schema and value < schema["minimum"]:
        errors.append("%s: %r is less than the minimum %r" % (path, value, schema["minimum"]))
    if is_number and "maximum" in schema and value > schema["maximum"]:
        errors.append("%s: %r is greater than the maximum %r" % (path, value, schema["maximum"]))
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append("%s: %r does not match the pattern %s" % (path, value, schema["pattern"]))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: required key %r is missing" % (path, key))
        for key, sub in value.items():
            subpath = key if path == "(root)" else "%s.%s" % (path, key)
            if key in props:
                errors += schema_errors(props[key], sub, subpath)
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    errors.append("%s: unknown key (not in values.schema.json)" % subpath)
                else:
                    errors += schema_errors(extra, sub, subpath)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(schema["items"], item, "%s[%d]" % (path, i))
    return errors


def schema_keys(schema, prefix=""):
    """Dotted paths of every key the schema names under `properties` (recursively)."""
    keys = []
    for key, sub in schema.get("properties", {}).items():
        path = prefix + key
        keys.append(path)
        if isinstance(sub, dict):
            keys += schema_keys(sub, path + ".")
    return keys


def schema_leaf_keys(schema, prefix=""):
    """Dotted paths of the keys that have no sub-properties: the rows of the README values table."""
    keys = []
    for key, sub in schema.get("properties", {}).items():
        if isinstance(sub, dict) and sub.get("properties"):
            keys += schema_leaf_keys(sub, prefix + key + ".")
        else:
            keys.append(prefix + key)
    return keys


# ----------------------------------------------------------------------------------------------
# Go templates: just enough to read our own templates


ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.S)
TEMPLATE_COMMENT = re.compile(r"{{-?\s*/\*.*?\*/\s*-?}}", re.S)


def detemplate(text):
    """Turns a template into parseable YAML: comments go, lines that hold only actions go, every
    other action becomes a placeholder 'TPL<n>'. Returns (yaml_text, {placeholder: action})."""
    text = TEMPLATE_COMMENT.sub("", text)
    actions = {}
    out = []
    for line in text.split("\n"):
        if ACTION.search(line) and not ACTION.sub("", line).strip():
            continue

        def repl(m):
            key = "TPL%d" % len(actions)
            actions[key] = m.group(1).strip()
            return key

        out.append(ACTION.sub(repl, line))
    return "\n".join(out), actions


def template_docs(text):
    """The YAML documents of a detemplated template (None documents dropped), and the actions."""
    body, actions = detemplate(text)
    docs = [d for d in yaml.safe_load_all(body) if isinstance(d, dict)]
    return docs, actions


VALUES_REF = re.compile(r"(?<![\w$])\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
VAR_ALIAS = re.compile(r"\$([A-Za-z_]\w*)\s*:?=\s*\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def values_refs(text):
    """Dotted value paths a template reads: .Values.a.b, $.Values.a.b, and $x.c after
    `$x := .Values.a.b` (-> a.b.c)."""
    refs = {m.group(1)[1:] for m in VALUES_REF.finditer(text)}
    for m in VAR_ALIAS.finditer(text):
        var, base = m.group(1), m.group(2)[1:]
        for use in re.finditer(r"\$%s((?:\.[A-Za-z_][A-Za-z0-9_]*)+)" % re.escape(var), text):
            refs.add(base + use.group(1))
    return refs


def value_paths(values, prefix=""):
    """(path, value) of every key in values.yaml, depth first."""
    out = []
    for k, v in values.items():
        path = prefix + k
        out.append((path, v))
        if isinstance(v, dict):
            out += value_paths(v, path + ".")
    return out


def parse_api_table(text):
    """Rows of the table in api-calls.md: {(group, resource, verb): scope}."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("group", "") or set(cells[0]) <= set("-: "):
            continue
        group = "" if cells[0] == "core" else cells[0]
        for verb in re.split(r"[,\s]+", cells[2]):
            if verb:
                rows[(group, cells[1], verb)] = cells[3]
    return rows


def rbac_grants(docs):
    """{(group, resource, verb): scope} granted by the ClusterRole(s) and Role(s), plus errors."""
    grants, errors = {}, []
    for doc in docs:
        kind = doc.get("kind")
        if kind not in ("ClusterRole", "Role"):
            continue
        scope = "cluster" if kind == "ClusterRole" else "namespace"
        for rule in doc.get("rules") or []:
            if rule.get("nonResourceURLs"):
                errors.append("%s rule %s: nonResourceURLs are not expected" % (kind, rule))
            if rule.get("resourceNames"):
                # Named: the leader-election Lease, and (certificates.mode=controller) the certificate Secret
                # and the product's own webhook configurations; create/list/watch cannot be limited by name.
                res, names, verbs = rule.get("resources"), rule.get("resourceNames"), set(rule.get("verbs") or [])
                named_ok = ((kind == "Role" and res == ["leases"] and names == ["inplace-webhook"] and verbs <= {"get", "update"})
                            or (kind == "Role" and res == ["secrets"] and len(names) == 1 and verbs <= {"get", "patch"})
                            or (kind == "ClusterRole" and res == ["mutatingwebhookconfigurations",
                                                                  "validatingwebhookconfigurations"]
                                and len(names) == 1 and verbs <= {"get", "patch"}))
                if not named_ok:
                    errors.append("%s rule %s: resourceNames only on the Lease inplace-webhook (get, update), the "
                                  "certificate Secret and the webhook configurations (get, patch)" % (kind, rule))
            for g in rule.get("apiGroups") or []:
                for r in rule.get("resources") or []:
                    for v in rule.get("verbs") or []:
                        if "*" in (g, r, v):
                            errors.append("%s grants a wildcard: %s/%s %s" % (kind, g, r, v))
                        grants[(g, r, v)] = scope
    return grants, errors


def compare_grants(grants, table):
    errors = []
    for key in sorted(set(table) - set(grants)):
        errors.append("RBAC does not grant %s %s/%s (api-calls.md row)" % (key[2], key[0] or "core", key[1]))
    for key in sorted(set(grants) - set(table)):
        errors.append("RBAC grants %s %s/%s, which api-calls.md does not list (more than the binary needs)"
                      % (key[2], key[0] or "core", key[1]))
    for key in sorted(set(grants) & set(table)):
        if grants[key] != table[key]:
            errors.append("%s %s/%s is granted with %s scope, api-calls.md says %s"
                          % (key[2], key[0] or "core", key[1], grants[key], table[key]))
    return errors


def compare_source(needed, table):
    """(calls the table does not allow, table rows no call uses), as messages."""
    forbidden, unused = [], []
    for key in sorted(set(needed) - set(table)):
        forbidden.append("the sources call %s %s/%s (%s) but api-calls.md and the RBAC do not allow it"
                         % (key[2], key[0] or "core", key[1], ", ".join(sorted(set(needed[key]))[:3])))
    for key in sorted(set(table) - set(needed)):
        unused.append("api-calls.md (and the RBAC) allow %s %s/%s, but no call in hooks/ or server/ uses "
                      "it: drop the row and the rule, or write the call in a shape the check follows"
                      % (key[2], key[0] or "core", key[1]))
    return forbidden, unused


# ----------------------------------------------------------------------------------------------
# CEL, the subset the chart's webhook matchConditions use


class CelError(Exception):
    """An expression outside the subset: the check fails rather than guessing."""


class CelFailure:
    """A CEL evaluation error as a value (a missing key, a field of null): `&&`/`||` absorb it when the other
    side decides, as cel-go does; anything else propagates it."""

    def __init__(self, why):
        self.why = why

    def __repr__(self):
        return "error(%s)" % self.why


CEL_TOKEN = re.compile(r"\s*(?:(&&|\|\||==|!=|[!().])|('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|([A-Za-z_]\w*))")


def cel_tokens(text):
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = CEL_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CelError("unsupported CEL at %r" % text[pos:])
        op, string, ident = m.groups()
        out.append(("op", op) if op else ("str", string[1:-1].encode().decode("unicode_escape")) if string
                   else ("id", ident))
        pos = m.end()
    return out


def cel_parse(text):
    """The AST of `text`: ('or'|'and', a, b), ('not', a), ('eq'|'ne', a, b), ('has', path), ('path', [names]),
    ('lit', value). Raises CelError outside the subset."""
    toks = cel_tokens(text)
    pos = [0]

    def peek(*want):
        return pos[0] < len(toks) and toks[pos[0]] in want

    def take(kind=None, value=None):
        if pos[0] >= len(toks):
            raise CelError("unexpected end of %r" % text)
        t = toks[pos[0]]
        if (kind and t[0] != kind) or (value and t[1] != value):
            raise CelError("unexpected %r in %r" % (t[1], text))
        pos[0] += 1
        return t

    def path():
        names = [take("id")[1]]
        while peek(("op", ".")):
            take()
            names.append(take("id")[1])
        return names

    def primary():
        if peek(("op", "(")):
            take()
            e = disjunction()
            take("op", ")")
            return e
        if pos[0] < len(toks) and toks[pos[0]][0] == "str":
            return ("lit", take()[1])
        if peek(("id", "has")):
            take()
            take("op", "(")
            p = path()
            take("op", ")")
            if len(p) < 2:
                raise CelError("has() needs a field selection in %r" % text)
            return ("has", p)
        if peek(("id", "null")):
            take()
            return ("lit", None)
        if peek(("id", "true"), ("id", "false")):
            return ("lit", take()[1] == "true")
        return ("path", path())

    def comparison():
        left = primary()
        if peek(("op", "=="), ("op", "!=")):
            op = take()[1]
            return ("eq" if op == "==" else "ne", left, primary())
        return left

    def unary():
        if peek(("op", "!")):
            take()
            return ("not", unary())
        return comparison()

    def conjunction():
        e = unary()
        while peek(("op", "&&")):
            take()
            e = ("and", e, unary())
        return e

    def disjunction():
        e = conjunction()
        while peek(("op", "||")):
            take()
            e = ("or", e, conjunction())
        return e

    ast = disjunction()
    if pos[0] != len(toks):
        raise CelError("trailing %r in %r" % (toks[pos[0]][1], text))
    return ast


def cel_eval(ast, env):
    """Evaluates a cel_parse AST over `env` ({"request": ..., "object": ..., "oldObject": ...})."""
    kind = ast[0]
    if kind == "lit":
        return ast[1]
    if kind in ("path", "has"):
        names = ast[1] if kind == "path" else ast[1][:-1]
        if names[0] not in env:
            return CelFailure("undeclared reference to %r" % names[0])
        value = env[names[0]]
        for n in names[1:]:
            if not isinstance(value, dict) or n not in value:
                return CelFailure("no such key: %s" % n)
            value = value[n]
        if kind == "path":
            return value
        if not isinstance(value, dict):
            return CelFailure("has() on %r" % (value,))
        return ast[1][-1] in value
    if kind == "not":
        v = cel_eval(ast[1], env)
        return v if isinstance(v, CelFailure) else CelFailure("! of %r" % (v,)) if not isinstance(v, bool) else not v
    if kind in ("eq", "ne"):
        a, b = cel_eval(ast[1], env), cel_eval(ast[2], env)
        for v in (a, b):
            if isinstance(v, CelFailure):
                return v
        return (a == b) if kind == "eq" else (a != b)
    a, b = cel_eval(ast[1], env), cel_eval(ast[2], env)
    decisive = kind == "or"  # the value that decides whatever the other side is: true for ||, false for &&
    if a is decisive or b is decisive:
        return decisive
    for v in (a, b):
        if isinstance(v, CelFailure):
            return v
        if not isinstance(v, bool):
            return CelFailure("%s of %r" % (kind, v))
    return not decisive


# ----------------------------------------------------------------------------------------------
# The checks


class Run:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def case(self, name, errors):
        errors = [e for e in errors if e]
        if errors:
            self.failed += 1
            print("FAIL - %s" % name)
            for e in errors:
                print("    %s" % e)
        else:
            self.passed += 1
            print("ok - %s" % name)


def self_test(run):
    """The checker's parsers on small inputs with known answers."""
    # JSON Schema validator: each keyword rejects what it should and accepts what it should.
    s = {"type": "object", "additionalProperties": False, "required": ["a"],
         "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 3},
                        "b": {"type": "string", "enum": ["x", "y"]},
                        "c": {"type": "string", "pattern": "^[0-9]+%$"},
                        "d": {"type": "array", "items": {"type": "boolean"}},
                        "e": {"type": ["integer", "string"]},
                        "f": {"type": "object", "additionalProperties": {"type": "string"}}}}
    table = [
        ({"a": 2}, 0), ({"a": 0}, 1), ({"a": 4}, 1), ({"a": True}, 1), ({"a": "2"}, 1), ({}, 1),
        ({"a": 1, "b": "z"}, 1), ({"a": 1, "b": "x"}, 0), ({"a": 1, "c": "50%"}, 0),
        ({"a": 1, "c": "half"}, 1), ({"a": 1, "d": [True, False]}, 0), ({"a": 1, "d": [True, 1]}, 1),
        ({"a": 1, "e": 3}, 0), ({"a": 1, "e": "3"}, 0), ({"a": 1, "e": 3.5}, 1), ({"a": 1, "zz": 1}, 1),
        ({"a": 1, "f": {"k": "v"}}, 0), ({"a": 1, "f": {"k": 1}}, 1), ([], 1),
    ]
    errors = []
    for value, want in table:
        got = len(schema_errors(s, value))
        if got != want:
            errors.append("schema_errors(%r): %d error(s), want %d" % (value, got, want))
    if not schema_errors({"type": "object", "additionalproperties": False}, {}):
        errors.append("a misspelt schema keyword was not reported")
    run.case("self-test: JSON Schema validator (%d cases)" % (len(table) + 1), errors)

    # Template reading.
    errors = []
    t = ('{{- $cm := .Values.certificates.certManager }}\nx: {{ $cm.duration }}\n'
         'y: {{ .Values.a.b | quote }}\n{{- with $.Values.c }}z{{ end }}\n{{/* .Values.comment */}}\n')
    refs = values_refs(TEMPLATE_COMMENT.sub("", t))
    want = {"certificates.certManager", "certificates.certManager.duration", "a.b", "c"}
    if refs != want:
        errors.append("values_refs: %s, want %s" % (sorted(refs), sorted(want)))
    docs, actions = template_docs("{{- if .Values.x }}\nkind: A\nname: {{ .Values.n }}\n{{- end }}\n---\n"
                                  "kind: B\nlist:\n  {{- include \"h\" . | nindent 2 }}\n")
    if [d.get("kind") for d in docs] != ["A", "B"] or actions.get(docs[0]["name"]) != ".Values.n":
        errors.append("template_docs: %r %r" % (docs, actions))
    run.case("self-test: template reading", errors)

    # The CEL subset: operators, errors absorbed by && and || as cel-go does, and refusal of anything else.
    env = {"request": {"operation": "UPDATE", "userInfo": {"username": "alice"}},
           "object": {"metadata": {"name": "web", "deletionTimestamp": "2026-01-01T00:00:00Z"}}, "oldObject": None}
    table = [("true && false", False), ("'a' != 'b'", True), ('"a" == \'a\'', True),
             ("request.userInfo.username == 'alice'", True), ("request.nope != 'x'", "error"),
             ("false && request.nope.x", False), ("request.nope.x && false", False),
             ("true && request.nope", "error"), ("request.nope || true", True),
             ("has(object.metadata.deletionTimestamp)", True), ("!has(object.metadata.labels)", True),
             ("has(oldObject.metadata.name)", "error"), ("!(true && (false || true))", False),
             ("request.operation != 'DELETE' && !has(oldObject.metadata.x)", "error")]
    errors = []
    for text, want in table:
        got = cel_eval(cel_parse(text), env)
        got = "error" if isinstance(got, CelFailure) else got
        if got != want:
            errors.append("%s = %r, want %r" % (text, got, want))
    for bad in ("size(object) > 1", "object.metadata.name.startsWith('x')", "a &&", "a == b == c", "a[0]"):
        try:
            cel_parse(bad)
            errors.append("%r was accepted" % bad)
        except CelError:
            pass
    run.case("self-test: CEL subset (%d expressions, 5 refused)" % len(table), errors)

    # Routes, flags.
    errors = []
    routes = parse_routes('static const std::vector<Route> k = {\n  {"/a", true, A},\n'
                          '  // {"/old", false, Old},\n  {"/b", false, B},\n};')
    if routes != [("/a", True), ("/b", False)]:
        errors.append("parse_routes: %r" % routes)
    flags = cxxopts_flags('o.add_options("G")\n ("port", "p", v())\n ("h,help", "x")\n'
                          ' ("log-level", "l", v()->default_value("info"));\nfoo("not-a-flag", 1);')
    if flags != {"port", "help", "log-level"}:
        errors.append("cxxopts_flags: %r" % flags)
    run.case("self-test: routes and flags parsers", errors)

    # API calls: each shape api-calls.md promises, and an unconnected builder is an error.
    code = r'''
namespace iw::loop {
struct Informer {
  Informer(kube::WatchApi& api, std::string path) : api_(api), path_(std::move(path)) {}
  void Run(std::stop_token stop) {
    auto r = api_.List(path_, kube::ListOptions{});
    std::string rv;
    kube::WatchFrom(api_, path_, {}, rv, handler_, stop);
  }
  kube::WatchApi& api_;
  std::string path_;
};
Result PatchWithRetry(kube::Api& api, const std::string& path, std::string_view body) {
  for (int i = 0; i < 3; ++i) {
    Result r = api.Patch(path, kube::PatchType::kMerge, body);  // api.Delete(x) in a comment
    if (!r.Conflict()) return r;
  }
  return api.Get(path);
}
void Step(kube::Api& api, const Pod& pod) {
  Result d = api.Get(kube::DeploymentPath(pod.ns, pod.owner));
  const std::string rs = kube::ReplicaSetPath(pod.ns, pod.rs);
  api.Update(rs, object);
  PatchWithRetry(api, kube::PodPath(pod.ns, pod.name), "{}");
  api.Patch(kube::PodPath(pod.ns, pod.name) + "/status", kube::PatchType::kMerge, "{}");
  Informer pods(api, kube::PodsPath(""));
  auto leases = std::make_unique<Informer>(api, kube::LeasesPath("ns"));
  api->Create(EventsPath(pod.ns), event);
  std::string lonely = kube::ReplicaSetsPath(pod.ns);
}
struct Options { std::string path; int limit = 0; };
class Lister {
 public:
  Lister(kube::Api& api, Options options) : api_(api), options_(std::move(options)) {}
  void Once() { api_.List(options_.path, {}); }
 private:
  kube::Api& api_;
  Options options_;
};
std::string LeaseOf(const std::string& ns) { return kube::LeasePath(ns, "inplace-webhook"); }
void Wire(kube::Api& api) {
  Options opts;
  opts.path = kube::DeploymentsPath("");
  Lister deployments(api, std::move(opts));
  Lister replicasets(api, Options{.path = kube::ReplicaSetsPath(""), .limit = 5});
  api.Update(LeaseOf("ns"), lease);
}
}  // namespace iw::loop
'''
    finder = ApiCallFinder([Source("x.cpp", code)], BUILDER_RESOURCES)
    used, needed, errs = finder.find()
    want = {("apps", "deployments", "get"), ("apps", "replicasets", "update"), ("", "pods", "patch"),
            ("", "pods", "get"), ("", "pods/status", "patch"), ("", "pods", "list"),
            ("", "pods", "watch"), ("coordination.k8s.io", "leases", "list"),
            ("coordination.k8s.io", "leases", "watch"), ("", "events", "create"),
            ("apps", "deployments", "list"), ("apps", "replicasets", "list"),
            ("coordination.k8s.io", "leases", "update")}
    errors = []
    if not used:
        errors.append("ApiCallFinder saw no builder")
    if set(needed) != want:
        errors.append("ApiCallFinder: extra %s, missing %s" % (sorted(set(needed) - want), sorted(want - set(needed))))
    if len(errs) != 1 or "ReplicaSetsPath" not in errs[0] or "x.cpp:29" not in errs[0]:
        errors.append("ApiCallFinder errors: %r (want one, for the unused ReplicaSetsPath on line 29)" % errs)
    run.case("self-test: API calls found in C++ (%d shapes)" % len(want), errors)

    # A dispatcher that picks the path by a kind, and drivers that pick the verb by the same kind.
    dispatcher = r'''
namespace iw::rollout {
enum class WriteKind { kPodPatch, kPodStatusPatch, kReplicaSetPatch, kDeploymentPatch, kEvent };
std::string Action::Path() const {
  switch (kind) {
    case WriteKind::kPodPatch:
      return kube::PodPath(ns, name);
    case WriteKind::kPodStatusPatch:
      return kube::PodStatusPath(ns, name);
    case WriteKind::kReplicaSetPatch:
      return kube::ReplicaSetPath(ns, name);
    case WriteKind::kDeploymentPatch:
      return kube::DeploymentPath(ns, name);
    case WriteKind::kEvent:
      return kube::EventsPath(ns);
  }
  return {};
}
}
'''
    drivers = {
        "if/else": '''
Result Execute(kube::Api& api, const rollout::Action& a) {
  log::Info("write", {{"path", a.Path()}, {"body", "{\\"x\\":{"}});
  if (a.kind == rollout::WriteKind::kEvent) {
    return api.Create(a.Path(), a.body);
  } else {
    return api.Patch(a.Path(), a.PatchType(), json::Serialize(a.body));
  }
}''',
        "early return": '''
Result Execute(kube::Api& api, const rollout::Action& a) {
  if (a.kind == rollout::WriteKind::kEvent) return api.Create(a.Path(), a.body);
  return api.Patch(a.Path(), a.PatchType(), json::Serialize(a.body));
}''',
        "switch/default": '''
void Run(kube::Api& api, const Plan& plan) {
  for (const auto& a : plan.actions) {
    Result r;
    switch (a.kind) {
      case WriteKind::kEvent:
        r = api.Create(a.Path(), a.body);
        break;
      default:
        r = api.Patch(a.Path(), a.PatchType(), "{}");
        break;
    }
  }
}''',
        "ternary": '''
Result Execute(kube::Api& api, const Action& a) {
  Result r = a.kind == WriteKind::kEvent ? api.Create(a.Path(), a.body) : api.Patch(a.Path(), a.PatchType(), "{");
  return r;
}''',
        "continue": '''
void Run(kube::Api& api, const Plan& plan) {
  for (const Action& a : plan.actions) {
    if (a.kind != WriteKind::kEvent) {
      api.Patch(a.Path(), a.PatchType(), "}");
      continue;
    }
    api.Create(a.Path(), a.body);
  }
}''',
    }
    want = {("", "pods", "patch"), ("", "pods/status", "patch"), ("apps", "replicasets", "patch"),
            ("apps", "deployments", "patch"), ("", "events", "create")}
    errors = []
    for shape, driver in drivers.items():
        finder = ApiCallFinder([Source("plan.cpp", dispatcher), Source("driver.cpp", driver)], BUILDER_RESOURCES)
        _, needed, errs = finder.find()
        if set(needed) != want or errs:
            errors.append("%s driver: extra %s, missing %s, errors %s" % (
                shape, sorted(set(needed) - want), sorted(want - set(needed)), errs))
    finder = ApiCallFinder([Source("plan.cpp", dispatcher), Source("driver.cpp", drivers["early return"].replace(
        "api.Create(a.Path(), a.body)", "api.Delete(a.Path())"))], BUILDER_RESOURCES)
    _, needed, _ = finder.find()
    if ("", "events", "delete") not in needed or ("", "pods", "delete") in needed:
        errors.append("a changed verb in the driver is not followed: %s" % sorted(needed))
    run.case("self-test: API calls through a kind dispatcher (%d driver shapes)" % (len(drivers) + 1), errors)

    # Paths that are only map keys, compared or logged reach no API call and are no error; a path
    # handed to code the check cannot see into is one.
    code = r'''
void Apply(kube::Api& api, Action& a, std::map<std::string, std::string>& versions) {
  const std::string path = a.Path();
  const std::string object = a.kind == WriteKind::kStatus ? kube::PodPath(a.ns, a.name) : path;
  auto v = versions.find(object);
  versions[object] = "1";
  if (kube::DeploymentPath(a.ns, a.name) == path) return;
  log::Info("writing", {{"path", kube::ReplicaSetPath(a.ns, a.name)}});
  std::string error = kube::EventsPath(a.ns) + ": failed";
  std::vector<std::string> paths;
  paths.push_back(kube::LeasePath(a.ns, "x"));
}'''
    finder = ApiCallFinder([Source("apply.cpp", code)], BUILDER_RESOURCES)
    _, needed, errs = finder.find()
    errors = []
    if needed:
        errors.append("key/message uses counted as API calls: %s" % sorted(needed))
    if len(errs) != 1 or "LeasePath" not in errs[0]:
        errors.append("want one error, for the path pushed into a vector; got %r" % errs)
    if len(finder.bookkeeping) != 4:
        errors.append("want 4 key/compare/log/message uses, got %r" % finder.bookkeeping)
    run.case("self-test: paths used only as keys, in comparisons or messages", errors)

    # Whether the binary builds its API client.
    errors = []
    for text, want_wired in (("auto c = kube::ClientConfig::InCluster(err);", True),
                             ("auto client = std::make_unique<kube::Client>(*config);", True),
                             ("kube::Client client(std::move(config));", True),
                             ("Client(const Client&) = delete; Result Client::Get(std::string_view p) {}", False),
                             ("// kube::Client client(config);", False)):
        got = bool(client_wired([Source("server/process/main.cpp", text)]))
        if got != want_wired:
            errors.append("client_wired(%r) = %s" % (text, got))
    if client_wired([Source("server/kube/kube_client.cpp", "kube::Client client(cfg);")]):
        errors.append("the client's own file counts as wiring")
    run.case("self-test: API client construction detected", errors)

    # RBAC comparison detects a missing verb, an extra verb and a wrong scope.
    table = {("apps", "deployments", "get"): "cluster", ("coordination.k8s.io", "leases", "get"): "namespace"}
    role = [{"kind": "ClusterRole", "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]},
            {"kind": "Role", "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}]
    errors = []
    grants, errs = rbac_grants(role)
    if compare_grants(grants, table) or errs:
        errors.append("exact RBAC reported: %r" % (compare_grants(grants, table) + errs))
    for mutate, what in ((lambda r: r[0]["rules"][0]["verbs"].append("delete"), "an extra verb"),
                         (lambda r: r[0]["rules"][0]["verbs"].remove("get"), "a missing verb"),
                         (lambda r: r.reverse() or r[0].update(kind="ClusterRole"), "a wrong scope"),
                         (lambda r: r[0]["rules"][0]["verbs"].append("*"), "a wildcard")):
        broken = json.loads(json.dumps(role))
        mutate(broken)
        grants, errs = rbac_grants(broken)
        if not (compare_grants(grants, table) + errs):
            errors.append("RBAC with %s was not reported" % what)
    run.case("self-test: RBAC comparison", errors)


def check_chart(run, root):
    chart = os.path.join(root, "charts", "inplace-webhook")
    templates = os.path.join(chart, "templates")
    if not os.path.isdir(templates):
        run.case("chart exists", ["%s has no templates/ directory" % rel(root, chart)])
        return

    # 1. Non-template YAML parses; the schema is JSON.
    errors, parsed = [], {}
    yaml_files = []
    for base, dirs, files in os.walk(chart):
        dirs[:] = [d for d in dirs if os.path.join(base, d) != templates]
        yaml_files += [os.path.join(base, f) for f in files if f.endswith((".yaml", ".yml"))]
    yaml_files += [os.path.join(root, "tests", "chart", f) for f in sorted(os.listdir(os.path.join(root, "tests", "chart")))
                   if f.endswith(".yaml")]
    for path in sorted(yaml_files):
        try:
            parsed[path] = list(yaml.safe_load_all(read(path)))
        except yaml.YAMLError as e:
            errors.append("%s: %s" % (rel(root, path), str(e).replace("\n", " ")))
    schema = None
    try:
        schema = json.loads(read(os.path.join(chart, "values.schema.json")))
    except (OSError, ValueError) as e:
        errors.append("values.schema.json: %s" % e)
    for need in ("Chart.yaml", "values.yaml"):
        if os.path.join(chart, need) not in parsed:
            errors.append("%s is missing" % need)
    run.case("non-template YAML parses (%d files) and values.schema.json is JSON" % len(yaml_files), errors)
    if errors:
        return
    meta = parsed[os.path.join(chart, "Chart.yaml")][0]
    values = parsed[os.path.join(chart, "values.yaml")][0]
    texts = {f: read(os.path.join(templates, f)) for f in sorted(os.listdir(templates))}

    # 2. Chart.yaml.
    errors = []
    release_version = read(os.path.join(root, "VERSION")).strip()
    if meta.get("apiVersion") != "v2":
        errors.append("Chart.yaml apiVersion must be v2")
    if meta.get("name") != "inplace-webhook":
        errors.append("Chart.yaml name must be inplace-webhook (the directory name)")
    if not re.match(r"^\d+\.\d+\.\d+(-[\w.]+)?(\+[\w.]+)?$", str(meta.get("version", ""))):
        errors.append("Chart.yaml version %r is not SemVer" % meta.get("version"))
    if not re.match(r"^\d+\.\d+\.\d+$", release_version):
        errors.append("VERSION %r is not MAJOR.MINOR.PATCH" % release_version)
    for key in ("version", "appVersion"):
        if str(meta.get(key)) != release_version:
            errors.append("Chart.yaml %s %r differs from the VERSION file's %s (the binary's --version, the default "
                          "image tag)" % (key, meta.get(key), release_version))
    run.case("Chart.yaml metadata", errors)

    # 3. values.yaml against the schema; the schema's keys all have defaults; bad values rejected.
    run.case("values.yaml validates against values.schema.json", schema_errors(schema, values))
    errors = []
    for key in schema_keys(schema):
        try:
            dig(values, key)
        except KeyError:
            errors.append("values.schema.json names %s, which values.yaml does not set (give it a default)" % key)
    if schema.get("additionalProperties") is not False:
        errors.append("values.schema.json: the top level must set additionalProperties: false")
    run.case("every schema key has a default in values.yaml", errors)

    example_files = sorted(p for p in parsed if os.path.dirname(p) == os.path.join(root, "tests", "chart"))
    errors = []
    for path in example_files:
        errors += ["%s: %s" % (rel(root, path), e) for e in schema_errors(schema, deep_merge(values, parsed[path][0] or {}))]
    run.case("tests/chart values files validate (%d files)" % len(example_files), errors)

    bad = [
        ({"certificates": {"mode": "selfSigned"}}, "certificates.mode"),
        ({"webhooks": {"mutatePods": {"failurePolicy": "Sometimes"}}}, "webhooks.mutatePods.failurePolicy"),
        ({"webhooks": {"timeoutSeconds": 31}}, "webhooks.timeoutSeconds"),
        ({"webhooks": {"timeoutSeconds": 0}}, "webhooks.timeoutSeconds"),
        ({"webhooks": {"mutateDeployments": DELETE}}, "webhooks"),
        ({"replicas": 2}, "replicas"),
        ({"server": {"prot": 8443}}, "server.prot"),
        ({"server": {"port": 70000}}, "server.port"),
        ({"replicaCount": "2"}, "replicaCount"),
        ({"replicaCount": 0}, "replicaCount"),
        ({"leaderElection": "yes"}, "leaderElection"),
        ({"log": {"level": "trace"}}, "log.level"),
        ({"log": {"format": "logfmt"}}, "log.format"),
        ({"image": {"pullPolicy": "Sometimes"}}, "image.pullPolicy"),
        ({"image": {"tag": "has space"}}, "image.tag"),
        ({"podDisruptionBudget": {"minAvailable": "half"}}, "podDisruptionBudget.minAvailable"),
        ({"podAntiAffinity": "medium"}, "podAntiAffinity"),
        ({"metrics": {"serviceMonitor": {"interval": "30 seconds"}}}, "metrics.serviceMonitor.interval"),
        ({"certificates": {"certManager": {"duration": "1y"}}}, "certificates.certManager.duration"),
        ({"certificates": {"helm": {"validityDays": 0}}}, "certificates.helm.validityDays"),
        ({"webhooks": {"excludeNamespaces": ["Not_A_Name"]}}, "webhooks.excludeNamespaces[0]"),
        ({"podLabels": {"a": 1}}, "podLabels.a"),
        ({"serviceAccount": {"create": "true"}}, "serviceAccount.create"),
        ({"podResize": "auto"}, "podResize"),
        ({"podResize": "yes"}, "podResize"),
    ]
    good = [
        {"podDisruptionBudget": {"minAvailable": "50%"}},
        {"podDisruptionBudget": {"minAvailable": 0}},
        {"certificates": {"mode": "certManager"}},
        {"certificates": {"mode": "secret", "secret": {"name": "tls", "caBundle": "LS0t"}}},
        {"webhooks": {"mutateDeployments": {"failurePolicy": "Ignore"}, "validatePods": {"failurePolicy": "Fail"}}},
        {"webhooks": {"timeoutSeconds": 30, "excludeNamespaces": ["monitoring"]}},
        {"image": {"tag": "v1.2.3-rc.1"}, "podAntiAffinity": "none", "leaderElection": False},
        {"metrics": {"serviceMonitor": {"enabled": True, "interval": "1m30s"}}},
        {"resources": {}, "affinity": {"nodeAffinity": {}}, "tolerations": [{"key": "k"}]},
        {"podResize": "off"}, {"podResize": "v1.34.2"}, {"podResize": "v1.33.4-eks-1a2b3c"},
    ]
    errors = []
    for override, path in bad:
        errs = schema_errors(schema, deep_merge(values, override))
        if not any(e.startswith(path + ":") or e.startswith(path + ".") for e in errs):
            errors.append("values.schema.json accepts %r (want an error at %s; got %s)" % (override, path, errs))
    for override in good:
        errs = schema_errors(schema, deep_merge(values, override))
        if errs:
            errors.append("values.schema.json rejects %r: %s" % (override, errs))
    run.case("values.schema.json rejects bad values (%d) and accepts good ones (%d)" % (len(bad), len(good)), errors)

    # 4. .Values references.
    errors, refs = [], set()
    for name, text in texts.items():
        for ref in sorted(values_refs(TEMPLATE_COMMENT.sub("", text))):
            refs.add(ref)
            try:
                dig(values, ref)
            except KeyError:
                errors.append("templates/%s reads .Values.%s, which values.yaml does not define" % (name, ref))
        if re.search(r"\bindex\s+\$?\.Values\b", text):
            errors.append("templates/%s uses `index .Values ...`: write .Values.a.b so this check can follow it" % name)
    if not refs:
        errors.append("no .Values reference found in the templates (parser broken?)")
    run.case("every .Values reference exists in values.yaml (%d references)" % len(refs), errors)
    errors = []
    for path, _ in value_paths(values):
        if not any(r == path or path.startswith(r + ".") or r.startswith(path + ".") for r in refs):
            errors.append("values.yaml sets %s but no template reads it" % path)
    run.case("every value in values.yaml is used by a template", errors)

    # 5. Webhook configurations against the server's routes and the contract.
    routes = parse_routes(read(os.path.join(root, "hooks", "routes.cpp")))
    check_webhooks(run, root, texts, values, routes)
    check_match_conditions(run, root, texts)

    # 6. RBAC against api-calls.md, and api-calls.md against the sources.
    check_rbac(run, root, texts)

    # 7. Deployment: flags, probes, mounts, security; image uid.
    check_deployment(run, root, texts, values)
    check_exception_edges(run, root)

    # 8. Docs: README values table, NOTES.txt.
    errors = []
    readme_path = os.path.join(chart, "README.md")
    readme = read(readme_path) if os.path.exists(readme_path) else ""
    if not readme:
        errors.append("charts/inplace-webhook/README.md is missing")
    leaves = schema_leaf_keys(schema)
    for key in leaves:
        row = re.search(r"^\| `%s` \| (.*?) \| " % re.escape(key), readme, re.M)
        if readme and not row:
            errors.append("README.md's values table has no row for `%s`" % key)
            continue
        try:
            value = dig(values, key)
        except KeyError:
            continue  # reported by the schema-defaults check
        shown = "`%s`" % (json.dumps(value) if not isinstance(value, str) else (value or '""'))
        if row and row.group(1) != shown:
            errors.append("README.md gives `%s` the default %s, values.yaml has %s" % (key, row.group(1), shown))
    run.case("README.md documents every value (%d keys)" % len(leaves), errors)
    notes = texts.get("NOTES.txt", "")
    errors = []
    for need, why in (("-L inplace-webhook.io/state", "how to watch progress (kubectl get pods -L inplace-webhook.io/state)"),
                      ("inplace-webhook.io/enabled", "the opt-in label"),
                      ('"template":{"metadata":{"labels":{"inplace-webhook.io/enabled":"true"}}}', "the label on the pod template too")):
        if need not in notes:
            errors.append("NOTES.txt does not show %s" % why)
    run.case("NOTES.txt tells how to opt in and watch progress", errors)


EXPECTED_WEBHOOKS = {
    # path: (configuration kind, apiGroup, resource, operations, values key, reinvocationPolicy)
    "/mutate/deployments": ("MutatingWebhookConfiguration", "apps", "deployments", ["UPDATE"], "mutateDeployments", "IfNeeded"),
    "/validate/deployments": ("ValidatingWebhookConfiguration", "apps", "deployments", ["CREATE", "UPDATE"], "validateDeployments", None),
    "/mutate/pods": ("MutatingWebhookConfiguration", "", "pods", ["CREATE"], "mutatePods", "Never"),
    "/validate/pods": ("ValidatingWebhookConfiguration", "", "pods", ["UPDATE"], "validatePods", None),
    "/mutate/statefulsets": ("MutatingWebhookConfiguration", "apps", "statefulsets", ["UPDATE"], "mutateStatefulSets", "IfNeeded"),
    "/validate/statefulsets": ("ValidatingWebhookConfiguration", "apps", "statefulsets", ["CREATE", "UPDATE"], "validateStatefulSets", None),
    "/validate/pod-deletions": ("ValidatingWebhookConfiguration", "", "pods", ["DELETE"], "holdStatefulSetPods", None),
}
CONTRACT_FAILURE_POLICY = {"mutateDeployments": "Fail", "validateDeployments": "Fail",
                           "mutatePods": "Ignore", "validatePods": "Ignore",
                           "mutateStatefulSets": "Fail", "validateStatefulSets": "Fail",
                           "holdStatefulSetPods": "Ignore"}


# DESIGN.md §6.1 "Exceptions only at the edges": the files where an exception may be caught, each where a
# thread or a C callback begins (or a third-party parser that reports by throwing). Anywhere else a function that
# can fail returns Status.
EXCEPTION_EDGES = {
    "lib/json.cpp",                     # a buffer's growth (noexcept): std::bad_alloc keeps the old buffer
    "server/process/main.cpp",          # main
    "server/process/options.cpp",       # cxxopts reports a bad flag by throwing
    "server/http/http_server.cpp",      # the acceptor and worker threads; one request's handler
    "server/http/review_codec.cpp",     # the review handler's call: a 500 AdmissionReview
    "server/http/tls_certificates.cpp",  # the certificate watcher thread; OpenSSL's ticket-key callback
    "server/loop/loop.cpp",             # the loop's workers: one Deployment, one gate, the resync
    "server/loop/writer.cpp",           # the writer's sending threads: one pod write each
    "server/loop/leader_election.cpp",  # the elector's thread and its callbacks
    "server/loop/access_monitor.cpp",   # the access monitor's thread and its callback
    "server/loop/loop_status.cpp",      # the loop-status poller's thread
    "server/kube/informer.cpp",         # the informer's threads and event dispatch
    "server/kube/watch_stream.cpp",     # a watch's delivery to its handler
    "server/certs/cert_controller.cpp",  # the certificate controller's thread
}


def check_exception_edges(run, root):
    errors, found = [], set()
    for sub in ("lib", "hooks", "server", "plugin"):
        for d, _, names in sorted(os.walk(os.path.join(root, sub))):
            for f in sorted(names):
                if not f.endswith((".cpp", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root)
                if re.search(r"\btry\s*\{", read(os.path.join(d, f))):
                    found.add(rel)
                    if rel not in EXCEPTION_EDGES:
                        errors.append("%s catches an exception: not a thread's or a callback's edge (DESIGN.md "
                                      "§6.1); return Status instead, or name the edge in EXCEPTION_EDGES" % rel)
    for rel in sorted(EXCEPTION_EDGES - found):
        errors.append("EXCEPTION_EDGES names %s, which catches nothing: remove it" % rel)
    run.case("exceptions are caught only at thread and callback edges (%d files)" % len(found), errors)


def check_webhooks(run, root, texts, values, routes):
    errors = []
    if len(routes) != len(EXPECTED_WEBHOOKS):
        errors.append("hooks/routes.cpp: found %d routes, expected the %d of the contract (parser or table changed?)"
                      % (len(routes), len(EXPECTED_WEBHOOKS)))
    docs, actions = template_docs(texts.get("webhooks.yaml", ""))
    hooks = []
    for doc in docs:
        if doc.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            if doc.get("apiVersion") != "admissionregistration.k8s.io/v1":
                errors.append("%s apiVersion must be admissionregistration.k8s.io/v1" % doc["kind"])
            for hook in doc.get("webhooks") or []:
                hooks.append((doc["kind"], hook))
    paths = [((h.get("clientConfig") or {}).get("service") or {}).get("path") for _, h in hooks]
    route_paths = [p for p, _ in routes]
    if sorted(paths) != sorted(route_paths):
        errors.append("webhook paths %s != routes served by hooks/routes.cpp %s" % (sorted(paths), sorted(route_paths)))
    names = [h.get("name") for _, h in hooks]
    if len(set(names)) != len(names):
        errors.append("webhook names are not unique: %s" % names)
    for kind, hook in hooks:
        name = hook.get("name", "?")
        path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path")
        mutating = dict(routes).get(path)
        if mutating is not None and mutating != (kind == "MutatingWebhookConfiguration"):
            errors.append("%s: route %s is %s in hooks/routes.cpp but sits in a %s"
                          % (name, path, "mutating" if mutating else "validating", kind))
        if not re.match(r"^[a-z0-9-]+(\.[a-z0-9-]+){2,}$", str(name)):
            errors.append("%s: webhook name must be a fully qualified name (three or more labels)" % name)
        if hook.get("admissionReviewVersions") != ["v1", "v1beta1"]:
            errors.append("%s: admissionReviewVersions must be [v1, v1beta1]" % name)
        if hook.get("sideEffects") != "None":
            errors.append("%s: sideEffects must be None" % name)
        if hook.get("matchPolicy") != "Equivalent":
            errors.append("%s: matchPolicy must be Equivalent" % name)
        for key in ("namespaceSelector", "objectSelector", "timeoutSeconds", "failurePolicy"):
            if key not in hook:
                errors.append("%s: %s is missing" % (name, key))
        if actions.get(str(hook.get("timeoutSeconds"))) != ".Values.webhooks.timeoutSeconds":
            errors.append("%s: timeoutSeconds must come from .Values.webhooks.timeoutSeconds" % name)
        want = EXPECTED_WEBHOOKS.get(path)
        if not want:
            continue
        want_kind, group, resource, ops, key, reinvocation = want
        if kind != want_kind:
            errors.append("%s: %s belongs in a %s" % (name, path, want_kind))
        rules = hook.get("rules") or []
        got = [(r.get("apiGroups"), r.get("apiVersions"), sorted(r.get("operations") or []), r.get("resources"), r.get("scope")) for r in rules]
        if got != [([group], ["v1"], sorted(ops), [resource], "Namespaced")]:
            errors.append("%s: rules %s, want apiGroups [%r] apiVersions [v1] operations %s resources [%s] "
                          "scope Namespaced (main resource only, no subresources)" % (name, got, group, ops, resource))
        if actions.get(str(hook.get("failurePolicy"))) != ".Values.webhooks.%s.failurePolicy" % key:
            errors.append("%s: failurePolicy must come from .Values.webhooks.%s.failurePolicy" % (name, key))
        if kind == "MutatingWebhookConfiguration" and hook.get("reinvocationPolicy") != reinvocation:
            errors.append("%s: reinvocationPolicy must be %s" % (name, reinvocation))
    for key, policy in CONTRACT_FAILURE_POLICY.items():
        try:
            if dig(values, "webhooks.%s.failurePolicy" % key) != policy:
                errors.append("values.yaml webhooks.%s.failurePolicy must default to %s" % (key, policy))
        except KeyError:
            errors.append("values.yaml has no webhooks.%s.failurePolicy" % key)
    if values.get("webhooks", {}).get("timeoutSeconds") != 10:
        errors.append("values.yaml webhooks.timeoutSeconds must default to 10")
    run.case("webhook configurations serve exactly the routes of hooks/routes.cpp (%d webhooks)" % len(hooks), errors)

    # Selectors (helpers) and certificate wiring.
    errors = []
    helpers = texts.get("_helpers.tpl", "")
    keys_h = strip_cpp_comments(read(os.path.join(root, "hooks", "keys.h")))
    enabled = re.search(r'kEnabledLabel\s*=\s*"([^"]+)"', keys_h)
    object_selector = re.search(r'define "inplace-webhook.objectSelector".*?{{-? end', helpers, re.S)
    if not enabled:
        errors.append("hooks/keys.h: kEnabledLabel not found")
    elif not object_selector or '%s: "true"' % enabled.group(1) not in object_selector.group(0):
        errors.append("objectSelector helper must match label %s: \"true\" (hooks/keys.h kEnabledLabel)" % enabled.group(1))
    ns_selector = re.search(r'define "inplace-webhook.namespaceSelector".*?{{-? end', helpers, re.S)
    if not ns_selector or not all(s in ns_selector.group(0) for s in
                                  ("kubernetes.io/metadata.name", "NotIn", '"kube-system"', ".Release.Namespace")):
        errors.append("namespaceSelector helper must exclude kube-system and the release namespace by kubernetes.io/metadata.name")
    webhooks_text = texts.get("webhooks.yaml", "")
    for helper in ("namespaceSelector", "objectSelector"):
        n = webhooks_text.count('include "inplace-webhook.%s"' % helper)
        if n != len(hooks):
            errors.append("webhooks.yaml: %d of %d webhooks include the %s helper" % (n, len(hooks), helper))
    for needle, why in (('lookup "v1" "Secret"', "mode helm re-uses the existing Secret (lookup)"),
                        ("genCA", "mode helm generates a CA"), ("genSignedCert", "mode helm signs a serving certificate")):
        if needle not in helpers:
            errors.append("_helpers.tpl: %s" % why)
    if "cert-manager.io/inject-ca-from" not in webhooks_text:
        errors.append("webhooks.yaml: mode certManager must annotate both configurations with cert-manager.io/inject-ca-from")
    for mode in ("helm", "certManager", "secret"):
        if '"%s"' % mode not in webhooks_text:
            errors.append("webhooks.yaml does not handle certificates.mode %s" % mode)
    cm_docs, _ = template_docs(texts.get("certmanager.yaml", ""))
    kinds = [(d.get("kind"), (d.get("spec") or {}).get("isCA", False)) for d in cm_docs]
    if kinds != [("Issuer", False), ("Certificate", True), ("Issuer", False), ("Certificate", False)]:
        errors.append("certmanager.yaml must hold self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate, got %s" % kinds)
    elif "dnsNames" not in cm_docs[3]["spec"] or "inplace-webhook.dnsNames" not in texts.get("certmanager.yaml", ""):
        errors.append("certmanager.yaml: the serving Certificate must list the Service DNS names")
    dns = re.search(r'define "inplace-webhook.dnsNames".*?{{-? end', helpers, re.S)
    if not dns or '"%s.%s.svc"' not in dns.group(0) or '"%s.%s.svc.cluster.local"' not in dns.group(0):
        errors.append("dnsNames helper must give <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local")
    if "(list $cn (printf \"%s.cluster.local\" $cn))" not in helpers:
        errors.append("helm mode: genSignedCert must sign <svc>.<ns>.svc and <svc>.<ns>.svc.cluster.local")
    run.case("webhook selectors and the three certificate modes", errors)


DEPLOYMENT_WEBHOOKS = ("/mutate/deployments", "/validate/deployments", "/mutate/statefulsets",
                       "/validate/statefulsets")
# Webhooks with a matchCondition of their own (template actions read TPL): {path: (conditions, what they want)}.
# The StatefulSet hold's: only the StatefulSet controller's DELETEs. The pod UPDATE validator's: every user but the
# loop, whose pod writes it allows anyway.
OWN_MATCH_CONDITIONS = {
    "/validate/pod-deletions": ([{"name": "the-statefulset-controller",
                                  "expression": "request.userInfo.username == TPL"}],
                                "only the StatefulSet controller's user (.Values.webhooks.statefulSetControllerUser)"),
    "/validate/pods": ([{"name": "not-the-controller", "expression": "request.userInfo.username != TPL"}],
                       "every user but the loop's"),
}
CONTROLLER_USER_ACTION = 'include "inplace-webhook.controllerUser" . | quote'
POD_MATCH_TEXT = "expression: request.userInfo.username != {{ %s }}" % CONTROLLER_USER_ACTION


def render_match_conditions(helpers, controller_user):
    """The Deployment webhooks' matchConditions as helm renders them for `controller_user` (the value of the
    controllerUser helper), or (None, errors)."""
    m = re.search(r'{{-? define "inplace-webhook.deploymentMatchConditions" -?}}(.*?){{-? end -?}}', helpers, re.S)
    if not m:
        return None, ['_helpers.tpl defines no "inplace-webhook.deploymentMatchConditions"']
    body = m.group(1)
    for action in ACTION.findall(body):
        if action.strip() != CONTROLLER_USER_ACTION:
            return None, ["deploymentMatchConditions: unexpected template action {{ %s }}" % action]
    body = ACTION.sub(lambda _: json.dumps(controller_user), body)
    try:
        conditions = yaml.safe_load(body)
    except yaml.YAMLError as e:
        return None, ["deploymentMatchConditions is not YAML: %s" % e]
    if not isinstance(conditions, list) or not all(isinstance(c, dict) and set(c) == {"name", "expression"}
                                                   for c in conditions):
        return None, ["deploymentMatchConditions must be a list of {name, expression}: %r" % conditions]
    return conditions, []


def check_match_conditions(run, root, texts):
    """The Deployment webhooks are not called for a Deployment being deleted (nor a DELETE) and not for the
    loop's own identity (DESIGN.md §4a, §8.7): their matchConditions, evaluated over a table of requests. The pod
    validator is not called for the loop's identity either, and the hold webhook only for the StatefulSet
    controller's."""
    errors = []
    docs, _ = template_docs(texts.get("webhooks.yaml", ""))
    for doc in docs:
        for hook in doc.get("webhooks") or []:
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path")
            if path in OWN_MATCH_CONDITIONS:
                want, what = OWN_MATCH_CONDITIONS[path]
                got = [dict(c, expression=re.sub(r"TPL\d+", "TPL", str(c.get("expression"))))
                       for c in hook.get("matchConditions") or []]
                if got != want:
                    errors.append("%s: matchConditions %r, want %s" % (hook.get("name"), got, what))
                continue
            if (path in DEPLOYMENT_WEBHOOKS) != ("matchConditions" in hook):
                errors.append("%s: matchConditions %s" % (hook.get("name"), "missing" if path in DEPLOYMENT_WEBHOOKS
                                                         else "unexpected (only the Deployment, pod and hold "
                                                              "webhooks have them)"))
    if texts.get("webhooks.yaml", "").count(POD_MATCH_TEXT) != 1:
        errors.append("webhooks.yaml: the pod webhook's matchCondition must name the loop by the controllerUser "
                      "helper (%s)" % POD_MATCH_TEXT)
    n = texts.get("webhooks.yaml", "").count('include "inplace-webhook.deploymentMatchConditions" . | nindent 6')
    if n != len(DEPLOYMENT_WEBHOOKS):
        errors.append("webhooks.yaml: %d webhooks include deploymentMatchConditions, want the %d Deployment webhooks"
                      % (n, len(DEPLOYMENT_WEBHOOKS)))
    helpers = texts.get("_helpers.tpl", "")
    controller = "system:serviceaccount:inplace-webhook:inplace-webhook"
    proxy = "kube-proxy-for-the-loop"  # controllerUser set: the loop's requests arrive as that user
    gc = "system:serviceaccount:kube-system:generic-garbage-collector"
    live = {"metadata": {"name": "web", "namespace": "shop", "generation": 3, "finalizers": []}}
    deleting = {"metadata": {"name": "web", "namespace": "shop", "generation": 4,
                             "deletionTimestamp": "2026-11-29T18:00:00Z", "finalizers": ["foregroundDeletion"]}}
    deleted = {"metadata": dict(deleting["metadata"], finalizers=[])}
    rows = [
        # (what, operation, user, object, oldObject, called)
        ("a user's UPDATE", "UPDATE", "alice", live, live, True),
        ("a user's CREATE", "CREATE", "alice", live, None, True),
        ("the loop's UPDATE", "UPDATE", controller, live, live, False),
        ("a user whose name starts like the loop's", "UPDATE", controller + "-webhook", live, live, True),
        ("the garbage collector removes foregroundDeletion", "UPDATE", gc, deleted, deleting, False),
        ("a user's edit of a Deployment being deleted", "UPDATE", "alice", deleting, deleting, False),
        ("a DELETE (no object)", "DELETE", "alice", None, live, False),
        ("the loop's DELETE", "DELETE", controller, None, live, False),
        ("kubectl delete --cascade=foreground: the deletionTimestamp write", "UPDATE", "alice", deleting, live,
         False),
    ]
    for user, table in ((controller, rows),
                        (proxy, [("the loop through its proxy (controllerUser set)", "UPDATE", proxy, live, live,
                                  False),
                                 ("the ServiceAccount when controllerUser is another user", "UPDATE", controller,
                                  live, live, True)])):
        conditions, errs = render_match_conditions(helpers, user)
        errors += errs
        if conditions is None:
            continue
        names = [c["name"] for c in conditions]
        if len(set(names)) != len(names) or not all(re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", n) for n in names):
            errors.append("matchConditions names must be unique DNS labels: %s" % names)
        try:
            asts = [(c["name"], cel_parse(c["expression"])) for c in conditions]
        except CelError as e:
            errors.append("matchConditions: %s (extend the checker's CEL subset with care)" % e)
            continue
        for what, op, who, obj, old, called in table:
            env = {"request": {"operation": op, "userInfo": {"username": who, "groups": ["system:authenticated"]}},
                   "object": obj, "oldObject": old}
            results = {name: cel_eval(ast, env) for name, ast in asts}
            failed = {n: r for n, r in results.items() if not isinstance(r, bool)}
            if failed:
                errors.append("%s: matchConditions %s evaluate to an error (failurePolicy would decide)" % (what, failed))
                continue
            got = all(results.values())
            if got != called:
                errors.append("%s: the webhook is %s, want %s (%s)" % (what, "called" if got else "skipped",
                                                                       "called" if called else "skipped", results))
    run.case("Deployment and pod webhooks: matchConditions skip deletions and the loop's own writes (%d requests)"
             % (len(rows) + 2), errors)


def check_rbac(run, root, texts):
    table_path = os.path.join(root, "tests", "chart", "api-calls.md")
    table = parse_api_table(read(table_path))
    docs, _ = template_docs(texts.get("rbac.yaml", ""))
    grants, errors = rbac_grants(docs)
    if not table:
        errors.append("tests/chart/api-calls.md: no table rows found")
    errors += compare_grants(grants, table)
    kinds = sorted(d.get("kind") for d in docs)
    if kinds != ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]:
        errors.append("rbac.yaml must hold one ClusterRole, ClusterRoleBinding, Role and RoleBinding, got %s" % kinds)
    rules_text = texts.get("rbac.yaml", "")
    n_rules = sum(len(d.get("rules") or []) for d in docs)
    n_comments = len(re.findall(r"\n\s*#[^\n]*\n\s*- apiGroups:", rules_text))
    if n_comments != n_rules:
        errors.append("rbac.yaml: %d of %d rules carry a comment saying why" % (n_comments, n_rules))
    if 'resourceNames: ["inplace-webhook"]' not in texts.get("rbac.yaml", ""):
        errors.append("rbac.yaml: the Lease rule (get, update) names its Lease: resourceNames: [\"inplace-webhook\"]")
    run.case("RBAC grants exactly the rows of tests/chart/api-calls.md (%d permissions)" % len(table), errors)

    # The table against the C++ sources.
    header = read(os.path.join(root, "hooks", "kube_api.h"))
    builders = builders_from_header(header)
    errors = []
    unknown = [b for b in builders if b not in BUILDER_RESOURCES]
    if not builders:
        errors.append("hooks/kube_api.h: no path builders found (parser broken?)")
    if unknown:
        errors.append("hooks/kube_api.h declares path builder(s) %s that check_chart.py does not map to a "
                      "resource: add them to BUILDER_RESOURCES" % unknown)
    sources = []
    for sub in ("hooks", "server"):
        for d, _, names in sorted(os.walk(os.path.join(root, sub))):
            for f in sorted(names):
                if f.endswith((".cpp", ".h")) and f not in ("kube_api.cpp", "kube_api.h"):
                    rel = os.path.relpath(os.path.join(d, f), root)
                    sources.append(Source(rel, read(os.path.join(d, f))))
    finder = ApiCallFinder(sources, {b: BUILDER_RESOURCES[b] for b in builders if b in BUILDER_RESOURCES})
    used, needed, errs = finder.find() if builders and not unknown else (False, {}, [])
    wired = client_wired(sources)
    forbidden, unused = compare_source(needed, table) if used else ([], [])
    for key in sorted(needed):
        print("    # found: %s %s/%s at %s" % (key[2], key[0] or "core", key[1], ", ".join(sorted(set(needed[key])))))
    for note in finder.bookkeeping:
        print("    # not an API call: %s" % note)
    if wired:
        # The binary makes API calls: every call allowed, every builder use explained, every row used.
        run.case("the C++ sources make exactly the API calls of api-calls.md (%d found; client built in %s)"
                 % (len(needed), ", ".join(wired)), errors + errs + forbidden + unused)
    else:
        # No API client is constructed yet, so the binary makes no call: calls found in the code so
        # far must still be allowed; what is not connected or not used yet is listed, not failed.
        print("    # NOTE: no code outside server/kube/kube_client.*, client_config.* constructs the API client yet (ClientConfig::InCluster,")
        print("    # kube::Client ...), so the binary makes no API call. Until it does, unconnected path builders and")
        print("    # unused table rows are listed here and not failed; from then on they fail the check.")
        for e in errs + unused:
            print("    # pending: %s" % e)
        run.case("the API calls in the C++ sources so far are allowed by api-calls.md (%d found; client not built yet)"
                 % len(needed), errors + forbidden)


CONTRACT_FLAGS = {"bind-address", "port", "probe-port", "tls-cert-file", "tls-private-key-file",
                  "client-ca-file", "log-level", "log-format", "max-request-bytes", "max-connections",
                  "controller-user", "leader-elect", "leader-election-namespace", "api-server",
                  "shutdown-grace-seconds", "role", "loop-status-url", "tls-wait-for-files",
                  "first-request-timeout-seconds", "header-timeout-seconds", "max-inflight-request-bytes",
                  "pod-resize", "statefulset-controller-user"}
CONTRACT_DEFAULTS = [
    ("replicaCount", 2), ("leaderElection", True), ("server.port", 8443), ("server.probePort", 8080),
    ("server.maxRequestBytes", 7340032), ("server.maxConnections", 256), ("server.shutdownGraceSeconds", 30),
    ("server.firstRequestTimeoutSeconds", 5), ("server.headerTimeoutSeconds", 2),
    ("server.maxInflightRequestBytes", 67108864),
    ("service.port", 443), ("podDisruptionBudget.enabled", True), ("podDisruptionBudget.minAvailable", 1),
    ("certificates.mode", "controller"), ("podAntiAffinity", "soft"), ("image.tag", ""),
    ("podSecurityContext.runAsNonRoot", True), ("podSecurityContext.runAsUser", 65532),
    ("podSecurityContext.seccompProfile.type", "RuntimeDefault"),
    ("securityContext.runAsNonRoot", True), ("securityContext.runAsUser", 65532),
    ("securityContext.readOnlyRootFilesystem", True), ("securityContext.allowPrivilegeEscalation", False),
    ("securityContext.capabilities.drop", ["ALL"]), ("securityContext.seccompProfile.type", "RuntimeDefault"),
]


def check_deployment(run, root, texts, values):
    errors = []
    for key, want in CONTRACT_DEFAULTS:
        try:
            got = dig(values, key)
        except KeyError:
            got = "(missing)"
        if got != want:
            errors.append("values.yaml %s = %r, the contract says %r" % (key, got, want))
    run.case("contract defaults in values.yaml (%d)" % len(CONTRACT_DEFAULTS), errors)

    errors = []
    docs, actions = template_docs(texts.get("deployment.yaml", ""))
    dep = next((d for d in docs if d.get("kind") == "Deployment"), None)
    if not dep:
        run.case("Deployment template", ["deployment.yaml holds no Deployment"])
        return
    pod = dep["spec"]["template"]["spec"]
    containers = pod.get("containers") or []
    c = containers[0] if containers else {}
    expand = lambda s: re.sub(r"TPL\d+", lambda m: "{{%s}}" % actions[m.group(0)], str(s))
    args = [expand(a) for a in c.get("args") or []]
    if not args or args[0] != "serve":
        errors.append("container args must start with `serve`, got %s" % args[:1])
    flags = [re.match(r"--([\w-]+)", a).group(1) for a in args if re.match(r"--[\w-]+", a)]
    for flag in flags:
        if flag not in CONTRACT_FLAGS:
            errors.append("Deployment passes --%s, which is not in the binary's contract" % flag)
    for flag in ("tls-cert-file", "tls-private-key-file", "controller-user", "port", "probe-port", "role",
                 "loop-status-url", "pod-resize"):
        if flag not in flags:
            errors.append("Deployment does not pass --%s" % flag)
    if "--role=webhook" not in args or "leader-elect" in flags:
        errors.append("the webhook Deployment runs --role=webhook (no loop, no --leader-elect)")
    # The credential-free webhook cannot ask the API server whether it serves pods/resize: the chart tells it.
    resize = next((a for a in args if a.startswith("--pod-resize=")), "")
    if ".Values.podResize" not in resize or ".Capabilities.KubeVersion.Version" not in resize:
        errors.append("--pod-resize must be podResize, defaulting to .Capabilities.KubeVersion.Version")
    user = next((a for a in args if a.startswith("--controller-user=")), "")
    if 'include "inplace-webhook.controllerUser"' not in user:
        errors.append("--controller-user must be the chart's service account (controllerUser helper)")
    helpers = texts.get("_helpers.tpl", "")
    if 'printf "system:serviceaccount:%s:%s" .Release.Namespace (include "inplace-webhook.serviceAccountName" .)' not in helpers:
        errors.append("controllerUser helper must be system:serviceaccount:<release ns>:<service account>")
    cert_arg = next((a for a in args if a.startswith("--tls-cert-file=")), "")
    mounts = {expand(m.get("name")): expand(m.get("mountPath")) for m in c.get("volumeMounts") or []}
    if "tls" not in mounts or not cert_arg.startswith("--tls-cert-file=%s/" % mounts.get("tls")):
        errors.append("--tls-cert-file must point into the mounted certificate Secret (volume tls)")
    ports = {p.get("name"): expand(p.get("containerPort")) for p in c.get("ports") or []}
    if ports.get("https") != "{{int64 .Values.server.port}}" or "--port={{int64 .Values.server.port}}" not in args:
        errors.append("container port `https` and --port must both be server.port")
    if ports.get("probes") != "{{int64 .Values.server.probePort}}":
        errors.append("container port `probes` must be server.probePort")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != path or get.get("port") != "probes":
            errors.append("%s must be GET %s on the probes port" % (probe, path))
    if pod.get("automountServiceAccountToken") is not False:
        errors.append("webhook pods: automountServiceAccountToken must be false (they hold no credentials)")
    # The controller Deployment (the loop): the token, leader election, and no webhook port or certificate.
    cdocs, cactions = template_docs(texts.get("controller.yaml", ""))
    cdep = next((d for d in cdocs if d.get("kind") == "Deployment"), None)
    if not cdep:
        errors.append("controller.yaml holds no Deployment")
    else:
        cpod = cdep["spec"]["template"]["spec"]
        cc = (cpod.get("containers") or [{}])[0]
        cexpand = lambda s: re.sub(r"TPL\d+", lambda m: "{{%s}}" % cactions[m.group(0)], str(s))
        cargs = [cexpand(a) for a in cc.get("args") or []]
        cflags = [re.match(r"--([\w-]+)", a).group(1) for a in cargs if re.match(r"--[\w-]+", a)]
        flags = flags + cflags
        if not cargs or cargs[0] != "serve" or "--role=controller" not in cargs:
            errors.append("the controller Deployment runs `serve --role=controller`")
        for flag in ("controller-user", "leader-elect", "leader-election-namespace", "probe-port"):
            if flag not in cflags:
                errors.append("controller Deployment does not pass --%s" % flag)
        for flag in ("port", "tls-cert-file", "tls-private-key-file", "loop-status-url"):
            if flag in cflags:
                errors.append("controller Deployment passes --%s (it has no webhook listener)" % flag)
        if [p.get("name") for p in cc.get("ports") or []] != ["probes"]:
            errors.append("controller Deployment: the probe port is its only port")
        if cpod.get("automountServiceAccountToken") is not True:
            errors.append("controller pods: automountServiceAccountToken must be true (the loop uses the token)")
    raw = texts.get("deployment.yaml", "")
    for needle, why in (("toYaml .Values.securityContext", "container securityContext from values"),
                        ("toYaml .Values.podSecurityContext", "pod securityContext from values"),
                        ("toYaml .Values.resources", "resources from values"),
                        (".Values.priorityClassName", "priorityClassName"),
                        (".Values.nodeSelector", "nodeSelector"), (".Values.tolerations", "tolerations"),
                        (".Values.affinity", "affinity"), (".Values.topologySpreadConstraints", "topologySpreadConstraints"),
                        ("preferredDuringSchedulingIgnoredDuringExecution", "preferred anti-affinity by hostname"),
                        ("topologyKey: kubernetes.io/hostname", "anti-affinity by hostname")):
        if needle not in raw:
            errors.append("deployment.yaml lacks %s" % why)
    if re.search(r"checksum/", raw):
        errors.append("deployment.yaml: no checksum annotation for certificates (they hot-reload)")
    service_docs, _ = template_docs(texts.get("service.yaml", ""))
    svc = next((d for d in service_docs if d.get("kind") == "Service"), {})
    sports = (svc.get("spec") or {}).get("ports") or [{}]
    if sports[0].get("name") != "https" or sports[0].get("targetPort") != "https":
        errors.append("Service must map port `https` to container port `https`")
    run.case("Deployment and Service wiring", errors)

    # Flags against the binary's option table (once it exists).
    defined = set()
    for d, _, names in sorted(os.walk(os.path.join(root, "server"))):
        for f in sorted(names):
            if f.endswith(".cpp"):
                defined |= cxxopts_flags(read(os.path.join(d, f)))
    if defined:
        missing = sorted(set(flags) - defined)
        run.case("every flag the chart passes is defined by the binary (%d flags)" % len(flags),
                 ["--%s is not an option of the binary (server/**/*.cpp cxxopts)" % f for f in missing])
    else:
        print("    # NOTE: no cxxopts options in server/ yet; flags checked against the contract only")
        run.case("every flag the chart passes is in the contract", [])

    # Labels.
    errors = []
    labels = re.search(r'define "inplace-webhook.labels".*?{{-? end', helpers, re.S)
    for label in ("helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                  "app.kubernetes.io/version", "app.kubernetes.io/managed-by"):
        if not labels or label not in labels.group(0) + helpers:
            errors.append("common labels lack %s" % label)
    for name, text in texts.items():
        if name.endswith(".yaml") and "metadata:" in text and text.count('include "inplace-webhook.labels"') < text.count("\nkind:") + text.startswith("kind:"):
            errors.append("templates/%s: not every object carries the common labels" % name)
    run.case("common labels on every object", errors)

    # The image runs as the uid the chart requires.
    errors = []
    dockerfile = read(os.path.join(root, "Dockerfile")) if os.path.exists(os.path.join(root, "Dockerfile")) else ""
    uid = values.get("securityContext", {}).get("runAsUser")
    if not re.search(r"^USER\s+%s(:\d+)?\s*$" % uid, dockerfile, re.M):
        errors.append("Dockerfile must run as USER %s (the chart's runAsUser)" % uid)
    if 'ENTRYPOINT ["/usr/local/bin/inplace-webhook"]' not in dockerfile or 'CMD ["serve"]' not in dockerfile:
        errors.append("Dockerfile: ENTRYPOINT [\"/usr/local/bin/inplace-webhook\"] and CMD [\"serve\"]")
    run.case("Dockerfile matches the chart (uid, entrypoint)", errors)


def main(argv):
    if len(argv) != 2:
        print("usage: check_chart.py SOURCE_DIR", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    run = Run()
    self_test(run)
    try:
        check_chart(run, root)
    except Exception as e:  # a crash is a failure with its reason, not a traceback only
        import traceback
        traceback.print_exc()
        run.case("check_chart.py ran to the end", ["%s: %s" % (type(e).__name__, e)])
    print("%d passed, %d failed" % (run.passed, run.failed))
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
