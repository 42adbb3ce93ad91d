#!/usr/bin/env bash
# kube-proxy -> kpng -> kube-proxy on the local cluster (hack/cluster/up.sh), node by node, as
# docs/migration.md tells an operator, with exactly the manifests of deploy/migration/, while clients
# keep talking; no connection may fail and no rule of the other proxy may be left on any node.
#
#   hack/cluster/migration-check.sh [--mode iptables|nftables] [--keep-cluster]
#     --mode           kube-proxy's mode: iptables (kubeadm's default, mode "") or nftables
#     --keep-cluster   leave the cluster up afterwards (it is brought up when none is)
#
# kube-proxy v1.37 runs as kubeadm deploys it (DaemonSet, ConfigMap), kpng from deploy/migration with
# the same KubeProxyConfiguration. The traffic, all of it through the service proxy of each node:
#   - a client pod on each node: HTTP to a ClusterIP Service and UDP to the same Service, 10 a second;
#   - from outside (the host): a new TCP connection every 20 ms and one held open, to a NodePort on
#     kc-node1 (lib/tcp-client.js), and HTTP to each node's NodePort of an externalTrafficPolicy Local
#     Service, 10 a second.
# Prints per phase what passed; exits 1 on any failed connection or leftover rule.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"
mode=iptables; keep=0
while [[ $# -gt 0 ]]; do
	case "$1" in
	--mode) mode="$2"; shift 2 ;;
	--keep-cluster) keep=1; shift ;;
	-h|--help) usage_of "$0"; exit 0 ;;
	*) usage_of "$0" >&2; exit 2 ;;
	esac
done
[[ $mode == iptables || $mode == nftables ]] || die "--mode: iptables or nftables"
[[ $(id -u) == 0 ]] || die "needs root"
started=0
if [[ ! -e $cluster_state/up ]]; then "$here/up.sh"; started=1; fi
work=$(mktemp -d /tmp/kc-migration-XXXXXX)
pids=()
finish() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	if ((started && !keep)); then "$here/down.sh" --quiet; fi
	rm -rf "$work"
}
trap finish EXIT
eval "$(running_plan_env)"
say() { echo "migration-check: $*"; }

# kube-proxy as kubeadm deploys it, in the chosen mode (kubeadm writes mode "" for iptables).
"$here/proxy.sh" none >/dev/null
kubectl_ delete daemonset -n kube-system kpng --ignore-not-found >/dev/null
cat >"$work/config.conf" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: "$([[ $mode == nftables ]] && echo nftables)"
clusterCIDR: $cluster_cidr
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
conntrack:
  maxPerCore: 0
EOF
"$here/proxy.sh" upstream --config "$work/config.conf"
# Step 1 of docs/migration.md: kube-proxy kept off the nodes labelled for kpng; kpng on them only.
kubectl_ -n kube-system patch daemonset kube-proxy --patch-file "$repo/deploy/migration/kube-proxy-patch.yaml" >/dev/null
kubectl_ -n kube-system rollout status daemonset/kube-proxy --timeout=120s >/dev/null
mkdir -p "$work/kpng"
sed "s#https://API_SERVER:6443#$api_server#" "$repo/deploy/base/kubeconfig.conf" >"$work/kpng/kubeconfig.conf"
cp "$work/config.conf" "$work/kpng/config.conf"
cat >"$work/kpng/kustomization.yaml" <<EOF
resources: [$(realpath --relative-to="$work/kpng" "$repo/deploy/migration")]
configMapGenerator: [{name: kpng, namespace: kube-system, behavior: merge, files: [kubeconfig.conf, config.conf]}]
EOF
held_caps_filter >/dev/null
kubectl_ kustomize "$work/kpng" | sed "${cap_filter[@]}" | kubectl_ apply -f - >/dev/null

# The workload: echo servers on both nodes (HTTP, UDP, a TCP echo), clients on both nodes.
agnhost=$(sed -n 's/^agnhost=//p' "$cache/cluster/$k8s_version/images/refs")
spread='topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: APP}}}]'
kubectl_ apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: mig-echo, namespace: default}
spec:
  type: NodePort
  selector: {app: mig-echo}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
  - {name: udp, port: 81, targetPort: 8081, protocol: UDP}
  - {name: echo, port: 9000, targetPort: 9000, protocol: TCP}
---
apiVersion: v1
kind: Service
metadata: {name: mig-local, namespace: default}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  selector: {app: mig-echo}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: mig-echo, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: mig-echo}}
  template:
    metadata: {labels: {app: mig-echo}}
    spec:
      ${spread//APP/mig-echo}
      containers:
      - {name: netexec, image: $agnhost, args: [netexec, --http-port=8080, --udp-port=8081]}
      - {name: echo, image: $agnhost, command: [socat, 'TCP-LISTEN:9000,fork,reuseaddr', 'EXEC:cat']}
EOF
kubectl_ rollout status deployment/mig-echo --timeout=180s >/dev/null
# Clients start once the Service exists: its address comes in their environment (no DNS involved).
kubectl_ apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: mig-client, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: mig-client}}
  template:
    metadata: {labels: {app: mig-client}}
    spec:
      ${spread//APP/mig-client}
      containers:
      - name: client
        image: $agnhost
        command: [bash, -c]
        # UDP: a socket of its own per exchange (a new flow each time), done as soon as 8 bytes of the
        # reply (netexec's answer to "hostname": the pod's name) are back.
        args:
        - |
          while true; do
            curl -sf --max-time 2 -o /dev/null "http://\$MIG_ECHO_SERVICE_HOST/hostname" && echo ok-tcp || echo "fail tcp \$(date +%T)"
            if exec 3<>"/dev/udp/\$MIG_ECHO_SERVICE_HOST/81" && printf hostname >&3 && read -t 2 -N 8 -r r <&3; then echo ok-udp; else echo "fail udp \$(date +%T)"; fi
            exec 3>&-
            sleep 0.1
          done
EOF
kubectl_ rollout status deployment/mig-client --timeout=180s >/dev/null

echo_port=$(kubectl_ get service mig-echo -o jsonpath='{.spec.ports[?(@.name=="echo")].nodePort}')
local_port=$(kubectl_ get service mig-local -o jsonpath='{.spec.ports[0].nodePort}')
node "$here/lib/tcp-client.js" "${node_ips[0]}" "$echo_port" >"$work/outside-tcp.log" 2>&1 &
pids+=($!)
for ip in "${node_ips[@]}"; do
	(while true; do curl -sf --max-time 2 -o /dev/null "http://$ip:$local_port/hostname" && echo ok || echo "fail $(date +%T)"; sleep 0.1; done) >"$work/outside-local-$ip.log" 2>&1 &
	pids+=($!)
done

# Failures so far, from every client.
failures() {
	{
		kubectl_ logs -l app=mig-client --tail=-1 --prefix 2>/dev/null | grep fail || true
		grep -h fail "$work"/outside-*.log || true
	} | sed 's/^/  /'
}
oks() {
	local pods; pods=$(kubectl_ logs -l app=mig-client --tail=-1 2>/dev/null)
	local tcp; tcp=$(tail -1 "$work/outside-tcp.log")
	echo "pods: $(grep -c '^ok-tcp' <<<"$pods") TCP and $(grep -c '^ok-udp' <<<"$pods") UDP exchanges; outside: $(cat "$work"/outside-local-*.log | grep -c '^ok') to the Local node ports, ${tcp#ok } (new connections, messages on the one held open)"
}
wait_for "traffic through kube-proxy" 60 bash -c "grep -q '^ok [1-9]' '$work/outside-tcp.log'"
sleep 5

in_node() { ip netns exec "${node_netns[$1]}" "$@"; }
kube_proxy_rules() { # what of kube-proxy's is on node <index>
	local i="$1"
	{ ip netns exec "${node_netns[$i]}" nft list tables | grep -w kube-proxy || true
	  for t in iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save; do ip netns exec "${node_netns[$i]}" "$t" 2>/dev/null | grep -E '^:KUBE-|-j KUBE-' | grep -vE 'KUBE-(FIREWALL|KUBELET-CANARY|IPTABLES-HINT)\b' || true; done; }
}
kpng_rules() { ip netns exec "${node_netns[$1]}" nft list tables | grep -wE 'kpng|kpng-ipvs' || true; }
pod_on() { kubectl_ get pods -n kube-system -l "k8s-app=$1" --field-selector "spec.nodeName=$2" -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.status.containerStatuses[0].ready}{"\n"}{end}'; }
ready_on() { [[ $(pod_on "$1" "$2") == *" Running true"* ]]; }
gone_from() { [[ -z $(pod_on "$1" "$2") ]]; }
no_rules_of() { [[ -z $("$1" "$2") ]]; }

# kube-proxy -> kpng, node by node: the label moves it (docs/migration.md).
for i in "${!node_names[@]}"; do
	n="${node_names[$i]}"
	kubectl_ label node "$n" kpng.io/service-proxy=kpng --overwrite >/dev/null
	wait_for "kpng Ready on $n" 120 ready_on kpng "$n"
	wait_for "kube-proxy gone from $n" 120 gone_from kube-proxy "$n"
	wait_for "kube-proxy's rules removed from $n" 60 no_rules_of kube_proxy_rules "$i"
	sleep 5
	say "$n moved to kpng ($(oks))"
done
sleep 10
moved_failures=$(failures)

# And back: the label removed, then kpng's rules cleaned up by the Job.
for i in "${!node_names[@]}"; do
	n="${node_names[$i]}"
	kubectl_ label node "$n" kpng.io/service-proxy- >/dev/null
	wait_for "kube-proxy Ready on $n" 120 ready_on kube-proxy "$n"
	wait_for "kpng gone from $n" 120 gone_from kpng "$n"
	sed "s/NODE_NAME/$n/g" "$repo/deploy/migration/cleanup-kpng-job.yaml" | kubectl_ apply -f - >/dev/null
	wait_for "the clean-up Job on $n" 120 kubectl_ wait -n kube-system --for=condition=complete "job/kpng-cleanup-$n" --timeout=1s
	no_rules_of kpng_rules "$i" || die "kpng's rules left on $n after its clean-up Job: $(kpng_rules "$i")"
	sleep 5
	say "$n back on kube-proxy ($(oks))"
done
sleep 10
all_failures=$(failures)
counts=$(oks)
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()

kubectl_ delete deployment mig-client mig-echo >/dev/null
kubectl_ delete service mig-echo mig-local >/dev/null
kubectl_ kustomize "$work/kpng" | kubectl_ delete -f - --ignore-not-found >/dev/null 2>&1 || true
kubectl_ delete jobs -n kube-system -l k8s-app=kpng-cleanup >/dev/null
for i in "${!node_names[@]}"; do no_rules_of kpng_rules "$i" || die "kpng's rules left on ${node_names[$i]}"; done

if [[ -n $all_failures ]]; then
	echo "$all_failures" >&2
	die "kube-proxy ($mode mode) -> kpng -> kube-proxy: failed connections (above)"
fi
[[ -z $moved_failures ]] || die "failures while moving to kpng"
say "kube-proxy ($mode mode) -> kpng -> kube-proxy, node by node: 0 failed connections ($counts); no rule of the other proxy left on any node"
