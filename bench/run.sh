#!/usr/bin/env bash
# Runs every benchmark (figures, never pass/fail). `make bench` builds first.
# The nft benchmarks need root (network namespaces); the events benchmark starts a real
# kube-apiserver (hack/controlplane/build.sh builds it once).
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
run() { echo; echo "### $*"; "$@" || echo "(failed: $*)"; }
run node --expose-gc dist/bench/model.bench.js
run node dist/bench/native-nft.bench.js
run node dist/bench/nft-sync.bench.js
run node --expose-gc dist/bench/nft-change.bench.js
run node dist/bench/api.bench.js
run node dist/bench/ebpf-sync.bench.js
run node dist/bench/ebpf-connect.bench.js
run node dist/bench/ebpf-traffic.bench.js
run node dist/bench/file-sync.bench.js --services 10000 --runs 2
run node dist/bench/first-sync.bench.js --services 1000 --endpoints 10
run node dist/bench/events/run.js --services 1000 --pods 1500 --duration "${KPNG_BENCH_EVENTS_SECONDS:-120}"
