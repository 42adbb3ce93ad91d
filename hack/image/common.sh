# Shared by hack/image/*.sh (sourced): where the image store lives and how buildah is called.
# One buildah store of its own (not the system's /var/lib/containers), cached across runs:
#   ${KPNG_CACHE:-$HOME/.cache/kpng}/image/storage   images and build-cache layers
# Names of temporary things on the host (working containers, temp dirs, the run root) start with
# $KPNG_IMAGE_PREFIX (default "ki-"), so that several labs on one machine do not collide.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${KPNG_CACHE:-$HOME/.cache/kpng}/image"
prefix="${KPNG_IMAGE_PREFIX:-ki-}"
store="$cache/storage"
runroot="/run/${prefix}buildah"
# overlay needs a kernel overlayfs (every Debian kernel has it); vfs copies each layer (slow, any kernel).
driver="${KPNG_IMAGE_STORAGE_DRIVER:-overlay}"

version="$(node -p "require('$repo/package.json').version")"
# Node as the project pins it (the `node` npm package, the node-linux-<arch> packages beside it).
node_version="$(node -p "require('$repo/package.json').devDependencies.node")"
suite=bookworm
debian_mirror="${KPNG_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Debian's name of this machine's architecture; the image of this architecture is also $image.
host_arch="$(dpkg --print-architecture)"
# What `make image` builds (KPNG_IMAGE_ARCHES narrows it): one image per architecture, $image-<arch>,
# and the manifest list $manifest naming them, for `buildah manifest push --all`.
arches=(${KPNG_IMAGE_ARCHES:-amd64 arm64})
image="localhost/kpng:$version"
manifest="localhost/kpng-multiarch:$version"
# Node's name of a Debian architecture (prebuilds/linux-<this>, node-linux-<this>).
node_arch() { case "$1" in amd64) echo x64 ;; arm64) echo arm64 ;; *) echo "image: unknown architecture $1" >&2; return 1 ;; esac; }

bah() { buildah --root "$store" --runroot "$runroot" --storage-driver "$driver" "$@"; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then echo "image: needs root (buildah with a store of its own, chroot isolation)" >&2; exit 1; fi
}

# Debian packages the image scripts need (not `make test`): installed only when missing.
source "$repo/hack/lib/apt.sh"
install_tools() { install_missing_packages image buildah debootstrap qemu-user-static llvm; }
