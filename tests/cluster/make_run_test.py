#!/usr/bin/env python3
"""q02: `make run` as a user runs it (issue 32), on a cluster of its own (INPLACE_CLUSTER_ID, default 5): started in
the background in its own process group as a terminal would, it must reach its ready line with the demo done in
place (the before and after tables show the same pod UIDs, the new image and one more restart; the update's Events
are printed); then the three commands it printed are run as written, with its `export` line: the image change waits
in the pre-update hook, `kubectl inplace status -w` keeps waiting until the printed release command drains the pods,
then exits 0 with every pod at the new image and the same UIDs. Ctrl-C (SIGINT to the process group) must take
everything down: the network namespace, the state directory and the pod cgroups are gone, and down.sh said nothing
was left.

    python3 tests/cluster/make_run_test.py BUILD      (as root, from anywhere)

Prints `make run: N passed, M failed` last; exits 1 on a failure.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLUSTER_ID = os.environ.get("INPLACE_CLUSTER_ID", "5")


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


class Output:
    """The lines `make run` prints, collected by a thread as they come."""

    def __init__(self, proc):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))
            print("  | " + line.rstrip("\n"), flush=True)

    def text(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout, proc):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.text(), re.M)
            if m:
                return m
            if proc.poll() is not None:
                time.sleep(0.5)  # the reader's last lines
                m = re.search(pattern, self.text(), re.M)
                if m:
                    return m
                raise Failure("make run exited (%d) before printing %r" % (proc.returncode, pattern))
            time.sleep(0.5)
        raise Failure("make run printed no %r in %d s" % (pattern, timeout))


def table(text, heading):
    """{pod: {uid, node, image, restarts}} from the table under `heading:` (POD UID NODE IMAGE RESTARTS STATE)."""
    lines = text.split("\n")
    i = lines.index(heading + ":")
    rows = {}
    for line in lines[i + 2:]:
        if not line.startswith("  ") or line.startswith("  POD"):
            break
        f = line.split()
        rows[f[0]] = {"uid": f[1], "node": f[2], "image": f[3], "restarts": int(f[4])}
    return rows


def run_user_command(line, env, **kw):
    return subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, **kw)


def kubectl_json(env, *args):
    import json
    p = subprocess.run(["kubectl"] + list(args) + ["-o", "json"], env=env, capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0, "kubectl %s: %s" % (" ".join(args), p.stderr))
    return json.loads(p.stdout)


def pods(env):
    return kubectl_json(env, "get", "pods", "-n", "demo", "-l", "app=web")["items"]


def q02(build):
    env = dict(os.environ, INPLACE_CLUSTER_ID=CLUSTER_ID)
    netns = "/run/netns/inplace-cluster-%s" % CLUSTER_ID
    run_dir = "/var/lib/inplace-cluster-%s" % CLUSTER_ID
    check(not os.path.exists(netns), "cluster %s is already up" % CLUSTER_ID)
    started = time.time()
    # Ctrl-C as in a user's terminal: SIGINT at its default disposition. A test started as a simple background
    # command of a script inherits it ignored, and a shell that starts with SIGINT ignored cannot trap it: make run's
    # cleanup would never run (q02 failed so, "still up 120 s after Ctrl-C", when the suite was started that way).
    proc = subprocess.Popen(["make", "--no-print-directory", "run", "BUILD=" + build], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = Output(proc)
    try:
        out.wait_for(r"^make run: ready in \d+ s", 1500, proc)
        ready = time.time() - started
        text = out.text()
        before, after = table(text, "before"), table(text, "after")
        check(len(before) == 2 and sorted(before) == sorted(after), "pods before %s, after %s" % (before, after))
        for name, b in before.items():
            a = after[name]
            check(a["uid"] == b["uid"] and a["node"] == b["node"], "pod %s was recreated or moved: %s -> %s"
                  % (name, b, a))
            check(b["image"].endswith(":v1") and a["image"].endswith(":v2"), "pod %s image %s -> %s"
                  % (name, b["image"], a["image"]))
            check(a["restarts"] == b["restarts"] + 1, "pod %s restarts %d -> %d" % (name, b["restarts"],
                                                                                  a["restarts"]))
        events = text.split("Events of the update:", 1)[1]
        check("InPlaceUpdateCompleted" in events, "no InPlaceUpdateCompleted among the Events printed")

        # The printed commands, as written: the export line and the three after it.
        lines = text.split("\n")
        i = next(k for k, line in enumerate(lines) if line.strip().startswith("export KUBECONFIG="))
        export = lines[i].strip()
        commands = [re.sub(r"\s+#.*$", "", lines[i + k]).strip() for k in (1, 2, 3)]
        kv = dict(re.findall(r"(\w+)=(\S+)", export[len("export "):]))
        user_env = dict(os.environ, KUBECONFIG=kv["KUBECONFIG"],
                        PATH=kv["PATH"].replace("$PATH", os.environ["PATH"]))
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(user_env)}

        r = run_user_command(commands[0], user_env, timeout=60)
        check(r.returncode == 0, "%s: %s" % (commands[0], r.stderr))
        deadline = time.time() + 60
        while not any((p["metadata"].get("labels") or {}).get("inplace-webhook.io/state") == "PreparingUpdate"
                      for p in pods(user_env)):
            check(time.time() < deadline, "no pod waits in its pre-update hook after %r" % commands[0])
            time.sleep(0.5)
        watch = subprocess.Popen(["bash", "-c", commands[1]], env=user_env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        check(watch.poll() is None, "%r exited (%s) while the hook held the update" % (commands[1], watch.poll()))
        r = run_user_command(commands[2], user_env, timeout=60)
        check(r.returncode == 0, "%s: %s" % (commands[2], r.stderr))
        try:
            watched, _ = watch.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            watch.kill()
            raise Failure("%r did not end within 150 s of the release" % commands[1])
        check(watch.returncode == 0, "%r exited %d:\n%s" % (commands[1], watch.returncode, watched))
        final = pods(user_env)
        check({p["metadata"]["name"]: p["metadata"]["uid"] for p in final} == uids,
              "the pods changed: %s -> %s" % (uids, [(p["metadata"]["name"], p["metadata"]["uid"]) for p in final]))
        check(all(p["spec"]["containers"][0]["image"].endswith(":v1") for p in final), "not every pod at v1")
        print("q02: ready in %.0f s; the printed commands updated %d pods in place; Ctrl-C next" % (ready, len(final)),
              flush=True)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                subprocess.run([os.path.join(REPO, "cluster", "down.sh")], env=env)
                raise Failure("make run did not end within 120 s of Ctrl-C")
        out.thread.join(timeout=5)
    text = out.text()
    check("down: no process, mount, cgroup or network device of the cluster is left" in text,
          "make run did not report a clean cluster-down after Ctrl-C")
    left = [p for p in [netns, run_dir] if os.path.exists(p)]
    left += [d for d in ("/sys/fs/cgroup/%s/inplace-cluster-%s" % (h, CLUSTER_ID)
                         for h in os.listdir("/sys/fs/cgroup")) if os.path.exists(d)]
    check(not left, "left after Ctrl-C: %s" % left)


def main():
    build = os.path.abspath(sys.argv[1])
    t = time.time()
    try:
        q02(build)
        print("PASS q02_make_run_as_a_user_runs_it %.1f s" % (time.time() - t), flush=True)
        failed = 0
    except Exception as e:  # noqa: BLE001 - report it
        print("FAIL q02_make_run_as_a_user_runs_it %.1f s: %s" % (time.time() - t, e), flush=True)
        failed = 1
    print("make run: %d passed, %d failed" % (1 - failed, failed))
    return failed


if __name__ == "__main__":
    sys.exit(main())
