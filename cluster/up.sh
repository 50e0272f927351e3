#!/usr/bin/env bash
# Starts the real cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and one real node
# (containerd + runc, CNI bridge networking, kubelet, kube-proxy), all inside the network namespace described
# in cluster/lib.sh, from the pinned upstream builds (cluster/upstream/build.sh builds them on first use).
# Then imports the images of cluster/images/ into containerd and waits until the node is Ready.
#
#   cluster/up.sh [IMAGE_ARCHIVE ...]     as root; prints `export KUBECONFIG=...; export PATH=...` on success
#   cluster/down.sh                      stops it and removes every trace (processes, mounts, devices, state)
#
# Logs: $RUN/logs/<component>.log. Requires the Debian packages runc, containernetworking-plugins, iptables,
# conntrack (cluster/deps.sh installs them).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID -eq 0 ]] || die "must run as root (it makes a network namespace, mounts and cgroups)"
[[ ! -e "/run/netns/$NETNS" ]] || die "a cluster is already up (network namespace $NETNS); cluster/down.sh stops it"
started=$SECONDS

"$CLUSTER_ROOT/deps.sh"
K8S="$(upstream_dir "$K8S_RELEASE")/bin"
NODE_K8S="$(upstream_dir "$NODE_K8S_RELEASE")/bin"
node_version="$(cat "$NODE_K8S/../version")"
node_minor="${node_version#v1.}" && node_minor="${node_minor%%.*}"
ETCD="$(upstream_dir etcd)/bin"
CTRD="$(upstream_dir containerd)/bin"
HELM="$(upstream_dir helm)/bin"
trap 'log "start failed; logs in $RUN/logs; cluster/down.sh cleans up"' ERR

rm -rf "$RUN" && mkdir -p "$RUN"/{logs,pids,bin,etcd,containerd,kubelet,pod-logs,cni/net.d,cni/ipam,runc}
# One PATH directory with every tool the tests use, so that `kubectl`, `helm` and `ctr` are the pinned builds.
ln -s "$K8S"/* "$ETCD"/* "$CTRD"/* "$HELM"/* "$RUN/bin/"

# --- network namespace -------------------------------------------------------------------------------------
ip netns add "$NETNS"
ip link add "$HOST_DEV" type veth peer name "$NODE_DEV" netns "$NETNS"
ip addr add "$HOST_IP/30" dev "$HOST_DEV"
ip link set "$HOST_DEV" up
in_ns ip link set lo up
in_ns ip addr add "$NODE_IP/30" dev "$NODE_DEV"
in_ns ip link set "$NODE_DEV" up
# A bridge without ports stands in for a dummy device (this kernel may lack the dummy driver): the route makes
# connect() to a ClusterIP get as far as the OUTPUT chain, where kube-proxy's DNAT sends it to a pod.
in_ns ip link add svc0 type bridge
in_ns ip link set svc0 up
in_ns ip route add "$SERVICE_CIDR" dev svc0
# A ClusterIP that kube-proxy has not programmed yet (a Service created a moment ago) is refused, as kube-proxy
# refuses a Service without endpoints. Without these rules its SYN would go out un-NATed to svc0, fail on ARP after
# 3 s ("No route to host"), and leave its conntrack entry, un-NATed, for 120 s (SYN_SENT): a later connection from
# the same source port, once the Service is programmed, would follow that entry around the DNAT and fail the same
# way (r10 lost a request so). A packet kube-proxy DNATs no longer has a Service address here, so it passes.
in_ns iptables -A OUTPUT -d "$SERVICE_CIDR" -p tcp -j REJECT --reject-with tcp-reset
in_ns iptables -A OUTPUT -d "$SERVICE_CIDR" -j REJECT
in_ns iptables -A FORWARD -d "$SERVICE_CIDR" -p tcp -j REJECT --reject-with tcp-reset
in_ns iptables -A FORWARD -d "$SERVICE_CIDR" -j REJECT
# Per-namespace settings kube-proxy and the bridge need; the host's own are untouched.
in_ns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.ipv4.conf.all.route_localnet=1

# start NAME CMD...: run CMD as a daemon in the namespace, its own session, output to logs/NAME.log.
start() {
  local name="$1"
  shift
  setsid nsenter --net="/run/netns/$NETNS" -- "$@" >"$RUN/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/pids/$name"
}
# wait_for WHAT SECONDS CMD...: retry CMD until it succeeds.
wait_for() {
  local what="$1" limit="$2"
  shift 2
  local until=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [[ $SECONDS -lt $until ]] || die "$what not up after ${limit}s (see $RUN/logs)"
    sleep 0.2
  done
}

"$CLUSTER_ROOT/pki.sh" "$RUN/pki" "$APISERVER"
P="$RUN/pki"

# --- etcd --------------------------------------------------------------------------------------------------
start etcd "$ETCD/etcd" --name inplace --data-dir "$RUN/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster inplace=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
  --unsafe-no-fsync --quota-backend-bytes 2147483648 --log-level warn

# --- containerd (started now: it has nothing to wait for) ----------------------------------------------------
cat >"$RUN/containerd/config.toml" <<EOF
version = 3
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/inplace-pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  # This machine forbids lowering oom_score_adj (the sandbox asks for -998): containerd clamps it to its own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  enable_criu = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$RUN/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$RUN/cni/net.d"
    use_internal_loopback = true
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
# NRI's socket defaults to one path for the machine: two clusters of the matrix starting at the same moment
# raced for it ("bind: address already in use") and one containerd exited.
[plugins.'io.containerd.nri.v1.nri']
  socket_path = "$RUN/containerd/nri.sock"
EOF
cat >"$RUN/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$RUN/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
PATH="$CTRD:$PATH" start containerd "$CTRD/containerd" --config "$RUN/containerd/config.toml"

# --- kube-apiserver ------------------------------------------------------------------------------------------
wait_for etcd 20 in_ns "$ETCD/etcdctl" --endpoints http://127.0.0.1:2379 endpoint health
# INPLACE_APISERVER_PROFILING=true serves /debug/pprof to the admin, for a CPU profile during a run (tests/README.md).
profiling="${INPLACE_APISERVER_PROFILING:-false}"
[[ "$profiling" == true || "$profiling" == false ]] || die "INPLACE_APISERVER_PROFILING must be true or false"
start kube-apiserver "$K8S/kube-apiserver" \
  --etcd-servers http://127.0.0.1:2379 \
  --bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$NODE_IP" \
  --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
  --authorization-mode Node,RBAC \
  --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,NodeRestriction,DefaultStorageClass,DefaultTolerationSeconds,PodSecurity,Priority,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,ResourceQuota \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
  --kubelet-client-certificate "$P/apiserver-kubelet-client.crt" --kubelet-client-key "$P/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$P/ca.crt" --kubelet-preferred-address-types InternalIP \
  --audit-policy-file "$CLUSTER_ROOT/audit-policy.yaml" --audit-log-path "$RUN/logs/audit.log" --audit-log-format json \
  --allow-privileged=true --profiling="$profiling" --v=1

# --- the node: kubelet and kube-proxy --------------------------------------------------------------------------
printf 'nameserver 127.0.0.1\n' >"$RUN/kubelet/resolv.conf" # pods resolve nothing outside: no traffic leaves
cat >"$RUN/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
$( ((node_minor >= 35)) && printf '%s\n' "# This machine has cgroup v1 (hybrid); Kubernetes 1.35+ refuses it unless told (KEP-5573)." \
  "failCgroupV1: false")
cgroupDriver: cgroupfs
# This cluster's own cgroup for its pods (cluster/lib.sh), so that clusters side by side never share kubepods/.
cgroupRoot: $CGROUP_ROOT
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: Webhook}
resolvConf: $RUN/kubelet/resolv.conf
podLogsDir: $RUN/pod-logs
# Raising rlimits is not permitted here: keep the kubelet's open-file limit where it is.
maxOpenFiles: $(ulimit -Hn)
failSwapOn: false
serializeImagePulls: false
# The imported images are the only copies: the kubelet must never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
# Status reported quickly: tests wait on what the kubelet reports.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 5s
EOF
wait_for kube-apiserver 45 "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" get --raw /readyz
# The controllers the tests need, by names every pinned release accepts (v1.30, v1.33, v1.37). For StatefulSets:
# statefulset-controller, the PV binder that binds their claims to pre-made PersistentVolumes, and the PVC and PV
# protection controllers, which remove the finalizers the StorageObjectInUseProtection admission plugin (on by default)
# puts on every claim and volume (without them neither is ever deleted, nor the namespace of a claim).
start kube-controller-manager "$K8S/kube-controller-manager" \
  --kubeconfig "$P/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$P/controller-manager.kubeconfig" --authorization-kubeconfig "$P/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
  --controllers deployment-controller,replicaset-controller,node-lifecycle-controller,garbage-collector-controller,endpointslice-controller,endpointslice-mirroring-controller,serviceaccount-token-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,namespace-controller,clusterrole-aggregation-controller,disruption-controller,pod-garbage-collector-controller,ttl-after-finished-controller,job-controller,statefulset-controller,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller \
  --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" \
  --cluster-cidr "$POD_CIDR" --service-cluster-ip-range "$SERVICE_CIDR" \
  --concurrent-deployment-syncs 5 --concurrent-replicaset-syncs 5 --v=1
start kube-scheduler "$K8S/kube-scheduler" --kubeconfig "$P/scheduler.kubeconfig" \
  --authentication-kubeconfig "$P/scheduler.kubeconfig" --authorization-kubeconfig "$P/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --v=1
wait_for containerd 20 "$CTRD/ctr" --address "$CONTAINERD_SOCK" version
# The kubelet wants its cgroup root to exist in every hierarchy it uses.
for h in /sys/fs/cgroup/ /sys/fs/cgroup/*/; do
  if [[ -e "$h/cgroup.procs" ]]; then mkdir -p "$h${CGROUP_ROOT#/}"; fi
done
start kubelet "$NODE_K8S/kubelet" --config "$RUN/kubelet/config.yaml" --kubeconfig "$P/kubelet.kubeconfig" \
  --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
cat >"$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $P/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
# Conntrack sizes and timeouts are the host kernel's business, not the test bed's.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
start kube-proxy "$NODE_K8S/kube-proxy" --config "$RUN/kube-proxy.yaml" --v=1

# --- images --------------------------------------------------------------------------------------------------
for archive in "$@"; do
  "$CTRD/ctr" --address "$CONTAINERD_SOCK" -n k8s.io images import --all-platforms "$archive" >/dev/null
done

export KUBECONFIG="$P/admin.kubeconfig"
wait_for "node $NODE_NAME" 60 "$K8S/kubectl" wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
# The API server publishes default/kubernetes; kube-proxy has programmed it once the Service's ClusterIP
# answers from inside the namespace.
wait_for "the kubernetes Service through kube-proxy" 30 \
  in_ns "$K8S/kubectl" --kubeconfig "$P/admin.kubeconfig" --server "https://$KUBERNETES_SVC_IP" get --raw /readyz
wait_for "the default ServiceAccount" 30 "$K8S/kubectl" get serviceaccount default
# The rules above hold: a connection to a ClusterIP no Service has is refused at once, not left to ARP.
refused="$(in_ns timeout 2 bash -c "exec 3<>/dev/tcp/${SERVICE_CIDR%.0.0/16}.255.254/80" 2>&1 || true)"
[[ "$refused" == *"Connection refused"* ]] || die "a connection to an unused ClusterIP was not refused: ${refused:-timed out}"
trap - ERR
# The versions as the cluster itself reports them: the API server's /version and the node's runtime.
server_version="$("$K8S/kubectl" get --raw /version | sed -n 's/.*"gitVersion": *"\(v[^"]*\)".*/\1/p')"
runtime_version="$("$K8S/kubectl" get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')"
kubelet_version="$("$K8S/kubectl" get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.kubeletVersion}')"
log "up in $((SECONDS - started)) s: kubernetes $server_version, containerd v${runtime_version#containerd://}, node $NODE_NAME ($NODE_IP) kubelet $kubelet_version"
echo "export KUBECONFIG=$KUBECONFIG PATH=$RUN/bin:\$PATH"
