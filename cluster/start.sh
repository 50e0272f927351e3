#!/usr/bin/env bash
# Starts the real cluster with this build's images: the workload images (cluster/images/build.sh) and the
# product's image from BUILD/inplace-webhook (cluster/images/product.sh), built into BUILD/cluster-images and
# imported by cluster/up.sh, whose output this prints.
#   cluster/start.sh BUILD
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# One image directory per cluster: clusters started side by side never write the same archive.
images="$1/cluster-images"
[[ "$CLUSTER_ID" == 0 ]] || images="$1/cluster-images-$CLUSTER_ID"
mkdir -p "$images"
mapfile -t archives < <("$CLUSTER_ROOT/images/build.sh" "$images")
archives+=("$("$CLUSTER_ROOT/images/product.sh" "$1/inplace-webhook" "$images" | tail -1)")
exec "$CLUSTER_ROOT/up.sh" "${archives[@]}"
