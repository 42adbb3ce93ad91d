#!/usr/bin/env bash
# Builds the C libraries the addon needs (libnftnl with libmnl's API beside it, zlib, libelf, libbpf) as
# static, position-independent archives for one architecture with zig's cc targeting glibc 2.28, into
# $KPNG_PREBUILD_CACHE/<arch>/ (include/, lib/, lib/pkgconfig/). The addon links them in, so a prebuild
# needs none of them on the machine it loads on, and no glibc symbol newer than 2.28.
# Usage: hack/prebuild/deps.sh x64|arm64      (prints the prefix; a second run reuses what it built)
#
# Inputs, each pinned by sha256 (the `sources` table below) and downloaded once into $cache/downloads/
# from the Debian archive's pool:
# - zlib, elfutils and libbpf: their release tarballs (the orig tarballs of bookworm source packages),
#   compiled here;
# - libnftnl: the static archive Debian's libnftnl-dev package ships for the architecture (bookworm,
#   built against glibc 2.36 but calling nothing newer than 2.28: check.sh verifies the result). The
#   mirror reachable here serves the netfilter libraries' binary packages but not their source tarballs;
# - libmnl's API: kpng's own native/mnl/mnl.c, compiled against the header of Debian's libmnl-dev.
# The conntrack clean-up speaks ctnetlink itself (native/conntrack.cc): no conntrack library.
# A file already in $cache/downloads is used if its checksum matches, however it came.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
arch=${1:?usage: deps.sh x64|arm64}
case "$arch" in
  x64) target=x86_64-linux-gnu.2.28 ;;
  arm64) target=aarch64-linux-gnu.2.28 ;;
  *) echo "deps.sh: unknown arch $arch" >&2; exit 2 ;;
esac
cache=${KPNG_PREBUILD_CACHE:-$HOME/.cache/kpng/prebuild}
export ZIG_GLOBAL_CACHE_DIR=$cache/zig-cache ZIG_LOCAL_CACHE_DIR=$cache/zig-cache
zig=$("$here/zig.sh")
prefix=$cache/$arch
# The recipe's hash (this file and native/mnl/) names the result: editing either rebuilds, nothing else does.
stamp="$prefix/.built-$(cat "$0" "$here"/../../native/mnl/*.c | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then echo "$prefix"; exit 0; fi
rm -rf "$prefix" && mkdir -p "$prefix/include" "$prefix/lib/pkgconfig" "$cache/src"
jobs=${KPNG_PREBUILD_JOBS:-2}

# zig cc as a plain compiler command for configure scripts and makefiles.
mkdir -p "$cache/bin"
for t in cc c++; do
  w="$cache/bin/$arch-$t"
  printf '#!/bin/sh\nexec %q %s -target %s "$@"\n' "$zig" "$t" "$target" > "$w"; chmod +x "$w"
done
printf '#!/bin/sh\nexec %q ar "$@"\n' "$zig" > "$cache/bin/ar"; chmod +x "$cache/bin/ar"
printf '#!/bin/sh\nexec %q ranlib "$@"\n' "$zig" > "$cache/bin/ranlib"; chmod +x "$cache/bin/ranlib"
CC="$cache/bin/$arch-cc"; AR="$cache/bin/ar"; RANLIB="$cache/bin/ranlib"
CFLAGS="-O2 -g0 -fPIC -fvisibility=hidden -fno-sanitize=all -D_GNU_SOURCE"

# name version pool-path sha256. Tarballs: zlib 1:1.2.13.dfsg-1, elfutils 0.188-2.1, libbpf
# 1.1.2-0+deb12u1 (bookworm), each the upstream release renamed. Packages: libnftnl-dev 1.2.4-2 and
# libmnl-dev 1.0.4-3 (bookworm); libmnl-dev gives its header only, the same for every architecture.
sources=(
  "zlib 1.2.13 pool/main/z/zlib/zlib_1.2.13.dfsg.orig.tar.bz2 71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1"
  "elfutils 0.188 pool/main/e/elfutils/elfutils_0.188.orig.tar.bz2 fb8b0e8d0802005b9a309c60c1d8de32dd2951b56f0c3a3cb56d21ce01595dff"
  "libbpf 1.1.2 pool/main/libb/libbpf/libbpf_1.1.2.orig.tar.gz b50ab60637fb713db78aa98e6ca911ddf13c0799d498a1f6ec03ebffc7dca588"
  "libnftnl-dev-x64 1.2.4 pool/main/libn/libnftnl/libnftnl-dev_1.2.4-2_amd64.deb 4cbc6f80695044abc6123af5d29cc2b481e2e48727d140564b911cafffdc977b"
  "libnftnl-dev-arm64 1.2.4 pool/main/libn/libnftnl/libnftnl-dev_1.2.4-2_arm64.deb b28900e852a394eb267a1fcd7bf544307165bf406541078705f094bf4b3ddd45"
  "libmnl-dev 1.0.4 pool/main/libm/libmnl/libmnl-dev_1.0.4-3_amd64.deb 20c6c2164ba23f05d3bf1aabb86a43b07043e76f74a15433af62121bbf4379eb"
)
mirror=${KPNG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# src NAME: prints the unpacked source tree of NAME at its pinned version, downloading it if needed.
src() {
  local name=$1 row version path sum file d
  row=$(printf '%s\n' "${sources[@]}" | awk -v n="$name" '$1 == n') || true
  [ -n "$row" ] || { echo "deps.sh: no pinned source for $name" >&2; return 1; }
  read -r _ version path sum <<<"$row"
  d="$cache/src/$name-$version"
  if [ -d "$d" ]; then echo "$d"; return; fi
  file="$cache/downloads/$(basename "$path")"
  mkdir -p "$cache/downloads"
  if [ ! -f "$file" ]; then
    echo "prebuild: downloading $name $version ($path)" >&2
    if ! curl -fsSL --retry 2 -o "$file.part" "$mirror/$path"; then
      rm -f "$file.part"
      echo "deps.sh: cannot download $name $version: $mirror/$path is not served (the mirror in use lacks it)." >&2
      echo "deps.sh: put that file at $file" >&2
      echo "deps.sh: with sha256 $sum, or unpack its tree at $d" >&2
      return 1
    fi
    mv "$file.part" "$file"
  fi
  if ! echo "$sum  $file" | sha256sum -c --quiet - >/dev/null 2>&1; then
    echo "deps.sh: $file does not have the pinned sha256 $sum (got $(sha256sum "$file" | cut -c1-64)); remove it to download it again" >&2
    return 1
  fi
  local tmp; tmp=$(mktemp -d "$cache/src/.unpack-XXXX")
  case "$file" in
    *.deb) mkdir -p "$tmp/$name-$version"; dpkg-deb -x "$file" "$tmp/$name-$version" ;;
    *) tar -xf "$file" -C "$tmp" ;;
  esac
  mv "$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)" "$d"; rm -rf "$tmp"
  echo "$d"
}

# ar_all NAME DIR CFLAGS...: compiles every .c under DIR into lib/libNAME.a.
ar_all() {
  local name=$1 dir=$2; shift 2
  local obj="$cache/obj/$arch/$name"; rm -rf "$obj"; mkdir -p "$obj"
  find "$dir" -name '*.c' -print0 | sort -z | xargs -0 -P "$jobs" -I{} sh -c \
    'f="$1"; shift; o="$0/$(echo "$f" | md5sum | cut -c1-12).o"; "$@" -c "$f" -o "$o"' "$obj" {} "$CC" $CFLAGS "$@" >>"$log" 2>&1
  rm -f "$prefix/lib/lib$name.a"; "$AR" rcs "$prefix/lib/lib$name.a" "$obj"/*.o
}

pc() { # pc NAME VERSION LIBS [REQUIRES]: a pkg-config file for the static archive
  printf 'prefix=%s\nName: %s\nDescription: %s (static, kpng prebuild)\nVersion: %s\nRequires: %s\nCflags: -I${prefix}/include\nLibs: -L${prefix}/lib %s\n' \
    "$prefix" "$1" "$1" "$2" "${4:-}" "$3" > "$prefix/lib/pkgconfig/$1.pc"
}
ver() { basename "$1" | sed -E 's/^.*-([0-9][0-9.]*)$/\1/'; }

# Every input this architecture needs first, so that one run names everything a mirror lacks.
missing=()
for n in zlib elfutils libbpf "libnftnl-dev-$arch" libmnl-dev; do src "$n" >/dev/null || missing+=("$n"); done
if [ ${#missing[@]} -gt 0 ]; then echo "deps.sh: no source for ${missing[*]} (see above)" >&2; exit 1; fi
echo "prebuild: building static libraries for $arch ($target) in $prefix" >&2
# The makefiles' chatter goes to a log, shown when something fails.
log=$cache/deps-$arch.log; : > "$log"
trap 'echo "deps.sh: failed; the last lines of $log:" >&2; tail -30 "$log" >&2' ERR
# libmnl's API (native/mnl/mnl.c) against libmnl-dev's header.
s=$(src libmnl-dev)
cp -r "$s/usr/include/libmnl" "$prefix/include/"
ar_all mnl "$here/../../native/mnl" -I"$prefix/include"
pc libmnl 1.0.4 -lmnl

# libnftnl: Debian's archive, as built (position-independent code, fortified calls all in glibc 2.28).
s=$(src "libnftnl-dev-$arch")
cp -r "$s/usr/include/libnftnl" "$prefix/include/"
cp "$s"/usr/lib/*-linux-gnu/libnftnl.a "$prefix/lib/libnftnl.a"
if [ "$arch" = x64 ]; then
  # x86-64 code built as PIE reads `stderr` PC-relative, which a shared object cannot resolve against
  # libc: those references go to kpng_nftnl_stderr instead, which native/mnl/nftnl_stderr.c sets to
  # stderr when the addon loads.
  objcopy --redefine-sym stderr=kpng_nftnl_stderr "$prefix/lib/libnftnl.a"
fi
pc libnftnl 1.2.4 -lnftnl libmnl

s=$(src zlib)
obj_src=$(mktemp -d); cp "$s"/*.c "$obj_src/"
ar_all z "$obj_src" -I"$s" -DHAVE_UNISTD_H -DHAVE_STDARG_H; rm -rf "$obj_src"
cp "$s/zlib.h" "$s/zconf.h" "$prefix/include/"; pc zlib "$(ver "$s")" -lz

# libelf: elfutils' own configure and makefiles (its sources depend on the config.h they write).
s=$(src elfutils)
b="$cache/obj/$arch/elfutils"; rm -rf "$b"; mkdir -p "$b"
(cd "$b" && "$s/configure" -q --host="${target%%-linux*}-linux-gnu" --disable-debuginfod --disable-libdebuginfod \
   --disable-nls --without-bzlib --without-lzma --without-zstd \
   CC="$CC" AR="$AR" RANLIB="$RANLIB" CFLAGS="$CFLAGS -Wno-error -I$prefix/include" LDFLAGS="-L$prefix/lib" \
 && make -s -j"$jobs" -C lib libeu.a && make -s -j"$jobs" -C libelf libelf.a) >>"$log" 2>&1
"$AR" rcs "$prefix/lib/libelf.a" "$b"/libelf/*.o
cp "$s/libelf/libelf.h" "$s/libelf/gelf.h" "$s/libelf/nlist.h" "$prefix/include/"
[ -f "$b/libelf/elf.h" ] || cp "$s/libelf/elf.h" "$prefix/include/" 2>/dev/null || true
pc libelf "$(ver "$s")" -lelf zlib

s=$(src libbpf)
b="$cache/obj/$arch/libbpf"; rm -rf "$b"; mkdir -p "$b"
make -s -j"$jobs" -C "$s/src" BUILD_STATIC_ONLY=1 OBJDIR="$b" DESTDIR="$b/root" PREFIX=/ LIBDIR=/lib \
  CC="$CC" AR="$AR" CFLAGS="$CFLAGS -I$prefix/include" install >>"$log" 2>&1
cp "$b/root/lib/libbpf.a" "$prefix/lib/"; cp -r "$b/root/include/bpf" "$prefix/include/"
pc libbpf "$(ver "$s")" -lbpf "libelf zlib"

touch "$stamp"
echo "$prefix"
