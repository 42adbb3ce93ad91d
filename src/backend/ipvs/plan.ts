// What one ENLS service asks of the kernel in IPVS mode: a pure function of the service, this node's
// addresses and the flags. It renders the model's routes; it decides no Kubernetes rule itself.
//
// IPVS picks a real server by destination (address, protocol, port) or by firewall mark; it cannot
// tell client classes apart, drop, reject or masquerade. So per destination:
//   - a virtual server on each address (cluster, external, load-balancer IPs on kube-ipvs0; node ports
//     on the node's addresses), its real servers being the endpoints of the route most classes take;
//   - when DNATed classes disagree on the endpoints (externalTrafficPolicy Local: pods and the node go to
//     the Cluster endpoints, outside clients to this node's), the odd class is steered by a firewall mark
//     to a mark-keyed virtual server holding its endpoints;
//   - per class, an action for the nft companion table: pass, masquerade, mark, drop or reject.
import { IPFamily, Protocol, Target, ofFamily, EndpointList, type NodeInfo, type Routes, type Service, type ServicePort } from '../../model/enls';
import { firewallSources, isDnat, nodePortAddresses, pickEndpoints } from '../../model/views';
import type { IpvsProtocol } from '../../native/ipvs';
import type { IpFamily } from '../../native/nft-expr';

export type { IpFamily } from '../../native/nft-expr';
export type ClassName = 'pod' | 'node' | 'other';
export const CLASSES: ClassName[] = ['pod', 'node', 'other'];

/** What the companion nft table does with a new connection of one class to one destination. */
export interface Action {
  kind: 'pass' | 'drop' | 'reject';
  /** Source-NAT it to the node's address (conntrack mark bit, read in nat postrouting). */
  masq: boolean;
  /** Steer it to the mark-keyed virtual server with this mark. */
  fwmark?: number;
}
export type ClassActions = Record<ClassName, Action>;

/** One destination (address, protocol, port) and what happens there. */
export interface DestPlan {
  fam: IpFamily;
  addr: string;
  proto: IpvsProtocol;
  port: number;
  actions: ClassActions;
  /** Load-balancer source ranges: only these sources pass (null: no firewall). */
  allowed: string[] | null;
  /** The address belongs on kube-ipvs0 (cluster, external, load-balancer IPs; not node addresses). */
  bind: boolean;
}

/** A virtual server and its real servers. `fwmark` servers are keyed by mark, the others by destination. */
export interface VirtualPlan {
  fam: IpFamily;
  addr: string;
  proto: IpvsProtocol;
  port: number;
  fwmark?: number;
  persistence: number;
  endpoints: Array<{ ip: string; port: number }>;
}

export interface ServicePlan {
  dests: DestPlan[];
  virtuals: VirtualPlan[];
  /** Endpoint addresses on this node a connection may be sent back to its own source through (hairpin masquerade). */
  endpointIPs: Array<{ fam: IpFamily; ip: string }>;
}

export interface PlanContext {
  node: NodeInfo | undefined;
  /** This node's addresses (every link but kube-ipvs0 and loopback), for node ports. */
  localAddrs: string[];
  /** A stable mark per (service port, family, target), allocated by the caller. */
  markFor(id: string): number;
}

const l4 = (p: Protocol): IpvsProtocol => (p === Protocol.UDP ? 'udp' : p === Protocol.SCTP ? 'sctp' : 'tcp');
/** The real servers of a DNAT target: its endpoints, each (address, port) once, sorted. */
function endpointsOf(sp: ServicePort, target: Target): Array<{ ip: string; port: number }> {
  const list: EndpointList = pickEndpoints(target, sp.clusterEndpoints, sp.localEndpoints) ?? EndpointList.EMPTY;
  const seen = new Map<string, { ip: string; port: number }>();
  for (const e of list) seen.set(`${e.ip}|${e.port}`, { ip: e.ip, port: e.port });
  return [...seen.values()].sort((a, b) => (a.ip === b.ip ? a.port - b.port : a.ip < b.ip ? -1 : 1));
}

const sameSet = (a: Array<{ ip: string; port: number }>, b: Array<{ ip: string; port: number }>): boolean =>
  a.length === b.length && a.every((e, i) => e.ip === b[i].ip && e.port === b[i].port);

/** Node port addresses: this node's local addresses of the family inside NodeInfo.nodePortAddresses. */
export const nodePortAddrs = (node: NodeInfo | undefined, fam: IpFamily, localAddrs: string[]): string[] =>
  nodePortAddresses(node, fam === 'ip6' ? IPFamily.IPV6 : IPFamily.IPV4, localAddrs);

export function planService(svc: Service, ctx: PlanContext & { nodePortAddrs: Record<IpFamily, string[]> }): ServicePlan {
  const plan: ServicePlan = { dests: [], virtuals: [], endpointIPs: [] };
  const persistence = svc.sessionAffinity?.timeoutSeconds ?? 0;
  const id = `${svc.namespace}/${svc.name}`;
  const ips = new Set<string>();
  for (const sp of svc.ports) {
    if (!sp.port.port || (sp.family !== IPFamily.IPV4 && sp.family !== IPFamily.IPV6)) continue;
    const fam: IpFamily = sp.family === IPFamily.IPV6 ? 'ip6' : 'ip';
    const proto = l4(sp.port.protocol);
    const portId = `${id}/${fam}/${proto}/${sp.port.port}`;

    // One destination kind (cluster IPs, ...) with its routes, on its addresses and port.
    const destination = (addrs: string[], rs: Routes | null, port: number, opts: { bind: boolean; firewall: string[] | null }): void => {
      if (!rs || addrs.length === 0) return;
      const dnat = CLASSES.filter((c) => isDnat(rs[c]));
      // The virtual server serves the target of "other" when it is DNATed, else of the first DNATed class.
      const primary = dnat.includes('other') ? rs.other.target : dnat.length ? rs[dnat[0]].target : null;
      const primaryEps = primary === null ? [] : endpointsOf(sp, primary);
      const actions = {} as ClassActions;
      for (const c of CLASSES) {
        const r = rs[c];
        if (!isDnat(r)) { actions[c] = { kind: r.target === Target.DROP ? 'drop' : 'reject', masq: false }; continue; }
        const eps = endpointsOf(sp, r.target);
        const a: Action = { kind: 'pass', masq: r.masquerade };
        if (!sameSet(eps, primaryEps)) {
          // A mark-keyed virtual server for this target, shared by every destination of the port.
          const markId = `${portId}/${r.target === Target.LOCAL ? 'local' : 'cluster'}`;
          a.fwmark = ctx.markFor(markId);
          if (!plan.virtuals.some((v) => v.fwmark === a.fwmark)) {
            plan.virtuals.push({ fam, addr: fam === 'ip' ? '0.0.0.0' : '::', proto, port: 0, fwmark: a.fwmark, persistence, endpoints: eps });
          }
        }
        actions[c] = a;
      }
      for (const addr of addrs) {
        plan.dests.push({ fam, addr, proto, port, actions, allowed: opts.firewall, bind: opts.bind });
        if (primary !== null) plan.virtuals.push({ fam, addr, proto, port, persistence, endpoints: primaryEps });
      }
    };

    destination(ofFamily(svc.clusterIps, sp.family), sp.clusterIp, sp.port.port, { bind: true, firewall: null });
    destination(ofFamily(svc.externalIps, sp.family), sp.externalIp, sp.port.port, { bind: true, firewall: null });
    destination(ofFamily(svc.loadBalancerIps, sp.family), sp.loadBalancerIp, sp.port.port, { bind: true, firewall: firewallSources(svc, sp) });
    if (sp.port.nodePort) destination(ctx.nodePortAddrs[fam], sp.nodePort, sp.port.nodePort, { bind: false, firewall: null });

    // Only endpoints on this node can be their own client here (as upstream's KUBE-LOOP-BACK set).
    for (const e of [...sp.clusterEndpoints, ...sp.localEndpoints]) {
      if (e.local && !ips.has(e.ip)) { ips.add(e.ip); plan.endpointIPs.push({ fam, ip: e.ip }); }
    }
  }
  return plan;
}

/** Short name of an action, used in the companion table's chain names ("pass", "masq", "fwm65537-masq", "drop"). */
export function actionName(a: Action): string {
  if (a.kind !== 'pass') return a.kind;
  const base = a.fwmark !== undefined ? `fwm${a.fwmark}` : 'pass';
  return a.masq ? (base === 'pass' ? 'masq' : `${base}-masq`) : base;
}

/** True when the destination needs nothing from the companion table but being accepted. */
export const passesAll = (a: ClassActions): boolean => CLASSES.every((c) => actionName(a[c]) === 'pass');
