#!/usr/bin/env bash
# The release artifacts of one version (README "Releasing"): `make release` runs it.
#
#   release/release.sh [--build DIR] [--out DIR] [--chart DIR] [--version V] [--url BASE]
#
# The version is the repository's VERSION file (--version overrides it, to check a release candidate; the tests
# use it to see a mismatch refused). Everything must already say that version, or nothing is written:
#   - the chart's Chart.yaml `version` and `appVersion` (the chart is released with the binary, one version);
#   - `inplace-webhook --version` and `kubectl-inplace version` of the Release build in --build (default
#     build-release; CMake reads VERSION when it configures, so a bumped VERSION reconfigures and rebuilds).
# Then it writes into --out (default BUILD/release/VERSION, emptied first):
#   inplace-webhook-V.tgz                    the packaged chart (`helm package`, the pinned helm)
#   inplace-webhook-V.tar                    the image localhost/inplace-webhook:V as an OCI archive
#                                            (cluster/images/product.sh; label org.opencontainers.image.version=V)
#   kubectl-inplace_V_linux_amd64.tar.gz     the kubectl plugin as krew installs it (the binary, plugin/README.md)
#   inplace.yaml                             a krew plugin manifest for that archive (uri under --url BASE, sha256)
#   SHA256SUMS                               sha256sum of all of the above (`sha256sum -c SHA256SUMS` verifies)
# and prints one line per artifact (size, name) and the directory last. Nothing is pushed anywhere.
# tests/release/test_release.py checks the artifacts against each other.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="$repo/build-release" out="" chart="$repo/charts/inplace-webhook" version="" url=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2" ;;
    --out) out="$2" ;;
    --chart) chart="$2" ;;
    --version) version="$2" ;;
    --url) url="$2" ;;
    *) echo "usage: $0 [--build DIR] [--out DIR] [--chart DIR] [--version V] [--url BASE]" >&2 && exit 2 ;;
  esac
  shift 2
done
refuse() {
  echo "release: refused: $*" >&2
  exit 1
}
[[ -n "$version" ]] || version="$(head -n 1 "$repo/VERSION")"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || refuse "version '$version' is not MAJOR.MINOR.PATCH"
# Where the archive will be downloaded from; krew needs the absolute URL in its manifest.
url="${url:-${RELEASE_URL:-https://example.com/inplace-webhook/releases/download/v$version}}"

# 1. The chart says the version (before any build: a forgotten bump fails fast).
chart_field() {
  sed -n "s/^$1:[[:space:]]*\"\{0,1\}\([^\"[:space:]]*\)\"\{0,1\}[[:space:]]*\$/\1/p" "$chart/Chart.yaml"
}
for field in version appVersion; do
  got="$(chart_field "$field")"
  [[ "$got" == "$version" ]] || refuse "$chart/Chart.yaml $field is '$got', the release is $version (VERSION):" \
    "set both Chart.yaml fields to the VERSION file's"
done

# 2. The Release build. One release at a time per build directory (the test and `make release` share it).
mkdir -p "$build"
build="$(cd "$build" && pwd)"
exec 9>"$build/.release.lock"
flock 9
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(inplace-webhook)
# The plugin (plugin/) is part of every release once its CMake target exists.
plugin=0
# (The list in a variable first: grep -q stops reading at the match, and pipefail would count cmake's SIGPIPE.)
known_targets="$(cmake --build "$build" --target help)"
if grep -qx '\.\.\. kubectl-inplace' <<<"$known_targets"; then
  plugin=1 targets+=(kubectl-inplace)
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}" >/dev/null
reported="$("$build/inplace-webhook" --version)"
[[ "$reported" == "inplace-webhook $version" ]] || refuse "$build/inplace-webhook --version says '$reported'," \
  "the release is $version"
if [[ $plugin == 1 ]]; then
  reported="$("$build/kubectl-inplace" version)"
  grep -qw -- "v\{0,1\}$version" <<<"$reported" || refuse "$build/kubectl-inplace version says '$reported'," \
    "the release is $version"
fi

# 3. The artifacts.
out="${out:-$build/release/$version}"
rm -rf "$out" && mkdir -p "$out"
out="$(cd "$out" && pwd)"
helm="${HELM:-$("$repo/cluster/upstream/build.sh" helm | tail -1)/bin/helm}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# helm keeps its caches and configuration out of the maintainer's home for this.
HELM_CACHE_HOME="$tmp/helm/cache" HELM_CONFIG_HOME="$tmp/helm/config" HELM_DATA_HOME="$tmp/helm/data" \
  "$helm" package "$chart" --destination "$out" >/dev/null
[[ -f "$out/inplace-webhook-$version.tgz" ]] || refuse "helm package wrote no inplace-webhook-$version.tgz"

"$repo/cluster/images/product.sh" "$build/inplace-webhook" "$out" "$version" >/dev/null

if [[ $plugin == 1 ]]; then
  # krew unpacks the archive and links `bin` onto PATH; the same bytes from the same inputs (sorted, mtime 0,
  # owner 0:0, gzip without name or time).
  stage="$tmp/plugin"
  mkdir -p "$stage"
  strip -o "$stage/kubectl-inplace" "$build/kubectl-inplace"
  for f in LICENSE plugin/README.md; do
    [[ ! -f "$repo/$f" ]] || cp "$repo/$f" "$stage/"
  done
  archive="kubectl-inplace_${version}_linux_amd64.tar.gz"
  tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . | gzip -9n >"$out/$archive"
  cat >"$out/inplace.yaml" <<EOF
# krew plugin manifest (krew-index plugins/inplace.yaml); uri is where the release's archive is downloaded from.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: inplace
spec:
  version: v$version
  shortDescription: Watch and steer inplace-webhook's in-place Deployment updates
  description: |
    kubectl inplace shows the in-place update of a Deployment run by inplace-webhook (each pod's state and the
    hook or drain it waits on, --watch until it ends) and aborts, pauses, resumes, undoes or explains it.
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: $url/$archive
      sha256: $(sha256sum "$out/$archive" | cut -d' ' -f1)
      bin: kubectl-inplace
      files:
        - from: "*"
          to: .
EOF
fi

(cd "$out" && sha256sum -- $(ls | grep -vx SHA256SUMS) >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
for f in "$out"/*; do
  printf '%10s  %s\n' "$(du -b "$f" | cut -f1)" "$(basename "$f")"
done
git -C "$repo" diff --quiet HEAD -- 2>/dev/null ||
  echo "release: warning: the work tree has uncommitted changes (the image's revision label ends in -dirty)" >&2
[[ $plugin == 1 ]] || echo "release: no kubectl-inplace target in this tree: no plugin archive" >&2
echo "$out"
