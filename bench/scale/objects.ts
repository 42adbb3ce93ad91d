// The API objects of a load plan, shaped as ClusterLoader2's load templates shape them: a Deployment
// whose pods carry `group: load` and, for half the Deployments, `svc: <service>`; a Service selecting
// `svc: <its name>`. Pods run on kwok nodes only (node selector and the kwok taint's toleration): the
// real nodes, where the proxies run, get none.
import type { DeploymentPlan, ServicePlan } from './load-plan';

/** Labels and taint of the kwok nodes (hack/cluster/plan.ts makes them). */
export const KWOK_SELECTOR = { type: 'kwok' };
export const KWOK_TOLERATION = { key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' };
export const LOAD_LABEL = { group: 'load' };

export function namespaceObject(name: string): object {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { ...LOAD_LABEL } } };
}

export function serviceObject(s: ServicePlan): object {
  const f = s.features;
  const ports: object[] = [{ name: 'http', port: 80, targetPort: 80, protocol: 'TCP' }];
  if (f.multiPort) ports.push({ name: 'dns', port: 53, targetPort: 53, protocol: 'UDP' }, { name: 'https', port: 8443, targetPort: 8443, protocol: 'TCP' });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: s.name, namespace: s.namespace, labels: { ...LOAD_LABEL } },
    spec: {
      type: f.nodePortLocal ? 'NodePort' : 'ClusterIP',
      ...(f.nodePortLocal ? { externalTrafficPolicy: 'Local' } : {}),
      ...(f.sessionAffinity ? { sessionAffinity: 'ClientIP' } : {}),
      ...(f.preferClose ? { trafficDistribution: 'PreferClose' } : {}),
      selector: { svc: s.name },
      ports,
    },
  };
}

export function podTemplateLabels(d: DeploymentPlan): Record<string, string> {
  return { ...LOAD_LABEL, name: d.name, ...(d.service ? { svc: d.service } : {}) };
}

export function deploymentObject(d: DeploymentPlan, replicas = d.replicas, revision = 1): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: d.name, namespace: d.namespace, labels: { ...LOAD_LABEL } },
    spec: {
      replicas,
      selector: { matchLabels: { name: d.name } },
      template: {
        metadata: { labels: podTemplateLabels(d), annotations: templateAnnotation(revision) },
        spec: {
          nodeSelector: { ...KWOK_SELECTOR },
          tolerations: [{ ...KWOK_TOLERATION }],
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 1,
          containers: [{
            name: 'pause',
            image: 'registry.k8s.io/pause:3.10',
            ports: [{ containerPort: 80, protocol: 'TCP' }, { containerPort: 53, protocol: 'UDP' }, { containerPort: 8443, protocol: 'TCP' }],
          }],
        },
      },
    },
  };
}

/** A rolling update changes this annotation of the pod template (ClusterLoader2 changes an env var). */
export function templateAnnotation(revision: number): Record<string, string> {
  return { 'load.kpng.io/revision': String(revision) };
}
