// `--to ebpf`: the eBPF backend's registration. The module itself (and the native addon) loads only
// when this backend is chosen.
import { AGGREGATOR_FLAGS, aggregatorFlags } from '../../aggregator/flags';
import type { BackendDefinition } from '../registry';

export const ebpfBackend: BackendDefinition = {
  name: 'ebpf',
  summary: 'socket-level load balancing (cgroup v2 BPF programs, libbpf) for this node\'s processes; nftables for traffic from other hosts',
  kernel: true,
  flags: [
    { name: 'cgroup', type: 'string', placeholder: 'PATH', help: 'cgroup v2 directory the programs attach to (default: the cgroup v2 mount, from /proc/self/mountinfo)' },
    { name: 'bpffs', type: 'string', placeholder: 'DIR', default: '/sys/fs/bpf/kpng', help: 'bpffs directory for pinned maps and links (reused by the next start)' },
    { name: 'ebpf-nft-table', type: 'string', placeholder: 'NAME', default: 'kpng', help: 'nftables table (ip and ip6) for node ports and traffic from other hosts' },
    { name: 'ebpf-map-entries', type: 'string', placeholder: 'N', default: '262144', help: 'entries of the service map (one per service address and port, plus one per endpoint) and of the backend map' },
    { name: 'ebpf-prealloc', type: 'boolean', help: 'allocate the service and backend maps\' entries when the maps are made (--ebpf-map-entries of them, about 100 bytes each of kernel memory, used or not) instead of at each update: map writes take about a third of the kernel time (a large cluster\'s first sync is shorter)' },
    { name: 'ebpf-host-netns-only', type: 'boolean', help: 'balance at connect() only sockets of the host network namespace (kpng\'s); pods\' connections to services go through the nftables part (DNAT), as with kube-proxy' },
    { name: 'ebpf-destroy-tcp', type: 'boolean', help: 'also destroy TCP sockets connected through the socket LB to an endpoint that leaves its service (the client gets ECONNABORTED at once and reconnects); off: they drain as with kube-proxy, since an endpoint that starts terminating leaves the service too (UDP sockets are destroyed either way)' },
    { name: 'ebpf-cleanup', type: 'boolean', help: 'detach the programs pinned under --bpffs, remove the pins, and program nothing (use with --once)' },
    ...AGGREGATOR_FLAGS,
  ],
  create: (ctx) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ebpf = require('./index') as typeof import('./index');
    const log = (m: string) => ctx.log.info(m);
    const pinDir = String(ctx.flags.bpffs ?? '/sys/fs/bpf/kpng');
    if (ctx.flags['ebpf-cleanup']) return ebpf.createCleanupSink(pinDir, log);
    const cgroup = typeof ctx.flags.cgroup === 'string' && ctx.flags.cgroup ? ctx.flags.cgroup : ebpf.defaultCgroup();
    const entries = String(ctx.flags['ebpf-map-entries'] ?? '262144');
    if (!/^\d+$/.test(entries) || Number(entries) < 1 || Number(entries) > 1 << 26) throw new Error(`--ebpf-map-entries: ${JSON.stringify(entries)} is not a number of entries (1 .. ${1 << 26})`);
    const opts = { cgroup, pinDir, nftTable: String(ctx.flags['ebpf-nft-table'] ?? 'kpng'), mapEntries: Number(entries), prealloc: ctx.flags['ebpf-prealloc'] === true, hostNetnsOnly: ctx.flags['ebpf-host-netns-only'] === true, destroyTcp: ctx.flags['ebpf-destroy-tcp'] === true, netns: ctx.netns, log };
    const af = aggregatorFlags(ctx.flags);
    if (!af.enabled) return ebpf.createEbpfSink(opts);
    // The nft part goes through the node's aggregator as producer "kpng" (the BPF maps do not).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const agg = require('../kernel/node-aggregator') as typeof import('../kernel/node-aggregator');
    const kernel = agg.nodeAggregatorKernel({ netns: ctx.netns, log, minIntervalMs: af.minIntervalMs, burst: af.burst });
    return agg.withAggregatorServer(ebpf.createEbpfSink({ ...opts, kernel }), af, ctx.log);
  },
};
