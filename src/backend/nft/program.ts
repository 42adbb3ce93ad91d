// What one service contributes to one family's table: its chains, its affinity sets, its elements
// in the shared maps, and its endpoint slot ranges. Pure function of the ENLS service, the options and
// the previous slot assignment (for stability). The ENLS already applied every Kubernetes rule: this
// code only turns "internal" / "external" endpoint lists and hasEndpoints into objects.
import * as crypto from 'node:crypto';
import { Protocol, type Endpoint, type PortEndpoints, type Service } from '../../model/enls';
import { assignSlots, shardOf, type SlotAllocator, type SlotState } from './slots';
import { N, famOf, type Elem, type Fam, type L4, type Stmt, type Verd } from './types';

export interface ProgramOptions {
  clusterCIDRs: string[];
  masqueradeAll: boolean;
}

export interface Program {
  /** Chains owned by this service (name -> rules). */
  chains: Map<string, Stmt[]>;
  /** Affinity sets (name -> timeout seconds). */
  sets: Map<string, number>;
  /** Elements in shared maps: map name -> element id -> element. */
  elems: Map<string, Map<string, Elem>>;
  /** Slot ranges, by owning chain. */
  slots: Map<string, SlotState>;
  /** Endpoint addresses (for the hairpin set; reference counted by the caller). */
  hairpin: Set<string>;
  /** UDP service ports, for conntrack clean-up: destinations and endpoints. */
  udp: UdpPort[];
}

export interface UdpPort {
  /** "<chain>" identity of the service port. */
  id: string;
  /** Service IPs (cluster, external, LB) with the service port, and node port (0 if none). */
  vips: string[];
  port: number;
  nodePort: number;
  /** Endpoints ("addr|port") reachable, internal or external. */
  endpoints: string[];
  /** True when traffic is DNATed somewhere (some endpoint list non-empty). */
  served: boolean;
}

export function emptyProgram(): Program {
  return { chains: new Map(), sets: new Map(), elems: new Map(), slots: new Map(), hairpin: new Set(), udp: [] };
}

export const l4 = (p: Protocol): L4 => (p === Protocol.UDP ? 'udp' : p === Protocol.SCTP ? 'sctp' : 'tcp');

export function elemId(e: Elem): string {
  switch (e.t) {
    case 'vip': return `${e.addr}|${e.proto}|${e.port}`;
    case 'port': return `${e.proto}|${e.port}`;
    case 'slot': return String(e.slot);
    case 'pair': return e.addr;
  }
}

/** Same element content (key and data). */
export function sameElem(a: Elem, b: Elem): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const short = (s: string): string => crypto.createHash('sha1').update(s).digest('hex').slice(0, 8);
const epKey = (e: Endpoint): string => `${e.ip}|${e.port}`;

function uniqueEndpoints(list: Endpoint[], fam: Fam): Endpoint[] {
  const seen = new Set<string>();
  const out: Endpoint[] = [];
  for (const e of list) {
    if (!e.ip || famOf(e.ip) !== fam) continue;
    const k = epKey(e);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(e);
  }
  return out.sort((a, b) => (epKey(a) < epKey(b) ? -1 : epKey(a) > epKey(b) ? 1 : 0));
}

function add(p: Program, map: string, e: Elem): void {
  let m = p.elems.get(map);
  if (!m) p.elems.set(map, (m = new Map()));
  m.set(elemId(e), e);
}

function sameList(a: Endpoint[], b: Endpoint[]): boolean {
  return a.length === b.length && a.every((e, i) => epKey(e) === epKey(b[i]));
}

export interface BuildContext {
  opts: ProgramOptions;
  alloc: SlotAllocator;
  /** Slot states of this service's chains in the kernel (from the previous program). */
  prevSlots?: Map<string, SlotState>;
}

/** The program of one service in one family; an empty program when the service has no IP of it. */
export function buildProgram(svc: Service, fam: Fam, ctx: BuildContext): Program {
  const p = emptyProgram();
  const pick = (s: { v4?: string[] | null; v6?: string[] | null } | null | undefined): string[] =>
    ((fam === 'ip' ? s?.v4 : s?.v6) ?? []).filter((a) => a && famOf(a) === fam);
  const clusterIPs = pick(svc.clusterIps);
  if (clusterIPs.length === 0) return p; // not a service of this family
  const extIPs = [...pick(svc.externalIps), ...pick(svc.loadBalancerIps)];
  const lbIPs = pick(svc.loadBalancerIps);
  const cidrs = ctx.opts.clusterCIDRs.filter((c) => famOf(c) === fam);
  const etpLocal = svc.externalTrafficPolicy === 'Local';
  const affinity = svc.sessionAffinity ? Math.max(1, svc.sessionAffinity.timeoutSeconds || 10800) : 0;
  const ranges = (svc.loadBalancerSourceRanges ?? []).filter((r: string) => famOf(r) === fam);
  const id = `${svc.namespace}/${svc.name}`;

  for (const pe of (svc.ports ?? []) as PortEndpoints[]) {
    const port = pe.port;
    if (!port || !port.port) continue;
    const proto = l4(port.protocol);
    const sp = `${id}/${proto}/${port.port}`;
    const intName = `svc-${sp}`;
    const extName = `ext-${sp}`;
    const internal = uniqueEndpoints((pe.internal ?? []) as Endpoint[], fam);
    const external = svc.external ? uniqueEndpoints((pe.external ?? []) as Endpoint[], fam) : [];
    const noEp: Verd = pe.hasEndpoints ? 'drop' : { goto: N.reject };

    // Endpoint selection: affinity services get one chain + one timeout set per endpoint (rare,
    // small); the others DNAT through their slot range of the shared endpoints map (one rule).
    const selection = (chain: string, eps: Endpoint[]): Stmt[] => {
      if (affinity) {
        const out: Stmt[] = [];
        for (const e of eps) {
          const h = short(epKey(e));
          out.push({ s: 'affinityGoto', set: `aff-${sp}/${h}/${affinity}`, chain: `aep-${sp}/${h}` });
        }
        eps.forEach((e, i) => {
          const target = `aep-${sp}/${short(epKey(e))}`;
          out.push(i === eps.length - 1 ? { s: 'goto', chain: target } : { s: 'randomGoto', mod: eps.length - i, chain: target });
        });
        for (const e of eps) {
          const h = short(epKey(e));
          // The timeout is part of the set's name: a new timeout makes a new set (and rewrites the rules).
          const set = `aff-${sp}/${h}/${affinity}`;
          p.sets.set(set, affinity);
          p.chains.set(`aep-${sp}/${h}`, [{ s: 'affinityUpdate', set }, { s: 'dnat', proto, addr: e.ip, port: e.port }]);
        }
        return out;
      }
      if (eps.length === 1) return [{ s: 'dnat', proto, addr: eps[0].ip, port: eps[0].port }];
      const slots = assignSlots(eps.map(epKey), ctx.prevSlots?.get(chain), ctx.alloc);
      p.slots.set(chain, slots);
      const map = `${N.endpoints}-${shardOf(slots.base)}`;
      slots.bySlot.forEach((k, i) => {
        const [addr, ps] = k.split('|');
        add(p, map, { t: 'slot', slot: slots.base + i, addr, port: Number(ps) });
      });
      return [{ s: 'dnatSlots', proto, n: eps.length, base: slots.base, map }];
    };

    for (const e of [...internal, ...external]) p.hairpin.add(e.ip);

    // Cluster IPs.
    const hasInt = internal.length > 0;
    if (hasInt) {
      const rules: Stmt[] = [];
      if (ctx.opts.masqueradeAll) rules.push({ s: 'markMasq' });
      else if (cidrs.length > 0) rules.push({ s: 'jump', chain: N.masqOutside });
      rules.push(...selection(intName, internal));
      p.chains.set(intName, rules);
      for (const a of clusterIPs) add(p, N.vips, { t: 'vip', addr: a, proto, port: port.port, v: { goto: intName } });
    } else {
      for (const a of clusterIPs) add(p, N.noEndpoints, { t: 'vip', addr: a, proto, port: port.port, v: noEp });
    }

    // External IPs, load-balancer IPs, node ports.
    if (svc.external && (extIPs.length > 0 || port.nodePort)) {
      if (external.length > 0) {
        const rules: Stmt[] = [];
        if (etpLocal) {
          // Pods and the node itself reach the service through its cluster-wide endpoints.
          if (hasInt) {
            for (const c of cidrs) rules.push({ s: 'srcCidr', cidr: c, then: { goto: intName } });
            rules.push({ s: 'localSrcMasqGoto', chain: intName });
          }
          rules.push(...selection(extName, external));
        } else {
          rules.push({ s: 'markMasq' });
          if (hasInt && sameList(internal, external)) rules.push({ s: 'goto', chain: intName });
          else rules.push(...selection(extName, external));
        }
        p.chains.set(extName, rules);
        for (const a of extIPs) add(p, N.vips, { t: 'vip', addr: a, proto, port: port.port, v: { goto: extName } });
        if (port.nodePort) add(p, N.nodePorts, { t: 'port', proto, port: port.nodePort, v: { goto: extName } });
      } else {
        const v: Verd = pe.hasEndpoints ? 'drop' : { goto: N.reject };
        for (const a of extIPs) add(p, N.noEndpoints, { t: 'vip', addr: a, proto, port: port.port, v });
        if (port.nodePort) add(p, N.noEndpointNodePorts, { t: 'port', proto, port: port.nodePort, v });
      }
      // Load-balancer source ranges: a firewall chain per service port, checked before DNAT.
      if (ranges.length > 0 && lbIPs.length > 0) {
        const fwName = `fw-${sp}`;
        p.chains.set(fwName, [...ranges.map((cidr: string): Stmt => ({ s: 'srcCidr', cidr, then: 'return' })), { s: 'drop' }]);
        for (const a of lbIPs) add(p, N.firewall, { t: 'vip', addr: a, proto, port: port.port, v: { goto: fwName } });
      }
    }

    if (proto === 'udp') {
      p.udp.push({
        id: sp,
        vips: [...clusterIPs, ...(svc.external ? extIPs : [])],
        port: port.port,
        nodePort: svc.external ? port.nodePort : 0,
        endpoints: [...new Set([...internal, ...external].map(epKey))],
        served: internal.length + external.length > 0,
      });
    }
  }
  return p;
}
