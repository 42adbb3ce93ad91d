// Reading the ENLS back, for every backend and for people: which endpoints a route leads to, whether it
// DNATs, which sources a load-balancer firewall lets through, where node ports answer; short texts for
// the routes, trace and example views. The rules were decided by compute.ts: nothing is decided again.
import { cidrContains, hostPort } from './ip';
import { EndpointList, IPFamily, ofFamily, Target, type NodeInfo, type Route, type Routes, type Service, type ServicePort } from './enls';

/** Whether the route sends to endpoints (CLUSTER or LOCAL) rather than refusing (REJECT, DROP). */
export const isDnat = (r: Route): boolean => r.target === Target.CLUSTER || r.target === Target.LOCAL;

/**
 * Of a port's two endpoint lists (or the same two filtered alike), the one a target sends to: the
 * local list for LOCAL, the cluster list for CLUSTER; null for any other target.
 */
export function pickEndpoints<L>(target: Target, cluster: L, local: L): L | null {
  return target === Target.CLUSTER ? cluster : target === Target.LOCAL ? local : null;
}

/** The endpoints a route DNATs to (empty for REJECT / DROP). */
export function routeEndpoints(sp: ServicePort, r: Route): EndpointList {
  return pickEndpoints(r.target, sp.clusterEndpoints, sp.localEndpoints) ?? EndpointList.EMPTY;
}

/**
 * The sources a port's load-balancer IPs let through (its family's loadBalancerAllowedSources), or null
 * when no firewall applies: compute.ts decided it (loadBalancerFirewall); a port without load-balancer
 * IPs or allowed sources of its family has nothing to filter.
 */
export function firewallSources(svc: Service, sp: ServicePort): string[] | null {
  if (!sp.loadBalancerFirewall || ofFamily(svc.loadBalancerIps, sp.family).length === 0) return null;
  const allowed = ofFamily(svc.loadBalancerAllowedSources, sp.family);
  return allowed.length > 0 ? allowed : null;
}

/**
 * Of `addrs` (addresses this node holds), those of `family` where node ports answer: inside the node
 * item's nodePortAddresses, never loopback ones. None without a node item.
 */
export function nodePortAddresses(node: NodeInfo | undefined, family: IPFamily, addrs: readonly string[]): string[] {
  if (!node) return [];
  const v6 = family === IPFamily.IPV6;
  const cidrs = ofFamily(node.nodePortAddresses, family);
  return addrs.filter((a) => a.includes(':') === v6 && a !== '::1' && !a.startsWith('127.') && cidrs.some((c) => cidrContains(c, a)));
}

/** The routes of the port's external destinations (they are computed alike), or null when it has none. */
export function externalRoutesOf(sp: ServicePort): Routes | null {
  return sp.nodePort ?? sp.loadBalancerIp ?? sp.externalIp;
}

export const targetName = (t: Target): string =>
  t === Target.CLUSTER ? 'cluster' : t === Target.LOCAL ? 'local' : t === Target.REJECT ? 'reject' : t === Target.DROP ? 'drop' : 'unspecified';

/** "10.0.0.1:80,10.0.0.2:80" or "drop" / "reject", plus "+masq" when masqueraded. */
export function describeRoute(sp: ServicePort, r: Route): string {
  const eps = routeEndpoints(sp, r).map((e) => hostPort(e.ip, e.port)).join(',');
  const what = isDnat(r) ? `${targetName(r.target)}[${eps}]` : targetName(r.target);
  return r.masquerade ? `${what}+masq` : what;
}

/** pod=... node=... other=..., collapsed to one text when all classes agree. */
export function describeRoutes(sp: ServicePort, rs: Routes): string {
  const [p, n, o] = [describeRoute(sp, rs.pod), describeRoute(sp, rs.node), describeRoute(sp, rs.other)];
  return p === n && n === o ? p : `pod:${p} node:${n} other:${o}`;
}
