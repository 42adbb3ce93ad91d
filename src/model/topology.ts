// Which endpoints a node may use for one service port: kube-proxy's rules (upstream
// pkg/proxy/topology.go, CategorizeEndpoints) restated for kpng's trimmed objects.
import type { ServiceSpec, SliceEndpoint } from './objects';

/** An endpoint of one service port, target port resolved. */
export interface PortEndpoint extends SliceEndpoint {
  port: number;
}

export interface Categorized {
  /** Endpoints for traffic with a Cluster policy (topology applied, terminating fallback). */
  cluster: PortEndpoint[];
  /** This node's endpoints for traffic with a Local policy (terminating fallback). */
  local: PortEndpoint[];
  /** Some ready or serving-terminating endpoint exists anywhere. */
  hasAny: boolean;
  /** The serving+terminating fallback was used for cluster / local endpoints. */
  clusterFallback: boolean;
  localFallback: boolean;
}

export interface NodeView {
  name: string;
  zone: string;
}

const PREFER = new Set(['PreferClose', 'PreferSameZone', 'PreferSameNode']);

/** Is topology filtering asked for by this service (trafficDistribution wins over the annotation)? */
export function topologyRequested(svc: ServiceSpec): boolean {
  if (svc.trafficDistribution !== null) return PREFER.has(svc.trafficDistribution);
  return svc.topologyMode === 'Auto' || svc.topologyMode === 'auto';
}

type Mode = '' | 'node' | 'zone';

/** Hints are used only when every ready endpoint carries them and some name this node (or its zone). */
export function topologyMode(svc: ServiceSpec, eps: readonly PortEndpoint[], node: NodeView): Mode {
  if (!topologyRequested(svc)) return '';
  let allNodeHints = true, forNode = false, allZoneHints = true, forZone = false, anyReady = false;
  for (const ep of eps) {
    if (!ep.ready) continue;
    anyReady = true;
    if (!ep.nodeHints) allNodeHints = false;
    else if (ep.nodeHints.includes(node.name)) forNode = true;
    if (!ep.zoneHints) allZoneHints = false;
    else if (node.zone !== '' && ep.zoneHints.includes(node.zone)) forZone = true;
  }
  if (!anyReady) return '';
  if (svc.trafficDistribution === 'PreferSameNode' && allNodeHints && forNode) return 'node';
  if (node.zone !== '' && allZoneHints && forZone) return 'zone';
  return '';
}

function available(ep: PortEndpoint, mode: Mode, node: NodeView): boolean {
  if (mode === 'node') return ep.nodeHints?.includes(node.name) ?? false;
  if (mode === 'zone') return ep.zoneHints?.includes(node.zone) ?? false;
  return true;
}

export function categorize(svc: ServiceSpec, eps: readonly PortEndpoint[], node: NodeView, external: boolean): Categorized {
  const itpLocal = svc.internalTrafficPolicy === 'Local';
  const etpLocal = external && svc.externalTrafficPolicy === 'Local';
  const usesCluster = !itpLocal || (external && !etpLocal);
  const usesLocal = itpLocal || etpLocal;
  const out: Categorized = { cluster: [], local: [], hasAny: false, clusterFallback: false, localFallback: false };

  if (usesCluster) {
    const mode = topologyMode(svc, eps, node);
    out.cluster = eps.filter((ep) => ep.ready && available(ep, mode, node));
    if (out.cluster.length === 0) {
      // No ready endpoint anywhere (topology is only used when it leaves one): fall back to
      // endpoints that still serve while terminating.
      out.cluster = eps.filter((ep) => ep.serving && ep.terminating && available(ep, mode, node));
      out.clusterFallback = out.cluster.length > 0;
    }
    out.hasAny = out.cluster.length > 0;
  }
  if (!usesLocal) return out;

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
