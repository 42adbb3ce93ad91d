#!/usr/bin/env bash
# Checks a prebuilt addon is portable: built for the named architecture, needing no shared library
# but the C library's own, no glibc symbol version newer than 2.28, and no C++ library symbol version.
# Usage: hack/prebuild/check.sh x64|arm64 FILE.node
set -euo pipefail
arch=$1 f=$2
case "$arch" in x64) machine='X86-64' ;; arm64) machine='AArch64' ;; *) echo "check: unknown arch $arch" >&2; exit 2 ;; esac
fail() { echo "check: $f: $*" >&2; exit 1; }
readelf -h "$f" | grep -q "Machine:.*$machine" || fail "not an $machine object"
needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for n in $needed; do
  case "$n" in
    libc.so.6|libm.so.6|libpthread.so.0|libdl.so.2|librt.so.1|ld-linux-x86-64.so.2|ld-linux-aarch64.so.1) ;;
    *) fail "needs $n (only the C library's own are allowed)" ;;
  esac
done
versions=$(readelf --dyn-syms -W "$f" | grep -oE '@GLIBC[A-Z]*_[0-9.]+' | sed 's/^@//' | sort -uV)
newest=$(echo "$versions" | grep '^GLIBC_' | sed 's/^GLIBC_//' | sort -V | tail -1)
[ -n "$newest" ] || fail "no GLIBC_ symbol versions found (not linked against glibc?)"
if [ "$(printf '%s\n2.28\n' "$newest" | sort -V | tail -1)" != "2.28" ]; then fail "needs GLIBC_$newest (> 2.28)"; fi
# An undefined symbol with no version is one the glibc 2.28 stubs lack (the headers declare newer
# functions too): it would fail to resolve when loaded on an older glibc. Only Node's own may be so.
unversioned=$(readelf --dyn-syms -W "$f" | awk '$7 == "UND" && $8 != "" && $8 !~ /@/ && $8 !~ /^(napi_|node_api_)/ {print $8}' | sort -u | tr '\n' ' ')
[ -z "$unversioned" ] || fail "needs symbols no glibc 2.28 has: $unversioned"
if echo "$versions" | grep -q '^GLIBCXX_\|^CXXABI_'; then fail "needs the system's C++ library ($(echo "$versions" | grep -m1 'GLIBCXX_\|CXXABI_'))"; fi
if readelf --dyn-syms -W "$f" | awk '$7 != "UND" && $5 == "GLOBAL"' | grep -qE ' (nftnl_|mnl_|nfct_|nfnl_|bpf_object__|elf_|inflate)'; then
  fail "exports symbols of a static library (collides with a system copy another addon loads)"
fi
echo "check: $f: $arch, needs [$needed], newest glibc symbol GLIBC_$newest, $(stat -c %s "$f") bytes"
