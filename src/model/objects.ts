// The trimmed Kubernetes objects kpng keeps: only the fields a proxy needs. Everything
// else (managedFields, status noise, unrelated labels and annotations) is dropped when an
// object is parsed, so an update that only touches those fields changes nothing here.
import type { Protocol } from './enls';
import type { SliceEndpoint, SliceEndpoints } from './slice-endpoints';

export type { SliceEndpoint };

export type Family = 'IPv4' | 'IPv6';
export type TrafficPolicy = 'Cluster' | 'Local';

export interface ServicePortSpec {
  name: string;
  protocol: Protocol;
  port: number;
  nodePort: number;
}

export interface ServiceSpec {
  namespace: string;
  name: string;
  type: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  /** Canonical cluster IPs, primary first. */
  clusterIPs: string[];
  externalIPs: string[];
  /** status.loadBalancer.ingress[].ip, except ingresses with ipMode Proxy. */
  loadBalancerIPs: string[];
  loadBalancerSourceRanges: string[];
  ports: ServicePortSpec[];
  /** ClientIP affinity timeout in seconds, or null for no affinity. */
  affinityTimeout: number | null;
  internalTrafficPolicy: TrafficPolicy;
  externalTrafficPolicy: TrafficPolicy;
  healthCheckNodePort: number;
  /** spec.trafficDistribution, or null. */
  trafficDistribution: string | null;
  /** The service.kubernetes.io/topology-mode annotation (or its deprecated predecessor), or null. */
  topologyMode: string | null;
}

export interface SlicePort {
  name: string;
  protocol: Protocol;
  port: number;
}

export interface SliceSpec {
  namespace: string;
  name: string;
  /** Name of the owning service (kubernetes.io/service-name label). */
  service: string;
  family: Family;
  ports: SlicePort[];
  endpoints: SliceEndpoints;
}

export interface NodeSpec {
  name: string;
  zone: string;
  addresses: string[];
  /** Primary address per family (first InternalIP, else first ExternalIP), IPv4 first. */
  primary: string[];
  /** spec.podCIDRs, canonical, in the order given (the first of each family is the node's pod network). */
  podCIDRs: string[];
}

/** Why an object is not proxied although it is valid (not worth a warning). */
export interface Ignored { ignored: string }
