#!/usr/bin/env bash
# Proves the built image of this machine's architecture (hack/image/build.sh) from its own filesystem,
# run the way the DaemonSets of deploy/overlays/ (rendered with `kubectl kustomize`) run it: the
# image's entrypoint, env and working directory, a read-only root, the ConfigMap mounted read-only at
# /var/lib/kube-proxy, and kube-proxy's flags from the manifests. Each check prints "ok" or "FAIL";
# the script exits non-zero on the first failure.
#
# The image's root is the buildah container's mount, bind-mounted read-only in a mount namespace of
# its own, then chroot (no container runtime here). Kernel work runs in network namespace
# ${prefix}img only. Then each other architecture's image (hack/image/test-foreign.sh, under qemu-user).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need_root
if ! bah inspect --type image "$image" >/dev/null 2>&1; then
  echo "image-test: $image is not built (make image)" >&2; exit 1
fi

netns="${prefix}img"
ctr=""; work=""; kpng_pid=""
cleanup() {
  if [ -n "$kpng_pid" ]; then stop_tree "$kpng_pid"; fi
  if [ -n "$ctr" ]; then bah umount "$ctr" >/dev/null 2>&1 || true; bah rm "$ctr" >/dev/null 2>&1 || true; fi
  ip netns del "$netns" 2>/dev/null || true
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
work=$(mktemp -d "/tmp/${prefix}test-XXXXXX")
fail() { echo "FAIL: $*" >&2; exit 1; }
# Stops a background job and everything under it, the innermost first: unshare --fork does not pass a
# SIGTERM on to its child (kpng would outlive the check, reparented to init).
stop_tree() { local c; for c in $(pgrep -P "$1"); do stop_tree "$c"; done; kill -TERM "$1" 2>/dev/null || true; }
ok() { echo "ok: $*"; }

# The image's configuration, as a container runtime reads it.
bah inspect --type image "$image" | node -e 'process.stdout.write(JSON.stringify(JSON.parse(require("fs").readFileSync(0, "utf8")).OCIv1.config))' >"$work/config.json"
cfg() { node -e "const c=require('$work/config.json'); const v=($1); process.stdout.write(typeof v==='string'?v:JSON.stringify(v))"; }
entrypoint=$(cfg 'c.Entrypoint')
[ "$entrypoint" = '["/usr/local/bin/kpng"]' ] || fail "entrypoint is $entrypoint, deploy/ relies on [\"/usr/local/bin/kpng\"] (args only, no command)"
workdir=$(cfg 'c.WorkingDir || "/"')
user=$(cfg 'c.User || ""')
[ -z "$user" ] || [ "$user" = root ] || [ "$user" = 0 ] || fail "image user is $user: the DaemonSets add capabilities to a root process"
mapfile -t image_env < <(cfg 'c.Env.join("\n")'; echo)
ok "entrypoint $entrypoint, working dir $workdir, user root, env: ${image_env[*]}"
label() { bah inspect --type image --format "{{index .OCIv1.Config.Labels \"org.opencontainers.image.$1\"}}" "$image"; }
[ "$(label version)" = "$version" ] || fail "label org.opencontainers.image.version is '$(label version)', not $version"
[ -n "$(label source)" ] && [ -n "$(label revision)" ] || fail "no org.opencontainers.image.source or .revision label"
ok "labels: version $(label version), revision $(label revision), source $(label source)"

ctr=$(bah from --pull=false --name "${prefix}test-$$" "$image")
mnt=$(bah mount "$ctr")
# Mount points a runtime would create in the container's layer before making the root read-only.
mkdir -p "$mnt/var/lib/kube-proxy" "$mnt/sys/fs/bpf" "$mnt/proc" "$mnt/dev"
# Only what kpng runs on: no shell, no package manager.
for f in bin/sh usr/bin/sh bin/bash usr/bin/apt usr/bin/dpkg; do [ ! -e "$mnt/$f" ] || fail "the image has /$f"; done
ok "no shell, no apt or dpkg in the image ($(bah images --format '{{.Size}}' "$image" | head -1))"

# deploy/'s overlays as kubectl renders them.
for o in nft ebpf ipvs; do "${KUBECTL:-kubectl}" kustomize "$repo/deploy/overlays/$o" >"$work/deploy-$o.yaml" || fail "kubectl kustomize deploy/overlays/$o"; done

# The ConfigMap volume (deploy/overlays/nft's config.conf) plus the example cluster state.
vol="$work/volume"; mkdir -p "$vol"
node -e "
  const { parseAllDocuments } = require('$repo/node_modules/yaml');
  const docs = parseAllDocuments(require('fs').readFileSync('$work/deploy-nft.yaml', 'utf8')).map((d) => d.toJS());
  require('fs').writeFileSync('$vol/config.conf', docs.find((d) => d.kind === 'ConfigMap').data['config.conf']);"
cp "$repo/examples/cluster.yaml" "$vol/cluster.yaml"

# in_image [--netns] [--vol DIR] [--sa DIR] [--env K=V]... CMD...: CMD inside the image: read-only
# root, /proc, /dev, /sys, DIR read-only at /var/lib/kube-proxy (default: the ConfigMap + example state), a
# service-account dir where pods have it, the image's env (plus NODE_NAME, as the DaemonSets set it,
# and --env) and its working dir.
mkdir -p "$work/root" "$mnt/run/secrets/kubernetes.io/serviceaccount"
in_image() {
  local pre=() v="$vol" sa="" envs=("${image_env[@]}" HOME=/root NODE_NAME=n1)
  while :; do
    case "$1" in
    --netns) pre=(ip netns exec "$netns"); shift ;;
    --vol) v=$2; shift 2 ;;
    --sa) sa=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    *) break ;;
    esac
  done
  # --kill-child: kpng dies with unshare (this script killed); a TERM to unshare is not passed on.
  "${pre[@]}" unshare --mount --propagation private --fork --kill-child=SIGTERM bash -euc '
    root=$1 mnt=$2 vol=$3 sa=$4 wd=$5 n=$6; envs=("${@:7:n}"); shift $((6 + n))
    mount --bind "$mnt" "$root"; mount -o remount,bind,ro "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount --bind "$vol" "$root/var/lib/kube-proxy"; mount -o remount,bind,ro "$root/var/lib/kube-proxy"
    if [ -n "$sa" ]; then d="$root/run/secrets/kubernetes.io/serviceaccount"; mount --bind "$sa" "$d"; mount -o remount,bind,ro "$d"; fi
    exec chroot "$root" /usr/bin/env -i -C "$wd" "${envs[@]}" "$@"
  ' in_image "$work/root" "$mnt" "$v" "$sa" "$workdir" "${#envs[@]}" "${envs[@]}" "$@"
}
# The entrypoint with the given args, as a pod without `command` runs it.
kpng() { in_image "$(cfg 'c.Entrypoint[0]')" "$@"; }

# The root really is read-only (a runtime with readOnlyRootFilesystem: true).
if in_image node -e 'require("fs").writeFileSync("/opt/kpng/x", "")' 2>/dev/null; then fail "the test's root is writable"; fi

# 1. kpng --version
out=$(kpng --version) || fail "kpng --version exited $?"
[[ "$out" =~ ^kpng\ $version\ \(node\ v$node_version\)$ ]] || fail "kpng --version printed: $out"
ok "kpng --version: $out"
out=$(in_image kube-proxy --version) || fail "kube-proxy --version exited $?"
[[ "$out" =~ ^kpng\ $version ]] || fail "kube-proxy (the symlink kubeadm's command uses) printed: $out"
ok "kube-proxy --version (on PATH): $out"

# 1b. The compile cache the image ships is what a start reads (Node accepts its entries; nothing to write).
cc=$(kpng file --input /var/lib/kube-proxy/cluster.yaml --node n1 --once -v 4 2>&1 >/dev/null | grep -o 'compile cache: .*' || true)
[ "$cc" = "compile cache: /var/cache/kpng/compile-cache" ] || fail "kpng does not use the image's compile cache: ${cc:-no compile cache line}"
accepted=$(in_image --env NODE_DEBUG_NATIVE=COMPILE_CACHE "$(cfg 'c.Entrypoint[0]')" file --input /var/lib/kube-proxy/cluster.yaml --node n1 --once 2>&1 >/dev/null | grep -c 'was accepted' || true)
[ "$accepted" -ge 50 ] || fail "Node accepted $accepted modules from the image's compile cache (expected most of kpng's)"
ok "the image's compile cache: $accepted modules read from /var/cache/kpng/compile-cache at a start"

# 2. kpng file ... --once: the routes table, identical to the worktree's build of the same sources.
args=(file --input /var/lib/kube-proxy/cluster.yaml --node n1 --once)
out=$(kpng "${args[@]}" 2>"$work/file.err") || { cat "$work/file.err" >&2; fail "kpng ${args[*]} exited non-zero"; }
want=$(cd "$repo" && node_modules/.bin/node bin/kpng.js file --input "$vol/cluster.yaml" --node n1 --once 2>/dev/null)
grep -q '^default/web  *80/TCP .*10.244.1.5:8080,10.244.2.7:8080' <<<"$out" || { echo "$out" >&2; fail "kpng ${args[*]}: no route for default/web"; }
[ "$out" = "$want" ] || { diff <(echo "$want") <(echo "$out") >&2; fail "kpng ${args[*]}: output differs from the worktree's build"; }
ok "kpng ${args[*]}: $(wc -l <<<"$out") lines, same as the worktree's build"

# 3. The addon loads from the image (the portable prebuild, or build/Release with Debian's libraries,
# label kpng.addon) and the BPF object is beside it.
out=$(in_image node -e "const n = require('/opt/kpng/dist/src/native'); n.loadNative(); console.log(n.nativeAvailable(), require('/opt/kpng/node_modules/node-gyp-build').path('/opt/kpng'))") ||
  fail "loading the addon exited $?"
[[ "$out" == "true /opt/kpng/"* ]] || fail "the native addon does not load in the image: $out"
addon=${out#true }
ok "native addon loads: $addon (kpng.addon=$(bah inspect --type image --format '{{index .OCIv1.Config.Labels "kpng.addon"}}' "$image"))"
bpf="$mnt$(dirname "$addon")/sock_lb.bpf.o"
[ -f "$bpf" ] || fail "no BPF object beside the addon ($(dirname "$addon")/sock_lb.bpf.o; deploy/overlays/ebpf's backend loads it)"
# ELF e_machine (bytes 18-19, little endian) 247 = EM_BPF
[ "$(od -An -tu2 -j18 -N2 "$bpf" | tr -d ' ')" = 247 ] || fail "$bpf is not a BPF ELF object"
ok "BPF object present (EM_BPF ELF, $(stat -c %s "$bpf") bytes)"

# 4. The nft backend programs the kernel from the image (network namespace $netns only).
ip netns del "$netns" 2>/dev/null || true
ip netns add "$netns"; ip -n "$netns" link set lo up
kpng_ns() { in_image --netns "$(cfg 'c.Entrypoint[0]')" "$@"; }
kpng_ns file --input /var/lib/kube-proxy/cluster.yaml --node n1 --once --to nft --cluster-cidr 10.244.0.0/16 >"$work/nft.out" 2>&1 \
  || { cat "$work/nft.out" >&2; fail "kpng file --to nft exited non-zero"; }
rules=$(ip netns exec "$netns" nft list ruleset)
grep -q '10.96.0.10' <<<"$rules" && grep -q '10.244.1.5' <<<"$rules" || { echo "$rules" | head -30 >&2; fail "no rules for default/web in $netns"; }
ok "kpng file --to nft programmed $(grep -c . <<<"$rules") lines of nftables in $netns (default/web's VIP and endpoints there)"
ip -n "$netns" link set lo down 2>/dev/null || true
ip netns del "$netns"; ip netns add "$netns"; ip -n "$netns" link set lo up

# 5. deploy/: every overlay's DaemonSet runs this image's entrypoint (no command) with args the image
# resolves, and a backend (--to, else the ConfigMap's kube-proxy mode) the image has.
for f in "$work"/deploy-*.yaml; do
  node -e "
    const { parseAllDocuments } = require('$repo/node_modules/yaml');
    const docs = parseAllDocuments(require('fs').readFileSync('$f', 'utf8')).map((d) => d.toJS()).filter(Boolean);
    const ds = docs.find((d) => d.kind === 'DaemonSet');
    const c = ds.spec.template.spec.containers[0];
    if (c.command) throw new Error('$f: the container sets a command; the image is checked for its entrypoint');
    if (c.image.replace(/^.*\//, '') !== 'kpng:$version') throw new Error('$f: image ' + c.image + ', built kpng:$version');
    if (!c.securityContext.readOnlyRootFilesystem) throw new Error('$f: no readOnlyRootFilesystem (this check assumes it)');
    console.log(c.args.join('\n'));
    const mode = /^mode: *(\\S+)/m.exec(docs.find((d) => d.kind === 'ConfigMap').data['config.conf'])[1];
    if (!c.args.some((a) => a.startsWith('--to='))) console.log('--mode=' + ({ nftables: 'nft', ipvs: 'ipvs' })[mode]);" >"$work/args" || fail "$(basename "$f")"
  mode=$(sed -n 's/^--to=//p; s/^--mode=//p' "$work/args")
  sed -i '/^--mode=/d' "$work/args"
  if [ -n "$mode" ]; then
    # The backend the manifest names is registered in the image's build.
    in_image node -e "require('/opt/kpng/dist/src/backend/builtin').registerBuiltinBackends(); const r = require('/opt/kpng/dist/src/backend/registry'); if (!r.getBackend('$mode')) process.exit(1)" \
      || fail "$(basename "$f"): --to=$mode is not a backend of the image"
  fi
  ok "$(basename "$f"): entrypoint + args [$(paste -sd' ' "$work/args")]${mode:+, backend $mode registered}"
done

# 6. deploy/overlays/nft's DaemonSet as a pod runs it: a real kube-apiserver with the manifest's RBAC and
# ConfigMap, a service-account token, the in-cluster env, the container's args, hostNetwork (all in
# $netns, the pod's "host"), read-only root. hack/image/daemonset-run.ts is the cluster side.
if ! cp_dir=$(cd "$repo" && hack/controlplane/build.sh --print-dir 2>/dev/null) || [ ! -x "$cp_dir/kube-apiserver" ]; then
  fail "no kube-apiserver built (make controlplane)"
fi
pod="$work/pod"; mkdir -p "$pod"
ip netns exec "$netns" node "$repo/dist/hack/image/daemonset-run.js" --manifest "$work/deploy-nft.yaml" --pod-dir "$pod" --node n1 >"$work/ds.out" 2>&1 &
ds_pid=$!
until grep -q '^ready$' "$work/ds.out" 2>/dev/null; do
  kill -0 "$ds_pid" 2>/dev/null || { cat "$work/ds.out" >&2; fail "the control plane side did not start"; }
  sleep 0.5
done
mapfile -t pod_env <"$pod/pod.env"; mapfile -t pod_args <"$pod/args"
env_opts=(); for e in "${pod_env[@]}"; do env_opts+=(--env "$e"); done
[ "$(cat "$pod/config.mount")" = /var/lib/kube-proxy ] || fail "the ConfigMap is mounted at $(cat "$pod/config.mount"), this check mounts /var/lib/kube-proxy"
in_image --netns --vol "$pod/config" --sa "$pod/serviceaccount" "${env_opts[@]}" "$(cfg 'c.Entrypoint[0]')" "${pod_args[@]}" >"$work/kpng.log" 2>&1 &
kpng_pid=$!
status=0; wait "$ds_pid" || status=$?
stop_tree "$kpng_pid"; wait "$kpng_pid" 2>/dev/null || true
for _ in 1 2 3 4 5 6 7 8 9 10; do pgrep -f -- "in_image $work/root" >/dev/null || break; sleep 0.5; done
pgrep -f -- "in_image $work/root" >/dev/null && fail "kpng (the pod's process) is still running 5 s after it was stopped"
kpng_pid=""
grep -v '^ready$' "$work/ds.out" | sed 's/^/  /'
head -6 "$work/kpng.log" | sed 's/^/  kpng: /'
if [ $status -ne 0 ]; then echo "kpng's log:" >&2; tail -20 "$work/kpng.log" >&2; fail "deploy/overlays/nft's pod, run from the image"; fi
ok "deploy/overlays/nft's pod runs from the image: args [${pod_args[*]}], the ConfigMap's kubeconfig with the pod's token, RBAC, probes, nft"
echo "image-test: all checks passed for $image"
for a in "${arches[@]}"; do
  [ "$a" = "$host_arch" ] || "$repo/hack/image/test-foreign.sh" "$a"
done
