# Shared by the cluster/ scripts and the suites that use the cluster: where the real cluster lives and how to reach it.
#
# The whole cluster (etcd, the control plane, containerd, kubelet, kube-proxy and every pod) runs inside one
# network namespace that up.sh makes, $NETNS. Inside it:
#   lo               127.0.0.1: etcd, the controllers' and kubelet's health ports
#   $NODE_DEV        $NODE_IP/30: the node's address (kube-apiserver, kubelet); the other end of the veth pair,
#                    $HOST_DEV $HOST_IP/30 in the host namespace, is how kubectl and helm on the host reach it
#   svc0             a bridge without ports that routes the Service range, so that locally sent packets to a ClusterIP
#                    get as far as kube-proxy's DNAT; nothing is behind it
#   cni0             the pod bridge (CNI bridge + host-local, $POD_CIDR), made by the CNI plugin
# There is no default route: a packet to any other address is dropped with "network unreachable".

CLUSTER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_ROOT/.." && pwd)"
# Runtime state (etcd data, containerd root, kubelet root, logs, certificates); removed by down.sh.
RUN="${INPLACE_CLUSTER_RUN:-/var/lib/inplace-cluster}"
NETNS="${INPLACE_CLUSTER_NETNS:-inplace-cluster}"
HOST_DEV=inplace0
NODE_DEV=node0
HOST_IP=10.250.0.1
NODE_IP=10.250.0.2
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
NODE_NAME=inplace-node
APISERVER="https://$NODE_IP:6443"
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
