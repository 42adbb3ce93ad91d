// What one service contributes to one family's table: its chains, its affinity sets, its elements in
// the shared maps and sets, and its endpoint slot ranges. A pure function of the ENLS service, the
// node item and the previous slot assignment (for stability). It renders the model's routes (target
// and masquerade per destination and client class); it decides no Kubernetes rule itself.
import * as crypto from 'node:crypto';
import { EndpointList, IPFamily, Protocol, Target, ofFamily, podSourceText, podSources, type Endpoint, type NodeInfo, type Route, type Routes, type Service, type ServicePort } from '../../model/enls';
import { firewallSources, isDnat, pickEndpoints } from '../../model/views';
import { denseSlots, type SlotState } from './slots';
import { fnv1a } from '../../util/fnv';
import { SHARED_NAMES, PICK_SHARDS, type Elem, type IpFamily, type L4, type Stmt, type Verdict } from './types';

export interface Program {
  /** Chains owned by this service (name -> rules). */
  chains: Map<string, Stmt[]>;
  /** Affinity sets (name -> timeout seconds). */
  sets: Map<string, number>;
  /** Elements in shared maps other than picks: map name -> elements (one per key: see indexElems for the ids). */
  elems: Map<string, Elem[]>;
  /**
   * Endpoint picks, one destination each: elements of a picks map once expanded (pickElems), which
   * a full sync does not do (it writes them into its batch as it reads them: a large cluster's half
   * million pick elements were as many objects).
   */
  picks: PickDest[];
  /** Elements of shared sets that several services may hold (reference counted by the caller): set -> ids. */
  shared: Map<string, Map<string, Elem>>;
  /** Endpoint slots of each endpoint list (key: eps-/leps- + service port), for stable picks. */
  slots: Map<string, SlotState>;
  /**
   * Chains several services may use (name -> rules; the name is derived from the rules, so equal
   * names mean equal rules): endpoint picks and class dispatch. Reference counted by the caller.
   */
  sharedChains: Map<string, Stmt[]>;
}

export function emptyProgram(): Program {
  return { chains: new Map(), sets: new Map(), elems: new Map(), picks: [], shared: new Map(), slots: new Map(), sharedChains: new Map() };
}

export const l4 = (p: Protocol): L4 => (p === Protocol.UDP ? 'udp' : p === Protocol.SCTP ? 'sctp' : 'tcp');

export function elemId(e: Elem): string {
  switch (e.type) {
    case 'vip': return `${e.addr}|${e.proto}|${e.port}`;
    case 'port': return `${e.proto}|${e.port}`;
    case 'pick': return `${e.addr ?? ''}|${e.proto}|${e.port}|${e.slot}`;
    case 'pair': return e.addr;
    case 'addr': return e.addr;
  }
}

const sameVerd = (a: Verdict, b: Verdict): boolean => (a === 'drop' || b === 'drop' ? a === b : a.goto === b.goto);

/** Same element content (key and data), field by field (a diff asks it of every element it keeps). */
export function sameElem(a: Elem, b: Elem): boolean {
  switch (a.type) {
    case 'vip': return b.type === 'vip' && a.addr === b.addr && a.proto === b.proto && a.port === b.port && sameVerd(a.verdict, b.verdict);
    case 'port': return b.type === 'port' && a.proto === b.proto && a.port === b.port && sameVerd(a.verdict, b.verdict);
    case 'pick': return b.type === 'pick' && a.addr === b.addr && a.proto === b.proto && a.port === b.port && a.slot === b.slot && a.epAddr === b.epAddr && a.epPort === b.epPort;
    case 'pair': return b.type === 'pair' && a.addr === b.addr;
    case 'addr': return b.type === 'addr' && a.addr === b.addr;
  }
}

const short = (s: string): string => crypto.createHash('sha1').update(s).digest('hex').slice(0, 8);
/** An endpoint's key in slot lists and affinity names: "addr|port". */
const epKey = (ip: string, port: number): string => `${ip}|${port}`;

function add(m: Map<string, Map<string, Elem>>, map: string, e: Elem): void {
  let inner = m.get(map);
  if (!inner) m.set(map, (inner = new Map()));
  inner.set(elemId(e), e);
}

/** A program's elements by map and id, picks expanded (for diffs; a full sync does not need the ids). */
export function indexElems(p: Program): Map<string, Map<string, Elem>> {
  const out = new Map<string, Map<string, Elem>>();
  const index = (map: string, l: Iterable<Elem>) => {
    let m = out.get(map);
    if (!m) out.set(map, (m = new Map()));
    for (const e of l) m.set(elemId(e), e);
  };
  for (const [map, l] of p.elems) index(map, l);
  for (const d of p.picks) index(d.map, pickElems(d));
  return out;
}

/** One destination's endpoint picks: slot i -> endpoint i of `eps`, for one address of the destination (none: a node port). */
export interface PickDest { map: string; addr?: string; proto: L4; port: number; eps: EndpointList }

/** The picks map elements of a destination. */
export function* pickElems(d: PickDest): Iterable<Elem> {
  for (let i = 0; i < d.eps.length; i++) {
    yield d.addr !== undefined
      ? { type: 'pick', addr: d.addr, proto: d.proto, port: d.port, slot: i, epAddr: d.eps.ip(i), epPort: d.eps.port(i) }
      : { type: 'pick', proto: d.proto, port: d.port, slot: i, epAddr: d.eps.ip(i), epPort: d.eps.port(i) };
  }
}

export interface BuildContext {
  /** This node's item (client classes: its pod sources). */
  node: NodeInfo | undefined;
  /** Slot states of this service's chains in the kernel (from the previous program). */
  prevSlots?: Map<string, SlotState>;
}

const sameRoute = (a: Route, b: Route): boolean => a.target === b.target && a.masquerade === b.masquerade;

/** The verdict for packets a destination does not DNAT (filter chains, after DNAT). */
function blockVerdict(rs: Routes, where: string): Verdict | null {
  const blocked = [rs.pod, rs.node, rs.other].filter((r) => !isDnat(r));
  if (blocked.length === 0) return null;
  if (blocked.some((r) => r.target !== blocked[0].target)) {
    throw new Error(`nft: ${where}: client classes with different non-DNAT targets cannot be rendered`);
  }
  return blocked[0].target === Target.DROP ? 'drop' : { goto: SHARED_NAMES.reject };
}

/** Whether the service has a cluster IP of this family (otherwise its program there is empty). */
export const inFamily = (svc: Service, fam: IpFamily): boolean => ofFamily(svc.clusterIps, fam === 'ip' ? IPFamily.IPV4 : IPFamily.IPV6).length > 0;

/** The program of one service in one family; an empty program when the service has no IP of it. */
export function buildProgram(svc: Service, fam: IpFamily, ctx: BuildContext): Program {
  const p = emptyProgram();
  const family = fam === 'ip' ? IPFamily.IPV4 : IPFamily.IPV6;
  const clusterIPs = ofFamily(svc.clusterIps, family);
  if (clusterIPs.length === 0) return p; // not a service of this family
  const externalIPs = ofFamily(svc.externalIps, family);
  const lbIPs = ofFamily(svc.loadBalancerIps, family);
  const pods = podSources(ctx.node, family);
  const affinity = svc.sessionAffinity?.timeoutSeconds ?? 0;
  const id = `${svc.namespace}/${svc.name}`;
  const shard = shardOf(id);
  for (const a of clusterIPs) add(p.shared, SHARED_NAMES.clusterIPs, { type: 'addr', addr: a });
  // Elements by map and id (one per key, the last one wins), except picks: their destinations are
  // kept by key (the last one wins too) and expanded into elements at the end, without ids.
  const elems = new Map<string, Map<string, Elem>>();
  const picks = new Map<string, PickDest>();
  // Slot list key -> the endpoint in each slot (see selectionChain).
  let slotLists: Map<string, EndpointList> | undefined;

  for (const sp of svc.ports) {
    if (sp.family !== family || !sp.port.port) continue;
    const proto = l4(sp.port.protocol);
    const name = `${id}/${proto}/${sp.port.port}`;

    // Endpoint choice for one destination key (a service IP, or the node port): affinity services
    // keep their own chains (rare, small); the others go to a shared pick chain that looks the
    // destination up in a picks map, whose elements this service owns.
    type Dest = { kind: 'vip'; addrs: string[] } | { kind: 'port'; port: number };
    const selectionChain = (target: Target, dest: Dest): string => {
      const local = target === Target.LOCAL;
      const list = pickEndpoints(target, sp.clusterEndpoints, sp.localEndpoints)!;
      if (affinity) {
        const chain = `${local ? 'leps' : 'eps'}-${name}`;
        if (!p.chains.has(chain)) p.chains.set(chain, selection(p, ctx, chain, `${name}${local ? '/local' : ''}`, proto, list, affinity));
        return chain;
      }
      const slotKey = `${local ? 'leps' : 'eps'}-${name}`;
      // A list serves every destination of the port (cluster IP, external IPs, node port): sorted once.
      let slotEps = slotLists?.get(slotKey);
      if (!slotEps) {
        const { eps, keys } = uniqueSorted(list);
        if (eps.length === 0) return shared(p, N_EMPTY, []);
        const prev = ctx.prevSlots?.get(slotKey);
        const bySlot = prev ? denseSlots(keys, prev).bySlot : keys;
        // Slot i's endpoint: the sorted list itself when nothing was placed before (a full sync).
        slotEps = bySlot === keys ? eps : endpointsBySlot(bySlot, keys, eps);
        p.slots.set(slotKey, { bySlot });
        (slotLists ??= new Map()).set(slotKey, slotEps);
      }
      const n = slotEps.length;
      const map = `${dest.kind === 'vip' ? (local ? SHARED_NAMES.picksVipLocal : SHARED_NAMES.picksVip) : (local ? SHARED_NAMES.picksPortLocal : SHARED_NAMES.picksPort)}-${shard}`;
      if (dest.kind === 'vip') for (const addr of dest.addrs) picks.set(`${map}|${addr}|${proto}|${sp.port.port}`, { map, addr, proto, port: sp.port.port, eps: slotEps });
      else picks.set(`${map}||${proto}|${dest.port}`, { map, proto, port: dest.port, eps: slotEps });
      return shared(p, `pick-${dest.kind}-${local ? 'l' : 'c'}-${proto}-${n}-${shard}`, [{ type: 'dnatPick', proto, n, map, key: dest.kind }]);
    };

    // Dispatch of one destination: straight to a selection chain when every client class is treated
    // alike and nothing is masqueraded; otherwise a chain with one rule per class that differs, named
    // after its rules (shared by every destination with the same routes and endpoint count).
    const dispatch = (rs: Routes, dest: Dest): string | null => {
      if (![rs.pod, rs.node, rs.other].some(isDnat)) return null;
      if (sameRoute(rs.pod, rs.other) && sameRoute(rs.node, rs.other) && !rs.other.masquerade) return selectionChain(rs.other.target, dest);
      const rules: Stmt[] = [];
      if (!sameRoute(rs.pod, rs.other)) {
        for (const from of pods) {
          // A pod that is not DNATed must not fall through to the other classes' rules.
          if (isDnat(rs.pod)) rules.push({ type: 'classGoto', from, masq: rs.pod.masquerade, chain: selectionChain(rs.pod.target, dest) });
          else rules.push('cidr' in from ? { type: 'srcCidr', cidr: from.cidr, then: 'return' } : { type: 'iifReturn', iifname: from.iifname, prefix: from.prefix });
        }
      }
      if (!sameRoute(rs.node, rs.other)) {
        if (isDnat(rs.node)) rules.push({ type: 'classGoto', from: 'local', masq: rs.node.masquerade, chain: selectionChain(rs.node.target, dest) });
        else throw new Error(`nft: ${name}: the node class cannot be refused while others are DNATed`);
      }
      if (isDnat(rs.other)) rules.push({ type: 'classGoto', from: 'any', masq: rs.other.masquerade, chain: selectionChain(rs.other.target, dest) });
      return shared(p, dispatchChainName(rules), rules);
    };

    const vips = (addrs: string[], rs: Routes | null): void => {
      if (!rs || addrs.length === 0) return;
      const chain = dispatch(rs, { kind: 'vip', addrs });
      const block = blockVerdict(rs, name);
      for (const addr of addrs) {
        if (chain) add(elems, SHARED_NAMES.vips, { type: 'vip', addr, proto, port: sp.port.port, verdict: { goto: chain } });
        if (block) add(elems, SHARED_NAMES.noEndpoints, { type: 'vip', addr, proto, port: sp.port.port, verdict: block });
      }
    };
    vips(clusterIPs, sp.clusterIp);
    vips(externalIPs, sp.externalIp);
    vips(lbIPs, sp.loadBalancerIp);
    if (sp.nodePort && sp.port.nodePort) {
      const chain = dispatch(sp.nodePort, { kind: 'port', port: sp.port.nodePort });
      const block = blockVerdict(sp.nodePort, name);
      if (chain) add(elems, SHARED_NAMES.nodePorts, { type: 'port', proto, port: sp.port.nodePort, verdict: { goto: chain } });
      if (block) add(elems, SHARED_NAMES.noEndpointNodePorts, { type: 'port', proto, port: sp.port.nodePort, verdict: block });
    }

    // Load-balancer source ranges: a firewall chain per service port, checked before DNAT.
    const allowed = firewallSources(svc, sp);
    if (allowed) {
      const fwName = `fw-${name}`;
      p.chains.set(fwName, [...allowed.map((cidr): Stmt => ({ type: 'srcCidr', cidr, then: 'return' })), { type: 'drop' }]);
      for (const addr of lbIPs) add(elems, SHARED_NAMES.firewall, { type: 'vip', addr, proto, port: sp.port.port, verdict: { goto: fwName } });
    }

    // Hairpin: the endpoints on this node this port may DNAT to. A connection comes back to its own
    // source only when the client is the endpoint, and a pod's packets meet the service rules of its
    // own node only, so endpoints elsewhere never need it (upstream's IPVS mode fills its loop-back
    // set the same way). At 50k services x 10 endpoints this set held all 500k endpoints before.
    for (const list of [sp.clusterEndpoints, sp.localEndpoints]) {
      for (let i = 0; i < list.length; i++) if (list.local(i)) add(p.shared, SHARED_NAMES.hairpin, { type: 'pair', addr: list.ip(i) });
    }
  }
  for (const [map, m] of elems) p.elems.set(map, [...m.values()]);
  for (const d of picks.values()) p.picks.push(d);
  return p;
}

/** The picks map shard of a service (FNV-1a of namespace/name): cheap and stable across runs. */
export function shardOf(id: string): number {
  return fnv1a(id) % PICK_SHARDS;
}

/**
 * The name of a class-dispatch chain: a hash of its rules. Most services share a few rule sets, so
 * names are cached by a cheap key of the rules (the hash input stays the rules' JSON).
 */
const dispatchNames = new Map<string, string>();
function dispatchChainName(rules: Stmt[]): string {
  let key = '';
  for (const r of rules) key += r.type === 'classGoto' ? `g|${typeof r.from === 'string' ? r.from : podSourceText(r.from)}|${r.masq}|${r.chain};` : `${JSON.stringify(r)};`;
  let name = dispatchNames.get(key);
  if (name === undefined) {
    name = `cls-${short(JSON.stringify(rules))}`;
    if (dispatchNames.size >= 4096) dispatchNames.clear();
    dispatchNames.set(key, name);
  }
  return name;
}

/** A chain shared by content: equal names have equal rules. */
function shared(p: Program, chain: string, rules: Stmt[]): string {
  p.sharedChains.set(chain, rules);
  return chain;
}

/** The chain of destinations whose endpoint list is empty (packets fall through, not DNATed). */
const N_EMPTY = 'pick-none';

/** The endpoints sorted by key without duplicates, and their keys ("addr|port"). */
function uniqueSorted(list: EndpointList): { eps: EndpointList; keys: string[] } {
  // The model gives most lists sorted and without duplicates already: check that first.
  const keys = new Array<string>(list.length);
  let sorted = true;
  for (let i = 0; i < list.length; i++) {
    keys[i] = epKey(list.ip(i), list.port(i));
    if (i > 0 && keys[i] <= keys[i - 1]) { sorted = false; break; }
  }
  if (sorted) return { eps: list, keys };
  // Keys computed once (a comparator building them allocates two strings per comparison).
  const byKey = new Map(list.map((e) => [epKey(e.ip, e.port), e]));
  const sortedKeys = [...byKey.keys()].sort();
  return { eps: EndpointList.from(sortedKeys.map((k) => byKey.get(k)!)), keys: sortedKeys };
}

/** The endpoint in each slot, from the slot keys and the sorted endpoints with their keys. */
function endpointsBySlot(bySlot: string[], keys: string[], eps: EndpointList): EndpointList {
  const byKey = new Map<string, Endpoint>();
  for (let i = 0; i < keys.length; i++) byKey.set(keys[i], eps.at(i)!);
  return EndpointList.from(bySlot.map((k) => byKey.get(k)!));
}


/** ClientIP affinity: one chain + one timeout set per endpoint (rare, small). */
function selection(p: Program, _ctx: BuildContext, chain: string, name: string, proto: L4, list: EndpointList, affinity: number): Stmt[] {
  void chain;
  const eps = uniqueSorted(list).eps.toArray();
  if (eps.length === 0) return [];
  {
    const out: Stmt[] = [];
    for (const e of eps) {
      const h = short(epKey(e.ip, e.port));
      out.push({ type: 'affinityGoto', set: `aff-${name}/${h}/${affinity}`, chain: `aep-${name}/${h}` });
    }
    eps.forEach((e, i) => {
      const target = `aep-${name}/${short(epKey(e.ip, e.port))}`;
      out.push(i === eps.length - 1 ? { type: 'goto', chain: target } : { type: 'randomGoto', mod: eps.length - i, chain: target });
    });
    for (const e of eps) {
      const h = short(epKey(e.ip, e.port));
      // The timeout is part of the set's name: a new timeout makes a new set (and rewrites the rules).
      const set = `aff-${name}/${h}/${affinity}`;
      p.sets.set(set, affinity);
      p.chains.set(`aep-${name}/${h}`, [{ type: 'affinityUpdate', set }, { type: 'dnat', proto, addr: e.ip, port: e.port }]);
    }
    return out;
  }
  return [];
}

export type { ServicePort };
