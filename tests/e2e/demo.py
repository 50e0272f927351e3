#!/usr/bin/env python3
"""`make demo`: the product in a minute, on this machine, with no cluster.

Starts the test Kubernetes API server (tests/apiserver/server.py: a stand-in kube-apiserver with a
simulated kubelet, ReplicaSet and Deployment controllers), configured to call the real
inplace-webhook binary as an admission webhook, and the same binary's in-place loop. Then, as a
user would: creates an opted-in 3-replica Deployment with a pre- and a post-update hook, changes its
image, and prints what kubectl would show as it happens, while this script also plays the hook's
handler (an LB controller that drains a pod before its update and registers it again after).

    python3 tests/e2e/demo.py BUILD/inplace-webhook [--certs DIR]

Without --certs, a throw-away CA and serving certificate are made with certs/gen-dev-certs.sh.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from harness import (STATE, App, Cluster, deployment, format_table, images, restart_counts,  # noqa: E402
                     set_finalizer, state_of)

FINALIZER = "lb.example.com/registered"
OLD, NEW = "nginx:1.25", "nginx:1.27"
HOLD = 1.0  # how long the pretend LB controller takes to drain / register a pod
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")

T0 = time.time()


def say(text=""):
    print(text, flush=True)


def step(text):
    say("\n%s[%4.1fs] %s%s" % (BOLD, time.time() - T0, text, RESET))


def shell(cmd):
    say("%s$ %s%s" % (BOLD, cmd, RESET))


def note(text):
    say("%s# %s%s" % (DIM, text, RESET))


def age(pod):
    ts = pod["metadata"].get("creationTimestamp")
    t = time.mktime(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    return "%ds" % max(0, int(time.time() - t))


def pods_table(pods):
    """`kubectl get pods -L inplace-webhook.io/state`, with the image added."""
    rows = [("NAME", "READY", "STATUS", "RESTARTS", "AGE", "IMAGE", "STATE")]
    for p in pods:
        cs = (p.get("status") or {}).get("containerStatuses") or []
        ready = sum(1 for c in cs if c.get("ready"))
        rows.append((p["metadata"]["name"], "%d/%d" % (ready, len(p["spec"]["containers"])),
                     (p.get("status") or {}).get("phase", "Pending"), sum(restart_counts(p).values()), age(p),
                     images(p)["app"], p["metadata"].get("labels", {}).get(STATE, "")))
    return format_table(rows)


def table_key(pods):
    """What, when it changes, deserves a new table."""
    return tuple((p["metadata"]["name"], state_of(p), images(p)["app"], sum(restart_counts(p).values()),
                  all(c.get("ready") for c in (p.get("status") or {}).get("containerStatuses") or []))
                 for p in pods)


def event_line(e):
    io = e.get("involvedObject") or {}
    src = e.get("reportingComponent") or (e.get("source") or {}).get("component") or ""
    return "  %-7s %-23s %-28s %-17s %s" % (e.get("type", ""), e.get("reason", ""),
                                            "%s/%s" % (io.get("kind", "").lower(), io.get("name", "")), src,
                                            e.get("message", ""))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("binary", help="the inplace-webhook binary")
    p.add_argument("--certs", help="directory with ca.crt, tls.crt, tls.key (default: make throw-away ones)")
    p.add_argument("--webhook-config", default=os.path.join(HERE, "webhook-config.yaml"),
                   help="the webhook configurations the API server calls (default: %(default)s)")
    args = p.parse_args()
    source_dir = os.path.dirname(os.path.dirname(HERE))
    workdir = tempfile.mkdtemp(prefix="iw-demo-")
    cert_dir = args.certs
    if not cert_dir:
        cert_dir = os.path.join(workdir, "certs")
        subprocess.run([os.path.join(source_dir, "certs", "gen-dev-certs.sh"), cert_dir], check=True,
                       stdout=subprocess.DEVNULL)
    config = args.webhook_config
    if not os.path.exists(config):
        sys.exit("demo: %s is missing (the webhook configurations the API server calls)" % config)
    cluster = Cluster(args.binary, source_dir, cert_dir, workdir, webhook_config=config)
    ok = False
    try:
        ok = run(cluster)
    except KeyboardInterrupt:
        say("\ninterrupted")
    finally:
        cluster.stop()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say("\nlogs kept in %s" % workdir)
    return 0 if ok else 1


def run(cluster):
    say("%sinplace-webhook demo%s: in-place updates with lifecycle hooks for plain Deployments." % (BOLD, RESET))
    cluster.start()
    iw = cluster.start_webhook("inplace-webhook-7d9f")
    say("A stand-in kube-apiserver (simulated kubelet, ReplicaSet and Deployment controllers) runs on "
        "127.0.0.1:%d.\nIt calls inplace-webhook (HTTPS on :%d) for opted-in Deployments and pods; the same "
        "process runs\nthe in-place loop. This script is the user, and also the LB controller that handles "
        "the hooks." % (cluster.api_port, iw.port))

    app = App(cluster, "shop", "web")
    hooks = {"preUpdate": {"finalizersHandler": [FINALIZER], "timeoutSeconds": 600},
             "postUpdate": {"finalizersHandler": [FINALIZER], "timeoutSeconds": 600}}
    step("Create an opted-in Deployment with a drain hook before and a registration hook after the update")
    shell("kubectl -n shop apply -f web.yaml")
    note("metadata.labels:          inplace-webhook.io/enabled: \"true\"   (also on the pod template)")
    note("metadata.annotations:     inplace-webhook.io/lifecycle: '{\"preUpdate\": {\"finalizersHandler\": "
         "[\"%s\"]}, \"postUpdate\": {...same}}'" % FINALIZER)
    note("spec.replicas: 3, container app image %s" % OLD)
    app.create(deployment("web", replicas=3, image=OLD, lifecycle=hooks, sidecar=False))
    say("deployment.apps/web created")
    pods = app.wait_created()
    before = {x["metadata"]["name"]: x["metadata"]["uid"] for x in pods}
    rs_before = [r["metadata"]["name"] for r in app.replicasets()]

    step("The LB controller registers each pod and puts its finalizer on it (this arms both hooks)")
    for x in pods:
        set_finalizer(cluster.lb, app.ns, x["metadata"]["name"], FINALIZER, True)
        say("lb-controller: %s registered, finalizer %s added" % (x["metadata"]["name"], FINALIZER))
    shell("kubectl -n shop get pods -L inplace-webhook.io/state")
    say(pods_table(app.pods()))

    step("Change the image")
    shell("kubectl -n shop set image deploy/web app=%s" % NEW)
    t_change = time.time()
    d, warnings = app.set_image("app", NEW)
    for w in warnings:
        say("Warning: %s" % w)
    say("deployment.apps/web image updated")
    note("the webhook paused the Deployment (spec.paused=%s) and recorded inplace-webhook.io/in-progress, so "
         "the Deployment controller rolls nothing" % str(d["spec"].get("paused")).lower())

    step("Watch the pods (kubectl get pods -L inplace-webhook.io/state -w) and the Events")
    seen_events = {e["metadata"]["name"] for e in app.events()}
    last_key, handled = table_key(app.pods()), {}
    deadline = time.time() + 45
    while True:
        if time.time() > deadline:
            say("the update did not finish in 45 s; the loop's log:\n" + iw.log_tail(30))
            return False
        pods = app.pods()
        key = table_key(pods)
        if key != last_key:
            last_key = key
            say("%s--- t+%.1fs%s" % (DIM, time.time() - T0, RESET))
            say(pods_table(pods))
        for e in app.events():
            if e["metadata"]["name"] not in seen_events:
                seen_events.add(e["metadata"]["name"])
                say(event_line(e))
        now = time.time()
        for x in pods:
            name, st = x["metadata"]["name"], state_of(x)
            armed = FINALIZER in (x["metadata"].get("finalizers") or [])
            if st == "PreparingUpdate" and armed:
                since = handled.setdefault((name, "drain"), now)
                if now - since >= HOLD:
                    set_finalizer(cluster.lb, app.ns, name, FINALIZER, False)
                    say("lb-controller: %s drained from the load balancer, finalizer removed (pre-update hook "
                        "released)" % name)
            if st == "Updated" and not armed:
                since = handled.setdefault((name, "register"), now)
                if now - since >= HOLD:
                    set_finalizer(cluster.lb, app.ns, name, FINALIZER, True)
                    say("lb-controller: %s registered again, finalizer added (post-update hook released)" % name)
        if app.in_place_done() and all(images(x)["app"] == NEW for x in pods):
            break
        time.sleep(0.1)
    cluster.idle()
    time.sleep(0.5)
    for e in app.events():
        if e["metadata"]["name"] not in seen_events:
            seen_events.add(e["metadata"]["name"])
            say(event_line(e))

    step("Done")
    pods = app.pods()
    shell("kubectl -n shop get pods -L inplace-webhook.io/state")
    say(pods_table(pods))
    shell("kubectl -n shop get rs")
    rows = [("NAME", "DESIRED", "CURRENT", "READY", "IMAGE")]
    rss = app.replicasets()
    for r in rss:
        st = r.get("status") or {}
        rows.append((r["metadata"]["name"], r["spec"].get("replicas", 0), st.get("replicas", 0),
                     st.get("readyReplicas", 0), r["spec"]["template"]["spec"]["containers"][0]["image"]))
    say(format_table(rows))
    d = app.deployment()
    problems = []
    if {x["metadata"]["name"]: x["metadata"]["uid"] for x in pods} != before:
        problems.append("the pods are not the same as before")
    if [r["metadata"]["name"] for r in rss] != rs_before:
        problems.append("the ReplicaSets changed")
    if d["spec"].get("paused"):
        problems.append("the Deployment is still paused")
    restarts = "/".join(str(n) for n in sorted({sum(restart_counts(x).values()) for x in pods}))
    summary = (
        "Summary: {old} -> {new} reached all {n} pods in place, in {secs:.0f} s. The pods kept their names and "
        "UIDs, and so their IPs, node and volumes; kubelet restarted only the changed container (RESTARTS "
        "{restarts}). There is still exactly one ReplicaSet, {rs}, now with the new image: no pod was deleted "
        "or recreated and no rolling update ran. The LB controller drained each pod before it was touched "
        "(pre-update hook, state PreparingUpdate) and each went back into service only after it was "
        "registered again (post-update hook, Updated -> Normal), one pod at a time (maxUnavailable 25% of 3 "
        "rounds down to 0, which means one at a time). The webhook paused the Deployment for the update and "
        "the loop unpaused it at the end. A change that cannot be done in place (env, resources, volumes, "
        "...) would have gone through the normal rolling update instead.").format(
            old=OLD, new=NEW, n=len(pods), secs=time.time() - t_change, restarts=restarts, rs=", ".join(rs_before))
    say("")
    say(textwrap.fill(summary, width=110))
    if problems:
        say("BUT: " + "; ".join(problems))
    return not problems


if __name__ == "__main__":
    sys.exit(main())
