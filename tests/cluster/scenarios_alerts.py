"""Issue 15 item 2 on the real cluster: the chart's alerts and dashboard in Debian's real Prometheus.

Prometheus runs inside the cluster's network namespace (it reaches the pods by IP, as a ServiceMonitor's
Prometheus would), scrapes every pod the chart's metrics Service selects (webhook and controller pods) every
second, and evaluates the chart's PrometheusRule groups, rendered by the pinned helm with short `for` durations,
every second. Through its HTTP API: every rule evaluates without error, every dashboard query runs, every metric
they read has series from the real pods; and the alerts fire on real conditions and resolve after them."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import test_cluster as tc
from kube import Failure, check, condition, ns_path, state_of, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chart"))
import check_alerts  # noqa: E402

NETNS = "/run/netns/" + os.environ.get("INPLACE_CLUSTER_NETNS", "inplace-cluster")
CONTROLLER = tc.RELEASE + "-controller"
# Short `for` durations through the chart's values (the defaults are minutes).
SHORT = ["--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true",
         "--set", "metrics.service.enabled=true",
         "--set", "metrics.prometheusRule.alerts.updateStuck.for=2s",
         "--set", "metrics.prometheusRule.alerts.noLeader.for=5s",
         "--set", "metrics.prometheusRule.alerts.loopDown.for=5s"]
# What Prometheus' own /api/v1/query is sent from inside the network namespace.
QUERY = r"""
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/%s" % (sys.argv[1], sys.argv[2])
if len(sys.argv) > 3:
    url += "?" + urllib.parse.urlencode({"query": sys.argv[3]})
print(urllib.request.urlopen(url, timeout=10).read().decode())
"""


class Prometheus:
    """Debian's prometheus in the cluster's network namespace, listening on its loopback, scraping the pods named
    in a file_sd targets file (rewritten by refresh())."""

    def __init__(self, s, rules):
        self.s = s
        self.dir = tempfile.mkdtemp(prefix="iw-o01-prometheus-")
        self.port = 19090
        self.selector = None
        with open(os.path.join(self.dir, "rules.yaml"), "w") as f:
            json.dump(rules, f)
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
                  "rule_files": [os.path.join(self.dir, "rules.yaml")],
                  "scrape_configs": [{"job_name": tc.RELEASE + "-metrics", "metrics_path": "/metrics",
                                      "file_sd_configs": [{"files": [os.path.join(self.dir, "targets.json")],
                                                           "refresh_interval": "1s"}]}]}
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            json.dump(config, f)
        self.proc = None

    def refresh(self):
        """Targets: every live pod the metrics Service selects, with the labels a ServiceMonitor gives them."""
        pods = [p for p in self.s.api.items(ns_path(tc.RELEASE_NS, "pods"), labelSelector=self.selector)
                if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")]
        targets = [{"targets": ["%s:8080" % p["status"]["podIP"]],
                    "labels": {"namespace": tc.RELEASE_NS, "pod": p["metadata"]["name"],
                               "component": p["metadata"]["labels"].get("app.kubernetes.io/component", "")}}
                   for p in pods]
        tmp = os.path.join(self.dir, "targets.json.tmp")
        with open(tmp, "w") as f:
            json.dump(targets, f)
        os.replace(tmp, os.path.join(self.dir, "targets.json"))  # file_sd reads whole files only
        return pods

    def start(self, selector):
        self.selector = selector
        self.refresh()
        binary = shutil.which("prometheus")
        check(binary, "Debian's prometheus is not installed (make deps)")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(["nsenter", "--net=" + NETNS, binary,
                                      "--config.file=" + os.path.join(self.dir, "prometheus.yml"),
                                      "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                                      "--web.listen-address=127.0.0.1:%d" % self.port],
                                     stdout=self.log, stderr=self.log)
        wait_for(lambda: self.api("status/buildinfo")["status"] == "success", 30, "Prometheus answering")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "prometheus.log"), errors="replace") as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""

    def api(self, path, query=None):
        if self.proc is not None and self.proc.poll() is not None:
            raise Failure("prometheus exited with %d:\n%s" % (self.proc.returncode, self.log_tail()))
        args = ["nsenter", "--net=" + NETNS, sys.executable, "-c", QUERY, str(self.port), path]
        if query is not None:
            args.append(query)
        p = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise RuntimeError("prometheus %s %r: %s" % (path, query, p.stderr[-400:]))
        return json.loads(p.stdout)

    def query(self, expr):
        r = self.api("query", expr)
        check(r["status"] == "success", "query %r: %s" % (expr, r))
        return r["data"]["result"]

    def alerts(self, name, **labels):
        return [a for a in self.api("alerts")["data"]["alerts"]
                if a["labels"].get("alertname") == name and all(a["labels"].get(k) == v for k, v in labels.items())]

    def firing(self, name, **labels):
        return [a for a in self.alerts(name, **labels) if a["state"] == "firing"]


def rendered(s, kind):
    """The chart's objects of `kind` as the pinned helm renders them with SHORT."""
    version = s.api.get("/version")["gitVersion"]
    out = s.tools.helm("template", tc.RELEASE, os.path.join(s.source, "charts", "inplace-webhook"),
                       "-n", tc.RELEASE_NS, "--kube-version", version, *SHORT).stdout
    import yaml
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict) and d.get("kind") == kind]


def o01_alerts_and_dashboard_in_real_prometheus(s):
    """The metrics Service selects webhook and controller pods; Prometheus scraping them evaluates every rule and
    dashboard query without error, with series for every metric; a hook held past timeoutSeconds and
    progressDeadlineSeconds fires InPlaceHookTimeouts and InPlaceUpdateStuck naming the Deployment, releasing it
    resolves the stall and records the hook wait; the controller scaled to 0 fires InPlaceWebhookNoLeader and
    InPlaceWebhookLoopDown, and scaled back they resolve."""
    rules = rendered(s, "PrometheusRule")
    check(len(rules) == 1, "helm rendered %d PrometheusRules" % len(rules))
    services = [d for d in rendered(s, "Service") if d["metadata"]["name"] == tc.RELEASE + "-metrics"]
    check(len(services) == 1, "no metrics Service rendered")
    selector = ",".join("%s=%s" % kv for kv in sorted(services[0]["spec"]["selector"].items()))
    controller = s.api.get("/apis/apps/v1/namespaces/%s/deployments/%s" % (tc.RELEASE_NS, CONTROLLER))
    replicas = controller["spec"]["replicas"]
    prom = Prometheus(s, rules[0]["spec"])
    scaled = False
    app = tc.App(s, "o01")
    try:
        app.setup_namespace()
        prom.start(selector)
        pods = prom.refresh()
        components = sorted({p["metadata"]["labels"].get("app.kubernetes.io/component") for p in pods})
        print("  the metrics Service selects %d pods: %s" % (len(pods), ", ".join(
            "%s (%s)" % (p["metadata"]["name"], p["metadata"]["labels"].get("app.kubernetes.io/component"))
            for p in pods)))
        check(components == ["controller", "webhook"], "the metrics Service selects components %s" % components)
        wait_for(lambda: (lambda t: len(t) == len(pods) and all(x["health"] == "up" for x in t))(
            prom.api("targets")["data"]["activeTargets"]), 30, "every pod scraped (targets up)")

        # A stuck update: a pre-update hook held past timeoutSeconds (10 s) and progressDeadlineSeconds (15 s).
        obj = tc.deployment("web", replicas=2, lifecycle={"preUpdate": {"finalizersHandler": [tc.FINALIZER],
                                                                        "timeoutSeconds": 10}})
        obj["spec"]["progressDeadlineSeconds"] = 15
        app.create(obj)
        for p in app.pods():
            app.set_finalizer(p["metadata"]["name"], True)
        app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        started = time.time()
        held = wait_for(lambda: next((p for p in app.pods() if state_of(p) == "PreparingUpdate"), None), 30,
                        "a pod in PreparingUpdate", app)["metadata"]["name"]
        timeout_alert = wait_for(lambda: prom.firing("InPlaceHookTimeouts"), 60, "InPlaceHookTimeouts firing")
        t_timeout = time.time() - started
        d = wait_for(lambda: (lambda d: d if condition(d, "Progressing", "reason") == "ProgressDeadlineExceeded"
                              else None)(app.deployment()), 60, "Progressing=False/ProgressDeadlineExceeded", app)
        t_stall = time.time()
        stuck = wait_for(lambda: prom.firing("InPlaceUpdateStuck", deployment_namespace="o01", deployment="web"),
                         30, "InPlaceUpdateStuck firing for o01/web")
        t_stuck = time.time()
        summary_text = stuck[0]["annotations"]["summary"]
        print("  held pod %s: InPlaceHookTimeouts firing %.1f s after the update began (timeoutSeconds 10); "
              "stall reported %.1f s after it (progressDeadlineSeconds 15), InPlaceUpdateStuck firing %.1f s after "
              "the stall was seen (for 2s, scrape and evaluation 1 s): %r" % (
                  held, t_timeout, t_stall - started, t_stuck - t_stall, summary_text))
        check("o01/web" in summary_text, "the summary does not name the Deployment: %r" % summary_text)
        check(timeout_alert[0]["labels"].get("severity") == "warning", "severity: %s" % timeout_alert[0]["labels"])

        # Every rule evaluates without error; every dashboard query runs; every metric has series now.
        time.sleep(3)
        errors = [(r["name"], r.get("lastError")) for g in prom.api("rules")["data"]["groups"] for r in g["rules"]
                  if r.get("health") != "ok"]
        check(not errors, "rules with evaluation errors: %s" % errors)
        names = set()
        for _, expr in check_alerts.rule_exprs(rules[0]["spec"]):
            names |= check_alerts.metric_names(expr)
        dash = check_alerts.dashboard_exprs(s.source)
        for title, expr in dash:
            prom.query(check_alerts.concrete(expr))
            names |= check_alerts.metric_names(check_alerts.concrete(expr))
        # A StatefulSet's stall gauge has a series only while a StatefulSet's update runs (none here; s02 reads it
        # from the leader on a real stall); the ctest chart_alerts checks its HELP and TYPE on a fresh process.
        no_update_here = {"inplace_webhook_statefulset_update_stalled"}
        empty = [n for n in sorted(names - no_update_here) if not prom.query("count(%s)" % n)]
        check(not empty, "metrics without series from the real pods: %s" % empty)
        check(no_update_here <= names, "the rules and dashboard no longer read %s" % sorted(no_update_here))
        print("  %d rules evaluate without error, %d dashboard queries run, %d of the %d metrics they read have series"
              " (not %s: no StatefulSet update runs here)" % (
                  sum(len(g["rules"]) for g in rules[0]["spec"]["groups"]), len(dash), len(names - no_update_here),
                  len(names), ", ".join(sorted(no_update_here))))
        for title, expr in dash:
            if title in ("Updates in progress", "Pods per state"):
                print("    dashboard %r: %s" % (title, [(r["metric"], r["value"][1])
                                                       for r in prom.query(check_alerts.concrete(expr))]))

        # Release the hook: progress resolves the stall; the hook wait is recorded.
        waits = float((prom.query('sum(inplace_webhook_hook_wait_seconds_count{hook="preUpdate"})') or
                       [{"value": [0, "0"]}])[0]["value"][1])
        released = time.time()
        app.set_finalizer(held, False)
        wait_for(lambda: not prom.alerts("InPlaceUpdateStuck", deployment_namespace="o01"), 60,
                 "InPlaceUpdateStuck resolved")
        t_resolved = time.time() - released
        tc.release_until_done(app, lambda p: state_of(p) == "PreparingUpdate" and tc.FINALIZER in (
            p["metadata"].get("finalizers") or []) and app.set_finalizer(p["metadata"]["name"], False), 120,
            "after the hooks were released")
        wait_for(lambda: float(prom.query('sum(inplace_webhook_hook_wait_seconds_count{hook="preUpdate"})')[0][
            "value"][1]) >= waits + 2, 30, "two preUpdate hook waits recorded")
        count = float(prom.query('max(inplace_webhook_hook_wait_seconds_count{hook="preUpdate"})')[0]["value"][1])
        total = float(prom.query('max(inplace_webhook_hook_wait_seconds_sum{hook="preUpdate"})')[0]["value"][1])
        over = float(prom.query('max(inplace_webhook_hook_wait_seconds_count{hook="preUpdate"}) - max('
                                'inplace_webhook_hook_wait_seconds_bucket{hook="preUpdate",le="10"})')[0]["value"][1])
        print("  held pod released: InPlaceUpdateStuck resolved %.1f s later; the update then finished; "
              "inplace_webhook_hook_wait_seconds{hook=\"preUpdate\"}: %d waits, %.0f s in all, %d longer than 10 s" % (
                  t_resolved, count, total, over))
        check(total >= 15 and over >= 1, "the held pod's preUpdate wait (past the 15 s deadline) was not recorded")

        # No leader: the controller scaled to 0.
        check(not prom.alerts("InPlaceWebhookNoLeader"), "InPlaceWebhookNoLeader before the scale-down: %s" %
              prom.alerts("InPlaceWebhookNoLeader"))
        scaled = True
        down = time.time()
        s.tools.kubectl("-n", tc.RELEASE_NS, "scale", "deploy/" + CONTROLLER, "--replicas=0")
        wait_for(lambda: not s.controller_pods(), 60, "the controller pods gone")
        prom.refresh()
        wait_for(lambda: prom.firing("InPlaceWebhookNoLeader"), 60, "InPlaceWebhookNoLeader firing")
        t_noleader = time.time() - down
        wait_for(lambda: prom.firing("InPlaceWebhookLoopDown"), 60, "InPlaceWebhookLoopDown firing")
        t_loopdown = time.time() - down
        loopdown = sorted(a["labels"].get("pod", "") for a in prom.firing("InPlaceWebhookLoopDown"))
        print("  controller scaled to 0: InPlaceWebhookNoLeader firing %.1f s later (for 5s), InPlaceWebhookLoopDown "
              "%.1f s later on %s" % (t_noleader, t_loopdown, loopdown))
        up = time.time()
        s.tools.kubectl("-n", tc.RELEASE_NS, "scale", "deploy/" + CONTROLLER, "--replicas=%d" % replicas)
        s.wait_webhook_ready()
        scaled = False
        wait_for(lambda: len(prom.refresh()) == len(pods), 60, "the controller pods back")
        wait_for(lambda: not prom.alerts("InPlaceWebhookNoLeader") and not prom.alerts("InPlaceWebhookLoopDown"),
                 60, "InPlaceWebhookNoLeader and InPlaceWebhookLoopDown resolved")
        print("  scaled back to %d: a controller leads and both alerts resolved %.1f s after the scale-up" % (
            replicas, time.time() - up))
    finally:
        if scaled:
            s.tools.kubectl("-n", tc.RELEASE_NS, "scale", "deploy/" + CONTROLLER, "--replicas=%d" % replicas,
                            check_rc=False)
            try:
                s.wait_webhook_ready()
            except Failure as e:
                print("  (restoring the controller: %s)" % e)
        prom.stop()


SCENARIOS = [o01_alerts_and_dashboard_in_real_prometheus]
