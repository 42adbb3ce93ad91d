// kpng's own backends, registered with the same contract as anyone's. Each constructor loads its
// module only when chosen (the nft backend pulls in the native addon).
import { createDumpSink, type DumpFormat } from '../sink/dump';
import { createRoutesSink } from '../sink/routes';
import { createTraceSink } from '../sink/trace';
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
      { name: 'aggregator', type: 'boolean', default: false, help: 'send the tables through the aggregator (producer "kpng"): one transaction with other producers\' changes' },
      { name: 'aggregator-listen', type: 'string', placeholder: 'unix:///PATH', help: 'with --aggregator: serve outside producers (kpng publish) on this unix socket (mode 0600)' },
    ],
    create: (ctx) => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const nft = require('./nft') as typeof import('./nft');
      const opts = { log: (m: string) => ctx.log.info(m), tablePrefix: ctx.flags['nft-table'] as string | undefined, netns: ctx.netns };
      if (!ctx.flags.aggregator) return nft.createNftSink(opts);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const agg = require('../aggregator/node') as typeof import('../aggregator/node');
      const sink = nft.createNftSink({ ...opts, kernel: agg.nodeAggregatorKernel({ netns: ctx.netns, log: (m) => ctx.log.info(m) }) });
      const listen = ctx.flags['aggregator-listen'] as string | undefined;
      if (!listen) return sink;
      return agg.serveNodeAggregator(listen, ctx.log).then((server) => {
        const close = sink.close?.bind(sink);
        sink.close = async () => { await server.close(); await close?.(); };
        return sink;
      });
    },
  });
  registerBackend(ipvsBackend);
  registerBackend(ebpfBackend);
}
