#!/usr/bin/env bash
# `make chart-test`: helm lint and helm template of charts/inplace-webhook for each certificate mode
# (tests/chart/values-*.yaml; the defaults are mode controller), with the pinned helm; the checks that need no helm
# run in ctest (tests/chart/check_chart.py), and the real cluster installs the chart with the same helm.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
chart="$root/charts/inplace-webhook"
# The pinned helm (cluster/upstream/helm/go.mod), built once into the cache.
PATH="$("$root/cluster/upstream/build.sh" helm | tail -1)/bin:$PATH"
# helm template has no cluster and assumes Kubernetes v1.20 unless told: render for the pinned release, as
# Argo CD renders for its cluster's version.
kube="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$root/cluster/upstream/kubernetes/go.mod")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
passed=0
run() {  # run NAME COMMAND...: one result line per step
  local name=$1
  shift
  if "$@" >"$out/log" 2>&1; then
    passed=$((passed + 1))
    echo "ok - $name"
  else
    failed=$((failed + 1))
    echo "FAIL - $name"
    sed 's/^/    /' "$out/log"
  fi
}
cases=("defaults (mode controller):")
for f in "$root"/tests/chart/values-*.yaml; do cases+=("$(basename "$f"):$f"); done
for c in "${cases[@]}"; do
  name=${c%%:*}
  file=${c#*:}
  args=()
  [ -n "$file" ] && args=(-f "$file")
  run "helm lint --strict $name" helm lint --strict "$chart" --namespace inplace-webhook "${args[@]}"
  run "helm template $name" helm template inplace-webhook "$chart" --namespace inplace-webhook --kube-version "$kube" "${args[@]}"
done
# The chart's floor (Chart.yaml kubeVersion) is the oldest release of the version matrix: every release of the
# matrix renders (with the kubelet's sleep action and --pod-resize set to it), an older one is refused.
for go_mod in "$root"/cluster/upstream/kubernetes*/go.mod; do
  v="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$go_mod")"
  run "helm template for $v (preStop sleep action, --pod-resize=$v)" bash -c "
    r=\$(helm template inplace-webhook '$chart' --kube-version '$v') &&
    grep -A1 'sleep:' <<<\"\$r\" | grep -q 'seconds: 5' && grep -q -- '--pod-resize=$v' <<<\"\$r\""
done
if helm template inplace-webhook "$chart" --kube-version 1.29.15 >"$out/log" 2>&1; then
  failed=$((failed + 1))
  echo "FAIL - helm template for 1.29.15: accepted below the chart's floor of 1.30"
else
  passed=$((passed + 1))
  echo "ok - helm template for 1.29.15 is refused (the chart's floor is 1.30)"
fi
# Mode controller (the default) renders nothing random and no caBundle (the controller owns it): two renders
# are identical, as Argo CD needs to see a synced application as synced (DESIGN.md §9.7).
run "defaults: two renders are identical and set no caBundle" bash -c "
  a=\$(helm template inplace-webhook '$chart' --namespace inplace-webhook --kube-version '$kube')
  b=\$(helm template inplace-webhook '$chart' --namespace inplace-webhook --kube-version '$kube')
  [ \"\$a\" = \"\$b\" ] && ! grep -q '^ *caBundle:' <<<\"\$a\""
# The Deployment webhooks' matchConditions as helm renders them (tests/chart/check_chart.py evaluates them over a
# table of requests): both Deployment webhooks, the loop's identity as --controller-user gets it.
match_conditions() {  # match_conditions USER [HELM ARGS...]
  local user=$1
  shift
  local rendered
  rendered=$(helm template inplace-webhook "$chart" --namespace inplace-webhook --kube-version "$kube" "$@") || return 1
  [ "$(grep -cF "expression: request.operation != 'DELETE' && !has(object.metadata.deletionTimestamp)" <<<"$rendered")" -eq 2 ] &&
    [ "$(grep -cF "expression: request.userInfo.username != \"$user\"" <<<"$rendered")" -eq 2 ] &&
    grep -qF -- "--controller-user=$user" <<<"$rendered"
}
run "matchConditions: deletions and the loop's ServiceAccount skip the Deployment webhooks" \
  match_conditions system:serviceaccount:inplace-webhook:inplace-webhook
run "matchConditions: controllerUser set, the same user in the condition and --controller-user" \
  match_conditions loop-proxy --set controllerUser=loop-proxy
# The alerts and the dashboard as helm renders them: what tests/chart/check_alerts.py (ctest chart_alerts) checks
# without helm, and rules promtool accepts.
run "alerts and dashboard: helm's render is what check_alerts.py checks; promtool accepts the rules" bash -c "
  helm template inplace-webhook '$chart' --namespace inplace-webhook --kube-version '$kube' \
    --set metrics.prometheusRule.enabled=true --set metrics.grafanaDashboard.enabled=true >'$out/alerts.yaml' &&
  python3 '$root/tests/chart/check_alerts.py' --helm-output '$out/alerts.yaml' '$root'"
# The chart must refuse what it cannot render correctly.
expect_fail() {  # expect_fail NAME ARGS...
  local name=$1
  shift
  if helm template inplace-webhook "$chart" --namespace inplace-webhook --kube-version "$kube" "$@" >"$out/log" 2>&1; then
    failed=$((failed + 1))
    echo "FAIL - $name: helm template accepted it"
  else
    passed=$((passed + 1))
    echo "ok - $name"
  fi
}
expect_fail "rejects an unknown certificates.mode" --set certificates.mode=selfSigned
expect_fail "mode secret requires certificates.secret.name" --set certificates.mode=secret --set certificates.secret.caBundle=LS0t
expect_fail "mode secret requires certificates.secret.caBundle" --set certificates.mode=secret --set certificates.secret.name=tls
expect_fail "rejects an unknown value" --set replicas=3
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
