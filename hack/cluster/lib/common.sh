# Shared by hack/cluster/*.sh and hack/conformance/run.sh (sourced): versions, where things live, helpers.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cluster_dir="$repo/hack/cluster"
cache="${KPNG_CACHE:-$HOME/.cache/kpng}"

mod_version() { # <go.mod> <module path>: the version the module requires
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == m) ? $2 : $3; print v; exit }' "$1"
}
k8s_version="$(mod_version "$cluster_dir/k8s/go.mod" k8s.io/kubernetes)"
k8s_minor="${k8s_version#v1.}"; k8s_minor="${k8s_minor%%.*}"
containerd_version="$(mod_version "$cluster_dir/containerd/go.mod" github.com/containerd/containerd/v2)"
coredns_version="$(mod_version "$cluster_dir/coredns/go.mod" github.com/coredns/coredns)"
vpkg=k8s.io/component-base/version
cluster_bin="$cache/cluster/$k8s_version/bin"

die() { echo "cluster: $*" >&2; exit 1; }

# Host paths a kubelet, containerd and libcni write to whatever their configuration says: every node
# mounts a directory of its own over each (lib/node-init.sh).
export NODE_PRIVATE_PATHS="/var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /var/lib/cni"
# Where a running cluster keeps everything (removed by hack/cluster/down.sh).
cluster_state="${KPNG_CLUSTER_STATE:-/var/lib/kpng-cluster}"
plan() { node "$repo/dist/hack/cluster/plan.js" "$@"; }
# The plan of the cluster that is up (its node count and IP family, as up.sh recorded them), for eval.
running_plan_env() {
	plan env --nodes "$(cat "$cluster_state/node-count")" --family "$(cat "$cluster_state/family" 2>/dev/null || echo ipv4)" --state "$cluster_state"
}
kubectl_() { KUBECONFIG="$cluster_state/admin.kubeconfig" "$cluster_bin/kubectl" "$@"; }

source "$repo/hack/lib/apt.sh"

# wait_for <what> <seconds> <command...>: until the command succeeds, or fail naming what.
wait_for() {
	local what="$1" t="$2"; shift 2
	local deadline=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$what: not ready after $t s (logs in $cluster_state/logs)"
		sleep 0.5
	done
}

start_daemon() { # <name> <command...>: in its own session, output to logs/<name>.log, pid in pids/<name>
	local name="$1"; shift
	setsid "$@" >"$cluster_state/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$cluster_state/pids/$name"
}

# start_node <index>: node <index> of the plan (plan env's arrays) started: its first process
# (lib/node-init.sh) in its network namespace and a mount namespace of its own.
start_node() {
	local i="$1"
	start_daemon "${node_names[$i]}" unshare --mount --propagation private -- \
		nsenter --net="/run/netns/${node_netns[$i]}" -- "$cluster_dir/lib/node-init.sh" "${node_names[$i]}" "${node_ip_lists[$i]}" \
		"${node_dirs[$i]}" "${node_cgroups[$i]}" "$cluster_bin" "$cache/cluster/$k8s_version/images/list" "$bridge_ip $api_server_name"
}

# node_exec <node name> <command...>: a command inside a running node (its network and mount namespaces).
node_exec() {
	local name="$1" pid; shift
	pid=$(cat "$cluster_state/pids/$name" 2>/dev/null) || die "node $name is not running"
	nsenter -t "$pid" -m -n -- "$@"
}
# node_import <node name> <OCI archive>: an image into the node's containerd (the kubelet's namespace).
node_import() {
	local out
	out=$(node_exec "$1" "$cluster_bin/ctr" --address /run/containerd/containerd.sock -n k8s.io images import --local "$2" 2>&1) ||
		die "importing $2 into $1 failed: $out"
}

# A capability that root on this host does not hold (CAP_SYS_RESOURCE, in some sandboxes) cannot be
# granted to a container either: runc fails with "unable to apply caps". held_caps_filter sets
# cap_filter, sed arguments that leave it out of a rendered manifest, and says so.
cap_held() { # <capability number>
	local bnd; bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
	(( (16#$bnd >> $1) & 1 ))
}
held_caps_filter() {
	cap_filter=(-e '')
	if ! cap_held 24; then
		cap_filter=(-e '/^ *- SYS_RESOURCE$/d')
		echo "proxy: this host's root lacks CAP_SYS_RESOURCE: the DaemonSet is applied without it (kpng keeps its default OOM score)"
	fi
}

# url_host <address>: the address as the host part of a URL (IPv6 in brackets).
url_host() { if [[ $1 == *:* ]]; then echo "[$1]"; else echo "$1"; fi; }

# usage_of <script>: its header comment (what --help prints).
usage_of() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"; }
