#!/bin/sh
# PID 1 of a hack/qemu/run.sh guest, reached from the initramfs with the host's / mounted read-only.
# Environment (kernel command line): KPNG_RUN (the run directory: cmd, cwd, env, modules, rw; receives
# out, rc, boot), KPNG_KDIR (the cached kernel: modules and the modprobe wrapper).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
# The guest's /tmp is its own; a working directory under the host's /tmp (a clone made with mktemp)
# is bound back onto the same path from the host's /tmp, kept reachable under /dev/shm first.
cwd=$(cat "$KPNG_RUN/cwd")
case "$cwd/" in /tmp/*) mkdir -p /dev/shm/host-tmp && mount --bind /tmp /dev/shm/host-tmp ;; esac
mount -t tmpfs tmp /tmp
case "$cwd/" in /tmp/*) mkdir -p "$cwd" && mount --bind "/dev/shm/host-tmp${cwd#/tmp}" "$cwd" || echo "guest: binding $cwd failed" ;; esac
mount -t tmpfs run /run
# Writable shares, each at its host path (tag rw0 is the run directory).
i=0
for d in "$KPNG_RUN" $(cat "$KPNG_RUN/rw" 2>/dev/null); do
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 "rw$i" "$d" || echo "guest: mounting $d failed"
  i=$((i + 1))
done
# Module autoloading through a wrapper: this kernel's modules live only in the host's cache.
echo "$KPNG_KDIR/modprobe" > /proc/sys/kernel/modprobe
for m in $(cat "$KPNG_RUN/modules" 2>/dev/null); do "$KPNG_KDIR/modprobe" "$m" || echo "guest: modprobe $m failed"; done
ip link set lo up
cut -d' ' -f1 /proc/uptime > "$KPNG_RUN/boot"
cd "$cwd"
bash -c '. "$KPNG_RUN/env"; . "$KPNG_RUN/cmd"' < /dev/null > "$KPNG_RUN/out" 2>&1
echo $? > "$KPNG_RUN/rc"
cut -d' ' -f1 /proc/uptime > "$KPNG_RUN/end"
sync
exec /bin/busybox poweroff -f
