// Where a packet goes, per destination and per class of client (a pod, the node itself, anything
// else), and whether it is masqueraded: the decisions upstream's nftables proxier takes in
// syncProxyRules (kubernetes pkg/proxy/nftables/proxier.go), taken here once for every backend.
import { Target, type Route, type Routes } from './enls';
import type { PortPolicy } from './topology';

export interface RouteInputs extends PortPolicy {
  /** Some usable endpoint exists anywhere (CategorizeEndpoints' hasAnyEndpoints). */
  hasEndpoints: boolean;
  /** This node has endpoints for the Local policies. */
  hasLocalEndpoints: boolean;
}

export interface ClassOptions {
  /** --masquerade-all. */
  masqueradeAll: boolean;
  /** Pods can be told apart (--cluster-cidr given): without it, pods are clients like any other. */
  podClass: boolean;
}

// Routes are immutable and few: one frozen object per combination, shared by every item (a Routes
// and its three Route objects per destination were ~150 B of heap a service port).
const routeKey = (target: Target, masquerade: boolean): number => target * 2 + (masquerade ? 1 : 0);
const keyOf = (r: Route): number => routeKey(r.target, r.masquerade);
const routeTable = new Map<number, Route>();
const routesTable = new Map<number, Routes>();

function route(target: Target, masquerade = false): Route {
  const k = routeKey(target, masquerade);
  let r = routeTable.get(k);
  if (!r) routeTable.set(k, (r = Object.freeze({ target, masquerade })));
  return r;
}

function routes(pod: Route, node: Route, other: Route): Routes {
  const k = (keyOf(pod) * 64 + keyOf(node)) * 64 + keyOf(other);
  let r = routesTable.get(k);
  if (!r) routesTable.set(k, (r = Object.freeze({ pod, node, other })));
  return r;
}

const reject = (): Route => route(Target.REJECT);

/**
 * Cluster IPs. Target: the Cluster endpoints, or with internalTrafficPolicy Local this node's (drop
 * when it has none); reject when the service has no endpoint at all. Masquerade: everything with
 * --masquerade-all; otherwise, when pods can be told apart, whatever does not come from a pod (the
 * node, another host routing the service range here), since its replies could bypass this node.
 */
export function clusterIpRoutes(p: RouteInputs, o: ClassOptions): Routes {
  if (!p.hasEndpoints) return routes(reject(), reject(), reject());
  const target = !p.internalLocal ? Target.CLUSTER : p.hasLocalEndpoints ? Target.LOCAL : Target.DROP;
  const dnat = target !== Target.DROP;
  const notPod = dnat && (o.masqueradeAll || o.podClass);
  return routes(route(target, dnat && o.masqueradeAll), route(target, notPod), route(target, notPod));
}

/**
 * External IPs, load-balancer IPs and node ports. Reject without any endpoint. externalTrafficPolicy
 * Cluster: the Cluster endpoints, masqueraded (the endpoint may be on another node). Local: traffic
 * from outside keeps its source address and goes to this node's endpoints, or is dropped when there
 * are none; pods and the node itself are short-circuited to the Cluster endpoints whether or not this
 * node has local ones ("as if they went out to the load balancer and came back"); the node is
 * masqueraded (its source address would be the external address itself), pods are not (--masquerade-all
 * does not apply: upstream masquerades only traffic whose destination is the cluster IP).
 */
export function externalRoutes(p: RouteInputs, o: ClassOptions): Routes {
  if (!p.hasEndpoints) return routes(reject(), reject(), reject());
  if (!p.externalLocal) {
    const r = route(Target.CLUSTER, true);
    return routes(r, r, r);
  }
  const other = p.hasLocalEndpoints ? route(Target.LOCAL) : route(Target.DROP);
  return routes(o.podClass ? route(Target.CLUSTER) : other, route(Target.CLUSTER, true), other);
}
