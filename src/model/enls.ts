// The ENLS (proto/localv1.proto) as strict TypeScript types, and its protobuf codec.
// protobufjs' generated classes type every nested field as optional; kpng always fills
// every field, so consumers get these strict shapes instead (decoded messages are brought
// to them by `normalizeItem`).
import { kpng } from '../gen/proto';

/** The generated protobufjs codec (encode/decode/toObject) for kpng.localv1. */
export const pb = kpng.localv1;
export const Protocol = kpng.localv1.Protocol;
export type Protocol = kpng.localv1.Protocol;

export interface IPSet { v4: string[]; v6: string[] }
export interface Port { name: string; protocol: Protocol; port: number; nodePort: number }
export interface Endpoint { ip: string; port: number; local: boolean; terminating: boolean }
export interface PortEndpoints { port: Port; internal: Endpoint[]; external: Endpoint[]; hasEndpoints: boolean }
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
  external: boolean;
  ports: PortEndpoints[];
}
export interface NodeInfo { name: string; zone: string; addresses: string[] }
/** One keyed item: exactly one of service / node is set. */
export interface Item { key: string; service?: Service | null; node?: NodeInfo | null }

export const NODE_KEY = 'node';
export const serviceKey = (namespace: string, name: string): string => `svc/${namespace}/${name}`;

export function encodeItem(item: Item): Uint8Array {
  return pb.Item.encode(item).finish();
}

/** Decodes an Item and fills every field, so it has the strict shape above. */
export function decodeItem(bytes: Uint8Array): Item {
  return normalizeItem(pb.Item.toObject(pb.Item.decode(bytes), { defaults: true, longs: Number, enums: Number, oneofs: false }));
}

const ipset = (s: Partial<IPSet> | null | undefined): IPSet => ({ v4: [...(s?.v4 ?? [])], v6: [...(s?.v6 ?? [])] });
const endpoint = (e: Partial<Endpoint>): Endpoint => ({ ip: e.ip ?? '', port: e.port ?? 0, local: !!e.local, terminating: !!e.terminating });

/** Brings a decoded or hand-written item to the strict shape (missing fields take proto defaults). */
export function normalizeItem(raw: unknown): Item {
  const r = raw as { key?: string; service?: Partial<Service> | null; node?: Partial<NodeInfo> | null };
  const item: Item = { key: r.key ?? '' };
  if (r.service) {
    const s = r.service;
    item.service = {
      namespace: s.namespace ?? '', name: s.name ?? '', type: s.type ?? '',
      clusterIps: ipset(s.clusterIps), externalIps: ipset(s.externalIps), loadBalancerIps: ipset(s.loadBalancerIps),
      loadBalancerSourceRanges: [...(s.loadBalancerSourceRanges ?? [])],
      sessionAffinity: s.sessionAffinity ? { timeoutSeconds: s.sessionAffinity.timeoutSeconds ?? 0 } : null,
      internalTrafficPolicy: s.internalTrafficPolicy ?? '', externalTrafficPolicy: s.externalTrafficPolicy ?? '',
      healthCheckNodePort: s.healthCheckNodePort ?? 0, external: !!s.external,
      ports: (s.ports ?? []).map((p: Partial<PortEndpoints>) => ({
        port: { name: p.port?.name ?? '', protocol: p.port?.protocol ?? Protocol.PROTOCOL_UNSPECIFIED, port: p.port?.port ?? 0, nodePort: p.port?.nodePort ?? 0 },
        internal: (p.internal ?? []).map(endpoint),
        external: (p.external ?? []).map(endpoint),
        hasEndpoints: !!p.hasEndpoints,
      })),
    };
  }
  if (r.node) item.node = { name: r.node.name ?? '', zone: r.node.zone ?? '', addresses: [...(r.node.addresses ?? [])] };
  return item;
}

export function protocolName(p: Protocol): 'TCP' | 'UDP' | 'SCTP' {
  switch (p) {
    case Protocol.UDP: return 'UDP';
    case Protocol.SCTP: return 'SCTP';
    default: return 'TCP';
  }
}
