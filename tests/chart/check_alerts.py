#!/usr/bin/env python3
"""The chart's alerts and dashboard against the binary's real metrics.

    check_alerts.py BINARY SOURCE_DIR CERT_DIR

- renders charts/inplace-webhook/rules/inplace-webhook.rules.yaml as templates/prometheusrule.yaml does (`tpl` in
  the context of .Values.metrics.prometheusRule), with a small renderer that accepts only the two forms that file
  may use (`{{ .a.b }}` and Go raw strings), for the defaults and for overrides;
- `promtool check rules` on the groups, and on every query of dashboards/inplace-webhook.json wrapped as a
  recording rule (so promtool parses each one); promtool comes with Debian's `prometheus` package (`make deps`),
  and without it this test fails rather than passing unchecked;
- starts the built binary as the chart runs it, `--role=controller` (leader election and --manage-certificates,
  against the test API server tests/apiserver/server.py) and `--role=webhook` (polling the controller's /loopz),
  reads /metrics of each before any event, and checks that every metric name an alert expression or a dashboard
  query reads is a family both processes together export with HELP and TYPE (a `_bucket`/`_sum`/`_count` name
  only of a histogram family).
The PromQL name extractor is exercised on small inputs first. tests/cluster/scenarios_alerts.py imports the
renderer and the query list to run the same rules in a real Prometheus against the real cluster.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True

try:
    import yaml
except ImportError:  # pragma: no cover
    print("FAIL - python3-yaml is not installed (Debian: apt-get install python3-yaml)")
    print("0 passed, 1 failed")
    sys.exit(1)

RULES = os.path.join("charts", "inplace-webhook", "rules", "inplace-webhook.rules.yaml")
DASHBOARD = os.path.join("charts", "inplace-webhook", "dashboards", "inplace-webhook.json")
VALUES = os.path.join("charts", "inplace-webhook", "values.yaml")

# ----------------------------------------------------------------------------------------------
# Rendering


ACTION = re.compile(r"{{(-?)\s*(.*?)\s*(-?)}}", re.S)


# The chart check's own helpers (check_chart.py in this directory), not a second copy.
from check_chart import deep_merge, dig  # noqa: E402


def render(text, context):
    """Renders `text` as helm's tpl would with `context`, for `{{ .a.b }}` (the value, printed as Go prints it)
    and {{`raw`}}. Raises ValueError on any other action (the file must stay checkable without helm)."""
    def repl(m):
        if m.group(1) or m.group(3):
            raise ValueError("whitespace trimming {{- -}} is not supported here: %s" % m.group(0))
        body = m.group(2)
        raw = re.fullmatch(r"`([^`]*)`", body)
        if raw:
            return raw.group(1)
        ref = re.fullmatch(r"\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)", body)
        if not ref:
            raise ValueError("unsupported template action %s" % m.group(0))
        value = dig(context, ref.group(1))
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError("%s is not a scalar" % ref.group(1))
        return str(value)
    # Raw strings may contain }}: take them first.
    out, pos = [], 0
    for m in re.finditer(r"{{`[^`]*`}}|{{-?\s*.*?\s*-?}}", text, re.S):
        out.append(text[pos:m.start()])
        out.append(repl(ACTION.fullmatch(m.group(0))) if not m.group(0).startswith("{{`") else m.group(0)[3:-3])
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def rule_context(root, override=None):
    with open(os.path.join(root, VALUES), encoding="utf-8") as f:
        values = yaml.safe_load(f)
    return deep_merge(values["metrics"]["prometheusRule"], override or {})


def render_rules(root, override=None):
    """The rule groups (a dict with `groups`) for values.yaml's metrics.prometheusRule merged with `override`."""
    with open(os.path.join(root, RULES), encoding="utf-8") as f:
        text = f.read()
    return yaml.safe_load(render(text, rule_context(root, override)))


def rule_exprs(groups):
    return [(r.get("alert") or r.get("record"), r["expr"]) for g in groups["groups"] for r in g["rules"]]


def dashboard_exprs(root):
    """(panel title, expr) of every query in the dashboard, the templating queries included."""
    with open(os.path.join(root, DASHBOARD), encoding="utf-8") as f:
        dash = json.load(f)
    out = []

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))
    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            out.append((p.get("title", "?"), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        if v.get("type") == "query":
            q = q.get("query") if isinstance(q, dict) else q
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q.strip())
            out.append(("variable " + v["name"], m.group(1) if m else q))
    return out


def concrete(expr):
    """A dashboard query as Prometheus receives it from Grafana (variables replaced)."""
    return expr.replace("$__rate_interval", "1m").replace("$namespace", ".+")


# ----------------------------------------------------------------------------------------------
# Metric names in PromQL

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "inf", "nan", "atan2", "start", "end"}


def metric_names(expr):
    """The metric names a PromQL expression selects."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"\{[^{}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", e):
        if m.group(0) in KEYWORDS or re.match(r"\s*\(", e[m.end():]):
            continue
        names.add(m.group(0))
    return names


def self_test():
    cases = [
        ('sum by (route, le) (rate(a_bucket{x="b{c}",le!="1"}[5m])) > 0.5', {"a_bucket"}),
        ("(sum(b{}) or vector(0)) < 1 and on() absent(c offset 5m)", {"b", "c"}),
        ("min by (certificate) (d{ } > 0) - time() < 21 * 86400 + 1e3", {"d"}),
        ("histogram_quantile(0.99, sum by (le) (rate(e[1m]))) / ignoring(x) f", {"e", "f"}),
    ]
    errors = []
    for expr, want in cases:
        got = metric_names(expr)
        if got != want:
            errors.append("metric_names(%r) = %s, want %s" % (expr, sorted(got), sorted(want)))
    text = "a: '{{ .x.y }}' b: {{`{{ $labels.z }}`}} c: {{ .n }}"
    got = render(text, {"x": {"y": "1m"}, "n": 0.5})
    if got != "a: '1m' b: {{ $labels.z }} c: 0.5":
        errors.append("render gave %r" % got)
    try:
        render("{{ include \"x\" . }}", {})
        errors.append("render accepted an include")
    except ValueError:
        pass
    return errors


# ----------------------------------------------------------------------------------------------
# The binary's metric families


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def families(text):
    """{name: type} from the # TYPE lines, checking each has a # HELP line."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    return {n: t for n, t in types.items() if n in helps}


def binary_families(binary, root, cert_dir, work):
    """The families /metrics of a fresh controller and a fresh webhook export: ({name: type}, {name: roles})."""
    procs = []
    logs = []

    def start(name, args, env=None):
        log = open(os.path.join(work, name + ".log"), "wb")
        logs.append((name, log.name))
        procs.append(subprocess.Popen(args, stdout=log, stderr=log, env=dict(os.environ, **(env or {}))))
        return procs[-1]

    def wait_for(url, want, what, seconds=20):
        deadline = time.time() + seconds
        last = ""
        while time.time() < deadline:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError("%s: a process exited with %d" % (what, p.returncode))
            try:
                last = get(url)
                if want(last):
                    return last
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("%s: %s did not answer as expected in %d s" % (what, url, seconds))

    try:
        # The loop's token authenticates as the chart's controller identity (the loop checks it).
        token, users = os.path.join(work, "token"), os.path.join(work, "users.json")
        with open(token, "w") as f:
            f.write("iw-loop-token\n")
        with open(users, "w") as f:
            json.dump({"iw-loop-token": {"username": "system:serviceaccount:inplace-webhook:inplace-webhook",
                                         "groups": ["system:serviceaccounts"]}}, f)
        port_file = os.path.join(work, "apiserver.port")
        start("apiserver", [sys.executable, os.path.join(root, "tests", "apiserver", "server.py"), "--port", "0",
                            "--port-file", port_file, "--users-file", users,
                            "--log-file", os.path.join(work, "apiserver.requests")])
        deadline = time.time() + 15
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.time() > deadline or procs[0].poll() is not None:
                raise RuntimeError("the test API server did not start")
            time.sleep(0.05)
        api = "http://127.0.0.1:%s" % open(port_file).read().strip()
        # The test API server serves no Secrets: the certificate controller fails its passes (logged), and its
        # families are still exported from the start, as every other.
        cprobe = free_port()
        start("controller", [binary, "serve", "--role", "controller", "--bind-address", "127.0.0.1",
                             "--probe-port", str(cprobe), "--api-server", api, "--token-file", token,
                             "--leader-elect", "true", "--leader-election-namespace", "inplace-webhook",
                             "--manage-certificates", "--cert-namespace", "inplace-webhook",
                             "--cert-secret", "inplace-webhook-tls", "--cert-service", "inplace-webhook",
                             "--cert-webhook-configuration", "inplace-webhook",
                             "--log-format", "text", "--shutdown-delay-seconds", "0"],
              env={"POD_NAME": "iw-controller-0"})
        wport, wprobe = free_port(), free_port()
        start("webhook", [binary, "serve", "--role", "webhook", "--bind-address", "127.0.0.1",
                          "--port", str(wport), "--probe-port", str(wprobe),
                          "--tls-cert-file", os.path.join(cert_dir, "tls.crt"),
                          "--tls-private-key-file", os.path.join(cert_dir, "tls.key"),
                          "--loop-status-url", "http://127.0.0.1:%d/loopz" % cprobe,
                          "--log-format", "text", "--shutdown-delay-seconds", "0"],
              env={"POD_NAME": "iw-webhook-0"})
        # The controller leads (its Lease is created), the webhook has seen the loop alive once.
        ctext = wait_for("http://127.0.0.1:%d/metrics" % cprobe,
                         lambda t: re.search(r"^inplace_webhook_leader\{[^}]*\} 1$", t, re.M), "controller")
        wtext = wait_for("http://127.0.0.1:%d/metrics" % wprobe,
                         lambda t: "\ninplace_webhook_loop_alive 1\n" in t, "webhook")
        fams, roles = {}, {}
        for role, text in (("controller", ctext), ("webhook", wtext)):
            for n, t in families(text).items():
                fams[n] = t
                roles.setdefault(n, []).append(role)
        return fams, roles
    except RuntimeError as e:
        tails = []
        for name, path in logs:
            with open(path, errors="replace") as f:
                tails.append("--- %s:\n%s" % (name, "".join(f.readlines()[-15:])))
        raise RuntimeError("%s\n%s" % (e, "\n".join(tails)))
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def unknown_names(names, fams):
    """The names that are no exported family (histogram series names map to their family)."""
    out = []
    for n in sorted(names):
        if n in fams:
            if fams[n] == "histogram":
                out.append("%s is a histogram: select %s_bucket, _sum or _count" % (n, n))
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        if base != n and fams.get(base) in ("histogram", "summary"):
            if n.endswith("_bucket") and fams[base] != "histogram":
                out.append("%s: %s is a %s" % (n, base, fams[base]))
            continue
        out.append("%s is not exported by the binary" % n)
    return out


# ----------------------------------------------------------------------------------------------


class Run:
    def __init__(self):
        self.passed = self.failed = 0

    def case(self, name, errors):
        if errors:
            self.failed += 1
            print("FAIL - " + name)
            for e in errors:
                print("    " + str(e).replace("\n", "\n    "))
        else:
            self.passed += 1
            print("ok - " + name)


def promtool_check(path):
    r = subprocess.run(["promtool", "check", "rules", path], capture_output=True, text=True)
    return [] if r.returncode == 0 else [(r.stdout + r.stderr).strip()]


def check_helm_output(rendered, root):
    """`check_alerts.py --helm-output FILE SOURCE_DIR` (tests/chart/helm-test.sh): helm's render of the chart with
    metrics.prometheusRule and metrics.grafanaDashboard on holds the rules this check renders without helm (so the
    two renderers agree) and the dashboard file as it is."""
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]
    errors = []
    rules = [d for d in docs if d.get("kind") == "PrometheusRule"]
    maps = [d for d in docs if d.get("kind") == "ConfigMap" and "inplace-webhook.json" in (d.get("data") or {})]
    if len(rules) != 1:
        errors.append("%d PrometheusRule objects, want 1" % len(rules))
    elif rules[0]["spec"] != render_rules(root):
        errors.append("helm's PrometheusRule spec differs from check_alerts.py's rendering of the rules file")
    if len(maps) != 1:
        errors.append("%d dashboard ConfigMaps, want 1" % len(maps))
    else:
        with open(os.path.join(root, DASHBOARD), encoding="utf-8") as f:
            if json.loads(maps[0]["data"]["inplace-webhook.json"]) != json.load(f):
                errors.append("the ConfigMap's dashboard differs from dashboards/inplace-webhook.json")
        if maps[0]["metadata"]["labels"].get("grafana_dashboard") != "1":
            errors.append("the dashboard ConfigMap lacks the sidecar label grafana_dashboard: \"1\"")
    if rules and shutil.which("promtool"):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump(rules[0]["spec"], f)
            f.flush()
            errors += promtool_check(f.name)
    elif rules:
        errors.append("promtool is not installed (Debian: apt-get install prometheus)")
    for e in errors:
        print(e)
    return 1 if errors else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--helm-output":
        return check_helm_output(argv[2], argv[3])
    if len(argv) != 4:
        print(__doc__)
        return 2
    binary, root, cert_dir = argv[1], argv[2], argv[3]
    run = Run()
    run.case("self-test: PromQL name extractor and renderer", self_test())

    errors = []
    texts = {}
    for name in ("prometheusrule.yaml", "grafana-dashboard.yaml"):
        with open(os.path.join(root, "charts", "inplace-webhook", "templates", name), encoding="utf-8") as f:
            texts[name] = f.read()
    if 'tpl (.Files.Get "rules/inplace-webhook.rules.yaml") (merge (dict "Template" .Template) ' \
       '(deepCopy .Values.metrics.prometheusRule))' not in texts["prometheusrule.yaml"]:
        errors.append("templates/prometheusrule.yaml no longer renders the rules file in the context this check uses")
    if '.Files.Get "dashboards/inplace-webhook.json"' not in texts["grafana-dashboard.yaml"]:
        errors.append("templates/grafana-dashboard.yaml does not load dashboards/inplace-webhook.json")
    run.case("the templates load the rules file and the dashboard this check reads", errors)

    work = tempfile.mkdtemp(prefix="iw-alerts-")
    try:
        groups, errors = None, []
        short = {"alerts": {k: {"for": "1s"} for k in ("updateStuck", "noLeader", "loopDown", "webhookErrors",
                                                      "latencyHigh", "certificateExpiry")},
                 "selector": 'namespace="inplace-webhook"'}
        rendered = {}
        for label, override in (("defaults", None), ("overrides", short)):
            try:
                rendered[label] = render_rules(root, override)
            except (ValueError, KeyError, yaml.YAMLError) as e:
                errors.append("%s: %s" % (label, e))
        if not errors:
            groups = rendered["defaults"]
            alerts = {r["alert"]: r for g in groups["groups"] for r in g["rules"]}
            want = {"InPlaceUpdateStuck", "InPlaceStatefulSetUpdateStuck", "InPlaceHookTimeouts", "InPlaceWebhookNoLeader", "InPlaceWebhookLoopDown",
                    "InPlaceWebhookErrors", "InPlaceWebhookLatencyHigh", "InPlaceWebhookCertificateExpiringSoon"}
            if set(alerts) != want:
                errors.append("alerts %s, want %s" % (sorted(alerts), sorted(want)))
            for name, r in alerts.items():
                for key in ("summary", "description", "runbook"):
                    if not r.get("annotations", {}).get(key):
                        errors.append("%s has no %s annotation" % (name, key))
                if "Alerts and dashboard" not in r.get("annotations", {}).get("runbook", ""):
                    errors.append("%s: the runbook hint does not name the README section" % name)
                if "severity" not in r.get("labels", {}):
                    errors.append("%s has no severity label" % name)
            stuck = alerts.get("InPlaceUpdateStuck", {})
            if "$labels.deployment" not in stuck.get("annotations", {}).get("summary", ""):
                errors.append("InPlaceUpdateStuck's summary does not name the Deployment")
            sts = alerts.get("InPlaceStatefulSetUpdateStuck", {})
            if "$labels.statefulset " not in sts.get("annotations", {}).get("summary", "").replace("}}", " "):
                errors.append("InPlaceStatefulSetUpdateStuck's summary does not name the StatefulSet")
            over = {r["alert"]: r for g in rendered["overrides"]["groups"] for r in g["rules"]}
            for name in ("InPlaceUpdateStuck", "InPlaceStatefulSetUpdateStuck"):
                if over.get(name, {}).get("for") != "1s":
                    errors.append("metrics.prometheusRule.alerts.updateStuck.for does not reach %s" % name)
            if not all('namespace="inplace-webhook"' in r["expr"] for r in over.values()):
                errors.append("metrics.prometheusRule.selector does not reach every expression")
            if "or vector(0)" not in alerts.get("InPlaceWebhookNoLeader", {}).get("expr", ""):
                errors.append("InPlaceWebhookNoLeader does not fire when no controller is scraped (or vector(0))")
        run.case("the rules render (defaults and overrides): 8 alerts with summary, description, runbook, severity",
                 errors)

        have_promtool = shutil.which("promtool") is not None
        missing = ["promtool is not installed (Debian: apt-get install prometheus; `make deps` installs it)"]
        for label, g in rendered.items():
            path = os.path.join(work, "rules-%s.yaml" % label)
            with open(path, "w") as f:
                yaml.safe_dump(g, f)
            run.case("promtool check rules: the alerts (%s)" % label, promtool_check(path) if have_promtool else missing)
        dash = dashboard_exprs(root)
        path = os.path.join(work, "dashboard-rules.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
                {"record": "dashboard:query:%d" % i, "expr": concrete(e)} for i, (_, e) in enumerate(dash)]}]}, f)
        errors = [] if dash else ["no query found in the dashboard"]
        panels = {t for t, _ in dash}
        for want in ("Updates in progress", "Pods per state, and what they wait on", "Hook wait times", "Admission latency by route",
                     "Admission requests and errors", "Leader", "Certificate expiry"):
            if want not in panels:
                errors.append("the dashboard has no panel %r" % want)
        errors += promtool_check(path) if have_promtool else missing
        run.case("promtool parses every dashboard query (%d) and the panels are there" % len(dash), errors)

        try:
            fams, roles = binary_families(binary, root, cert_dir, work)
            error = None
        except (RuntimeError, OSError) as e:
            fams, roles, error = {}, {}, str(e)
        run.case("a fresh controller and webhook export their metric families (%d)" % len(fams),
                 [error] if error else ([] if fams else ["no family found"]))
        if fams:
            errors, used = [], set()
            for name, expr in rule_exprs(groups or {"groups": []}):
                names = metric_names(expr)
                used |= names
                errors += ["alert %s: %s" % (name, u) for u in unknown_names(names, fams)]
                if not names:
                    errors.append("alert %s reads no metric (extractor broken?)" % name)
            run.case("every metric the alerts read is exported with HELP and TYPE (%d names)" % len(used), errors)
            errors, used = [], set()
            for title, expr in dash:
                names = metric_names(concrete(expr))
                used |= names
                errors += ["panel %s: %s" % (title, u) for u in unknown_names(names, fams)]
            run.case("every metric the dashboard reads is exported with HELP and TYPE (%d names)" % len(used), errors)
            for n in sorted(used):
                base = re.sub(r"_(bucket|sum|count)$", "", n)
                print("    # %s: %s" % (n, ", ".join(roles.get(n) or roles.get(base) or ["?"])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (run.passed, run.failed))
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
