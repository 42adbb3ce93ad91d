// The ENLS (proto/localv1.proto) as strict TypeScript types, and its protobuf codec.
// protobufjs' generated classes type every nested field as optional; kpng always fills
// every field, so consumers get these strict shapes instead (decoded messages are brought
// to them by `normalizeItem`). Endpoint lists are EndpointLists (by column), not arrays:
// protobufjs encodes an item through `wireItem`.
import { kpng } from '../gen/proto';
import { EndpointList, type Endpoint } from './endpoint-list';

export { EndpointList, type Endpoint };

/** The generated protobufjs codec (encode/decode/toObject) for kpng.localv1. */
export const pb = kpng.localv1;
export const Protocol = kpng.localv1.Protocol;
export type Protocol = kpng.localv1.Protocol;

export const Target = kpng.localv1.Target;
export type Target = kpng.localv1.Target;
export const IPFamily = kpng.localv1.IPFamily;
export type IPFamily = kpng.localv1.IPFamily;

export interface IPSet { v4: string[]; v6: string[] }
export interface Port { name: string; protocol: Protocol; port: number; nodePort: number }
/** Where a packet of one client class to one destination goes, and whether it is masqueraded. */
export interface Route { target: Target; masquerade: boolean }
/** Per client class, matched in this order: pod (podSources of the node item), node (a local address), other. */
export interface Routes { pod: Route; node: Route; other: Route }
/** One service port in one IP family (see proto/localv1.proto). */
export interface ServicePort {
  port: Port;
  family: IPFamily;
  /** Endpoints for Cluster targets (topology applied, terminating fallback), this family. */
  clusterEndpoints: EndpointList;
  /** This node's endpoints for Local targets (terminating fallback applied), this family. */
  localEndpoints: EndpointList;
  clusterIp: Routes;
  externalIp: Routes | null;
  loadBalancerIp: Routes | null;
  nodePort: Routes | null;
  /** The load-balancer IPs of this port are subject to Service.loadBalancerAllowedSources. */
  loadBalancerFirewall: boolean;
}
export interface SessionAffinity { timeoutSeconds: number }
export interface Service {
  namespace: string;
  name: string;
  type: string;
  clusterIps: IPSet;
  externalIps: IPSet;
  loadBalancerIps: IPSet;
  loadBalancerSourceRanges: string[];
  sessionAffinity: SessionAffinity | null;
  internalTrafficPolicy: string;
  externalTrafficPolicy: string;
  healthCheckNodePort: number;
  ports: ServicePort[];
  loadBalancerAllowedSources: IPSet;
}
export interface NodeInfo {
  name: string;
  zone: string;
  addresses: string[];
  /** Sources of the "pod" client class by address (ClusterCIDR / NodeCIDR detection). */
  podCidrs: IPSet;
  /** Where node ports answer: this node's addresses inside these, loopback excepted unless localhostNodePorts. */
  nodePortAddresses: IPSet;
  /** IPv4 node ports also answer on the loopback addresses inside nodePortAddresses (kube-proxy's iptables mode). */
  localhostNodePorts?: boolean;
  /** Pods' packets arrive on this interface (BridgeInterface detection), or ''. */
  podBridgeInterface: string;
  /** Pods' packets arrive on interfaces whose name starts with this (InterfaceNamePrefix detection), or ''. */
  podInterfaceNamePrefix: string;
}

/**
 * How a backend recognises the "pod" client class: a source CIDR, or the interface a packet came in
 * on (its whole name, or a name prefix). Locally generated packets have no incoming interface, so
 * they never match an interface.
 */
export type PodSource = { cidr: string } | { iifname: string; prefix: boolean };

/** The pod sources of one family, from the node item (none without one: no source is a pod). */
export function podSources(node: NodeInfo | undefined, family: IPFamily): PodSource[] {
  if (!node) return [];
  if (node.podBridgeInterface) return [{ iifname: node.podBridgeInterface, prefix: false }];
  if (node.podInterfaceNamePrefix) return [{ iifname: node.podInterfaceNamePrefix, prefix: true }];
  return ofFamily(node.podCidrs, family).map((cidr) => ({ cidr }));
}

/** A pod source as nft writes it (for names and messages). */
export const podSourceText = (s: PodSource): string => ('cidr' in s ? s.cidr : `iifname "${s.iifname}${s.prefix ? '*' : ''}"`);
/** One keyed item: exactly one of service / node is set. */
export interface Item { key: string; service?: Service | null; node?: NodeInfo | null }

export const NODE_KEY = 'node';
/**
 * "svc/namespace/name". Joined, not concatenated: `+` makes a rope of the parts (two heap objects
 * per key, and the key of every item is kept by several maps), join() one flat string.
 */
export const serviceKey = (namespace: string, name: string): string => ['svc', namespace, name].join('/');

export function encodeItem(item: Item): Uint8Array {
  return pb.Item.encode(wireItem(item)).finish();
}

/**
 * The item as protobufjs encodes it: endpoint lists as arrays of objects (a shallow copy; the item is
 * not changed). Every encoder of an Item goes through this.
 */
export function wireItem(item: Item): kpng.localv1.IItem {
  const svc = item.service;
  if (!svc) return item as kpng.localv1.IItem;
  const ports = svc.ports.map((sp) => ({ ...sp, clusterEndpoints: sp.clusterEndpoints.toArray(), localEndpoints: sp.localEndpoints.toArray() }));
  return { ...item, service: { ...svc, ports } };
}

/** Decodes an Item and fills every field, so it has the strict shape above. */
export function decodeItem(bytes: Uint8Array): Item {
  return normalizeItem(pb.Item.toObject(pb.Item.decode(bytes), { defaults: true, longs: Number, enums: Number, oneofs: false }));
}

const ipset = (s: Partial<IPSet> | null | undefined): IPSet => ({ v4: [...(s?.v4 ?? [])], v6: [...(s?.v6 ?? [])] });
const endpoint = (e: Partial<Endpoint>): Endpoint => ({ ip: e.ip ?? '', port: e.port ?? 0, local: !!e.local, terminating: !!e.terminating });
/** A list as given (an EndpointList is immutable), or one of the endpoint objects, filled. */
const endpoints = (l: EndpointList | Partial<Endpoint>[] | null | undefined): EndpointList =>
  l instanceof EndpointList ? l : l && l.length ? EndpointList.from(l.map(endpoint)) : EndpointList.EMPTY;
const route = (r: Partial<Route> | null | undefined): Route => ({ target: r?.target ?? Target.TARGET_UNSPECIFIED, masquerade: !!r?.masquerade });
const routes = (r: Partial<Routes> | null | undefined): Routes | null => (r ? { pod: route(r.pod), node: route(r.node), other: route(r.other) } : null);

type LooseServicePort = Omit<Partial<ServicePort>, 'clusterEndpoints' | 'localEndpoints'> & {
  clusterEndpoints?: EndpointList | Partial<Endpoint>[] | null;
  localEndpoints?: EndpointList | Partial<Endpoint>[] | null;
};

function servicePort(p: LooseServicePort): ServicePort {
  return {
    port: { name: p.port?.name ?? '', protocol: p.port?.protocol ?? Protocol.PROTOCOL_UNSPECIFIED, port: p.port?.port ?? 0, nodePort: p.port?.nodePort ?? 0 },
    family: p.family ?? IPFamily.IP_FAMILY_UNSPECIFIED,
    clusterEndpoints: endpoints(p.clusterEndpoints),
    localEndpoints: endpoints(p.localEndpoints),
    clusterIp: routes(p.clusterIp) ?? { pod: route(null), node: route(null), other: route(null) },
    externalIp: routes(p.externalIp),
    loadBalancerIp: routes(p.loadBalancerIp),
    nodePort: routes(p.nodePort),
    loadBalancerFirewall: !!p.loadBalancerFirewall,
  };
}

/** Brings a decoded or hand-written item to the strict shape (missing fields take proto defaults). */
export function normalizeItem(raw: unknown): Item {
  const r = raw as { key?: string; service?: (Omit<Partial<Service>, 'ports'> & { ports?: LooseServicePort[] }) | null; node?: Partial<NodeInfo> | null };
  const item: Item = { key: r.key ?? '' };
  if (r.service) {
    const s = r.service;
    item.service = {
      namespace: s.namespace ?? '', name: s.name ?? '', type: s.type ?? '',
      clusterIps: ipset(s.clusterIps), externalIps: ipset(s.externalIps), loadBalancerIps: ipset(s.loadBalancerIps),
      loadBalancerSourceRanges: [...(s.loadBalancerSourceRanges ?? [])],
      sessionAffinity: s.sessionAffinity ? { timeoutSeconds: s.sessionAffinity.timeoutSeconds ?? 0 } : null,
      internalTrafficPolicy: s.internalTrafficPolicy ?? '', externalTrafficPolicy: s.externalTrafficPolicy ?? '',
      healthCheckNodePort: s.healthCheckNodePort ?? 0,
      ports: (s.ports ?? []).map(servicePort),
      loadBalancerAllowedSources: ipset(s.loadBalancerAllowedSources),
    };
  }
  if (r.node) {
    const n = r.node;
    item.node = {
      name: n.name ?? '', zone: n.zone ?? '', addresses: [...(n.addresses ?? [])], podCidrs: ipset(n.podCidrs), nodePortAddresses: ipset(n.nodePortAddresses),
      podBridgeInterface: n.podBridgeInterface ?? '', podInterfaceNamePrefix: n.podInterfaceNamePrefix ?? '',
      ...(n.localhostNodePorts ? { localhostNodePorts: true } : {}),
    };
  }
  return item;
}

/** The addresses of one family of an IPSet. */
export const ofFamily = (s: IPSet, family: IPFamily): string[] => (family === IPFamily.IPV6 ? s.v6 : s.v4);

export function protocolName(p: Protocol): 'TCP' | 'UDP' | 'SCTP' {
  switch (p) {
    case Protocol.UDP: return 'UDP';
    case Protocol.SCTP: return 'SCTP';
    default: return 'TCP';
  }
}
