#!/usr/bin/env bash
# Runs upstream's own e2e tests (e2e.test from k8s.io/kubernetes at the cluster's version) against the
# local cluster (hack/cluster/up.sh) with the chosen service proxy deployed as a DaemonSet. By default:
# sig-network's Services tests and sig-network's conformance tests, minus the skips that
# hack/conformance/suite.ts lists with their reasons.
#
#   hack/conformance/run.sh [--backend nft|ebpf|upstream] [--family ipv4|ipv6|dual] [--profile default|wide]
#                           [--focus RE] [--skip RE] [--nodes N] [--report-dir DIR] [--keep-cluster]
#                           [--reuse-cluster] [--parallel N]
#     --family F       the cluster's IP family (up.sh --family; default ipv4). e2e.test finds the primary
#                      family itself (the `kubernetes` Service's address); the focus and skips follow
#                      the family as upstream's IPv6 and dual-stack jobs do (suite.ts familySkips: dual
#                      adds the [Feature:IPv6DualStack] tests, ipv6 skips [Feature:Networking-IPv4])
#     --profile P      default: the Services and sig-network conformance tests, no [Slow] or [Serial];
#                      wide: also sig-network's Conntrack, KubeProxy, Networking, DNS, HostPort and
#                      EndpointSlice tests, [Slow] and [Serial] included (suite.ts WIDE_FOCUS; hours)
#     --focus RE       the tests to run instead of the profile's focus
#     --skip RE        more tests to skip (added to the default skips)
#     --report-dir     where the JUnit and JSON reports and the cluster's logs go
#                      (default .cache/conformance/<backend>, -<family> added for ipv6 and dual,
#                      -wide for the wide profile)
#     --keep-cluster   leave the cluster up afterwards (hack/cluster/down.sh stops it)
#     --reuse-cluster  use the cluster that is up (only the proxy is redeployed)
#     --parallel N     ginkgo processes (default 4: most tests wait on pods and timers, not CPU)
# The last line printed is "N passed, M failed, K skipped"; the exit status is 0 only when none failed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../cluster/lib/common.sh"

backend=nft; family=ipv4; profile=default; focus=""; extra_skip=""; nodes=2; report_dir=""; keep=0; reuse=0; parallel=4
while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) backend="$2"; shift 2 ;;
	--family) family="$2"; shift 2 ;;
	--profile) profile="$2"; shift 2 ;;
	--focus) focus="$2"; shift 2 ;;
	--skip) extra_skip="$2"; shift 2 ;;
	--nodes) nodes="$2"; shift 2 ;;
	--report-dir) report_dir="$2"; shift 2 ;;
	--keep-cluster) keep=1; shift ;;
	--reuse-cluster) reuse=1; shift ;;
	--parallel) parallel="$2"; shift 2 ;;
	-h|--help) usage_of "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
	esac
done
case "$backend" in nft|ebpf|upstream) ;; *) die "conformance: --backend is nft, ebpf or upstream, not $backend" ;; esac
case "$family" in ipv4|ipv6|dual) ;; *) die "conformance: --family is ipv4, ipv6 or dual, not $family" ;; esac
case "$profile" in default|wide) ;; *) die "conformance: --profile is default or wide, not $profile" ;; esac
[[ $(id -u) == 0 ]] || die "conformance: needs root (the cluster's nodes are namespaces and cgroups of this machine)"
report_default="$repo/.cache/conformance/$backend"; [[ $family == ipv4 ]] || report_default+="-$family"
[[ $profile == default ]] || report_default+="-$profile"
report_dir="${report_dir:-$report_default}"
suite() { node "$repo/dist/hack/conformance/suite.js" "$@"; }
[[ -n $focus ]] || focus="$(suite focus --family "$family" --profile "$profile")"
skip="$(suite skip "$extra_skip" --family "$family" --profile "$profile")"

start=$SECONDS
(cd "$repo" && make -s build)
"$repo/hack/cluster/build.sh"
ginkgo="$cluster_bin/ginkgo"
up_args=(--nodes "$nodes" --family "$family")
if [[ $backend == upstream ]]; then up_args+=(--no-kpng); else (cd "$repo" && make -s image-host); fi
if [[ $reuse == 1 && -e $cluster_state/up ]]; then
	up_family="$(cat "$cluster_state/family" 2>/dev/null || echo ipv4)"
	[[ $up_family == "$family" ]] || die "conformance: the cluster that is up is $up_family, not $family (drop --reuse-cluster, or --family $up_family)"
	"$repo/hack/cluster/images.sh" "${up_args[@]:4}" >/dev/null
	# Images rebuilt since the nodes started replace the ones they imported then.
	eval "$(running_plan_env)"
	while read -r archive; do
		for name in "${node_names[@]}"; do node_import "$name" "$archive"; done
	done <"$cache/cluster/$k8s_version/images/list"
	echo "conformance: reusing the cluster in $cluster_state (images imported again)"
else
	# A fresh cluster for this run: one that is up (say, with other nodes) is stopped first.
	"$repo/hack/cluster/down.sh" --quiet
	"$repo/hack/cluster/up.sh" "${up_args[@]}"
fi
if [[ $keep == 0 ]]; then trap '"$repo/hack/cluster/down.sh" --keep-logs "$report_dir/logs" >/dev/null' EXIT; fi
"$repo/hack/cluster/proxy.sh" "$backend"
built=$((SECONDS - start))

rm -rf "$report_dir"; mkdir -p "$report_dir"
echo "conformance: $backend ($family, $profile profile), focus /$focus/, skip /$skip/"
status=0
KUBECONFIG="$cluster_state/admin.kubeconfig" "$ginkgo" -p --procs "$parallel" --no-color --timeout 3h \
	--focus "$focus" --skip "$skip" \
	--junit-report junit.xml --json-report report.json --output-dir "$report_dir" \
	"$cluster_bin/e2e.test" -- \
	--provider local --kubeconfig "$cluster_state/admin.kubeconfig" --kubectl-path "$cluster_bin/kubectl" --num-nodes "$nodes" \
	--report-dir "$report_dir" --e2e-output-dir "$report_dir" \
	--allowed-not-ready-nodes 0 --node-schedulable-timeout 2m --minStartupPods 0 --dump-logs-on-failure=false \
	>"$report_dir/e2e.log" 2>&1 || status=$?
kubectl_ -n kube-system logs -l "k8s-app in (kpng,kube-proxy)" --tail=-1 --prefix >"$report_dir/proxy.log" 2>&1 || true
[[ -s $report_dir/report.json ]] || { tail -30 "$report_dir/e2e.log" >&2; die "conformance: e2e.test wrote no report (exit $status; log $report_dir/e2e.log)"; }
suite failures "$report_dir/report.json" | sed 's/^/  /'
echo "conformance: $backend ($family): reports in $report_dir; setup $built s, tests $((SECONDS - start - built)) s"
line="$(suite summary "$report_dir/report.json")"
echo "$line"
[[ $line == *" 0 failed,"* ]]
