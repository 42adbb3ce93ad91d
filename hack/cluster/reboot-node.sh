#!/usr/bin/env bash
# Reboots one node of the local cluster (hack/cluster/up.sh), as far as a service proxy can tell: every
# process of the node ends at once (kubelet, containerd, shims, every pod, the proxy's too), the kernel
# state a reboot loses goes (the node's nftables ruleset, its conntrack table, route_localnet), then
# the node starts again as up.sh started it. Nothing else helps it back: the proxy's DaemonSet pod has
# to come back through the kubelet, reach the API server and program the node by itself.
#
#   hack/cluster/reboot-node.sh <node name>     (e.g. kc-node1)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"
[[ $# -eq 1 && $1 != -* ]] || { usage_of "$0"; exit 2; }
name="$1"
[[ $(id -u) == 0 ]] || die "needs root"
[[ -e $cluster_state/up ]] || die "no cluster is up (hack/cluster/up.sh)"
eval "$(running_plan_env)"
index=""
for i in "${!node_names[@]}"; do [[ ${node_names[$i]} == "$name" ]] && index=$i; done
[[ -n $index ]] || die "no node $name (nodes: ${node_names[*]})"

# Power off: the launcher, the kubelet and containerd, then everything left in the node's cgroups.
cgroup_pids() { find /sys/fs/cgroup/*/"${node_cgroups[$index]#/}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u; }
kill -9 "$(cat "$cluster_state/pids/$name")" 2>/dev/null || true
[[ -f ${node_dirs[$index]}/pids ]] && kill -9 $(cat "${node_dirs[$index]}/pids") 2>/dev/null
for _ in $(seq 1 50); do
	pids=$(cgroup_pids)
	[[ -z $pids ]] && break
	kill -9 $pids 2>/dev/null
	sleep 0.2
done
[[ -z $(cgroup_pids) ]] || die "processes remain in ${node_cgroups[$index]}: $(cgroup_pids | tr '\n' ' ')"
rm -f "${node_dirs[$index]}/pids"

# What the kernel forgets over a reboot, in the node's network namespace.
ns="${node_netns[$index]}"
ip netns exec "$ns" nft flush ruleset
ip netns exec "$ns" conntrack -F >/dev/null 2>&1 || true
ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=0

# Power on.
start_node "$index"
echo "reboot-node: $name stopped, its rules and conntrack entries flushed, started again"
