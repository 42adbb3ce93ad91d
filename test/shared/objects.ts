// Builders shared by tests and benches: raw Kubernetes objects (Service, EndpointSlice, Node), shaped as
// the API server returns them, and ENLS items as the model makes them. No jest here: benches import it.
import { IPFamily, normalizeItem, Protocol, Target, type Endpoint, type IPSet, type Item, type NodeInfo } from '../../src/model/enls';
import type { StateView } from '../../src/sink/sink';

export type Obj = Record<string, unknown>;

// ---- Kubernetes objects ----

export interface SvcOpts {
  ns?: string; type?: string; clusterIPs?: string[]; ports?: Obj[]; externalIPs?: string[];
  lbIPs?: string[]; sourceRanges?: string[]; itp?: string; etp?: string; affinity?: number;
  trafficDistribution?: string; annotations?: Obj; labels?: Obj; extraSpec?: Obj;
}

export function svc(name: string, o: SvcOpts = {}): Obj {
  const clusterIPs = o.clusterIPs ?? ['10.96.0.1'];
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { namespace: o.ns ?? 'default', name, labels: o.labels, annotations: o.annotations, resourceVersion: '1' },
    spec: {
      type: o.type ?? 'ClusterIP', clusterIP: clusterIPs[0], clusterIPs,
      ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }],
      externalIPs: o.externalIPs, loadBalancerSourceRanges: o.sourceRanges,
      internalTrafficPolicy: o.itp, externalTrafficPolicy: o.etp,
      sessionAffinity: o.affinity ? 'ClientIP' : 'None',
      sessionAffinityConfig: o.affinity ? { clientIP: { timeoutSeconds: o.affinity } } : undefined,
      trafficDistribution: o.trafficDistribution,
      ...o.extraSpec,
    },
    status: o.lbIPs ? { loadBalancer: { ingress: o.lbIPs.map((ip) => ({ ip })) } } : {},
  };
}

export interface EpOpts { node?: string; ready?: boolean; serving?: boolean; terminating?: boolean; zones?: string[]; nodes?: string[] }
export const ep = (ip: string, o: EpOpts = {}): Obj => ({
  addresses: [ip],
  conditions: { ready: o.ready, serving: o.serving, terminating: o.terminating },
  nodeName: o.node,
  hints: o.zones || o.nodes ? { forZones: o.zones?.map((name) => ({ name })), forNodes: o.nodes?.map((name) => ({ name })) } : undefined,
});

export function slice(name: string, service: string, endpoints: Obj[], o: { ns?: string; ports?: Obj[]; family?: string } = {}): Obj {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { namespace: o.ns ?? 'default', name, labels: { 'kubernetes.io/service-name': service } },
    addressType: o.family ?? 'IPv4',
    ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints,
  };
}

export const node = (name: string, zone?: string, extra: Obj = {}): Obj => ({
  apiVersion: 'v1', kind: 'Node',
  metadata: { name, labels: zone ? { 'topology.kubernetes.io/zone': zone } : {} },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.50.1' }], ...extra },
});

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
}

/** Service bench/s<i>: cluster IP 10.96.0.0 + i + 1, port 80/TCP (name http), cluster endpoints only. */
export function enlsService(i: number, o: EnlsServiceOpts = {}): Item {
  const n = typeof o.endpoints === 'number' ? o.endpoints : 10;
  const endpoints = Array.isArray(o.endpoints) ? o.endpoints
    : Array.from({ length: n }, (_, k) => ({ ip: ip4(((10 << 24) | (200 << 16)) + ((i * n + k + (o.shift ?? 0)) % 65000) + 1), port: 8080, local: false, terminating: false }));
  const masq = o.masquerade ?? true;
  const cluster = (masquerade: boolean) => ({ target: Target.CLUSTER, masquerade });
  return normalizeItem({
    key: `svc/bench/s${i}`,
    service: {
      namespace: 'bench', name: `s${i}`, type: 'ClusterIP',
      clusterIps: { v4: [ip4(((10 << 24) | (96 << 16)) + i + 1)], v6: [] },
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
