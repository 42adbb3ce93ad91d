#!/usr/bin/env bash
# Installs what kpng needs to build and test, idempotently: Debian packages (only the
# missing ones, `apt-get update` only when something is missing), then npm packages
# (only when package.json or the lockfile changed since the last install).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(pkg-config g++ make python3 iproute2 nftables libnftnl-dev libmnl-dev
  openssl clang llvm libbpf-dev
  # conntrack: the conntrack clean-up test makes its entries with `conntrack -I`
  conntrack
  # iptables (iptables-nft): the clean-up test runs upstream kube-proxy in iptables mode, which execs
  # iptables-restore; ipset: the clean-up test makes upstream IPVS mode's sets with it
  iptables ipset
  # bpftool: the clean-up test reads the programs attached to a cgroup with it (the kernel's view)
  bpftool)

source hack/lib/apt.sh
install_missing_packages install-deps "${APT_PACKAGES[@]}"

stamp=node_modules/.kpng-install-stamp
if [ ! -f "$stamp" ] || [ package.json -nt "$stamp" ] || { [ -f package-lock.json ] && [ package-lock.json -nt "$stamp" ]; }; then
  echo "install-deps: npm install"
  # `npm install` (not `npm ci`): it follows the lockfile but tolerates the platform-only optional
  # packages some tools list, which npm leaves out of the lockfile on this platform.
  npm install --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
