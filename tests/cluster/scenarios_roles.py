"""Issue 13, items 4 and 5 on the real cluster: the webhook pods hold no credentials (a token-free --role=webhook
Deployment, the loop in its own --role=controller Deployment without a webhook port, a NetworkPolicy for the webhook
pods), and the chart's ValidatingAdmissionPolicy limits the controller's identity to the writes the loop makes
(DESIGN.md §9.4, §9.5)."""

import copy
import http.client
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


def apiserver_sources(s, pod, port):
    """Peer addresses of the established connections to `port` inside the pod's network namespace (entered
    through its container's process, which containerd reports): where the API server's calls come from."""
    cid = container_statuses(pod)["webhook"]["containerID"].split("://", 1)[1]
    pid = next(line.split()[1] for line in s.tools.ctr("tasks", "ls").splitlines() if line.startswith(cid))
    p = subprocess.run(["nsenter", "-t", pid, "-n", "ss", "-Htn", "state", "established", "( sport = :%d )" % port],
                       capture_output=True, text=True, timeout=20)
    return sorted({line.split()[-1].rsplit(":", 1)[0] for line in p.stdout.splitlines() if line.split()})


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
        sources |= set(apiserver_sources(s, s.api.get(ns_path(tc.RELEASE_NS, "pods", p["metadata"]["name"])), 8443))
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
    # The controller pods' NetworkPolicy: stored, selecting exactly the controller pods, the probe port only.
    cnp = s.api.get(ns_path(tc.RELEASE_NS, "networkpolicies", tc.RELEASE + "-controller", group="networking.k8s.io/v1"))
    sel = ",".join("%s=%s" % kv for kv in sorted(cnp["spec"]["podSelector"]["matchLabels"].items()))
    selected = {p["metadata"]["name"] for p in tc.live(s.api.items(ns_path(tc.RELEASE_NS, "pods"), labelSelector=sel))}
    check(selected and selected == {p["metadata"]["name"] for p in s.controller_pods()},
          "the controller NetworkPolicy selects %s, the controller pods are %s"
          % (sorted(selected), sorted(p["metadata"]["name"] for p in s.controller_pods())))
    ports = [pp["port"] for rule in cnp["spec"]["ingress"] for pp in rule.get("ports") or []]
    check(ports == ["probes"] and cnp["spec"]["policyTypes"] == ["Ingress"],
          "controller NetworkPolicy rules: %s" % cnp["spec"])


MERGE, STRATEGIC, JSON = "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json"


def as_controller(s, method, path, body=None, ctype=JSON):
    """One write as the controller's ServiceAccount (impersonated by admin, as kubectl --as does: the loop's
    writes are direct PATCH/POST/PUT/DELETE without a read first), a server-side dry run: (HTTP status, message)."""
    c = http.client.HTTPSConnection(s.api.host, s.api.port, context=s.api.ctx, timeout=30)
    try:
        c.request(method, path + "?dryRun=All", body=None if body is None else json.dumps(body).encode(),
                  headers={"Accept": JSON, "Content-Type": ctype, "Impersonate-User": tc.CONTROLLER_USER})
        r = c.getresponse()
        raw = r.read()
    finally:
        c.close()
    try:
        message = json.loads(raw).get("message", "") if r.status >= 300 else ""
    except ValueError:
        message = raw.decode("utf-8", "replace")
    return r.status, message


def h05_policy_limits_the_controller(s):
    """The controller's ServiceAccount (impersonated, server-side dry runs of the loop's kind of request): every
    write the loop makes is allowed, and each write RBAC lets it make but the loop never makes is refused by the
    chart's ValidatingAdmissionPolicy, whose message names it: pods and Deployments not opted in (whatever key of
    ours they carry; closing our condition on such a Deployment is allowed), a ReplicaSet not selecting by its
    pod-template-hash, pod
    labels/annotations outside an update step, pod spec fields, other pod conditions, a resize outside an update
    step, a Deployment's scale, a StatefulSet's spec or foreign labels (our annotation on it and an Event on it are
    allowed), a ReplicaSet with replicas or its deletion, another Lease, Events on other kinds;
    and a write RBAC grants by mistake (a ConfigMap) is refused as one the controller never makes. The Lease rule
    names its Lease. Against the Deployment itself (the policy with the namespace's Deployments as params): a pod
    update step's labels and annotations only at the template's values, a history ReplicaSet only with its
    Deployment's selector, the active ReplicaSet's template only the Deployment's, and none of these on the objects
    of a Deployment that is not opted in (an opted-in pod of one included)."""
    # The policy against the Deployment is off by default (an API server keeps its Deployment informer stopped
    # once its last binding is gone, kubernetes#130887): on for this scenario, the first use on this API server.
    s.install(extra=["--set", "admissionPolicy.checkAgainstDeployments=true"], upgrade=True)
    try:
        policy_limits_the_controller(s)
    finally:
        s.install(upgrade=True)


def policy_limits_the_controller(s):
    app = tc.App(s, "h05")
    web = tc.deployment("web", replicas=1)
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}  # Burstable
    app.create(web)
    plain = tc.deployment("plain", replicas=1)
    plain["metadata"]["labels"].pop(tc.ENABLED)
    plain["spec"]["template"]["metadata"]["labels"].pop(tc.ENABLED)
    app.kubectl("apply", "-f", "-", stdin=json.dumps(plain))
    plain_app = tc.App(s, "h05", name="plain")
    wait_for(plain_app.rollout_complete, 60, "the plain Deployment", plain_app)
    # Not opted in, its template opted in: its pods are opted in, it is not.
    half = tc.deployment("half", replicas=1)
    half["metadata"]["labels"].pop(tc.ENABLED)
    app.kubectl("apply", "-f", "-", stdin=json.dumps(half))
    half_app = tc.App(s, "h05", name="half")
    wait_for(half_app.rollout_complete, 60, "the half opted-in Deployment", half_app)
    half_pod = half_app.pods()[0]["metadata"]["name"]
    # web mid-update as the loop sees it: its template carries version v2 while its pod still runs v1 (paused first,
    # so the update waits for a resume and nothing moves during the dry runs).
    s.tools.kubectl("patch", "deployment", "web", "-n", app.ns, "--type=merge", "-p", '{"spec":{"paused":true}}')
    s.tools.kubectl("patch", "deployment", "web", "-n", app.ns, "--type=merge",
                    "-p", '{"spec":{"template":{"metadata":{"labels":{"version":"v2"}}}}}')
    pod = app.pods()[0]
    check(pod["metadata"]["labels"]["version"] == "v1", "the paused Deployment's pod moved: %s"
          % pod["metadata"]["labels"])
    name, other = pod["metadata"]["name"], plain_app.pods()[0]["metadata"]["name"]
    rs = app.replicasets()[0]
    rs_name = rs["metadata"]["name"]
    pods, deploy = ns_path(app.ns, "pods"), ns_path(app.ns, "deployments", "web", group="apps/v1")
    rss = ns_path(app.ns, "replicasets", group="apps/v1")
    leases = ns_path(tc.RELEASE_NS, "leases", group="coordination.k8s.io/v1")
    events = ns_path(app.ns, "events")
    rs_copy = copy.deepcopy(rs)
    for k in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        rs_copy["metadata"].pop(k, None)
    rs_copy.pop("status", None)
    rs_copy.update({"apiVersion": "apps/v1", "kind": "ReplicaSet"})
    rs_copy["metadata"]["name"] = rs_name + "-x"

    def history_rs(name, pod_hash, select_hash=True):
        """A zero-replica ReplicaSet of web's template under pod-template-hash `pod_hash`, as the loop's history
        ReplicaSets are (the hash in its selector too, unless `select_hash` is false)."""
        h = copy.deepcopy(rs_copy)
        h["metadata"]["name"] = name
        h["spec"]["replicas"] = 0
        h["metadata"]["labels"]["pod-template-hash"] = pod_hash
        h["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] = pod_hash
        if select_hash:
            h["spec"]["selector"]["matchLabels"]["pod-template-hash"] = pod_hash
        else:
            h["spec"]["selector"]["matchLabels"].pop("pod-template-hash", None)
        return h
    history = history_rs("web-h05a", "h05a")
    other_lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "someone-else", "namespace": tc.RELEASE_NS}, "spec": {}}

    def event(kind, obj_name):
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "h05-", "namespace": app.ns},
                "involvedObject": {"kind": kind, "name": obj_name, "namespace": app.ns},
                "reason": "Test", "message": "h05", "type": "Normal"}
    # A Deployment that stores the undo command (the loop's undo writes its template), one not named like the
    # history ReplicaSets below, one of a template not opted in, and an opted-in Deployment where no update runs
    # (kube-system).
    undo = tc.deployment("undo", replicas=0)
    undo["metadata"].setdefault("annotations", {})["inplace-webhook.io/undo"] = "true"
    app.kubectl("create", "-f", "-", stdin=json.dumps(undo))
    # An opted-in StatefulSet (no pods): the end of its update drops our record, nothing else of it changes.
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "db", "labels": {"app": "db", tc.ENABLED: "true"}},
           "spec": {"replicas": 0, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {"metadata": {"labels": {"app": "db", tc.ENABLED: "true"}},
                                 "spec": {"containers": [{"name": "app", "image": tc.V1}]}}}}
    app.kubectl("create", "-f", "-", stdin=json.dumps(sts))
    sts_path = ns_path(app.ns, "statefulsets", "db", group="apps/v1")
    excluded = tc.deployment("h05-excluded", replicas=0)
    excluded["metadata"]["namespace"] = "kube-system"
    s.tools.kubectl("create", "-f", "-", stdin=json.dumps(excluded))
    misnamed = history_rs("someone-else-h05a", "h05a")
    not_opted_in = history_rs("web-h05b", "h05b")
    not_opted_in["spec"]["template"]["metadata"]["labels"].pop(tc.ENABLED)
    broad = history_rs("web-h05c", "h05c", select_hash=False)
    plain_history = history_rs("plain-h05e", "h05e")  # a history ReplicaSet of plain, not opted in
    plain_history["metadata"]["ownerReferences"][0].update(
        {"name": "plain", "uid": s.api.get(ns_path(app.ns, "deployments", "plain", group="apps/v1"))["metadata"]["uid"]})
    unlabelled = history_rs("web-h05f", "h05f")  # its template opted in, itself not
    unlabelled["metadata"]["labels"].pop(tc.ENABLED)
    narrow = history_rs("web-h05d", "h05d")  # selects more narrowly than web does
    narrow["spec"]["selector"]["matchLabels"]["team"] = "h05"
    narrow["spec"]["template"]["metadata"]["labels"]["team"] = "h05"
    # "Ours" is the opt-in label, not any key of ours a user can add: a pod and a Deployment not opted in carrying
    # an annotation of ours, and our condition on that Deployment (closing it is the one write allowed there).
    s.tools.kubectl("annotate", "pod", other, "-n", app.ns, "inplace-webhook.io/note=h05")
    s.tools.kubectl("annotate", "deployment", "plain", "-n", app.ns, "inplace-webhook.io/note=h05")
    plain_path = ns_path(app.ns, "deployments", "plain", group="apps/v1")
    s.api.request("PATCH", plain_path + "/status", {"status": {"conditions": [
        {"type": "inplace-webhook.io/Progressing", "status": "True", "reason": "InPlaceUpdateProgressing",
         "message": "h05"}]}}, ctype=STRATEGIC)
    step = {"metadata": {"labels": {"version": "v2", "inplace-webhook.io/state": "Updating"}, "annotations": {
        "inplace-webhook.io/update-state": json.dumps({"revision": "h05"})}},
        "spec": {"containers": [{"name": "app", "image": tc.V2}]}}
    allowed = [
        ("pod update step (image, template label, update-state)", "PATCH", pods + "/" + name, step, STRATEGIC),
        ("pod state label", "PATCH", pods + "/" + name, {"metadata": {"labels": {"inplace-webhook.io/state": "Updating"}}},
         MERGE),
        ("pod readiness-gate condition", "PATCH", pods + "/" + name + "/status", json.loads(tc.GATE_TRUE), STRATEGIC),
        ("Deployment pause + our annotation", "PATCH", deploy, {"spec": {"paused": True}, "metadata": {
            "annotations": {"inplace-webhook.io/note": "h05"}}}, MERGE),
        ("Deployment progress condition", "PATCH", deploy + "/status", {"status": {"conditions": [
            {"type": "inplace-webhook.io/Progressing", "status": "True", "reason": "H05", "message": "h05"}]}},
         STRATEGIC),
        ("zero-replica history ReplicaSet", "POST", rss, history, JSON),
        ("ReplicaSet template and annotation", "PATCH", rss + "/" + rs_name, {"metadata": {"annotations": {
            "deployment.kubernetes.io/revision": "9"}}, "spec": {"template": {"metadata": {"labels": {
                "version": "v2"}}}}}, MERGE),
        ("Event on a pod", "POST", events, event("Pod", name), JSON),
        ("StatefulSet: our annotation", "PATCH", sts_path, {"metadata": {"annotations": {
            "inplace-webhook.io/note": "h05"}}}, MERGE),
        ("Event on a StatefulSet", "POST", events, event("StatefulSet", "db"), JSON),
        ("closing our condition on a Deployment no longer opted in", "PATCH", plain_path + "/status",
         {"status": {"conditions": [{"type": "inplace-webhook.io/Progressing", "status": "False",
                                     "reason": "InPlaceUpdateAborted", "message": "h05"}]}}, STRATEGIC),
        ("Deployment template, carrying out its stored undo", "PATCH", ns_path(app.ns, "deployments", "undo",
                                                                                 group="apps/v1"),
         {"metadata": {"annotations": {"inplace-webhook.io/undo": None}},
          "spec": {"template": {"metadata": {"labels": {"version": "v0"}}}}}, MERGE),
    ]
    forbidden = [
        ("a pod not opted in carrying an annotation of ours", "PATCH", pods + "/" + other,
         {"metadata": {"labels": {"inplace-webhook.io/state": "Updating"}}}, MERGE, "is not opted in"),
        ("a Deployment not opted in carrying an annotation and a condition of ours", "PATCH", plain_path,
         {"spec": {"paused": True}}, MERGE, "is not opted in"),
        ("a ReplicaSet that does not select by its pod-template-hash", "POST", rss, broad, JSON,
         "selects by the pod-template-hash"),
        ("a foreign pod annotation", "PATCH", pods + "/" + name, {"metadata": {"annotations": {"example.com/x": "y"}}},
         MERGE, "change only in an update step"),
        ("a foreign pod label", "PATCH", pods + "/" + name, {"metadata": {"labels": {"team": "other"}}}, MERGE,
         "change only in an update step"),
        ("pod-template-hash", "PATCH", pods + "/" + name, {"metadata": {"labels": {"pod-template-hash": "other"}}},
         MERGE, "pod-template-hash"),
        ("pod activeDeadlineSeconds", "PATCH", pods + "/" + name, {"spec": {"activeDeadlineSeconds": 60}}, MERGE,
         "spec changes only in its container images"),
        ("pod Ready condition", "PATCH", pods + "/" + name + "/status",
         {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, STRATEGIC,
         "only its readiness-gate condition"),
        ("Deployment replicas", "PATCH", deploy, {"spec": {"replicas": 5}}, MERGE, "changes only spec.paused"),
        ("foreign Deployment annotation", "PATCH", deploy, {"metadata": {"annotations": {"example.com/x": "y"}}}, MERGE,
         "changes only spec.paused"),
        ("the Deployment controller's Available condition", "PATCH", deploy + "/status", {"status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "H05", "message": "h05"}]}}, STRATEGIC,
         "only the Progressing conditions"),
        ("a ReplicaSet with replicas", "POST", rss, rs_copy, JSON, "creates only zero-replica history ReplicaSets"),
        ("scaling a ReplicaSet", "PATCH", rss + "/" + rs_name, {"spec": {"replicas": 3}}, MERGE,
         "changes only the template and annotations"),
        ("deleting the active ReplicaSet", "DELETE", rss + "/" + rs_name, None, JSON,
         "deletes only zero-replica ReplicaSets"),
        ("another Lease", "POST", leases, other_lease, JSON, "the only Lease of the controller"),
        ("an Event on a Secret", "POST", events, event("Secret", "x"), JSON,
         "Events on Deployments, StatefulSets, ReplicaSets"),
        ("StatefulSet replicas", "PATCH", sts_path, {"spec": {"replicas": 2}}, MERGE,
         "on a StatefulSet the controller changes only inplace-webhook.io/ annotations"),
        ("a foreign StatefulSet label", "PATCH", sts_path, {"metadata": {"labels": {"team": "x"}}}, MERGE,
         "on a StatefulSet the controller changes only inplace-webhook.io/ annotations"),
        ("a Deployment's template with no undo stored", "PATCH", deploy,
         {"spec": {"template": {"metadata": {"labels": {"version": "v9"}}}}}, MERGE,
         "template only to carry out its stored inplace-webhook.io/undo"),
        ("a ReplicaSet named after another Deployment", "POST", rss, misnamed, JSON, "named after"),
        ("a ReplicaSet of a template not opted in", "POST", rss, not_opted_in, JSON, "of an opted-in template"),
        ("a pod's status message", "PATCH", pods + "/" + name + "/status", {"status": {"message": "h05"}}, STRATEGIC,
         "only its readiness-gate condition"),
        ("an opted-in Deployment in kube-system", "PATCH",
         ns_path("kube-system", "deployments", "h05-excluded", group="apps/v1"), {"spec": {"paused": True}}, MERGE,
         "namespace kube-system is excluded"),
        # Checked against the pod's Deployment (the policy with Deployments as params).
        ("a pod update step's label not at the template's value", "PATCH", pods + "/" + name,
         json.loads(json.dumps(step).replace('"v2"', '"v3"', 1)), STRATEGIC,
         "change only to its Deployment web's template; not: version"),
        ("a pod update step adding an annotation the template does not have", "PATCH", pods + "/" + name,
         {"metadata": {"labels": {"version": "v2"}, "annotations": {
             "example.com/x": "y", "inplace-webhook.io/update-state": json.dumps({"revision": "h05"})}}}, STRATEGIC,
         "not: example.com/x"),
        ("a history ReplicaSet selecting otherwise than its Deployment", "POST", rss, narrow, JSON,
         "selects as its Deployment web does"),
        ("a history ReplicaSet of a Deployment not opted in", "POST", rss, plain_history, JSON,
         "belongs to Deployment plain, which is not opted in"),
        ("an update step on an opted-in pod of a Deployment not opted in", "PATCH", pods + "/" + half_pod,
         step, STRATEGIC, "belongs to Deployment half, which is not opted in"),
        ("a ReplicaSet created without the opt-in label on it (its template has it)", "POST", rss, unlabelled, JSON,
         "is not opted in"),
        ("the active ReplicaSet's template other than its Deployment's", "PATCH", rss + "/" + rs_name,
         {"spec": {"template": {"metadata": {"labels": {"version": "v9"}}}}}, MERGE,
         "gets its Deployment web's template"),
        ("a resize of a pod not in an update step", "PATCH", pods + "/" + name + "/resize",
         {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "20m"}}}]}}, STRATEGIC,
         "resizes only a pod in an update step"),
    ]
    # pods/resize is served from 1.33 (off by default before, DESIGN.md §8.14), and the API server refuses it itself
    # for a pod on an older kubelet: no resize rule to show then.
    resources = json.loads(s.tools.kubectl("get", "--raw", "/api/v1").stdout)["resources"]
    kubelet = s.api.get("/api/v1/nodes/" + pod["spec"]["nodeName"])["status"]["nodeInfo"]["kubeletVersion"]
    if not any(r["name"] == "pods/resize" for r in resources) or int(kubelet.split(".")[1]) < 33:
        forbidden = [f for f in forbidden if not f[2].endswith("/resize")]
        print("    no pods/resize here (API server or kubelet %s before 1.33): the resize rule is not shown" % kubelet)
    wrong, refused = [], []
    for what, method, path, body, ctype in allowed:
        code, message = as_controller(s, method, path, body, ctype)
        if code >= 300:
            wrong.append("allowed write refused: %s: %d %s" % (what, code, message[:400]))
    # Its Lease (renewed every 2 s: read it, then update it; a 409 from a renewal in between is retried).
    for _ in range(10):
        lease = s.api.get(leases + "/inplace-webhook")
        lease.update({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"})
        code, message = as_controller(s, "PUT", leases + "/inplace-webhook", lease)
        if code != 409:
            break
    if code >= 300:
        wrong.append("allowed write refused: its Lease: %d %s" % (code, message[:400]))
    for what, method, path, body, ctype, want in forbidden:
        code, message = as_controller(s, method, path, body, ctype)
        if code < 300 or POLICY not in message or want not in message:
            wrong.append("forbidden write not refused by the policy: %s: %d %s" % (what, code, message[:400]))
        else:
            refused.append((what, code))
    # A write RBAC grants by mistake is still refused: the policy lists the writes the loop makes.
    ns = ["-n", app.ns]
    s.tools.kubectl("create", "role", "h05-mistake", "--verb=create", "--resource=configmaps", *ns)
    s.tools.kubectl("create", "rolebinding", "h05-mistake", "--role=h05-mistake",
                    "--serviceaccount=%s:%s" % (tc.RELEASE_NS, tc.RELEASE), *ns)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": app.ns}}
    code, message = wait_for(lambda: (lambda r: r if "RBAC" not in r[1] and "cannot create" not in r[1] else None)(
        as_controller(s, "POST", ns_path(app.ns, "configmaps"), cm)), 10, "the extra binding to take effect")
    if code >= 300 and "never makes this write: /configmaps CREATE" in message:
        refused.append(("a ConfigMap (granted by mistake)", code))
    else:
        wrong.append("a ConfigMap create (granted by mistake) was not refused by the policy: %d %s" % (code, message))
    s.tools.kubectl("delete", "rolebinding,role", "h05-mistake", *ns)
    # The Lease rule names its Lease: RBAC itself refuses any other Lease name for get and update.
    for verb, lease_name, want in (("get", "inplace-webhook", "yes"), ("update", "inplace-webhook", "yes"),
                                   ("get", "someone-else", "no"), ("update", "someone-else", "no"),
                                   ("create", "", "yes")):
        got = s.tools.kubectl("auth", "can-i", verb, "leases.coordination.k8s.io" + ("/" + lease_name if lease_name
                                                                                      else ""),
                              "-n", tc.RELEASE_NS, "--as=" + tc.CONTROLLER_USER, check_rc=False).stdout.strip()
        if got != want:
            wrong.append("can-i %s lease %s: %s, want %s" % (verb, lease_name, got, want))
    s.tools.kubectl("delete", "deployment", "h05-excluded", "-n", "kube-system")
    print("    allowed %d loop writes; refused by the policy: %s" % (len(allowed) + 1, refused))
    check(not wrong, "\n".join(wrong))
    # Nothing was written (all dry runs): the pod is as it was.
    check(tc.images(s.api.get(ns_path(app.ns, "pods", name)))["app"] == tc.V1 and is_ready(app.pods()[0]),
          "a dry run changed the pod")


SCENARIOS = [h04_webhook_holds_no_token, h05_policy_limits_the_controller]
