#!/usr/bin/env bash
# The first process of a cluster node (started by hack/cluster/up.sh): it runs in the node's network
# namespace and in a mount namespace of its own, puts itself in the node's cgroups, gives the node
# private copies of the host paths a kubelet and containerd write to, starts containerd, imports the
# cluster's images, starts the kubelet, and starts either again when it exits.
#
#   node-init.sh <node name> <node IPs> <node dir> <cgroup root> <bin dir> <image list> ["<IP> <name>"]
#   <node IPs>: the kubelet's --node-ip (dual-stack: both, comma-separated, the primary first).
#   The last argument is a line for the node's own /etc/hosts (the API server's DNS name).
set -euo pipefail
name="$1" ip="$2" dir="$3" cgroup="$4" bin="$5" images="$6" hosts_line="${7:-}"
log() { echo "$(date -u +%H:%M:%S) node-init $name: $*"; }

# Every process of the node (daemons, shims, containers) descends from this one: it joins
# <cgroup>/system in every v1 hierarchy (the kubelet puts pods in <cgroup>/kubepods) and <cgroup> in
# the v2 one, so that down.sh finds and ends all of them there.
for h in /sys/fs/cgroup/*/; do
	h="${h%/}"
	case "$h" in */unified) echo $$ >"$h$cgroup/cgroup.procs" ;; *) echo $$ >"$h$cgroup/system/cgroup.procs" ;; esac
done

# Mounts made here stay here (the namespace was made private), and are shared inside the node so that
# the kubelet's volumes propagate into containers that ask for it.
mount --make-rshared /
# (up.sh made the mount points; NODE_PRIVATE_PATHS in lib/common.sh lists them.)
private() { # <host path>: a directory of the node's own over it
	mkdir -p "$dir/mnt$1"
	mount --bind "$dir/mnt$1" "$1"
}
for p in $NODE_PRIVATE_PATHS; do private "$p"; done
# The node's resolver knows the API server's name (as an operator's DNS or /etc/hosts would): the
# host's /etc/hosts and that line, seen by the node and by its hostNetwork pods.
if [[ -n $hosts_line ]]; then
	{ cat /etc/hosts; echo "$hosts_line"; } >"$dir/hosts"
	mount --bind "$dir/hosts" /etc/hosts
fi
mkdir -p /sys/fs/bpf
mount -t bpf bpf /sys/fs/bpf

# Both daemons are supervised as systemd's Restart=always would: one that exits is started again a
# second later (make chaos kubelet-restart restarts them under traffic). reboot-node.sh and down.sh
# kill this process first, then the daemons.
start_containerd() {
	log "starting containerd"
	"$bin/containerd" --config "$dir/containerd.toml" --log-level warn >>"$dir/containerd.log" 2>&1 &
	containerd_pid=$!
	for _ in $(seq 1 100); do
		[[ -S /run/containerd/containerd.sock ]] && "$bin/ctr" --address /run/containerd/containerd.sock version >/dev/null 2>&1 && return 0
		kill -0 $containerd_pid 2>/dev/null || { log "containerd exited: $(tail -5 "$dir/containerd.log")"; return 1; }
		sleep 0.2
	done
	return 1
}
start_kubelet() {
	log "starting kubelet"
	"$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
		--hostname-override "$name" --node-ip "$ip" --v 1 >>"$dir/kubelet.log" 2>&1 &
	kubelet_pid=$!
}
: >"$dir/containerd.log"
start_containerd || exit 1
while read -r archive; do
	"$bin/ctr" --address /run/containerd/containerd.sock -n k8s.io images import --local "$archive" >>"$dir/images.log" 2>&1 ||
		{ log "importing $archive failed: $(tail -3 "$dir/images.log")"; exit 1; }
done <"$images"
log "imported $(wc -l <"$images") images"

: >"$dir/kubelet.log"
start_kubelet
echo "$containerd_pid $kubelet_pid" >"$dir/pids"
log "running (containerd $containerd_pid, kubelet $kubelet_pid)"
set +e
while :; do
	wait -n $containerd_pid $kubelet_pid
	status=$?
	sleep 1
	if ! kill -0 $containerd_pid 2>/dev/null; then
		log "containerd exited ($status): $(tail -3 "$dir/containerd.log")"
		start_containerd || exit 1
	fi
	if ! kill -0 $kubelet_pid 2>/dev/null; then
		log "kubelet exited ($status): $(tail -3 "$dir/kubelet.log")"
		start_kubelet
	fi
	echo "$containerd_pid $kubelet_pid" >"$dir/pids"
	log "running again (containerd $containerd_pid, kubelet $kubelet_pid)"
done
