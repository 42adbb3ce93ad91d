#!/usr/bin/env bash
# Brings up a real Kubernetes cluster on this machine, with nothing pulled from a registry: etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler on the host; N nodes (default 2), each a
# kubelet and containerd in a network and mount namespace of its own, with bridge CNI and routed pod
# CIDRs. No service proxy runs: hack/cluster/proxy.sh deploys one (kpng or upstream kube-proxy) as a
# DaemonSet. docs/cluster.md says what it needs from the host and how it is laid out.
#
#   hack/cluster/up.sh [--nodes N] [--family ipv4|ipv6|dual] [--no-kpng] [--kwok-nodes N]
#       --family F       the IP family: ipv4 (default), ipv6, or dual (dual-stack, IPv4 primary): the
#                        service and pod CIDRs, node and bridge addresses of it (plan.ts has them)
#       --no-kpng        do not build/import the kpng image
#       --kwok-nodes N   also N fake nodes (kwok-node-1..N, default 0): Node objects that kwok
#                        (hack/cluster/kwok/stages.yaml) keeps Ready and whose pods it makes Running, with
#                        no kubelet behind them; tainted kwok.x-k8s.io/node=fake:NoSchedule (docs/cluster.md)
#   export KUBECONFIG=/var/lib/kpng-cluster/admin.kubeconfig   (the state dir: $KPNG_CLUSTER_STATE)
#   hack/cluster/down.sh                          stops it and removes everything it made
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"
source "$here/lib/pki.sh"

nodes=2; image_args=(); kwok_nodes=0; family=ipv4
while [[ $# -gt 0 ]]; do
	case "$1" in
	--nodes) nodes="$2"; shift 2 ;;
	--family) family="${2:-}"; shift 2 ;;
	--no-kpng) image_args+=(--no-kpng); shift ;;
	--kwok-nodes) kwok_nodes="${2:-}"; shift 2 ;;
	-h|--help) usage_of "$0"; exit 0 ;;
	*) echo "usage: $0 [--nodes N] [--family ipv4|ipv6|dual] [--no-kpng] [--kwok-nodes N]" >&2; exit 2 ;;
	esac
done
[[ $kwok_nodes =~ ^[0-9]+$ ]] || die "--kwok-nodes: '$kwok_nodes' is not a whole number"
kwok_nodes=$((10#$kwok_nodes))
case "$family" in ipv4|ipv6|dual) ;; *) die "--family: '$family' is not ipv4, ipv6 or dual" ;; esac
((kwok_nodes == 0)) || [[ $family == ipv4 ]] || die "--kwok-nodes: kwok nodes have IPv4 addresses only (--family ipv4)"
# Refuses a count past the kwok pod CIDRs (10,000 /26 blocks) before anything starts.
((kwok_nodes == 0)) || plan kwok-nodes --count "$kwok_nodes" >/dev/null || exit 2
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, cgroups, mounts)"
[[ -e $cluster_state/up ]] && die "a cluster is already up in $cluster_state (hack/cluster/down.sh stops it)"
[[ -d /sys/fs/cgroup/cpu ]] || die "needs cgroup v1 controllers mounted under /sys/fs/cgroup (this host: $(ls /sys/fs/cgroup | tr '\n' ' '))"
[[ -e /proc/sys/net/bridge ]] || modprobe br_netfilter 2>/dev/null || die "needs br_netfilter (service traffic between pods of one node's bridge)"

install_missing_packages cluster runc containernetworking-plugins conntrack iproute2 openssl curl
start=$SECONDS
"$here/build.sh" --no-e2e
"$here/images.sh" "${image_args[@]}"
eval "$(plan env --nodes "$nodes" --family "$family" --state "$cluster_state")"
cp_dir="$("$repo/hack/controlplane/build.sh" --print-dir)"

# Anything left by an earlier cluster that did not stop cleanly goes first.
"$here/down.sh" --quiet
trap 'echo "cluster: start failed; logs in $cluster_state (kept until hack/cluster/down.sh)" >&2' ERR
mkdir -p "$cluster_state/pids" "$cluster_state/logs"
echo "$nodes" >"$cluster_state/node-count"
echo "$kwok_nodes" >"$cluster_state/kwok-node-count"
echo "$family" >"$cluster_state/family"

# (IPv6 addresses: no duplicate address detection, every address is the plan's.)
nodad() { [[ $1 == *:* ]] && echo nodad; true; }
pki_make "$cluster_state/pki" "$api_server_cert_ips" "$api_server_name" "${node_names[@]}"
pki="$cluster_state/pki"
plan kubeconfigs --nodes "$nodes" --family "$family" --state "$cluster_state"

# The network: a host bridge, one namespace per node on it, routes to every pod CIDR (plan.ts: an
# address, a route and a pod CIDR per family). The sysctls set here belong to the bridge and to the
# nodes' namespaces and go with them: the host's own are never changed.
ip link add "$bridge" type bridge
[[ -z $bridge_sysctls ]] || sysctl -qw $bridge_sysctls
for a in $bridge_addresses; do ip addr add "$a" dev "$bridge" $(nodad "$a"); done
ip link set "$bridge" up
for i in "${!node_names[@]}"; do
	ns="${node_netns[$i]}" veth="${node_veths[$i]}"
	ip netns add "$ns"
	ip netns exec "$ns" sysctl -qw $node_sysctls
	ip link add "$veth" type veth peer name eth0 netns "$ns"
	ip link set "$veth" master "$bridge" up
	for a in ${node_addresses[$i]}; do ip -n "$ns" addr add "$a" dev eth0 $(nodad "$a"); done
	ip -n "$ns" link set lo up
	ip -n "$ns" link set eth0 up
	for gw in $node_gateways; do ip -n "$ns" route add default via "$gw"; done
	for r in ${node_routes[$i]}; do ip -n "$ns" route add "${r%@*}" via "${r#*@}"; done
done
for r in $host_routes; do ip route add "${r%@*}" via "${r#*@}"; done

api_get() { curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$api_server$1"; }
# With kwok nodes, the controller-manager and the scheduler get a higher client rate limit than their
# defaults (20 QPS, burst 30; the scheduler 50 and 100), as large clusters and ClusterLoader2's set-ups
# configure them: thousands of nodes (the node lifecycle controller writes to each new one, and lifts
# its not-ready taint) and their pods (the scheduler's bindings, the endpoint slices) are more writes
# than the defaults allow. (The scheduler's flags are deprecated in favour of its config file, which
# this cluster does not use.)
client_qps=()
((kwok_nodes == 0)) || client_qps=(--kube-api-qps 100 --kube-api-burst 200)

start_daemon etcd "$cp_dir/etcd" --name kc --data-dir "$cluster_state/etcd" \
	--listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
	--listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
	--initial-cluster kc=http://127.0.0.1:23800 --unsafe-no-fsync --log-level warn
start_daemon kube-apiserver "$cp_dir/kube-apiserver" --etcd-servers http://127.0.0.1:23790 \
	--bind-address "$bridge_ip" --advertise-address "$bridge_ip" --secure-port "$api_server_port" \
	--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
	--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
	--service-cluster-ip-range "$service_cidr" --allow-privileged=true --profiling=false --v 1
wait_for kube-apiserver 90 api_get /readyz
start_daemon kube-controller-manager "$cluster_bin/kube-controller-manager" \
	--kubeconfig "$cluster_state/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$cluster_state/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$cluster_state/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false \
	--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
	--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
	--use-service-account-credentials --controllers '*,bootstrapsigner,tokencleaner' \
	--allocate-node-cidrs=false --cluster-cidr "$cluster_cidr" --service-cluster-ip-range "$service_cidr" \
	"${client_qps[@]}" --v 1
start_daemon kube-scheduler "$cluster_bin/kube-scheduler" --kubeconfig "$cluster_state/scheduler.kubeconfig" \
	--authentication-kubeconfig "$cluster_state/scheduler.kubeconfig" --authorization-kubeconfig "$cluster_state/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false "${client_qps[@]}" --v 1

# The nodes. Mount points for their private paths are made once, on the host (down.sh removes those it made).
for p in $NODE_PRIVATE_PATHS; do
	[[ -e $p ]] || { mkdir -p "$p" && echo "$p" >>"$cluster_state/made-paths"; }
done
pause_image=$(sed -n 's/^pause=//p' "$cache/cluster/$k8s_version/images/refs")
for i in "${!node_names[@]}"; do
	name="${node_names[$i]}" cg="${node_cgroups[$i]}" dir="${node_dirs[$i]}"
	mkdir -p "$dir"
	plan node-files "$name" --nodes "$nodes" --family "$family" --state "$cluster_state" --pause-image "$pause_image"
	for h in /sys/fs/cgroup/*/; do
		h="${h%/}"
		[[ $h == */unified ]] && { mkdir -p "$h$cg"; continue; }
		mkdir -p "$h$cg/system"
		if [[ $h == */cpuset ]]; then
			for f in cpuset.cpus cpuset.mems; do cat "$h/$f" >"$h$cg/$f"; cat "$h/$f" >"$h$cg/system/$f"; done
		fi
	done
	start_node "$i"
done

node_registered() { kubectl_ get node "$1" -o name; }
for i in "${!node_names[@]}"; do
	name="${node_names[$i]}"
	wait_for "node $name registered" 180 node_registered "$name"
	# The pod CIDR the node's CNI network uses (static: no allocator races), for --detect-local-mode=NodeCIDR;
	# and its zone (plan.ts realNodeZone), as the kwok nodes have theirs.
	kubectl_ patch node "$name" --type merge -p "{\"metadata\":{\"labels\":{\"topology.kubernetes.io/zone\":\"${node_zones[$i]}\"}},\"spec\":{\"podCIDR\":\"${node_pod_cidrs[$i]}\",\"podCIDRs\":[\"${node_pod_cidr_lists[$i]//,/\",\"}\"]}}" >/dev/null
done
for name in "${node_names[@]}"; do
	wait_for "node $name Ready" 180 kubectl_ wait --for=condition=Ready "node/$name" --timeout=1s
done
# The default service account exists once the controller-manager has made it: pods can be created.
wait_for "service account default/default" 60 kubectl_ get serviceaccount default -n default
real_ready=$((SECONDS - start))

# kwok's fake nodes. kwok manages the nodes with its annotation only (never kc-node*), plays
# kwok/stages.yaml on them and their pods, and renews a 40 s Lease for each every 10 s: the heartbeat
# the node lifecycle controller watches (its grace period is 50 s). It binds nothing unless told to:
# --server-address gives it /healthz and /metrics on a loopback port no component here uses.
# KWOK_WORKDIR: its default configuration (~/.kwok/kwok.yaml) is never read. -v WARN: at INFO it logs
# every lease renewal: about 400 MB a day with 100 nodes.
kwok_note=""
if ((kwok_nodes > 0)); then
	kwok_addr=127.0.0.1:10247
	mkdir -p "$cluster_state/kwok"
	start_daemon kwok env KWOK_WORKDIR="$cluster_state/kwok" "$cluster_bin/kwok" \
		--kubeconfig "$cluster_state/admin.kubeconfig" --config "$here/kwok/stages.yaml" \
		--manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--node-lease-duration-seconds 40 --server-address "$kwok_addr" -v WARN
	wait_for kwok 60 curl -sf "http://$kwok_addr/healthz"
	kwok_start=$SECONDS
	# Chunks of kwok_chunk nodes, kwok_jobs kubectl processes at a time: one kubectl creates about 70
	# nodes a second here, four about 115 (2 cores). kubectl create: one POST per node; the API server
	# keeps the status a Node is created with (the addresses plan.ts gives it).
	kwok_chunk=250 kwok_jobs=4 pids=()
	kwok_create() { plan kwok-nodes --count "$2" --from "$1" | kubectl_ create -f - >/dev/null; }
	for ((k = 1; k <= kwok_nodes; k += kwok_chunk)); do
		n=$((kwok_nodes - k + 1)); ((n <= kwok_chunk)) || n=$kwok_chunk
		kwok_create "$k" "$n" &
		pids+=($!)
		((${#pids[@]} < kwok_jobs)) || { for p in "${pids[@]}"; do wait "$p"; done; pids=(); }
	done
	for p in "${pids[@]}"; do wait "$p"; done
	kwok_created=$((SECONDS - kwok_start))
	kwok_ready_count() { kubectl_ get nodes -l type=kwok --no-headers 2>/dev/null | awk '$2 == "Ready" { n++ } END { print n + 0 }'; }
	deadline=$((SECONDS + 300 + kwok_nodes / 10)) last_note=$SECONDS
	while :; do
		ready=$(kwok_ready_count)
		((ready >= kwok_nodes)) && break
		((SECONDS < deadline)) || die "kwok nodes: $ready of $kwok_nodes Ready after $((SECONDS - kwok_start)) s (logs in $cluster_state/logs/kwok.log)"
		if ((SECONDS - last_note >= 15)); then
			echo "cluster: $ready of $kwok_nodes kwok nodes Ready after $((SECONDS - kwok_start)) s"
			last_note=$SECONDS
		fi
		sleep 2
	done
	kwok_note="; $kwok_nodes kwok nodes created in $kwok_created s, all Ready $((SECONDS - kwok_start)) s after the first was created"
fi
touch "$cluster_state/up"
trap - ERR
echo "cluster: ${#node_names[@]} nodes ($family) Ready in $real_ready s$kwok_note; API server $api_server; no service proxy yet (hack/cluster/proxy.sh)"
echo "cluster: export KUBECONFIG=$cluster_state/admin.kubeconfig; kubectl is $cluster_bin/kubectl"
