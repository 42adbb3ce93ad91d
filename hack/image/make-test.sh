#!/usr/bin/env bash
# The image part of `make test`: builds the image of this machine's architecture daemonless
# (hack/image/build.sh; the portable prebuild when prebuilds/ has a fresh one, else build/Release) and
# runs its checks (hack/image/test.sh); `make image-test` adds the other architecture. Then writes the outcome as one test in jest's --json totals shape
# (.cache/image-results.json) so hack/test-summary.js counts it with the others.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .cache
out=.cache/image-results.json
rm -f "$out"
start=$(date +%s)
status=0
export KPNG_IMAGE_ARCHES="${KPNG_IMAGE_ARCHES:-$(dpkg --print-architecture)}"
hack/image/build.sh && hack/image/test.sh || status=$?
echo "image: build + checks took $(( $(date +%s) - start )) s, exit $status"
if [ "$status" -eq 0 ]; then
  echo '{"numPassedTests":1,"numFailedTests":0,"numPendingTests":0,"success":true}' > "$out"
else
  echo '{"numPassedTests":0,"numFailedTests":1,"numPendingTests":0,"success":false}' > "$out"
fi
exit "$status"
