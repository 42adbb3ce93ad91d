#!/usr/bin/env bash
# Builds the C libraries the addon needs (libmnl, libnfnetlink, libnftnl, libnetfilter_conntrack, zlib,
# libelf, libbpf) as static, position-independent archives for one architecture with zig's cc targeting
# glibc 2.28, into $KPNG_PREBUILD_CACHE/<arch>/ (include/, lib/, lib/pkgconfig/). The addon links them in,
# so a prebuild needs none of them on the machine it loads on, and no glibc symbol newer than 2.28.
# Usage: hack/prebuild/deps.sh x64|arm64      (prints the prefix; a second run reuses what it built)
#
# Sources: Debian bookworm's source packages (apt-get source, with a private apt state in the cache, so
# the system's sources are untouched). A tree already unpacked at $cache/src/<name>-<version> is used
# as is; that is also the way to supply a source that the mirror in use does not carry.
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

apt_opts=(-o "Dir::Etc::SourceList=$cache/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache=$cache/apt/cache" -o Debug::NoLocking=1)
apt_updated=
# src NAME DEBIAN_SOURCE: prints the unpacked source tree of NAME, fetching the Debian source if needed.
src() {
  local name=$1 pkg=$2 d
  d=$(find "$cache/src" -maxdepth 1 -type d -name "$name-[0-9]*" | sort -V | tail -1)
  if [ -n "$d" ]; then echo "$d"; return; fi
  if [ -z "$apt_updated" ]; then
    mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" > "$cache/apt/sources.list"
    apt-get "${apt_opts[@]}" update -qq >&2
    apt_updated=1
  fi
  local tmp; tmp=$(mktemp -d "$cache/src/.dl-XXXX")
  if ! (cd "$tmp" && apt-get "${apt_opts[@]}" source --download-only -qq "$pkg" >&2); then
    echo "deps.sh: cannot fetch the Debian source of $pkg; unpack $name's source at $cache/src/$name-<version>" >&2
    rm -rf "$tmp"; return 1
  fi
  local orig; orig=$(ls "$tmp"/*.orig.tar.* | grep -v '\.asc$' | head -1)
  tar -xf "$orig" -C "$tmp"
  d=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -1)
  local v; v=$(basename "$orig" | sed -E 's/^[^_]+_([0-9][^.]*(\.[0-9]+)*).*/\1/')
  mv "$d" "$cache/src/$name-$v"; rm -rf "$tmp"
  echo "$cache/src/$name-$v"
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

echo "prebuild: building static libraries for $arch ($target) in $prefix" >&2
# The makefiles' chatter goes to a log, shown when something fails.
log=$cache/deps-$arch.log; : > "$log"
trap 'echo "deps.sh: failed; the last lines of $log:" >&2; tail -30 "$log" >&2' ERR
# The netfilter libraries include a config.h from configure; the one thing they read from it is whether
# the compiler has symbol visibility (zig's clang has).
empty=$cache/obj/config; mkdir -p "$empty"; echo '#define HAVE_VISIBILITY_HIDDEN 1' > "$empty/config.h"

s=$(src libmnl libmnl)
ar_all mnl "$s/src" -I"$s/include" -I"$empty"
cp -r "$s/include/libmnl" "$prefix/include/"; pc libmnl "$(ver "$s")" -lmnl

s=$(src libnfnetlink libnfnetlink)
ar_all nfnetlink "$s/src" -I"$s/include" -I"$empty"
cp -r "$s/include/libnfnetlink" "$prefix/include/"; pc libnfnetlink "$(ver "$s")" -lnfnetlink

s=$(src libnftnl libnftnl)
ar_all nftnl "$s/src" -I"$s/include" -I"$prefix/include" -I"$empty"
cp -r "$s/include/libnftnl" "$prefix/include/"; pc libnftnl "$(ver "$s")" -lnftnl libmnl

s=$(src libnetfilter_conntrack libnetfilter-conntrack)
# Both it and libnftnl define an internal __abi_breakage(): fine in shared libraries, a clash in one link.
ar_all netfilter_conntrack "$s/src" -I"$s/include" -I"$prefix/include" -I"$empty" -D__abi_breakage=__nfct_abi_breakage
cp -r "$s/include/libnetfilter_conntrack" "$prefix/include/"
pc libnetfilter_conntrack "$(ver "$s")" -lnetfilter_conntrack "libnfnetlink libmnl"

s=$(src zlib zlib)
obj_src=$(mktemp -d); cp "$s"/*.c "$obj_src/"
ar_all z "$obj_src" -I"$s" -DHAVE_UNISTD_H -DHAVE_STDARG_H; rm -rf "$obj_src"
cp "$s/zlib.h" "$s/zconf.h" "$prefix/include/"; pc zlib "$(ver "$s")" -lz

# libelf: elfutils' own configure and makefiles (its sources depend on the config.h they write).
s=$(src elfutils elfutils)
b="$cache/obj/$arch/elfutils"; rm -rf "$b"; mkdir -p "$b"
(cd "$b" && "$s/configure" -q --host="${target%%-linux*}-linux-gnu" --disable-debuginfod --disable-libdebuginfod \
   --disable-nls --without-bzlib --without-lzma --without-zstd \
   CC="$CC" AR="$AR" RANLIB="$RANLIB" CFLAGS="$CFLAGS -Wno-error -I$prefix/include" LDFLAGS="-L$prefix/lib" \
 && make -s -j"$jobs" -C lib libeu.a && make -s -j"$jobs" -C libelf libelf.a) >>"$log" 2>&1
"$AR" rcs "$prefix/lib/libelf.a" "$b"/libelf/*.o
cp "$s/libelf/libelf.h" "$s/libelf/gelf.h" "$s/libelf/nlist.h" "$prefix/include/"
[ -f "$b/libelf/elf.h" ] || cp "$s/libelf/elf.h" "$prefix/include/" 2>/dev/null || true
pc libelf "$(ver "$s")" -lelf zlib

s=$(src libbpf libbpf)
b="$cache/obj/$arch/libbpf"; rm -rf "$b"; mkdir -p "$b"
make -s -j"$jobs" -C "$s/src" BUILD_STATIC_ONLY=1 OBJDIR="$b" DESTDIR="$b/root" PREFIX=/ LIBDIR=/lib \
  CC="$CC" AR="$AR" CFLAGS="$CFLAGS -I$prefix/include" install >>"$log" 2>&1
cp "$b/root/lib/libbpf.a" "$prefix/lib/"; cp -r "$b/root/include/bpf" "$prefix/include/"
pc libbpf "$(ver "$s")" -lbpf "libelf zlib"

touch "$stamp"
echo "$prefix"
