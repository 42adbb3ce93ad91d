# kpng node image: the kpng command, its native netlink addon, and Node 24 LTS.
# (Docker cannot run on the development machines here; this file is not exercised by `make test`.)
FROM node:24-bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      g++ make python3 pkg-config libnftnl-dev libmnl-dev libnetfilter-conntrack-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx node-gyp rebuild && npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libnftnl11 libmnl0 libnetfilter-conntrack3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/kpng
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
COPY --from=build /src/build/Release/kpng_native.node ./build/Release/
# `kpng` and `kube-proxy` on PATH: a kube-proxy DaemonSet whose command is /usr/local/bin/kube-proxy
# (kubeadm's) runs kpng with its own --config and --hostname-override flags unchanged.
RUN ln -s /opt/kpng/bin/kpng.js /usr/local/bin/kpng && ln -s /opt/kpng/bin/kpng.js /usr/local/bin/kube-proxy
# deploy/kpng.yaml passes kube-proxy's flags as args (no command: `kpng --config F` runs the kube source).
ENTRYPOINT ["/usr/local/bin/kpng"]
