#!/usr/bin/env bash
# Puts kpng's run-time files for one architecture in DEST (the image's /opt/kpng): package.json, bin/,
# dist/src/ (JavaScript only), the production dependencies, and the addon with the BPF object beside it.
#
# The addon is the portable prebuild, prebuilds/linux-<arch>/ (`make prebuilds`: libnftnl, libmnl's API
# and libbpf linked in). Where that cannot be made (hack/prebuild/deps.sh says
# why), the host's own build/Release/ stands in for the host's architecture; it links Debian's shared
# libraries, so the script prints "host-build" and build.sh adds those libraries to the root.
#
# The dependencies are `npm ci --omit=dev` of package-lock.json (cached per lockfile), less what Node
# never loads: type declarations, source maps, TypeScript sources, documents, package tests and
# examples, the type-only packages, the Bare runtime's stand-ins that tar-fs names (Node resolves
# node:fs), and @kubernetes/client-node's generated API classes and models (dist/gen/{apis,models,types}):
# kpng uses KubeConfig only, and loads them on a makeApiClient() call alone (src/source/kube/client-node.ts).
# Usage: hack/image/app.sh amd64|arm64 DEST        (prints "prebuild" or "host-build")
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
arch=${1:?usage: app.sh amd64|arm64 DEST}
dest=${2:?usage: app.sh amd64|arm64 DEST}
narch=$(node_arch "$arch")
[ -f "$repo/dist/src/index.js" ] || { echo "image: dist/ is not built (make build)" >&2; exit 1; }

# The addon.
addon=prebuild
if ! "$repo/hack/prebuild/build.sh" --fresh "$narch"; then
  if [ "$arch" = "$host_arch" ] && [ -f "$repo/build/Release/kpng_native.node" ]; then
    addon=host-build
    echo "image: prebuilds/linux-$narch is missing or older than native/ (make prebuilds); using build/Release/, which links Debian's shared libraries" >&2
  else
    echo "image: prebuilds/linux-$narch is missing or older than native/: run make prebuilds" >&2; exit 1
  fi
fi

# Production dependencies, once per lockfile.
lock=$(sha256sum "$repo/package-lock.json" | cut -c1-16)
mods="$cache/app/modules-$lock"
if [ ! -d "$mods/node_modules" ]; then
  rm -rf "$cache/app" && mkdir -p "$mods.tmp"
  cp "$repo/package.json" "$repo/package-lock.json" "$mods.tmp/"
  (cd "$mods.tmp" && npm ci --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --silent) >&2 ||
    { echo "image: npm ci --omit=dev failed" >&2; rm -rf "$mods.tmp"; exit 1; }
  m="$mods.tmp/node_modules"
  find "$m" -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \
    -o -iname '*.md' -o -iname '*.markdown' -o -iname 'CHANGELOG*' \) -delete
  for p in "$m"/* "$m"/@*/*; do
    [ -f "$p/package.json" ] || continue
    rm -rf "$p"/{test,tests,__tests__,example,examples,benchmark,benchmarks,.github}
  done
  rm -rf "$m"/@types "$m"/*/node_modules/@types "$m"/undici-types "$m"/*/node_modules/undici-types "$m"/bare-* \
    "$m/@kubernetes/client-node/dist/gen"/{apis,models,types}
  rm -f "$m/.package-lock.json"
  mv "$mods.tmp" "$mods"
fi

rm -rf "$dest" && mkdir -p "$dest/dist"
cp "$repo/package.json" "$dest/"
cp -r "$repo/bin" "$dest/"
(cd "$repo/dist" && find src -type f -name '*.js' ! -name '*.test.js' -print0 | tar --null -T - -cf -) | tar -xf - -C "$dest/dist"
cp -r "$mods/node_modules" "$dest/"
if [ $addon = prebuild ]; then
  mkdir -p "$dest/prebuilds" && cp -r "$repo/prebuilds/linux-$narch" "$dest/prebuilds/"
else
  mkdir -p "$dest/build/Release" && cp "$repo/build/Release/kpng_native.node" "$repo/build/Release/sock_lb.bpf.o" "$dest/build/Release/"
fi
echo $addon
