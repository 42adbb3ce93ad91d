// Stale UDP conntrack entries, computed from ENLS changes (kube-proxy's cleanup, for every kernel
// backend that DNATs): UDP has no connection end, so an entry to a removed endpoint would keep
// black-holing its flow, and one created while a service had no endpoint would keep refusing it.
import type { ConntrackFilter } from '../../native/nft-types';
import { Protocol, ofFamily, type Routes, type Service, type ServicePort } from '../../model/enls';
import { routeEndpoints } from '../../model/views';
import type { IpFamily } from '../../native/nft-expr';


interface UdpDestinations {
  fam: IpFamily;
  /** Service addresses with the service port. */
  vips: string[];
  port: number;
  /** 0 when there is no node port. */
  nodePort: number;
  /** Endpoints (address and target port) some client class is DNATed to, by `address port`. */
  endpoints: Map<string, { ip: string; port: number }>;
}

function used(sp: ServicePort): Map<string, { ip: string; port: number }> {
  const out = new Map<string, { ip: string; port: number }>();
  const routes = [sp.clusterIp, sp.externalIp, sp.loadBalancerIp, sp.nodePort].filter((r): r is Routes => r !== null);
  for (const rs of routes) {
    for (const r of [rs.pod, rs.node, rs.other]) for (const e of routeEndpoints(sp, r)) out.set(`${e.ip} ${e.port}`, { ip: e.ip, port: e.port });
  }
  return out;
}

function hasUdpPort(svc: Service): boolean {
  for (const sp of svc.ports) if (sp.port.protocol === Protocol.UDP) return true;
  return false;
}

/** The UDP service ports of a service, by "family/port" identity. */
function udpPorts(svc: Service | null): Map<string, UdpDestinations> {
  const out = new Map<string, UdpDestinations>();
  if (!svc) return out;
  for (const sp of svc.ports) {
    if (sp.port.protocol !== Protocol.UDP) continue;
    const fam: IpFamily = sp.family === 2 ? 'ip6' : 'ip';
    const vips = [...ofFamily(svc.clusterIps, sp.family), ...(sp.externalIp ? ofFamily(svc.externalIps, sp.family) : []), ...(sp.loadBalancerIp ? ofFamily(svc.loadBalancerIps, sp.family) : [])];
    out.set(`${fam}/${sp.port.port}`, { fam, vips, port: sp.port.port, nodePort: sp.nodePort ? sp.port.nodePort : 0, endpoints: used(sp) });
  }
  return out;
}

/**
 * Entries made stale by one service's change: to endpoints no longer used (an endpoint is its address
 * and target port: a target port change leaves the pod but strands its flows); to ports that gained
 * endpoints.
 */
export function staleUdpFilters(oldSvc: Service | null, newSvc: Service | null): ConntrackFilter[] {
  const out: ConntrackFilter[] = [];
  const olds = udpPorts(oldSvc), news = udpPorts(newSvc);
  for (const [id, o] of olds) {
    const keep = news.get(id)?.endpoints;
    for (const [key, ep] of o.endpoints) {
      if (keep?.has(key)) continue;
      const gone = { replySrc: ep.ip, replySport: ep.port };
      for (const vip of o.vips) out.push({ family: o.fam, proto: 'udp', origDst: vip, dport: o.port, ...gone });
      if (o.nodePort) out.push({ family: o.fam, proto: 'udp', dport: o.nodePort, ...gone });
    }
  }
  for (const [id, n] of news) {
    if (n.endpoints.size === 0 || (olds.get(id)?.endpoints.size ?? 0) > 0) continue;
    for (const vip of n.vips) out.push({ family: n.fam, proto: 'udp', origDst: vip, dport: n.port });
    if (n.nodePort) out.push({ family: n.fam, proto: 'udp', dport: n.nodePort });
  }
  return out;
}

/**
 * After a full sync (start-up, a failed batch), kpng does not know what changed: every DNATed UDP entry
 * to a service whose reply source is not one of the endpoints in use now is stale. The filters of one
 * service, appended to `out` (the kernel sink gives the event loop turns between services).
 */
export function addFullSyncUdpFilters(svc: Service, out: ConntrackFilter[]): void {
  // Most services have no UDP port: skipped without building their (empty) map.
  if (!hasUdpPort(svc)) return;
  for (const d of udpPorts(svc).values()) {
    const keepReplySrc = [...new Set([...d.endpoints.values()].map((e) => e.ip))];
    for (const vip of d.vips) out.push({ family: d.fam, proto: 'udp', origDst: vip, dport: d.port, keepReplySrc });
    if (d.nodePort) out.push({ family: d.fam, proto: 'udp', dport: d.nodePort, keepReplySrc });
  }
}
