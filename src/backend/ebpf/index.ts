// eBPF backend: `kpng ... --to ebpf [--cgroup PATH] [--bpffs DIR]`. Socket-level load balancing
// (native/bpf/sock_lb.bpf.c, loaded by the addon with libbpf) composed with the nft renderer in one
// KernelSink. Its design: docs/backends/ebpf.md.
import * as fs from 'node:fs';
import { nativeKernel } from '../nft';
import type { NftKernel } from '../nft/sink';
import { NftDataplane } from '../nft/sink';
import { KernelSink } from '../kernel/kernel-sink';
import { EbpfLoader, ebpfCleanup } from '../../native/ebpf';
import { trimMalloc } from '../../native/malloc';
import type { Sink } from '../../sink/sink';
import { CombinedDataplane } from './combined';
import { EbpfDataplane } from './dataplane';
import { DEFAULT_MAP_ENTRIES } from './maps';

export { EbpfDataplane } from './dataplane';
export { CombinedDataplane } from './combined';
export { planService } from './plan';

export interface EbpfSinkOptions {
  cgroup: string;
  pinDir: string;
  /** nft table (ip and ip6) for traffic that is not a socket operation of this node. */
  nftTable: string;
  /** Max entries of the service and backend maps. */
  mapEntries?: number;
  /** --ebpf-prealloc: the service and backend maps allocate all their entries up front (faster updates). */
  prealloc?: boolean;
  /** Balance only sockets of the host network namespace (netns, else kpng's): pods go through the nft part. */
  hostNetnsOnly?: boolean;
  /** --ebpf-destroy-tcp: destroy TCP sockets of removed endpoints too. */
  destroyTcp?: boolean;
  netns?: string;
  log: (msg: string) => void;
  /** Where the nft part goes (default: the addon, its own transaction; --aggregator: the node's aggregator). */
  kernel?: NftKernel;
}

/** The cgroup v2 mount point, from mountinfo text (field 5 is the mount point; the fs type follows " - "). */
export function cgroup2Mount(mountinfo: string): string | undefined {
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    if (!right || right.split(' ')[0] !== 'cgroup2') continue;
    return left.split(' ')[4]?.replace(/\\040/g, ' ');
  }
  return undefined;
}

export function defaultCgroup(): string {
  const m = cgroup2Mount(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
  if (!m) throw new Error('--to ebpf: no cgroup v2 hierarchy is mounted (see /proc/self/mountinfo); mount one or pass --cgroup PATH');
  return m;
}

export function createEbpfSink(opts: EbpfSinkOptions): KernelSink {
  const kernel = opts.kernel ?? nativeKernel(opts.netns ? { netns: opts.netns } : {});
  const open = async () => {
    const lb = await EbpfLoader.open({
      cgroup: opts.cgroup, pinDir: opts.pinDir, mapEntries: opts.mapEntries, prealloc: opts.prealloc === true,
      ...(opts.hostNetnsOnly ? { hostNetnsOnly: true, ...(opts.netns ? { netns: opts.netns } : {}) } : {}),
      // Behaves as on a kernel without bpf_sock_destroy, which the tests of that path need.
      ...(process.env.KPNG_EBPF_NO_SOCKET_DESTROY === '1' ? { socketDestroy: false } : {}),
    });
    // Loading the object reads the kernel's BTF (the socket iterators' CO-RE relocations and
    // kfunc): several MiB that libbpf frees after the load but malloc keeps resident, under the first
    // sync's peak. Given back now (in a worker), which lowers a small cluster's peak.
    void trimMalloc();
    return lb;
  };
  const ebpf = new EbpfDataplane(open, opts.log, opts.mapEntries ?? DEFAULT_MAP_ENTRIES, { destroyTcp: opts.destroyTcp === true });
  const nft = new NftDataplane(opts.nftTable, kernel, opts.log);
  return new KernelSink(new CombinedDataplane('ebpf', [nft, ebpf]), { log: opts.log, conntrackDelete: (f) => kernel.conntrackDelete(f) });
}

/** `--ebpf-cleanup`: detaches the programs pinned under pinDir and removes the pins, then ignores the
 * stream (run it with --once). The nft table stays; `--to nft` rules are removed the nft way. */
export async function createCleanupSink(pinDir: string, log: (msg: string) => void): Promise<Sink> {
  const removed = await ebpfCleanup(pinDir);
  log(`ebpf: clean-up of ${pinDir}: ${removed.length ? `removed ${removed.join(', ')}` : 'nothing pinned'}`);
  return { name: 'ebpf-cleanup', apply: async () => {} };
}
