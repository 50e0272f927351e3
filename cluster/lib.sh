# Shared by the cluster/ scripts and the suites that use the cluster: where the real cluster lives and how to reach it.
#
# The whole cluster (etcd, the control plane, containerd, kubelet, kube-proxy and every pod) runs inside one
# network namespace that up.sh makes, $NETNS. Inside it:
#   lo               127.0.0.1: etcd, the controllers' and kubelet's health ports
#   $NODE_DEV        $NODE_IP/30: the node's address (kube-apiserver, kubelet); the other end of the veth pair,
#                    $HOST_DEV $HOST_IP/30 in the host namespace, is how kubectl and helm on the host reach it
#   svc0             a bridge without ports that routes the Service range, so that locally sent packets to a ClusterIP
#                    get as far as kube-proxy's DNAT; nothing is behind it, and what kube-proxy does not DNAT
#                    (a Service it has not programmed yet) is refused by up.sh's rules before it gets there
#   cni0             the pod bridge (CNI bridge + host-local, $POD_CIDR), made by the CNI plugin
# There is no default route: a packet to any other address is dropped with "network unreachable".

CLUSTER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_ROOT/.." && pwd)"
# Several clusters can run side by side (the version matrix runs its configurations concurrently): each has a
# number, INPLACE_CLUSTER_ID (0 unless set), which names its namespace, devices, addresses, state directory, CNI
# network and pod cgroup root. Cluster 0 keeps the names it has always had.
CLUSTER_ID="${INPLACE_CLUSTER_ID:-0}"
[[ "$CLUSTER_ID" =~ ^([0-9]|[1-9][0-9])$ ]] || {
  echo "cluster: INPLACE_CLUSTER_ID must be a number from 0 to 99, not '$CLUSTER_ID'" >&2
  exit 2
}
if [[ "$CLUSTER_ID" == 0 ]]; then _sfx="" _net=inplace; else _sfx="-$CLUSTER_ID" _net="inplace$CLUSTER_ID"; fi
# Runtime state (etcd data, containerd root, kubelet root, logs, certificates); removed by down.sh.
RUN="${INPLACE_CLUSTER_RUN:-/var/lib/inplace-cluster$_sfx}"
NETNS="${INPLACE_CLUSTER_NETNS:-inplace-cluster$_sfx}"
HOST_DEV="inplace$CLUSTER_ID"
NODE_DEV=node0
HOST_IP="10.250.$CLUSTER_ID.1"
NODE_IP="10.250.$CLUSTER_ID.2"
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
NODE_NAME=inplace-node
APISERVER="https://$NODE_IP:6443"
# The CNI network's name (libcni keeps its results under /var/lib/cni/results/NAME-*).
CNI_NETWORK="$_net"
# The cgroup under which the kubelet puts its pods (kubelet cgroupRoot), one per cluster so that two kubelets never
# share kubepods/ and down.sh removes only its own.
CGROUP_ROOT="/inplace-cluster$_sfx"
# Which pinned Kubernetes release (a directory of cluster/upstream/) runs the control plane, and which runs the node
# (kubelet, kube-proxy): the same unless INPLACE_NODE_KUBERNETES names an older one (a skewed node).
K8S_RELEASE="${INPLACE_KUBERNETES:-kubernetes}"
NODE_K8S_RELEASE="${INPLACE_NODE_KUBERNETES:-$K8S_RELEASE}"
CONTAINERD_SOCK="$RUN/containerd/containerd.sock"

# in_ns CMD...: run CMD in the cluster's network namespace (mount namespace and everything else shared).
in_ns() { nsenter --net="/run/netns/$NETNS" -- "$@"; }

# product_image BINARY: the reference cluster/images/product.sh gives the product's image built from BINARY.
product_image() { echo "localhost/inplace-webhook:$("$1" --version | awk '{print $NF}')"; }

# The cache directory of each pinned upstream component (built by cluster/upstream/build.sh on first use).
upstream_dir() { "$CLUSTER_ROOT/upstream/build.sh" "$1" | tail -1; }

log() { printf '%s cluster: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "$*"
  exit 1
}
