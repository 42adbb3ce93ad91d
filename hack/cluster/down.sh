#!/usr/bin/env bash
# Stops the local cluster (hack/cluster/up.sh) and removes everything it made: every process of every
# node (found by its cgroups, so containers and shims too), the control plane, the node namespaces and
# the bridge, the nodes' cgroups, the mount points it created on the host and its state directory.
# Safe to run when nothing is up, and after a cluster that did not stop cleanly.
#
#   hack/cluster/down.sh [--quiet] [--keep-logs DIR]   (--keep-logs: copy the logs there first)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"

quiet=0; keep_logs=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	--quiet) quiet=1; shift ;;
	--keep-logs) keep_logs="$2"; shift 2 ;;
	*) echo "usage: $0 [--quiet] [--keep-logs DIR]" >&2; exit 2 ;;
	esac
done
[[ $(id -u) == 0 ]] || die "needs root"
did=()

node_cgroups() { ls -d /sys/fs/cgroup/*/kc-node[0-9]* 2>/dev/null; }
# Every process in a cgroup subtree, innermost cgroups included.
cgroup_pids() { find "$@" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u; }

if [[ -n $keep_logs && -d $cluster_state ]]; then
	mkdir -p "$keep_logs"
	cp -r "$cluster_state/logs" "$keep_logs/" 2>/dev/null
	for d in "$cluster_state"/nodes/*/; do
		[[ -d $d ]] || continue
		mkdir -p "$keep_logs/$(basename "$d")"
		cp "$d"*.log "$keep_logs/$(basename "$d")/" 2>/dev/null
	done
fi

# The nodes: their first process (lib/node-init.sh, which starts a daemon that exits again), the
# kubelet (it would restart what is killed), then every process in their cgroups.
mapfile -t cgs < <(node_cgroups)
if [[ ${#cgs[@]} -gt 0 ]]; then
	for f in "$cluster_state"/pids/kc-node*; do [[ -f $f ]] && kill -9 $(cat "$f") 2>/dev/null; done
	for f in "$cluster_state"/nodes/*/pids; do [[ -f $f ]] && kill -9 $(cat "$f") 2>/dev/null; done
	for _ in $(seq 1 50); do
		pids=$(cgroup_pids "${cgs[@]}")
		[[ -z $pids ]] && break
		kill -9 $pids 2>/dev/null
		sleep 0.2
	done
	[[ -n $(cgroup_pids "${cgs[@]}") ]] && echo "cluster-down: processes remain in ${cgs[*]}: $(cgroup_pids "${cgs[@]}" | tr '\n' ' ')" >&2
	for cg in "${cgs[@]}"; do find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null; done
	did+=("nodes")
fi

# The control plane, and any node launcher still there.
if [[ -d $cluster_state/pids ]]; then
	for f in "$cluster_state"/pids/*; do
		[[ -f $f ]] || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null && did+=("$(basename "$f")")
	done
	for _ in $(seq 1 50); do
		alive=0
		for f in "$cluster_state"/pids/*; do [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1; done
		[[ $alive == 0 ]] && break
		sleep 0.2
	done
	for f in "$cluster_state"/pids/*; do [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
fi

for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^kc-node[0-9]+$/ { print $1 }'); do
	ip netns del "$ns" && did+=("netns $ns")
done
ip link show kc-br0 >/dev/null 2>&1 && ip link del kc-br0 && did+=("bridge kc-br0")

if [[ -f $cluster_state/made-paths ]]; then
	while read -r p; do
		mountpoint -q "$p" || rmdir "$p" 2>/dev/null
	done <"$cluster_state/made-paths"
fi
if [[ -d $cluster_state ]]; then
	if grep -q " $cluster_state" /proc/self/mounts; then
		echo "cluster-down: mounts remain under $cluster_state; not removing it:" >&2
		grep " $cluster_state" /proc/self/mounts >&2
		exit 1
	fi
	rm -rf "$cluster_state"
	did+=("state $cluster_state")
fi
if [[ ${#did[@]} -gt 0 || $quiet == 0 ]]; then
	echo "cluster-down: ${did[*]:-nothing was up}"
fi
