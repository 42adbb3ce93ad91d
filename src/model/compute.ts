// Computes one service's ENLS item for one node from the trimmed objects.
import { hostPort, ipFamily } from './ip';
import { NODE_KEY, serviceKey, type Endpoint, type IPSet, type Item } from './enls';
import type { NodeSpec, ServiceSpec, SliceSpec } from './objects';
import { categorize, type NodeView, type PortEndpoint } from './topology';

/** Reachable from outside the cluster: node ports, load-balancer IPs or external IPs. */
export function isExternal(svc: ServiceSpec): boolean {
  return svc.type === 'NodePort' || svc.type === 'LoadBalancer' || svc.externalIPs.length > 0 || svc.loadBalancerIPs.length > 0;
}

function splitFamilies(ips: readonly string[]): IPSet {
  const v4: string[] = [], v6: string[] = [];
  for (const ip of ips) (ipFamily(ip) === 'IPv4' ? v4 : v6).push(ip);
  return { v4: [...new Set(v4)].sort(), v6: [...new Set(v6)].sort() };
}

/**
 * The endpoints of one service port across all of the service's slices: target port resolved
 * per slice (by port name), de-duplicated by address and port (slices in name order, first wins),
 * only in the service's IP families.
 */
export function portEndpoints(portName: string, slices: readonly SliceSpec[], families: ReadonlySet<string>): PortEndpoint[] {
  const byKey = new Map<string, PortEndpoint>();
  for (const slice of slices) {
    if (!families.has(slice.family)) continue;
    const sp = slice.ports.find((p) => p.name === portName);
    if (!sp) continue;
    for (const ep of slice.endpoints) {
      const key = hostPort(ep.ip, sp.port);
      if (!byKey.has(key)) byKey.set(key, { ...ep, port: sp.port });
    }
  }
  return [...byKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((e) => e[1]);
}

function toEndpoints(eps: readonly PortEndpoint[], node: NodeView, terminating: boolean): Endpoint[] {
  return eps.map((ep) => ({ ip: ep.ip, port: ep.port, local: ep.nodeName === node.name, terminating }));
}

export function computeServiceItem(svc: ServiceSpec, slices: readonly SliceSpec[], node: NodeView): Item {
  const external = isExternal(svc);
  const sortedSlices = [...slices].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const families = new Set(svc.clusterIPs.map((ip) => ipFamily(ip) as string));
  const ports = svc.ports.map((p) => {
    const eps = portEndpoints(p.name, sortedSlices, families);
    const c = categorize(svc, eps, node, external);
    const internalLocal = svc.internalTrafficPolicy === 'Local';
    const externalLocal = svc.externalTrafficPolicy === 'Local';
    return {
      port: { name: p.name, protocol: p.protocol, port: p.port, nodePort: p.nodePort },
      internal: internalLocal ? toEndpoints(c.local, node, c.localFallback) : toEndpoints(c.cluster, node, c.clusterFallback),
      external: !external ? [] : externalLocal ? toEndpoints(c.local, node, c.localFallback) : toEndpoints(c.cluster, node, c.clusterFallback),
      hasEndpoints: c.hasAny,
    };
  });
  const service = {
    namespace: svc.namespace,
    name: svc.name,
    type: svc.type,
    clusterIps: splitFamilies(svc.clusterIPs),
    externalIps: splitFamilies(svc.externalIPs),
    loadBalancerIps: splitFamilies(svc.loadBalancerIPs),
    loadBalancerSourceRanges: [...new Set(svc.loadBalancerSourceRanges)].sort(),
    sessionAffinity: svc.affinityTimeout === null ? null : { timeoutSeconds: svc.affinityTimeout },
    internalTrafficPolicy: svc.internalTrafficPolicy,
    externalTrafficPolicy: external ? svc.externalTrafficPolicy : 'Cluster',
    healthCheckNodePort: svc.healthCheckNodePort,
    external,
    ports,
  };
  return { key: serviceKey(svc.namespace, svc.name), service };
}

export function computeNodeItem(name: string, node: NodeSpec | undefined): Item {
  return { key: NODE_KEY, node: { name, zone: node?.zone ?? '', addresses: node?.addresses ?? [] } };
}
