#!/usr/bin/env python3
"""Writes the three benchmark AdmissionReviews into OUT_DIR, built deterministically from the
recorded samples in tests/fixtures/recorded/:
  pod-5k.json        a ~5 KB opted-in Pod CREATE (the state label is stamped: a patch is produced)
  deploy-9k.json     a ~9 KB Deployment UPDATE on an opted-in Deployment whose previous rollout
                     finished, changing one template label: the full in-place path runs
  pod-256k.json      a ~256 KB opted-in Pod CREATE (large env and annotations)
and the fixed response nginx returns for each (an allowed v1 review with the same uid)."""
import copy
import json
import os
import sys

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rec = os.path.join(src, "tests", "fixtures", "recorded")
ENABLED = "inplace-webhook.io/enabled"


def write(name, review):
    body = json.dumps(review, separators=(",", ":"))
    open(os.path.join(out, name), "w").write(body)
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "response": {"uid": review["request"]["uid"], "allowed": True}}
    open(os.path.join(out, name.replace(".json", ".nginx-answer.json")), "w").write(json.dumps(answer))
    return len(body)


pod = json.load(open(os.path.join(rec, "kubewarden-pod-create.json")))
pod["request"]["uid"] = "bench-pod-5k"
pod["request"]["object"]["metadata"].setdefault("labels", {})[ENABLED] = "true"
k = 0
while len(json.dumps(pod, separators=(",", ":"))) < 5 * 1024:
    pod["request"]["object"]["metadata"].setdefault("annotations", {})[f"example.com/note-{k:03d}"] = "x" * 40
    k += 1
size5 = write("pod-5k.json", pod)

big = copy.deepcopy(pod)
big["request"]["uid"] = "bench-pod-256k"
c0 = big["request"]["object"]["spec"]["containers"][0]
c0["env"] = [{"name": f"VAR_{i:05d}", "value": "x" * 40} for i in range(3000)]
ann = big["request"]["object"]["metadata"].setdefault("annotations", {})
i = 0
while len(json.dumps(big, separators=(",", ":"))) < 256 * 1024:
    ann[f"example.com/key-{i:05d}"] = "v" * 60
    i += 1
size256 = write("pod-256k.json", big)

dep = json.load(open(os.path.join(rec, "kubewarden-deployment-update.json")))
req = dep["request"]
req["uid"] = "bench-deploy-9k"
for obj in (req["object"], req["oldObject"]):
    obj["metadata"].pop("managedFields", None)
    obj["metadata"].setdefault("labels", {})[ENABLED] = "true"
    obj["spec"]["template"]["metadata"].setdefault("labels", {})[ENABLED] = "true"
    obj["spec"]["paused"] = False
    obj["spec"]["replicas"] = 3
    gen = obj["metadata"].get("generation", 1)
    st = obj.setdefault("status", {})
    st.update({"observedGeneration": gen, "replicas": obj["spec"].get("replicas", 1),
               "updatedReplicas": obj["spec"].get("replicas", 1),
               "readyReplicas": obj["spec"].get("replicas", 1),
               "availableReplicas": obj["spec"].get("replicas", 1)})
req["oldObject"]["metadata"]["generation"] = req["object"]["metadata"]["generation"] - 1
req["oldObject"]["status"]["observedGeneration"] = req["oldObject"]["metadata"]["generation"]
req["object"]["spec"]["template"]["metadata"]["labels"]["release"] = "canary-2"
req["userInfo"] = {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}
# Pad the two objects' annotations to reach ~9 KB, as a kubectl-applied Deployment would be.
pad = 0
while len(json.dumps(dep, separators=(",", ":"))) < 9 * 1024:
    for obj in (req["object"], req["oldObject"]):
        obj["metadata"].setdefault("annotations", {})[f"example.com/owner-{pad:03d}"] = "team-platform"
    pad += 1
size9 = write("deploy-9k.json", dep)
print(f"pod-5k {size5} B, deploy-9k {size9} B, pod-256k {size256} B")
