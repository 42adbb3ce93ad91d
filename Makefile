# kpng: two commands do everything on a fresh machine.
#   make demo   set up, build, and run the demo (ends by itself with a summary)
#   make test   set up, build, and run every test (unit, property, e2e with netns + real API server;
#               the IPVS tests inside a qemu guest, hack/qemu/)
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps build native controlplane test test-guest demo bench clean

all: build

deps:
	@hack/install-deps.sh

native: deps
	@hack/build-native.sh

build: deps native
	@npm run --silent build

controlplane: deps
	@if [ -x hack/controlplane/build.sh ]; then hack/controlplane/build.sh; fi

test: build controlplane
	@npm run --silent typecheck
	@mkdir -p .cache; status=0; npx jest --ci --json --outputFile=.cache/jest-results.json || status=$$?; \
	  hack/qemu/test-guest.sh || status=$$?; \
	  node hack/test-summary.js .cache/jest-results.json .cache/jest-guest-results.json && exit $$status

# Only the tests that need a kernel with IPVS (*.guest.test.ts), inside a qemu guest (hack/qemu/).
test-guest: build
	@hack/qemu/test-guest.sh; status=$$?; node hack/test-summary.js .cache/jest-guest-results.json && exit $$status

demo: build
	@node dist/hack/demo.js

bench: build
	@bash bench/run.sh

clean:
	rm -rf dist build src/gen
