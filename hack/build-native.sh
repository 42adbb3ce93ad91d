#!/usr/bin/env bash
# Builds the native netlink addon (build/Release/kpng_native.node) when its sources changed, with
# node-gyp through binding.gyp (flags from pkg-config), against the host's libraries, and beside it the
# test addon (build/Release/kpng_test_native.node, from test/native/: native code only tests load) when
# test/native/ is there. `--prebuild` makes the release artifacts instead, prebuilds/linux-{x64,arm64}/
# (hack/prebuild/build.sh), which node-gyp-build (the loader in src/native/index.ts) picks first; a
# prebuild never holds the test addon.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f binding.gyp ] || exit 0

if [ ! -f node_modules/node-addon-api/package.json ]; then
  echo "build-native: node-addon-api is not installed (npm install)" >&2
  exit 1
fi

# The eBPF socket load balancer, compiled for the bpf target; it sits beside the addon, which loads it
# from its own directory (native/ebpf/loader.cc).
bpf_src=native/bpf/sock_lb.bpf.c
bpf_out=build/Release/sock_lb.bpf.o
build_bpf() {
  if [ -f "$bpf_out" ] && [ "$bpf_out" -nt "$bpf_src" ]; then return 0; fi
  if ! command -v clang >/dev/null; then echo "build-native: clang is missing (run hack/install-deps.sh)" >&2; return 1; fi
  mkdir -p "$(dirname "$bpf_out")"
  echo "build-native: compiling $bpf_src"
  clang -O2 -g -Wall -target bpf -I"/usr/include/$(gcc -print-multiarch)" -c "$bpf_src" -o "$bpf_out"
  # The bpf target has no C library: a memcmp/memcpy clang could not inline fails only at load time.
  if command -v llvm-nm >/dev/null && llvm-nm -u "$bpf_out" | grep -qE ' (memcmp|memcpy|memset|memmove)$'; then
    echo "build-native: $bpf_out calls a C library function (not available to BPF programs)" >&2
    rm -f "$bpf_out"
    return 1
  fi
}

# The portable release artifacts (prebuilds/linux-x64 and linux-arm64, cross-built): hack/prebuild/.
if [ "${1:-}" = "--prebuild" ]; then exec hack/prebuild/build.sh; fi
if [ "${1:-}" = "--bpf-only" ]; then build_bpf; exit 0; fi

if ! pkg-config --exists libnftnl libmnl libbpf 2>/dev/null; then
  echo "build-native: missing libnftnl-dev / libmnl-dev / libbpf-dev / pkg-config (run hack/install-deps.sh)" >&2
  exit 1
fi

# `--prebuild-host`: prebuilds/linux-<arch> from the host's toolchain and shared libraries, for the
# package test in `make test` (quick; it needs the libraries installed where it loads). A prebuild
# already there and newer than the sources, a portable one in particular, is kept.
# Built in a staging directory with the product's sources only: node-gyp rebuild empties build/, which
# keeps the development build (and its test addon).
if [ "${1:-}" = "--prebuild-host" ]; then
  arch=$(node -p process.arch)
  p=prebuilds/linux-$arch/kpng.node
  if [ -f "$p" ] && [ -f "prebuilds/linux-$arch/sock_lb.bpf.o" ] && [ -z "$(find native binding.gyp -newer "$p" -type f | head -1)" ]; then exit 0; fi
  build_bpf
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  for f in binding.gyp package.json native node_modules; do ln -s "$PWD/$f" "$stage/$f"; done
  (cd "$stage" && npx --no-install prebuildify --napi --strip)
  rm -rf "prebuilds/linux-$arch"
  mkdir -p prebuilds && mv "$stage/prebuilds/linux-$arch" prebuilds/
  cp "$bpf_out" "prebuilds/linux-$arch/"
  exit 0
fi

# The addons to build, and whether any of their sources is newer.
outs=(build/Release/kpng_native.node)
srcs=(native binding.gyp)
gyp_vars=()
if [ -d test/native ]; then outs+=(build/Release/kpng_test_native.node); srcs+=(test/native); gyp_vars+=(--kpng_test_native=1); fi
stale=
for out in "${outs[@]}"; do
  if [ ! -f "$out" ] || [ -n "$(find "${srcs[@]}" -newer "$out" -type f \( -name '*.cc' -o -name '*.h' -o -name '*.gyp' \) 2>/dev/null | head -1)" ]; then stale=1; fi
done
if [ -z "$stale" ]; then build_bpf; exit 0; fi

# node-gyp from the project, else the copy bundled with npm.
gyp=(npx --no-install node-gyp)
if [ ! -x node_modules/.bin/node-gyp ]; then
  bundled="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")/node_modules/node-gyp/bin/node-gyp.js"
  [ -f "$bundled" ] && gyp=(node "$bundled")
  # offline: use the installed headers (N-API is ABI-stable across Node versions)
  [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node_api.h ] && gyp+=(--nodedir=/usr)
fi
echo "build-native: compiling the native addon${gyp_vars:+ and the test addon}"
log=$(mktemp)
if ! "${gyp[@]}" rebuild --loglevel=warn "${gyp_vars[@]}" >"$log" 2>&1; then
  grep -E "error|Error|ERR" "$log" | head -40 >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
build_bpf
