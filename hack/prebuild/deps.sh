#!/usr/bin/env bash
# Builds the C libraries the addon needs (libmnl, libnfnetlink, libnftnl, libnetfilter_conntrack, zlib,
# libelf, libbpf) as static, position-independent archives for one architecture with zig's cc targeting
# glibc 2.28, into $KPNG_PREBUILD_CACHE/<arch>/ (include/, lib/, lib/pkgconfig/). The addon links them in,
# so a prebuild needs none of them on the machine it loads on, and no glibc symbol newer than 2.28.
# Usage: hack/prebuild/deps.sh x64|arm64      (prints the prefix; a second run reuses what it built)
#
# Sources: each library's release tarball at a pinned version and sha256 (the `sources` table below), as
# the Debian archive serves it (pool/, the orig tarball of a bookworm, bullseye or trixie source
# package), downloaded once into $cache/downloads/. A mirror that lacks a file (some carry only part of
# the pool) leaves it to be put there by hand: the error names the file and its checksum, and the
# checksum is checked however the file came. A tree already unpacked at $cache/src/<name>-<version> is
# used as is.
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
# The recipe's own hash names the result: editing this file rebuilds, nothing else does.
stamp="$prefix/.built-$(sha256sum "$0" | cut -c1-16)"
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

# name version pool-path sha256, from these Debian source packages: libmnl 1.0.4-3, libnftnl 1.2.4-2,
# zlib 1:1.2.13.dfsg-1, elfutils 0.188-2.1, libbpf 1.1.2-0+deb12u1 (bookworm), libnfnetlink 1.0.1-3
# (bullseye), libnetfilter-conntrack 1.1.0-1 (trixie). Each orig tarball is the upstream release, renamed.
sources=(
  "libmnl 1.0.4 pool/main/libm/libmnl/libmnl_1.0.4.orig.tar.bz2 171f89699f286a5854b72b91d06e8f8e3683064c5901fb09d954a9ab6f551f81"
  "libnfnetlink 1.0.1 pool/main/libn/libnfnetlink/libnfnetlink_1.0.1.orig.tar.bz2 f270e19de9127642d2a11589ef2ec97ef90a649a74f56cf9a96306b04817b51a"
  "libnftnl 1.2.4 pool/main/libn/libnftnl/libnftnl_1.2.4.orig.tar.bz2 c0fe233be4cdfd703e7d5977ef8eb63fcbf1d0052b6044e1b23d47ca3562477f"
  "libnetfilter_conntrack 1.1.0 pool/main/libn/libnetfilter-conntrack/libnetfilter-conntrack_1.1.0.orig.tar.xz 67edcb4eb826c2f8dc98af08dabff68f3b3d0fe6fb7d9d0ac1ee7ecce0fe694e"
  "zlib 1.2.13 pool/main/z/zlib/zlib_1.2.13.dfsg.orig.tar.bz2 71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1"
  "elfutils 0.188 pool/main/e/elfutils/elfutils_0.188.orig.tar.bz2 fb8b0e8d0802005b9a309c60c1d8de32dd2951b56f0c3a3cb56d21ce01595dff"
  "libbpf 1.1.2 pool/main/libb/libbpf/libbpf_1.1.2.orig.tar.gz b50ab60637fb713db78aa98e6ca911ddf13c0799d498a1f6ec03ebffc7dca588"
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
      echo "deps.sh: put the file (the upstream $name-$version release tarball, renamed) at $file" >&2
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
  tar -xf "$file" -C "$tmp"
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

# Every source first, so that one run names everything a mirror lacks.
missing=()
for row in "${sources[@]}"; do n=${row%% *}; src "$n" >/dev/null || missing+=("$n"); done
if [ ${#missing[@]} -gt 0 ]; then echo "deps.sh: no source for ${missing[*]} (see above)" >&2; exit 1; fi
echo "prebuild: building static libraries for $arch ($target) in $prefix" >&2
# The makefiles' chatter goes to a log, shown when something fails.
log=$cache/deps-$arch.log; : > "$log"
trap 'echo "deps.sh: failed; the last lines of $log:" >&2; tail -30 "$log" >&2' ERR
# The netfilter libraries include a config.h from configure; the one thing they read from it is whether
# the compiler has symbol visibility (zig's clang has).
empty=$cache/obj/config; mkdir -p "$empty"; echo '#define HAVE_VISIBILITY_HIDDEN 1' > "$empty/config.h"

s=$(src libmnl)
ar_all mnl "$s/src" -I"$s/include" -I"$empty"
cp -r "$s/include/libmnl" "$prefix/include/"; pc libmnl "$(ver "$s")" -lmnl

s=$(src libnfnetlink)
ar_all nfnetlink "$s/src" -I"$s/include" -I"$empty"
cp -r "$s/include/libnfnetlink" "$prefix/include/"; pc libnfnetlink "$(ver "$s")" -lnfnetlink

s=$(src libnftnl)
ar_all nftnl "$s/src" -I"$s/include" -I"$prefix/include" -I"$empty"
cp -r "$s/include/libnftnl" "$prefix/include/"; pc libnftnl "$(ver "$s")" -lnftnl libmnl

s=$(src libnetfilter_conntrack)
# Both it and libnftnl define an internal __abi_breakage(): fine in shared libraries, a clash in one link.
ar_all netfilter_conntrack "$s/src" -I"$s/include" -I"$prefix/include" -I"$empty" -D__abi_breakage=__nfct_abi_breakage
cp -r "$s/include/libnetfilter_conntrack" "$prefix/include/"
pc libnetfilter_conntrack "$(ver "$s")" -lnetfilter_conntrack "libnfnetlink libmnl"

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
