// Builders of raw Kubernetes objects for tests, shaped as the API server returns them.
import { ClusterStore } from '../../src/store/cluster';
import { NodeState } from '../../src/store/node-state';
import { routeRows, type RouteRow } from '../../src/sink/routes';
import { createLogger, type Logger } from '../../src/util/log';
import { severityAndMessage } from './klog';
import type { ModelOptions } from '../../src/model/options';

export type Obj = Record<string, unknown>;

export interface SvcOpts {
  ns?: string; type?: string; clusterIPs?: string[]; ports?: Obj[]; externalIPs?: string[];
  lbIPs?: string[]; sourceRanges?: string[]; itp?: string; etp?: string; affinity?: number;
  trafficDistribution?: string; annotations?: Obj; labels?: Obj; extraSpec?: Obj;
}

export function svc(name: string, o: SvcOpts = {}): Obj {
  const clusterIPs = o.clusterIPs ?? ['10.96.0.1'];
  return {
    apiVersion: 'v1', kind: 'Service',
    metadata: { namespace: o.ns ?? 'default', name, labels: o.labels, annotations: o.annotations, resourceVersion: '1' },
    spec: {
      type: o.type ?? 'ClusterIP', clusterIP: clusterIPs[0], clusterIPs,
      ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }],
      externalIPs: o.externalIPs, loadBalancerSourceRanges: o.sourceRanges,
      internalTrafficPolicy: o.itp, externalTrafficPolicy: o.etp,
      sessionAffinity: o.affinity ? 'ClientIP' : 'None',
      sessionAffinityConfig: o.affinity ? { clientIP: { timeoutSeconds: o.affinity } } : undefined,
      trafficDistribution: o.trafficDistribution,
      ...o.extraSpec,
    },
    status: o.lbIPs ? { loadBalancer: { ingress: o.lbIPs.map((ip) => ({ ip })) } } : {},
  };
}

export interface EpOpts { node?: string; ready?: boolean; serving?: boolean; terminating?: boolean; zones?: string[]; nodes?: string[] }
export const ep = (ip: string, o: EpOpts = {}): Obj => ({
  addresses: [ip],
  conditions: { ready: o.ready, serving: o.serving, terminating: o.terminating },
  nodeName: o.node,
  hints: o.zones || o.nodes ? { forZones: o.zones?.map((name) => ({ name })), forNodes: o.nodes?.map((name) => ({ name })) } : undefined,
});

export function slice(name: string, service: string, endpoints: Obj[], o: { ns?: string; ports?: Obj[]; family?: string } = {}): Obj {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { namespace: o.ns ?? 'default', name, labels: { 'kubernetes.io/service-name': service } },
    addressType: o.family ?? 'IPv4',
    ports: o.ports ?? [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints,
  };
}

export const node = (name: string, zone?: string, extra: Obj = {}): Obj => ({
  apiVersion: 'v1', kind: 'Node',
  metadata: { name, labels: zone ? { 'topology.kubernetes.io/zone': zone } : {} },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.50.1' }], ...extra },
});

/** A store + node state for `nodeName`, fed with objects, plus the warnings said. */
export function cluster(nodeName = 'n1', objects: Obj[] = [], opts: { serviceProxyName?: string; model?: ModelOptions } = {}) {
  const warnings: string[] = [];
  // Each line must be klog's; kept as `warn: message` (the header's time and pid say nothing here).
  const log: Logger = createLogger('warn', (l) => warnings.push(severityAndMessage(l)));
  const store = new ClusterStore({ log, serviceProxyName: opts.serviceProxyName, model: opts.model });
  const state = new NodeState(store, nodeName);
  const add = (...objs: Obj[]) => {
    for (const o of objs) store.apply(o.kind as 'Service', o);
    store.flush();
  };
  const del = (o: Obj) => { store.apply(o.kind as 'Service', o, true); store.flush(); };
  add(...objects);
  store.markSynced();
  return { store, state, warnings, add, del, routes: (): RouteRow[] => routeRows(state.items()) };
}

/** The routes of one service, by port. */
export function routesOf(rows: RouteRow[], service: string): RouteRow[] {
  return rows.filter((r) => r.service === service);
}
