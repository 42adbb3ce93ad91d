// The objects and operations of a load run, computed from a profile and a seed before anything is sent:
// which Services exist with which features, which Deployments back them, and per phase which
// operation runs at which moment. Pure: the same (profile, seed) gives the same plan.
import { GROUP_KINDS, GROUP_SIZE, type GroupKind, type Profile } from './profile';
import { Rand } from './rand';

export interface ServiceFeatures {
  /** Also 53/UDP and 8443/TCP beside 80/TCP. */
  multiPort: boolean;
  /** type NodePort with externalTrafficPolicy: Local. */
  nodePortLocal: boolean;
  sessionAffinity: boolean;
  /** trafficDistribution: PreferClose (topology hints by zone). */
  preferClose: boolean;
}

export interface ServicePlan { namespace: string; name: string; features: ServiceFeatures }

export interface DeploymentPlan {
  namespace: string;
  name: string;
  kind: GroupKind;
  replicas: number;
  /** The Service whose selector picks this Deployment's pods (half the Deployments have one). */
  service?: string;
}

export type Operation =
  | { at: number; op: 'create-service'; service: ServicePlan }
  | { at: number; op: 'create-deployment'; deployment: DeploymentPlan }
  | { at: number; op: 'scale'; deployment: DeploymentPlan; replicas: number }
  | { at: number; op: 'update'; deployment: DeploymentPlan; revision: number }
  | { at: number; op: 'delete-deployment'; deployment: DeploymentPlan }
  | { at: number; op: 'delete-service'; service: ServicePlan };

export type PhaseName = 'create' | 'scale' | 'update' | 'delete';
export const PHASES: readonly PhaseName[] = ['create', 'scale', 'update', 'delete'];

export interface Phase {
  name: PhaseName;
  /** Seconds over which the operations are spread. */
  timeLimit: number;
  /** Sorted by `at` (seconds from the phase's start). */
  ops: Operation[];
}

export interface LoadPlan {
  profile: Profile;
  seed: number;
  namespaces: string[];
  services: ServicePlan[];
  deployments: DeploymentPlan[];
  phases: Phase[];
}

/** Shares of Services with each feature (drawn independently per Service). */
export const FEATURE_SHARES = { multiPort: 0.2, nodePortLocal: 0.1, sessionAffinity: 0.1, preferClose: 0.2 };

export const namespaceName = (i: number, prefix = 'load'): string => `${prefix}-${i}`;

export function planLoad(profile: Profile, seed: number, nsPrefix = 'load'): LoadPlan {
  const rand = new Rand(seed);
  const namespaces: string[] = [];
  const services: ServicePlan[] = [];
  const deployments: DeploymentPlan[] = [];
  for (let n = 1; n <= profile.namespaces; n++) {
    const namespace = namespaceName(n, nsPrefix);
    namespaces.push(namespace);
    for (const kind of GROUP_KINDS) {
      for (let i = 0; i < profile.services[kind]; i++) {
        const features: ServiceFeatures = {
          multiPort: rand.chance(FEATURE_SHARES.multiPort),
          nodePortLocal: rand.chance(FEATURE_SHARES.nodePortLocal),
          sessionAffinity: rand.chance(FEATURE_SHARES.sessionAffinity),
          preferClose: rand.chance(FEATURE_SHARES.preferClose),
        };
        services.push({ namespace, name: `${kind}-service-${i}`, features });
      }
      for (let i = 0; i < profile.deployments[kind]; i++) {
        const service = i < profile.services[kind] ? `${kind}-service-${i}` : undefined;
        deployments.push({ namespace, name: `${kind}-deployment-${i}`, kind, replicas: GROUP_SIZE[kind], service });
      }
    }
  }
  const saturation = profile.pods / profile.throughput;
  const at = (limit: number) => Math.round(rand.next() * limit * 1000) / 1000;
  const sorted = (ops: Operation[]) => ops.sort((a, b) => a.at - b.at);
  // ClusterLoader2 creates the Services one after the other before the Deployments.
  const create: Operation[] = services.map((service) => ({ at: 0, op: 'create-service' as const, service }));
  create.push(...sorted(deployments.map((deployment) => ({ at: at(saturation), op: 'create-deployment' as const, deployment }))));
  // Each Deployment to a size drawn from [X/2, 3X/2]: about a quarter of the pods change, hence the
  // quarter of the saturation time (ClusterLoader2's RandomizedScalingTimeLimited).
  const scale = sorted(deployments.map((deployment) => {
    const x = GROUP_SIZE[deployment.kind];
    return { at: at(saturation / 4), op: 'scale' as const, deployment, replicas: rand.int(Math.floor(x / 2), Math.floor((3 * x) / 2)) };
  }));
  const update = sorted(deployments.map((deployment) => ({ at: at(saturation / 4), op: 'update' as const, deployment, revision: 2 })));
  const del: Operation[] = sorted(deployments.map((deployment) => ({ at: at(saturation), op: 'delete-deployment' as const, deployment })));
  const last = del.length ? del[del.length - 1].at : 0;
  del.push(...services.map((service) => ({ at: last, op: 'delete-service' as const, service })));
  return {
    profile,
    seed,
    namespaces,
    services,
    deployments,
    phases: [
      { name: 'create', timeLimit: saturation, ops: create },
      { name: 'scale', timeLimit: saturation / 4, ops: scale },
      { name: 'update', timeLimit: saturation / 4, ops: update },
      { name: 'delete', timeLimit: saturation, ops: del },
    ],
  };
}

/** The replicas each Deployment should have once a phase has run (for the settle check). */
export function replicasAfter(plan: LoadPlan, phase: PhaseName): Map<string, number> {
  const want = new Map<string, number>();
  for (const p of plan.phases) {
    for (const o of p.ops) {
      if (o.op === 'create-deployment') want.set(`${o.deployment.namespace}/${o.deployment.name}`, o.deployment.replicas);
      else if (o.op === 'scale') want.set(`${o.deployment.namespace}/${o.deployment.name}`, o.replicas);
      else if (o.op === 'delete-deployment') want.delete(`${o.deployment.namespace}/${o.deployment.name}`);
    }
    if (p.name === phase) break;
  }
  return want;
}
