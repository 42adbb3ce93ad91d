// The fixed part of each family's table: shared maps, hook chains and helper chains. Hooks and
// priorities follow upstream kube-proxy's nftables mode (facts, not code):
//   filter prerouting/output at dstnat-10: load-balancer source ranges, before DNAT rewrites daddr;
//   filter input/forward (after prerouting's DNAT) and output at 0 (after output's DNAT): new
//     connections still addressed to a service IP / node port were not DNATed for their client
//     class: reject or drop them; a cluster IP on a port it does not serve is rejected;
//   nat prerouting/output at dstnat: dispatch (one vmap lookup) and DNAT;
//   nat postrouting at srcnat: hairpin and mark-based masquerade.
import type { NodeInfo } from '../../model/enls';
import { cidrContains } from '../../model/ip';
import { isLoopbackCIDR } from '../../model/options';
import { SHARED_NAMES, type ChainSpec, type FastPathSpec, type IpFamily, type Op, type SetSpec, type Stmt } from './types';

/** What the fixed objects depend on: where node ports answer (NodeInfo.nodePortAddresses, localhostNodePorts). */
export interface BaseOptions {
  nodePortAddresses: string[];
  /** Node ports answer on the loopback addresses inside nodePortAddresses too (IPv4 only, as upstream's iptables mode). */
  localhost?: boolean;
  /** The fast path (opt-in): a flowtable on these devices and the forward chain that offloads to it. */
  fastPath?: FastPathSpec;
}

export function baseOptions(fam: IpFamily, node: NodeInfo | undefined, fastPath?: FastPathSpec): BaseOptions {
  const all = fam === 'ip' ? '0.0.0.0/0' : '::/0';
  const list = node ? (fam === 'ip' ? node.nodePortAddresses.v4 : node.nodePortAddresses.v6) : [all];
  return {
    nodePortAddresses: list.length ? list : [all],
    ...(fam === 'ip' && node?.localhostNodePorts ? { localhost: true } : {}),
    ...(fastPath && fastPath.devices.length ? { fastPath } : {}),
  };
}

export const SHARED_SETS: SetSpec[] = [
  { name: SHARED_NAMES.vips, kind: 'vipMap' },
  { name: SHARED_NAMES.nodePorts, kind: 'portMap' },
  { name: SHARED_NAMES.noEndpoints, kind: 'vipMap' },
  { name: SHARED_NAMES.noEndpointNodePorts, kind: 'portMap' },
  { name: SHARED_NAMES.firewall, kind: 'vipMap' },
  { name: SHARED_NAMES.hairpin, kind: 'pairSet' },
  { name: SHARED_NAMES.clusterIPs, kind: 'addrSet' },
];

const DSTNAT = -100;
const SRCNAT = 100;
/**
 * The offload chain runs after the forward filters others install (iptables' and nftables' filter at 0,
 * firewalld's at 10, security at 50): a connection any of them drops is never offloaded, and the
 * kernel offloads only connections seen both ways, whose packets every hook has accepted.
 */
const FAST_PATH_PRIORITY = 60;

/**
 * One rule per node-port CIDR: the node's own addresses inside it, never loopback ones (as kube-proxy's
 * nftables mode: a connection from 127.0.0.1 DNATed to a pod needs route_localnet). A /0 means every
 * local address but loopback; a CIDR of loopback addresses only gives no rule at all. With localhost
 * node ports (iptables mode), loopback addresses inside a CIDR are kept: the rule tests the CIDR alone
 * (a /0 stays as the CIDR, which the kernel rule reduces to no address test).
 */
function nodePortRules(opts: BaseOptions, map: string, ctNew: boolean): Stmt[] {
  return opts.nodePortAddresses.filter((c) => opts.localhost || !isLoopbackCIDR(c)).map((c): Stmt => {
    if (opts.localhost && holdsLoopback(c)) return { type: 'vmapPort', map, ctNew, local: true, daddrCidr: c };
    return /\/0$/.test(c)
      ? { type: 'vmapPort', map, ctNew, local: true }
      : { type: 'vmapPort', map, ctNew, local: true, daddrCidr: c, ...(holdsLoopback(c) ? { exceptLoopback: true } : {}) };
  });
}

/** Whether a CIDR (not /0) also holds loopback addresses (e.g. 96.0.0.0/3). */
function holdsLoopback(cidr: string): boolean {
  return cidrContains(cidr, cidr.includes(':') ? '::1' : '127.0.0.1');
}

export function baseChains(fam: IpFamily, opts: BaseOptions): Array<{ chain: ChainSpec; rules: Stmt[] }> {
  // Localhost node ports: route_localnet lets 127.0.0.0/8 cross interfaces, so packets from elsewhere
  // to it that conntrack did not already accept are dropped (kube-proxy's "block incoming localnet
  // connections"), and a connection from 127.0.0.1 DNATed to a pod leaves with the node's address.
  const localhost = fam === 'ip' && !!opts.localhost;
  return [
    { chain: { name: SHARED_NAMES.reject }, rules: [{ type: 'rejectTcp' }, { type: 'rejectIcmp' }] },
    {
      chain: { name: SHARED_NAMES.services },
      rules: [{ type: 'vmapVip', map: SHARED_NAMES.vips }, ...nodePortRules(opts, SHARED_NAMES.nodePorts, false)],
    },
    {
      chain: { name: SHARED_NAMES.filterPrerouting, hook: { type: 'filter', hook: 'prerouting', priority: DSTNAT - 10 } },
      rules: [{ type: 'vmapVip', map: SHARED_NAMES.firewall, ctNew: true }],
    },
    {
      chain: { name: SHARED_NAMES.filterOutput, hook: { type: 'filter', hook: 'output', priority: DSTNAT - 10 } },
      rules: [{ type: 'vmapVip', map: SHARED_NAMES.firewall, ctNew: true }],
    },
    {
      // After DNAT: a packet still addressed to a service IP was not DNATed (no endpoint for its client class).
      chain: { name: SHARED_NAMES.filterOutputPost, hook: { type: 'filter', hook: 'output', priority: 0 } },
      rules: [{ type: 'vmapVip', map: SHARED_NAMES.noEndpoints, ctNew: true }, { type: 'rejectDaddrInSet', set: SHARED_NAMES.clusterIPs }],
    },
    {
      chain: { name: SHARED_NAMES.filterInput, hook: { type: 'filter', hook: 'input', priority: -110 } },
      rules: [...(localhost ? [{ type: 'dropLocalnet' } as const] : []), { type: 'vmapVip', map: SHARED_NAMES.noEndpoints, ctNew: true }, ...nodePortRules(opts, SHARED_NAMES.noEndpointNodePorts, true)],
    },
    {
      chain: { name: SHARED_NAMES.filterForward, hook: { type: 'filter', hook: 'forward', priority: -110 } },
      rules: [{ type: 'vmapVip', map: SHARED_NAMES.noEndpoints, ctNew: true }, { type: 'rejectDaddrInSet', set: SHARED_NAMES.clusterIPs }],
    },
    ...(opts.fastPath ? [{
      chain: { name: SHARED_NAMES.fastPathForward, hook: { type: 'filter' as const, hook: 'forward' as const, priority: FAST_PATH_PRIORITY } },
      rules: [{ type: 'flowOffload' as const, flowtable: SHARED_NAMES.fastPath, minPackets: opts.fastPath.minPackets }],
    }] : []),
    { chain: { name: SHARED_NAMES.natPrerouting, hook: { type: 'nat', hook: 'prerouting', priority: DSTNAT } }, rules: [{ type: 'jump', chain: SHARED_NAMES.services }] },
    { chain: { name: SHARED_NAMES.natOutput, hook: { type: 'nat', hook: 'output', priority: DSTNAT } }, rules: [{ type: 'jump', chain: SHARED_NAMES.services }] },
    {
      chain: { name: SHARED_NAMES.natPostrouting, hook: { type: 'nat', hook: 'postrouting', priority: SRCNAT } },
      rules: [{ type: 'hairpinMasq' }, ...(localhost ? [{ type: 'localnetMasq' } as const] : []), { type: 'returnIfNoMark' }, { type: 'clearMark' }, { type: 'masquerade' }],
    },
  ];
}

/** Ops that (re)create the table with its fixed objects. Helper chains come before the chains that use them. */
export function baseOps(fam: IpFamily, opts: BaseOptions, sizeOf: (set: string) => number | undefined = () => undefined): Op[] {
  const ops: Op[] = [{ kind: 'resetTable' }];
  for (const set of SHARED_SETS) {
    const size = sizeOf(set.name);
    ops.push({ kind: 'addSet', set: size === undefined ? set : { ...set, size } });
  }
  if (opts.fastPath) ops.push({ kind: 'addFlowtable', flowtable: { name: SHARED_NAMES.fastPath, devices: opts.fastPath.devices } });
  const chains = baseChains(fam, opts);
  // All chains first (a vmap/jump may name any of them), then the rules.
  for (const c of chains) ops.push({ kind: 'addChain', chain: c.chain });
  for (const c of chains) for (const stmt of c.rules) ops.push({ kind: 'addRule', chain: c.chain.name, stmt });
  return ops;
}
