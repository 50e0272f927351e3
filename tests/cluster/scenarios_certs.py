"""Real-cluster scenarios of issue 13 item 7 (DESIGN.md §9.7): the certificates of certificates.mode=controller,
the chart's default, kept and rotated by the controller pods."""
import base64
import hashlib
import os
import re
import subprocess
import tempfile
import threading
import time

import test_cluster as tc
from kube import Api, ApiError, check, ns_path, wait_for

SECRET = "inplace-webhook-tls"
CONFIG = "inplace-webhook"
IN_PROGRESS = "inplace-webhook.io/in-progress"


def secret_data(s):
    sec = s.api.get(ns_path(tc.RELEASE_NS, "secrets", SECRET))
    return {k: base64.b64decode(v).decode() for k, v in (sec.get("data") or {}).items()}


def pems(text):
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text or "", re.S)


def fingerprint(pem):
    body = "".join(pem.strip().splitlines()[1:-1])
    return hashlib.sha256(base64.b64decode(body)).hexdigest()[:16]


def ca_bundles(s):
    """{webhook name: [CA fingerprints]} of every webhook in both configurations, as the API server reads them."""
    out = {}
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        cfg = s.api.get("/apis/admissionregistration.k8s.io/v1/%s/%s" % (kind, CONFIG))
        for w in cfg.get("webhooks") or []:
            b64 = (w.get("clientConfig") or {}).get("caBundle") or ""
            out[w["name"]] = [fingerprint(p) for p in pems(base64.b64decode(b64).decode())]
    return out


def verifies(cert, cas):
    """openssl verify: `cert` chains to one of `cas` (PEM texts)."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "ca.crt"), "w") as f:
            f.write("\n".join(cas) + "\n")
        with open(os.path.join(d, "tls.crt"), "w") as f:
            f.write(cert)
        p = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "ca.crt"), os.path.join(d, "tls.crt")],
                           capture_output=True, text=True)
        return p.returncode == 0


class AdmissionSampler:
    """Server-side dry-run updates of an opted-in Deployment, back to back, through both fail-closed Deployment
    webhooks: an allowed change (must be admitted), and a hand edit of in-progress with no update running, which
    the mutating webhook takes out again (DESIGN.md §4a), so the dry-run's answer shows that the webhook itself
    answered. Anything else, a "failed calling webhook" above all, is a failure."""

    def __init__(self, s, ns, name):
        self.api = Api(s.env, "admin")
        self.path = ns_path(ns, "deployments", name, group="apps/v1")
        self.samples, self.failures = [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, i):
        allowed = i % 2 == 0
        ann = {"h07.example.com/sample": str(i)} if allowed else {IN_PROGRESS: '{"by":"hand"}'}
        try:
            out = self.api.request("PATCH", self.path, {"metadata": {"annotations": ann}},
                                   ctype="application/merge-patch+json", query={"dryRun": "All"})
            kept = ((out.get("metadata") or {}).get("annotations") or {}).get(IN_PROGRESS)
            if not allowed and kept == ann[IN_PROGRESS]:
                return "a hand edit of in-progress was admitted unchanged (the mutating webhook did not run)"
            return None
        except ApiError as e:
            return str(e)[:300]
        except OSError as e:
            return "transport: %s" % e

    def _run(self):
        i = 0
        while not self.stop.is_set():
            err = self._one(i)
            self.samples.append(time.time())
            if err:
                self.failures.append((time.time(), err))
            i += 1
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


def h07_ca_rotation_without_a_failed_request(s):
    """certificates.mode=controller (the default): the controller pods keep the CA and serving certificate in the
    Secret and the CA in every caBundle; a CA rotation (the inplace-webhook.io/rotate-ca trigger) stages the new CA
    in caBundle next to the old one, then signs the serving certificate with it, then drops the old CA, and the
    API server's calls to the fail-closed Deployment webhooks never fail in between."""
    overlap = 20
    s.install(extra=["--set", "certificates.controller.overlapSeconds=%d" % overlap,
                     "--set", "certificates.controller.checkIntervalSeconds=2"], upgrade=True)
    app = tc.App(s, "h07")
    app.create(tc.deployment("web", replicas=1))
    d0 = secret_data(s)
    ca0 = d0.get("ca.crt", "")
    check(ca0 and d0.get("tls.crt") and d0.get("tls.key") and d0.get("ca.key"),
          "the controller filled the Secret: keys %s" % sorted(d0))
    check(verifies(d0["tls.crt"], [ca0]), "tls.crt is signed by ca.crt")
    check("ca-next.crt" not in d0 and "ca-previous.crt" not in d0, "no rotation under way: keys %s" % sorted(d0))
    fp0 = fingerprint(ca0)
    wait_for(lambda: all(v == [fp0] for v in ca_bundles(s).values()), 30, "every caBundle to be the CA of the Secret")
    print("    CA before: %s, caBundle of %d webhooks" % (fp0, len(ca_bundles(s))))

    timeline = []
    with AdmissionSampler(s, app.ns, "web") as sampler:
        wait_for(lambda: len(sampler.samples) >= 20, 30, "admission samples before the rotation")
        t0 = time.time()
        s.api.merge_patch(ns_path(tc.RELEASE_NS, "secrets", SECRET),
                          {"metadata": {"annotations": {"inplace-webhook.io/rotate-ca": str(int(t0))}}})
        # 1. staged: the new CA next to the old one in the Secret and in every caBundle; tls.crt unchanged.
        wait_for(lambda: "ca-next.crt" in secret_data(s), 30, "the new CA to be staged in the Secret")
        d1 = secret_data(s)
        fp1 = fingerprint(d1["ca-next.crt"])
        check(fp1 != fp0 and d1["ca.crt"] == ca0 and d1["tls.crt"] == d0["tls.crt"],
              "staging changes neither the current CA nor the serving certificate")
        wait_for(lambda: all(sorted(v) == sorted([fp0, fp1]) for v in ca_bundles(s).values()), 30,
                 "every caBundle to trust both CAs")
        timeline.append(("staged; caBundle holds old and new CA", time.time() - t0))
        # 2. promoted after the overlap: the new CA signs a new serving certificate; the old CA stays trusted.
        wait_for(lambda: fingerprint(secret_data(s).get("ca.crt", "")) == fp1, overlap + 60,
                 "the new CA to become current")
        d2 = secret_data(s)
        check(time.time() - t0 >= overlap, "promoted only after the overlap (%.1f s)" % (time.time() - t0))
        check(d2["tls.crt"] != d0["tls.crt"] and verifies(d2["tls.crt"], [d2["ca.crt"]])
              and not verifies(d2["tls.crt"], [ca0]), "the new serving certificate is signed by the new CA only")
        check(fingerprint(d2.get("ca-previous.crt", "")) == fp0, "the old CA is kept as ca-previous.crt")
        check(all(sorted(v) == sorted([fp0, fp1]) for v in ca_bundles(s).values()),
              "caBundle still trusts both CAs: %s" % ca_bundles(s))
        timeline.append(("promoted; new serving certificate", time.time() - t0))
        # 3. the old CA dropped another overlap later: caBundle is the new CA only, and the webhook pods still
        # answer (so they serve the new certificate: the API server no longer trusts the old one).
        wait_for(lambda: "ca-previous.crt" not in secret_data(s), overlap + 60, "the old CA to be dropped")
        wait_for(lambda: all(v == [fp1] for v in ca_bundles(s).values()), 30, "every caBundle to be the new CA only")
        timeline.append(("old CA dropped; caBundle holds the new CA only", time.time() - t0))
        n = len(sampler.samples)
        wait_for(lambda: len(sampler.samples) >= n + 40, 60, "admission samples after the old CA left caBundle")
        t_end = time.time()
    for what, at in timeline:
        print("    %6.1f s  %s" % (at, what))
    during = [t for t in sampler.samples if t0 <= t <= t_end]
    print("    admission samples during the rotation: %d, failures: %d" % (len(during), len(sampler.failures)))
    kinds = {}
    for _, err in sampler.failures:
        kinds[err[:120]] = kinds.get(err[:120], 0) + 1
    for err, n in kinds.items():
        print("      %5d x %s" % (n, err))
    check(not sampler.failures, "admission failed during the rotation: %s" % sampler.failures[:5])
    check(len(during) >= 100, "too few samples to show anything: %d" % len(during))
    check(all(v for v in ca_bundles(s).values()), "every webhook has a caBundle")


def h07b_helm_upgrade_keeps_the_certificates(s):
    """helm upgrade (a chart change that rolls the pods) neither replaces the Secret's certificates nor wipes the
    caBundle the controller wrote: the chart never renders them."""
    before = secret_data(s)
    bundles = ca_bundles(s)
    check(all(bundles.values()), "every webhook has a caBundle before the upgrade: %s" % bundles)
    s.install(extra=["--set", "podAnnotations.upgraded=h07b"], upgrade=True)
    after = secret_data(s)
    check(after.get("ca.crt") == before.get("ca.crt") and after.get("tls.crt") == before.get("tls.crt"),
          "the upgrade replaced the certificates")
    check(ca_bundles(s) == bundles, "the upgrade changed the caBundle: %s -> %s" % (bundles, ca_bundles(s)))
    app = tc.App(s, "h07b")
    app.create(tc.deployment("web", replicas=1))
    app.kubectl("annotate", "deploy/web", "h07b.example.com/after-upgrade=1")


SCENARIOS = [h07_ca_rotation_without_a_failed_request, h07b_helm_upgrade_keeps_the_certificates]
