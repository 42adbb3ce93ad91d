// Kubernetes objects as the e2e tests and the events benchmark write them to the API server.
export const SERVICES = (ns: string) => `/api/v1/namespaces/${ns}/services`;
export const SLICES = (ns: string) => `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
export const NODES = '/api/v1/nodes';

export interface PortSpec { name?: string; port: number; targetPort?: number | string; protocol?: 'TCP' | 'UDP' | 'SCTP' }

export function service(name: string, opts: { ports?: PortSpec[]; labels?: Record<string, string>; annotations?: Record<string, string>; type?: string; clusterIP?: string; internalTrafficPolicy?: string } = {}): object {
  const ports = (opts.ports ?? [{ name: 'http', port: 80, targetPort: 8080 }]).map((p) => ({ protocol: 'TCP', ...p }));
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, labels: opts.labels, annotations: opts.annotations },
    spec: { selector: { app: name }, ports, type: opts.type, clusterIP: opts.clusterIP, internalTrafficPolicy: opts.internalTrafficPolicy },
  };
}

export interface EndpointSpec { ip: string; ready?: boolean; serving?: boolean; terminating?: boolean; nodeName?: string; zone?: string; pod?: string }

export function endpointSlice(name: string, svc: string, endpoints: EndpointSpec[], opts: { ports?: PortSpec[]; labels?: Record<string, string>; annotations?: Record<string, string>; addressType?: string } = {}): object {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name,
      labels: { 'kubernetes.io/service-name': svc, 'endpointslice.kubernetes.io/managed-by': 'kpng-test', ...opts.labels },
      annotations: opts.annotations,
    },
    addressType: opts.addressType ?? 'IPv4',
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
      nodeName: e.nodeName,
      zone: e.zone,
      targetRef: e.pod ? { kind: 'Pod', namespace: 'default', name: e.pod } : undefined,
    })),
    ports: (opts.ports ?? [{ name: 'http', port: 8080 }]).map((p) => ({ protocol: 'TCP', ...p })),
  };
}

export function node(name: string, zone: string, labels: Record<string, string> = {}): object {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'topology.kubernetes.io/zone': zone, 'kubernetes.io/hostname': name, ...labels } } };
}

/** A Node status as the kubelet reports it (addresses, conditions with heartbeats). */
export function nodeStatus(addresses: string[], heartbeat: Date): object {
  const t = heartbeat.toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    status: {
      addresses: addresses.map((a, i) => ({ type: i === 0 ? 'InternalIP' : 'ExternalIP', address: a })),
      conditions: [
        { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: t, lastTransitionTime: '2026-01-01T00:00:00Z' },
        { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', lastHeartbeatTime: t, lastTransitionTime: '2026-01-01T00:00:00Z' },
      ],
    },
  };
}
