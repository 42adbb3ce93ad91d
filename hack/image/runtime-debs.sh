#!/usr/bin/env bash
# Unpacks the Debian runtime the image needs into ROOT for one architecture: the C library and the
# C++ runtime Node links (libc6, libgcc-s1, libstdc++6) and `env` from coreutils (bin/kpng.js starts
# with `#!/usr/bin/env node`, which kubeadm's command /usr/local/bin/kube-proxy relies on). Nothing else:
# no shell, no apt, no dpkg. Each package's control file goes to /var/lib/dpkg/status.d/, where image
# scanners look for the packages of a root without dpkg.
#
# The .deb files come from Debian bookworm (with its updates and security suites) through apt-get
# download with a private apt state for that architecture (the host's sources are untouched), cached in
# $cache/debs/<arch>/ and refreshed when the indexes are older than a day.
# Usage: hack/image/runtime-debs.sh amd64|arm64 ROOT [PACKAGE...]   (more packages, unpacked whole)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
arch=${1:?usage: runtime-debs.sh amd64|arm64 ROOT}
root=${2:?usage: runtime-debs.sh amd64|arm64 ROOT}
case "$arch" in amd64) triplet=x86_64-linux-gnu ;; arm64) triplet=aarch64-linux-gnu ;;
  *) echo "image: unknown architecture $arch" >&2; exit 2 ;; esac
packages=(libc6 libgcc-s1 libstdc++6 coreutils "${@:3}")

state="$cache/debs/$arch"
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/etc"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
cat >"$state/etc/sources.list" <<SRC
deb [arch=$arch signed-by=$keyring] $debian_mirror $suite main
deb [arch=$arch signed-by=$keyring] $debian_mirror $suite-updates main
deb [arch=$arch signed-by=$keyring] ${debian_mirror}-security $suite-security main
SRC
apt_opts=(-o "APT::Architecture=$arch" -o "APT::Architectures::=$arch" -o "Dir::Etc::SourceList=$state/etc/sources.list"
  -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$state/lists" -o "Dir::State::status=/dev/null"
  -o "Dir::Cache=$state" -o "Dir::Cache::archives=$state/archives" -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
if [ -z "$(find "$state/lists" -maxdepth 1 -name '*Packages*' -mtime -1 | head -1)" ]; then
  apt-get "${apt_opts[@]}" update >&2 || { echo "image: apt-get update for $arch failed" >&2; exit 1; }
fi
# Each package's candidate version, from one read of the indexes.
declare -A candidate
while read -r p v; do candidate[$p]=$v; done < <(apt-cache "${apt_opts[@]}" policy "${packages[@]}" |
  awk '/^[^ ]/ {sub(":.*", ""); p = $0} /^ *Candidate:/ {print p, $2}')
debs=()
for p in "${packages[@]}"; do
  v=${candidate[$p]:-}
  [ -n "$v" ] && [ "$v" != "(none)" ] || { echo "image: no $p for $arch in Debian $suite" >&2; exit 1; }
  f="$state/archives/${p}_${v//:/%3a}_$arch.deb"   # apt-get download's name (an epoch's colon escaped)
  if [ ! -f "$f" ]; then
    (cd "$state/archives" && apt-get "${apt_opts[@]}" download "$p:$arch=$v" 2>/dev/null) && [ -f "$f" ] ||
      { echo "image: apt-get download $p:$arch=$v failed" >&2; exit 1; }
  fi
  debs+=("$f")
done

mkdir -p "$root/var/lib/dpkg/status.d"
work=$(mktemp -d "/tmp/${prefix}debs-XXXXXX")
trap 'rm -rf "$work"' EXIT
for f in "${debs[@]}"; do
  p=$(dpkg-deb -f "$f" Package)
  if [ "$p" = coreutils ]; then
    dpkg-deb -x "$f" "$work/coreutils"
    install -D -m 0755 "$work/coreutils/usr/bin/env" "$root/usr/bin/env"
  else
    dpkg-deb -x "$f" "$root"
  fi
  dpkg-deb -f "$f" >"$root/var/lib/dpkg/status.d/$p"
done
# What no Node process opens: iconv's converters, documentation (the copyright files stay),
# translations, ldconfig and the C library's tools (the loader finds the libraries in its default
# directories), the C++ runtime's debugger scripts.
find "$root/usr/share" -mindepth 1 -maxdepth 1 ! -name doc -exec rm -rf {} +
find "$root/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$root/usr/share/doc" -type l -delete 2>/dev/null || true
rm -rf "$root/usr/lib/$triplet/gconv" "$root/usr/lib/$triplet/audit" "$root/usr/sbin" "$root/sbin" "$root/usr/libexec" \
  "$root/etc/ld.so.conf.d" "$root/etc/ld.so.conf"
find "$root/usr/bin" -mindepth 1 ! -name env -delete
echo "image: Debian $suite runtime for $arch: $(for f in "${debs[@]}"; do basename "$f" .deb; done | paste -sd' ')" >&2
