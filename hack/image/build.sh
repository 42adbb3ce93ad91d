#!/usr/bin/env bash
# `make image`: the kpng node image for amd64 and arm64, without a daemon and without running a
# foreign-architecture build: each image's root is put together from files made for that architecture,
# then committed with buildah (Debian's package, a store of its own under ${KPNG_CACHE:-~/.cache/kpng}/image).
#
# A root holds what kpng needs at run time and nothing else (no shell, no package manager):
#   - Debian bookworm's libc6, libgcc-s1 and libstdc++6, and `env` (hack/image/runtime-debs.sh);
#   - Node, the official build the project pins (npm package node-linux-<arch>), symbols stripped;
#   - /opt/kpng: kpng's JavaScript, its production dependencies and the portable prebuild with the
#     BPF object beside it (hack/image/app.sh);
#   - /usr/local/bin/kpng and /usr/local/bin/kube-proxy (kubeadm's DaemonSet command);
#   - Node's compile cache of every kpng module at /var/cache/kpng/compile-cache, made by the image's
#     own Node in the root (arm64's under qemu-user).
# Images: localhost/kpng:<version>-<arch>; the host's architecture also as localhost/kpng:<version>
# (what hack/image/test.sh and the cluster scripts use); the manifest list localhost/kpng-multiarch:<version>
# names them all, for `buildah manifest push --all`.
#
#   hack/image/build.sh                    both architectures (KPNG_IMAGE_ARCHES="amd64" narrows)
set -euo pipefail
shopt -s inherit_errexit   # a failure inside $(make_root ...) fails the build
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ $# -eq 0 ] || { echo "usage: $0   (KPNG_IMAGE_ARCHES=\"amd64 arm64\")" >&2; exit 2; }

need_root
install_tools
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # one build at a time per store

work=""; ctr=""
cleanup() {
  if [ -n "$ctr" ]; then bah rm "$ctr" >/dev/null 2>&1 || true; fi
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
work=$(mktemp -d "/tmp/${prefix}image-XXXXXX")
revision=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
git -C "$repo" diff --quiet HEAD 2>/dev/null || revision="$revision-dirty"
source_url="${KPNG_IMAGE_SOURCE:-$(git -C "$repo" config --get remote.origin.url 2>/dev/null || echo "$repo")}"

# warm ARCH ROOT: Node's compile cache of kpng's modules, written by the root's own Node, at the paths
# and with the flags a start in the image has (its entries are keyed by both).
warm() {
  local arch=$1 root=$2 qemu=()
  if [ "$arch" != "$host_arch" ]; then
    [ "$arch" = arm64 ] || { echo "image: no emulator for $arch on $host_arch" >&2; return 1; }
    qemu=(/usr/bin/qemu-aarch64-static)
    cp /usr/bin/qemu-aarch64-static "$root/usr/bin/"
  fi
  cp "$repo/hack/image/warm-compile-cache.js" "$root/tmp/"
  mkdir -p "$root/proc" "$root/dev"
  env -i PATH=/usr/local/bin:/usr/bin HOME=/root "$(command -v unshare)" -m --propagation private /bin/sh -c \
    'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && c=$1 && shift && exec "$c" "$0" "$@"' "$root" "$(command -v chroot)" "${qemu[@]}" \
    /usr/local/bin/node /tmp/warm-compile-cache.js /var/cache/kpng/compile-cache /opt/kpng >&2
  rm -f "$root/tmp/warm-compile-cache.js" "$root/usr/bin/qemu-aarch64-static"
  rmdir "$root/proc" "$root/dev"
}

# root ARCH DIR: the image's root file system.
make_root() {
  local arch=$1 root=$2 narch node addon extra
  narch=$(node_arch "$arch")
  addon=$("$repo/hack/image/app.sh" "$arch" "$root/opt/kpng")
  extra=()
  # build/Release's addon (no portable prebuild, host architecture only) links Debian's libraries.
  [ "$addon" = prebuild ] || extra=(libnftnl11 libmnl0 libbpf1 libelf1 zlib1g libzstd1)
  echo "image: $arch: kpng's files ($addon) in $((SECONDS - start)) s" >&2
  "$repo/hack/image/runtime-debs.sh" "$arch" "$root" "${extra[@]}"
  node=$("$repo/hack/prebuild/node.sh" "$narch" "$node_version")/bin/node
  install -D -m 0755 "$node" "$root/usr/local/bin/node"
  # The official binary carries its symbol table and debug sections (about 15% of it); stack traces of
  # JavaScript do not use them.
  llvm-strip --strip-all "$root/usr/local/bin/node"
  ln -s /opt/kpng/bin/kpng.js "$root/usr/local/bin/kpng"
  ln -s /opt/kpng/bin/kpng.js "$root/usr/local/bin/kube-proxy"
  mkdir -p "$root/etc" "$root/root" "$root/var/cache/kpng" "$root/run" && chmod 0700 "$root/root"
  ln -s /run "$root/var/run"   # as Debian's: kubelet mounts the service account at /var/run/secrets
  install -d -m 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  # Without this file glibc asks DNS first and stops at its "not found": an API server named in the
  # node's /etc/hosts (kubeadm's controlPlaneEndpoint often is) would never resolve.
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  echo "image: $arch: root without compile cache in $((SECONDS - start)) s" >&2
  warm "$arch" "$root"
  echo "image: $arch: compile cache in $((SECONDS - start)) s" >&2
  echo "$addon"
}

built=()
for arch in "${arches[@]}"; do
  start=$SECONDS
  root="$work/root-$arch"
  addon=$(make_root "$arch" "$root" | tail -1)
  tag="$image-$arch"
  ctr=$(bah from --name "${prefix}build-$arch-$$" scratch)
  bah copy --quiet "$ctr" "$root" / >/dev/null
  bah config --arch "$arch" --os linux \
    --entrypoint '["/usr/local/bin/kpng"]' --workingdir /opt/kpng \
    --env PATH=/usr/local/bin:/usr/bin --env NODE_VERSION="$node_version" \
    --label org.opencontainers.image.title=kpng \
    --label org.opencontainers.image.description="kpng, a Kubernetes service proxy: Node $node_version, kpng's production files, glibc and libstdc++ from Debian $suite" \
    --label org.opencontainers.image.version="$version" \
    --label org.opencontainers.image.revision="$revision" \
    --label org.opencontainers.image.source="$source_url" \
    --label org.opencontainers.image.licenses=GPL-2.0-or-later \
    --label kpng.addon="$addon" "$ctr"
  bah commit --quiet --rm "$ctr" "$tag" >/dev/null
  ctr=""
  rm -rf "$root"
  [ "$arch" = "$host_arch" ] && bah tag "$tag" "$image"
  built+=("$tag")
  echo "image: $tag built in $((SECONDS - start)) s ($(bah images --format '{{.Size}}' "$tag" | head -1), addon: $addon)"
done

# The manifest list, made anew from this build's images.
bah manifest rm "$manifest" >/dev/null 2>&1 || true
bah manifest create "$manifest" >/dev/null
for t in "${built[@]}"; do bah manifest add "$manifest" "$t" >/dev/null; done
echo "image: manifest list $manifest: ${built[*]} (push: buildah manifest push --all $manifest docker://REGISTRY/kpng:$version)"
# Images of earlier builds that no tag names any more.
bah images --filter dangling=true --format '{{.ID}}' | while read -r id; do bah rmi "$id" >/dev/null 2>&1 || true; done
