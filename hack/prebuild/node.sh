#!/usr/bin/env bash
# Prints a directory holding an official Node build for linux-<arch> (bin/node, include/node), unpacked
# from the npm package node-linux-<arch> into the prebuild cache. Its headers are the ones the prebuilds
# compile against (N-API: any Node >= the one they name will load the addon), and its binary is what the
# install test runs in the Debian roots.
# Usage: hack/prebuild/node.sh x64|arm64 [VERSION]   (VERSION defaults to package.json's devDependency)
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${1:?usage: node.sh x64|arm64 [version]}
version=${2:-$(node -p "require('./package.json').devDependencies.node" 2>/dev/null || node_modules/.bin/node -p "require('./package.json').devDependencies.node")}
cache=${KPNG_PREBUILD_CACHE:-$HOME/.cache/kpng/prebuild}
dir=$cache/node-$version-linux-$arch
if [ ! -x "$dir/bin/node" ]; then
  echo "prebuild: fetching node-linux-$arch@$version from the npm registry" >&2
  mkdir -p "$cache" && tmp=$(mktemp -d "$cache/.node-XXXX")
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$version" >/dev/null && tar -xzf ./*.tgz)
  rm -rf "$dir" && mv "$tmp/package" "$dir" && rm -rf "$tmp"
fi
echo "$dir"
