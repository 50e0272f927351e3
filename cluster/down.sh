#!/usr/bin/env bash
# Stops the real cluster that cluster/up.sh started and removes every trace of it: the pods' processes, the
# daemons, every mount under the state directory, the pods' cgroups, the network namespace (and with it the
# veth pair, the bridge, the pods' interfaces and kube-proxy's iptables rules) and the state directory.
# Safe to run when nothing (or only part) is up. Exits non-zero if something could not be removed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
[[ $EUID -eq 0 ]] || die "must run as root"

# cluster_cgroups: this cluster's cgroup root in each hierarchy (all v1 ones and the v2 one), where its kubelet
# made its pods' cgroups (cluster/lib.sh CGROUP_ROOT).
cluster_cgroups() {
  local h
  for h in /sys/fs/cgroup/ /sys/fs/cgroup/*/; do
    if [[ -d "$h${CGROUP_ROOT#/}" ]]; then echo "$h${CGROUP_ROOT#/}"; fi
  done
}
# pids_in_cgroups: every process in a cgroup under it.
pids_in_cgroups() {
  local c
  cluster_cgroups | while read -r c; do find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u
}
# pod_cgroups: those cgroups, and the roots themselves, deepest first.
pod_cgroups() {
  local c
  cluster_cgroups | while read -r c; do find "$c" -depth -type d 2>/dev/null; done
}
# run_mounts: the mount points under the state directory, deepest first.
run_mounts() { awk -v run="$RUN/" 'index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r; }

# stop NAME: SIGTERM the daemon started as NAME, SIGKILL after 10 s.
stop() {
  local f="$RUN/pids/$1" pid
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

# The node first, so that nothing restarts what is killed next; then the pods; then the control plane.
stop kubelet
stop kube-proxy
for _ in 1 2 3; do
  pids="$(pids_in_cgroups)"
  [[ -n "$pids" ]] || break
  kill -KILL $pids 2>/dev/null
  sleep 0.3
done
# The runc shims of this cluster (their command line names its containerd socket's directory).
pkill -KILL -f "containerd-shim-runc-v2 .*-address $RUN/" 2>/dev/null
stop containerd
for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$c"; done

failed=0
# Mounts under the state directory (container rootfs, volumes, sandbox netns files, shm), deepest first.
for _ in 1 2 3; do
  mounts="$(run_mounts)"
  [[ -n "$mounts" ]] || break
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done
# Pod cgroups, deepest first (a v1 cgroup is removed with rmdir once it has no process).
pod_cgroups | xargs -r rmdir 2>/dev/null
if [[ -e "/run/netns/$NETNS" ]]; then
  ip netns delete "$NETNS" || failed=1
fi
ip link delete "$HOST_DEV" 2>/dev/null
# libcni's result cache for this network.
rm -rf "/var/lib/cni/results/$CNI_NETWORK-"* 2>/dev/null
# What containerd makes under its default state directory whatever its configured one (client FIFOs, shim
# sockets), unless a containerd of the machine's own uses that directory, or another cluster of ours still runs.
others="$(ip netns list 2>/dev/null | awk -v me="$NETNS" '$1 ~ /^inplace-cluster/ && $1 != me' | head -1)"
if [[ ! -S /run/containerd/containerd.sock && -z "$others" ]]; then
  rm -rf /run/containerd/fifo /run/containerd/s /run/containerd/runc 2>/dev/null
  rmdir /run/containerd 2>/dev/null
fi
rm -rf "$RUN" || failed=1

# What must be gone.
left=""
[[ -z "$(pids_in_cgroups)" ]] || left+=" pod processes"
[[ -z "$(pod_cgroups)" ]] || left+=" cgroups"
[[ -z "$(run_mounts)" ]] || left+=" mounts"
! ip link show "$HOST_DEV" >/dev/null 2>&1 || left+=" $HOST_DEV"
[[ ! -e "/run/netns/$NETNS" ]] || left+=" netns"
if [[ -n "$left" || $failed -ne 0 ]]; then
  log "down, but left behind:${left:- (see above)}"
  exit 1
fi
log "down: no process, mount, cgroup or network device of the cluster is left"
