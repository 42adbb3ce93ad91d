#!/usr/bin/env bash
# The nft backend's real-packet lab tests (test/e2e/nft-*.test.ts, compiled into dist/) again with the
# fast path on (--nft-flowtable auto, offloading every connection once established), inside the qemu
# guest: this machine's kernel has no flowtables. Results: .cache/jest-fast-path-results.json.
# Not here: the aggregator's lab test (the aggregator refuses flowtables).
set -euo pipefail
cd "$(dirname "$0")/../.."
export KPNG_E2E_FLOWTABLE=auto KPNG_E2E_FLOWTABLE_PACKETS=0 KPNG_GUEST_RESULTS=.cache/jest-fast-path-results.json
exec hack/qemu/test-guest.sh --testMatch '**/dist/test/e2e/nft-@(services|detect-local|localhost-nodeports|parity|tamper).test.js' "$@"
