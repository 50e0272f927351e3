"""Hardening on the real cluster (DESIGN.md §9.11).

- h09: the product's keys on a Deployment start no write fight: a Deployment that is not opted in but carries
  `inplace-webhook.io/abort` and `inplace-webhook.io/previous-template-hash` (which the Deployment controller copies
  to its ReplicaSet), and an opted-in one that carries `previous-template-hash` itself, get no write from the
  controller's identity over 40 s, and nobody rewrites their ReplicaSets' metadata (the audit log says so).
"""

import json
import time

import test_cluster as tc
from kube import ABORT, ENABLED, annotations_of, check, wait_for

PREVIOUS_HASH = "inplace-webhook.io/previous-template-hash"
QUIET_SECONDS = 40


def unopted(manifest):
    """The manifest without the opt-in label on the Deployment and on its template."""
    manifest["metadata"]["labels"].pop(ENABLED, None)
    manifest["spec"]["template"]["metadata"]["labels"].pop(ENABLED, None)
    return manifest


def h09_product_keys_start_no_write_fight(s):
    """Both Deployments settle; their ReplicaSets carry the copied keys; then for 40 s the audit log shows no write
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


SCENARIOS = [h09_product_keys_start_no_write_fight]
