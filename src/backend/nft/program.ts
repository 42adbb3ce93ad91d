// What one service contributes to one family's table: its chains, its affinity sets, its elements in
// the shared maps and sets, and its endpoint slot ranges. A pure function of the ENLS service, the
// node item and the previous slot assignment (for stability). It renders the model's routes (target
// and masquerade per destination and client class); it decides no Kubernetes rule itself.
import * as crypto from 'node:crypto';
import { IPFamily, Protocol, Target, ofFamily, type Endpoint, type NodeInfo, type Route, type Routes, type Service, type ServicePort } from '../../model/enls';
import { assignSlots, shardOf, type SlotAllocator, type SlotState } from './slots';
import { N, type Elem, type Fam, type L4, type Stmt, type Verd } from './types';

export interface Program {
  /** Chains owned by this service (name -> rules). */
  chains: Map<string, Stmt[]>;
  /** Affinity sets (name -> timeout seconds). */
  sets: Map<string, number>;
  /** Elements in shared maps: map name -> element id -> element. */
  elems: Map<string, Map<string, Elem>>;
  /** Elements of shared sets that several services may hold (reference counted by the caller): set -> ids. */
  shared: Map<string, Map<string, Elem>>;
  /** Slot ranges, by owning chain. */
  slots: Map<string, SlotState>;
}

export function emptyProgram(): Program {
  return { chains: new Map(), sets: new Map(), elems: new Map(), shared: new Map(), slots: new Map() };
}

export const l4 = (p: Protocol): L4 => (p === Protocol.UDP ? 'udp' : p === Protocol.SCTP ? 'sctp' : 'tcp');

export function elemId(e: Elem): string {
  switch (e.t) {
    case 'vip': return `${e.addr}|${e.proto}|${e.port}`;
    case 'port': return `${e.proto}|${e.port}`;
    case 'slot': return String(e.slot);
    case 'pair': return e.addr;
    case 'addr': return e.addr;
  }
}

/** Same element content (key and data). */
export function sameElem(a: Elem, b: Elem): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const short = (s: string): string => crypto.createHash('sha1').update(s).digest('hex').slice(0, 8);
const epKey = (e: Endpoint): string => `${e.ip}|${e.port}`;

function add(m: Map<string, Map<string, Elem>>, map: string, e: Elem): void {
  let inner = m.get(map);
  if (!inner) m.set(map, (inner = new Map()));
  inner.set(elemId(e), e);
}

export interface BuildContext {
  alloc: SlotAllocator;
  /** This node's item (client classes: pod CIDRs). */
  node: NodeInfo | undefined;
  /** Slot states of this service's chains in the kernel (from the previous program). */
  prevSlots?: Map<string, SlotState>;
}

const isDnat = (r: Route): boolean => r.target === Target.CLUSTER || r.target === Target.LOCAL;
const sameRoute = (a: Route, b: Route): boolean => a.target === b.target && a.masquerade === b.masquerade;

/** The verdict for packets a destination does not DNAT (filter chains, after DNAT). */
function blockVerdict(rs: Routes, where: string): Verd | null {
  const blocked = [rs.pod, rs.node, rs.other].filter((r) => !isDnat(r));
  if (blocked.length === 0) return null;
  if (blocked.some((r) => r.target !== blocked[0].target)) {
    throw new Error(`nft: ${where}: client classes with different non-DNAT targets cannot be rendered`);
  }
  return blocked[0].target === Target.DROP ? 'drop' : { goto: N.reject };
}

/** The program of one service in one family; an empty program when the service has no IP of it. */
export function buildProgram(svc: Service, fam: Fam, ctx: BuildContext): Program {
  const p = emptyProgram();
  const family = fam === 'ip' ? IPFamily.IPV4 : IPFamily.IPV6;
  const clusterIPs = ofFamily(svc.clusterIps, family);
  if (clusterIPs.length === 0) return p; // not a service of this family
  const externalIPs = ofFamily(svc.externalIps, family);
  const lbIPs = ofFamily(svc.loadBalancerIps, family);
  const allowed = ofFamily(svc.loadBalancerAllowedSources, family);
  const podCidrs = ctx.node ? ofFamily(ctx.node.podCidrs, family) : [];
  const affinity = svc.sessionAffinity?.timeoutSeconds ?? 0;
  const id = `${svc.namespace}/${svc.name}`;
  for (const a of clusterIPs) add(p.shared, N.clusterIPs, { t: 'addr', addr: a });

  for (const sp of svc.ports) {
    if (sp.family !== family || !sp.port.port) continue;
    const proto = l4(sp.port.protocol);
    const name = `${id}/${proto}/${sp.port.port}`;

    // Endpoint selection chains, created only when some route uses them.
    const selectionChain = (target: Target): string => {
      const local = target === Target.LOCAL;
      const chain = `${local ? 'leps' : 'eps'}-${name}`;
      if (!p.chains.has(chain)) p.chains.set(chain, selection(p, ctx, chain, `${name}${local ? '/local' : ''}`, proto, local ? sp.localEndpoints : sp.clusterEndpoints, affinity));
      return chain;
    };

    // Dispatch of one destination: straight to a selection chain when every client class is treated
    // alike and nothing is masqueraded; otherwise a chain with one rule per class that differs.
    const dispatch = (rs: Routes, prefix: string): string | null => {
      if (![rs.pod, rs.node, rs.other].some(isDnat)) return null;
      if (sameRoute(rs.pod, rs.other) && sameRoute(rs.node, rs.other) && !rs.other.masquerade) return selectionChain(rs.other.target);
      const chain = `${prefix}-${name}`;
      const rules: Stmt[] = [];
      if (podCidrs.length > 0 && !sameRoute(rs.pod, rs.other)) {
        for (const cidr of podCidrs) {
          // A pod that is not DNATed must not fall through to the other classes' rules.
          rules.push(isDnat(rs.pod) ? { s: 'classGoto', from: { cidr }, masq: rs.pod.masquerade, chain: selectionChain(rs.pod.target) } : { s: 'srcCidr', cidr, then: 'return' });
        }
      }
      if (!sameRoute(rs.node, rs.other)) {
        if (isDnat(rs.node)) rules.push({ s: 'classGoto', from: 'local', masq: rs.node.masquerade, chain: selectionChain(rs.node.target) });
        else throw new Error(`nft: ${name}: the node class cannot be refused while others are DNATed`);
      }
      if (isDnat(rs.other)) rules.push({ s: 'classGoto', from: 'any', masq: rs.other.masquerade, chain: selectionChain(rs.other.target) });
      const prev = p.chains.get(chain);
      if (prev && JSON.stringify(prev) !== JSON.stringify(rules)) throw new Error(`nft: ${name}: chain ${chain} rendered twice differently`);
      p.chains.set(chain, rules);
      return chain;
    };

    const vips = (addrs: string[], rs: Routes | null, prefix: string): void => {
      if (!rs || addrs.length === 0) return;
      const chain = dispatch(rs, prefix);
      const block = blockVerdict(rs, name);
      for (const addr of addrs) {
        if (chain) add(p.elems, N.vips, { t: 'vip', addr, proto, port: sp.port.port, v: { goto: chain } });
        if (block) add(p.elems, N.noEndpoints, { t: 'vip', addr, proto, port: sp.port.port, v: block });
      }
    };
    vips(clusterIPs, sp.clusterIp, 'cip');
    // External destinations usually share their routes: one chain serves them all.
    const ext = sp.nodePort ?? sp.loadBalancerIp ?? sp.externalIp;
    const prefixFor = (rs: Routes | null, kind: string) => (rs && ext && JSON.stringify(rs) === JSON.stringify(ext) ? 'ext' : kind);
    vips(externalIPs, sp.externalIp, prefixFor(sp.externalIp, 'eip'));
    vips(lbIPs, sp.loadBalancerIp, prefixFor(sp.loadBalancerIp, 'lb'));
    if (sp.nodePort && sp.port.nodePort) {
      const chain = dispatch(sp.nodePort, prefixFor(sp.nodePort, 'np'));
      const block = blockVerdict(sp.nodePort, name);
      if (chain) add(p.elems, N.nodePorts, { t: 'port', proto, port: sp.port.nodePort, v: { goto: chain } });
      if (block) add(p.elems, N.noEndpointNodePorts, { t: 'port', proto, port: sp.port.nodePort, v: block });
    }

    // Load-balancer source ranges: a firewall chain per service port, checked before DNAT.
    if (sp.loadBalancerFirewall && allowed.length > 0 && lbIPs.length > 0) {
      const fwName = `fw-${name}`;
      p.chains.set(fwName, [...allowed.map((cidr): Stmt => ({ s: 'srcCidr', cidr, then: 'return' })), { s: 'drop' }]);
      for (const addr of lbIPs) add(p.elems, N.firewall, { t: 'vip', addr, proto, port: sp.port.port, v: { goto: fwName } });
    }

    // Hairpin: every endpoint this port may DNAT to.
    for (const e of [...sp.clusterEndpoints, ...sp.localEndpoints]) add(p.shared, N.hairpin, { t: 'pair', addr: e.ip });
  }
  return p;
}

/**
 * Endpoint selection: affinity services get one chain + one timeout set per endpoint (rare, small);
 * the others DNAT through their slot range of the shared endpoints map (one rule).
 */
function selection(p: Program, ctx: BuildContext, chain: string, name: string, proto: L4, list: Endpoint[], affinity: number): Stmt[] {
  const eps = [...new Map(list.map((e) => [epKey(e), e])).values()].sort((a, b) => (epKey(a) < epKey(b) ? -1 : epKey(a) > epKey(b) ? 1 : 0));
  if (eps.length === 0) return [];
  if (affinity) {
    const out: Stmt[] = [];
    for (const e of eps) {
      const h = short(epKey(e));
      out.push({ s: 'affinityGoto', set: `aff-${name}/${h}/${affinity}`, chain: `aep-${name}/${h}` });
    }
    eps.forEach((e, i) => {
      const target = `aep-${name}/${short(epKey(e))}`;
      out.push(i === eps.length - 1 ? { s: 'goto', chain: target } : { s: 'randomGoto', mod: eps.length - i, chain: target });
    });
    for (const e of eps) {
      const h = short(epKey(e));
      // The timeout is part of the set's name: a new timeout makes a new set (and rewrites the rules).
      const set = `aff-${name}/${h}/${affinity}`;
      p.sets.set(set, affinity);
      p.chains.set(`aep-${name}/${h}`, [{ s: 'affinityUpdate', set }, { s: 'dnat', proto, addr: e.ip, port: e.port }]);
    }
    return out;
  }
  if (eps.length === 1) return [{ s: 'dnat', proto, addr: eps[0].ip, port: eps[0].port }];
  const slots = assignSlots(eps.map(epKey), ctx.prevSlots?.get(chain), ctx.alloc);
  p.slots.set(chain, slots);
  const map = `${N.endpoints}-${shardOf(slots.base)}`;
  slots.bySlot.forEach((k, i) => {
    const [addr, ps] = [k.slice(0, k.lastIndexOf('|')), k.slice(k.lastIndexOf('|') + 1)];
    add(p.elems, map, { t: 'slot', slot: slots.base + i, addr, port: Number(ps) });
  });
  return [{ s: 'dnatSlots', proto, n: eps.length, base: slots.base, map }];
}

export type { ServicePort };
