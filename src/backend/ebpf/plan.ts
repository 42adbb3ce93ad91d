// What one ENLS service asks of the socket load balancer: service-map entries (slot 0 plus one slot per
// backend) and backends, for every cluster IP, external IP and load-balancer IP of every service port,
// and its node port on each of the node's addresses where node ports answer (the Node object's
// addresses inside NodeInfo.nodePortAddresses). The socket LB acts at connect() of a process of this
// node, so it reads the "pod" client class route (what a pod of this node gets; for ClusterIPs the
// node class says the same). Traffic from other hosts is not a socket operation: the nft part of
// `--to ebpf` serves it.
//   CLUSTER -> the port's cluster endpoints, LOCAL -> its local endpoints (none: refused);
//   REJECT -> refused (ECONNREFUSED at once);
//   DROP -> refused too: a socket-level program cannot make a connect() hang the way a dropped SYN
//   does, and failing at once is kinder than a timeout.
import { IPFamily, Protocol, Target, ofFamily, type Endpoint, type EndpointList, type NodeInfo, type Route, type Routes, type Service } from '../../model/enls';
import { isDnat, nodePortAddresses, pickEndpoints } from '../../model/views';
import { BackendWriter, FLAG_REFUSE, SvcKeyWriter, svcValueBytes } from './maps';

export const IPPROTO: Record<number, number> = { [Protocol.TCP]: 6, [Protocol.UDP]: 17, [Protocol.SCTP]: 132 };

export interface Ids {
  /**
   * A backend id for an endpoint of one service port, named by its endpoint key (BackendWriter): stable
   * while it stays, never reused. Asked once per endpoint key and plan.
   */
  backend(endpointKey: string): number;
  /** A service id (affinity key) for one service address (its slot 0 key). */
  service(headKey: string): number;
}

/** What a plan writes into: a Map, or a view of one that records what was written. */
export interface PlanMap<K, V> { has(k: K): boolean; set(k: K, v: V): unknown }

/** A plan's entries; keys and values are byte strings (maps.ts). */
export interface EbpfPlan {
  /** Slot 0 of each service address: key -> svc value (count, affinity, service id, flags). */
  heads: PlanMap<string, string>;
  /** Slots >= 1: key -> backend id. */
  slots: PlanMap<string, number>;
  /** Backend id -> encoded backend. */
  backends: PlanMap<number, string>;
}

/** An EbpfPlan in plain Maps: a new plan, the dataplane's desired maps, the kernel's as dumped. */
export interface PlanMaps { heads: Map<string, string>; slots: Map<string, number>; backends: Map<number, string> }

export const newPlan = (): PlanMaps => ({ heads: new Map(), slots: new Map(), backends: new Map() });

/** The endpoints a route sends to, null when the route refuses, undefined when unspecified (not a socket-LB destination). */
function routeEndpoints(route: Route, cluster: Endpoint[], local: Endpoint[]): Endpoint[] | null | undefined {
  if (isDnat(route)) return pickEndpoints(route.target, cluster, local);
  return route.target === Target.REJECT || route.target === Target.DROP ? null : undefined;
}

/** The node's addresses of a family where node ports answer, never loopback ones (none without a node item). */
export const nodePortAddrs = (node: NodeInfo | undefined, family: IPFamily): string[] => nodePortAddresses(node, family, node?.addresses ?? []);

const keys = new SvcKeyWriter();
const backend = new BackendWriter();

/** One service port's destination the socket LB answers: its addresses, port, and the endpoints (null: refused). */
interface Dest { proto: number; addrs: string[]; port: number; eps: Endpoint[] | null; sp: Service['ports'][number] }

/** The socket-LB destinations of a service, in the order planService writes them. */
function* destinations(svc: Service, node: NodeInfo | undefined): Generator<Dest> {
  for (const sp of svc.ports) {
    const proto = IPPROTO[sp.port.protocol];
    if (!proto || sp.port.port <= 0) continue;
    const fam = sp.family === IPFamily.IPV6 ? 6 : 4;
    const ofFam = (eps: EndpointList) => eps.filter((e) => e.ip.includes(':') === (fam === 6));
    const cluster = ofFam(sp.clusterEndpoints), local = ofFam(sp.localEndpoints);
    const dests: Array<[string[], Routes | null, number]> = [
      [ofFamily(svc.clusterIps, sp.family), sp.clusterIp, sp.port.port],
      [ofFamily(svc.externalIps, sp.family), sp.externalIp, sp.port.port],
      [ofFamily(svc.loadBalancerIps, sp.family), sp.loadBalancerIp, sp.port.port],
    ];
    if (sp.port.nodePort > 0) dests.push([nodePortAddrs(node, sp.family), sp.nodePort, sp.port.nodePort]);
    for (const [addrs, routes, port] of dests) {
      if (!routes || addrs.length === 0) continue;
      const eps = routeEndpoints(routes.pod, cluster, local);
      if (eps === undefined) continue;
      yield { proto, addrs, port, eps, sp };
    }
  }
}

/** How many service-map entries planService writes for the service (slot 0 and one per backend, per address). */
export function serviceEntries(svc: Service, node?: NodeInfo): number {
  let n = 0;
  for (const d of destinations(svc, node)) n += d.addrs.length * (1 + (d.eps?.length ?? 0));
  return n;
}

/**
 * An upper bound of serviceEntries() from lengths alone (every address of every family, the longer
 * endpoint list), so that a service far from the map's capacity is not walked twice.
 */
export function serviceEntriesAtMost(svc: Service, node?: NodeInfo): number {
  const ips = (s: { v4: string[]; v6: string[] }) => s.v4.length + s.v6.length;
  const vips = ips(svc.clusterIps) + ips(svc.externalIps) + ips(svc.loadBalancerIps);
  let n = 0;
  for (const sp of svc.ports) {
    const addrs = vips + (sp.port.nodePort > 0 && node ? node.addresses.length : 0);
    n += addrs * (1 + Math.max(sp.clusterEndpoints.length, sp.localEndpoints.length));
  }
  return n;
}

/**
 * The service's entries, added to `out` (a new plan by default; the dataplane passes its desired maps,
 * so that entries are written once, not into a plan each and then copied). Each service-map key set is
 * pushed to `svcKeys` when given. A backend id already in out.backends keeps its value: an id stands for
 * one (service port, endpoint), so its encoding cannot have changed.
 */
export function planService(svc: Service, ids: Ids, node?: NodeInfo, out: EbpfPlan = newPlan(), svcKeys?: string[]): EbpfPlan {
  const affinity = svc.sessionAffinity?.timeoutSeconds ?? 0;
  /** Backend ids of an endpoint list, by list: the same backends serve every address of the port. */
  const idsOf = new Map<Endpoint[], number[]>();
  /** Ids already given in this plan, by endpoint key: a port's cluster and local lists share endpoints. */
  const given = new Map<string, number>();
  for (const { proto, addrs, port, eps, sp } of destinations(svc, node)) {
    const list = eps ?? [];
    let backendIds = idsOf.get(list);
    if (!backendIds) {
      backendIds = list.map((e) => {
        backend.at(e.ip, e.port);
        const k = backend.endpointKey(sp.port.port, proto);
        let id = given.get(k);
        if (id === undefined) given.set(k, (id = ids.backend(k)));
        if (!out.backends.has(id)) out.backends.set(id, backend.value());
        return id;
      });
      idsOf.set(list, backendIds);
    }
    for (const addr of addrs) {
      keys.at(addr, port, proto);
      for (let i = 0; i < backendIds.length; i++) {
        const k = keys.slotKey(i + 1);
        out.slots.set(k, backendIds[i]);
        svcKeys?.push(k);
      }
      const head = keys.slotKey(0);
      svcKeys?.push(head);
      out.heads.set(head, svcValueBytes({
        backendId: 0, count: backendIds.length, affinitySeconds: affinity, svcId: ids.service(head),
        flags: eps === null || backendIds.length === 0 ? FLAG_REFUSE : 0,
      }));
    }
  }
  return out;
}
