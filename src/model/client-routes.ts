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

const route = (target: Target, masquerade = false): Route => ({ target, masquerade });
const reject = (): Route => route(Target.REJECT);

/**
 * Cluster IPs. Target: the Cluster endpoints, or with internalTrafficPolicy Local this node's (drop
 * when it has none); reject when the service has no endpoint at all. Masquerade: everything with
 * --masquerade-all; otherwise, when pods can be told apart, whatever does not come from a pod (the
 * node, another host routing the service range here), since its replies could bypass this node.
 */
export function clusterIpRoutes(p: RouteInputs, o: ClassOptions): Routes {
  if (!p.hasEndpoints) return { pod: reject(), node: reject(), other: reject() };
  const target = !p.internalLocal ? Target.CLUSTER : p.hasLocalEndpoints ? Target.LOCAL : Target.DROP;
  const dnat = target !== Target.DROP;
  const notPod = dnat && (o.masqueradeAll || o.podClass);
  return {
    pod: route(target, dnat && o.masqueradeAll),
    node: route(target, notPod),
    other: route(target, notPod),
  };
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
  if (!p.hasEndpoints) return { pod: reject(), node: reject(), other: reject() };
  if (!p.externalLocal) {
    const r = (): Route => route(Target.CLUSTER, true);
    return { pod: r(), node: r(), other: r() };
  }
  const other = p.hasLocalEndpoints ? route(Target.LOCAL) : route(Target.DROP);
  return {
    pod: o.podClass ? route(Target.CLUSTER) : { ...other },
    node: route(Target.CLUSTER, true),
    other,
  };
}
