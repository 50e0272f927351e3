"""Issue 26 on every configuration of the version matrix (tests/cluster/matrix.sh): what the cluster's own
components report about the facts the product depends on, checked against what each release is documented to do
(../shared/research/versions.md, DESIGN.md §8.14), and cpu/memory changed by what the node does: in place where the
API server serves pods/resize and the node's kubelet acts on it, else the native rollout with a warning that says
why (never a wedged update, never a 422 retried until the deadline)."""

import json
import re

import test_cluster as tc
from scenarios_resize import LARGE, expect_reported, resized_deployment, set_resources
from kube import IN_PROGRESS, annotations_of, check, container_statuses, snapshot, wait_for


def minor(version):
    """The minor number of 'v1.33.13'."""
    m = re.match(r"v1\.(\d+)\.", version or "")
    check(m is not None, "not a Kubernetes version: %r" % version)
    return int(m.group(1))


def versions(s):
    """(the API server's version, the node's kubelet version), as the cluster reports them."""
    server = json.loads(s.tools.kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    nodes = s.api.items("/api/v1/nodes")
    check(len(nodes) == 1, "the matrix clusters have one node, not %d" % len(nodes))
    return server, nodes[0]["status"]["nodeInfo"]["kubeletVersion"]


def serves_resize(s):
    resources = json.loads(s.tools.kubectl("get", "--raw", "/api/v1").stdout)["resources"]
    return any(r["name"] == "pods/resize" for r in resources)


def m00_platform_as_documented(s):
    """The facts the product's rules rest on, as this configuration's real components report them: the API server
    serves pods/resize from 1.33 (off by default before); the kubelet reports pod status.observedGeneration from
    1.34 and container resources in its status from 1.33; the chart told the webhook pods the cluster's version;
    the node is inside the skew policy (kubelet at most three minors older, never newer)."""
    server, kubelet = versions(s)
    check(minor(server) - 3 <= minor(kubelet) <= minor(server),
          "kubelet %s outside the skew policy of API server %s" % (kubelet, server))
    check(serves_resize(s) == (minor(server) >= 33), "API server %s: pods/resize served=%s"
          % (server, serves_resize(s)))
    args = s.api.get("/apis/apps/v1/namespaces/%s/deployments/%s" % (tc.RELEASE_NS, tc.RELEASE))[
        "spec"]["template"]["spec"]["containers"][0]["args"]
    check("--pod-resize=" + server in args, "the webhook pods run with %s, the API server is %s"
          % ([a for a in args if a.startswith("--pod-resize")], server))
    app = tc.App(s, "m00")
    pods = app.create(tc.deployment("web", replicas=1))
    p = pods[0]
    observed = (p.get("status") or {}).get("observedGeneration")
    check((observed is not None) == (minor(kubelet) >= 34),
          "kubelet %s: pod status.observedGeneration %r" % (kubelet, observed))
    reports = all("resources" in c for c in container_statuses(p).values())
    check(reports == (minor(kubelet) >= 33), "kubelet %s: container statuses report resources=%s"
          % (kubelet, reports))
    print("  API server %s, kubelet %s: pods/resize %s, pod observedGeneration %s, container resources %s"
          % (server, kubelet, "served" if serves_resize(s) else "not served",
             "reported" if observed is not None else "not reported", "reported" if reports else "not reported"))


def m01_cpu_memory_by_what_the_node_does(s):
    """`kubectl set resources` on an opted-in Deployment. Where the API server serves pods/resize and the node's
    kubelet (1.33+) acts on it: in place (same UIDs, no restart, the kubelet reports the new resources). Where the
    API server does not serve it (1.30-1.32 on default gates): the webhook says so in a warning and the native
    rollout replaces the pods. Where it serves it but the node cannot (a kubelet older than 1.33, which reports no
    container resources: the API server would refuse with 422): the loop hands the change to the native rollout
    before any resize is sent, with a Warning Event that names the node's kubelet, and the Deployment is left as
    the user had it (not paused)."""
    server, kubelet = versions(s)
    app = tc.App(s, "m01")
    before = snapshot(app.create(resized_deployment("web", replicas=2)))
    rs0 = app.rs_names()
    _, warnings = set_resources(app, LARGE)
    if serves_resize(s) and minor(kubelet) >= 33:
        tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
        _, pods = tc.finish(app, before, rs0, restarted=set(), timeout=120)
        for p in pods:
            expect_reported(p, LARGE)
        print("  %s/%s: in place, %d pods kept their UIDs" % (server, kubelet, len(pods)))
        return
    if not serves_resize(s):
        tc.expect_warning(warnings, "in-place resize not possible")
    wait_for(lambda: app.rollout_complete() and IN_PROGRESS not in annotations_of(app.deployment())
             and not app.deployment()["spec"].get("paused")
             and all(p["metadata"]["uid"] != before[p["metadata"]["name"]]["uid"] if p["metadata"]["name"] in before
                     else True for p in app.pods())
             and not set(before) & {p["metadata"]["name"] for p in app.pods()},
             150, "the native rollout to replace every pod", app)
    for p in app.pods():
        check(p["spec"]["containers"][0]["resources"] == LARGE, "pod spec resources: %s"
              % p["spec"]["containers"][0]["resources"])
    if serves_resize(s):
        # The webhook could not know the node: the loop must have said why it handed the change over.
        evs = [e for e in app.events() if e.get("type") == "Warning" and e["involvedObject"].get("kind") == "Deployment"]
        check(any("resize" in (e.get("message") or "") for e in evs),
              "no Warning Event on the Deployment says why cpu/memory was not changed in place: %s"
              % [(e.get("reason"), e.get("message")) for e in evs])
        refused = s.audit.writes(0, user=tc.CONTROLLER_USER, ns="m01", resource="pods", subresource="resize")
        check(not refused, "the loop sent %d pods/resize writes to a node that cannot resize" % len(refused))
    print("  %s/%s: native rollout, %d new pods" % (server, kubelet, len(app.pods())))


SCENARIOS = [m00_platform_as_documented, m01_cpu_memory_by_what_the_node_does]
