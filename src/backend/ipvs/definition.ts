// `--to ipvs`: the IPVS backend's registration (name, flags, constructor). The module itself (and the
// native addon) loads only when this backend is chosen.
import { AGGREGATOR_FLAGS, aggregatorFlags } from '../../aggregator/flags';
import { parseDuration } from '../../util/duration';
import type { BackendDefinition } from '../registry';
import { ipvsSettings } from './settings';

export const ipvsBackend: BackendDefinition = {
  name: 'ipvs',
  summary: 'program IPVS (generic netlink) with service addresses on kube-ipvs0; nftables for what IPVS cannot express',
  kernel: true,
  flags: [
    { name: 'ipvs-scheduler', type: 'string', placeholder: 'NAME', default: 'rr', help: 'IPVS scheduler of every virtual server: rr, wrr, lc, wlc, sh, mh, ...' },
    { name: 'ipvs-drain-check', type: 'string', placeholder: 'D', default: '60s', help: 'how often removed real servers (weight 0) are checked for remaining connections before deletion' },
    { name: 'ipvs-nft-table', type: 'string', placeholder: 'NAME', default: 'kpng-ipvs', help: 'table (ip and ip6) for what IPVS cannot express: masquerade, drop, reject, source ranges' },
    // kube-proxy's --ipvs-* settings, same names and meaning (settings.ts).
    { name: 'ipvs-strict-arp', type: 'boolean', help: 'set net.ipv4.conf.all.arp_ignore=1 and arp_announce=2 at start, so the node does not answer ARP for the service addresses on kube-ipvs0 (needed by L2 load-balancer announcers)' },
    { name: 'ipvs-tcp-timeout', type: 'string', placeholder: 'D', default: '0s', help: 'IPVS timeout of idle TCP connections, set at start (Go duration, whole seconds; 0 leaves the kernel\'s value)' },
    { name: 'ipvs-tcpfin-timeout', type: 'string', placeholder: 'D', default: '0s', help: 'IPVS timeout of TCP connections after a FIN, set at start (0 leaves the kernel\'s value)' },
    { name: 'ipvs-udp-timeout', type: 'string', placeholder: 'D', default: '0s', help: 'IPVS timeout of UDP flows, set at start (0 leaves the kernel\'s value)' },
    { name: 'ipvs-exclude-cidrs', type: 'string', multiple: true, placeholder: 'CIDR,...', help: 'virtual servers whose address is inside these CIDRs are never deleted by kpng (another program\'s; comma-separated or repeated)' },
    ...AGGREGATOR_FLAGS,
  ],
  create: (ctx) => {
    // Validated before the addon loads or anything touches the kernel: a bad value is an error naming its flag.
    const settings = ipvsSettings(ctx.flags);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ipvs = require('./index') as typeof import('./index');
    const log = (m: string) => ctx.log.info(m);
    const opts = {
      scheduler: String(ctx.flags['ipvs-scheduler'] ?? 'rr'),
      drainCheckMs: drainCheckMs(String(ctx.flags['ipvs-drain-check'] ?? '60s')),
      table: String(ctx.flags['ipvs-nft-table'] ?? 'kpng-ipvs'),
      interface: 'kube-ipvs0',
      settings,
      netns: ctx.netns,
      log,
    };
    const af = aggregatorFlags(ctx.flags);
    if (!af.enabled) return ipvs.createIpvsSink(opts);
    // The companion table and the IPVS messages go through the node's aggregator as producer "kpng".
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const agg = require('../kernel/node-aggregator') as typeof import('../kernel/node-aggregator');
    const paths = agg.nodeIpvsPaths({ netns: ctx.netns, log, minIntervalMs: af.minIntervalMs, burst: af.burst });
    return agg.withAggregatorServer(ipvs.createIpvsSink({ ...opts, paths }), af, ctx.log);
  },
};

/** "60s", "500ms", "1m30s", "0" (no drain checks: drained real servers stay until the next full sync). */
export function drainCheckMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new Error(`--ipvs-drain-check: ${JSON.stringify(text)} is not a duration (e.g. 60s, 500ms, 1m30s)`);
  return ms;
}
