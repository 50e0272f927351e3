#!/usr/bin/env bash
# Builds the images the real-cluster tests import into containerd, as OCI archives (oci_image.py, no Docker):
#
#   cluster/images/build.sh OUTDIR      prints the path of each archive it wrote, one a line
#
#   OUTDIR/pause.tar           localhost/inplace-pause:1            the pod sandbox image (static pause.c)
#   OUTDIR/httpd-demo-v1.tar   localhost/httpd-demo:v1              busybox httpd on 8080, / says "httpd-demo v1"
#   OUTDIR/httpd-demo-v2.tar   localhost/httpd-demo:v2 and :v2.0.1  the same, "httpd-demo v2"; two names, one digest
#
# Import one with: ctr -n k8s.io images import OUTDIR/pause.tar
# The archives are deterministic: the same busybox, gcc and sources give the same digests (logged on stderr).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
out="$(cd "$1" && pwd)"

"$repo/tests/install-deps.sh" busybox-static gcc libc6-dev python3
busybox=/bin/busybox
[[ -x "$busybox" ]] || { echo "$busybox (Debian's busybox-static) is missing" >&2; exit 1; }
if ldd "$busybox" >/dev/null 2>&1; then
  echo "$busybox is dynamically linked: install busybox-static, not busybox" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source_label="org.opencontainers.image.source=${IMAGE_SOURCE:-$(git -C "$repo" remote get-url origin 2>/dev/null || echo inplace-webhook/cluster/images)}"

# oci OUT.tar ARGS...: build one archive (its names, digest and sizes go to stderr), print its path.
oci() {
  local tar="$1"
  shift
  python3 "$here/oci_image.py" -o "$tar" "$@" >/dev/null
  echo "$tar"
}

# Users for images that run as 65532 ("nonroot", as in distroless images).
passwd=$'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n'
group=$'root:x:0:\nnonroot:x:65532:\n'

# --- pause: the sandbox image. A static C program rather than a shell: one process, no busybox. ---
pause_version=1
gcc -static -Os -s -Wall -Wextra -Werror -DPAUSE_VERSION="\"$pause_version\"" -o "$work/pause" "$here/pause.c"
oci "$out/pause.tar" -t "localhost/inplace-pause:$pause_version" \
  --entrypoint '["/pause"]' --user 65535:65535 \
  --label "org.opencontainers.image.version=$pause_version" --label "$source_label" \
  --label "org.opencontainers.image.description=Pod sandbox (pause) image for the inplace-webhook test cluster" \
  --copy "$work/pause" /pause 0755

# --- httpd-demo: busybox httpd as uid 65532, stopped gracefully by httpd-demo.sh. ---
applets=()
while read -r applet; do
  [[ "$applet" == busybox ]] || applets+=(--symlink "/bin/$applet" busybox)
done < <("$busybox" --list | LC_ALL=C sort)

# httpd_demo VERSION LABEL_VERSION REF...: the archive OUTDIR/httpd-demo-VERSION.tar with / saying "httpd-demo VERSION".
httpd_demo() {
  local version="$1" label_version="$2" refs=() ref
  shift 2
  for ref in "$@"; do refs+=(-t "$ref"); done
  oci "$out/httpd-demo-$version.tar" "${refs[@]}" \
    --entrypoint '["/usr/local/bin/httpd-demo"]' --user 65532:65532 --workdir / --expose 8080/tcp \
    --env PATH=/bin --env PORT=8080 --env STOP_DELAY_SECONDS=0 --env DRAIN_SECONDS=30 \
    --label "org.opencontainers.image.version=$label_version" --label "$source_label" \
    --label "org.opencontainers.image.description=busybox httpd demo workload for in-place update tests" \
    --copy "$busybox" /bin/busybox 0755 "${applets[@]}" \
    --write /etc/passwd 0644 "$passwd" --write /etc/group 0644 "$group" \
    --dir /home/nonroot 0700 --chown /home/nonroot 65532:65532 --dir /tmp 1777 \
    --copy "$here/httpd-demo.sh" /usr/local/bin/httpd-demo 0755 \
    --write /srv/www/index.html 0644 "httpd-demo $version"$'\n' \
    --write /srv/www/healthz 0644 $'ok\n' \
    --copy "$here/slow.cgi" /srv/www/cgi-bin/slow 0755
}
httpd_demo v1 v1 localhost/httpd-demo:v1
httpd_demo v2 v2.0.1 localhost/httpd-demo:v2 localhost/httpd-demo:v2.0.1
