#!/usr/bin/env bash
# Proves the image of another architecture (arm64 on an amd64 machine) from its own filesystem, under
# qemu-user: qemu-aarch64-static runs the image's Node directly (no binfmt registration is needed, so
# the entrypoint's `#!/usr/bin/env node` is checked as a file, not executed). qemu-user does not
# translate nf_tables netlink messages: the kernel checks are hack/image/test.sh's, on the host's image.
# Each check prints "ok" or "FAIL"; the script exits non-zero on the first failure.
# Usage: hack/image/test-foreign.sh arm64
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
arch=${1:?usage: test-foreign.sh arm64}
need_root
case "$arch" in arm64) qemu=/usr/bin/qemu-aarch64-static ;; *) echo "image-test: no emulator for $arch here" >&2; exit 1 ;; esac
[ -x "$qemu" ] || { echo "image-test: $qemu is missing (apt-get install qemu-user-static)" >&2; exit 1; }
tag="$image-$arch"
bah inspect --type image "$tag" >/dev/null 2>&1 || { echo "image-test: $tag is not built (make image)" >&2; exit 1; }
fail() { echo "FAIL: $arch: $*" >&2; exit 1; }
ok() { echo "ok: $arch: $*"; }

ctr=""; work=""
cleanup() {
  if [ -n "$ctr" ]; then bah umount "$ctr" >/dev/null 2>&1 || true; bah rm "$ctr" >/dev/null 2>&1 || true; fi
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
work=$(mktemp -d "/tmp/${prefix}test-$arch-XXXXXX")

# The manifest list names this image for this architecture.
bah manifest inspect "$manifest" >"$work/manifest.json" 2>/dev/null || fail "no manifest list $manifest"
digest=$(bah inspect --type image --format '{{.FromImageDigest}}' "$tag")
node -e "
  const m = require('$work/manifest.json');
  const e = m.manifests.find((x) => x.platform.architecture === '$arch' && x.platform.os === 'linux');
  if (!e) throw new Error('no linux/$arch entry');
  if (e.digest !== '$digest') throw new Error('linux/$arch is ' + e.digest + ', the image is $digest');" 2>"$work/err" || fail "$manifest: $(cat "$work/err")"
ok "$manifest lists linux/$arch as $tag ($(bah images --format '{{.Size}}' "$tag" | head -1))"
# What a registry push sends: the list and every image, here into an OCI layout (no registry reachable).
bah manifest push --all --quiet "$manifest" "oci:$work/oci:kpng" >/dev/null 2>"$work/err" || fail "buildah manifest push --all: $(cat "$work/err")"
pushed=$(node -e "
  const fs = require('fs'); const blob = (d) => JSON.parse(fs.readFileSync('$work/oci/blobs/sha256/' + d.split(':')[1], 'utf8'));
  const list = blob(JSON.parse(fs.readFileSync('$work/oci/index.json', 'utf8')).manifests[0].digest);
  console.log(list.manifests.map((m) => m.platform.os + '/' + m.platform.architecture + ' ' + (blob(m.digest).layers.reduce((n, l) => n + l.size, 0) / 1e6).toFixed(1) + ' MB').join(', '));")
[[ "$pushed" == *"linux/$arch "* ]] || fail "the pushed manifest list lacks linux/$arch: $pushed"
ok "buildah manifest push --all writes the list and its images (compressed: $pushed)"
rm -rf "$work/oci"
cfg_arch=$(bah inspect --type image --format '{{.OCIv1.Architecture}}' "$tag")
[ "$cfg_arch" = "$arch" ] || fail "the image's config says architecture $cfg_arch"

ctr=$(bah from --pull=false --arch "$arch" --name "${prefix}test-$arch-$$" "$tag")
mnt=$(bah mount "$ctr")
for f in bin/sh usr/bin/sh usr/bin/apt usr/bin/dpkg; do [ ! -e "$mnt/$f" ] || fail "the image has /$f"; done
machine=$(od -An -tu2 -j18 -N2 "$mnt/usr/local/bin/node" | tr -d ' ')
[ "$machine" = 183 ] || fail "/usr/local/bin/node is not an aarch64 ELF (e_machine $machine)"   # EM_AARCH64
[ "$(readlink "$mnt/usr/local/bin/kpng")" = /opt/kpng/bin/kpng.js ] && [ "$(readlink "$mnt/usr/local/bin/kube-proxy")" = /opt/kpng/bin/kpng.js ] ||
  fail "/usr/local/bin/kpng or kube-proxy does not point at /opt/kpng/bin/kpng.js"
[ "$(head -1 "$mnt/opt/kpng/bin/kpng.js")" = '#!/usr/bin/env node' ] && [ -x "$mnt/usr/bin/env" ] || fail "bin/kpng.js's interpreter line has no /usr/bin/env to run"
ok "an $arch root: node, env, the kpng and kube-proxy links, no shell"

mkdir -p "$mnt/proc" "$mnt/dev" "$mnt/opt/test" "$mnt/tmp"
cp "$repo/examples/cluster.yaml" "$mnt/opt/test/"
cp "$qemu" "$mnt/opt/test/qemu"
# in_root [K=V]... CMD...: CMD (an $arch executable) in the image's root under qemu-user, with the
# image's env plus K=V (set here: a program under qemu-user cannot exec another of its architecture).
in_root() {
  local e=(); while [[ $1 == *=* ]]; do e+=("$1"); shift; done
  env -i PATH=/usr/local/bin:/usr/bin HOME=/root "${e[@]}" "$(command -v unshare)" -m --propagation private /bin/sh -c \
    'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && c=$1 && shift && exec "$c" "$0" /opt/test/qemu "$@"' "$mnt" "$(command -v chroot)" "$@"
}
out=$(in_root /usr/bin/env --version | head -1) || fail "/usr/bin/env does not run"
out=$(in_root /usr/local/bin/node /opt/kpng/bin/kpng.js --version) || fail "kpng --version exited $?"
[[ "$out" =~ ^kpng\ $version\ \(node\ v$node_version\)$ ]] || fail "kpng --version printed: $out"
ok "kpng --version: $out"
out=$(in_root /usr/local/bin/node -e "const n = require('/opt/kpng/dist/src/native'); n.loadNative(); const p = require('/opt/kpng/node_modules/node-gyp-build').path('/opt/kpng');
  console.log(n.nativeAvailable(), p, require('fs').existsSync(require('path').join(require('path').dirname(p), 'sock_lb.bpf.o')))") || fail "loading the addon exited $?"
[ "$out" = "true /opt/kpng/prebuilds/linux-arm64/kpng.node true" ] || fail "the addon: $out"
ok "the portable prebuild loads (prebuilds/linux-arm64), BPF object beside it"
want=$(cd "$repo" && node_modules/.bin/node bin/kpng.js file --input examples/cluster.yaml --node n1 --once 2>/dev/null)
got=$(in_root /usr/local/bin/node /opt/kpng/bin/kpng.js file --input /opt/test/cluster.yaml --node n1 --once 2>"$work/err") || fail "kpng file --once: $(head -c 400 "$work/err")"
[ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") >&2; fail "kpng file --once differs from the worktree's build"; }
ok "kpng file --once: $(grep -c . <<<"$got") lines, same as the worktree's build"
accepted=$(in_root NODE_DEBUG_NATIVE=COMPILE_CACHE /usr/local/bin/node /opt/kpng/bin/kpng.js file --input /opt/test/cluster.yaml --node n1 --once 2>&1 >/dev/null | grep -c 'was accepted' || true)
[ "$accepted" -ge 50 ] || fail "Node accepted $accepted modules from the image's compile cache (expected most of kpng's)"
ok "the image's compile cache: $accepted modules read at a start"
echo "image-test: all checks passed for $tag"
