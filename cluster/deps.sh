#!/usr/bin/env bash
# The Debian packages the real cluster's node needs: runc (the OCI runtime containerd calls), the CNI plugins
# (bridge, host-local, portmap), iptables and conntrack (kube-proxy), and busybox-static (the local images).
exec "$(dirname "$0")/../tests/install-deps.sh" runc containernetworking-plugins iptables conntrack busybox-static openssl
