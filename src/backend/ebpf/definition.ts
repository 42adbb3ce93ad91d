// `--to ebpf`: the eBPF backend's registration. The module itself (and the native addon) loads only
// when this backend is chosen.
import type { BackendDefinition } from '../registry';

export const ebpfBackend: BackendDefinition = {
  name: 'ebpf',
  summary: 'socket-level load balancing (cgroup v2 BPF programs, libbpf) for this node\'s processes; nftables for traffic from other hosts',
  kernel: true,
  flags: [
    { name: 'cgroup', type: 'string', placeholder: 'PATH', help: 'cgroup v2 directory the programs attach to (default: the cgroup v2 mount, from /proc/self/mountinfo)' },
    { name: 'bpffs', type: 'string', placeholder: 'DIR', default: '/sys/fs/bpf/kpng', help: 'bpffs directory for pinned maps and links (reused by the next start)' },
    { name: 'ebpf-nft-table', type: 'string', placeholder: 'NAME', default: 'kpng', help: 'nftables table (ip and ip6) for node ports and traffic from other hosts' },
    { name: 'ebpf-cleanup', type: 'boolean', help: 'detach the programs pinned under --bpffs, remove the pins, and program nothing (use with --once)' },
  ],
  create: (ctx) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ebpf = require('./index') as typeof import('./index');
    const log = (m: string) => ctx.log.info(m);
    const pinDir = String(ctx.flags.bpffs ?? '/sys/fs/bpf/kpng');
    if (ctx.flags['ebpf-cleanup']) return ebpf.createCleanupSink(pinDir, log);
    const cgroup = typeof ctx.flags.cgroup === 'string' && ctx.flags.cgroup ? ctx.flags.cgroup : ebpf.defaultCgroup();
    return ebpf.createEbpfSink({ cgroup, pinDir, nftTable: String(ctx.flags['ebpf-nft-table'] ?? 'kpng'), netns: ctx.netns, log });
  },
};
