// What a node's kernel should send each cluster IP to, computed from the API objects alone with
// kube-proxy's rules for cluster traffic, independently of any proxy's code: the ready endpoints (or,
// when none is ready, the serving terminating ones); with topology (trafficDistribution PreferClose
// or the topology-mode annotation) only those hinted for the node's zone, when the node has a zone,
// every ready endpoint has zone hints and at least one names the node's zone.
import type { ClusterIpTable } from './kernel-state';

export interface NodeInfo { name: string; zone?: string }

interface SlicePort { name?: string; port?: number; protocol?: string }
interface SliceEndpoint {
  addresses: string[];
  conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
  hints?: { forZones?: { name: string }[] };
  nodeName?: string;
}
interface Slice { addressType: string; metadata: { labels?: Record<string, string> }; ports?: SlicePort[] | null; endpoints?: SliceEndpoint[] | null }

const bracket = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);
const family = (ip: string) => (ip.includes(':') ? 'IPv6' : 'IPv4');

const ready = (e: SliceEndpoint) => e.conditions?.ready !== false;
const servingTerminating = (e: SliceEndpoint) => e.conditions?.ready === false && e.conditions?.serving === true && e.conditions?.terminating === true;

function usesTopology(svc: any): boolean {
  const mode = svc.metadata?.annotations?.['service.kubernetes.io/topology-mode'] ?? svc.metadata?.annotations?.['service.kubernetes.io/topology-aware-hints'];
  return svc.spec?.trafficDistribution === 'PreferClose' || svc.spec?.trafficDistribution === 'PreferSameZone' || (mode !== undefined && mode !== '' && mode.toLowerCase() !== 'disabled');
}

/** The endpoints a node sends a service port's cluster traffic to, before topology. */
function pick(eps: SliceEndpoint[]): SliceEndpoint[] {
  const r = eps.filter(ready);
  return r.length ? r : eps.filter(servingTerminating);
}

function byZone(svc: any, eps: SliceEndpoint[], node: NodeInfo): SliceEndpoint[] {
  if (!usesTopology(svc) || !node.zone) return eps;
  let forZone = false;
  for (const e of eps) {
    if (!ready(e)) continue;
    const zones = e.hints?.forZones ?? [];
    if (zones.length === 0) return eps;
    if (zones.some((z) => z.name === node.zone)) forZone = true;
  }
  if (!forZone) return eps;
  return eps.filter((e) => (e.hints?.forZones ?? []).some((z) => z.name === node.zone));
}

/** The expected table of one node from every Service and EndpointSlice of the cluster. */
export function expectedClusterIps(services: any[], slices: Slice[], node: NodeInfo): ClusterIpTable {
  const slicesOf = new Map<string, Slice[]>();
  for (const s of slices) {
    const svc = s.metadata.labels?.['kubernetes.io/service-name'];
    const ns = (s.metadata as any).namespace;
    if (!svc || (s.addressType !== 'IPv4' && s.addressType !== 'IPv6')) continue;
    const key = `${ns}/${svc}`;
    slicesOf.set(key, [...(slicesOf.get(key) ?? []), s]);
  }
  const table: ClusterIpTable = new Map();
  for (const svc of services) {
    const spec = svc.spec ?? {};
    if (spec.type === 'ExternalName') continue;
    const ips: string[] = (spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : [])).filter((ip: string) => ip && ip !== 'None');
    for (const ip of ips) {
      for (const port of spec.ports ?? []) {
        const protocol = port.protocol ?? 'TCP';
        const eps: SliceEndpoint[] = [];
        const ports = new Map<SliceEndpoint, number>();
        for (const s of slicesOf.get(`${svc.metadata.namespace}/${svc.metadata.name}`) ?? []) {
          if (s.addressType !== family(ip)) continue;
          const sp = (s.ports ?? []).find((p) => (p.name ?? '') === (port.name ?? '') && (p.protocol ?? 'TCP') === protocol);
          if (!sp || sp.port === undefined) continue;
          for (const e of s.endpoints ?? []) { eps.push(e); ports.set(e, sp.port); }
        }
        const chosen = byZone(svc, pick(eps), node);
        const targets = new Set<string>();
        for (const e of chosen) targets.add(`${bracket(e.addresses[0])}:${ports.get(e)}`);
        table.set(`${bracket(ip)}:${port.port}/${protocol}`, [...targets].sort());
      }
    }
  }
  return table;
}
