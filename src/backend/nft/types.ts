// The nft backend's own description of the ruleset: a few statement kinds and element kinds with
// semantic fields. Two renderers turn it into kernel objects: netlink.ts (NftOp[] for the native
// addon, the product path) and text.ts (an `nft -f` script, for benchmarks and debugging). Keeping
// one description guarantees that both describe the same ruleset.

import type { ElementItems } from '../../native/encode';
import type { PodSource } from '../../model/enls';
import type { IpFamily } from '../../native/nft-expr';

export type { IpFamily } from '../../native/nft-expr';
export type L4 = 'tcp' | 'udp' | 'sctp';

/** Elements per add/delete op (the addon packs each op into netlink messages). */
export const ELEM_CHUNK = 1000;

/** A list cut into element ops of ELEM_CHUNK. */
export function elemChunks<T>(l: T[]): T[][] {
  if (l.length <= ELEM_CHUNK) return [l];
  const out: T[][] = [];
  for (let i = 0; i < l.length; i += ELEM_CHUNK) out.push(l.slice(i, i + ELEM_CHUNK));
  return out;
}

/** Picks map shards per kind (services are spread over them by a hash of namespace/name). */
export const PICK_SHARDS = 64;

/** Packet mark bit that asks nat postrouting to masquerade (kube-proxy's 0x4000). */
export const MASQ_BIT = 0x4000;

/** Names of the shared objects of each family's table. */
export const SHARED_NAMES = {
  /** daddr . l4proto . dport -> goto service chain (cluster IPs -> svc-*, external/LB IPs -> ext-*). */
  vips: 'vips',
  /** l4proto . dport -> goto ext-* chain, for destinations of type local (NodePorts). */
  nodePorts: 'node-ports',
  /** daddr . l4proto . dport -> goto reject-chain | drop: service IPs without usable endpoints. */
  noEndpoints: 'no-endpoints',
  /** l4proto . dport -> goto reject-chain | drop: NodePorts without usable endpoints. */
  noEndpointNodePorts: 'no-endpoint-nodeports',
  /** daddr . l4proto . dport -> goto fw-* chain: load-balancer IPs with source ranges. */
  firewall: 'firewall',
  /**
   * slot (u32) -> endpoint addr . port: services' endpoints, picked by numgen + offset. Sharded by slot
   * range (endpoints-0, endpoints-1, ...): the kernel validates each map element add against every
   * rule bound to the map, so one map for all services made full syncs quadratic.
   */
  endpoints: 'endpoints',
  /**
   * Endpoint choice keyed by the destination: <fam> daddr . l4proto . dport . slot -> endpoint (vip
   * destinations), l4proto . dport . slot -> endpoint (node ports); `-local` for the local endpoints.
   * Read by shared `pick-*` chains (one per key kind, list, protocol, endpoint count and shard), so
   * the number of chains does not grow with services: nf_tables walks every chain on every commit.
   * Sharded by service (`-<k>` suffix, PICK_SHARDS maps per kind): one map of 500k elements fills
   * the kernel's resizable hash slowly within one transaction (rhashtable_insert_slow).
   */
  picksVip: 'picks-vip',
  picksPort: 'picks-port',
  picksVipLocal: 'picks-lvip',
  picksPortLocal: 'picks-lport',
  /** saddr . daddr for every endpoint address on this node: a connection DNATed back to its own source is masqueraded. */
  hairpin: 'hairpin',
  /** Every cluster IP: new connections still addressed to one after DNAT (a port it does not serve) are rejected. */
  clusterIPs: 'cluster-ips',
  // chains
  natPrerouting: 'nat-prerouting',
  natOutput: 'nat-output',
  natPostrouting: 'nat-postrouting',
  filterPrerouting: 'filter-prerouting',
  filterInput: 'filter-input',
  filterForward: 'filter-forward',
  filterOutput: 'filter-output',
  filterOutputPost: 'filter-output-post-dnat',
  services: 'services',
  reject: 'reject-chain',
  /** The fast path (opt-in): the flowtable, and the forward chain that offloads service connections to it. */
  fastPath: 'fast-path',
  fastPathForward: 'fast-path-forward',
} as const;

export type Verdict = { goto: string } | 'drop';

/** Statements: each is one rule. */
export type Stmt =
  /** [ct state new] <fam> daddr . meta l4proto . th dport vmap @map */
  | { type: 'vmapVip'; map: string; ctNew?: boolean }
  /**
   * [ct state new] [fib daddr type local] [<fam> daddr CIDR] [<fam> daddr != loopback] meta l4proto . th dport vmap @map
   * (the loopback test: without daddrCidr, or with exceptLoopback when the CIDR holds loopback addresses)
   */
  | { type: 'vmapPort'; map: string; ctNew?: boolean; local?: boolean; daddrCidr?: string; exceptLoopback?: boolean }
  | { type: 'jump'; chain: string }
  | { type: 'goto'; chain: string }
  /** <fam> saddr CIDR return | goto chain */
  | { type: 'srcCidr'; cidr: string; then: 'return' | { goto: string } }
  /** [<fam> saddr CIDR | iifname NAME | iifname "PREFIX*" | fib saddr type local] [meta mark set meta mark | MASQ_BIT] goto chain: one client class's route */
  | { type: 'classGoto'; from: PodSource | 'local' | 'any'; masq: boolean; chain: string }
  /** iifname NAME return | iifname "PREFIX*" return (a pod that is not DNATed, by its interface) */
  | { type: 'iifReturn'; iifname: string; prefix: boolean }
  /** ct state new <fam> daddr @set reject */
  | { type: 'rejectDaddrInSet'; set: string }
  /** meta l4proto P dnat to [<fam> daddr .] meta l4proto . th dport . numgen random mod n map @<map> */
  | { type: 'dnatPick'; proto: L4; n: number; map: string; key: 'vip' | 'port' }
  /** meta l4proto P dnat to addr:port */
  | { type: 'dnat'; proto: L4; addr: string; port: number }
  /** <fam> saddr @set goto chain */
  | { type: 'affinityGoto'; set: string; chain: string }
  /** numgen random mod m == 0 goto chain */
  | { type: 'randomGoto'; mod: number; chain: string }
  /** update @set { <fam> saddr } */
  | { type: 'affinityUpdate'; set: string }
  | { type: 'drop' }
  /** meta l4proto tcp reject with tcp reset */
  | { type: 'rejectTcp' }
  /** reject with icmp(v6) port-unreachable */
  | { type: 'rejectIcmp' }
  /** ct status dnat <fam> saddr . <fam> daddr @hairpin masquerade */
  | { type: 'hairpinMasq' }
  /** ct status dnat ip saddr 127.0.0.0/8 masquerade fully-random (a localhost node port's connection; IPv4 only) */
  | { type: 'localnetMasq' }
  /** ip daddr 127.0.0.0/8 ip saddr != 127.0.0.0/8 ct state != established,related ct status != dnat drop (IPv4 only) */
  | { type: 'dropLocalnet' }
  /** meta mark & MASQ_BIT == 0 return */
  | { type: 'returnIfNoMark' }
  /** meta mark set meta mark ^ MASQ_BIT */
  | { type: 'clearMark' }
  /** masquerade fully-random */
  | { type: 'masquerade' }
  /** ct status dnat [ct packets > minPackets] flow add @flowtable (the kernel offloads only established TCP and UDP) */
  | { type: 'flowOffload'; flowtable: string; minPackets: number };

/** Elements of the shared maps and sets. */
export type Elem =
  | { type: 'vip'; addr: string; proto: L4; port: number; verdict: Verdict }
  | { type: 'port'; proto: L4; port: number; verdict: Verdict }
  /** Slot `i` of a destination (vip: addr set; node port: no addr) -> endpoint epAddr:epPort. */
  | { type: 'pick'; addr?: string; proto: L4; port: number; slot: number; epAddr: string; epPort: number }
  | { type: 'pair'; addr: string }
  | { type: 'addr'; addr: string };

export type SetKind = 'vipMap' | 'portMap' | 'pickVipMap' | 'pickPortMap' | 'pairSet' | 'addrSet' | 'affinity';

export interface SetSpec {
  name: string;
  kind: SetKind;
  /** affinity sets: element timeout in seconds. */
  timeoutSec?: number;
  /**
   * Capacity fixed at creation: the kernel then picks its fixed-size hash (no resizing while a big
   * transaction fills it), and refuses elements beyond it (ENFILE). Absent: a resizable hash.
   */
  size?: number;
}

/** The fast path as a full sync programs it: the flowtable's devices (each must exist when the batch commits). */
export interface FastPathSpec {
  devices: string[];
  /** Packets a connection carries before it is offloaded (0: at once). */
  minPackets: number;
}

/** The fast path's flowtable: the devices it hooks (each must exist when the batch commits). */
export interface FlowtableSpec {
  name: string;
  devices: string[];
}

export interface ChainSpec {
  name: string;
  hook?: { type: 'nat' | 'filter'; hook: 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting'; priority: number };
}

/** One operation on one family's table. Ops are applied in order, in one transaction. */
export type Op =
  /** Replace the table by an empty one (create if absent, delete, create: no window without rules). */
  | { kind: 'resetTable' }
  /** Create the table if absent, keeping what it holds (a repairing full sync: kernel-objects.ts). */
  | { kind: 'addTable' }
  | { kind: 'addSet'; set: SetSpec }
  | { kind: 'delSet'; name: string }
  /** Remove every element of a set or map. */
  | { kind: 'flushSet'; name: string }
  | { kind: 'addChain'; chain: ChainSpec }
  /** Create the flowtable, or add the devices it lacks (devices are never removed by an add). */
  | { kind: 'addFlowtable'; flowtable: FlowtableSpec }
  | { kind: 'delFlowtable'; name: string }
  | { kind: 'flushChain'; name: string }
  | { kind: 'delChain'; name: string }
  | { kind: 'addRule'; chain: string; stmt: Stmt }
  | { kind: 'addElems'; set: string; elems: Elem[] }
  | { kind: 'delElems'; set: string; elems: Elem[] }
  /** Elements added, already encoded (a full sync's: see packed.ts). */
  | { kind: 'addPacked'; set: string; elems: PackedElemsView };

export interface FamOps { fam: IpFamily; ops: Op[] }

export const famOf = (addr: string): IpFamily => (addr.includes(':') ? 'ip6' : 'ip');

/** Elements already encoded for the kernel, as the ops carry them (packed.ts's PackedElems). */
export interface PackedElemsView {
  readonly items: ElementItems;
  /** Elements packed. */
  readonly count: number;
  /** The element ops' byte ranges, ELEM_CHUNK elements each, with their first element's index. */
  chunks(): Iterable<{ first: number; from: number; to: number }>;
  /** The elements as objects again (debug text, tests' fake kernel). */
  decode(): Elem[];
  /** Element `i` as an error report names it. */
  text(i: number): string;
}
