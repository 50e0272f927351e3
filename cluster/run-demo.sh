#!/usr/bin/env bash
# `make run`: the product doing its job on the project's own cluster. Starts the real cluster (cluster/start.sh; the
# pinned upstream components from the cache, built once when missing), installs the chart with helm, creates the
# opted-in Deployment demo/web with a pre-update hook, changes its image and shows each pod before and after (same
# UID, restartCount +1, the new image) and the update's Events. Then it stays in the foreground with the cluster up,
# prints the `export` line and three commands to try, and follows the loop's log; Ctrl-C (SIGINT or SIGTERM) takes
# down what it started (cluster/down.sh checks that nothing is left).
#
# Where the cluster cannot run (not root, no cgroups or network namespaces, a package that cannot be installed, no
# Go to build the upstream components with), it says why in one line and what to do, then serves the webhook alone
# on loopback with a curl command to try. A cluster that is already up and answers is reused: then Ctrl-C removes
# only what this run added (the demo namespace and the release).
#
#   cluster/run-demo.sh BUILD CERT_DIR PORT PROBE_PORT        (as `make run` calls it)
set -uo pipefail
build="$(cd "$1" && pwd)" certs="$2" port="$3" probe_port="$4"
source "$(dirname "$0")/lib.sh"

NS=demo
HOOK_LABEL=lb.example.com/registered
V1=localhost/httpd-demo:v1 V2=localhost/httpd-demo:v2
begun=$SECONDS
say() { printf '%s make run: %s\n' "$(date +%H:%M:%S)" "$*"; }
# step TEXT: a numbered step, with the seconds since the start.
step_no=0
step() {
  step_no=$((step_no + 1))
  say "[$step_no, $((SECONDS - begun)) s] $*"
}

# loopback REASON WHAT_TO_DO: the webhook alone on loopback, as `make run` served before there was a cluster.
loopback() {
  echo "make run: cannot start the project's cluster: $1"
  echo "make run: $2"
  echo "make run: meanwhile, the webhook alone on https://127.0.0.1:$port (probes on http://127.0.0.1:$probe_port)."
  echo "Try, in another shell:"
  echo "  curl --cacert $certs/ca.crt -H 'Content-Type: application/json' \\"
  echo "       --data-binary @tests/fixtures/cases/mutate-deployments/start-image-change.json \\"
  echo "       'https://localhost:$port/mutate/deployments?timeout=10s'"
  exec "$build/inplace-webhook" serve --bind-address 127.0.0.1 --port "$port" --probe-port "$probe_port" \
    --tls-cert-file "$certs/tls.crt" --tls-private-key-file "$certs/tls.key" --log-format text
}

# --- can the cluster run here? ---------------------------------------------------------------------------------
[[ $EUID -eq 0 ]] || loopback "it needs root (a network namespace, mounts, cgroups), and this is uid $EUID" \
  "run 'sudo make run' for the cluster."
[[ -e /sys/fs/cgroup/memory/cgroup.procs || -e /sys/fs/cgroup/cgroup.controllers ]] ||
  loopback "no cgroup memory controller under /sys/fs/cgroup (the kubelet needs one)" \
    "run it on a machine or VM with cgroups mounted (a container without them cannot host the cluster)."
# The node's Debian packages (cluster/deps.sh installs the missing ones; a no-op once they are there).
"$CLUSTER_ROOT/deps.sh" >/dev/null 2>&1 ||
  loopback "the Debian packages the node needs are missing and apt-get could not install them" \
    "install them: apt-get install runc containernetworking-plugins iptables conntrack busybox-static iproute2."
probe="inplace-probe-$$"
if ! ip netns add "$probe" 2>/dev/null; then
  loopback "this machine does not let root make a network namespace ('ip netns add' failed)" \
    "run it where network namespaces are allowed (a VM, or a container started with --privileged)."
fi
ip netns delete "$probe"

reused=0
if [[ -e "/run/netns/$NETNS" ]]; then
  if [[ -f "$RUN/pki/admin.kubeconfig" ]] &&
    "$RUN/bin/kubectl" --kubeconfig "$RUN/pki/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    reused=1
  else
    loopback "a cluster is already up (network namespace $NETNS) but its API server does not answer" \
      "stop it with 'make cluster-down' (INPLACE_CLUSTER_ID=$CLUSTER_ID), then 'make run' again."
  fi
fi

# --- the cluster ---------------------------------------------------------------------------------------------------
cache="${INPLACE_CACHE:-/var/cache/inplace-webhook}/upstream"
if ((reused)); then
  step "reusing the cluster that is already up ($RUN): Ctrl-C removes only what this run adds"
else
  step "the pinned upstream components (etcd, containerd, helm, Kubernetes: cluster/upstream/$K8S_RELEASE) from $cache;" \
    "each one missing is built once with go (about 15 minutes in all on 2 cores), then reused"
  command -v go >/dev/null 2>&1 || [[ -x /usr/local/go/bin/go ]] || ls -d "$cache"/kubernetes-v* >/dev/null 2>&1 ||
    loopback "the go command (1.26 or later) is needed to build the pinned upstream components once" \
      "install Go, then 'make run' again."
  for c in etcd containerd helm "$K8S_RELEASE"; do
    t=$SECONDS
    dir="$("$CLUSTER_ROOT/upstream/build.sh" "$c" 2> >(sed 's/^/    /' >&2) | tail -1)" ||
      loopback "building $c failed (output above)" "fix what the go command said, then 'make run' again."
    say "    $c $(cat "$dir/version"): $dir ($((SECONDS - t)) s)"
  done
  step "starting the cluster: network namespace $NETNS, etcd, kube-apiserver, controllers, scheduler, containerd," \
    "kubelet, kube-proxy (log: $build/cluster-$CLUSTER_ID-up.log)"
  if ! "$CLUSTER_ROOT/start.sh" "$build" >"$build/cluster-$CLUSTER_ID-up.log" 2>&1; then
    tail -n 20 "$build/cluster-$CLUSTER_ID-up.log"
    "$CLUSTER_ROOT/down.sh" >/dev/null 2>&1
    loopback "the cluster did not start (the lines above, and $RUN/logs)" \
      "look at the log above; 'make cluster-down' cleans up what is left."
  fi
  say "    $(grep ' up in ' "$build/cluster-$CLUSTER_ID-up.log" | sed 's/^.* cluster: //')"
fi
export KUBECONFIG="$RUN/pki/admin.kubeconfig" PATH="$RUN/bin:$build:$PATH"
export_line="export KUBECONFIG=$KUBECONFIG PATH=$RUN/bin:$build:\$PATH"

installed=0
logs=
cleanup() {
  trap - INT TERM
  [[ -n "$logs" ]] && kill "$logs" 2>/dev/null
  echo
  if ((reused)); then
    step "Ctrl-C: removing what this run added to the cluster that was already up"
    kubectl delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
    ((installed)) && helm uninstall inplace-webhook -n inplace-webhook --wait >/dev/null 2>&1
    say "the cluster stays up; 'make cluster-down' stops it"
  else
    step "Ctrl-C: taking the cluster down"
    "$CLUSTER_ROOT/down.sh" 2>&1 | sed 's/^.* cluster: /make run: /'
  fi
  exit 0
}
trap cleanup INT TERM

fail() {
  say "failed: $*"
  ((reused)) || say "the cluster stays up for a look ($export_line); Ctrl-C takes it down"
  sleep infinity &
  wait $!
}

image="$(product_image "$build/inplace-webhook")"
if helm status inplace-webhook -n inplace-webhook >/dev/null 2>&1; then
  step "the chart is already installed (release inplace-webhook): keeping it"
else
  step "installing the chart with helm: release inplace-webhook in namespace inplace-webhook, image $image"
  helm install inplace-webhook "$REPO_ROOT/charts/inplace-webhook" -n inplace-webhook --create-namespace --wait \
    --timeout 180s --set image.repository="${image%:*}" --set image.tag="${image##*:}" \
    --set image.pullPolicy=Never >/dev/null || fail "helm install (see 'kubectl get pods -n inplace-webhook')"
  installed=1
fi

# --- the demo ----------------------------------------------------------------------------------------------------
step "creating Deployment $NS/web (2 replicas of $V1), opted in, with a pre-update hook: a pod labelled" \
  "$HOOK_LABEL=true waits until a load balancer (played here) has drained it and removed the label"
kubectl delete namespace "$NS" --ignore-not-found --wait=true >/dev/null 2>&1
kubectl create namespace "$NS" >/dev/null
kubectl -n "$NS" apply -f - >/dev/null <<EOF || fail "kubectl apply"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    inplace-webhook.io/enabled: "true"
  annotations:
    inplace-webhook.io/lifecycle: '{"preUpdate": {"labelsHandler": {"$HOOK_LABEL": "true"}}}'
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
        inplace-webhook.io/enabled: "true"
    spec:
      containers:
        - name: app
          image: $V1
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet:
              path: /healthz
              port: 8080
            periodSeconds: 1
EOF
kubectl -n "$NS" rollout status deploy/web --timeout=120s >/dev/null || fail "the first rollout of $NS/web"
# The load balancer registers the pods: from now on each pod waits in its pre-update hook until it is drained.
kubectl -n "$NS" label pods -l app=web "$HOOK_LABEL=true" --overwrite >/dev/null

table() {
  kubectl -n "$NS" get pods -l app=web --sort-by=.metadata.name -o \
    custom-columns='POD:.metadata.name,UID:.metadata.uid,NODE:.spec.nodeName,IMAGE:.spec.containers[0].image,RESTARTS:.status.containerStatuses[0].restartCount,STATE:.metadata.labels.inplace-webhook\.io/state'
}
before="$(table)"
step "changing the image to $V2: kubectl set image deploy/web app=$V2"
kubectl -n "$NS" set image deploy/web "app=$V2" 2>&1 | sed 's/^/    /'

step "the pre-update hook holds each pod; playing the load balancer: removing $HOOK_LABEL from each waiting pod"
deadline=$((SECONDS + 180))
while :; do
  d="$(kubectl -n "$NS" get deploy web -o jsonpath='{.metadata.annotations.inplace-webhook\.io/in-progress}')"
  states="$(kubectl -n "$NS" get pods -l app=web -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.labels.inplace-webhook\.io/state}{" "}{end}')"
  if [[ -z "$d" && "$states" != *=PreparingUpdate* && "$states" != *=Updating* && "$states" != *=Updated* ]]; then
    break
  fi
  for ps in $states; do
    if [[ "${ps#*=}" == PreparingUpdate ]] &&
      [[ -n "$(kubectl -n "$NS" get pod "${ps%%=*}" -o jsonpath="{.metadata.labels.lb\.example\.com/registered}")" ]]; then
      say "    ${ps%%=*} waits in PreparingUpdate: drained, label removed"
      kubectl -n "$NS" label pod "${ps%%=*}" "$HOOK_LABEL-" >/dev/null
    fi
  done
  ((SECONDS < deadline)) || fail "the in-place update did not finish in 180 s ($states)"
  sleep 0.5
done
after="$(table)"
step "done in place: the same pods (UID, node), the new image, the app container restarted once"
echo "before:"
echo "$before" | sed 's/^/  /'
echo "after:"
echo "$after" | sed 's/^/  /'
echo "Events of the update:"
kubectl -n "$NS" get events --sort-by=.metadata.creationTimestamp \
  -o custom-columns='TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message' |
  awk 'NR == 1 || /InPlace|Hook|Drain|Killing|Pulled|Started/' | cut -c1-160 | sed 's/^/  /'
# Registered again, so that the next change waits in the hook until the user plays the load balancer.
kubectl -n "$NS" label pods -l app=web "$HOOK_LABEL=true" --overwrite >/dev/null

# --- the user's turn -----------------------------------------------------------------------------------------------
cat <<EOF

make run: ready in $((SECONDS - begun)) s. In another shell:
  $export_line
  kubectl -n $NS set image deploy/web app=$V1                 # another image change: each pod waits in its hook
  kubectl inplace status -n $NS -w deploy/web                 # what each pod waits on, until done
  kubectl -n $NS label pods -l app=web $HOOK_LABEL-     # release the hook: drained, as the load balancer would
Following the loop's log; Ctrl-C takes everything down.
EOF
# In a session of its own, so that Ctrl-C reaches this script and not the stream: a stream that ended on the
# same Ctrl-C let `wait` return without running the trap now and then, leaving the cluster up.
setsid kubectl logs -f -n inplace-webhook -l app.kubernetes.io/component=controller --tail=5 \
  --max-log-requests=4 --prefix 2>&1 &
logs=$!
wait $logs
# The log stream ended (the controller pod restarted, say): keep the cluster up until Ctrl-C.
say "the log stream ended; the cluster stays up until Ctrl-C"
sleep infinity &
wait $!
