"""Hardening on the real cluster (DESIGN.md §9.11).

- h09: the product's keys on a Deployment start no write fight: a Deployment that is not opted in but carries
  `inplace-webhook.io/abort` and `inplace-webhook.io/previous-template-hash` (which the Deployment controller copies
  to its ReplicaSet), and an opted-in one that carries `previous-template-hash` itself, get no write from the
  controller's identity over 60 s, and nobody rewrites their ReplicaSets' metadata (the audit log says so).
- h11: pod state cannot be forged (DESIGN.md §4.2): a user's `kubectl annotate pod` adding
  `inplace-webhook.io/hook-timeout` is refused; an opted-in pod created by a user with `state: Updated`,
  `update-state` and `hook-timeout` starts Normal without them and the user is warned; a pod not opted in created
  with a state of ours is refused by the chart's policy (the pod webhook never sees it); a Deployment whose
  template carries `update-state` is refused; the loop's own pod writes are not sent to the pod validator (the
  API server counts them as excluded by its matchCondition).
"""

import json
import time

import test_cluster as tc
from kube import ABORT, ENABLED, GATE_SENT, annotations_of, check, metric_samples, snapshot, wait_for

PREVIOUS_HASH = "inplace-webhook.io/previous-template-hash"
QUIET_SECONDS = 60


def unopted(manifest):
    """The manifest without the opt-in label on the Deployment and on its template."""
    manifest["metadata"]["labels"].pop(ENABLED, None)
    manifest["spec"]["template"]["metadata"]["labels"].pop(ENABLED, None)
    return manifest


def h09_product_keys_start_no_write_fight(s):
    """Both Deployments settle; their ReplicaSets carry the copied keys; then for 60 s the audit log shows no write
    by the controller's identity in the namespace and no metadata write to any ReplicaSet there."""
    foreign = tc.App(s, "h09", "foreign")
    foreign.setup_namespace()
    own = tc.App(s, "h09", "web")
    d1 = unopted(tc.deployment("foreign", replicas=1))
    d1["metadata"]["annotations"].update({ABORT: "true", PREVIOUS_HASH: "abc"})
    d2 = tc.deployment("web", replicas=1)
    d2["metadata"]["annotations"][PREVIOUS_HASH] = "abc"
    for app, d in ((foreign, d1), (own, d2)):
        app.kubectl("apply", "-f", "-", stdin=json.dumps(d))
    for app in (foreign, own):
        wait_for(app.rollout_complete, 90, "the initial rollout of h09/%s" % app.name, app)
        # The Deployment controller copies the Deployment's annotations to its ReplicaSet.
        wait_for(lambda: all(annotations_of(rs).get(PREVIOUS_HASH) == "abc" for rs in app.replicasets()), 30,
                 "the controller's copy of previous-template-hash on h09/%s's ReplicaSet" % app.name, app)
    time.sleep(tc.SETTLE)
    t0 = time.time()
    time.sleep(QUIET_SECONDS)
    ours = s.audit.writes(t0, user=tc.CONTROLLER_USER, ns="h09")
    rs_meta = [e for e in s.audit.writes(t0, ns="h09", resource="replicasets")
               if (e.get("objectRef") or {}).get("subresource", "") == ""]
    print("h09: in %d s, %d writes by the controller's identity in h09, %d metadata writes to its ReplicaSets"
          % (QUIET_SECONDS, len(ours), len(rs_meta)))
    check(not ours, "the controller wrote in h09:\n%s" % "\n".join(
        "%s %s %s" % (e.get("verb"), (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("name"))
        for e in ours[:20]))
    check(not rs_meta, "ReplicaSets of h09 were rewritten %d times (a write fight):\n%s" % (len(rs_meta), "\n".join(
        "%s %s by %s" % (e.get("verb"), (e.get("objectRef") or {}).get("name"), (e.get("user") or {}).get("username"))
        for e in rs_meta[:20])))
    for app in (foreign, own):
        check(all(annotations_of(rs).get(PREVIOUS_HASH) == "abc" for rs in app.replicasets()),
              "h09/%s: the ReplicaSet lost the Deployment's own previous-template-hash" % app.name)
    foreign.s.tools.kubectl("delete", "namespace", "h09", "--wait=false")




HOOK_TIMEOUT = "inplace-webhook.io/hook-timeout"
STATE = "inplace-webhook.io/state"
UPDATE_STATE = "inplace-webhook.io/update-state"


def h11_pod_state_cannot_be_forged(s):
    """Each way a user could give a pod a state of ours, on the real API server with the chart's webhooks and
    policies: refused, or dropped with a warning; what the live objects carry is read back."""
    app = tc.App(s, "h11", "web")
    app.setup_namespace()
    app.kubectl("apply", "-f", "-", stdin=json.dumps(tc.deployment("web", replicas=1)))
    wait_for(app.rollout_complete, 90, "the initial rollout of h11/web", app)
    pod = app.pods()[0]["metadata"]["name"]

    # 1. A running pod: adding hook-timeout is refused (the policy, and the pod validator behind it).
    args = ("annotate", "pod/" + pod, HOOK_TIMEOUT + "=Updating@forged")
    p = s.tools.kubectl(*(list(args) + ["-n", app.ns]), user="alice", check_rc=False)
    print("  h11: kubectl %s -> rc %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()[:300]), flush=True)
    check(p.returncode != 0 and HOOK_TIMEOUT in p.stderr and "controller" in p.stderr,
          "kubectl %s was not refused: rc %d %s" % (" ".join(args), p.returncode, p.stderr))
    live_pod = [x for x in app.pods() if x["metadata"]["name"] == pod][0]
    check(HOOK_TIMEOUT not in annotations_of(live_pod), "the forged hook-timeout is on the pod")
    #    So is a gate-sent time (moved earlier, it would shorten a drain).
    args = ("annotate", "pod/" + pod, GATE_SENT + "=2020-01-01T00:00:00.000Z")
    p = s.tools.kubectl(*(list(args) + ["-n", app.ns]), user="alice", check_rc=False)
    print("  h11: kubectl %s -> rc %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()[:300]), flush=True)
    check(p.returncode != 0 and GATE_SENT in p.stderr and "controller" in p.stderr,
          "kubectl %s was not refused: rc %d %s" % (" ".join(args), p.returncode, p.stderr))

    # 2. An opted-in pod created with a state of ours: it starts Normal, the keys are dropped, the user warned.
    forged = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "forged", "labels": {"app": "forged", ENABLED: "true", STATE: "Updated"},
                           "annotations": {UPDATE_STATE: '{"revision":"x"}', HOOK_TIMEOUT: "preUpdate@x",
                                           "team": "kept"}},
              "spec": {"containers": [{"name": "app", "image": tc.HOLDER}]}}
    _, warnings = app.kubectl("create", "-f", "-", stdin=json.dumps(forged))
    print("  h11: created an opted-in pod with a forged state; warnings: %s" % warnings, flush=True)
    check(any("dropped inplace-webhook.io/ state, update-state, hook-timeout" in w for w in warnings),
          "no warning named the dropped keys: %s" % warnings)
    live_forged = s.api.get(tc.ns_path(app.ns, "pods", "forged"))
    labels, anns = live_forged["metadata"].get("labels") or {}, annotations_of(live_forged)
    check(labels.get(STATE) == "Normal", "the pod was stored with state %r" % labels.get(STATE))
    check(UPDATE_STATE not in anns and HOOK_TIMEOUT not in anns and anns.get("team") == "kept",
          "the stored pod's annotations: %s" % anns)

    # 3. A pod the webhook does not see (not opted in) with a state of ours: the chart's policy refuses it.
    unseen = json.loads(json.dumps(forged))
    unseen["metadata"]["name"] = "unseen"
    unseen["metadata"]["labels"].pop(ENABLED)
    p = s.tools.kubectl("create", "-f", "-", "-n", app.ns, user="alice", stdin=json.dumps(unseen), check_rc=False)
    print("  h11: a pod not opted in with a forged state -> rc %d: %s" % (p.returncode, p.stderr.strip()[:300]),
          flush=True)
    check(p.returncode != 0 and "inplace-webhook-pod-state" in p.stderr,
          "the pod not opted in was not refused by the policy: rc %d %s" % (p.returncode, p.stderr))
    plain = json.loads(json.dumps(unseen))
    plain["metadata"]["labels"][STATE] = "Normal"
    plain["metadata"]["annotations"] = {"team": "kept"}
    app.kubectl("create", "-f", "-", stdin=json.dumps(plain))  # state Normal alone is allowed

    # 4. A Deployment whose template would give its pods update-state: refused by the Deployment validator.
    d = tc.deployment("tmpl", replicas=1)
    d["spec"]["template"]["metadata"].setdefault("annotations", {})[UPDATE_STATE] = "{}"
    p = s.tools.kubectl("apply", "-f", "-", "-n", app.ns, user="alice", stdin=json.dumps(d), check_rc=False)
    print("  h11: a template carrying update-state -> rc %d: %s" % (p.returncode, p.stderr.strip()[:300]),
          flush=True)
    check(p.returncode != 0 and "the pod template carries " + UPDATE_STATE in p.stderr,
          "the Deployment was not refused: rc %d %s" % (p.returncode, p.stderr))

    # 5. The loop's own pod writes are not sent to the pod validator (the chart's matchCondition): updating web in
    #    place raises the API server's count of the requests that condition kept from the webhook, by at least its
    #    one pod write (other scenarios' updates may add theirs; without the condition the count never moves).
    skipped = pod_validator_exclusions(s)
    before, rs0 = snapshot(app.pods()), app.rs_names()
    app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.finish(app, before, rs0, restarted={"app"})
    n = pod_validator_exclusions(s) - skipped
    print("  h11: %d pod updated in place; the API server left the pod validator out of %d pod UPDATEs meanwhile"
          % (len(before), n), flush=True)
    check(n >= len(before), "the pod validator's matchCondition excluded %d requests during the update of %d pods"
          % (n, len(before)))
    s.tools.kubectl("delete", "namespace", "h11", "--wait=false")


def pod_validator_exclusions(s):
    """kube-apiserver's count of pod UPDATEs that the pod validator's matchConditions kept from it."""
    text = s.tools.kubectl("get", "--raw", "/metrics").stdout
    return sum(v for labels, v in metric_samples(text, "apiserver_admission_match_condition_exclusions_total")
               if labels.get("name") == "validate-pods.inplace-webhook.io" and labels.get("operation") == "UPDATE")


SCENARIOS = [h09_product_keys_start_no_write_fight, h11_pod_state_cannot_be_forged]
