#!/usr/bin/env bash
# One configuration of the real-cluster suite: builds (or takes from the cache) the pinned upstream components,
# starts a real cluster with the workload images and the product's image from BUILD/inplace-webhook
# (cluster/start.sh), runs tests/cluster/test_cluster.py, stops the cluster, and prints one line:
#   real cluster: kubernetes vX.Y.Z, containerd vA.B.C, N scenarios passed, M failed
# (with ", node kubelet vX.Y.Z" after the version when the node runs an older release than the control plane).
# `make test` runs the whole version matrix through tests/cluster/matrix.sh, which calls this once per cluster.
#
#   tests/cluster/run.sh BUILD [test_cluster.py options, e.g. -k c01, --shard 1/2]
# Which cluster (cluster/lib.sh): INPLACE_CLUSTER_ID (0), INPLACE_KUBERNETES (kubernetes: the newest pinned
# release; kubernetes-1.30, kubernetes-1.33), INPLACE_NODE_KUBERNETES (the node's release, if older).
# Logs go to BUILD/cluster-<id>-*.log. Set KEEP_CLUSTER=1 to leave the cluster running (cluster/down.sh stops it).
set -euo pipefail
build="$(cd "$1" && pwd)"
shift
repo="$(cd "$(dirname "$0")/../.." && pwd)"
source "$repo/cluster/lib.sh"
[[ $EUID -eq 0 ]] || die "the real cluster needs root (network namespace, mounts, cgroups)"

k8s="$(upstream_dir "$K8S_RELEASE")" node_k8s="$(upstream_dir "$NODE_K8S_RELEASE")" ctrd="$(upstream_dir containerd)"
upstream_dir etcd >/dev/null && upstream_dir helm >/dev/null
k8s_version="$(cat "$k8s/version")" kubelet_version="$(cat "$node_k8s/version")" ctrd_version="$(cat "$ctrd/version")"
logs="$build/cluster-$CLUSTER_ID"

image_ref="$(product_image "$build/inplace-webhook")"

summary() {
  local node=""
  [[ "$kubelet_version" == "$k8s_version" ]] || node=", node kubelet $kubelet_version"
  echo "real cluster: kubernetes $k8s_version$node, containerd $ctrd_version, $1"
}
# A cluster left from an interrupted run would hold the namespace name: clear it first.
[[ ! -e "/run/netns/$NETNS" ]] || "$CLUSTER_ROOT/down.sh"
if ! "$CLUSTER_ROOT/start.sh" "$build" >"$logs-up.log" 2>&1; then
  cat "$logs-up.log"
  tail -n 30 "$RUN"/logs/*.log 2>/dev/null || true
  "$CLUSTER_ROOT/down.sh" || true
  summary "0 scenarios passed, 1 failed (the cluster did not start)"
  exit 1
fi
up_line="$(grep ' up in ' "$logs-up.log" || true)"
echo "$up_line"
# What the running cluster reported (the API server's /version, the node's container runtime).
k8s_version="$(sed -n 's/.*: kubernetes \(v[^,]*\), containerd \(v[^,]*\),.*/\1/p' <<<"$up_line")"
ctrd_version="$(sed -n 's/.*: kubernetes \(v[^,]*\), containerd \(v[^,]*\),.*/\2/p' <<<"$up_line")"
kubelet_version="$(sed -n 's/.* kubelet \(v[^ ]*\)$/\1/p' <<<"$up_line")"

rc=0
out="$logs-test.log"
INPLACE_CLUSTER_NETNS="$NETNS" python3 "$repo/tests/cluster/test_cluster.py" "$RUN" "$repo" --image "$image_ref" \
  --binary "$build/inplace-webhook" --certs "$build/certs" "$@" 2>&1 | tee "$out" || rc=$?
line="$(grep -E '^[0-9]+ scenarios passed, [0-9]+ failed$' "$out" | tail -1 || true)"
if [[ "${KEEP_CLUSTER:-0}" != 1 ]]; then
  "$CLUSTER_ROOT/down.sh" || rc=1
fi
summary "${line:-0 scenarios passed, 1 failed (the suite did not finish)}"
[[ -n "$line" ]] || rc=1
exit $rc
