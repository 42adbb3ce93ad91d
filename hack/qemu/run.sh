#!/usr/bin/env bash
# Runs a command inside a guest with its own Linux kernel (Debian's generic 6.1: IPVS and full
# nftables, which this machine's kernel lacks), under qemu without KVM (TCG). The guest sees the
# host's / read-only over 9p, so the command runs from this very tree with the same tools;
# /tmp and /run are the guest's own tmpfs, the network is the guest's own (loopback only).
#
#   hack/qemu/run.sh [--timeout SEC] [--mem MiB] [--modules "ip_vs dummy ..."] [--rw DIR]... -- CMD [ARGS...]
#
# CMD runs under bash in the current directory (must not be under /tmp) with the caller's
# environment. Its output is streamed here (through a file on a writable share: the serial port
# would hang on leftover background processes), its exit status is passed back through a file and
# becomes this script's. --rw DIR makes a host directory writable inside the guest (same path).
# Every run is wrapped in `timeout` (exit 124); KPNG_QEMU_VERBOSE=1 prints the guest console.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

timeout_s=${KPNG_QEMU_TIMEOUT:-600}
mem=${KPNG_QEMU_MEM:-1536}
modules=""
rw=()
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --modules) modules=$2; shift 2 ;;
    --rw) rw+=("$(cd "$2" && pwd)"); shift 2 ;;
    --) shift; break ;;
    -*) echo "qemu-run: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--timeout SEC] [--mem MiB] [--modules LIST] [--rw DIR]... -- CMD [ARGS...]" >&2; exit 2; }
# The guest mounts its own /tmp (binding a working directory under the host's /tmp back) and /run.
case "$(pwd)/" in /run/*) echo "qemu-run: the guest's /run is its own; run from elsewhere" >&2; exit 2 ;; esac
for d in "${rw[@]}"; do
  case "$d/" in "$(pwd)"/*) ;; /tmp/*|/run/*) echo "qemu-run: --rw $d: under the guest's own tmpfs (and not under the working directory)" >&2; exit 2 ;; esac
done

kdir=$("$here/setup.sh")
cache=$(dirname "$kdir")
mkdir -p "$cache/runs"
run=$(mktemp -d "$cache/runs/run.XXXXXX")
qpid=""
cleanup() {
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null || true
  [ "${KPNG_QEMU_KEEP:-}" = 1 ] && { echo "qemu-run: run directory kept: $run" >&2; return; }
  rm -rf "$run"
}
trap cleanup EXIT

export -p | grep -vE '^declare -x (PWD|OLDPWD|SHLVL|_|TERM|KPNG_RUN|KPNG_KDIR|KPNG_INIT)=' > "$run/env"
printf 'export TERM=dumb NO_COLOR=1 FORCE_COLOR=0 KPNG_IN_GUEST=1\n' >> "$run/env"
printf '%q ' "$@" > "$run/cmd"
pwd > "$run/cwd"
echo "$modules" > "$run/modules"
printf '%s\n' "${rw[@]}" > "$run/rw"
: > "$run/out"

shares=(-virtfs "local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap,id=hostroot"
  -virtfs "local,path=$run,mount_tag=rw0,security_model=passthrough,multidevs=remap,id=rw0")
i=1
for d in "${rw[@]}"; do
  shares+=(-virtfs "local,path=$d,mount_tag=rw$i,security_model=passthrough,multidevs=remap,id=rw$i")
  i=$((i + 1))
done

t0=$(date +%s.%N)
# One vCPU: multi-threaded TCG with 2 vCPUs was slower on this 2-core machine.
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -accel tcg -smp 1 -cpu max -m "$mem" \
  -nographic -no-reboot -nodefaults -serial "file:$run/console.log" -monitor none \
  -kernel "$kdir/vmlinuz" -initrd "$kdir/initrd.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 random.trust_cpu=on KPNG_INIT=$here/guest-init.sh KPNG_RUN=$run KPNG_KDIR=$kdir" \
  "${shares[@]}" </dev/null >"$run/qemu.log" 2>&1 &
qpid=$!
tail -n +1 -s 0.3 -f --pid="$qpid" "$run/out" &
tpid=$!
qrc=0
wait "$qpid" || qrc=$?
qpid=""
wait "$tpid" 2>/dev/null || true
wall=$(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true)

if [ -s "$run/rc" ]; then
  rc=$(cat "$run/rc")
else
  rc=$([ "$qrc" = 124 ] && echo 124 || echo 125)
  echo "qemu-run: no exit status from the guest (qemu exit $qrc$([ "$qrc" = 124 ] && echo ", timed out after ${timeout_s}s"))" >&2
  echo "--- guest console (tail)" >&2; tail -n 40 "$run/console.log" >&2 || true
  echo "--- qemu" >&2; tail -n 20 "$run/qemu.log" >&2 || true
fi
[ "${KPNG_QEMU_VERBOSE:-}" = 1 ] && { echo "--- guest console" >&2; cat "$run/console.log" >&2; }
echo "qemu-run: guest exit $rc; command started at ${boot:-$(cat "$run/boot" 2>/dev/null || echo '?')} s guest uptime," \
  "ended at $(cat "$run/end" 2>/dev/null || echo '?') s; ${wall:-?} s wall" >&2
exit "$rc"
