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
import { BACKEND_VALUE_SIZE, ByteWriter, FLAG_REFUSE, SVC_KEY_SIZE, SVC_VALUE_SIZE, u32At, writeBackend, writeSvcKey, writeSvcValue } from './maps';

export const IPPROTO: Record<number, number> = { [Protocol.TCP]: 6, [Protocol.UDP]: 17, [Protocol.SCTP]: 132 };

export interface Ids {
  /**
   * A backend id for an endpoint of one service port, named by its endpoint key (the backend's value,
   * then the service port and protocol: 23 bytes), first planned for the service address
   * the service address whose slot 0 key is `headKey`. Stable while it stays, never reused.
   * Asked once per endpoint key and plan.
   */
  backend(endpointKey: string, headKey: string): number;
  /** A service id (affinity key) for one service address (its slot 0 key). */
  service(headKey: string): number;
}

/**
 * One service's entries in the two maps, in one byte string of fixed-size records, section after
 * section (a service of 10 endpoints is one string of ~600 bytes rather than dozens of small objects,
 * and a full sync copies each section into its batch buffer whole):
 *   slot 0 keys (24 bytes each) | their values (20) | keys of slots >= 1 (24) | their backend ids (4)
 *   | backend ids (4) | backend values (20) | each backend's service port and protocol (3)
 * Ids are little-endian u32s, as the maps hold them.
 */
export class ServicePlan {
  constructor(readonly bytes: string, readonly heads: number, readonly slots: number, readonly backends: number) {}

  /** Service-map entries (slot 0s and the other slots). */
  get entries(): number { return this.heads + this.slots; }

  get headValuesAt(): number { return this.heads * SVC_KEY_SIZE; }
  get slotKeysAt(): number { return this.heads * (SVC_KEY_SIZE + SVC_VALUE_SIZE); }
  get slotIdsAt(): number { return this.slotKeysAt + this.slots * SVC_KEY_SIZE; }
  get backendIdsAt(): number { return this.slotIdsAt + this.slots * 4; }
  get backendValuesAt(): number { return this.backendIdsAt + this.backends * 4; }
  get backendPortsAt(): number { return this.backendValuesAt + this.backends * BACKEND_VALUE_SIZE; }

  /** Bytes [from, to) of the plan. */
  section(from: number, to: number): string { return this.bytes.slice(from, to); }

  headKey(j: number): string { return this.bytes.slice(j * SVC_KEY_SIZE, (j + 1) * SVC_KEY_SIZE); }
  headValue(j: number): string { const o = this.headValuesAt + j * SVC_VALUE_SIZE; return this.bytes.slice(o, o + SVC_VALUE_SIZE); }
  slotKey(j: number): string { const o = this.slotKeysAt + j * SVC_KEY_SIZE; return this.bytes.slice(o, o + SVC_KEY_SIZE); }
  slotId(j: number): number { return u32At(this.bytes, this.slotIdsAt + j * 4); }
  backendId(i: number): number { return u32At(this.bytes, this.backendIdsAt + i * 4); }
  backendValue(i: number): string { const o = this.backendValuesAt + i * BACKEND_VALUE_SIZE; return this.bytes.slice(o, o + BACKEND_VALUE_SIZE); }
  /** The endpoint key of the i-th backend (its value, then its service port and protocol). */
  endpointKey(i: number): string { const o = this.backendPortsAt + i * 3; return this.backendValue(i) + this.bytes.slice(o, o + 3); }
  /** Backend id -> its index among the plan's backends. */
  backendIndex(): Map<number, number> {
    const m = new Map<number, number>();
    for (let i = 0; i < this.backends; i++) m.set(this.backendId(i), i);
    return m;
  }
}

/** The endpoints a route sends to, null when the route refuses, undefined when unspecified (not a socket-LB destination). */
function routeEndpoints(route: Route, cluster: Endpoint[], local: Endpoint[]): Endpoint[] | null | undefined {
  if (isDnat(route)) return pickEndpoints(route.target, cluster, local);
  return route.target === Target.REJECT || route.target === Target.DROP ? null : undefined;
}

/** The node's addresses of a family where node ports answer, never loopback ones (none without a node item). */
export const nodePortAddrs = (node: NodeInfo | undefined, family: IPFamily): string[] => nodePortAddresses(node, family, node?.addresses ?? []);

/** Scratch writers of planService, one per section of a ServicePlan (reset for each service). */
const w = {
  headKeys: new ByteWriter(), headValues: new ByteWriter(), slotKeys: new ByteWriter(), slotIds: new ByteWriter(),
  backendIds: new ByteWriter(), backendValues: new ByteWriter(), backendPorts: new ByteWriter(), key: new ByteWriter(64), plan: new ByteWriter(),
};

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

/** The service's entries in the maps, with backend and service ids from `ids`. */
export function planService(svc: Service, ids: Ids, node?: NodeInfo): ServicePlan {
  for (const x of Object.values(w)) x.reset();
  const affinity = svc.sessionAffinity?.timeoutSeconds ?? 0;
  /** Backend ids of an endpoint list, by list: the same backends serve every address of the port. */
  const idsOf = new Map<Endpoint[], number[]>();
  /** Ids already given in this plan, by endpoint key: a port's cluster and local lists share endpoints. */
  const given = new Map<string, number>();
  let heads = 0, slots = 0;
  for (const { proto, addrs, port, eps, sp } of destinations(svc, node)) {
    const list = eps ?? [];
    let backendIds = idsOf.get(list);
    if (!backendIds) {
      writeSvcKey(w.key.reset(), addrs[0], port, proto, 0);
      const headKey = w.key.text();
      backendIds = [];
      for (const e of list) {
        writeBackend(w.key.reset(), e.ip, e.port);
        w.key.u16be(sp.port.port);
        w.key.u8(proto);
        const k = w.key.text();
        let id = given.get(k);
        if (id === undefined) {
          given.set(k, (id = ids.backend(k, headKey)));
          w.backendIds.u32le(id);
          w.backendValues.copyOf(w.key, 0, BACKEND_VALUE_SIZE);
          w.backendPorts.copyOf(w.key, BACKEND_VALUE_SIZE, BACKEND_VALUE_SIZE + 3);
        }
        backendIds.push(id);
      }
      idsOf.set(list, backendIds);
    }
    for (const addr of addrs) {
      // The first slot's key written, the others copied from it with their slot number (the address
      // is parsed once).
      const first = w.slotKeys.n;
      for (let i = 0; i < backendIds.length; i++) {
        if (i === 0) writeSvcKey(w.slotKeys, addr, port, proto, 1);
        else {
          const at = w.slotKeys.n;
          w.slotKeys.copyOf(w.slotKeys, first, first + SVC_KEY_SIZE);
          w.slotKeys.setU16le(at + 20, i + 1);
        }
        w.slotIds.u32le(backendIds[i]);
      }
      slots += backendIds.length;
      const at = w.headKeys.n;
      writeSvcKey(w.headKeys, addr, port, proto, 0);
      writeSvcValue(w.headValues, {
        backendId: 0, count: backendIds.length, affinitySeconds: affinity, svcId: ids.service(w.headKeys.text(at, at + SVC_KEY_SIZE)),
        flags: eps === null || backendIds.length === 0 ? FLAG_REFUSE : 0,
      });
      heads++;
    }
  }
  for (const x of [w.headKeys, w.headValues, w.slotKeys, w.slotIds, w.backendIds, w.backendValues, w.backendPorts]) w.plan.append(x);
  return new ServicePlan(w.plan.text(), heads, slots, given.size);
}

/** A plan's entries decoded into maps keyed as the kernel's are (tests, debugging). */
export function planEntries(p: ServicePlan): { heads: Map<string, string>; slots: Map<string, number>; backends: Map<number, string> } {
  const heads = new Map<string, string>(), slots = new Map<string, number>(), backends = new Map<number, string>();
  for (let j = 0; j < p.heads; j++) heads.set(p.headKey(j), p.headValue(j));
  for (let j = 0; j < p.slots; j++) slots.set(p.slotKey(j), p.slotId(j));
  for (let i = 0; i < p.backends; i++) backends.set(p.backendId(i), p.backendValue(i));
  return { heads, slots, backends };
}
