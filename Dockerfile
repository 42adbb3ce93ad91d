# kpng node image built from source, for builders with a registry: `docker build .` (no arguments; with
# buildx, --platform linux/amd64,linux/arm64). The addon is compiled here against Debian's netfilter and
# BPF libraries, which the run stage installs. `make image` builds the lean images instead (no shell,
# the portable prebuilds, both architectures, a manifest list): docs/image.md.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      g++ make python3 pkg-config libnftnl-dev libmnl-dev libbpf-dev clang llvm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Behind a TLS-intercepting proxy the builder mounts the proxy's CA file and names it here (npm reads it
# through Node); empty by default. Build stage only: the shipped image does not trust it.
ARG NODE_EXTRA_CA_CERTS=
# Node headers for node-gyp (N-API only): empty = node-gyp downloads them from nodejs.org.
ARG npm_config_nodedir=
COPY package.json package-lock.json ./
# `npm install`, not `npm ci`: it follows the lockfile but tolerates the platform-only optional packages
# the lockfile leaves out (as hack/install-deps.sh). No install scripts: kpng's own (node-gyp-build)
# needs the sources copied below, and the `node` devDependency would download a second Node; the
# image's Node is the base image's.
RUN npm install --ignore-scripts --no-audit --no-fund && rm -rf node_modules/node node_modules/.bin/node
COPY . .
RUN hack/build-native.sh && npm run build && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends libnftnl11 libmnl0 libbpf1 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kpng
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/bin ./bin
# The addon loads the BPF object (deploy/overlays/ebpf) from its own directory.
COPY --from=build /src/build/Release/kpng_native.node /src/build/Release/sock_lb.bpf.o ./build/Release/
# `kpng` and `kube-proxy` on PATH: a kube-proxy DaemonSet whose command is /usr/local/bin/kube-proxy
# (kubeadm's) runs kpng with its own --config and --hostname-override flags unchanged.
RUN ln -s /opt/kpng/bin/kpng.js /usr/local/bin/kpng && ln -s /opt/kpng/bin/kpng.js /usr/local/bin/kube-proxy
# Node's compile cache of every kpng module, where kpng run as root looks for it: a node's first start
# reads bytecode instead of compiling it. Made here, by the image's Node and at the image's paths (its
# entries are keyed by both); at run time the read-only root filesystem only needs it read.
COPY hack/image/warm-compile-cache.js /tmp/
RUN node /tmp/warm-compile-cache.js /var/cache/kpng/compile-cache /opt/kpng && rm /tmp/warm-compile-cache.js
# deploy/'s DaemonSets pass kube-proxy's flags as args (no command: `kpng --config F` runs the kube source).
ENTRYPOINT ["/usr/local/bin/kpng"]
