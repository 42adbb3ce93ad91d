#!/usr/bin/env bash
# `npm run prebuildify`: the portable prebuilds, prebuilds/linux-x64/ and prebuilds/linux-arm64/, each
# the addon (N-API, one file for every Node version) with the BPF object beside it (native/ebpf/loader.cc loads
# it from the addon's directory). Both are cross-built here with zig's cc for glibc 2.28 and link
# libnftnl, libmnl's API (native/mnl/) and libbpf (with libelf and zlib) in statically, with the C++
# library too, so they load on any glibc Linux from 2.28 on (RHEL 8, Debian 10, Ubuntu 20.04) with
# nothing installed but Node. hack/prebuild/check.sh verifies each result; the install test
# (hack/prebuild/install-test.sh) proves it in Debian roots.
# Usage: hack/prebuild/build.sh [--force] [x64] [arm64]     (both by default; an architecture whose
# prebuild is portable (check.sh) and newer than native/, binding.gyp and the build scripts is kept unless
# --force)
#        hack/prebuild/build.sh --fresh x64     exits 0 when that prebuild would be kept, 1 otherwise
set -euo pipefail
cd "$(dirname "$0")/../.."
force=; only_check=
case "${1:-}" in --force) force=1; shift ;; --fresh) only_check=1; shift ;; esac
arches=("$@"); [ ${#arches[@]} -gt 0 ] || arches=(x64 arm64)
fresh() {
  [ -z "$force" ] && [ -f "prebuilds/linux-$1/kpng.node" ] && [ -f "prebuilds/linux-$1/sock_lb.bpf.o" ] &&
    [ -z "$(find native binding.gyp hack/prebuild/{build,deps,zig,node}.sh hack/prebuild/exports.map -newer "prebuilds/linux-$1/kpng.node" -type f | head -1)" ] &&
    hack/prebuild/check.sh "$1" "prebuilds/linux-$1/kpng.node" >/dev/null 2>&1   # not a host build
}
if [ -n "$only_check" ]; then for a in "${arches[@]}"; do fresh "$a" || exit 1; done; exit 0; fi
todo=(); for a in "${arches[@]}"; do fresh "$a" && echo "prebuild: prebuilds/linux-$a is up to date" || todo+=("$a"); done
arches=("${todo[@]}"); [ ${#arches[@]} -gt 0 ] || exit 0
cache=${KPNG_PREBUILD_CACHE:-$HOME/.cache/kpng/prebuild}
export ZIG_GLOBAL_CACHE_DIR=$cache/zig-cache ZIG_LOCAL_CACHE_DIR=$cache/zig-cache
root=$PWD
PATH=$root/node_modules/.bin:$PATH

hack/build-native.sh --bpf-only
# node-gyp rebuild empties build/: build in a staging directory, so the host's own build/ (make build)
# stays as it is.
stage=$cache/stage; rm -rf "$stage"; mkdir -p "$stage"
for f in binding.gyp package.json native node_modules; do ln -s "$PWD/$f" "$stage/$f"; done
# Headers only: the same for every architecture.
nodedir=$(hack/prebuild/node.sh x64)
for arch in "${arches[@]}"; do
  start=$(date +%s)
  prefix=$(hack/prebuild/deps.sh "$arch")
  rm -rf "prebuilds/linux-$arch"
  echo "prebuild: compiling the addon for linux-$arch"
  log=$(mktemp)
  # node-gyp reads the compilers, the pkg-config search path and LDFLAGS from the environment, and
  # npm_config_nodedir spares it a header download. The version script keeps the static libraries' symbols
  # out of the addon's dynamic symbol table, -s strips it (prebuildify's strip is the host's binutils,
  # which may not know the other architecture).
  if ! (cd "$stage" && env CC="$cache/bin/$arch-cc" CXX="$cache/bin/$arch-c++" AR="$cache/bin/ar" \
      PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH= \
      LDFLAGS="-Wl,--version-script=$root/hack/prebuild/exports.map -s" npm_config_nodedir="$nodedir" \
      prebuildify --napi --arch "$arch") >"$log" 2>&1; then
    grep -E "error|Error|ERR" "$log" | head -40 >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  mkdir -p prebuilds && mv "$stage/prebuilds/linux-$arch" prebuilds/
  cp build/Release/sock_lb.bpf.o "prebuilds/linux-$arch/"
  hack/prebuild/check.sh "$arch" prebuilds/linux-$arch/*.node
  echo "prebuild: linux-$arch done in $(( $(date +%s) - start )) s"
done
rm -rf "$stage"
