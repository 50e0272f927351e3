"""Issue 13, items 3 and 6 on the real cluster: one loop at a time even when the leader's API server hangs
(DESIGN.md §9.3), and a loop with the wrong identity refuses to run instead of wedging Deployments (§9.6).

Both run the product binary on the host (as c13 does), as the chart's ServiceAccount (a token from the
TokenRequest API), while the chart's webhook pods serve admission and its controller Deployment is scaled to 0."""

import os
import select
import subprocess
import time
import urllib.error
import urllib.request

import test_cluster as tc
from fault_proxy import FaultProxy
from kube import check, openssl_cert, rfc3339_micro, snapshot, wait_for
from webhook_process import free_port

CONTROLLER = tc.RELEASE + "-controller"  # the chart's loop Deployment (--role=controller, DESIGN.md §9.4)


def chart_loop_off(s):
    """Scales the chart's controller Deployment to 0 (its webhook pods keep serving admission with the
    certificates they have) and waits until its pods are gone and the Lease is free or stale."""
    s.tools.kubectl("scale", "deployment", CONTROLLER, "-n", tc.RELEASE_NS, "--replicas=0")
    wait_for(lambda: not s.controller_pods(), 90, "the chart's controller pods to go")


def chart_loop_on(s):
    s.tools.kubectl("scale", "deployment", CONTROLLER, "-n", tc.RELEASE_NS, "--replicas=2")
    s.install(upgrade=True)


class HangingProxy(FaultProxy):
    """The fault proxy that can hang: while `hang_for` is set, every new request (watches included) is held
    that long before it is forwarded, as an API server that stops answering and later recovers. A request whose
    client closed the connection meanwhile is dropped, as the API server cancels the request of a client that
    went away; one still waited for is forwarded late and lands. Streams already open keep flowing."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.hang_for = None
        self.dropped = []  # (method, target) of held requests whose client gave up
        self.late = []     # (method, target) of held requests forwarded after the hold

    def _forward(self, conn, method, target, headers, body):
        hold = self.hang_for
        if hold:
            end = time.time() + hold
            while time.time() < end:
                # The client sends nothing more while it waits for this answer: readable means closed.
                r, _, _ = select.select([conn], [], [], 0.05)
                if r:
                    with self.lock:
                        self.dropped.append((method, target))
                    return 0
            with self.lock:
                self.late.append((method, target))
        return super()._forward(conn, method, target, headers, body)


def chart_token(s, workdir):
    token = os.path.join(workdir, "token")
    with open(token, "w") as f:
        f.write(s.tools.kubectl("create", "token", tc.RELEASE, "-n", tc.RELEASE_NS, "--duration=1h").stdout.strip())
    return token


def start_loop(s, workdir, identity, api_server, token, extra=(), env=None):
    """The binary on the host with its loop on, electing on the chart's Lease; returns (process, log path,
    probe port)."""
    probe = free_port()
    log_path = os.path.join(workdir, identity + ".log")
    log = open(log_path, "w")
    p = subprocess.Popen([s.binary, "serve", "--bind-address", "127.0.0.1", "--port", str(free_port()),
                          "--probe-port", str(probe),
                          "--tls-cert-file", os.path.join(s.certs, "tls.crt"),
                          "--tls-private-key-file", os.path.join(s.certs, "tls.key"),
                          "--api-server", api_server, "--token-file", token,
                          "--certificate-authority", os.path.join(s.env.pki, "ca.crt"),
                          "--controller-user", "system:serviceaccount:%s:%s" % (tc.RELEASE_NS, tc.RELEASE),
                          "--leader-elect=true", "--leader-election-namespace", tc.RELEASE_NS,
                          "--loop-resync-period-ms=2000", "--log-format", "text", *extra],
                         stdout=log, stderr=subprocess.STDOUT,
                         env=dict(os.environ, POD_NAME=identity, **(env or {})))
    log.close()
    return p, log_path, probe


def stop(p):
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()


def by_agent(entries, identity):
    """Audit entries whose User-Agent names `identity` (main.cpp: "inplace-webhook/VERSION (IDENTITY)")."""
    return [e for e in entries if ("(%s)" % identity) in (e.get("userAgent") or "")]


def describe(entries):
    return "\n".join("  %s %s %s/%s %s -> %s" % (e.get("requestReceivedTimestamp"), e.get("verb"),
                                                (e.get("objectRef") or {}).get("resource"),
                                                (e.get("objectRef") or {}).get("name"),
                                                (e.get("objectRef") or {}).get("subresource", ""),
                                                (e.get("responseStatus") or {}).get("code"))
                     for e in entries)


def h03_hung_leader_never_writes_after_takeover(s):
    """The leader's API server hangs mid-update (every new request held 25 s, then forwarded if its client still
    waits): the leader stops writing before its Lease can be taken, the other replica takes over and finishes the
    update, and the audit log shows no write from the old leader's identity once the new one holds the Lease —
    neither its renewals nor the loop's pod/Deployment writes, which its deadlines cut and the proxy then drops."""
    check(s.binary, "--binary is needed for this scenario")
    chart_loop_off(s)
    workdir = os.path.join(s.env.run, "h03")
    os.makedirs(workdir, exist_ok=True)
    token = chart_token(s, workdir)
    crt, key = openssl_cert(workdir, "proxy", "hanging-proxy", san="IP:127.0.0.1",
                            ca=(os.path.join(s.env.pki, "ca.crt"), os.path.join(s.env.pki, "ca.key")))
    proxy = HangingProxy(s.env.server, os.path.join(s.env.pki, "ca.crt"), crt, key).start()
    a = b = None
    try:
        # The chart's loop is off; whoever held the Lease released it (or it expires).
        a, a_log, _ = start_loop(s, workdir, "h03-a", "https://127.0.0.1:%d" % proxy.port, token)
        wait_for(lambda: s.lease_identity() == "h03-a", 60, "h03-a to lead")
        b, b_log, _ = start_loop(s, workdir, "h03-b", s.env.server, token)
        app = tc.App(s, "h03")
        before = snapshot(app.create(tc.deployment("web", replicas=4)))
        rs0 = app.rs_names()
        since = time.time() - 1
        app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        # The leader is under way: it has written to a pod of the Deployment.
        wait_for(lambda: by_agent(s.audit.writes(since, ns="h03", resource="pods"), "h03-a"), 60,
                 "h03-a to write a pod of h03/web")
        proxy.hang_for = 25
        hung_at = time.time()
        wait_for(lambda: s.lease_identity() == "h03-b", 60, "h03-b to take the Lease over")
        took_over = time.time()
        tc.finish(app, before, rs0, restarted={"app"}, timeout=180)
        # Let every held request run out its hold: a late one would land now.
        wait_for(lambda: time.time() > took_over + 27, 40, "the proxy's holds to run out")
        proxy.hang_for = None
        writes = s.audit.writes(since - 60)
        b_lease = [e for e in by_agent(writes, "h03-b")
                   if (e.get("objectRef") or {}).get("resource") == "leases"
                   and ((e.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") == "h03-b"
                   and (e.get("responseStatus") or {}).get("code", 0) < 300]
        check(b_lease, "no Lease write by h03-b in the audit log")
        b_leads_at = min(e["_time"] for e in b_lease)
        a_writes = by_agent(writes, "h03-a")
        a_after = [e for e in a_writes if rfc3339_micro(e.get("stageTimestamp", "")) >= b_leads_at]
        print("    hang at +0.0 s; h03-b took the Lease at +%.1f s (audit: +%.1f s); h03-a wrote %d times, last at "
              "+%.1f s; held requests of h03-a: %d dropped (client gone), %d forwarded late"
              % (took_over - hung_at, b_leads_at - hung_at, len(a_writes),
                 max(rfc3339_micro(e.get("stageTimestamp", "")) for e in a_writes) - hung_at,
                 len(proxy.dropped), len(proxy.late)))
        check(not a_after, "writes by h03-a after h03-b took the Lease:\n" + describe(a_after))
        check(proxy.dropped, "h03-a sent nothing during the hang (the scenario did not exercise the deadlines)")
        # Reads and watches held that long may still be waited for (they land no write); no write may.
        late_writes = [(m, t) for m, t in proxy.late if m != "GET"]
        check(not late_writes, "writes of h03-a still waited for after 25 s: %s" % late_writes[:5])
        with open(a_log) as f:
            text = f.read()
        check("lost the lease, stopping the loop" in text, "h03-a never stepped down: see %s" % a_log)
        check(a.poll() is None and b.poll() is None, "a loop exited: see %s and %s" % (a_log, b_log))
        # A leader that stops releases the Lease only after its loop stopped: h03-b's last write (the release,
        # which empties the holder) comes after every other write of h03-b.
        stop(b)

        def released():
            return [e for e in by_agent(s.audit.writes(since - 60), "h03-b")
                    if (e.get("objectRef") or {}).get("resource") == "leases"
                    and ((e.get("requestObject") or {}).get("spec") or {}).get("holderIdentity") == ""]
        wait_for(released, 20, "h03-b to release the Lease on SIGTERM (in the audit log)")
        release = released()
        b_writes = by_agent(s.audit.writes(since - 60), "h03-b")
        check(max(e["_time"] for e in b_writes) == release[-1]["_time"],
              "h03-b wrote after releasing the Lease:\n" + describe(b_writes[-5:]))
    finally:
        for p in (a, b):
            if p is not None:
                stop(p)
        proxy.stop()
        chart_loop_on(s)


def h06_wrong_identity_refuses_to_run(s):
    """A loop whose credentials authenticate as someone other than --controller-user (here the chart's
    ServiceAccount while --controller-user names another) refuses to run: /readyz answers 503 with the reason,
    the log and a Warning Event (reason WrongControllerIdentity) say it, it never takes the Lease, and it writes
    nothing; the update it would have wedged (its unpause re-paused) is done by the right loop and the
    Deployment ends unpaused. A loop with the right identity, started the same way, runs."""
    check(s.binary, "--binary is needed for this scenario")
    chart_loop_off(s)
    workdir = os.path.join(s.env.run, "h06")
    os.makedirs(workdir, exist_ok=True)
    token = chart_token(s, workdir)
    app = tc.App(s, "h06")
    app.setup_namespace()
    wrong = good = None
    try:
        since = time.time() - 1
        wrong, wrong_log, probe = start_loop(
            s, workdir, "h06-wrong", s.env.server, token,
            extra=["--controller-user=system:serviceaccount:%s:someone-else" % tc.RELEASE_NS],
            env={"POD_NAMESPACE": "h06"})

        def readyz():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % probe, timeout=2) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
            except OSError:
                return None, ""
        wait_for(lambda: readyz()[0] == 503 and "someone-else" in readyz()[1], 30,
                 "/readyz of the wrong-identity loop to fail naming the identities")
        code, text = readyz()
        print("    /readyz: %d %s" % (code, text[:160]))
        check("system:serviceaccount:%s:%s" % (tc.RELEASE_NS, tc.RELEASE) in text, "/readyz does not name the "
              "identity the API server reported: %s" % text)
        wait_for(lambda: app.events_with("WrongControllerIdentity"), 30, "the WrongControllerIdentity Event")
        with open(wrong_log) as f:
            check("wrong identity" in f.read(), "the log does not say it: see %s" % wrong_log)
        # An update while only the wrong loop is up: it does not take the Lease and writes nothing.
        before = snapshot(app.create(tc.deployment("web", replicas=2)))
        rs0 = app.rs_names()
        app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
        time_waited = time.time()
        wait_for(lambda: time.time() > time_waited + 8, 20, "8 s with the wrong loop alone")
        check(s.lease_identity() in (None, "") or not s.lease_identity().startswith("h06-wrong"),
              "the wrong-identity loop holds the Lease: %s" % s.lease_identity())
        check(not by_agent(s.audit.writes(since), "h06-wrong"),
              "the wrong-identity loop wrote:\n" + describe(by_agent(s.audit.writes(since), "h06-wrong")))
        # The right loop finishes the update; nothing stays paused.
        good, good_log, good_probe = start_loop(s, workdir, "h06-good", s.env.server, token)
        tc.finish(app, before, rs0, restarted={"app"}, timeout=120)
        check(not app.deployment()["spec"].get("paused"), "the Deployment was left paused")
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % good_probe, timeout=2) as r:
            check(r.status == 200, "the right loop is not ready")
        check(not by_agent(s.audit.writes(since), "h06-wrong"), "the wrong-identity loop wrote")
        check(wrong.poll() is None, "the wrong-identity process exited instead of staying unready")
    finally:
        for p in (wrong, good):
            if p is not None:
                stop(p)
        chart_loop_on(s)


SCENARIOS = [h03_hung_leader_never_writes_after_takeover, h06_wrong_identity_refuses_to_run]
