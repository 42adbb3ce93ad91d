#!/usr/bin/env bash
# Deploys the service proxy of the local cluster (hack/cluster/up.sh) as an operator would: the
# manifests applied with kubectl, the API server's own address in the proxy's kubeconfig, and waits
# until its DaemonSet is ready on every node and the `kubernetes` Service answers from a node.
#
#   hack/cluster/proxy.sh nft        deploy/overlays/nft (kpng, nftables backend)
#   hack/cluster/proxy.sh ebpf       deploy/overlays/ebpf (kpng, eBPF backend)
#   hack/cluster/proxy.sh upstream   hack/cluster/manifests/kube-proxy.yaml (kube-proxy, nftables mode)
#   hack/cluster/proxy.sh none       removes whichever is deployed
#   --config FILE   the KubeProxyConfiguration (config.conf) of the proxy's ConfigMap instead of the
#                   one its manifests carry (bench:scale gives every proxy the same one)
#   --api-name      the proxy reaches the API server by its DNS name (api.kpng-cluster.test, which
#                   each node's /etc/hosts resolves, as kubeadm's controlPlaneEndpoint) instead of its IP
# On an IPv6 or dual-stack cluster, the proxy's clusterCIDR is the cluster's (plan.ts proxyConfig; dual:
# both families), in a --config file too; on IPv4 the configuration is applied as it is.
# Both DaemonSets stay off kwok nodes (label type=kwok, hack/cluster/up.sh --kwok-nodes): a fake node
# runs no proxy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"
backend=""; config=""; api_name=0
while [[ $# -gt 0 ]]; do
	case "$1" in
	--config) config="$(realpath "$2")"; [[ -f $config ]] || die "--config: $2 is not a file"; shift 2 ;;
	--api-name) api_name=1; shift ;;
	-h|--help) usage_of "$0"; exit 0 ;;
	-*) echo "usage: $0 nft|ebpf|upstream|none [--config FILE] [--api-name]" >&2; exit 2 ;;
	*) backend="$1"; shift ;;
	esac
done
[[ -e $cluster_state/up ]] || die "no cluster is up (hack/cluster/up.sh)"
eval "$(running_plan_env)"
((api_name == 0)) || api_server="https://$api_server_name:$api_server_port"

# The manifests as applied. kpng: deploy/overlays/<backend> through a kustomization of this cluster's
# own, as docs/deploy.md tells an operator to write one: the overlay, and kubeconfig.conf with the API
# server's own address merged into the ConfigMap. upstream: its manifest with the address and version.
# (held_caps_filter, lib/common.sh: a capability this host's root lacks is left out of the DaemonSet.)
held_caps_filter
# Keeps a DaemonSet off the kwok nodes (kustomize patch of the pod template's node affinity).
not_on_kwok_patch() { # <daemonset name>
	cat <<-EOF
		- target: {kind: DaemonSet, name: $1}
		  patch: '[{"op": "add", "path": "/spec/template/spec/affinity", "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]}}}}]'
	EOF
}
kustomization() { # <overlay>: writes this cluster's kustomization of it, prints its directory
	local dir="$cluster_state/deploy-$1" files=kubeconfig.conf
	rm -rf "$dir"; mkdir -p "$dir"
	sed "s#https://API_SERVER:6443#$api_server#" "$repo/deploy/base/kubeconfig.conf" >"$dir/kubeconfig.conf"
	if [[ -n $config && $family == ipv4 ]]; then
		cp "$config" "$dir/config.conf"; files="kubeconfig.conf, config.conf"
	elif [[ -n $config ]]; then
		plan proxy-config "$config" --family "$family" >"$dir/config.conf"; files="kubeconfig.conf, config.conf"
	elif [[ $family != ipv4 ]]; then
		plan proxy-config "$repo/deploy/base/config.conf" --family "$family" >"$dir/config.conf"; files="kubeconfig.conf, config.conf"
	fi
	{
		echo "resources: [$(realpath --relative-to="$dir" "$repo/deploy/overlays/$1")]"
		echo "configMapGenerator: [{name: kpng, namespace: kube-system, behavior: merge, files: [$files]}]"
		echo "patches:"
		not_on_kwok_patch kpng
		# Each node attaches the socket LB to its own cgroup (the node's processes and pods are all
		# under it), never to the machine's root cgroup.
		if [[ $1 == ebpf ]]; then
			cat <<-'EOF'
				- target: {kind: DaemonSet, name: kpng}
				  patch: '[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--cgroup=/sys/fs/cgroup/unified/$(NODE_NAME)"}]'
			EOF
		fi
	} >"$dir/kustomization.yaml"
	echo "$dir"
}
upstream_kustomization() { # the upstream manifest with this cluster's address and version (and --config)
	local dir="$cluster_state/deploy-upstream"
	rm -rf "$dir"; mkdir -p "$dir"
	sed -e "s#https://API_SERVER:6443#$api_server#" -e "s#K8S_VERSION#$k8s_version#" -e "s#^    clusterCIDR: .*#    clusterCIDR: $cluster_cidr#" \
		"$here/manifests/kube-proxy.yaml" >"$dir/kube-proxy.yaml"
	{
		echo "resources: [kube-proxy.yaml]"
		if [[ -n $config ]]; then
			if [[ $family == ipv4 ]]; then cp "$config" "$dir/config.conf"; else plan proxy-config "$config" --family "$family" >"$dir/config.conf"; fi
			echo "generatorOptions: {disableNameSuffixHash: true}"
			echo "configMapGenerator: [{name: kube-proxy, namespace: kube-system, behavior: merge, files: [config.conf]}]"
		fi
		echo "patches:"
		not_on_kwok_patch kube-proxy
	} >"$dir/kustomization.yaml"
	echo "$dir"
}
manifest() {
	case "$backend" in
	nft | ebpf) kubectl_ kustomize "$(kustomization "$backend")" | sed "${cap_filter[@]}" ;;
	upstream) kubectl_ kustomize "$(upstream_kustomization)" ;;
	*) echo "usage: $0 nft|ebpf|upstream|none" >&2; exit 2 ;;
	esac
}

remove_all() {
	kubectl_ -n kube-system delete daemonset kpng kube-proxy --ignore-not-found --wait=true >/dev/null
	# Pods of a deleted DaemonSet end with it; wait for them so that the next proxy starts on a clean node.
	kubectl_ -n kube-system wait --for=delete pod -l 'k8s-app in (kpng,kube-proxy)' --timeout=60s >/dev/null 2>&1 || true
	# A proxy that stops leaves its kernel state behind (as kube-proxy does without --cleanup): the next
	# proxy must not find the last one's rules, BPF programs or connections.
	local i t
	for i in "${!node_names[@]}"; do
		for t in $(ip netns exec "${node_netns[$i]}" nft list tables 2>/dev/null | awk '$3 == "kpng" || $3 == "kube-proxy" { print $2 "/" $3 }'); do
			ip netns exec "${node_netns[$i]}" nft delete table "${t%/*}" "${t#*/}"
		done
		node_exec "${node_names[$i]}" rm -rf /sys/fs/bpf/kpng
		ip netns exec "${node_netns[$i]}" conntrack -F >/dev/null 2>&1 || true
	done
}
if [[ $backend == none ]]; then remove_all; echo "proxy: none deployed"; exit 0; fi
manifest >/dev/null
remove_all
# The proxy's image as built now (images.sh made the archive; a rebuilt kpng replaces the one imported).
images="$cache/cluster/$k8s_version/images"
archive="$images/kpng.tar"; [[ $backend == upstream ]] && archive="$images/kube-proxy.tar"
[[ -s $archive ]] || die "proxy: $archive is missing (hack/cluster/images.sh)"
for name in "${node_names[@]}"; do node_import "$name" "$archive"; done
start=$SECONDS
manifest | kubectl_ apply -f - >/dev/null
ds=kpng; [[ $backend == upstream ]] && ds=kube-proxy
if ! kubectl_ -n kube-system rollout status "daemonset/$ds" --timeout=180s >/dev/null; then
	kubectl_ -n kube-system get pods -l "k8s-app=$ds" -o wide >&2
	kubectl_ -n kube-system logs -l "k8s-app=$ds" --tail=20 >&2 || true
	die "proxy: daemonset/$ds not ready after 180 s"
fi
# The proof that a proxy serves: the `kubernetes` Service's ClusterIP answers from inside a node.
for ns in "${node_netns[@]}"; do
	wait_for "proxy: $backend serving the kubernetes Service ($kubernetes_service_host:443) in $ns" 30 \
		ip netns exec "$ns" curl -sk -o /dev/null -m 2 "https://$kubernetes_service_host/healthz"
done
# The cluster's DNS needs the `kubernetes` Service: it comes once a proxy serves, and stays.
if ! kubectl_ -n kube-system get deployment coredns >/dev/null 2>&1; then
	for name in "${node_names[@]}"; do node_import "$name" "$images/coredns.tar"; done
	dns_ips="${cluster_dns_ips// /, }"
	sed -e "s#COREDNS_VERSION#$coredns_version#" -e "s#CLUSTER_DNS_IPS#$dns_ips#" -e "s#CLUSTER_DNS_IP#$cluster_dns#" \
		-e "s#DNS_FAMILY_POLICY#$dns_family_policy#" "$here/manifests/coredns.yaml" | kubectl_ apply -f - >/dev/null
fi
kubectl_ -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null || die "proxy: CoreDNS not ready after 120 s"
echo "proxy: $backend ($ds) ready on ${#node_names[@]} nodes in $((SECONDS - start)) s; https://$kubernetes_service_host answers from every node"
