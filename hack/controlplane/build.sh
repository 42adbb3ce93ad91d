#!/usr/bin/env bash
# Build kube-apiserver and etcd for kpng's e2e tests from the Go module proxy, at the versions pinned in
# hack/controlplane/{apiserver,etcd}/go.mod (+ go.sum). The binaries are cached under
#   ${KPNG_CACHE:-$HOME/.cache/kpng}/controlplane/<k8s-version>-<etcd-version>/{kube-apiserver,etcd}
# and the build is skipped when both are there and answer --version with the pinned version.
#
#   hack/controlplane/build.sh              build if needed; prints one line saying what it did
#   hack/controlplane/build.sh --print-dir  print the cache directory (no build, no Go needed)
#   hack/controlplane/build.sh --force      rebuild even if cached
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# The pinned versions come from the go.mod files, so there is one place to change them.
mod_version() { # <go.mod> <module path>
	awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { v = ($1 == m) ? $2 : $3; print v; exit }' "$1"
}
k8s_version="$(mod_version "$here/apiserver/go.mod" k8s.io/kubernetes)"
etcd_version="$(mod_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
	echo "controlplane: cannot read the pinned versions from $here/*/go.mod" >&2
	exit 1
fi
dir="${KPNG_CACHE:-$HOME/.cache/kpng}/controlplane/${k8s_version}-${etcd_version}"

force=0
case "${1:-}" in
--print-dir) echo "$dir"; exit 0 ;;
--force) force=1 ;;
"") ;;
*) echo "usage: $0 [--print-dir|--force]" >&2; exit 2 ;;
esac

# kube-apiserver --version prints "Kubernetes v1.37.1"; etcd --version prints "etcd Version: 3.6.16".
# grep reads the whole output (no -q): quitting at the first match would kill etcd, still printing, with
# SIGPIPE, and pipefail would then fail the check now and then.
apiserver_ok() { [[ -x "$dir/kube-apiserver" ]] && "$dir/kube-apiserver" --version 2>/dev/null | grep -x "Kubernetes $k8s_version" >/dev/null; }
etcd_ok() { [[ -x "$dir/etcd" ]] && "$dir/etcd" --version 2>/dev/null | grep -x "etcd Version: ${etcd_version#v}" >/dev/null; }

if [[ $force == 0 ]] && apiserver_ok && etcd_ok; then
	echo "controlplane: kube-apiserver $k8s_version and etcd $etcd_version already built in $dir"
	exit 0
fi

if ! command -v go >/dev/null 2>&1; then
	echo "controlplane: 'go' is not installed; it is needed to build kube-apiserver and etcd (Go >= 1.26)" >&2
	exit 1
fi

mkdir -p "$dir"
# One build at a time per cache dir (make and a test run may both ask).
exec 9>"$dir/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [[ $force == 0 ]] && apiserver_ok && etcd_ok; then
	echo "controlplane: kube-apiserver $k8s_version and etcd $etcd_version already built in $dir (by another build)"
	exit 0
fi

# -buildvcs=false: no git needed (and no "dubious ownership" failure when the checkout has another owner).
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
log="$dir/build.log"
: >"$log"
start=$SECONDS

build() { # <module dir> <output name> <extra ldflags>
	local tmp="$dir/.$2.tmp.$$"
	if ! (cd "$here/$1" && go build -trimpath -ldflags="-s -w $3" -o "$tmp" .) >>"$log" 2>&1; then
		rm -f "$tmp"
		echo "controlplane: building $2 failed; the output of go build follows ($log):" >&2
		tail -n 50 "$log" >&2
		exit 1
	fi
	mv -f "$tmp" "$dir/$2"
}

built=()
if [[ $force == 1 ]] || ! etcd_ok; then
	build etcd etcd ""
	built+=("etcd $etcd_version")
fi
if [[ $force == 1 ]] || ! apiserver_ok; then
	minor="${k8s_version#v1.}"; minor="${minor%%.*}"
	vpkg=k8s.io/component-base/version
	build apiserver kube-apiserver "-X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
	built+=("kube-apiserver $k8s_version")
fi
if ! apiserver_ok || ! etcd_ok; then
	echo "controlplane: built binaries in $dir do not report the pinned versions ($k8s_version, $etcd_version)" >&2
	exit 1
fi
what="${built[0]}"
[[ ${#built[@]} -gt 1 ]] && what="$what and ${built[1]}"
echo "controlplane: built $what in $((SECONDS - start))s into $dir"
