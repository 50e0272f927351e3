#!/usr/bin/env bash
# Builds the pinned upstream components the real cluster runs, with the ordinary go command, from the
# go.mod/go.sum beside this script, into a cache outside the build tree keyed by component, version and a hash
# of what goes into the build (go.mod, go.sum, flags). A second call with the same key does nothing.
#
#   cluster/upstream/build.sh [kubernetes|kubernetes-1.30|kubernetes-1.33|etcd|helm|containerd ...]
#   prints, per component, the cache directory that holds its bin/ (default: etcd, containerd, helm, kubernetes;
#   the older releases of the version matrix, kubernetes-1.X, only when named)
# Each step says what it builds and, while a build runs, its elapsed time at least every 30 s (on stderr).
#
# The cache lives in $INPLACE_CACHE (default /var/cache/inplace-webhook); Go's own module and build caches stay
# where the go command keeps them, so a warm machine rebuilds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${INPLACE_CACHE:-/var/cache/inplace-webhook}/upstream"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
# Go at its default install location (go.dev/doc/install), for shells whose PATH lacks it.
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "build.sh: the go command (1.26 or later) is needed" >&2; exit 1; }

# The version a module is pinned at in the component's go.mod ("v1.37.2").
pinned() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$here/$1/go.mod"
}

# key COMPONENT VERSION FLAGS...: the cache directory name for this exact build.
key() {
  local component="$1" version="$2"
  shift 2
  local digest
  digest="$( (cat "$here/$component/go.mod" "$here/$component/go.sum"; printf '%s\n' "$@" "$(go env GOVERSION)") |
    sha256sum | cut -c1-12)"
  echo "$cache/$component-$version-$digest"
}

# wait_quietly PID SECONDS: whether PID ended within SECONDS.
wait_quietly() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.2
  done
  return 1
}

# build COMPONENT VERSION LDFLAGS TAGS PACKAGE=NAME...: go build each package into DIR/bin/NAME.
build() {
  local component="$1" version="$2" ldflags="$3" tags="$4"
  shift 4
  local dir
  dir="$(key "$component" "$version" "$ldflags" "$tags" "$@")"
  if [[ -f "$dir/.done" ]]; then
    echo "$dir"
    return
  fi
  local start=$SECONDS tmp="$dir.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp/bin"
  echo "building $component $version into $dir" >&2
  local spec pkgs=()
  for spec in "$@"; do pkgs+=("${spec%%=*}"); done
  (cd "$here/$component" && go mod download && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}") &
  local pid=$! rc=0
  # A cold build takes minutes: say it is still going, every 30 s, so a waiting user knows.
  while ! wait_quietly "$pid" 30; do
    echo "  still building $component $version: $((SECONDS - start)) s" >&2
  done
  wait "$pid" || rc=$?
  [[ $rc -eq 0 ]] || { rm -rf "$tmp"; echo "build.sh: building $component $version failed" >&2; exit $rc; }
  for spec in "$@"; do
    local pkg="${spec%%=*}" name="${spec#*=}" made
    made="${pkg##*/}"
    # go names a binary after the last path element, or the one before a major-version suffix.
    [[ "$made" =~ ^v[0-9]+$ ]] && made="${pkg%/*}" && made="${made##*/}"
    [[ "$name" == "$made" ]] || mv "$tmp/bin/$made" "$tmp/bin/$name"
  done
  echo "$version" >"$tmp/version"
  rm -rf "$dir" && mv "$tmp" "$dir" && touch "$dir/.done"
  echo "built $component $version in $((SECONDS - start)) s" >&2
  echo "$dir"
}

# kubernetes DIR: the Kubernetes release DIR's go.mod pins (kubernetes: the newest; kubernetes-1.X: the older
# releases of the version matrix).
kubernetes() {
  local dir="$1" v minor
  v="$(pinned "$dir" k8s.io/kubernetes)"
  minor="${v#v1.}" && minor="${minor%%.*}"
  # What hack/lib/version.sh stamps, so that kubectl, helm and /version report the release.
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    ld+=" -X $pkg.gitCommit=module-$v -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  local k=k8s.io/kubernetes/cmd
  build "$dir" "$v" "$ld" "" \
    $k/kube-apiserver=kube-apiserver $k/kube-controller-manager=kube-controller-manager \
    $k/kube-scheduler=kube-scheduler $k/kubelet=kubelet $k/kube-proxy=kube-proxy $k/kubectl=kubectl
}

etcd() {
  local v
  v="$(pinned etcd go.etcd.io/etcd/server/v3)"
  build etcd "$v" "-s -w" "" go.etcd.io/etcd/server/v3=etcd go.etcd.io/etcd/etcdctl/v3=etcdctl
}

helm() {
  local v
  v="$(pinned helm helm.sh/helm/v3)"
  build helm "$v" "-s -w -X helm.sh/helm/v3/internal/version.version=$v -X helm.sh/helm/v3/internal/version.gitTreeState=clean" "" \
    helm.sh/helm/v3/cmd/helm=helm
}

containerd() {
  local v c=github.com/containerd/containerd/v2
  v="$(pinned containerd $c)"
  build containerd "$v" "-s -w -X $c/version.Version=$v -X $c/version.Revision=module" "no_btrfs no_devmapper no_zfs" \
    $c/cmd/containerd=containerd $c/cmd/containerd-shim-runc-v2=containerd-shim-runc-v2 $c/cmd/ctr=ctr
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(etcd containerd helm kubernetes)
for c in "${components[@]}"; do
  case "$c" in
    kubernetes | kubernetes-1.*) [[ -f "$here/$c/go.mod" ]] || {
      echo "build.sh: no pinned release $c (cluster/upstream/$c/go.mod)" >&2
      exit 2
    }
      kubernetes "$c" ;;
    etcd | helm | containerd) "$c" ;;
    *) echo "build.sh: unknown component '$c' (kubernetes, kubernetes-1.X, etcd, helm, containerd)" >&2 && exit 2 ;;
  esac
done
