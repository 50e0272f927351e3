#!/usr/bin/env bash
# Builds the product image FROM scratch as an OCI archive (oci_image.py; no Docker, no registry):
#
#   cluster/images/product.sh BINARY OUTDIR [VERSION]     (`make image` runs it on the Release build)
#
# writes OUTDIR/inplace-webhook-VERSION.tar holding localhost/inplace-webhook:VERSION and prints its path
# as the last line. VERSION defaults to the repository's VERSION file and must be what
# `BINARY --version` reports. Import it with: ctr -n k8s.io images import OUTDIR/inplace-webhook-VERSION.tar
#
# The layer: a stripped copy of BINARY at /usr/local/bin/inplace-webhook; the shared libraries `ldd` lists
# for it and the dynamic loader, each at the path ldd shows; the CA bundle at /etc/ssl/certs (for
# --api-server URLs signed by a public CA, as the Dockerfile's ca-certificates) with OpenSSL's default
# paths (/usr/lib/ssl/certs, /usr/lib/ssl/cert.pem) pointing at it; /etc/passwd, /etc/group with the
# nonroot user 65532; /etc/nsswitch.conf; /tmp (1777). It runs as 65532:65532, `inplace-webhook serve`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
[[ $# -eq 2 || $# -eq 3 ]] || { echo "usage: $0 BINARY OUTDIR [VERSION]" >&2; exit 2; }
binary="$1"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
version="${3:-$(head -n 1 "$repo/VERSION")}"
[[ -n "$version" ]] || { echo "the VERSION file is empty" >&2; exit 1; }
reported="$("$binary" --version)"
if [[ "$reported" != "inplace-webhook $version" ]]; then
  echo "$binary --version says '$reported', the image would be tagged $version: rebuild it (CMake reads" \
    "VERSION at configure time)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
strip -o "$work/inplace-webhook" "$binary"

entries=(--copy "$work/inplace-webhook" /usr/local/bin/inplace-webhook 0755)
# ldd's lines: "libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
# "linux-vdso.so.1 (0x...)" (in the kernel: nothing to copy). Each file goes in at the path ldd names,
# with the contents of what that path resolves to on this machine.
ldd_out="$(ldd "$work/inplace-webhook")"
if grep -q 'not found' <<<"$ldd_out"; then
  echo "ldd $binary: a library is missing:" >&2
  echo "$ldd_out" >&2
  exit 1
fi
libs=()
while read -r first arrow path _; do
  if [[ "$arrow" == "=>" && "$path" == /* ]]; then
    libs+=("$path")
  elif [[ "$first" == /* ]]; then
    libs+=("$first")
  fi
done <<<"$ldd_out"
[[ ${#libs[@]} -gt 0 ]] || { echo "ldd found no libraries for $binary (static?)" >&2; exit 1; }
for lib in "${libs[@]}"; do
  entries+=(--copy "$(readlink -f "$lib")" "$lib" -)
done

ca=/etc/ssl/certs/ca-certificates.crt
if [[ -f "$ca" ]]; then
  entries+=(--copy "$ca" "$ca" 0644
    --symlink /usr/lib/ssl/certs /etc/ssl/certs --symlink /usr/lib/ssl/cert.pem "$ca")
else
  echo "warning: $ca is missing (Debian's ca-certificates): the image has no CA bundle of its own" >&2
fi

passwd=$'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n'
group=$'root:x:0:\nnonroot:x:65532:\n'
entries+=(--write /etc/passwd 0644 "$passwd" --write /etc/group 0644 "$group"
  --write /etc/nsswitch.conf 0644 $'passwd: files\ngroup: files\nhosts: files dns\n'
  --dir /home/nonroot 0700 --chown /home/nonroot 65532:65532 --dir /tmp 1777)

revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
git -C "$repo" diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
source="${IMAGE_SOURCE:-$(git -C "$repo" remote get-url origin 2>/dev/null || echo inplace-webhook)}"

tar="$out/inplace-webhook-$version.tar"
python3 "$here/oci_image.py" -o "$tar" -t "localhost/inplace-webhook:$version" \
  --entrypoint '["/usr/local/bin/inplace-webhook"]' --cmd '["serve"]' --user 65532:65532 --workdir / \
  --env PATH=/usr/local/bin --expose 8443/tcp --expose 8080/tcp \
  --label "org.opencontainers.image.title=inplace-webhook" \
  --label "org.opencontainers.image.description=In-place updates with lifecycle hooks for Kubernetes Deployments" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.source=$source" \
  --label "org.opencontainers.image.revision=$revision" \
  "${entries[@]}" >/dev/null
echo "$tar"
