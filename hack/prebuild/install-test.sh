#!/usr/bin/env bash
# `make install-test`: the packed tarball (npm pack), with the prebuilds `npm run prebuildify` made,
# installed into Debian 11 and Debian 12 roots (debootstrap, minbase: no compiler, no libnftnl, libmnl,
# libbpf...) for amd64 and arm64, then run there with an official Node for that architecture:
#   - node-gyp-build picks prebuilds/linux-<arch>/ and the addon loads (abi, BPF object beside it);
#   - `kpng file --once` prints the routes of examples/cluster.yaml exactly as on the build machine;
#   - amd64: `kpng file --once --to nft` programs nftables in network namespace ${KPNG_NETNS_PREFIX}inst,
#     and `--to ebpf` loads the BPF object, attaches it to a cgroup of its own and pins its maps.
# arm64 runs under qemu-user (qemu-aarch64-static called directly, no binfmt needed); its netlink part
# is not exercised there (qemu-user does not translate nf_tables messages).
# The roots are unpacked once (debootstrap --foreign: a minbase root's files, which is all Node needs)
# and kept in the prebuild cache. Prints one line per check and "N passed, N failed" at the end.
# KPNG_INSTALL_SUITES, KPNG_INSTALL_ARCHES narrow the matrix; KPNG_INSTALL_NODE=VERSION runs another
# Node than package.json's (e.g. the oldest the engines field allows).
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
cache=${KPNG_PREBUILD_CACHE:-$HOME/.cache/kpng/prebuild}
netns="${KPNG_NETNS_PREFIX:-kpng-test}inst"
suites=(${KPNG_INSTALL_SUITES:-bullseye bookworm})
arches=(${KPNG_INSTALL_ARCHES:-amd64 arm64})
PATH=$repo/node_modules/.bin:$PATH
[ "$(id -u)" -eq 0 ] || { echo "install-test: needs root (debootstrap, chroot, network namespaces)" >&2; exit 1; }
source hack/lib/apt.sh
install_missing_packages install-test debootstrap qemu-user-static nftables iproute2

passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
work=$(mktemp -d /tmp/kpng-install-XXXXXX)
cleanup() { ip netns del "$netns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

for a in "${arches[@]}"; do
  a=${a/amd64/x64}
  [ -f "prebuilds/linux-$a/kpng.node" ] || { echo "install-test: prebuilds/linux-$a is missing (npm run prebuildify)" >&2; exit 1; }
done
[ -f dist/src/index.js ] || { echo "install-test: dist/ is not built (make build)" >&2; exit 1; }

# The tarball exactly as `npm publish` would send it.
tgz=$(cd "$work" && npm pack --silent "$repo") && tgz=$work/$tgz || { echo "install-test: npm pack failed" >&2; exit 1; }
listing=$(tar -tzf "$tgz")
for a in "${arches[@]}"; do
  a=${a/amd64/x64}
  if grep -qx "package/prebuilds/linux-$a/kpng.node" <<<"$listing" && grep -qx "package/prebuilds/linux-$a/sock_lb.bpf.o" <<<"$listing"; then
    ok "npm pack holds prebuilds/linux-$a (addon and BPF object)"
  else bad "npm pack lacks prebuilds/linux-$a"; fi
done

# The installed tree: npm resolves kpng's dependencies (all JavaScript) on this machine with
# --ignore-scripts; kpng's own install step, node-gyp-build, is run in the root below, by the root's Node.
app=$work/app
mkdir -p "$app"
if ! (cd "$app" && npm install --silent --no-audit --no-fund --no-package-lock --omit=dev --ignore-scripts "$tgz") >"$work/npm.log" 2>&1; then
  cat "$work/npm.log" >&2; bad "npm install of the tarball"; echo "$passed passed, $failed failed"; exit 1
fi
expected=$(node bin/kpng.js file --input examples/cluster.yaml --node n1 --once --to routes --format jsonl 2>/dev/null)
[ -n "$expected" ] || { echo "install-test: kpng file --once printed nothing on the build machine" >&2; exit 1; }

root_of() { # root_of SUITE ARCH: prints a cached minbase root, unpacking it the first time
  local suite=$1 arch=$2 dir=$cache/roots/$1-$2
  if [ ! -f "$dir/.kpng-root" ]; then
    local t0; t0=$(date +%s)
    rm -rf "$dir"; mkdir -p "$dir"
    if ! debootstrap --foreign --variant=minbase --arch="$arch" "$suite" "$dir" http://deb.debian.org/debian >"$work/debootstrap-$suite-$arch.log" 2>&1; then
      tail -5 "$work/debootstrap-$suite-$arch.log" >&2; return 1
    fi
    # --foreign leaves packages unpacked, not configured: enough for a Node binary; the shell's
    # symlinks are made by the configure step, so add the one the checks use.
    [ -e "$dir/bin/sh" ] || ln -s dash "$dir/bin/sh"
    # The first stage links proc to the host's /proc for its own use: a mount point is wanted instead.
    if [ -L "$dir/proc" ]; then rm "$dir/proc" && mkdir "$dir/proc"; fi
    # The packages it unpacked are kept for a second stage that never runs here.
    rm -f "$dir"/var/cache/apt/archives/*.deb
    touch "$dir/.kpng-root"
    echo "install-test: unpacked $suite/$arch in $(( $(date +%s) - t0 )) s" >&2
  fi
  echo "$dir"
}

for suite in "${suites[@]}"; do
  for arch in "${arches[@]}"; do
    case "$arch" in amd64) narch=x64; qemu=() ;; arm64) narch=arm64; qemu=(/usr/bin/qemu-aarch64-static) ;; esac
    label="$suite/$arch"
    root=$(root_of "$suite" "$arch") || { bad "$label: debootstrap failed"; continue; }
    nodedir=$(hack/prebuild/node.sh "$narch" ${KPNG_INSTALL_NODE:-}) || { bad "$label: no Node for $narch"; continue; }
    if [ -e "$root/usr/bin/gcc" ] || [ -e "$root/usr/bin/cc" ] || [ -e "$root/usr/lib/$( [ "$arch" = amd64 ] && echo x86_64 || echo aarch64)-linux-gnu/libnftnl.so.11" ]; then
      bad "$label: the root has a compiler or libnftnl (the test would prove nothing)"; continue
    fi
    # A fresh copy of the install and of Node in the root for each run, removed after it.
    rm -rf "$root/opt/kpng" "$root/opt/node" && mkdir -p "$root/opt"
    cp -a "$app" "$root/opt/kpng" && mkdir -p "$root/opt/node/bin" && cp "$nodedir/bin/node" "$root/opt/node/bin/"
    [ ${#qemu[@]} -eq 0 ] || cp /usr/bin/qemu-aarch64-static "$root/usr/bin/"
    cp examples/cluster.yaml "$root/opt/cluster.yaml"
    # in_root [--netns] CMD...: CMD with the root's files only (chroot in a mount namespace of its own,
    # with /proc and /dev); Node and kpng from /opt.
    in_root() {
      local pre=() sys=:
      # nsenter rather than ip netns exec, which mounts a /sys of its own without the cgroup and bpffs.
      if [ "$1" = --netns ]; then pre=(nsenter --net=/var/run/netns/"$netns"); shift; fi
      # --sys: the host's /sys (cgroup v2 and bpffs mounts included) for the eBPF backend.
      if [ "$1" = --sys ]; then sys='mount --rbind /sys "$0/sys"'; shift; fi
      "${pre[@]}" env -i PATH=/opt/node/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        unshare -m --propagation private sh -c 'mount -t proc proc "$0/proc" && mount --rbind /dev "$0/dev" && '"$sys"' && exec chroot "$@"' \
        "$root" "$root" "${qemu[@]}" "$@"
    }
    k=/opt/kpng/node_modules/kpng
    v=$(in_root /opt/node/bin/node -p 'process.version + " " + process.arch' 2>&1) || { bad "$label: Node does not run: $v"; continue; }
    # kpng's install script (node-gyp-build): it must find a prebuild that loads, not fall back to a compile.
    out=$(in_root /opt/node/bin/node -e "
      const p = require('/opt/kpng/node_modules/node-gyp-build').path('$k');
      const a = require('$k/dist/src/native').loadNative();
      const fs = require('fs'); const path = require('path');
      console.log(path.relative('$k', p), a.abi, fs.existsSync(path.join(path.dirname(p), 'sock_lb.bpf.o')));" 2>&1)
    if [ "$out" = "prebuilds/linux-$narch/kpng.node $(node -p "require('./dist/src/native').loadNative().abi") true" ]; then
      ok "$label ($v): node-gyp-build loads prebuilds/linux-$narch, BPF object beside it"
    else bad "$label ($v): the prebuild does not load: $out"; fi
    got=$(in_root /opt/node/bin/node $k/bin/kpng.js file --input /opt/cluster.yaml --node n1 --once --to routes --format jsonl 2>"$work/err")
    if [ "$got" = "$expected" ]; then ok "$label: kpng file --once prints the same $(grep -c . <<<"$got") routes as here"
    else bad "$label: kpng file --once: $(head -c 400 "$work/err") $(head -c 200 <<<"$got")"; fi
    if [ "$arch" = amd64 ]; then
      ip netns del "$netns" 2>/dev/null; ip netns add "$netns" && ip -n "$netns" link set lo up
      if in_root --netns /opt/node/bin/node $k/bin/kpng.js file --input /opt/cluster.yaml --node n1 --once --to nft --cluster-cidr 10.244.0.0/16 >"$work/nft.out" 2>&1; then
        rules=$(ip netns exec "$netns" nft list ruleset)
        if grep -q '10.96.0.10' <<<"$rules" && grep -q '10.244.1.5' <<<"$rules"; then
          ok "$label: kpng file --once --to nft programmed $(grep -c . <<<"$rules") lines of nftables in $netns"
        else bad "$label: --to nft exited 0 but the ruleset lacks default/web"; fi
      else bad "$label: kpng file --once --to nft: $(head -c 600 "$work/nft.out")"; fi
      # The eBPF backend: the static libbpf/libelf/zlib open and load the BPF object beside the
      # addon, attach it to a cgroup of the test's own and pin its maps; --ebpf-cleanup undoes it.
      cg=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
      if [ -n "$cg" ] && mountpoint -q /sys/fs/bpf; then
        cgdir=$cg/${KPNG_NETNS_PREFIX:-kpng-test}inst-$suite pins=/sys/fs/bpf/${KPNG_NETNS_PREFIX:-kpng-test}inst-$suite
        mkdir -p "$cgdir"
        ebpf=(/opt/node/bin/node $k/bin/kpng.js file --input /opt/cluster.yaml --node n1 --once --to ebpf
          --cgroup "$cgdir" --bpffs "$pins" --ebpf-nft-table kpng-inst --cluster-cidr 10.244.0.0/16)
        if in_root --netns --sys "${ebpf[@]}" >"$work/ebpf.out" 2>&1 && [ -n "$(ls -A "$pins" 2>/dev/null)" ]; then
          ok "$label: kpng file --once --to ebpf loaded the BPF object and pinned $(ls "$pins" | wc -l) objects"
        else bad "$label: kpng file --once --to ebpf: $(head -c 600 "$work/ebpf.out")"; fi
        if [ -n "$(ls -A "$pins" 2>/dev/null)" ] && in_root --netns --sys "${ebpf[@]}" --ebpf-cleanup >"$work/ebpf.out" 2>&1 &&
           [ -z "$(ls -A "$pins" 2>/dev/null)" ]; then
          ok "$label: --ebpf-cleanup removed the programs and pins"
        else bad "$label: --ebpf-cleanup: $(head -c 600 "$work/ebpf.out")"; fi
        rm -rf "$pins"; rmdir "$cgdir" 2>/dev/null || true
      else bad "$label: no cgroup v2 or bpffs mount here for the eBPF check"; fi
      ip netns del "$netns"
    fi
    rm -rf "$root/opt/kpng" "$root/opt/node" "$root/opt/cluster.yaml"
  done
done
echo "install-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
