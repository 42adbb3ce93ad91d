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
import { EndpointList, IPFamily, Protocol, Target, ofFamily, type NodeInfo, type Route, type Routes, type Service, type ServicePort } from '../../model/enls';
import { isDnat, nodePortAddresses, pickEndpoints } from '../../model/views';
import { BACKEND_VALUE_SIZE, ByteWriter, FLAG_REFUSE, SVC_KEY_SIZE, SVC_VALUE_SIZE, u32At, writeBackend, writeSvcKey, writeSvcValue } from './maps';

export const IPPROTO: Record<number, number> = { [Protocol.TCP]: 6, [Protocol.UDP]: 17, [Protocol.SCTP]: 132 };

/**
 * The keys of what planService asks an id for, made only when read: an Ids that looks ids up by key
 * (a service's previous plan, the kernel's maps) reads them; fresh ids (a node's first start) never do.
 * Valid during the ask only.
 */
export interface PlanKeys {
  /** The endpoint key of the backend asked for: its backend value, then the service port and protocol (23 bytes). */
  endpoint(): string;
  /** The slot 0 key of the service address the backend is first planned for, or the service id is for. */
  head(): string;
}

export interface Ids {
  /**
   * A backend id for an endpoint of one service port (`keys.endpoint()`), first planned for the service
   * address `keys.head()`. Stable while it stays, never reused. Asked once per endpoint key and plan.
   */
  backend(keys: PlanKeys): number;
  /** A service id (affinity key) for one service address (`keys.head()`). */
  service(keys: PlanKeys): number;
}

/**
 * One service's entries in the two maps, in one byte string of fixed-size records, section after
 * section (a service of 10 endpoints is one string of ~600 bytes rather than dozens of small objects):
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
function routeEndpoints(route: Route, cluster: EndpointList, local: EndpointList): EndpointList | null | undefined {
  if (isDnat(route)) return pickEndpoints(route.target, cluster, local);
  return route.target === Target.REJECT || route.target === Target.DROP ? null : undefined;
}

/**
 * The endpoints of a list in one family: the list itself when they all are (the ENLS's lists are per
 * family: no copy, no object per endpoint), else a list of those that are.
 */
function ofFamilyEndpoints(eps: EndpointList, v6: boolean): EndpointList {
  const ips = eps.ipColumn;
  for (let i = 0; i < ips.length; i++) if (ips[i]!.includes(':') !== v6) return EndpointList.from(eps.filter((e) => e.ip.includes(':') === v6));
  return eps;
}

/** The node's addresses of a family where node ports answer, never loopback ones (none without a node item). */
export const nodePortAddrs = (node: NodeInfo | undefined, family: IPFamily): string[] => nodePortAddresses(node, family, node?.addresses ?? []);

/** Scratch writers of planService, one per section of a ServicePlan (reset for each service). */
const w = {
  headKeys: new ByteWriter(), headValues: new ByteWriter(), slotKeys: new ByteWriter(), slotIds: new ByteWriter(),
  backendIds: new ByteWriter(), backendValues: new ByteWriter(), backendPorts: new ByteWriter(), key: new ByteWriter(64), plan: new ByteWriter(),
};
const writers = Object.values(w);
/** Sections in the order of a ServicePlan. */
const sections = [w.headKeys, w.headValues, w.slotKeys, w.slotIds, w.backendIds, w.backendValues, w.backendPorts];

/** One service port's destination the socket LB answers: its addresses, port, and the endpoints (null: refused). */
interface Dest { proto: number; addrs: string[]; port: number; eps: EndpointList | null; sp: ServicePort }

/** The socket-LB destinations of a service, in the order planService writes them. */
function* destinations(svc: Service, node: NodeInfo | undefined): Generator<Dest> {
  for (const sp of svc.ports) {
    const proto = IPPROTO[sp.port.protocol];
    if (!proto || sp.port.port <= 0) continue;
    const v6 = sp.family === IPFamily.IPV6;
    const cluster = ofFamilyEndpoints(sp.clusterEndpoints, v6), local = ofFamilyEndpoints(sp.localEndpoints, v6);
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
 * Whether the service's entries fit in `room` service-map entries. The exact count walks the
 * service's destinations, as planService does next: only near the top.
 */
export function fitsIn(svc: Service, node: NodeInfo | undefined, room: number): boolean {
  return serviceEntriesAtMost(svc, node) <= room || serviceEntries(svc, node) <= room;
}

/**
 * The ids a plan was given, in the order planService asked for them (backend ids, then the service
 * ids of its slot 0s: little-endian u32s), appended to `w`.
 */
export function writePlanIds(p: ServicePlan, w: ByteWriter): void {
  w.latin1(p.bytes, p.backendIdsAt, p.backends * 4);
  // svc_value.svc_id, bytes 12-15 of each slot 0 value.
  for (let j = 0; j < p.heads; j++) w.latin1(p.bytes, p.headValuesAt + j * SVC_VALUE_SIZE + 12, 4);
}

/** Bytes of an endpoint key (the backend's value, the service port and protocol). */
const ENDPOINT_KEY_SIZE = BACKEND_VALUE_SIZE + 3;

/** An endpoint's key, into w.key. */
function writeEndpointKey(list: EndpointList, e: number, servicePort: number, proto: number): ByteWriter {
  writeBackend(w.key.reset(), list.ip(e), list.port(e));
  w.key.u16be(servicePort);
  w.key.u8(proto);
  return w.key;
}

/** The PlanKeys of planService's asks: the endpoint key in w.key, the head key made from its address when read. */
class AskedKeys implements PlanKeys {
  addr = '';
  port = 0;
  proto = 0;
  private readonly head$ = new ByteWriter(SVC_KEY_SIZE);
  endpoint(): string { return w.key.text(0, ENDPOINT_KEY_SIZE); }
  head(): string {
    writeSvcKey(this.head$.reset(), this.addr, this.port, this.proto, 0);
    return this.head$.text();
  }
}
const asked = new AskedKeys();

/**
 * Where planInto writes a service's entries, section by section: a ServicePlan's sections
 * (planService), or a first sync's batch buffers, service after service (FreshPlan).
 */
export interface PlanSections {
  headKeys: ByteWriter;
  headValues: ByteWriter;
  slotKeys: ByteWriter;
  /** Each slot's backend id (a little-endian u32), then `slotValuePad` zero bytes (a batch holds the map's whole value). */
  slotValues: ByteWriter;
  slotValuePad: number;
  backendIds: ByteWriter;
  backendValues: ByteWriter;
  /** Each backend's service port and protocol (a ServicePlan's endpoint keys); undefined: not written. */
  backendPorts?: ByteWriter;
}

/** What planInto wrote for one service. */
export interface PlanCounts { heads: number; slots: number; backends: number }

const planSections: PlanSections = {
  headKeys: w.headKeys, headValues: w.headValues, slotKeys: w.slotKeys, slotValues: w.slotIds, slotValuePad: 0,
  backendIds: w.backendIds, backendValues: w.backendValues, backendPorts: w.backendPorts,
};

/** The service's entries in the maps, with backend and service ids from `ids`. */
export function planService(svc: Service, ids: Ids, node?: NodeInfo): ServicePlan {
  for (const x of writers) x.reset();
  const n = planInto(svc, ids, node, planSections);
  for (const x of sections) w.plan.append(x);
  return new ServicePlan(w.plan.text(), n.heads, n.slots, n.backends);
}

/** The service's entries, with backend and service ids from `ids`, appended to `out`'s sections. */
export function planInto(svc: Service, ids: Ids, node: NodeInfo | undefined, out: PlanSections): PlanCounts {
  const affinity = svc.sessionAffinity?.timeoutSeconds ?? 0;
  const backendsFrom = out.backendIds.n;
  /** Backend ids of an endpoint list of the port, by list: the same backends serve every address of the port. */
  const idsOf = new Map<EndpointList, number[]>();
  let idsOfPort: ServicePort | undefined;
  /**
   * A port's cluster and local lists share endpoints: a second list of the port gives those the first
   * one's ids (by endpoint key, made for both lists only then).
   */
  const given = new Map<string, number>();
  let heads = 0, slots = 0;
  for (const { proto, addrs, port, eps, sp } of destinations(svc, node)) {
    const list = eps ?? EndpointList.EMPTY;
    // A list's ids are the port's (its number and protocol are in the endpoint key): another port's
    // list may be the same object.
    if (sp !== idsOfPort) { idsOf.clear(); given.clear(); idsOfPort = sp; }
    let backendIds = idsOf.get(list);
    if (!backendIds) {
      let first: [EndpointList, number[]] | undefined;
      for (const e of idsOf) if (e[1].length > 0) { first = e; break; }
      if (first && list.length > 0 && given.size === 0) {
        for (let e = 0; e < first[0].length; e++) given.set(writeEndpointKey(first[0], e, sp.port.port, proto).text(), first[1][e]!);
      }
      asked.addr = addrs[0]!;
      asked.port = port;
      asked.proto = proto;
      backendIds = [];
      for (let e = 0; e < list.length; e++) {
        writeEndpointKey(list, e, sp.port.port, proto);
        const key = given.size > 0 ? w.key.text() : undefined;
        let id = key === undefined ? undefined : given.get(key);
        if (id === undefined) {
          id = ids.backend(asked);
          if (key !== undefined) given.set(key, id);
          out.backendIds.u32le(id);
          out.backendValues.copyOf(w.key, 0, BACKEND_VALUE_SIZE);
          out.backendPorts?.copyOf(w.key, BACKEND_VALUE_SIZE, ENDPOINT_KEY_SIZE);
        }
        backendIds.push(id);
      }
      idsOf.set(list, backendIds);
    }
    for (const addr of addrs) {
      // The first slot's key written, the others copied from it with their slot number (the address
      // is parsed once).
      const first = out.slotKeys.n;
      for (let i = 0; i < backendIds.length; i++) {
        if (i === 0) writeSvcKey(out.slotKeys, addr, port, proto, 1);
        else {
          const at = out.slotKeys.n;
          out.slotKeys.copyOf(out.slotKeys, first, first + SVC_KEY_SIZE);
          out.slotKeys.setU16le(at + 20, i + 1);
        }
        out.slotValues.u32le(backendIds[i]!);
        if (out.slotValuePad) out.slotValues.zeros(out.slotValuePad);
      }
      slots += backendIds.length;
      writeSvcKey(out.headKeys, addr, port, proto, 0);
      asked.addr = addr;
      asked.port = port;
      asked.proto = proto;
      writeSvcValue(out.headValues, {
        backendId: 0, count: backendIds.length, affinitySeconds: affinity, svcId: ids.service(asked),
        flags: eps === null || backendIds.length === 0 ? FLAG_REFUSE : 0,
      });
      heads++;
    }
  }
  return { heads, slots, backends: (out.backendIds.n - backendsFrom) / 4 };
}

/** A plan's entries decoded into maps keyed as the kernel's are (tests, debugging). */
export function planEntries(p: ServicePlan): { heads: Map<string, string>; slots: Map<string, number>; backends: Map<number, string> } {
  const heads = new Map<string, string>(), slots = new Map<string, number>(), backends = new Map<number, string>();
  for (let j = 0; j < p.heads; j++) heads.set(p.headKey(j), p.headValue(j));
  for (let j = 0; j < p.slots; j++) slots.set(p.slotKey(j), p.slotId(j));
  for (let i = 0; i < p.backends; i++) backends.set(p.backendId(i), p.backendValue(i));
  return { heads, slots, backends };
}
