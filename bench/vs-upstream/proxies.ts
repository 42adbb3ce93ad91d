// The proxies compared: upstream kube-proxy (nftables mode) and kpng with each kernel backend that
// runs here. Each is started inside its own network namespace with the same kubeconfig, node name
// and pod CIDR; both use their default minimum sync period (1 s).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { kpngMain, nodeBinary, repoRoot } from '../../test/shared/kpng-process';
import { cgroup2Mount } from '../../src/backend/ebpf';

export interface ProxySpec {
  /** Column name in the table. */
  name: string;
  /** Short tag for the namespace name (kbv-<tag>). */
  tag: string;
  /** The command run inside the namespace. */
  argv(kubeconfig: string, node: string, podCidr: string): string[];
  /**
   * kpng --to ebpf: the socket LB attaches to this cgroup (made for the run, never the root: that
   * would balance the whole machine's connections) and pins its maps here; the run watches the maps.
   */
  ebpf?: { cgroup: string; pinDir: string };
  /**
   * The proxy keeps Node's on-disk compile cache (kpng: KPNG_COMPILE_CACHE names its directory). The
   * benchmark gives every start a directory of its own: empty (a host or image without a cache), or
   * the cache the image ships, made the same way for this checkout (hack/image/warm-compile-cache.js).
   */
  compileCache?: boolean;
}

/** The environment for a proxy that keeps a compile cache, with its cache in `dir` (node's own variable would win: removed). */
export function compileCacheEnv(dir: string): Record<string, string | undefined> {
  return { KPNG_COMPILE_CACHE: dir, NODE_COMPILE_CACHE: undefined };
}

/** A cgroup v2 directory and a bpffs pin directory of this run's own (see ProxySpec.ebpf). */
export function ebpfPlaces(tag: string): { cgroup: string; pinDir: string } {
  const mount = cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
  if (!mount) throw new Error('--backends ebpf: no cgroup v2 hierarchy is mounted');
  const name = `${process.env.KPNG_BENCH_NETNS_PREFIX || 'kbv'}-${tag}-${process.pid}`;
  return { cgroup: path.join(mount, name), pinDir: path.join('/sys/fs/bpf', name) };
}

/** Builds (or finds cached) upstream kube-proxy at the control plane's version: hack/kube-proxy/build.sh. */
export function buildKubeProxy(): string {
  const script = path.join(repoRoot(), 'hack', 'kube-proxy', 'build.sh');
  execFileSync(script, [], { stdio: ['ignore', 'inherit', 'inherit'] });
  const bin = execFileSync(script, ['--print-path'], { encoding: 'utf8' }).trim();
  if (!fs.existsSync(bin)) throw new Error(`${bin} is missing after ${script}`);
  return bin;
}

export function upstream(bin: string): ProxySpec {
  return {
    name: 'upstream nft',
    tag: 'up',
    argv: (kubeconfig, node, podCidr) => [
      bin,
      '--proxy-mode=nftables',
      `--kubeconfig=${kubeconfig}`,
      `--hostname-override=${node}`,
      `--cluster-cidr=${podCidr}`,
      // The conntrack table size and hash are global to the host: leave them alone.
      '--conntrack-max-per-core=0',
      '--oom-score-adj=0',
      '--v=0',
    ],
  };
}

/** kpng with `--to backend`; ebpf: `mapEntries` sizes its service and backend maps (--ebpf-map-entries). */
export function kpng(backend: string, mapEntries?: number): ProxySpec {
  const ebpf = backend === 'ebpf' ? ebpfPlaces(`kpng-${backend}`) : undefined;
  return {
    name: `kpng ${backend}`,
    tag: `kpng-${backend}`,
    ebpf,
    compileCache: true,
    // KPNG_BENCH_NODE_ARGS: node options for kpng (e.g. V8 flags to compare), space-separated.
    argv: (kubeconfig, node, podCidr) => [
      nodeBinary(), ...(process.env.KPNG_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), kpngMain(), 'kube', '--kubeconfig', kubeconfig,
      '--node', node, '--to', backend, '--cluster-cidr', podCidr, ...(ebpf ? ['--cgroup', ebpf.cgroup, '--bpffs', ebpf.pinDir] : []),
      ...(ebpf && mapEntries ? ['--ebpf-map-entries', String(mapEntries)] : []),
    ],
  };
}
