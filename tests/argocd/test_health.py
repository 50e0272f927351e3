#!/usr/bin/env python3
"""The chart's Argo CD health check (charts/inplace-webhook/argocd/health.lua) run by a real Lua 5.1 interpreter
on Deployments captured from the real cluster by r09 (fixtures/r09-*.json: before, during, stalled, resumed,
after an in-place update) and on hand-made native Deployments for Argo CD's own branches. Fails when lua5.1 is
not installed (`make deps` installs it)."""

import copy
import glob
import json
import os
import sys
import unittest

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import health_lua  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# label -> (status, text the message contains)
CAPTURED = {
    "before": ("Healthy", ""),
    "during": ("Progressing", "in-place update: 0/3 pods updated to template"),
    "stalled": ("Degraded", "in-place update has timed out progressing"),
    "resumed": ("Progressing", "in-place update:"),
    "after": ("Healthy", ""),
}


def load(label):
    with open(os.path.join(FIXTURES, "r09-%s.json" % label)) as f:
        return json.load(f)


class Captured(unittest.TestCase):
    def test_every_capture_is_checked(self):
        labels = sorted(os.path.basename(p)[4:-5] for p in glob.glob(os.path.join(FIXTURES, "r09-*.json")))
        self.assertEqual(labels, sorted(CAPTURED))

    def test_captured(self):
        for label, (status, text) in CAPTURED.items():
            with self.subTest(label):
                got, message = health_lua.health(load(label))
                self.assertEqual(got, status, message)
                self.assertIn(text, message)


class ArgoOwnLogic(unittest.TestCase):
    """Without an in-place update the check is Argo CD's (gitops-engine health_deployment.go)."""

    def native(self, **status):
        d = copy.deepcopy(load("after"))
        d["metadata"].get("annotations", {}).pop("inplace-webhook.io/in-progress", None)
        d["status"].update(status)
        return d

    def test_branches(self):
        stalled = self.native()
        stalled["status"]["conditions"] = [{"type": "Progressing", "status": "False",
                                            "reason": "ProgressDeadlineExceeded", "message": "x"}]
        paused = self.native()
        paused["spec"]["paused"] = True
        unobserved = self.native(observedGeneration=1)
        unobserved["metadata"]["generation"] = 2
        user_paused = copy.deepcopy(load("during"))
        user_paused["metadata"]["annotations"]["inplace-webhook.io/in-progress"] = \
            '{"from":"a","to":"b","pausedByUs":false,"startedAt":"2026-01-01T00:00:00Z"}'
        cases = [
            ("healthy", self.native(), "Healthy", ""),
            ("paused", paused, "Suspended", "Deployment is paused"),
            ("a user's pause during our update", user_paused, "Suspended", "Deployment is paused"),
            ("deadline", stalled, "Degraded", 'Deployment "web" exceeded its progress deadline'),
            ("new replicas", self.native(updatedReplicas=1), "Progressing",
             "Waiting for rollout to finish: 1 out of 3 new replicas have been updated..."),
            ("old replicas", self.native(replicas=4), "Progressing",
             "Waiting for rollout to finish: 1 old replicas are pending termination..."),
            ("available", self.native(availableReplicas=2), "Progressing",
             "Waiting for rollout to finish: 2 of 3 updated replicas are available..."),
            ("generation", unobserved, "Progressing",
             "Waiting for rollout to finish: observed deployment generation less then desired generation"),
        ]
        for name, d, status, message in cases:
            with self.subTest(name):
                self.assertEqual(health_lua.health(d), (status, message))

    def test_strings_survive_the_conversion(self):
        d = self.native()
        d["metadata"]["name"] = 'we"b\\\u00e9'
        d["status"]["conditions"] = [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]
        self.assertEqual(health_lua.health(d)[1], 'Deployment "we\\"b\\\\\u00e9" exceeded its progress deadline')


if __name__ == "__main__":
    if health_lua.interpreter() is None:
        print("FAIL - lua5.1 is not installed (Debian package lua5.1; `make deps` installs it)")
        sys.exit(1)
    unittest.main()
