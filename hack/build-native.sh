#!/usr/bin/env bash
# Builds the native netlink addon when its sources changed (node-gyp through binding.gyp;
# prebuildify for release artifacts is `npm run prebuild`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f binding.gyp ] || exit 0
out=build/Release/kpng_native.node
if [ -f "$out" ] && [ -z "$(find native binding.gyp -newer "$out" -type f 2>/dev/null | head -1)" ]; then exit 0; fi
echo "build-native: compiling native addon"
npx --no-install node-gyp rebuild --loglevel=warn >/dev/null
