#!/usr/bin/env bash
# Prints the path of the zig compiler the portable prebuilds are built with, installing it first from
# PyPI (package ziglang) into the prebuild cache. zig's cc links against stubs of a chosen glibc version
# for any architecture, which is what lets one machine build addons that load on older distributions.
set -euo pipefail
cache=${KPNG_PREBUILD_CACHE:-$HOME/.cache/kpng/prebuild}
version=0.17.1
dir=$cache/zig-$version
if [ ! -x "$dir/ziglang/zig" ]; then
  echo "prebuild: installing zig $version (PyPI ziglang) into $dir" >&2
  rm -rf "$dir.tmp"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$dir.tmp" "ziglang==$version" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir/ziglang/zig"
