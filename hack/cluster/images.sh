#!/usr/bin/env bash
# Builds the container images the local cluster runs, with no registry, under the exact names the pods
# ask for, as OCI archives that hack/cluster/up.sh imports into every node's containerd:
#   registry.k8s.io/pause:<v>                     the pod sandbox (images/pause.c, static)
#   registry.k8s.io/e2e-test-images/agnhost:<v>   agnhost built from k8s.io/kubernetes at the cluster's
#                                                 version, on a Debian root with the tools the tests exec
#   registry.k8s.io/e2e-test-images/busybox:<v>   Debian's busybox-static
#   registry.k8s.io/e2e-test-images/glibc-dns-testing:<v>   the Debian root (dnsutils) and CoreDNS
#   registry.k8s.io/kube-proxy:<k8s version>      upstream kube-proxy (the reference), with nft and conntrack
#   registry.k8s.io/coredns/coredns:<v>            CoreDNS (hack/cluster/coredns), the cluster's DNS
#   the kpng image of `make image`                under the name deploy/base/daemonset.yaml gives it
# The names and versions the e2e suite uses are in k8s.io/kubernetes/test/utils/image/manifest.go.
#
#   hack/cluster/images.sh [--no-kpng]   build what is missing; prints the archive list it wrote
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# hack/image's buildah store (where `make image` leaves the kpng image); its variables first, ours after.
source "$here/../image/common.sh"
kpng_image="$image"
source "$here/lib/common.sh"

with_kpng=1
case "${1:-}" in --no-kpng) with_kpng=0 ;; "") ;; *) echo "usage: $0 [--no-kpng]" >&2; exit 2 ;; esac
[[ $(id -u) == 0 ]] || die "images: needs root (buildah)"
install_tools

out="$cache/cluster/$k8s_version/images"
mkdir -p "$out"
exec 8>"$out/.lock"
flock 8

manifest="$(cd "$cluster_dir/k8s" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/utils/image/manifest.go"
e2e_version() { # <image name in manifest.go>: its version there
	sed -n "s/.*configs\[$1\] = Config{list\.[A-Za-z0-9]*, \"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$manifest"
}
pause_ref="registry.k8s.io/pause:$(e2e_version Pause)"
agnhost_ref="registry.k8s.io/e2e-test-images/agnhost:$(e2e_version Agnhost)"
busybox_ref="registry.k8s.io/e2e-test-images/busybox:$(e2e_version BusyBox)"
kube_proxy_ref="registry.k8s.io/kube-proxy:$k8s_version"
[[ $pause_ref != *: && $agnhost_ref != *: && $busybox_ref != *: ]] || die "images: cannot read image versions from $manifest"

work=""; ctr=""
cleanup() {
	if [[ -n $ctr ]]; then bah rm "$ctr" >/dev/null 2>&1 || true; fi
	if [[ -n $work ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
work=$(mktemp -d "/tmp/kc-images-XXXXXX")

# archive <ref> <file> <recipe>: the image's OCI archive, remade when its recipe (what it is built from)
# changed. The recipe goes into a stamp beside the archive.
fresh() { [[ -s "$out/$2" && -f "$out/$2.recipe" && "$(cat "$out/$2.recipe")" == "$3" ]]; }
save() { # <working container> <ref> <file> <recipe> [buildah config args...]
	local c="$1" ref="$2" file="$3" recipe="$4"; shift 4
	if [[ $# -gt 0 ]]; then bah config "$@" "$c"; fi
	bah config --label org.opencontainers.image.source=kpng/hack/cluster --label "kpng.recipe=$recipe" "$c"
	bah commit --quiet --rm "$c" "$ref" >/dev/null
	ctr=""
	rm -f "$out/$file"
	bah push --quiet "$ref" "oci-archive:$out/$file:$ref" >/dev/null
	echo "$recipe" >"$out/$file.recipe"
	echo "images: $ref -> $out/$file ($(du -h "$out/$file" | cut -f1))"
}

# The pause image: one static binary.
recipe="pause $(sha256sum "$here/images/pause.c" | cut -c1-16)"
if ! fresh "$pause_ref" pause.tar "$recipe"; then
	gcc -static -O2 -Wall -o "$work/pause" "$here/images/pause.c"
	ctr=$(bah from --name kc-pause scratch)
	bah copy "$ctr" "$work/pause" /pause >/dev/null
	save "$ctr" "$pause_ref" pause.tar "$recipe" --entrypoint '["/pause"]' --user 65535:65535
fi

# A Debian root with what the e2e tests exec inside agnhost pods (sh, curl, nc, socat, ip, dig, ping,
# timeout), plus nft and conntrack for kube-proxy. Made once by debootstrap, kept as a tarball.
base_packages="ca-certificates,curl,wget,netcat-openbsd,socat,iproute2,iputils-ping,dnsutils,iperf,procps,nftables,conntrack,iptables"
base_tar="$cache/cluster/base-bookworm-$(echo "$base_packages" | sha256sum | cut -c1-12).tar"
if [[ ! -s $base_tar ]]; then
	echo "images: making the Debian base (debootstrap bookworm minbase + $base_packages)"
	root="$work/root"
	debootstrap --variant=minbase --include="$base_packages" bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
		{ tail -5 "$work/debootstrap.log" >&2; die "images: debootstrap failed"; }
	chroot "$root" apt-get clean
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
	tar -C "$root" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
	rm -rf "$root"
fi
from_base() { # <name>: a working container holding the Debian base
	local c; c=$(bah from --name "$1" scratch)
	bah add "$c" "$base_tar" / >/dev/null
	echo "$c"
}

# As upstream's agnhost image (test/images/agnhost/Dockerfile): /agnhost and its agnhost-2 link, the
# porter's certificate, /uploads, CoreDNS at /coredns, and a user and group defined in the image.
agnhost_src="$(dirname "$manifest")/../../images/agnhost"
recipe="agnhost-2 $k8s_version $(basename "$base_tar") $(cat "$cluster_bin/.coredns.stamp" 2>/dev/null || true)"
if ! fresh "$agnhost_ref" agnhost.tar "$recipe"; then
	[[ -x $cluster_bin/agnhost ]] || die "images: $cluster_bin/agnhost is missing (hack/cluster/build.sh)"
	ctr=$(from_base kc-agnhost)
	bah copy "$ctr" "$cluster_bin/agnhost" /agnhost >/dev/null
	bah copy "$ctr" "$cluster_bin/coredns" /coredns >/dev/null
	bah copy "$ctr" "$agnhost_src/porter/localhost.crt" "$agnhost_src/porter/localhost.key" / >/dev/null
	bah run --isolation chroot "$ctr" -- sh -c 'ln -s agnhost /agnhost-2 && mkdir /uploads &&
		useradd -u 1000 -M user-defined-in-image && groupadd -g 50000 group-defined-in-image &&
		usermod -aG group-defined-in-image user-defined-in-image'
	save "$ctr" "$agnhost_ref" agnhost.tar "$recipe" --entrypoint '["/agnhost"]' --cmd pause --port 80 --port 8080 --port 8081 --port 9376 --port 5000
fi

# glibc-dns-testing: a Debian root with dnsutils and CoreDNS at /coredns (its upstream Dockerfile).
glibc_dns_ref="registry.k8s.io/e2e-test-images/glibc-dns-testing:$(e2e_version GlibcDnsTesting)"
recipe="glibc-dns-testing $(basename "$base_tar") $(cat "$cluster_bin/.coredns.stamp" 2>/dev/null || true)"
if ! fresh "$glibc_dns_ref" glibc-dns-testing.tar "$recipe"; then
	ctr=$(from_base kc-glibc-dns)
	bah copy "$ctr" "$cluster_bin/coredns" /coredns >/dev/null
	save "$ctr" "$glibc_dns_ref" glibc-dns-testing.tar "$recipe"
fi

recipe="kube-proxy $k8s_version $(basename "$base_tar")"
if ! fresh "$kube_proxy_ref" kube-proxy.tar "$recipe"; then
	kp="$("$repo/hack/kube-proxy/build.sh" --print-path)"
	[[ -x $kp ]] || die "images: $kp is missing (hack/kube-proxy/build.sh)"
	ctr=$(from_base kc-kube-proxy)
	bah copy "$ctr" "$kp" /usr/local/bin/kube-proxy >/dev/null
	save "$ctr" "$kube_proxy_ref" kube-proxy.tar "$recipe" --entrypoint '[]' --cmd /usr/local/bin/kube-proxy
fi

coredns_ref="registry.k8s.io/coredns/coredns:$coredns_version"
recipe="coredns $coredns_version $(cat "$cluster_bin/.coredns.stamp" 2>/dev/null || true)"
if ! fresh "$coredns_ref" coredns.tar "$recipe"; then
	[[ -x $cluster_bin/coredns ]] || die "images: $cluster_bin/coredns is missing (hack/cluster/build.sh)"
	ctr=$(bah from --name kc-coredns scratch)
	bah copy "$ctr" "$cluster_bin/coredns" /coredns >/dev/null
	save "$ctr" "$coredns_ref" coredns.tar "$recipe" --entrypoint '["/coredns"]'
fi

bb_deb=$(ls "$cache"/cluster/busybox-static_*.deb 2>/dev/null | head -1 || true)
if [[ -z $bb_deb ]]; then
	(cd "$cache/cluster" && apt-get download busybox-static >/dev/null 2>&1) || die "images: apt-get download busybox-static failed"
	bb_deb=$(ls "$cache"/cluster/busybox-static_*.deb | head -1)
fi
recipe="busybox $(basename "$bb_deb")"
if ! fresh "$busybox_ref" busybox.tar "$recipe"; then
	dpkg-deb -x "$bb_deb" "$work/bb"
	mkdir -p "$work/bbroot/bin" "$work/bbroot/tmp" "$work/bbroot/etc"
	cp "$work/bb/bin/busybox" "$work/bbroot/bin/busybox"
	for applet in $("$work/bbroot/bin/busybox" --list); do
		[[ $applet == busybox ]] || ln -sf busybox "$work/bbroot/bin/$applet"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$work/bbroot/etc/passwd"
	ctr=$(bah from --name kc-busybox scratch)
	bah copy "$ctr" "$work/bbroot" / >/dev/null
	save "$ctr" "$busybox_ref" busybox.tar "$recipe" --cmd sh --env PATH=/bin
fi

if [[ $with_kpng == 1 ]]; then
	# deploy/base/daemonset.yaml's image name, so that the overlays are applied as they are.
	kpng_ref=$(sed -n 's/^ *image: *\(.*kpng.*\)$/\1/p' "$repo/deploy/base/daemonset.yaml" | head -1)
	[[ $kpng_ref == */* ]] || kpng_ref="docker.io/library/$kpng_ref"
	bah inspect --type image "$kpng_image" >/dev/null 2>&1 || die "images: $kpng_image is not built (make image)"
	id=$(bah inspect --type image --format '{{.FromImageID}}' "$kpng_image")
	if ! fresh "$kpng_ref" kpng.tar "kpng $id"; then
		bah tag "$kpng_image" "$kpng_ref"
		rm -f "$out/kpng.tar"
		bah push --quiet "$kpng_ref" "oci-archive:$out/kpng.tar:$kpng_ref" >/dev/null
		echo "kpng $id" >"$out/kpng.tar.recipe"
		echo "images: $kpng_ref -> $out/kpng.tar ($(du -h "$out/kpng.tar" | cut -f1))"
	fi
fi
ls "$out"/*.tar >"$out/list"
printf 'pause=%s\nagnhost=%s\nbusybox=%s\nkube-proxy=%s\ncoredns=%s\nkpng=%s\n' \
	"$pause_ref" "$agnhost_ref" "$busybox_ref" "$kube_proxy_ref" "$coredns_ref" "${kpng_ref:-}" >"$out/refs"
echo "images: $(wc -l <"$out/list") archives in $out"
