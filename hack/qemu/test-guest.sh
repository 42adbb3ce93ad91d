#!/usr/bin/env bash
# Runs the tests that need a kernel with IPVS (`*.guest.test.ts`, compiled into dist/ by `npm run build`)
# inside a qemu guest, with jest (jest.guest.config.js). Results: .cache/jest-guest-results.json.
# Extra arguments go to jest (e.g. a test path pattern). `make test` calls this after the host suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .cache
results="${KPNG_GUEST_RESULTS:-.cache/jest-guest-results.json}"
rm -f "$results"
# ip_vs: loaded up front for the tests that call IPVS from jest itself (the kernel does load it on a
# first IPVS request: deploy-privileges.guest.test.ts unloads it and sees so); br_netfilter: the lab's bridged pods (sysctls
# under net/bridge only exist once it is loaded); nftables, NAT and flowtables: autoloaded by kpng's
# first batch they would add seconds to its first sync under the emulated CPU. The rest autoloads.
nft_modules="nf_tables nf_conntrack nf_nat nft_ct nft_nat nft_masq nft_fib_ipv4 nft_fib_ipv6 nft_reject_inet nft_numgen nf_flow_table nf_flow_table_inet nft_flow_offload"
exec hack/qemu/run.sh --timeout "${KPNG_GUEST_TIMEOUT:-900}" --mem "${KPNG_GUEST_MEM:-2048}" \
  --modules "ip_vs dummy veth bridge br_netfilter $nft_modules" --rw .cache -- \
  node_modules/.bin/node node_modules/jest/bin/jest.js -c jest.guest.config.js --ci \
  --json --outputFile="$results" "$@"
