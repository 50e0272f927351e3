#!/usr/bin/env python3
"""Unit tests of oci_image.py: determinism, one manifest for several tags, layer contents, archive structure.

    python3 cluster/images/test_oci_image.py
"""

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import oci_image  # noqa: E402


def sample_image(host_file: str, body: str = "hello\n", reverse: bool = False) -> oci_image.Image:
    img = oci_image.Image(oci_image.Config(
        entrypoint=["/usr/local/bin/app"], cmd=["serve"], env=["PATH=/usr/local/bin"], user="65532:65532",
        workdir="/", exposed_ports=["8443/tcp", "8080"], labels={"org.opencontainers.image.version": "1.2.3"},
        architecture="amd64"))
    layer = img.layer()
    adds = [
        lambda: layer.copy("/usr/local/bin/app", host_file),
        lambda: layer.dir("/tmp", 0o1777),
        lambda: layer.dir("/home/nonroot", 0o700, 65532, 65532),
        lambda: layer.text("/srv/www/index.html", body),
        lambda: layer.symlink("/bin/sh", "busybox"),
        lambda: layer.file("/bin/busybox", b"\x7fELF", 0o755),
    ]
    for add in reversed(adds) if reverse else adds:
        add()
    return img


def read_archive(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}


def blob(files: dict[str, bytes], digest: str) -> bytes:
    return files["blobs/sha256/" + digest.split(":", 1)[1]]


class OciImageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.host_file = os.path.join(self.tmp.name, "app")
        with open(self.host_file, "wb") as f:
            f.write(b"#!/bin/sh\necho app\n")
        os.chmod(self.host_file, 0o750)

    def tearDown(self):
        self.tmp.cleanup()

    def test_same_inputs_same_bytes_and_digest(self):
        a, ra = sample_image(self.host_file).archive(["localhost/app:1"])
        b, rb = sample_image(self.host_file, reverse=True).archive(["localhost/app:1"])
        self.assertEqual(a, b)
        self.assertEqual(ra.manifest_digest, rb.manifest_digest)
        os.utime(self.host_file, (1, 1))  # the host file's mtime does not matter
        c, rc = sample_image(self.host_file).archive(["localhost/app:1"])
        self.assertEqual(a, c)
        _, rd = sample_image(self.host_file, body="changed\n").archive(["localhost/app:1"])
        self.assertNotEqual(ra.manifest_digest, rd.manifest_digest)

    def test_write_matches_archive(self):
        out = os.path.join(self.tmp.name, "app.tar")
        result = sample_image(self.host_file).write(out, ["localhost/app:1"])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), sample_image(self.host_file).archive(["localhost/app:1"])[0])
        self.assertEqual(result.archive, out)
        self.assertEqual(result.archive_size, os.path.getsize(out))
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["app", "app.tar"])  # no temporary file left

    def test_two_tags_one_manifest(self):
        data, result = sample_image(self.host_file).archive(["localhost/httpd-demo:v2", "localhost/httpd-demo:v2.0.1"])
        files = read_archive(data)
        index = json.loads(files["index.json"])
        self.assertEqual(index["schemaVersion"], 2)
        self.assertEqual(index["mediaType"], oci_image.MEDIA_INDEX)
        self.assertEqual([m["digest"] for m in index["manifests"]], [result.manifest_digest] * 2)
        self.assertEqual([m["annotations"] for m in index["manifests"]], [
            {"io.containerd.image.name": "localhost/httpd-demo:v2", "org.opencontainers.image.ref.name": "v2"},
            {"io.containerd.image.name": "localhost/httpd-demo:v2.0.1", "org.opencontainers.image.ref.name": "v2.0.1"},
        ])
        for m in index["manifests"]:
            self.assertEqual(m["mediaType"], oci_image.MEDIA_MANIFEST)
            self.assertEqual(m["platform"], {"architecture": "amd64", "os": "linux"})
            self.assertEqual(m["size"], len(blob(files, m["digest"])))
        manifests = [n for n, b in files.items() if b and b"\"schemaVersion\":2" in b and n.startswith("blobs/")]
        self.assertEqual(len(manifests), 1)
        # The manifest is the same bytes as with one tag: tags live in index.json only.
        _, single = sample_image(self.host_file).archive(["localhost/httpd-demo:v2"])
        self.assertEqual(single.manifest_digest, result.manifest_digest)

    def test_archive_structure_and_digests(self):
        data, result = sample_image(self.host_file).archive(["localhost/app:1"])
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = tar.getmembers()
        self.assertEqual([m.name for m in members][:2], ["blobs", "blobs/sha256"])
        self.assertEqual([m.name for m in members][-2:], ["index.json", "oci-layout"])
        self.assertTrue(all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members))
        files = read_archive(data)
        self.assertEqual(json.loads(files["oci-layout"]), {"imageLayoutVersion": "1.0.0"})
        for name, content in files.items():
            if name.startswith("blobs/sha256/") and content is not None:
                self.assertEqual(hashlib.sha256(content).hexdigest(), name.rsplit("/", 1)[1])
        manifest = json.loads(blob(files, result.manifest_digest))
        self.assertEqual(manifest["mediaType"], oci_image.MEDIA_MANIFEST)
        self.assertEqual(manifest["config"]["mediaType"], oci_image.MEDIA_CONFIG)
        config = json.loads(blob(files, manifest["config"]["digest"]))
        self.assertEqual(config["created"], "1970-01-01T00:00:00Z")
        self.assertEqual((config["architecture"], config["os"]), ("amd64", "linux"))
        self.assertEqual(config["config"], {
            "Entrypoint": ["/usr/local/bin/app"], "Cmd": ["serve"], "Env": ["PATH=/usr/local/bin"],
            "User": "65532:65532", "WorkingDir": "/", "ExposedPorts": {"8443/tcp": {}, "8080/tcp": {}},
            "Labels": {"org.opencontainers.image.version": "1.2.3"}})
        self.assertEqual(len(manifest["layers"]), 1)
        layer = manifest["layers"][0]
        self.assertEqual(layer["mediaType"], oci_image.MEDIA_LAYER_GZIP)
        gz = blob(files, layer["digest"])
        self.assertEqual(layer["size"], len(gz))
        self.assertEqual(gz[4:8], b"\0\0\0\0")  # gzip header mtime
        self.assertEqual(gz[3] & 0x08, 0)  # no file name in the gzip header
        self.assertEqual(config["rootfs"], {"type": "layers",
                                            "diff_ids": ["sha256:" + hashlib.sha256(gzip.decompress(gz)).hexdigest()]})

    def test_layer_lists_files_with_modes(self):
        data, result = sample_image(self.host_file).archive(["localhost/app:1"])
        gz = blob(read_archive(data), result.layers[0]["digest"])
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(gz))) as tar:
            members = {m.name: m for m in tar.getmembers()}
            order = [m.name for m in tar.getmembers()]
            app = tar.extractfile("usr/local/bin/app").read()
        self.assertEqual(order, sorted(order, key=lambda n: n.split("/")))
        expect = {
            "bin": ("dir", 0o755, 0), "bin/busybox": ("file", 0o755, 0), "bin/sh": ("sym", 0o777, 0),
            "home": ("dir", 0o755, 0), "home/nonroot": ("dir", 0o700, 65532),
            "srv": ("dir", 0o755, 0), "srv/www": ("dir", 0o755, 0), "srv/www/index.html": ("file", 0o644, 0),
            "tmp": ("dir", 0o1777, 0), "usr": ("dir", 0o755, 0), "usr/local": ("dir", 0o755, 0),
            "usr/local/bin": ("dir", 0o755, 0), "usr/local/bin/app": ("file", 0o750, 0),
        }
        self.assertEqual(set(members), set(expect))
        for name, (kind, mode, owner) in expect.items():
            m = members[name]
            self.assertEqual({"dir": m.isdir(), "file": m.isfile(), "sym": m.issym()}[kind], True, name)
            self.assertEqual(m.mode, mode, name)
            self.assertEqual((m.uid, m.gid), (owner, owner), name)
            self.assertEqual((m.mtime, m.uname, m.gname), (0, "", ""), name)
        self.assertEqual(members["bin/sh"].linkname, "busybox")
        self.assertEqual(app, b"#!/bin/sh\necho app\n")

    def test_cli_builds_the_same_archive(self):
        out = os.path.join(self.tmp.name, "cli.tar")
        subprocess.run([
            sys.executable, os.path.join(HERE, "oci_image.py"), "-q", "-o", out, "-t", "localhost/app:1",
            "--entrypoint", '["/usr/local/bin/app"]', "--cmd", '["serve"]', "--env", "PATH=/usr/local/bin",
            "--user", "65532:65532", "--workdir", "/", "--expose", "8443/tcp", "--expose", "8080",
            "--label", "org.opencontainers.image.version=1.2.3", "--arch", "amd64",
            "--dir", "/tmp", "1777",
            "--copy", self.host_file, "/usr/local/bin/app", "-",
            "--dir", "/home/nonroot", "0700", "--chown", "/home/nonroot", "65532:65532",
            "--write", "/srv/www/index.html", "0644", "hello\n",
            "--symlink", "/bin/sh", "busybox", "--write", "/bin/busybox", "0755", "\x7fELF",
        ], check=True, stdout=subprocess.PIPE)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), sample_image(self.host_file).archive(["localhost/app:1"])[0])

    def test_layers_and_tree(self):
        tree = os.path.join(self.tmp.name, "tree")
        os.makedirs(os.path.join(tree, "etc"))
        with open(os.path.join(tree, "etc", "motd"), "w") as f:
            f.write("hi\n")
        os.chmod(os.path.join(tree, "etc", "motd"), 0o600)
        os.symlink("motd", os.path.join(tree, "etc", "issue"))
        img = oci_image.Image(oci_image.Config(architecture="amd64"))
        img.layer().tree(tree)
        img.layer().dir("/tmp", 0o1777)
        data, result = img.archive(["localhost/two:layers"])
        self.assertEqual(len(result.layers), 2)
        gz = blob(read_archive(data), result.layers[0]["digest"])
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(gz))) as tar:
            got = {m.name: (m.mode, m.linkname) for m in tar.getmembers()}
        self.assertEqual(got, {"etc": (os.stat(os.path.join(tree, "etc")).st_mode & 0o7777, ""),
                               "etc/issue": (0o777, "motd"), "etc/motd": (0o600, "")})

    def test_references_and_errors(self):
        self.assertEqual(oci_image.normalize_reference("busybox"), ("docker.io/library/busybox:latest", "latest"))
        self.assertEqual(oci_image.normalize_reference("localhost/inplace-pause:1"), ("localhost/inplace-pause:1", "1"))
        self.assertEqual(oci_image.normalize_reference("localhost:5000/a/b:c"), ("localhost:5000/a/b:c", "c"))
        for bad in ("localhost/x@sha256:" + "0" * 64, "localhost/UPPER:1", "localhost/x:", ""):
            with self.assertRaises(ValueError, msg=bad):
                oci_image.normalize_reference(bad)
        layer = oci_image.Layer()
        layer.text("/etc/a", "x")
        layer.text("/etc/a", "x")  # the same entry twice is fine
        with self.assertRaises(ValueError):
            layer.text("/etc/a", "y")
        with self.assertRaises(ValueError):
            layer.dir("/../etc")
        layer.text("/f", "x")
        layer.text("/f/g", "x")
        with self.assertRaises(ValueError):
            layer.entries()  # /f is a file and a parent
        with self.assertRaises(ValueError):
            oci_image.Image().archive(["localhost/x:1"])  # no layer


if __name__ == "__main__":
    unittest.main(verbosity=2)
