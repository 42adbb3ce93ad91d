#!/usr/bin/env bash
# Prepares a guest kernel for hack/qemu/run.sh, idempotently (quick when everything is there):
#   - Debian packages: qemu-system-x86 (TCG: this machine's /dev/kvm cannot boot a stock kernel),
#     busybox-static (the initramfs), kmod (depmod/modprobe -d), cpio, ipvsadm (test inspection)
#   - Debian's generic 6.1 kernel (linux-image-6.1.0-NN-amd64; the -cloud- flavour has no 9p), fetched
#     with `apt-get download`, unpacked and depmod-ed under the cache
#   - an initramfs that loads the virtio/9p modules, mounts the host's / read-only and switch_roots
#   - a modprobe wrapper the guest kernel calls for module autoloading (modules live in the cache)
# Cache: ${KPNG_QEMU_CACHE:-~/.cache/kpng/qemu}, shared by worktrees, guarded by flock.
# Prints the kernel directory (KDIR) on stdout; everything else goes to stderr.
set -euo pipefail

CACHE=${KPNG_QEMU_CACHE:-$HOME/.cache/kpng/qemu}
# Pinned ABI; when the archive no longer has it, the newest 6.1 generic image it has is taken.
PINNED=${KPNG_QEMU_KERNEL:-6.1.0-56-amd64}
# ipvsadm: the guest tests use it only to look at IPVS independently of kpng's own dumps.
APT_PACKAGES=(qemu-system-x86 busybox-static kmod cpio ipvsadm)
# virtio transport + 9p, in dependency order (`modprobe --show-depends 9p` on this kernel).
INITRD_MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p)

log() { echo "qemu-setup: $*" >&2; }

source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"
install_missing_packages qemu-setup "${APT_PACKAGES[@]}"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

# A kernel already prepared wins (no network needed); the pinned one first.
pick_cached() {
  [ -f "$CACHE/$PINNED/ready" ] && { echo "$PINNED"; return; }
  local d
  for d in $(ls -1d "$CACHE"/6.1.0-*-amd64 2>/dev/null | sort -V -r); do
    [ -f "$d/ready" ] && { basename "$d"; return; }
  done
}
ver=$(pick_cached || true)
if [ -n "$ver" ]; then echo "$CACHE/$ver"; exit 0; fi

ver=$PINNED
if ! apt-cache show "linux-image-$ver" >/dev/null 2>&1; then
  ver=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sed 's/^linux-image-//' | sort -V | tail -1)
  [ -n "$ver" ] || { log "no linux-image-6.1.0-NN-amd64 in the apt sources (apt-get update?)"; exit 1; }
  log "linux-image-$PINNED is not in the archive; using linux-image-$ver"
fi
kdir="$CACHE/$ver"
rm -rf "$kdir"
tmp=$(mktemp -d "$CACHE/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "fetching linux-image-$ver"
(cd "$tmp" && apt-get download -qq "linux-image-$ver" >/dev/null 2>&1) || {
  apt-get update -qq && (cd "$tmp" && apt-get download -qq "linux-image-$ver" >/dev/null)
}
dpkg-deb -x "$tmp"/linux-image-*.deb "$tmp/root"
# Keep what a network guest needs (net, netfilter, 9p, virtio, crypto/lib helpers); ~1/4 of the modules.
mods="$tmp/root/lib/modules/$ver/kernel"
find "$mods" -mindepth 1 -maxdepth 1 ! -name net ! -name lib ! -name crypto ! -name fs ! -name drivers ! -name arch -exec rm -rf {} +
find "$mods/fs" -mindepth 1 -maxdepth 1 ! -name 9p ! -name netfs ! -name fscache -exec rm -rf {} +
find "$mods/drivers" -mindepth 1 -maxdepth 1 ! -name net ! -name virtio ! -name char -exec rm -rf {} +
find "$mods/drivers/net" -mindepth 1 -maxdepth 1 ! -name dummy.ko ! -name veth.ko ! -name 'macvlan.ko' ! -name 'ipvlan' ! -name 'vxlan' ! -name 'tun.ko' ! -name 'virtio_net.ko' ! -name 'net_failover.ko' -exec rm -rf {} +
depmod -b "$tmp/root" "$ver"

# initramfs: busybox, the 9p chain, an init that mounts the host root and hands over to KPNG_INIT.
ird="$tmp/initrd"
mkdir -p "$ird"/{bin,mods,proc,dev,newroot}
cp /bin/busybox "$ird/bin/busybox"
for m in "${INITRD_MODULES[@]}"; do
  f=$(modinfo -b "$tmp/root" -k "$ver" -n "$m")
  case "$f" in
    *.ko) cp "$f" "$ird/mods/$m.ko" ;;
    *.ko.xz) xz -dc "$f" > "$ird/mods/$m.ko" ;;
    *) log "module $m not found ($f)"; exit 1 ;;
  esac
done
cat > "$ird/init" <<EOF
#!/bin/busybox sh
# kpng guest initramfs: host / read-only over 9p, then the run's init script (KPNG_INIT, kernel cmdline).
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
for m in ${INITRD_MODULES[*]}; do /bin/busybox insmod /mods/\$m.ko || echo "initramfs: insmod \$m failed"; done
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /newroot \\
  || { echo "initramfs: mounting the host root failed"; /bin/busybox poweroff -f; }
/bin/busybox umount /proc
exec /bin/busybox switch_root /newroot "\$KPNG_INIT"
EOF
chmod +x "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$tmp/initrd.gz"

mkdir -p "$kdir"
mv "$tmp/root" "$kdir/root"
mv "$tmp/initrd.gz" "$kdir/initrd.gz"
ln -s "root/boot/vmlinuz-$ver" "$kdir/vmlinuz"
# The guest kernel's module autoloader (kernel.modprobe): this kernel's modules are only in the cache.
cat > "$kdir/modprobe" <<EOF
#!/bin/sh
exec /sbin/modprobe -d "$kdir/root" "\$@"
EOF
chmod +x "$kdir/modprobe"
echo "$ver" > "$kdir/ready"
log "kernel $ver ready in $kdir ($(du -sh "$kdir" | cut -f1))"
echo "$kdir"
