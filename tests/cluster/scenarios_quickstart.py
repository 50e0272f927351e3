"""Issue 15 item 4: the README's quickstart is a test. q01 takes the shell blocks marked `<!-- quickstart: NAME -->`
out of README.md (install, opt-in, update, watch, abort, the uninstall under "Install with Helm", cleanup), runs
each with bash (`set -euo pipefail`) exactly as written, in what a user of the README has: KUBECONFIG (the
cluster's admin), PATH with the pinned kubectl and helm first and the build's kubectl-inplace (the plugin),
the repository root as working directory. After each block it checks what the real cluster reports.

What only the test cluster needs stays out of the README and is done here: the suite's own release (same name and
namespace, the suite's values) is uninstalled first and installed again at the end, for the scenarios that follow;
the README's commands run in the user's current namespace, which is the scenario's namespace q01 here (a copy of
the admin kubeconfig whose context names it; run_one removes the namespace afterwards)."""

import os
import re
import shutil
import subprocess
import time

import test_cluster as tc
from kube import (IN_PROGRESS, Failure, annotations_of, check, images, is_ready, live, ns_path, state_of,
                  wait_for)

BLOCKS = ("install", "opt-in", "update", "watch", "abort", "uninstall", "cleanup")
MARKED = re.compile(r"^<!-- quickstart: ([\w-]+) -->\n```sh\n(.*?)^```$", re.M | re.S)
NS = "q01"


def readme_blocks(source):
    """{name: the block's text} for every marked block of README.md; each name once, all of BLOCKS there."""
    found = {}
    for name, body in MARKED.findall(open(os.path.join(source, "README.md")).read()):
        check(name not in found, "README.md marks two blocks `quickstart: %s`" % name)
        found[name] = body
    missing = [b for b in BLOCKS if b not in found]
    check(not missing, "README.md has no block marked `quickstart: %s`" % ", ".join(missing))
    return found


class Shell:
    """bash as a user of the README runs it."""

    def __init__(self, s, blocks):
        self.s = s
        self.blocks = blocks
        d = os.path.join(s.env.run, NS)
        os.makedirs(d, exist_ok=True)
        self.kubeconfig = os.path.join(d, "kubeconfig")
        shutil.copyfile(s.env.kubeconfig("admin"), self.kubeconfig)
        # The build's kubectl-inplace (next to the product binary), as the README's `export PATH=$PWD/build:$PATH`.
        plugin_dir = os.path.dirname(s.binary or "")
        check(os.access(os.path.join(plugin_dir, "kubectl-inplace"), os.X_OK), "no kubectl-inplace in %r: build it"
              " (cmake --build BUILD --target kubectl-inplace)" % plugin_dir)
        path = [s.env.bin, plugin_dir]
        self.env = dict(os.environ, KUBECONFIG=self.kubeconfig, PATH=":".join(path + [os.environ["PATH"]]),
                        HELM_CACHE_HOME=os.path.join(s.env.run, "helm", "cache"),
                        HELM_CONFIG_HOME=os.path.join(s.env.run, "helm", "config"),
                        HELM_DATA_HOME=os.path.join(s.env.run, "helm", "data"))
        # The user's current namespace (test-cluster only: the README does not choose one).
        self.s.tools.run("kubectl", "config", "set-context", "--current", "--namespace=" + NS,
                         "--kubeconfig", self.kubeconfig)
        self.times = {}

    def run(self, name, timeout=420):
        started = time.time()
        p = subprocess.run(["bash", "-c", "set -euo pipefail\n" + self.blocks[name]], cwd=self.s.source,
                           env=self.env, capture_output=True, text=True, timeout=timeout)
        self.times[name] = time.time() - started
        print("  quickstart %-9s %5.1f s, exit %d" % (name, self.times[name], p.returncode), flush=True)
        for line in (p.stdout + p.stderr).splitlines():
            print("    | " + line)
        if p.returncode != 0:
            raise Failure("README quickstart block %r exited %d:\n--- block:\n%s--- stdout:\n%s--- stderr:\n%s"
                          % (name, p.returncode, self.blocks[name], p.stdout, p.stderr))
        return p


def release_installed(s):
    return s.tools.helm("status", tc.RELEASE, "-n", tc.RELEASE_NS, check_rc=False).returncode == 0


def q01_readme_quickstart(s):
    """The README's quickstart blocks, as written, on the real cluster: the install serves admission, the update
    keeps the pods (UIDs) and changes the image, the abort of a held update ends in a native rollout (new pods),
    and the uninstall leaves no webhook configuration and no release."""
    blocks = readme_blocks(s.source)
    tc.uninstall_as_readme_says(s)  # the suite's release: the README installs its own under the same name
    app = tc.App(s, NS)
    app.setup_namespace()
    sh = Shell(s, blocks)
    try:
        sh.run("install")
        check(release_installed(s), "no release after the README's helm install")
        s.wait_webhook_ready()
        for p in s.webhook_pods() + s.controller_pods():
            check(all(c["image"] == s.image for c in p["spec"]["containers"]),
                  "webhook pod %s runs %s, not the cluster's %s" % (p["metadata"]["name"], images(p), s.image))

        sh.run("opt-in")
        pods = app.pods()
        check(len(pods) == 2 and all(is_ready(p) and images(p)["app"] == tc.V1 for p in pods),
              "after opt-in: %s" % [(p["metadata"]["name"], images(p), is_ready(p)) for p in pods])
        before = {p["metadata"]["uid"] for p in pods}

        out = sh.run("update")
        check("in-place update: 2 pods will be updated" in out.stderr, "kubectl set image printed: %r" % out.stderr)

        out = sh.run("watch")  # `kubectl inplace status --watch` exited 0: the update completed
        check("successfully rolled out" in out.stdout, "rollout status said: %r" % out.stdout)
        pods = app.pods()
        check({p["metadata"]["uid"] for p in pods} == before, "the in-place update replaced pods: %s -> %s"
              % (sorted(before), sorted(p["metadata"]["uid"] for p in pods)))
        check(all(images(p)["app"] == tc.V2 and state_of(p) == "Normal" for p in pods),
              "after the update: %s" % [(images(p), state_of(p)) for p in pods])
        check(all(c.get("restartCount") == 1 for p in pods for c in p["status"]["containerStatuses"]),
              "the kubelet did not restart the app container once in each pod")
        check(all(n in out.stdout for n in (p["metadata"]["name"] for p in pods)), "kubectl get pods: %s" % out.stdout)

        out = sh.run("abort")
        check("condition met" in out.stdout, "kubectl wait saw no pod in PreparingUpdate: %r" % out.stdout)
        check(tc.HANDLER_LABEL in out.stdout, "kubectl inplace status names no hook label: %r" % out.stdout)
        check(app.events_with("InPlaceUpdateAborted", "Deployment", wait=tc.EVENT_WAIT),
              "no InPlaceUpdateAborted Event")
        d = app.deployment()
        check(not d["spec"].get("paused") and IN_PROGRESS not in annotations_of(d),
              "not handed back to the native rollout: paused %s, %s" % (d["spec"].get("paused"), annotations_of(d)))
        # The block's last `kubectl rollout status` returned: the native rollout is done, as the README says.
        check(app.rollout_complete(), "the README's rollout status returned before the native rollout finished: %s"
              % [(p["metadata"]["name"], images(p), is_ready(p)) for p in app.pods()])
        pods = app.pods()
        check(not {p["metadata"]["uid"] for p in pods} & before, "the native rollout kept pods: %s"
              % [p["metadata"]["name"] for p in pods])
        check(all(images(p)["app"] == tc.V1 for p in pods), "after the abort: %s" % [images(p) for p in pods])

        started = time.time()
        sh.run("uninstall")
        s.uninstalls.append((started, time.time()))
        check(not release_installed(s), "helm still lists the release after the README's uninstall")
        left = []
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations", "clusterroles",
                     "clusterrolebindings", "validatingadmissionpolicies", "validatingadmissionpolicybindings"):
            left += [o for o in s.tools.kubectl("get", kind, "-o", "name").stdout.split() if tc.RELEASE in o]
        check(not left, "left after the README's uninstall: %s" % left)
        check(s.api.get_or_none("/api/v1/namespaces/" + tc.RELEASE_NS) is None, "namespace %s is still there"
              % tc.RELEASE_NS)
        wait_for(lambda: all(is_ready(p) for p in app.pods()), 30, "the demo's pods Ready with nothing of ours", app)

        sh.run("cleanup")
        wait_for(lambda: not live(s.api.items(ns_path(NS, "pods"), labelSelector="app=web")), 60,
                 "the demo's pods gone", app)
        print("  quickstart: %.0f s in the README's blocks (%s)"
              % (sum(sh.times.values()), ", ".join("%s %.0f s" % kv for kv in sh.times.items())), flush=True)
    finally:
        # The suite's own release again, for the scenarios that follow (c14 uninstalls it last).
        if release_installed(s):
            started = time.time()
            s.tools.kubectl("delete", "mutatingwebhookconfiguration/" + tc.RELEASE,
                            "validatingwebhookconfiguration/" + tc.RELEASE, "--ignore-not-found")
            s.tools.helm("uninstall", tc.RELEASE, "-n", tc.RELEASE_NS, "--wait", "--timeout", "120s", timeout=180)
            s.uninstalls.append((started, time.time()))
        s.tools.kubectl("delete", "namespace", tc.RELEASE_NS, "--ignore-not-found", "--wait=true", timeout=180)
        s.install()


SCENARIOS = [q01_readme_quickstart]
