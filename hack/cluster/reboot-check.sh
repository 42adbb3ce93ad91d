#!/usr/bin/env bash
# A node reboot on the local cluster, with the service proxy reaching the API server by a DNS name that
# only the node's own resolver knows (/etc/hosts, as kubeadm's controlPlaneEndpoint often is): the proxy
# must come back and serve every service with no manual step, although nothing on the rebooted node
# (no cluster IP, no cluster DNS) works until it has programmed it.
#
#   hack/cluster/reboot-check.sh [--backend nft|ebpf|upstream] [--node NAME] [--keep-cluster]
#     --backend        the proxy deployed (hack/cluster/proxy.sh; default nft)
#     --node           the node rebooted (default kc-node1)
#     --keep-cluster   leave the cluster up afterwards (it is brought up when none is)
# Prints the time from the reboot to every check passing on the node; exits 1 when they do not within
# 5 minutes. Checks, from the node's network namespace: a ClusterIP Service (endpoints on both nodes),
# its NodePort on the node's address, the `kubernetes` Service, and the cluster DNS Service over TCP.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"
backend=nft; node=kc-node1; keep=0
while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) backend="$2"; shift 2 ;;
	--node) node="$2"; shift 2 ;;
	--keep-cluster) keep=1; shift ;;
	-h|--help) usage_of "$0"; exit 0 ;;
	*) usage_of "$0" >&2; exit 2 ;;
	esac
done
[[ $(id -u) == 0 ]] || die "needs root"
started=0
if [[ ! -e $cluster_state/up ]]; then "$here/up.sh"; started=1; fi
finish() { if ((started && !keep)); then "$here/down.sh" --quiet; fi; }
trap finish EXIT
eval "$(running_plan_env)"
index=""
for i in "${!node_names[@]}"; do [[ ${node_names[$i]} == "$node" ]] && index=$i; done
[[ -n $index ]] || die "no node $node (nodes: ${node_names[*]})"
ns="${node_netns[$index]}" node_ip="${node_ips[$index]}"

"$here/proxy.sh" "$backend" --api-name
agnhost=$(sed -n 's/^agnhost=//p' "$cache/cluster/$k8s_version/images/refs")
kubectl_ apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: reboot-echo, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: reboot-echo}}
  template:
    metadata: {labels: {app: reboot-echo}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: reboot-echo}}}
      containers:
      - {name: echo, image: $agnhost, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Service
metadata: {name: reboot-echo, namespace: default}
spec:
  type: NodePort
  selector: {app: reboot-echo}
  ports: [{port: 80, targetPort: 8080}]
EOF
kubectl_ rollout status deployment/reboot-echo --timeout=180s >/dev/null
cluster_ip=$(kubectl_ get service reboot-echo -o jsonpath='{.spec.clusterIP}')
node_port=$(kubectl_ get service reboot-echo -o jsonpath='{.spec.ports[0].nodePort}')
dns_ip=$(kubectl_ get service -n kube-system kube-dns -o jsonpath='{.spec.clusterIP}')

in_node() { ip netns exec "$ns" "$@"; }
serves() { # every check, from the node
	in_node curl -sf --max-time 2 "http://$(url_host "$cluster_ip")/hostname" >/dev/null &&
		in_node curl -sf --max-time 2 "http://$(url_host "$node_ip"):$node_port/hostname" >/dev/null &&
		in_node curl -sk --max-time 2 -o /dev/null "https://$kubernetes_service_host/livez" &&
		in_node timeout 2 bash -c "exec 3<>/dev/tcp/$dns_ip/53"
}
wait_for "the node serving before the reboot" 120 serves
proxy_pod() { kubectl_ get pods -n kube-system -o wide --field-selector "spec.nodeName=$node" --no-headers | awk '/^(kpng|kube-proxy)-/ { print $1; exit }'; }
before=$(proxy_pod)

t0=$(date +%s%N)
"$here/reboot-node.sh" "$node"
# Right after the reboot nothing is programmed: the check must fail, or it proves nothing.
if serves; then die "$node serves right after its reboot: its rules were not flushed"; fi
deadline=$((SECONDS + 300))
until serves; do
	((SECONDS < deadline)) || { kubectl_ get pods -A -o wide --field-selector "spec.nodeName=$node" >&2; die "$node does not serve every service 300 s after its reboot"; }
	sleep 0.5
done
took_ms=$((($(date +%s%N) - t0) / 1000000))
after=$(proxy_pod)
echo "reboot-check: $node rebooted with the API server at $api_server_name (its /etc/hosts), $backend proxy pod $before -> $after: every check passes $((took_ms / 1000)).$((took_ms % 1000 / 100)) s after the reboot"
if [[ $backend != upstream ]]; then
	log=$(kubectl_ logs -n kube-system "$after" -c kpng 2>/dev/null || kubectl_ logs -n kube-system "$after")
	grep -q "API server https://$api_server_name" <<<"$log" || die "the proxy's log does not name the API server $api_server_name"
	! grep -q EAI_AGAIN <<<"$log" || die "the proxy failed to resolve the API server (EAI_AGAIN) after the reboot"
fi
