// The load of ClusterLoader2's `load` test (perf-tests clusterloader2/testing/load/config.yaml), as
// counts: one namespace per 100 nodes, 30 pods per node; in each namespace 1/4 of the pods in big
// Deployments (250 replicas), 1/4 in medium ones (30) and 1/2 in small ones (5); one Service per two
// Deployments of each size, selecting the Deployment of the same index. Pods are created at a set
// throughput (ClusterLoader2's LOAD_TEST_THROUGHPUT, 10 pods/s by default): each phase spreads its
// operations over a time limit, every operation at a random moment in it (RandomizedTimeLimitedLoad).

export const PODS_PER_NODE = 30;
export const NODES_PER_NAMESPACE = 100;
export const GROUP_SIZE = { big: 250, medium: 30, small: 5 } as const;
export type GroupKind = keyof typeof GROUP_SIZE;
export const GROUP_KINDS: readonly GroupKind[] = ['big', 'medium', 'small'];

export interface Profile {
  nodes: number;
  namespaces: number;
  /** Deployments of each size per namespace. */
  deployments: Record<GroupKind, number>;
  /** Services of each size per namespace: half the Deployments, rounded up. */
  services: Record<GroupKind, number>;
  /** Pods at saturation (every Deployment at its group size). */
  pods: number;
  /** Pods created per second: the create and delete phases last pods / throughput seconds. */
  throughput: number;
}

/**
 * The counts for a cluster of `nodes` nodes. Below 100 nodes ClusterLoader2 puts every node in one
 * namespace (NODES_PER_NAMESPACE = min(nodes, 100)); the Deployment counts then shrink with the pods,
 * and a profile too small for a big Deployment has none (the same integer divisions as the config).
 */
export function profileFor(nodes: number, throughput = 10): Profile {
  if (!Number.isInteger(nodes) || nodes < 1) throw new Error(`nodes: ${nodes} is not a positive whole number`);
  if (!(throughput > 0)) throw new Error(`throughput: ${throughput} is not a positive number of pods/s`);
  const perNs = Math.min(nodes, NODES_PER_NAMESPACE);
  const namespaces = Math.floor(nodes / perNs);
  const podsPerNs = perNs * PODS_PER_NODE;
  const deployments = {
    big: Math.floor(podsPerNs / (4 * GROUP_SIZE.big)),
    medium: Math.floor(podsPerNs / (4 * GROUP_SIZE.medium)),
    small: Math.floor(podsPerNs / (2 * GROUP_SIZE.small)),
  };
  const services = {
    big: Math.floor((deployments.big + 1) / 2),
    medium: Math.floor((deployments.medium + 1) / 2),
    small: Math.floor((deployments.small + 1) / 2),
  };
  const pods = namespaces * GROUP_KINDS.reduce((n, k) => n + deployments[k] * GROUP_SIZE[k], 0);
  return { nodes, namespaces, deployments, services, pods, throughput };
}

/** The named profiles of the bench (`--profile`): ClusterLoader2's node counts, and a tiny one for tests. */
export const NAMED_PROFILES: Record<string, number> = { tiny: 20, '100': 100, '1000': 1000, '5000': 5000 };

export function describeProfile(p: Profile): string {
  const svc = GROUP_KINDS.reduce((n, k) => n + p.services[k], 0) * p.namespaces;
  const dep = GROUP_KINDS.reduce((n, k) => n + p.deployments[k], 0) * p.namespaces;
  return `${p.nodes} nodes: ${p.namespaces} namespace(s), ${dep} Deployments, ${svc} Services, ${p.pods} pods at ${p.throughput} pods/s`;
}
