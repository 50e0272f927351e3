"""Issue 13, items 4 and 5 on the real cluster: the webhook pods hold no credentials (a token-free --role=webhook
Deployment, the loop in its own --role=controller Deployment without a webhook port, a NetworkPolicy for the webhook
pods), and the chart's ValidatingAdmissionPolicy limits the controller's identity to the writes the loop makes
(DESIGN.md §9.4, §9.5)."""

import copy
import json
import subprocess

import test_cluster as tc
from kube import check, container_statuses, is_ready, ns_path, wait_for

SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
POLICY = "inplace-webhook policy:"


def token_volumes(pod):
    return [v["name"] for v in pod["spec"].get("volumes") or []
            if any("serviceAccountToken" in (src or {}) for src in (v.get("projected") or {}).get("sources") or [])]


def runtime_mounts(s, pod, container):
    """The mount destinations containerd gave the container (its OCI spec), as the runtime reports them."""
    cid = container_statuses(pod)[container]["containerID"].split("://", 1)[1]
    info = json.loads(s.tools.ctr("containers", "info", cid))
    return [m.get("destination") for m in (info.get("Spec") or info.get("spec") or {}).get("mounts") or []]


def apiserver_sources(s, pod_ip, port):
    """Local addresses of the node's connections to pod_ip:port (the API server runs in the node's network
    namespace): the address the webhook pods see the API server's calls come from."""
    p = subprocess.run(["nsenter", "--net=/run/netns/inplace-cluster", "ss", "-Htn", "dst", "%s:%d" % (pod_ip, port)],
                       capture_output=True, text=True, timeout=20)
    return sorted({line.split()[3].rsplit(":", 1)[0] for line in p.stdout.splitlines() if len(line.split()) >= 4})


def h04_webhook_holds_no_token(s):
    """The webhook pods (--role=webhook) run with no service-account token: no token volume in the pod, nothing
    mounted at the token path in the container containerd runs, and they still answer every admission review (an
    opted-in Deployment updates in place). The controller pods have the token and no webhook port: the API
    server's proxy to their port 8443 is refused. The chart's NetworkPolicy is accepted by the API server and
    selects exactly the webhook pods; the address the API server calls them from is the one README names."""
    webhooks, controllers = s.webhook_pods(), s.controller_pods()
    check(len(webhooks) == 2 and len(controllers) == 2, "pods: %d webhook, %d controller" % (len(webhooks), len(controllers)))
    for p in webhooks:
        name = p["metadata"]["name"]
        check(p["spec"].get("automountServiceAccountToken") is False and not token_volumes(p),
              "webhook pod %s: automount %s, token volumes %s" % (name, p["spec"].get("automountServiceAccountToken"),
                                                                 token_volumes(p)))
        mounts = runtime_mounts(s, p, "webhook")
        check(mounts and not any(m.startswith(SA_PATH) for m in mounts),
              "webhook pod %s: containerd mounts %s" % (name, mounts))
        check(p["spec"]["serviceAccountName"] != tc.RELEASE, "webhook pod %s runs as the controller's ServiceAccount" % name)
    for p in controllers:
        name = p["metadata"]["name"]
        check(token_volumes(p) and any(m.startswith(SA_PATH) for m in runtime_mounts(s, p, "controller")),
              "controller pod %s has no token (the loop needs it)" % name)
        ports = [cp["containerPort"] for c in p["spec"]["containers"] for cp in c.get("ports") or []]
        check(ports == [8080], "controller pod %s declares ports %s" % (name, ports))
        r = s.tools.kubectl("get", "--raw", "/api/v1/namespaces/%s/pods/https:%s:8443/proxy/" % (tc.RELEASE_NS, name),
                            check_rc=False)
        check(r.returncode != 0 and "refused" in r.stderr + r.stdout,
              "controller pod %s answers on 8443: rc %d %s" % (name, r.returncode, (r.stderr + r.stdout)[:300]))
    # The token-free webhook still serves: an opted-in Deployment is updated in place (mutating and validating).
    app = tc.App(s, "h04")
    before = tc.snapshot(app.create(tc.deployment("web", replicas=2)))
    rs0 = app.rs_names()
    _, warnings = app.kubectl("set", "image", "deploy/web", "app=" + tc.V2)
    tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
    tc.finish(app, before, rs0, restarted={"app"})
    # Where the API server's calls come from (for networkPolicy.webhookFrom): the node's address on the pod bridge.
    sources = set()
    for p in webhooks:
        sources |= set(apiserver_sources(s, p["status"]["podIP"], 8443))
    print("    API server -> webhook pods from %s" % sorted(sources))
    check(sources == {"10.244.0.1"}, "the API server's source addresses: %s (README says 10.244.0.1)" % sorted(sources))
    # The NetworkPolicy: stored by the API server (its validation), selecting exactly the webhook pods.
    np = s.api.get(ns_path(tc.RELEASE_NS, "networkpolicies", tc.RELEASE, group="networking.k8s.io/v1"))
    sel = ",".join("%s=%s" % kv for kv in sorted(np["spec"]["podSelector"]["matchLabels"].items()))
    selected = {p["metadata"]["name"] for p in tc.live(s.api.items(ns_path(tc.RELEASE_NS, "pods"), labelSelector=sel))}
    check(selected == {p["metadata"]["name"] for p in s.webhook_pods()},
          "the NetworkPolicy selects %s, the webhook pods are %s" % (sorted(selected),
                                                                    sorted(p["metadata"]["name"] for p in s.webhook_pods())))
    ports = [pp["port"] for rule in np["spec"]["ingress"] for pp in rule.get("ports") or []]
    check(ports == ["https", "probes"] and np["spec"]["policyTypes"] == ["Ingress"], "NetworkPolicy rules: %s" % np["spec"])
    # A restricted webhookFrom renders to a policy the API server accepts (server-side dry run of the chart's object).
    restricted = copy.deepcopy(np)
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        restricted["metadata"].pop(k, None)
    restricted["spec"]["ingress"][0]["from"] = [{"ipBlock": {"cidr": "10.244.0.1/32"}}]
    s.tools.kubectl("replace", "--dry-run=server", "-f", "-", stdin=json.dumps(restricted))


def as_controller(s, *args, stdin=None):
    return s.tools.kubectl(*(list(args) + ["--as=" + tc.CONTROLLER_USER, "--dry-run=server"]), stdin=stdin,
                           check_rc=False)


def h05_policy_limits_the_controller(s):
    """The controller's ServiceAccount (impersonated with kubectl --as, server-side dry runs): every write the
    loop makes is allowed, and each write RBAC would let it make but the loop never makes is refused by the
    chart's ValidatingAdmissionPolicy, whose message names it: pods of a Deployment that is not opted in, pod
    labels/annotations outside an update step, pod spec fields, other pod conditions, a Deployment's scale, a
    ReplicaSet with replicas or its deletion, another Lease, Events on other kinds; and a write RBAC grants by
    mistake (a ConfigMap) is refused as one the controller never makes. The Lease rule names its Lease."""
    app = tc.App(s, "h05")
    app.create(tc.deployment("web", replicas=1))
    plain = tc.deployment("plain", replicas=1)
    plain["metadata"]["labels"].pop(tc.ENABLED)
    plain["spec"]["template"]["metadata"]["labels"].pop(tc.ENABLED)
    app.kubectl("apply", "-f", "-", stdin=json.dumps(plain))
    plain_app = tc.App(s, "h05", name="plain")
    wait_for(plain_app.rollout_complete, 60, "the plain Deployment", plain_app)
    pod = app.pods()[0]
    name, other = pod["metadata"]["name"], plain_app.pods()[0]["metadata"]["name"]
    rs = app.replicasets()[0]
    ns = ["-n", app.ns]
    rs_copy = copy.deepcopy(rs)
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        rs_copy["metadata"].pop(k, None)
    rs_copy.pop("status", None)
    rs_copy["metadata"]["name"] = rs["metadata"]["name"] + "-x"
    history = copy.deepcopy(rs_copy)
    history["spec"]["replicas"] = 0
    lease = s.api.get(ns_path(tc.RELEASE_NS, "leases", "inplace-webhook", group="coordination.k8s.io/v1"))
    other_lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "someone-else", "namespace": tc.RELEASE_NS}, "spec": {}}

    def event(kind, obj_name):
        return json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "h05-", "namespace": app.ns},
                           "involvedObject": {"kind": kind, "name": obj_name, "namespace": app.ns},
                           "reason": "Test", "message": "h05", "type": "Normal"})
    step = json.dumps({"metadata": {"labels": {"version": "v2"}, "annotations": {
        "inplace-webhook.io/update-state": json.dumps({"revision": "h05"})}},
        "spec": {"containers": [{"name": "app", "image": tc.V2}]}})
    allowed = [
        ("pod update step (image, template label, update-state)", ("patch", "pod", name, "-p", step) + tuple(ns), None),
        ("pod state label", ("label", "pod", name, "--overwrite", "inplace-webhook.io/state=Updating") + tuple(ns), None),
        ("pod readiness-gate condition", ("patch", "pod", name, "--subresource=status", "-p", tc.GATE_TRUE) + tuple(ns), None),
        ("Deployment pause + in-progress", ("patch", "deploy", "web", "-p", json.dumps(
            {"spec": {"paused": True}, "metadata": {"annotations": {"inplace-webhook.io/note": "h05"}}})) + tuple(ns), None),
        ("Deployment progress condition", ("patch", "deploy", "web", "--subresource=status", "-p", json.dumps(
            {"status": {"conditions": [{"type": "inplace-webhook.io/Progressing", "status": "True",
                                        "reason": "H05", "message": "h05"}]}})) + tuple(ns), None),
        ("zero-replica history ReplicaSet", ("create", "-f", "-") + tuple(ns), json.dumps(history)),
        ("ReplicaSet annotation", ("annotate", "rs", rs["metadata"]["name"], "deployment.kubernetes.io/revision-x=1")
         + tuple(ns), None),
        ("its Lease", ("replace", "-f", "-"), json.dumps(lease)),
        ("Event on a pod", ("create", "-f", "-"), event("Pod", name)),
    ]
    forbidden = [
        ("a pod of a Deployment not opted in", ("label", "pod", other, "x=y") + tuple(ns), None,
         "is not of an opted-in Deployment"),
        ("a foreign pod annotation", ("annotate", "pod", name, "example.com/x=y") + tuple(ns), None,
         "change only in an update step"),
        ("a foreign pod label", ("label", "pod", name, "team=other") + tuple(ns), None, "change only in an update step"),
        ("pod-template-hash", ("label", "pod", name, "--overwrite", "pod-template-hash=other") + tuple(ns), None,
         "pod-template-hash"),
        ("pod activeDeadlineSeconds", ("patch", "pod", name, "-p", '{"spec":{"activeDeadlineSeconds":60}}') + tuple(ns),
         None, "spec changes only in its container images"),
        ("pod Ready condition", ("patch", "pod", name, "--subresource=status", "-p",
                                 '{"status":{"conditions":[{"type":"Ready","status":"False"}]}}') + tuple(ns), None,
         "only its readiness-gate condition"),
        ("Deployment replicas", ("patch", "deploy", "web", "-p", '{"spec":{"replicas":5}}') + tuple(ns), None,
         "changes only spec.paused"),
        ("foreign Deployment annotation", ("annotate", "deploy", "web", "example.com/x=y") + tuple(ns), None,
         "changes only spec.paused"),
        ("Deployment status replicas", ("patch", "deploy", "web", "--subresource=status", "-p",
                                        '{"status":{"availableReplicas":7}}') + tuple(ns), None,
         "only the Progressing conditions"),
        ("a ReplicaSet with replicas", ("create", "-f", "-") + tuple(ns), json.dumps(rs_copy),
         "creates only zero-replica ReplicaSets"),
        ("scaling a ReplicaSet", ("patch", "rs", rs["metadata"]["name"], "-p", '{"spec":{"replicas":3}}') + tuple(ns),
         None, "changes only the template and annotations"),
        ("deleting the active ReplicaSet", ("delete", "rs", rs["metadata"]["name"]) + tuple(ns), None,
         "deletes only zero-replica ReplicaSets"),
        ("another Lease", ("create", "-f", "-"), json.dumps(other_lease), "the only Lease of the controller"),
        ("an Event on a Secret", ("create", "-f", "-"), event("Secret", "x"), "Events on Deployments, ReplicaSets"),
    ]
    wrong = []
    for what, args, stdin in allowed:
        r = as_controller(s, *args, stdin=stdin)
        if r.returncode != 0:
            wrong.append("allowed write refused: %s: %s" % (what, r.stderr.strip()[:400]))
    for what, args, stdin, message in forbidden:
        r = as_controller(s, *args, stdin=stdin)
        if r.returncode == 0 or POLICY not in r.stderr or message not in r.stderr:
            wrong.append("forbidden write not refused by the policy: %s: rc %d %s" % (what, r.returncode,
                                                                                    r.stderr.strip()[:400]))
    # A write RBAC grants by mistake is still refused: the policy lists the writes the loop makes.
    s.tools.kubectl("create", "role", "h05-mistake", "--verb=create", "--resource=configmaps", *ns)
    s.tools.kubectl("create", "rolebinding", "h05-mistake", "--role=h05-mistake",
                    "--serviceaccount=%s:%s" % (tc.RELEASE_NS, tc.RELEASE), *ns)
    r = wait_for(lambda: (lambda r: r if "RBAC" not in r.stderr and "forbidden: User" not in r.stderr else None)(
        as_controller(s, "create", "configmap", "x", *ns)), 10, "the extra binding to take effect")
    if r.returncode == 0 or "never makes this write: /configmaps CREATE" not in r.stderr:
        wrong.append("a ConfigMap create (granted by mistake) was not refused by the policy: %s" % r.stderr.strip())
    s.tools.kubectl("delete", "rolebinding,role", "h05-mistake", *ns)
    # The Lease rule names its Lease: RBAC itself refuses any other Lease name for get and update.
    for verb, lease_name, want in (("get", "inplace-webhook", "yes"), ("update", "inplace-webhook", "yes"),
                                   ("get", "someone-else", "no"), ("update", "someone-else", "no")):
        got = s.tools.kubectl("auth", "can-i", verb, "leases.coordination.k8s.io/" + lease_name, "-n", tc.RELEASE_NS,
                              "--as=" + tc.CONTROLLER_USER, check_rc=False).stdout.strip()
        if got != want:
            wrong.append("can-i %s lease %s: %s, want %s" % (verb, lease_name, got, want))
    check(not wrong, "\n".join(wrong))
    # Nothing was written (all dry runs): the pod is as it was.
    check(tc.images(s.api.get(ns_path(app.ns, "pods", name)))["app"] == tc.V1 and is_ready(app.pods()[0]),
          "a dry run changed the pod")


SCENARIOS = [h04_webhook_holds_no_token, h05_policy_limits_the_controller]
