#!/usr/bin/env python3
"""A small, dependency-free, deterministic OCI image builder (Python 3.11 standard library only).

It writes an OCI image archive: a tar of an OCI image layout (oci-layout, index.json, blobs/sha256/...)
holding one image (a config, one or a few gzip layers, a manifest) under one or more references. No
Docker, no registry: the archive goes straight into containerd with `ctr -n k8s.io images import FILE`.

Deterministic: the same inputs give the same bytes, so the same digests. Layer entries are sorted by
path, every mtime is 0, owners are 0:0 with empty user/group names unless an entry says otherwise,
gzip headers carry mtime 0 and no file name, JSON is written with sorted keys and no spaces, and the
config's `created` is 1970-01-01T00:00:00Z. (The bytes of a gzip stream depend on zlib's version too:
the same machine image gives the same digests.)

References and `ctr images import`: every reference is one entry of index.json's `manifests`, all
pointing at the same manifest (so one digest for all the names), each with two annotations:
  io.containerd.image.name            the full reference, "localhost/httpd-demo:v2"; containerd's
                                      importer takes it as the image name as it is
  org.opencontainers.image.ref.name   the tag only, "v2", as the OCI image layout defines it (and as
                                      containerd's own exporter writes it)
What containerd v2.2 does with them (checked by importing, with and without --local): the first one
names the image; without it, a ref.name that is a full reference names it too, a tag-only ref.name
becomes "import-<date>:v2", and an entry with neither is skipped with nothing imported for it.
References are normalized like Docker's: "busybox" is "docker.io/library/busybox:latest".

As a library:

    img = Image(Config(entrypoint=["/pause"], user="65535:65535", labels={...}))
    layer = img.layer()
    layer.copy("/pause", "build/pause", mode=0o755)
    layer.dir("/tmp", 0o1777)
    layer.text("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\\n")
    layer.symlink("/bin/sh", "busybox")
    result = img.write("pause.tar", ["localhost/inplace-pause:1"])
    result.manifest_digest  # "sha256:..."

As a command (entries go into the current layer; --layer starts the next one):

    oci_image.py -o pause.tar -t localhost/inplace-pause:1 --entrypoint '["/pause"]' \\
        --user 65535:65535 --label org.opencontainers.image.version=1 \\
        --copy build/pause /pause 0755 --dir /tmp 1777

It prints the manifest digest (or, with --json, a JSON summary) on stdout, and a line on what it wrote
(names, digest, sizes) on stderr unless -q.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import os
import platform
import re
import stat
import sys
import tarfile

__all__ = ["Config", "Entry", "Layer", "Image", "BuildResult", "normalize_reference", "main"]

EPOCH = "1970-01-01T00:00:00Z"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"

_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
           "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "i686": "386", "i386": "386"}


def _canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- references --------------------------------------------------------------------------------------

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_REFERENCE = re.compile(rf"^(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)(?::(?P<tag>{_TAG}))?$")


def normalize_reference(ref: str) -> tuple[str, str]:
    """Returns (full reference, tag) the way Docker and containerd normalize a tagged name.

    "busybox" -> ("docker.io/library/busybox:latest", "latest"); "localhost/x:1" stays as it is.
    Digest references are refused: an archive names images by tag.
    """
    if "@" in ref:
        raise ValueError(f"reference {ref!r}: digest references cannot name an image in an archive")
    domain, rest = None, ref
    first, sep, remainder = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        domain, rest = first, remainder
    m = _REFERENCE.match(rest)
    if not m:
        raise ValueError(f"reference {ref!r} is not a valid image name[:tag]")
    path, tag = m.group("path"), m.group("tag") or "latest"
    if domain is None:
        domain = "docker.io"
    if domain == "docker.io" and "/" not in path:
        path = "library/" + path
    if not re.fullmatch(_DOMAIN, domain):
        raise ValueError(f"reference {ref!r}: bad registry host {domain!r}")
    return f"{domain}/{path}:{tag}", tag


# --- layers ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Entry:
    """One path of a layer: a directory, a regular file (data) or a symbolic link (target)."""

    path: str  # normalized, absolute: "/usr/local/bin/inplace-webhook"
    kind: str  # "dir" | "file" | "symlink"
    mode: int = 0o755
    uid: int = 0
    gid: int = 0
    data: bytes = b""
    target: str = ""


def _clean_path(path: str) -> str:
    if not path or "\0" in path:
        raise ValueError(f"bad path {path!r}")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"path {path!r} must name something below / without '..'")
    return "/" + "/".join(parts)


def _parent_dirs(path: str):
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        yield "/" + "/".join(parts[:i])


class Layer:
    """The contents of one layer. Parent directories that are not added explicitly get mode 0755, 0:0."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def _add(self, entry: Entry) -> Entry:
        if entry.mode < 0 or entry.mode > 0o7777:
            raise ValueError(f"{entry.path}: mode {entry.mode:o} out of range")
        old = self._entries.get(entry.path)
        if old is not None and old != entry:
            raise ValueError(f"{entry.path} added twice with different contents")
        self._entries[entry.path] = entry
        return entry

    def dir(self, path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
        return self._add(Entry(_clean_path(path), "dir", mode, uid, gid))

    def file(self, path: str, data: bytes, mode: int = 0o644, uid: int = 0, gid: int = 0) -> Entry:
        return self._add(Entry(_clean_path(path), "file", mode, uid, gid, data=bytes(data)))

    def text(self, path: str, text: str, mode: int = 0o644, uid: int = 0, gid: int = 0) -> Entry:
        return self.file(path, text.encode(), mode, uid, gid)

    def copy(self, path: str, source: str | os.PathLike, mode: int | None = None, uid: int = 0,
             gid: int = 0) -> Entry:
        """A regular file with the contents of the host file `source` (a symlink there is followed);
        mode None takes the host file's permission bits."""
        st = os.stat(source)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{source}: not a regular file")
        with open(source, "rb") as f:
            data = f.read()
        return self.file(path, data, stat.S_IMODE(st.st_mode) if mode is None else mode, uid, gid)

    def symlink(self, path: str, target: str, uid: int = 0, gid: int = 0) -> Entry:
        if not target or "\0" in target:
            raise ValueError(f"{path}: bad symlink target {target!r}")
        return self._add(Entry(_clean_path(path), "symlink", 0o777, uid, gid, target=target))

    def tree(self, source: str | os.PathLike, dest: str = "/", uid: int = 0, gid: int = 0) -> None:
        """Everything below the host directory `source` at `dest`, with the host's permission bits and
        symbolic links kept as links; owners are uid:gid, not the host's."""
        source = os.fspath(source)
        dest = "/" if dest.strip("/") == "" else _clean_path(dest)
        if dest != "/":
            self.dir(dest, stat.S_IMODE(os.stat(source).st_mode), uid, gid)
        for root, dirs, files in os.walk(source):
            dirs.sort()
            rel = os.path.relpath(root, source)
            for name in sorted(dirs) + sorted(files):
                host = os.path.join(root, name)
                inner = os.path.normpath(os.path.join(dest, rel, name))
                st = os.lstat(host)
                if stat.S_ISLNK(st.st_mode):
                    self.symlink(inner, os.readlink(host), uid, gid)
                elif stat.S_ISDIR(st.st_mode):
                    self.dir(inner, stat.S_IMODE(st.st_mode), uid, gid)
                elif stat.S_ISREG(st.st_mode):
                    self.copy(inner, host, stat.S_IMODE(st.st_mode), uid, gid)
                else:
                    raise ValueError(f"{host}: only directories, regular files and symlinks go into a layer")

    def chown(self, path: str, uid: int, gid: int) -> Entry:
        path = _clean_path(path)
        if path not in self._entries:
            raise KeyError(f"{path} is not in this layer")
        self._entries[path] = dataclasses.replace(self._entries[path], uid=uid, gid=gid)
        return self._entries[path]

    def entries(self) -> list[Entry]:
        """All entries, implicit parent directories included, in the order they go into the tar."""
        out = dict(self._entries)
        for path in list(out):
            for parent in _parent_dirs(path):
                existing = out.get(parent)
                if existing is None:
                    out[parent] = Entry(parent, "dir")
                elif existing.kind != "dir":
                    raise ValueError(f"{path}: its parent {parent} is a {existing.kind}, not a directory")
        return [out[p] for p in sorted(out, key=lambda p: p.split("/"))]

    def tar(self) -> bytes:
        """The uncompressed layer tar (its sha256 is the layer's diff_id)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
            for e in self.entries():
                _add_tar_entry(tar, e.path.lstrip("/"), e)
        return buf.getvalue()


def _add_tar_entry(tar: tarfile.TarFile, name: str, e: Entry) -> None:
    ti = tarfile.TarInfo(name)
    ti.mode, ti.uid, ti.gid, ti.mtime, ti.uname, ti.gname = e.mode, e.uid, e.gid, 0, "", ""
    if e.kind == "dir":
        ti.type = tarfile.DIRTYPE
        tar.addfile(ti)
    elif e.kind == "symlink":
        ti.type, ti.linkname = tarfile.SYMTYPE, e.target
        tar.addfile(ti)
    elif e.kind == "file":
        ti.type, ti.size = tarfile.REGTYPE, len(e.data)
        tar.addfile(ti, io.BytesIO(e.data))
    else:
        raise ValueError(f"{e.path}: unknown entry kind {e.kind!r}")


# --- image -------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Config:
    """The runtime configuration of the image (the OCI config's `config` object, plus its platform)."""

    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    env: list[str] = dataclasses.field(default_factory=list)  # "NAME=value", in order
    user: str | None = None  # numeric "65532:65532" (a scratch image has no user database to look names up in)
    workdir: str | None = None
    exposed_ports: list[str] = dataclasses.field(default_factory=list)  # "8443/tcp"; "8443" means tcp
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    stop_signal: str | None = None
    architecture: str = dataclasses.field(default_factory=lambda: _GOARCH.get(platform.machine(), platform.machine()))
    os: str = "linux"

    def validate(self) -> None:
        for name in ("entrypoint", "cmd"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ValueError(f"{name} must be a list of strings")
        for kv in self.env:
            if "=" not in kv or kv.startswith("="):
                raise ValueError(f"env {kv!r} is not NAME=value")
        if self.user is not None and not re.fullmatch(r"[^:\s]+(:[^:\s]+)?", self.user):
            raise ValueError(f"user {self.user!r} is not UID[:GID]")
        for p in self.exposed_ports:
            if not re.fullmatch(r"[0-9]{1,5}(/(tcp|udp|sctp))?", p):
                raise ValueError(f"exposed port {p!r} is not PORT[/tcp|udp|sctp]")
        if self.workdir is not None and not self.workdir.startswith("/"):
            raise ValueError(f"workdir {self.workdir!r} must be absolute")

    def to_oci(self, diff_ids: list[str]) -> dict:
        self.validate()
        c: dict = {}
        if self.user is not None:
            c["User"] = self.user
        if self.exposed_ports:
            c["ExposedPorts"] = {(p if "/" in p else p + "/tcp"): {} for p in self.exposed_ports}
        if self.env:
            c["Env"] = list(self.env)
        if self.entrypoint is not None:
            c["Entrypoint"] = list(self.entrypoint)
        if self.cmd is not None:
            c["Cmd"] = list(self.cmd)
        if self.workdir is not None:
            c["WorkingDir"] = self.workdir
        if self.labels:
            c["Labels"] = dict(self.labels)
        if self.stop_signal is not None:
            c["StopSignal"] = self.stop_signal
        return {
            "created": EPOCH,
            "architecture": self.architecture,
            "os": self.os,
            "config": c,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": EPOCH, "created_by": "oci_image.py"} for _ in diff_ids],
        }


@dataclasses.dataclass
class BuildResult:
    archive: str
    archive_size: int
    references: list[str]
    manifest_digest: str
    manifest_size: int
    config_digest: str
    config_size: int
    layers: list[dict]  # {"digest", "size", "diff_id", "uncompressed_size"}

    @property
    def compressed_size(self) -> int:
        """What the image costs to pull or store: its layer, config and manifest blobs."""
        return sum(layer["size"] for layer in self.layers) + self.manifest_size + self.config_size

    def to_dict(self) -> dict:
        return dict(dataclasses.asdict(self), compressed_size=self.compressed_size)


class Image:
    """An image being put together: a config and a list of layers."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.layers: list[Layer] = []

    def layer(self) -> Layer:
        """A new, empty layer on top of the others."""
        self.layers.append(Layer())
        return self.layers[-1]

    def blobs(self, references: list[str]) -> tuple[dict[str, bytes], bytes, BuildResult]:
        """(digest -> blob, index.json bytes, result without the archive's name and size)."""
        if not self.layers:
            raise ValueError("an image needs at least one layer")
        if not references:
            raise ValueError("an image archive needs at least one reference")
        blobs: dict[str, bytes] = {}
        layer_descs, diff_ids, layer_info = [], [], []
        for layer in self.layers:
            raw = layer.tar()
            gz = gzip.compress(raw, compresslevel=9, mtime=0)
            digest, diff_id = _sha256(gz), _sha256(raw)
            blobs[digest] = gz
            layer_descs.append({"mediaType": MEDIA_LAYER_GZIP, "digest": digest, "size": len(gz)})
            diff_ids.append(diff_id)
            layer_info.append({"digest": digest, "size": len(gz), "diff_id": diff_id, "uncompressed_size": len(raw)})
        config = _canonical_json(self.config.to_oci(diff_ids))
        config_digest = _sha256(config)
        blobs[config_digest] = config
        manifest = _canonical_json({
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": layer_descs,
        })
        manifest_digest = _sha256(manifest)
        blobs[manifest_digest] = manifest
        full_refs, seen, entries = [], set(), []
        for ref in references:
            full, tag = normalize_reference(ref)
            if full in seen:
                continue
            seen.add(full)
            full_refs.append(full)
            entries.append({
                "mediaType": MEDIA_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest),
                "platform": {"architecture": self.config.architecture, "os": self.config.os},
                "annotations": {ANNOTATION_CONTAINERD_NAME: full, ANNOTATION_REF_NAME: tag},
            })
        index = _canonical_json({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": entries})
        result = BuildResult("", 0, full_refs, manifest_digest, len(manifest), config_digest, len(config),
                             layer_info)
        return blobs, index, result

    def archive(self, references: list[str]) -> tuple[bytes, BuildResult]:
        """The archive's bytes and what is in it."""
        blobs, index, result = self.blobs(references)
        layout = _canonical_json({"imageLayoutVersion": "1.0.0"})
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in ("blobs", "blobs/sha256"):
                _add_tar_entry(tar, name, Entry("/" + name, "dir"))
            for digest in sorted(blobs):
                _add_tar_entry(tar, "blobs/sha256/" + digest.split(":", 1)[1],
                               Entry("/b", "file", 0o644, data=blobs[digest]))
            _add_tar_entry(tar, "index.json", Entry("/index.json", "file", 0o644, data=index))
            _add_tar_entry(tar, "oci-layout", Entry("/oci-layout", "file", 0o644, data=layout))
        data = buf.getvalue()
        result.archive_size = len(data)
        return data, result

    def write(self, path: str | os.PathLike, references: list[str]) -> BuildResult:
        """Writes the archive to `path` (through a temporary file beside it, then a rename)."""
        data, result = self.archive(references)
        path = os.fspath(path)
        tmp = f"{path}.tmp.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        result.archive = path
        return result


# --- command line ------------------------------------------------------------------------------------

def _mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"mode {text!r} is not octal") from None
    if not 0 <= mode <= 0o7777:
        raise argparse.ArgumentTypeError(f"mode {text!r} out of range")
    return mode


def _owner(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"([0-9]+):([0-9]+)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"owner {text!r} is not UID:GID")
    return int(m.group(1)), int(m.group(2))


def _json_list(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON: {e}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON list of strings")
    return value


class _Op(argparse.Action):
    """Keeps layer operations in command-line order in namespace.ops."""

    def __call__(self, parser, namespace, values, option_string=None):
        ops = getattr(namespace, "ops", None) or []
        ops.append((self.dest, values))
        namespace.ops = ops


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="oci_image.py",
        description="Build a deterministic OCI image archive for `ctr images import`.",
        epilog="Layer entries apply to the current layer, in order; --layer starts a new one. "
               "Owners are 0:0 unless --chown says otherwise; mtimes are 0.")
    p.add_argument("-o", "--output", required=True, help="the archive to write")
    p.add_argument("-t", "--tag", action="append", required=True, metavar="REF",
                   help="a reference for the image, e.g. localhost/httpd-demo:v2 (repeat for more names)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the manifest digest")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    g = p.add_argument_group("config")
    g.add_argument("--entrypoint", type=_json_list, metavar="JSON", help='e.g. \'["/pause"]\'')
    g.add_argument("--cmd", type=_json_list, metavar="JSON", help='e.g. \'["serve"]\'')
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    g.add_argument("--user", metavar="UID[:GID]")
    g.add_argument("--workdir", metavar="DIR")
    g.add_argument("--expose", action="append", default=[], metavar="PORT[/PROTO]")
    g.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    g.add_argument("--stop-signal", metavar="SIGNAL")
    g.add_argument("--arch", help="GOARCH-style architecture (default: this machine's)")
    g.add_argument("--os", default="linux")
    e = p.add_argument_group("layer entries")
    e.add_argument("--layer", action=_Op, nargs=0, help="start a new layer")
    e.add_argument("--dir", action=_Op, nargs=2, metavar=("PATH", "MODE"))
    e.add_argument("--copy", action=_Op, nargs=3, metavar=("SRC", "PATH", "MODE"),
                   help="a host file; MODE '-' keeps the host file's permission bits")
    e.add_argument("--write", action=_Op, nargs=3, metavar=("PATH", "MODE", "TEXT"), help="a file with TEXT")
    e.add_argument("--symlink", action=_Op, nargs=2, metavar=("PATH", "TARGET"))
    e.add_argument("--tree", action=_Op, nargs=2, metavar=("SRCDIR", "PATH"),
                   help="a host directory's contents, host permission bits, symlinks kept")
    e.add_argument("--chown", action=_Op, nargs=2, metavar=("PATH", "UID:GID"),
                   help="the owner of an entry added before, in the current layer")
    return p


def _split_kv(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {item!r} is not KEY=VALUE")
        out[key] = value
    return out


def image_from_args(args: argparse.Namespace) -> Image:
    config = Config(entrypoint=args.entrypoint, cmd=args.cmd, env=list(args.env), user=args.user,
                    workdir=args.workdir, exposed_ports=list(args.expose),
                    labels=_split_kv(args.label, "label"), stop_signal=args.stop_signal, os=args.os)
    if args.arch:
        config.architecture = args.arch
    img = Image(config)
    layer = img.layer()
    for op, values in getattr(args, "ops", None) or []:
        if op == "layer":
            if layer._entries:
                layer = img.layer()
        elif op == "dir":
            layer.dir(values[0], _mode(values[1]))
        elif op == "copy":
            layer.copy(values[1], values[0], None if values[2] == "-" else _mode(values[2]))
        elif op == "write":
            layer.text(values[0], values[2], _mode(values[1]))
        elif op == "symlink":
            layer.symlink(values[0], values[1])
        elif op == "tree":
            layer.tree(values[0], values[1])
        elif op == "chown":
            layer.chown(values[0], *_owner(values[1]))
    if not layer._entries and len(img.layers) > 1:
        img.layers.pop()
    return img


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        img = image_from_args(args)
        result = img.write(args.output, args.tag)
    except (ValueError, KeyError, OSError, argparse.ArgumentTypeError) as e:
        print(f"oci_image.py: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        unpacked = sum(layer["uncompressed_size"] for layer in result.layers)
        print(f"{result.archive}: {' '.join(result.references)} {result.manifest_digest}, "
              f"{result.compressed_size / 1e6:.2f} MB compressed, {unpacked / 1e6:.2f} MB unpacked", file=sys.stderr)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.manifest_digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
