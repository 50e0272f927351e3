"""Issue 16 on the real cluster: a Deployment's cpu and memory changed in place through pods/resize, applied by the
real kubelet (the container's cgroup values change), the pods kept (UID, restartCount as resizePolicy says), the
ReplicaSet template updated so that new pods get the new resources; a QoS-changing edit takes the native rollout
with a warning, and a resize the kubelet finds infeasible stops the update with a stuck report and Events, never a
recreate (DESIGN.md §3.1)."""

import json
import os

import test_cluster as tc
from scenarios_progress import rollout_status
from kube import (IN_PROGRESS, LIFECYCLE, annotations_of, check, condition, container_statuses, labels_of, snapshot,
                  state_of, wait_for)

SMALL = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
LARGE = {"requests": {"cpu": "150m", "memory": "96Mi"}, "limits": {"cpu": "300m", "memory": "192Mi"}}
MI = 1024 * 1024
PROGRESS = "inplace-webhook.io/Progressing"


def resized_deployment(name, replicas, memory_policy="NotRequired"):
    """tc.deployment with the app container's cpu/memory (Burstable: the sidecar has none) and its resizePolicy."""
    d = tc.deployment(name, replicas=replicas)
    app = d["spec"]["template"]["spec"]["containers"][0]
    app["resources"] = json.loads(json.dumps(SMALL))
    app["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                           {"resourceName": "memory", "restartPolicy": memory_policy}]
    return d


def set_resources(app, r):
    """`kubectl set resources` as a user would run it: (stdout, warnings)."""
    def fmt(m):
        return ",".join("%s=%s" % kv for kv in sorted(m.items()))
    return app.kubectl("set", "resources", "deploy/web", "-c", "app", "--requests=" + fmt(r["requests"]),
                       "--limits=" + fmt(r["limits"]))


def task_pid(s, container_id):
    """The host PID of a container's task, from containerd (ctr tasks ls: TASK PID STATUS)."""
    for line in s.tools.ctr("tasks", "ls").splitlines():
        f = line.split()
        if f and f[0] == container_id:
            return int(f[1])
    raise tc.Failure("containerd has no task %s" % container_id)


def cgroup_values(s, pod, container="app"):
    """What the kernel enforces for `container` of `pod`, read from its process's cgroups: CPU quota (us per
    100 ms period, -1: none), CPU shares (cgroup v1 weight) and the memory limit in bytes. cgroup v1 (this machine:
    hybrid) or v2."""
    cid = container_statuses(pod)[container]["containerID"].split("://", 1)[1]
    pid = task_pid(s, cid)
    paths = {}
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = (controllers, path)

    def read(controller, name):
        controllers, path = paths[controller]
        for base in ("/sys/fs/cgroup/" + controllers, "/sys/fs/cgroup/" + controller):
            p = base + path + "/" + name
            if os.path.exists(p):
                with open(p) as f:
                    return f.read().strip()
        raise tc.Failure("no %s for %s (pid %d) under /sys/fs/cgroup" % (name, controller, pid))

    if "cpu" in paths and "memory" in paths:  # v1
        quota = int(read("cpu", "cpu.cfs_quota_us"))
        return {"cpu_quota": quota, "cpu_shares": int(read("cpu", "cpu.shares")),
                "memory_limit": int(read("memory", "memory.limit_in_bytes"))}
    # v2: cpu.max "QUOTA PERIOD" (max: none), cpu.weight, memory.max
    controllers, path = paths[""]
    base = "/sys/fs/cgroup" + path

    def v2(name):
        with open(base + "/" + name) as f:
            return f.read().strip()
    quota = v2("cpu.max").split()[0]
    return {"cpu_quota": -1 if quota == "max" else int(quota) * 100000 // int(v2("cpu.max").split()[1]),
            "cpu_weight": int(v2("cpu.weight")), "memory_limit": int(v2("memory.max"))}


def expect_enforced(s, pod, r):
    """The kernel enforces `r`'s limits and requests for the app container: quota = cpu limit (100 ms period),
    shares = cpu request * 1024 (v1), memory limit."""
    got = cgroup_values(s, pod)
    cpu_limit_m = int(r["limits"]["cpu"].rstrip("m"))
    cpu_request_m = int(r["requests"]["cpu"].rstrip("m"))
    want = {"cpu_quota": cpu_limit_m * 100, "memory_limit": int(r["limits"]["memory"].rstrip("Mi")) * MI}
    if "cpu_shares" in got:
        want["cpu_shares"] = cpu_request_m * 1024 // 1000
    for k, v in want.items():
        check(got[k] == v, "pod %s: cgroup %s is %s, want %s (for %s)" % (pod["metadata"]["name"], k, got[k], v, r))
    return got


def expect_reported(pod, r):
    """The kubelet reports the resources it applied (status.containerStatuses[].resources) as `r`."""
    have = container_statuses(pod)["app"].get("resources") or {}
    check(have == r, "pod %s: the kubelet reports resources %s, want %s" % (pod["metadata"]["name"], have, r))


def active_rs_resources(app):
    rss = [r for r in app.replicasets() if r["spec"].get("replicas")]
    check(len(rss) == 1, "active ReplicaSets: %s" % [r["metadata"]["name"] for r in rss])
    return rss[0]["spec"]["template"]["spec"]["containers"][0].get("resources")


def v00_cluster_serves_pods_resize(s):
    """The platform under the resize scenarios: the API server serves pods/resize (discovery, as --pod-resize=auto
    asks it), and the chart told the credential-free webhook pods the cluster's version (--pod-resize from
    .Capabilities.KubeVersion), which is the API server's own."""
    resources = json.loads(s.tools.kubectl("get", "--raw", "/api/v1").stdout)["resources"]
    check(any(r["name"] == "pods/resize" for r in resources), "the API server does not serve pods/resize")
    version = json.loads(s.tools.kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    args = s.api.get("/apis/apps/v1/namespaces/%s/deployments/%s" % (tc.RELEASE_NS, tc.RELEASE))[
        "spec"]["template"]["spec"]["containers"][0]["args"]
    check("--pod-resize=" + version in args, "the webhook pods run with %s, the API server is %s"
          % ([a for a in args if a.startswith("--pod-resize")], version))


def v01_cpu_memory_in_place(s):
    """`kubectl set resources` on a Deployment whose container allows resizing without a restart: the webhook
    starts an in-place update, the loop resizes each pod through pods/resize, and the real kubelet applies it:
    the container's cgroup CPU quota, shares and memory limit change, the kubelet reports the new resources, the
    pods keep their UID and their containers never restart; the ReplicaSet template holds the new resources, and a
    pod added by a scale-up gets them too."""
    app = tc.App(s, "v01")
    before = snapshot(app.create(resized_deployment("web", replicas=2)))
    rs0 = app.rs_names()
    for p in app.pods():
        expect_enforced(s, p, SMALL)
    _, warnings = set_resources(app, LARGE)
    tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
    _, pods = tc.finish(app, before, rs0, restarted=set(), timeout=120)
    for p in pods:
        check(p["spec"]["containers"][0]["resources"] == LARGE, "pod spec resources: %s"
              % p["spec"]["containers"][0]["resources"])
        expect_reported(p, LARGE)
        got = expect_enforced(s, p, LARGE)
    print("    cgroup after the resize: %s" % got)
    check(active_rs_resources(app) == LARGE, "the ReplicaSet template's resources: %s" % active_rs_resources(app))
    check(app.count_events("InPlaceUpdateCompleted", "Deployment", wait=tc.EVENT_WAIT) >= 1,
          "no InPlaceUpdateCompleted Event")
    # New pods are made from the ReplicaSet's template: they get the new resources.
    app.kubectl("scale", "deploy/web", "--replicas=3")
    wait_for(app.rollout_complete, 90, "the scale-up", app)
    new = [p for p in app.pods() if p["metadata"]["name"] not in before]
    check(len(new) == 1, "scale-up pods: %s" % [p["metadata"]["name"] for p in new])
    check(new[0]["spec"]["containers"][0]["resources"] == LARGE, "the new pod's resources: %s"
          % new[0]["spec"]["containers"][0]["resources"])
    expect_enforced(s, new[0], LARGE)
    check(app.rs_names() == rs0 or all(n in app.rs_names() for n in rs0), "ReplicaSets: %s" % app.rs_names())


def v02_restart_container_policy(s):
    """resizePolicy RestartContainer for memory: the kubelet restarts the container to apply the new memory limit
    (restartCount +1, once), the pod keeps its UID, and the cgroup holds the new limit."""
    app = tc.App(s, "v02")
    before = snapshot(app.create(resized_deployment("web", replicas=1, memory_policy="RestartContainer")))
    rs0 = app.rs_names()
    _, warnings = set_resources(app, LARGE)
    tc.expect_warning(warnings, "in-place update: 1 pod will be updated")
    _, pods = tc.finish(app, before, rs0, restarted={"app"}, timeout=120)
    expect_reported(pods[0], LARGE)
    expect_enforced(s, pods[0], LARGE)


def v03_resources_and_image_together(s):
    """Resources and the image in one template change: resized first, then the image (one kubelet sync doing both
    is known to fail): the container restarts once, for the image, and runs the new image with the new cgroup
    values."""
    app = tc.App(s, "v03")
    before = snapshot(app.create(resized_deployment("web", replicas=2)))
    rs0 = app.rs_names()
    d = app.deployment()
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["image"], c["resources"] = tc.V2, json.loads(json.dumps(LARGE))
    for k in ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"):
        d["metadata"].pop(k, None)
    d.pop("status", None)
    _, warnings = app.kubectl("apply", "-f", "-", stdin=json.dumps(d))
    tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
    _, pods = tc.finish(app, before, rs0, restarted={"app"}, timeout=150)
    for p in pods:
        expect_reported(p, LARGE)
        expect_enforced(s, p, LARGE)
    # The order on each pod: the loop's pods/resize write before its image write (the API server's audit log).
    images_at = tc.pod_image_writes(s, app, tc.V2, 0)
    for p in pods:
        name = p["metadata"]["name"]
        resized = [e["_time"] for e in s.audit.writes(0, user=tc.CONTROLLER_USER, ns=app.ns, resource="pods",
                                                      subresource="resize")
                   if e["objectRef"].get("name") == name and (e.get("responseStatus") or {}).get("code", 0) < 300]
        imaged = [e["_time"] for e in images_at.get(name, [])]
        check(resized and imaged and max(resized) <= min(imaged),
              "pod %s: resize writes at %s, image writes at %s: want the resize first" % (name, resized, imaged))


def v04_qos_change_is_native(s):
    """A change that would move the pods to another QoS class (BestEffort to Burstable: a cpu request added) cannot
    be resized (the API server refuses it): the webhook says so in a warning and the native rollout replaces the
    pods."""
    app = tc.App(s, "v04")
    before = snapshot(app.create(tc.deployment("web", replicas=2)))
    _, warnings = app.kubectl("set", "resources", "deploy/web", "-c", "app", "--requests=cpu=50m")
    tc.expect_warning(warnings, "QoS class would change from BestEffort to Burstable")
    d = app.deployment()
    check(IN_PROGRESS not in annotations_of(d) and not d["spec"].get("paused"), "an in-place update started")
    wait_for(app.rollout_complete, 120, "the native rollout", app)
    after = snapshot(app.pods())
    check(not set(after) & set(before), "pods kept by a native rollout: %s" % sorted(set(after) & set(before)))
    check(all(p["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "50m"}} for p in app.pods()),
          "the new pods' resources")


def v05_infeasible_resize_stops_the_update(s):
    """A resize the node cannot hold (more CPU than it has): Kubernetes refuses it, either at once in the API
    server (1.37: pods/resize answers 403 "node didn't have enough allocatable resources") or later in the kubelet
    (PodResizePending/Infeasible); either way the container keeps what it had and the update stops on that pod at
    once, never a recreate: a Warning Event on the pod and the Deployment naming the cause, our condition False with
    it, and Progressing False/ProgressDeadlineExceeded (kubectl rollout status fails). The abort hands the change to the native rollout, whose new pod cannot be scheduled while the old ones
    keep serving."""
    app = tc.App(s, "v05")
    d = resized_deployment("web", replicas=2)
    d["spec"]["progressDeadlineSeconds"] = 20
    before = snapshot(app.create(d))
    huge = {"requests": {"cpu": "100", "memory": "64Mi"}, "limits": {"cpu": "100", "memory": "128Mi"}}
    _, warnings = set_resources(app, huge)
    tc.expect_warning(warnings, "in-place update: 2 pods will be updated")
    reasons = {"PodResizeRefused": "enough allocatable resources", "PodResizeInfeasible": "infeasible"}
    d = wait_for(lambda: (lambda d: d if condition(d, PROGRESS, "reason") in reasons
                          and condition(d, "Progressing", "reason") == "ProgressDeadlineExceeded" else None)(
        app.deployment()), 90, "the stuck report", app)
    reason, message = condition(d, PROGRESS, "reason"), condition(d, PROGRESS, "message")
    check(condition(d, PROGRESS) == "False" and reasons[reason] in message, "condition: %s %s" % (reason, message))
    print("    %s: %s" % (reason, message))
    check(app.count_events(reason, kind="Deployment", wait=tc.EVENT_WAIT) >= 1,
          "no %s Event on the Deployment" % reason)
    stuck = [p for p in app.pods() if app.count_events(reason, kind="Pod", name=p["metadata"]["name"])]
    check(len(stuck) == 1, "pods with a %s Event: %s" % (reason, [p["metadata"]["name"] for p in stuck]))
    for p in app.pods():
        expect_enforced(s, p, SMALL)  # what the kubelet runs is unchanged
        expect_reported(p, SMALL)
    code, out = rollout_status(app, "10s")
    check(code != 0 and "exceeded its progress deadline" in out, "kubectl rollout status: %d %s" % (code, out))
    now = snapshot(app.pods())
    check(sorted(now) == sorted(before) and all(now[n]["uid"] == before[n]["uid"] for n in now),
          "pods recreated while stuck: %s -> %s" % (sorted(before), sorted(now)))
    app.kubectl("annotate", "deploy/web", "inplace-webhook.io/abort=true")
    wait_for(lambda: IN_PROGRESS not in annotations_of(app.deployment()) and not app.deployment()["spec"].get("paused"),
             60, "the abort", app)
    pending = wait_for(lambda: [p for p in app.all_pods() if (p.get("status") or {}).get("phase") == "Pending"
                                and condition(p, "PodScheduled", "reason") == "Unschedulable"],
                       60, "the native rollout's pod (unschedulable)", app)
    running = snapshot(app.pods())
    check(all(n in running for n in before), "the old pods stopped serving: %s" % sorted(running))
    print("    after the abort: %d unschedulable new pod(s), the %d old ones still running"
          % (len(pending), len(before)))


def v06_hooks_and_budget_hold_the_resize(s):
    """The hooks and the budget apply to a resize as to an image change. A label as pre- and post-update hook (the
    LB controller deregisters the pod, then registers it again) and maxUnavailable 1 on 3 replicas: one pod at a
    time leaves Normal; a pod held in its pre-update hook keeps its cpu/memory (the spec, what the kubelet reports,
    the cgroup) until the hook is released; once resized it waits in Updated, with the new resources applied, until
    its label is back; then the next pod starts."""
    app = tc.App(s, "v06")
    hook = {"labelsHandler": {tc.HANDLER_LABEL: "true"}}
    d = resized_deployment("web", replicas=3)
    d["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    d["metadata"]["annotations"][LIFECYCLE] = json.dumps({"preUpdate": hook, "postUpdate": hook})
    before = snapshot(app.create(d))
    rs0 = app.rs_names()
    for name in before:
        app.set_label(name, "true")
    _, warnings = set_resources(app, LARGE)
    tc.expect_warning(warnings, "in-place update: 3 pods will be updated")
    most = 0

    def each_round(pods, track):
        nonlocal most
        busy = [p["metadata"]["name"] for p in pods if state_of(p) != "Normal"]
        most = max(most, len(busy))
        check(len(busy) <= 1, "pods out of Normal at once with maxUnavailable 1: %s" % busy)
        for p in pods:
            name, resources = p["metadata"]["name"], p["spec"]["containers"][0]["resources"]
            if "released" not in track[name]:
                check(resources == SMALL, "pod %s resized (%s) before its pre-update hook was released (%s)"
                      % (name, resources, state_of(p)))
            if state_of(p) == "Updated":
                check(resources == LARGE, "pod %s in Updated with %s" % (name, resources))

    def release(p):
        expect_enforced(s, p, SMALL)  # held: the kubelet still runs the old values
        expect_reported(p, SMALL)
        app.set_label(p["metadata"]["name"], None)

    def rearm(p):
        expect_reported(p, LARGE)
        expect_enforced(s, p, LARGE)  # applied before the post-update hook is met
        app.set_label(p["metadata"]["name"], "true")

    hold = 2.0
    track = tc.play_hooks(app, before, lambda p: labels_of(p).get(tc.HANDLER_LABEL) == "true", release, rearm,
                          hold=hold, timeout=180, each_round=each_round, tick=0.1)
    order = sorted(track, key=lambda n: track[n]["preparing"])
    check(most == 1 and all(track[a]["rearmed"] <= track[b]["preparing"] for a, b in zip(order, order[1:])),
          "pods at once: %d; hooks %s" % (most, track))
    print("    one pod at a time: %s; each held %.0f s in each hook" % (" -> ".join(order), hold))
    _, pods = tc.finish(app, before, rs0, restarted=set(), timeout=30)
    for p in pods:
        expect_reported(p, LARGE)
        expect_enforced(s, p, LARGE)


SCENARIOS = [v00_cluster_serves_pods_resize, v01_cpu_memory_in_place, v02_restart_container_policy,
             v03_resources_and_image_together, v04_qos_change_is_native, v05_infeasible_resize_stops_the_update,
             v06_hooks_and_budget_hold_the_resize]
