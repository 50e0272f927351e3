#!/usr/bin/env bash
# `make bench-cluster`: the scale run on the real control plane (tests/bench/cluster_bench.py) in a cluster of its
# own: builds the images from BUILD/inplace-webhook, starts the cluster, runs, stops it.
#   tests/bench/cluster_bench.sh BUILD [cluster_bench.py options, e.g. --replicas 1000]
set -euo pipefail
build="$(cd "$1" && pwd)"
shift
repo="$(cd "$(dirname "$0")/../.." && pwd)"
source "$repo/cluster/lib.sh"
[[ ! -e "/run/netns/$NETNS" ]] || "$CLUSTER_ROOT/down.sh"
"$CLUSTER_ROOT/start.sh" "$build" >/dev/null
trap '"$CLUSTER_ROOT/down.sh"' EXIT
python3 "$repo/tests/bench/cluster_bench.py" "$RUN" "$repo" --image "$(product_image "$build/inplace-webhook")" \
  --out "$build/cluster-bench.json" --table "$build/cluster-bench.md" "$@"
