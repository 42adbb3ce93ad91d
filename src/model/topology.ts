// Which endpoints a node may use for one service port in one IP family: kube-proxy's rules
// (upstream pkg/proxy/topology.go, CategorizeEndpoints) restated for kpng's trimmed objects.
import type { PortEndpoint } from './slice-endpoints';

export type { PortEndpoint };


/** What CategorizeEndpoints needs to know of the service port. */
export interface PortPolicy {
  /** internalTrafficPolicy is Local. */
  internalLocal: boolean;
  /** The service is externally accessible and its externalTrafficPolicy is Local. */
  externalLocal: boolean;
  /** This port is reachable from outside: a node port, or external / load-balancer IPs of the family. */
  externallyAccessible: boolean;
}

export interface Categorized {
  /** Endpoints for Cluster policies (topology applied, terminating fallback); empty when unused. */
  cluster: PortEndpoint[];
  /** This node's endpoints for Local policies (terminating fallback); empty when unused. */
  local: PortEndpoint[];
  /** Some ready or serving-terminating endpoint exists anywhere in the cluster. */
  hasAny: boolean;
  /** The serving+terminating fallback was used for cluster / local endpoints. */
  clusterFallback: boolean;
  localFallback: boolean;
}

export interface NodeView {
  name: string;
  zone: string;
}

/**
 * Cluster endpoints are needed whenever internal traffic uses them, and whenever the port is reachable
 * from outside at all: even with externalTrafficPolicy Local, pods and the node itself reach external
 * destinations through the cluster-wide endpoints (upstream's short-circuit).
 */
export const usesClusterEndpoints = (p: PortPolicy): boolean => !p.internalLocal || p.externallyAccessible;
export const usesLocalEndpoints = (p: PortPolicy): boolean => p.internalLocal || (p.externallyAccessible && p.externalLocal);

export type TopologyMode = '' | 'node' | 'zone';

/**
 * Hints are used whenever every ready endpoint carries them (whatever trafficDistribution or the
 * topology-mode annotation say: the EndpointSlice controller only writes hints when asked to) and
 * some name this node, or its zone. Node hints win over zone hints.
 */
export function topologyMode(eps: readonly PortEndpoint[], node: NodeView): TopologyMode {
  let allNodeHints = true, forNode = false, allZoneHints = true, forZone = false;
  for (const ep of eps) {
    if (!ep.ready) continue;
    if (!ep.nodeHints) allNodeHints = false;
    else if (ep.nodeHints.includes(node.name)) forNode = true;
    if (!ep.zoneHints) allZoneHints = false;
    else if (node.zone !== '' && ep.zoneHints.includes(node.zone)) forZone = true;
  }
  if (allNodeHints && forNode) return 'node';
  if (allZoneHints && forZone) return 'zone';
  return '';
}

function available(ep: PortEndpoint, mode: TopologyMode, node: NodeView): boolean {
  if (mode === 'node') return ep.nodeHints?.includes(node.name) ?? false;
  if (mode === 'zone') return ep.zoneHints?.includes(node.zone) ?? false;
  return true;
}

export function categorize(eps: readonly PortEndpoint[], policy: PortPolicy, node: NodeView): Categorized {
  const out: Categorized = { cluster: [], local: [], hasAny: false, clusterFallback: false, localFallback: false };

  if (usesClusterEndpoints(policy)) {
    const mode = topologyMode(eps, node);
    out.cluster = eps.filter((ep) => ep.ready && available(ep, mode, node));
    if (out.cluster.length === 0) {
      // No ready endpoint (topology is only used when it leaves one): fall back to endpoints
      // that still serve while terminating.
      out.cluster = eps.filter((ep) => ep.serving && ep.terminating && available(ep, mode, node));
      out.clusterFallback = out.cluster.length > 0;
    }
    out.hasAny = out.cluster.length > 0;
  }
  if (!usesLocalEndpoints(policy)) return out;

  const isLocal = (ep: PortEndpoint) => ep.nodeName === node.name;
  let localReady = false, localServingTerminating = false;
  for (const ep of eps) {
    if (ep.ready) {
      out.hasAny = true;
      if (isLocal(ep)) localReady = true;
    } else if (ep.serving && ep.terminating) {
      out.hasAny = true;
      if (isLocal(ep)) localServingTerminating = true;
    }
  }
  if (localReady) out.local = eps.filter((ep) => isLocal(ep) && ep.ready);
  else if (localServingTerminating) {
    out.local = eps.filter((ep) => isLocal(ep) && ep.serving && ep.terminating);
    out.localFallback = true;
  }
  return out;
}
