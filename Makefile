# kpng: two commands do everything on a fresh machine.
#   make demo   set up, build, and run the demo (ends by itself with a summary)
#   make test   set up, build, and run every test (unit, property, e2e with netns + real API server;
#               the IPVS tests inside a qemu guest, hack/qemu/)
# Not part of `make test` (they need the Debian mirror and npm registry, and minutes):
#   make image       build the container image from the Dockerfile without a daemon (hack/image/)
#   make image-test  build it, then run it as deploy/'s DaemonSets do (hack/image/test.sh)
#   make prebuilds   the portable prebuilds, linux-x64 and linux-arm64 (= npm run prebuildify; zig's cc
#                    for glibc 2.28, static libraries: hack/prebuild/, docs/install.md)
#   make install-test  npm pack's tarball installed and run in Debian 11 and 12 roots, amd64 and arm64
#                    (arm64 under qemu-user; hack/prebuild/install-test.sh)
#   make cluster     a real two-node cluster on this machine, no proxy yet (hack/cluster/, docs/cluster.md);
#                    FAMILY=ipv4|ipv6|dual its IP family (default ipv4); KWOK_NODES=N adds N fake
#                    nodes kept Ready by kwok
#   make cluster-down  stop it and remove everything it made
#   make conformance   upstream's e2e Services tests against kpng in that cluster (hack/conformance/run.sh;
#                      BACKEND=nft|ebpf|upstream, FAMILY=ipv4|ipv6|dual, PROFILE=default|wide, FOCUS=RE, SKIP=RE)
#   make chaos   faults under probes in that cluster (hack/chaos/; BACKEND=..., SCENARIOS=a,b|all, SHORT=1)
#   make soak    that cluster under churn and probes for DURATION (default 2h) with one proxy: RSS, heap,
#                descriptors and programming latency over time, slopes per hour (hack/chaos/soak.ts; BACKEND=...)
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps build native controlplane kube-proxy scale-bins test test-guest test-fast-path demo bench clean image image-host image-test cluster cluster-down reboot-check conformance chaos soak prebuilds install-test

all: build

deps:
	@hack/install-deps.sh

native: deps
	@hack/build-native.sh

build: deps native
	@npm run --silent build

controlplane: deps
	@if [ -x hack/controlplane/build.sh ]; then hack/controlplane/build.sh; fi

# Upstream kube-proxy, the reference of the drop-in, migration and clean-up tests and of bench:vs-upstream.
kube-proxy: deps
	@hack/kube-proxy/build.sh

# What a kwok bench without real nodes needs: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (hack/cluster/build.sh --scale); no containerd, CoreDNS or e2e.test.
scale-bins: deps
	@hack/cluster/build.sh --scale

# KPNG_TEST_STRICT=1: a test gate whose need is missing fails (test/helpers/gate.ts), and the summary
# fails on any skip that test/skip-allowlist.json does not list with its reason (docs/testing.md).
test: build controlplane kube-proxy scale-bins
	@npm run --silent typecheck
	@npm run --silent lint:deps
	@export KPNG_TEST_STRICT=1; mkdir -p .cache; status=0; npx jest --ci --json --outputFile=.cache/jest-results.json || status=$$?; \
	  hack/qemu/test-guest.sh || status=$$?; \
	  hack/qemu/test-fast-path.sh || status=$$?; \
	  hack/image/make-test.sh || status=$$?; \
	  node hack/test-summary.js .cache/jest-results.json .cache/jest-guest-results.json .cache/jest-fast-path-results.json .cache/image-results.json && exit $$status

# Only the tests that need a kernel with IPVS (*.guest.test.ts), inside a qemu guest (hack/qemu/).
test-guest: build
	@KPNG_TEST_STRICT=1 hack/qemu/test-guest.sh; status=$$?; node hack/test-summary.js .cache/jest-guest-results.json && exit $$status

# The nft backend's lab tests with the fast path on (--nft-flowtable), in the qemu guest (flowtables).
test-fast-path: build
	@KPNG_TEST_STRICT=1 hack/qemu/test-fast-path.sh; status=$$?; node hack/test-summary.js .cache/jest-fast-path-results.json && exit $$status

demo: build
	@node dist/hack/demo.js

prebuilds: deps
	@hack/prebuild/build.sh

install-test: build prebuilds
	@hack/prebuild/install-test.sh

# amd64 and arm64 from the portable prebuilds, and the manifest list naming both (docs/install.md).
# Both architectures need the portable prebuilds; where their sources cannot be fetched (docs/install.md)
# the image of this machine's architecture is still built, with the host-built addon, and said so.
image: build
	@if hack/prebuild/build.sh; then hack/image/build.sh; else \
	  echo "image: no portable prebuilds (above): building $$(dpkg --print-architecture) only, with build/Release's addon" >&2; \
	  KPNG_IMAGE_ARCHES=$$(dpkg --print-architecture) hack/image/build.sh; fi

# This machine's architecture only (the portable prebuild when current, else build/Release): for the cluster.
image-host: build
	@KPNG_IMAGE_ARCHES=$$(dpkg --print-architecture) hack/image/build.sh

# Both architectures' images: the host's in full, the other under qemu-user.
image-test: prebuilds image controlplane
	@hack/image/test.sh

cluster: build image-host
	@hack/cluster/up.sh $(if $(FAMILY),--family $(FAMILY)) $(if $(KWOK_NODES),--kwok-nodes $(KWOK_NODES))

cluster-down:
	@hack/cluster/down.sh

# A node rebooted with the API server named in the node's /etc/hosts: the proxy must serve again by itself.
reboot-check: build image-host
	@hack/cluster/reboot-check.sh --backend $(BACKEND)

BACKEND ?= nft
conformance: build
	@hack/conformance/run.sh --backend $(BACKEND) $(if $(FAMILY),--family $(FAMILY)) $(if $(PROFILE),--profile $(PROFILE)) $(if $(FOCUS),--focus '$(FOCUS)') $(if $(SKIP),--skip '$(SKIP)')

# Needs the cluster up (make cluster); deploys the proxy, runs the scenarios, writes .cache/chaos-results/<backend>.md.
chaos: build image-host
	@node dist/hack/chaos/run.js --backend $(BACKEND) $(if $(SCENARIOS),--scenarios '$(SCENARIOS)') $(if $(SHORT),--short)

# Needs the cluster up (make cluster); deploys the proxy, writes .cache/soak-results/<backend>.md (and .json).
DURATION ?= 2h
soak: build image-host
	@node dist/hack/chaos/soak.js --backend $(BACKEND) --duration $(DURATION)

bench: build
	@bash bench/run.sh

clean:
	rm -rf dist build src/gen
