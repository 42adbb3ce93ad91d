// Builders shared by tests and benches: raw Kubernetes objects (Service, EndpointSlice, Node), shaped as
// the API server returns them, and ENLS items as the model makes them. No jest here: benches import it.
import { IPFamily, normalizeItem, Protocol, Target, type Endpoint, type IPSet, type Item, type NodeInfo } from '../../src/model/enls';
import type { StateView } from '../../src/sink/sink';

export type Obj = Record<string, unknown>;

// ---- Kubernetes objects ----
// As the API server returns them (its defaults filled in), unless `bare`: then only the fields given,
// as a client writes an object to create (the request's path names the namespace) or as a bench
// builds the smallest object the store takes. Builders, not validators: what is given is written.

export interface SvcOpts {
  ns?: string; type?: string; clusterIPs?: string[]; ports?: Obj[]; externalIPs?: string[];
  lbIPs?: string[]; sourceRanges?: string[]; itp?: string; etp?: string; affinity?: number;
  trafficDistribution?: string; annotations?: Obj; labels?: Obj; extraSpec?: Obj;
  /** spec.ipFamilies and spec.ipFamilyPolicy (unset unless given). */
  families?: string[]; familyPolicy?: string;
  /** spec.clusterIP alone, without spec.clusterIPs (as hand-written manifests have it; 'None': headless). */
  clusterIP?: string;
  selector?: Obj;
  /** metadata.resourceVersion ('1' unless bare). */
  resourceVersion?: string;
  /** Only the fields given (apiVersion and kind aside): no default namespace, resourceVersion, type,
   *  cluster IP, session affinity or status. */
  bare?: boolean;
}

/** The IP families of addresses in order of first appearance, and the policy that asks for them all:
 *  `svc(name, { clusterIPs: ips, ...familiesOf(ips) })`. */
export function familiesOf(ips: string[]): { families: string[]; familyPolicy: string } {
  const families = [...new Set(ips.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4')))];
  return { families, familyPolicy: families.length > 1 ? 'RequireDualStack' : 'SingleStack' };
}

export function svc(name: string, o: SvcOpts = {}): Obj {
  const served = o.bare !== true;
  const clusterIPs = o.clusterIPs ?? (served && o.clusterIP === undefined ? ['10.96.0.1'] : undefined);
  const spec: Obj = {
    type: o.type ?? (served ? 'ClusterIP' : undefined), clusterIP: clusterIPs ? clusterIPs[0] : o.clusterIP, clusterIPs,
    ipFamilies: o.families, ipFamilyPolicy: o.familyPolicy,
    selector: o.selector,
    ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }],
    externalIPs: o.externalIPs, loadBalancerSourceRanges: o.sourceRanges,
    internalTrafficPolicy: o.itp, externalTrafficPolicy: o.etp,
    sessionAffinity: o.affinity ? 'ClientIP' : served ? 'None' : undefined,
    sessionAffinityConfig: o.affinity ? { clientIP: { timeoutSeconds: o.affinity } } : undefined,
    trafficDistribution: o.trafficDistribution,
  };
  if (o.extraSpec) Object.assign(spec, o.extraSpec);
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: {
      namespace: o.ns ?? (served ? 'default' : undefined), name, labels: o.labels, annotations: o.annotations,
      resourceVersion: o.resourceVersion ?? (served ? '1' : undefined),
    },
    spec,
    status: o.lbIPs ? { loadBalancer: { ingress: o.lbIPs.map((ip) => ({ ip })) } } : served ? {} : undefined,
  };
}

export interface EpOpts {
  node?: string; ready?: boolean; serving?: boolean; terminating?: boolean;
  /** Topology hints (hints.forZones, hints.forNodes). */
  zones?: string[]; nodes?: string[];
  /** The endpoint's own zone (its `zone` field, not a hint). */
  zone?: string;
  /** targetRef: the Pod default/<pod>. */
  pod?: string;
}
/** The conditions of an endpoint that serves: ready, serving, not terminating (`ep(ip, { ...READY })`). */
export const READY = { ready: true, serving: true, terminating: false } as const;

export const ep = (ip: string, o: EpOpts = {}): Obj => ({
  addresses: [ip],
  conditions: { ready: o.ready, serving: o.serving, terminating: o.terminating },
  nodeName: o.node,
  zone: o.zone,
  targetRef: o.pod ? { kind: 'Pod', namespace: 'default', name: o.pod } : undefined,
  hints: o.zones || o.nodes ? { forZones: o.zones?.map((name) => ({ name })), forNodes: o.nodes?.map((name) => ({ name })) } : undefined,
});

export interface SliceOpts {
  ns?: string; ports?: Obj[]; family?: string;
  /** Labels besides kubernetes.io/service-name. */
  labels?: Obj;
  annotations?: Obj; resourceVersion?: string;
  /** No default namespace (the request's path names it). */
  bare?: boolean;
}

export function slice(name: string, service: string, endpoints: Obj[], o: SliceOpts = {}): Obj {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: {
      namespace: o.ns ?? (o.bare ? undefined : 'default'), name,
      labels: o.labels ? { 'kubernetes.io/service-name': service, ...o.labels } : { 'kubernetes.io/service-name': service },
      annotations: o.annotations, resourceVersion: o.resourceVersion,
    },
    addressType: o.family ?? 'IPv4',
    ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints,
  };
}

/** Node status addresses, all of type InternalIP: `node('n1', undefined, internalIPs('192.168.50.1'))`. */
export const internalIPs = (...ips: string[]): Obj => ({ addresses: ips.map((address) => ({ type: 'InternalIP', address })) });

/** A Node (status.addresses: 192.168.50.1 unless `extra` says). */
export const node = (name: string, zone?: string, extra: Obj = {}): Obj => ({
  apiVersion: 'v1', kind: 'Node',
  metadata: { name, labels: zone ? { 'topology.kubernetes.io/zone': zone } : {} },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.50.1' }], ...extra },
});

/** A kubectl-style List of objects (what `kpng file --input` reads). */
export const list = (items: Obj[]): Obj => ({ apiVersion: 'v1', kind: 'List', items });

// ---- Objects a client creates through the API server (e2e tests, the benches that write to an API server) ----

export const SERVICES = (ns: string): string => `/api/v1/namespaces/${ns}/services`;
export const SLICES = (ns: string): string => `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
export const NODES = '/api/v1/nodes';

export interface PortSpec { name?: string; port: number; targetPort?: number | string; protocol?: 'TCP' | 'UDP' | 'SCTP' }
const withProtocol = (ports: PortSpec[]): Obj[] => ports.map((p) => ({ protocol: 'TCP', ...p }));

/** A Service to create: selector app=<name>, port http 80 -> 8080 unless given; the API server
 *  allocates the cluster IP unless `clusterIP` says one (or None). */
export function newService(name: string, opts: { ports?: PortSpec[]; labels?: Record<string, string>; annotations?: Record<string, string>; type?: string; clusterIP?: string; internalTrafficPolicy?: string } = {}): Obj {
  return svc(name, {
    bare: true, labels: opts.labels, annotations: opts.annotations, type: opts.type, clusterIP: opts.clusterIP,
    itp: opts.internalTrafficPolicy, selector: { app: name },
    ports: withProtocol(opts.ports ?? [{ name: 'http', port: 80, targetPort: 8080 }]),
  });
}

/** An endpoint to create: ready unless said, serving as ready unless said, not terminating unless said. */
export interface EndpointSpec { ip: string; ready?: boolean; serving?: boolean; terminating?: boolean; nodeName?: string; zone?: string; pod?: string }

/** An EndpointSlice to create, managed by kpng-test; port http 8080 unless given. */
export function newEndpointSlice(name: string, service: string, endpoints: EndpointSpec[], opts: { ports?: PortSpec[]; labels?: Record<string, string>; annotations?: Record<string, string>; addressType?: string } = {}): Obj {
  return slice(name, service, endpoints.map((e) => ep(e.ip, {
    ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false, node: e.nodeName, zone: e.zone, pod: e.pod,
  })), {
    bare: true, labels: { 'endpointslice.kubernetes.io/managed-by': 'kpng-test', ...opts.labels }, annotations: opts.annotations,
    family: opts.addressType, ports: withProtocol(opts.ports ?? [{ name: 'http', port: 8080 }]),
  });
}

/** A Node to create, with its zone and hostname labels (its status comes from nodeStatus()). */
export function newNode(name: string, zone: string, labels: Record<string, string> = {}): Obj {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'topology.kubernetes.io/zone': zone, 'kubernetes.io/hostname': name, ...labels } } };
}

/** A Node status as the kubelet reports it (addresses, conditions with heartbeats). */
export function nodeStatus(addresses: string[], heartbeat: Date): Obj {
  const t = heartbeat.toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    status: {
      addresses: addresses.map((a, i) => ({ type: i === 0 ? 'InternalIP' : 'ExternalIP', address: a })),
      conditions: [
        { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: t, lastTransitionTime: '2026-01-01T00:00:00Z' },
        { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', lastHeartbeatTime: t, lastTransitionTime: '2026-01-01T00:00:00Z' },
      ],
    },
  };
}

// ---- ENLS items ----

/** The IPv4 address of a 32-bit number. */
export const ip4 = (n: number): string => `${(n >>> 24) & 255}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;

/** Node n1 as the model computes it with --cluster-cidr 10.244.0.0/16 (pods are not masqueraded). */
export function enlsNode(nodePortAddresses: IPSet = { v4: ['0.0.0.0/0'], v6: ['::/0'] }): NodeInfo {
  return { name: 'n1', zone: '', addresses: [], podBridgeInterface: '', podInterfaceNamePrefix: '', podCidrs: { v4: ['10.244.0.0/16'], v6: [] }, nodePortAddresses };
}

export interface EnlsServiceOpts {
  /** How many endpoints (10.200.x.y:8080, consecutive across services), or the endpoints themselves. */
  endpoints?: number | Endpoint[];
  /** Moves every endpoint address on by this many (a change of every service). */
  shift?: number;
  /** Whether node and other clients are masqueraded (pods never are). */
  masquerade?: boolean;
  /** The service's name (s<i> unless given) and cluster IP (10.96.0.0 + i + 1 unless given). */
  name?: string; clusterIP?: string;
}

/** Service bench/s<i>: cluster IP 10.96.0.0 + i + 1, port 80/TCP (name http), cluster endpoints only. */
export function enlsService(i: number, o: EnlsServiceOpts = {}): Item {
  const name = o.name ?? `s${i}`;
  const n = typeof o.endpoints === 'number' ? o.endpoints : 10;
  const endpoints = Array.isArray(o.endpoints) ? o.endpoints
    : Array.from({ length: n }, (_, k) => ({ ip: ip4(((10 << 24) | (200 << 16)) + ((i * n + k + (o.shift ?? 0)) % 65000) + 1), port: 8080, local: false, terminating: false }));
  const masq = o.masquerade ?? true;
  const cluster = (masquerade: boolean) => ({ target: Target.CLUSTER, masquerade });
  return normalizeItem({
    key: `svc/bench/${name}`,
    service: {
      namespace: 'bench', name, type: 'ClusterIP',
      clusterIps: { v4: [o.clusterIP ?? ip4(((10 << 24) | (96 << 16)) + i + 1)], v6: [] },
      internalTrafficPolicy: 'Cluster', externalTrafficPolicy: 'Cluster',
      ports: [{
        port: { name: 'http', protocol: Protocol.TCP, port: 80, nodePort: 0 }, family: IPFamily.IPV4, clusterEndpoints: endpoints,
        clusterIp: { pod: cluster(false), node: cluster(masq), other: cluster(masq) },
      }],
    },
  });
}

/** A node's state as a sink reads it: the node item and `items`, at `revision`. */
export function stateView(node: NodeInfo, items: Item[], revision = 1): StateView {
  const m = new Map([{ key: 'node', node } as Item, ...items].map((x): [string, Item] => [x.key, x]));
  return { node: node.name, revision, get: (k) => m.get(k), items: () => m.values(), size: m.size };
}
