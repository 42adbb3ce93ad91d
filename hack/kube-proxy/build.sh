#!/usr/bin/env bash
# Build upstream kube-proxy from the Go module proxy at the version pinned in hack/kube-proxy/go.mod
# (the same k8s.io/kubernetes version as hack/controlplane's kube-apiserver), for bench/vs-upstream.
# The binary is cached as
#   ${KPNG_CACHE:-$HOME/.cache/kpng}/kube-proxy/<k8s-version>/kube-proxy
# and the build is skipped when it is there and answers --version with the pinned version.
#
#   hack/kube-proxy/build.sh               build if needed; prints one line saying what it did
#   hack/kube-proxy/build.sh --print-path  print the binary's path (no build, no Go needed)
#   hack/kube-proxy/build.sh --force       rebuild even if cached
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(awk '($1 == "k8s.io/kubernetes" || ($1 == "require" && $2 == "k8s.io/kubernetes")) { print ($1 == "require") ? $3 : $2; exit }' "$here/go.mod")"
if [[ -z "$version" ]]; then
	echo "kube-proxy: cannot read the pinned k8s.io/kubernetes version from $here/go.mod" >&2
	exit 1
fi
dir="${KPNG_CACHE:-$HOME/.cache/kpng}/kube-proxy/$version"
bin="$dir/kube-proxy"

force=0
case "${1:-}" in
--print-path) echo "$bin"; exit 0 ;;
--force) force=1 ;;
"") ;;
*) echo "usage: $0 [--print-path|--force]" >&2; exit 2 ;;
esac

ok() { [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | grep -x "Kubernetes $version" >/dev/null; } # no -q: see hack/controlplane/build.sh

if [[ $force == 0 ]] && ok; then
	echo "kube-proxy: $version already built at $bin"
	exit 0
fi
if ! command -v go >/dev/null 2>&1; then
	echo "kube-proxy: 'go' is not installed; it is needed to build upstream kube-proxy (Go >= 1.26)" >&2
	exit 1
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [[ $force == 0 ]] && ok; then
	echo "kube-proxy: $version already built at $bin (by another build)"
	exit 0
fi

# As upstream builds it: static, no VCS stamping (the version comes from -X below).
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
log="$dir/build.log"
start=$SECONDS
minor="${version#v1.}"; minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
tmp="$dir/.kube-proxy.tmp.$$"
if ! (cd "$here" && go build -trimpath \
	-ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean" \
	-o "$tmp" .) >"$log" 2>&1; then
	rm -f "$tmp"
	echo "kube-proxy: go build failed; its output follows ($log):" >&2
	tail -n 50 "$log" >&2
	exit 1
fi
mv -f "$tmp" "$bin"
if ! ok; then
	echo "kube-proxy: the built binary does not report $version" >&2
	exit 1
fi
echo "kube-proxy: built $version in $((SECONDS - start))s at $bin"
