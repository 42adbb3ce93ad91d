// kpng's own backends, registered with the same contract as anyone's. Each constructor loads its
// module only when chosen (the nft backend pulls in the native addon).
import { createDumpSink, type DumpFormat } from '../sink/dump';
import { createRoutesSink } from '../sink/routes';
import { createTraceSink } from '../sink/trace';
import { AGGREGATOR_FLAGS, aggregatorFlags } from '../aggregator/flags';
import { ebpfBackend } from './ebpf/definition';
import { ipvsBackend } from './ipvs/definition';
import { registerBackend } from './registry';

const out = (text: string) => { process.stdout.write(text); };
let registered = false;

export function registerBuiltinBackends(): void {
  if (registered) return;
  registered = true;
  registerBackend({
    name: 'routes',
    summary: 'where each service port sends traffic from this node (--format table | jsonl)',
    create: (ctx) => createRoutesSink({ format: (ctx.flags.format ?? 'table') as 'table' | 'jsonl', write: out }),
  });
  registerBackend({
    name: 'dump',
    summary: 'the ENLS itself (--format json | yaml)',
    create: (ctx) => createDumpSink({ format: (ctx.flags.format ?? 'json') as DumpFormat, write: out }),
  });
  registerBackend({
    name: 'trace',
    summary: 'every Set / Delete / Sync as it happens (the smallest backend)',
    create: () => createTraceSink((line) => out(line + '\n')),
  });
  registerBackend({
    name: 'nft',
    summary: 'program nftables (tables "kpng" in the ip and ip6 families) through netlink',
    kernel: true,
    flags: [
      { name: 'nft-table', type: 'string', placeholder: 'NAME', default: 'kpng', help: 'name of kpng\'s table in the ip and ip6 families' },
      {
        name: 'nft-flowtable', type: 'string', placeholder: 'auto|IF,IF', default: '',
        help: 'fast path (off by default): offload established service connections to an nftables flowtable on these interfaces ("auto": every interface that is up but loopback, bridge ports included); forwarded traffic only, TCP and UDP; needs a kernel with nf_flow_table',
      },
      { name: 'nft-flowtable-packets', type: 'string', placeholder: 'N', default: '20', help: 'packets a connection carries (both ways) before the fast path takes it; 0: as soon as it is established' },
      ...AGGREGATOR_FLAGS,
    ],
    create: (ctx) => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const nft = require('./nft') as typeof import('./nft');
      const interfaces = nft.parseFastPathInterfaces(String(ctx.flags['nft-flowtable'] ?? ''));
      const packets = String(ctx.flags['nft-flowtable-packets'] ?? nft.DEFAULT_MIN_PACKETS).trim();
      const minPackets = /^\d+$/.test(packets) ? Number(packets) : NaN;
      if (!Number.isSafeInteger(minPackets)) throw new RangeError(`--nft-flowtable-packets: ${ctx.flags['nft-flowtable-packets']} is not a whole number of packets`);
      const opts = {
        log: (m: string) => ctx.log.info(m), tablePrefix: ctx.flags['nft-table'] as string | undefined, netns: ctx.netns,
        ...(interfaces ? { flowtable: { interfaces, minPackets } } : {}),
      };
      const af = aggregatorFlags(ctx.flags);
      if (af.enabled && interfaces) throw new Error('--nft-flowtable does not work with the aggregator yet: drop one of them');
      if (!af.enabled) return nft.createNftSink(opts);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const agg = require('./kernel/node-aggregator') as typeof import('./kernel/node-aggregator');
      const kernel = agg.nodeAggregatorKernel({ netns: ctx.netns, log: (m) => ctx.log.info(m), minIntervalMs: af.minIntervalMs, burst: af.burst });
      return agg.withAggregatorServer(nft.createNftSink({ ...opts, kernel }), af, ctx.log);
    },
  });
  registerBackend(ipvsBackend);
  registerBackend(ebpfBackend);
}
