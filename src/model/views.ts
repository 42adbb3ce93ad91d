// Reading the ENLS back for people and simple consumers: which endpoints a route leads to, and
// short texts for the routes, trace and example views. No Kubernetes rule is decided here.
import { hostPort } from './ip';
import { EndpointList, Target, type Route, type Routes, type ServicePort } from './enls';

/** The endpoints a route DNATs to (empty for REJECT / DROP). */
export function routeEndpoints(sp: ServicePort, r: Route): EndpointList {
  if (r.target === Target.CLUSTER) return sp.clusterEndpoints;
  if (r.target === Target.LOCAL) return sp.localEndpoints;
  return EndpointList.EMPTY;
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
  const what = r.target === Target.CLUSTER || r.target === Target.LOCAL ? `${targetName(r.target)}[${eps}]` : targetName(r.target);
  return r.masquerade ? `${what}+masq` : what;
}

/** pod=... node=... other=..., collapsed to one text when all classes agree. */
export function describeRoutes(sp: ServicePort, rs: Routes): string {
  const [p, n, o] = [describeRoute(sp, rs.pod), describeRoute(sp, rs.node), describeRoute(sp, rs.other)];
  return p === n && n === o ? p : `pod:${p} node:${n} other:${o}`;
}
