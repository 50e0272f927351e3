#!/usr/bin/env python3
"""The release artifacts agree on one version (README "Releasing"; issue 15 item 3).

    python3 tests/release/test_release.py SOURCE_DIR WORK_DIR

Runs release/release.sh (the Release build in SOURCE_DIR/build-release, reused when it is there) into
WORK_DIR/out, then reads every artifact back, as a user of each would see it:
  - the chart .tgz: inplace-webhook/Chart.yaml's version and appVersion;
  - the image archive: index.json's names (containerd's image name, the OCI ref.name tag), the config's
    org.opencontainers.image.version label, and `--version` of the binary taken out of the image's layer;
  - the plugin archive (required once the kubectl-inplace target exists): `kubectl-inplace version` of the
    binary in it, and the krew manifest's version and sha256;
  - SHA256SUMS: `sha256sum -c` passes, and fails once an artifact is changed;
and that the release script refuses a version that the chart or the binary does not carry.
Prints `ok - ...` / `FAIL - ...` per check; exits 1 if any failed.
"""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time

import yaml

SOURCE, WORK = (os.path.abspath(a) for a in sys.argv[1:3])
RELEASE = os.path.join(SOURCE, "release", "release.sh")
BUILD = os.path.join(SOURCE, "build-release")  # release.sh's default, reused
VERSION = open(os.path.join(SOURCE, "VERSION")).readline().strip()
failed = []


def case(name, errors):
    print(("ok - " if not errors else "FAIL - ") + name, flush=True)
    for e in errors:
        print("    " + e)
    if errors:
        failed.append(name)


def release(*args, out):
    return subprocess.run(["bash", RELEASE, "--out", out] + list(args), capture_output=True, text=True, timeout=1500)


def blob(tar, digest):
    return tar.extractfile("blobs/sha256/" + digest.split(":", 1)[1]).read()


def check_chart(path):
    errors = []
    with tarfile.open(path) as t:
        meta = yaml.safe_load(t.extractfile("inplace-webhook/Chart.yaml"))
    for key in ("version", "appVersion"):
        if str(meta.get(key)) != VERSION:
            errors.append("Chart.yaml %s in %s is %r, VERSION is %s" % (key, os.path.basename(path), meta.get(key),
                                                                         VERSION))
    return errors


def check_image(path, scratch):
    errors = []
    with tarfile.open(path) as t:
        index = json.loads(t.extractfile("index.json").read())
        names = [(m.get("annotations") or {}) for m in index["manifests"]]
        want = {"io.containerd.image.name": "localhost/inplace-webhook:" + VERSION,
                "org.opencontainers.image.ref.name": VERSION}
        if names != [want]:
            errors.append("index.json names %s, want %s" % (names, [want]))
        manifest = json.loads(blob(t, index["manifests"][0]["digest"]))
        config = json.loads(blob(t, manifest["config"]["digest"]))
        labels = config.get("config", {}).get("Labels") or {}
        if labels.get("org.opencontainers.image.version") != VERSION:
            errors.append("label org.opencontainers.image.version is %r"
                          % labels.get("org.opencontainers.image.version"))
        for key in ("org.opencontainers.image.revision", "org.opencontainers.image.source"):
            if not labels.get(key):
                errors.append("no label " + key)
        binary = None
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(t, layer["digest"])))) as lt:
                for m in lt.getmembers():
                    if m.name.lstrip("./") == "usr/local/bin/inplace-webhook":
                        binary = lt.extractfile(m).read()
    if binary is None:
        return errors + ["no /usr/local/bin/inplace-webhook in the image's layers"]
    exe = os.path.join(scratch, "inplace-webhook-from-image")
    with open(exe, "wb") as f:
        f.write(binary)
    os.chmod(exe, 0o755)
    got = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if got != "inplace-webhook " + VERSION:
        errors.append("the image's binary --version says %r" % got)
    return errors


def check_plugin(out, scratch):
    errors = []
    name = "kubectl-inplace_%s_linux_amd64.tar.gz" % VERSION
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return ["no " + name]
    d = os.path.join(scratch, "plugin")
    os.makedirs(d)
    with tarfile.open(path) as t:
        names = t.getnames()
        if any(n.startswith("/") or ".." in n.split("/") for n in names):
            return ["%s has a member outside its directory: %s" % (name, names)]
        t.extractall(d)
    exe = os.path.join(d, "kubectl-inplace")
    if not os.access(exe, os.X_OK):
        return errors + ["no executable kubectl-inplace at the top of " + name]
    got = subprocess.run([exe, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
    if VERSION not in got.split() and "v" + VERSION not in got.split():
        errors.append("kubectl-inplace version says %r" % got)
    manifest = yaml.safe_load(open(os.path.join(out, "inplace.yaml")))
    if manifest["spec"]["version"] != "v" + VERSION:
        errors.append("krew manifest version %r" % manifest["spec"]["version"])
    platform = manifest["spec"]["platforms"][0]
    if platform["sha256"] != hashlib.sha256(open(path, "rb").read()).hexdigest():
        errors.append("krew manifest sha256 is not the archive's")
    if not platform["uri"].endswith("/" + name) or platform["bin"] != "kubectl-inplace":
        errors.append("krew manifest uri/bin: %s %s" % (platform["uri"], platform["bin"]))
    return errors


def check_sums(out, scratch):
    errors = []
    listed = sorted(line.split()[1] for line in open(os.path.join(out, "SHA256SUMS")))
    present = sorted(f for f in os.listdir(out) if f != "SHA256SUMS")
    if listed != present:
        errors.append("SHA256SUMS lists %s, the directory holds %s" % (listed, present))
    p = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    if p.returncode != 0:
        errors.append("sha256sum -c: " + p.stdout + p.stderr)
    # The check can fail: one changed byte in a copy of the chart.
    copy = os.path.join(scratch, "tampered")
    shutil.copytree(out, copy)
    chart = os.path.join(copy, "inplace-webhook-%s.tgz" % VERSION)
    data = bytearray(open(chart, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(chart, "wb").write(bytes(data))
    if subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=copy, capture_output=True).returncode == 0:
        errors.append("sha256sum -c passed on a changed chart archive")
    return errors


def refusals(scratch):
    """A version the chart or the binary does not carry is refused before anything is written."""
    errors = []
    other = "9%s" % VERSION  # 0.1.0 -> 90.1.0
    chart = os.path.join(scratch, "chart", "inplace-webhook")
    shutil.copytree(os.path.join(SOURCE, "charts", "inplace-webhook"), chart)
    meta_path = os.path.join(chart, "Chart.yaml")
    meta = open(meta_path).read()
    cases = [
        ("--version %s with the chart at %s" % (other, VERSION), ["--version", other], None, "Chart.yaml version"),
        ("a chart whose appVersion is %s" % other, ["--chart", chart],
         meta.replace('appVersion: "%s"' % VERSION, 'appVersion: "%s"' % other), "Chart.yaml appVersion"),
        ("chart and --version at %s, the binary at %s" % (other, VERSION), ["--chart", chart, "--version", other],
         meta.replace(VERSION, other), "--version says 'inplace-webhook %s'" % VERSION),
    ]
    for i, (what, args, chart_text, message) in enumerate(cases):
        if chart_text is not None:
            if chart_text == meta:
                errors.append("%s: could not make the mismatching Chart.yaml" % what)
                continue
            open(meta_path, "w").write(chart_text)
        out = os.path.join(scratch, "refused-%d" % i)
        p = release(*args, out=out)
        if p.returncode == 0 or "refused" not in p.stderr or message not in p.stderr:
            errors.append("%s: exit %d, stderr %r (want a refusal naming %r)" % (what, p.returncode, p.stderr[-400:],
                                                                                   message))
        if os.path.exists(out):
            errors.append("%s: the refused release wrote %s" % (what, out))
    return errors


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    out = os.path.join(WORK, "out")
    started = time.time()
    p = release(out=out)
    took = time.time() - started
    case("release.sh %s (%.0f s)" % (VERSION, took),
         [] if p.returncode == 0 else ["exit %d:\n%s%s" % (p.returncode, p.stdout, p.stderr)])
    if p.returncode != 0:
        return 1
    print(p.stdout, end="")
    scratch = os.path.join(WORK, "scratch")
    os.makedirs(scratch)
    case("the chart archive carries %s" % VERSION, check_chart(os.path.join(out, "inplace-webhook-%s.tgz" % VERSION)))
    case("the image archive carries %s (names, label, the binary's --version)" % VERSION,
         check_image(os.path.join(out, "inplace-webhook-%s.tar" % VERSION), scratch))
    targets = subprocess.run(["cmake", "--build", BUILD, "--target", "help"], capture_output=True, text=True).stdout
    if "... kubectl-inplace" in targets.splitlines():
        case("the plugin archive carries %s (kubectl-inplace version, krew manifest)" % VERSION,
             check_plugin(out, scratch))
    else:
        print("skip - the plugin archive (no kubectl-inplace target in this tree yet)")
    case("SHA256SUMS covers every artifact and verifies (and fails on a changed byte)", check_sums(out, scratch))
    case("a version the chart or the binary does not carry is refused", refusals(scratch))
    print("%d failed" % len(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
