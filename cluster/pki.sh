#!/usr/bin/env bash
# Makes the real cluster's PKI in DIR: one CA, the API server's serving certificate, a client certificate per
# component (the user names and groups the Node and RBAC authorizers expect), the service-account signing key,
# and a kubeconfig per client.   cluster/pki.sh DIR APISERVER_URL
set -euo pipefail
dir="$1" server="$2"
source "$(dirname "$0")/lib.sh"
mkdir -p "$dir" && cd "$dir"
umask 077

openssl_quiet() { openssl "$@" 2>/dev/null; }

openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=inplace-cluster-ca" \
  -keyout ca.key -out ca.crt

# cert NAME SUBJECT EXT: a certificate signed by the CA.
cert() {
  local name="$1" subject="$2" ext="$3"
  openssl_quiet req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr"
  printf '%s\n' "$ext" >"$name.ext"
  openssl_quiet x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$name.ext" -out "$name.crt"
  rm -f "$name.csr" "$name.ext"
}
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"

cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:$KUBERNETES_SVC_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet-serving "/CN=$NODE_NAME" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
# The test harness's identity: a cluster administrator, as whoever installs the chart is.
cert admin "/O=system:masters/CN=inplace-admin" "$client_ext"
# The user of the tests' kubectl commands; the tests bind it to the edit ClusterRole where it works.
cert alice "/O=developers/CN=alice" "$client_ext"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
cert controller-manager "/CN=system:kube-controller-manager" "$client_ext"
cert scheduler "/CN=system:kube-scheduler" "$client_ext"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client_ext"
cert kube-proxy "/CN=system:kube-proxy" "$client_ext"
openssl_quiet genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key
openssl_quiet pkey -in sa.key -pubout -out sa.pub

# kubeconfig NAME: a kubeconfig that authenticates with NAME.crt/NAME.key.
kubeconfig() {
  cat >"$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: inplace
  cluster:
    server: $server
    certificate-authority: $dir/ca.crt
users:
- name: $1
  user:
    client-certificate: $dir/$1.crt
    client-key: $dir/$1.key
contexts:
- name: $1@inplace
  context:
    cluster: inplace
    user: $1
current-context: $1@inplace
EOF
}
for c in admin alice controller-manager scheduler kubelet kube-proxy; do kubeconfig "$c"; done
chmod 0644 ./*.crt ./*.kubeconfig
