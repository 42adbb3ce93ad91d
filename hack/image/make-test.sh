#!/usr/bin/env bash
# The image part of `make test`: builds the image daemonless (hack/image/build.sh) and runs its checks
# (hack/image/test.sh), then writes the outcome as one test in jest's --json totals shape
# (.cache/image-results.json) so hack/test-summary.js counts it with the others.
set -uo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .cache
out=.cache/image-results.json
rm -f "$out"
start=$(date +%s)
status=0
hack/image/build.sh && hack/image/test.sh || status=$?
echo "image: build + checks took $(( $(date +%s) - start )) s, exit $status"
if [ "$status" -eq 0 ]; then
  echo '{"numPassedTests":1,"numFailedTests":0,"numPendingTests":0,"success":true}' > "$out"
else
  echo '{"numPassedTests":0,"numFailedTests":1,"numPendingTests":0,"success":false}' > "$out"
fi
exit "$status"
