#!/usr/bin/env bash
# Builds every binary of the local cluster (hack/cluster/up.sh) and of `make conformance` from the Go
# module proxy, at the versions pinned in hack/cluster/{k8s,containerd}/go.mod:
#   k8s/         kubelet, kube-controller-manager, kube-scheduler, kubectl, agnhost, e2e.test and ginkgo (its
#                runner, at the version e2e.test links), at the
#                k8s.io/kubernetes version of hack/controlplane's kube-apiserver
#   containerd/  containerd (CRI built in), containerd-shim-runc-v2 and ctr
#   coredns/     CoreDNS, the cluster's DNS
#   kwok/        kwok (sigs.k8s.io/kwok/cmd/kwok): fake nodes for large-cluster benches (up.sh --kwok-nodes)
# plus hack/controlplane (etcd, kube-apiserver) and hack/kube-proxy (upstream kube-proxy, the reference).
# Binaries are cached in ${KPNG_CACHE:-~/.cache/kpng}/cluster/<k8s-version>/bin; a group is rebuilt only
# when its go.mod or go.sum changed (a stamp beside the binaries records their hash).
#
#   hack/cluster/build.sh              build what is missing; one line per group
#   hack/cluster/build.sh --print-dir  print the bin directory (no build)
#   hack/cluster/build.sh --no-e2e     everything but e2e.test (6-7 min of the cold build)
#   hack/cluster/build.sh --scale      only what a kwok bench without real nodes needs: etcd and
#                                      kube-apiserver (hack/controlplane), the k8s group (for
#                                      kube-controller-manager and kube-scheduler) and kwok; no
#                                      containerd, CoreDNS, e2e.test or upstream kube-proxy
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"

with_e2e=1 scale=0
case "${1:-}" in
--print-dir) echo "$cluster_bin"; exit 0 ;;
--no-e2e) with_e2e=0 ;;
--scale) with_e2e=0 scale=1 ;;
"") ;;
*) echo "usage: $0 [--print-dir|--no-e2e|--scale]" >&2; exit 2 ;;
esac

command -v go >/dev/null 2>&1 || die "'go' is not installed; the cluster's binaries are built with Go >= 1.26"
mkdir -p "$cluster_bin"

"$repo/hack/controlplane/build.sh"
[[ $scale == 1 ]] || "$repo/hack/kube-proxy/build.sh"

export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
log="$cluster_bin/build.log"
stamp_of() { cat "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -c1-16; }
# fresh <group> <binaries...>: every binary is there and was built from the group's current go.mod/go.sum.
fresh() {
	local group="$1" b; shift
	[[ -f "$cluster_bin/.$group.stamp" && "$(cat "$cluster_bin/.$group.stamp")" == "$(stamp_of "$group")" ]] || return 1
	for b in "$@"; do [[ -x "$cluster_bin/$b" ]] || return 1; done
}
# run_go <group> <what> <go args...>: go build/test in the group's module, its output in the log.
run_go() {
	local group="$1" what="$2"; shift 2
	echo "== $what: go $*" >>"$log"
	if ! (cd "$here/$group" && go "$@") >>"$log" 2>&1; then
		echo "cluster-build: building $what failed; the end of its log ($log):" >&2
		tail -n 40 "$log" >&2
		exit 1
	fi
}

k8s_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$k8s_minor -X $vpkg.gitTreeState=clean"
# One build per group at a time (make and a script may both ask); a fresh group takes no lock.
lock() { exec 9>"$cluster_bin/.$1.lock"; flock 9; }

# build_group <group> <version> <binaries> <go args...>: the group's binaries (a space-separated list)
# from its go.mod, unless they are there and fresh; one line either way. `built` says whether it built.
build_group() {
	local group="$1" version="$2" start; local -a bins; read -ra bins <<<"$3"; shift 3
	built=0
	fresh "$group" "${bins[@]}" || lock "$group"
	if fresh "$group" "${bins[@]}"; then
		echo "cluster-build: ${bins[*]} $version already built in $cluster_bin"
		return
	fi
	start=$SECONDS
	run_go "$group" "${bins[*]}" "$@"
	stamp_of "$group" >"$cluster_bin/.$group.stamp"
	built=1
	echo "cluster-build: built ${bins[*]} $version in $((SECONDS - start)) s"
}

build_group k8s "$k8s_version" "kubelet kube-controller-manager kube-scheduler kubectl agnhost ginkgo" \
	build -trimpath -ldflags="$k8s_ldflags" -o "$cluster_bin/" \
	k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/test/images/agnhost \
	github.com/onsi/ginkgo/v2/ginkgo
[[ $built == 0 ]] || rm -f "$cluster_bin/e2e.test" # same module: e2e.test is rebuilt with it

# kwok: a module of its own (its k8s.io libraries are not the cluster's).
build_group kwok "$(mod_version "$here/kwok/go.mod" sigs.k8s.io/kwok)" kwok \
	build -trimpath -ldflags="-s -w" -o "$cluster_bin/kwok" sigs.k8s.io/kwok/cmd/kwok
[[ $scale == 1 ]] && exit 0

build_group containerd "$containerd_version" "containerd containerd-shim-runc-v2 ctr" \
	build -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs no_dynamic_plugins" \
	-ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" -o "$cluster_bin/" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr

build_group coredns "$coredns_version" coredns build -trimpath -ldflags="-s -w" -o "$cluster_bin/coredns" github.com/coredns/coredns

if [[ $with_e2e == 1 ]]; then
	[[ -x "$cluster_bin/e2e.test" ]] || lock e2e
	if [[ -x "$cluster_bin/e2e.test" ]]; then
		echo "cluster-build: e2e.test $k8s_version already built in $cluster_bin"
	else
		start=$SECONDS
		run_go k8s e2e.test test -c -trimpath -ldflags="$k8s_ldflags" -o "$cluster_bin/.e2e.test.tmp" k8s.io/kubernetes/test/e2e
		mv -f "$cluster_bin/.e2e.test.tmp" "$cluster_bin/e2e.test"
		echo "cluster-build: built e2e.test $k8s_version in $((SECONDS - start)) s"
	fi
fi
