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
# Node as the project pins it (the `node` npm package): the base image gets the same binary.
node_version="$(node -p "require('$repo/package.json').devDependencies.node")"
# npm for the build stage's `npm ci` (the official node image ships one; ours comes from the registry).
npm_version="${KPNG_IMAGE_NPM_VERSION:-11.19.1}"
suite=bookworm
image="localhost/kpng:$version"
base_image="localhost/kpng-node:${node_version}-${suite}-slim"
# Bumped when make_base (build.sh) changes: a base made by an older recipe is made again.
base_recipe=2

bah() { buildah --root "$store" --runroot "$runroot" --storage-driver "$driver" "$@"; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then echo "image: needs root (buildah with a store of its own, chroot isolation)" >&2; exit 1; fi
}

# Debian packages the image scripts need (not `make test`): installed only when missing.
source "$repo/hack/lib/apt.sh"
install_tools() { install_missing_packages image buildah debootstrap; }
