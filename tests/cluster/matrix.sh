#!/usr/bin/env bash
# The real-cluster suite on every configuration of the version matrix, as `make test` runs it (README "Kubernetes
# versions"). Each configuration is a cluster of its own (cluster/lib.sh INPLACE_CLUSTER_ID: its own network
# namespace, node, containerd and state), started and stopped by tests/cluster/run.sh. Three lanes run side by side:
#
#   lane 1   cluster 0   kubernetes v1.37 (control plane and node)   every scenario, shard 1 of 2
#   lane 2   cluster 1   kubernetes v1.37                            every scenario, shard 2 of 2
#   lane 3   cluster 2   kubernetes v1.30                            the matrix scenarios (MATRIX_SCENARIOS below)
#            cluster 3   kubernetes v1.33                            the matrix scenarios
#            cluster 4   control plane v1.33, node (kubelet, kube-proxy) v1.30: a node three minors behind, the
#                        oldest the skew policy allows; it reports no pod observedGeneration and no container
#                        resources, so the API server refuses resizes of its pods
#            cluster 5   v1.37: `make run` as a user runs it (tests/cluster/make_run_test.py, q02)
#
# Each run's output is printed whole when it ends (not interleaved), then one line per configuration:
#   real cluster: kubernetes vX.Y.Z[, node kubelet vA.B.C], containerd vC.D.E, N scenarios passed, M failed
# and the exit status is non-zero if any configuration failed.
#
#   tests/cluster/matrix.sh BUILD [newest|older|all]     (default all)
set -uo pipefail
build="$(cd "$1" && pwd)"
which="${2:-all}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
source "$repo/cluster/lib.sh"
[[ $EUID -eq 0 ]] || die "the real cluster needs root (network namespace, mounts, cgroups)"

# What every older configuration runs: the product's whole job once over (install with helm, image and label change,
# hooks, the drain, history and undo, the user's pause, abort, a retag to the same digest, uninstall), the
# least-privilege policies (h05: their CEL and params on every version) and the
# version-dependent facts and cpu/memory (scenarios_matrix.py).
MATRIX_SCENARIOS=(m00_ m01_ c00_ c01_ c02_ c03_ c08_ c10_ r01_ r02_ c14_ h05_ s01_)

# Everything the lanes need, once, before they start side by side (apt and the Go builds are not for concurrent use).
"$repo/cluster/deps.sh"
"$repo/tests/install-deps.sh" busybox-static gcc libc6-dev python3
for c in etcd containerd helm kubernetes kubernetes-1.33 kubernetes-1.30; do
  "$repo/cluster/upstream/build.sh" "$c" >/dev/null || die "building $c failed"
done

out="$build/matrix"
rm -rf "$out" && mkdir -p "$out"
started=$SECONDS

# record ID TITLE START RC LINE: what one configuration leaves for the summary: its result line in $out/ID.line and,
# once it has ended, its whole output under a heading in $out/ID.done (which the loop below prints).
record() {
  local id="$1" title="$2" t="$3" rc="$4" line="$5"
  echo "$line" >"$out/$id.line"
  {
    echo "=== cluster $id: $title ($((SECONDS - t)) s, exit $rc)"
    cat "$out/$id.log"
  } >"$out/$id.done"
}

# config ID CONTROL_PLANE NODE ARGS...: one run.sh, its output kept in $out/ID.log.
config() {
  local id="$1" cp="$2" node="$3"
  shift 3
  local t=$SECONDS rc=0 line
  INPLACE_CLUSTER_ID="$id" INPLACE_KUBERNETES="$cp" INPLACE_NODE_KUBERNETES="$node" \
    "$repo/tests/cluster/run.sh" "$build" "$@" >"$out/$id.log" 2>&1 </dev/null || rc=$?
  line="$(grep '^real cluster: ' "$out/$id.log" | tail -1)"
  record "$id" "control plane $cp, node $node" "$t" "$rc" \
    "${line:-real cluster: cluster $id ($cp, node $node): the run printed no result}"
  return $rc
}

# make_run: `make run` as a user runs it, on cluster 5 (tests/cluster/make_run_test.py, scenario q02).
make_run() {
  local t=$SECONDS rc=0 v line
  v="$(cat "$("$repo/cluster/upstream/build.sh" kubernetes | tail -1)/version")"
  INPLACE_CLUSTER_ID=5 python3 "$repo/tests/cluster/make_run_test.py" "$build" >"$out/5.log" 2>&1 </dev/null || rc=$?
  line="$(grep -E '^make run: [0-9]+ passed, [0-9]+ failed$' "$out/5.log" | tail -1)"
  line="${line:-make run: 0 passed, 1 failed}"
  line="${line#make run: }"
  record 5 "make run" "$t" "$rc" "real cluster: kubernetes $v, make run (q02), ${line/ passed,/ scenarios passed,}"
  return $rc
}

lanes=()
if [[ "$which" == all || "$which" == newest ]]; then
  config 0 kubernetes kubernetes --shard 1/2 &
  lanes+=($!)
  config 1 kubernetes kubernetes --shard 2/2 &
  lanes+=($!)
fi
if [[ "$which" == all || "$which" == older ]]; then
  ks=()
  for k in "${MATRIX_SCENARIOS[@]}"; do ks+=(-k "$k"); done
  (
    rc=0
    config 2 kubernetes-1.30 kubernetes-1.30 "${ks[@]}" || rc=1
    config 3 kubernetes-1.33 kubernetes-1.33 "${ks[@]}" || rc=1
    config 4 kubernetes-1.33 kubernetes-1.30 "${ks[@]}" || rc=1
    make_run || rc=1
    exit $rc
  ) &
  lanes+=($!)
fi

# Print each run whole as it ends.
shown=()
while :; do
  for f in "$out"/*.done; do
    [[ -e "$f" ]] || continue
    [[ " ${shown[*]} " == *" $f "* ]] && continue
    cat "$f"
    shown+=("$f")
  done
  alive=0
  for pid in "${lanes[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
  [[ $alive == 1 ]] || break
  sleep 2
done
rc=0
for pid in "${lanes[@]}"; do wait "$pid" || rc=1; done
for f in "$out"/*.done; do
  [[ " ${shown[*]} " == *" $f "* ]] || cat "$f"
done

# One line per configuration; the two shards of the newest release add up to one.
echo "version matrix: $((SECONDS - started)) s"
if [[ -e "$out/0.line" && -e "$out/1.line" ]]; then
  python3 - "$out/0.line" "$out/1.line" <<'EOF'
import re, sys
lines = [open(p).read().strip() for p in sys.argv[1:]]
counts = [re.search(r"(\d+) scenarios passed, (\d+) failed", l) for l in lines]
if all(counts):
    head = re.sub(r", \d+ scenarios passed, \d+ failed.*$", "", lines[0])
    print("%s, %d scenarios passed, %d failed" % (head, sum(int(c.group(1)) for c in counts),
                                                  sum(int(c.group(2)) for c in counts)))
else:
    print("\n".join(lines))
EOF
fi
for id in 2 3 4 5; do
  [[ -e "$out/$id.line" ]] && cat "$out/$id.line"
done
# Each failure's own line once more, last: a long log shown cut keeps its end.
fails="$(grep -H '^FAIL ' "$out"/*.log 2>/dev/null | sed "s|^$out/||" | cut -c1-1500 || true)"
if [[ -n "$fails" ]]; then
  echo "failures (cluster log: line):"
  echo "$fails"
fi
exit $rc
