// Validates raw Kubernetes objects (anything a file or the API server hands us) and trims
// them to the fields kpng keeps. Never throws: a bad object comes back as a reason to skip.
import { Protocol } from './enls';
import { canonicalCIDR, canonicalIP, ipFamily } from './ip';
import type {
  Family, NodeSpec, ServicePortSpec, ServiceSpec, SliceEndpoint, SlicePort, SliceSpec, TrafficPolicy,
} from './objects';
import { SliceEndpoints } from './slice-endpoints';
import { Interner, orEmpty } from '../util/intern';

export type Parsed<T> =
  | { ok: true; value: T }
  | { ok: false; reason: string; /** valid but not proxied: no warning */ quiet?: boolean };

export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
export const LABEL_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
export const LABEL_HEADLESS = 'service.kubernetes.io/headless';
export const LABEL_ZONE = 'topology.kubernetes.io/zone';
export const ANNOTATION_TOPOLOGY_MODE = 'service.kubernetes.io/topology-mode';
export const ANNOTATION_TOPOLOGY_HINTS = 'service.kubernetes.io/topology-aware-hints';

/** Sizes no real object reaches (the API server caps slices at 1000 endpoints / 100 ports). */
export const LIMITS = { servicePorts: 100, ips: 64, sourceRanges: 1000, sliceEndpoints: 1000, slicePorts: 100, hints: 1000, name: 253 };
const DEFAULT_AFFINITY_TIMEOUT = 10800;

class Invalid extends Error {}
const fail = (reason: string): never => { throw new Invalid(reason); };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown, what: string): Obj => (v === undefined || v === null ? {} : isObj(v) ? v : fail(`${what} is not an object`));
const arr = (v: unknown, what: string, max: number): unknown[] => {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) return fail(`${what} is not a list`);
  if (v.length > max) return fail(`${what} has ${v.length} entries (more than ${max})`);
  return v;
};
const str = (v: unknown, what: string, dflt = ''): string => {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string') return fail(`${what} is not a string`);
  if (v.length > LIMITS.name) return fail(`${what} is longer than ${LIMITS.name} characters`);
  return v;
};
const port = (v: unknown, what: string, allowZero: boolean): number => {
  if ((v === undefined || v === null) && allowZero) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v)) return fail(`${what} ${JSON.stringify(v) ?? 'undefined'} is not a port number`);
  if (v === 0 && allowZero) return 0;
  if (v < 1 || v > 65535) return fail(`${what} ${v} out of range (1-65535)`);
  return v;
};
const protocol = (v: unknown, what: string): Protocol => {
  switch (v === undefined || v === null ? 'TCP' : v) {
    case 'TCP': return Protocol.TCP;
    case 'UDP': return Protocol.UDP;
    case 'SCTP': return Protocol.SCTP;
    default: return fail(`${what} ${JSON.stringify(v)} is not TCP, UDP or SCTP`);
  }
};
const ip = (v: unknown, what: string): string => canonicalIP(v) ?? fail(`${what} ${JSON.stringify(v)} is not an IP address`);
const policy = (v: unknown, what: string): TrafficPolicy => {
  if (v === undefined || v === null || v === '' || v === 'Cluster') return 'Cluster';
  if (v === 'Local') return 'Local';
  return fail(`${what} ${JSON.stringify(v)} is not Cluster or Local`);
};

function meta(o: Obj, namespaced: boolean): { namespace: string; name: string; labels: Obj; annotations: Obj } {
  const m = obj(o.metadata, 'metadata');
  const name = str(m.name, 'metadata.name');
  if (!name) fail('metadata.name is missing');
  const namespace = namespaced ? str(m.namespace, 'metadata.namespace', 'default') || 'default' : '';
  return { namespace, name, labels: obj(m.labels, 'metadata.labels'), annotations: obj(m.annotations, 'metadata.annotations') };
}

/** "namespace/name" of a raw object, as well as it can be read, for messages. */
export function objectName(o: unknown): string {
  const m = isObj(o) && isObj(o.metadata) ? o.metadata : {};
  const ns = typeof m.namespace === 'string' ? m.namespace : '';
  const name = typeof m.name === 'string' ? m.name : '<no name>';
  return ns ? `${ns}/${name}` : name;
}

function guard<T>(f: () => T | { ok: false; reason: string; quiet: true }): Parsed<T> {
  try {
    const v = f();
    if (isObj(v) && (v as Obj).quiet === true && (v as Obj).ok === false) return v as Parsed<T>;
    return { ok: true, value: v as T };
  } catch (e) {
    if (e instanceof Invalid) return { ok: false, reason: e.message };
    return { ok: false, reason: `unreadable object (${(e as Error)?.message ?? String(e)})` };
  }
}

const quiet = (reason: string) => ({ ok: false as const, reason, quiet: true as const });

/**
 * A Service, trimmed. `proxyName` is this proxy's service-proxy-name: services labelled with
 * another name are left to their own proxy. An invalid entry of spec.externalIPs or
 * spec.loadBalancerSourceRanges (fields the API server may not have validated in old objects) is
 * skipped, as upstream skips it, and described in `skipped`; the service keeps working.
 */
export function parseService(raw: unknown, proxyName = '', skipped: string[] = []): Parsed<ServiceSpec> {
  return guard(() => {
    if (!isObj(raw)) return fail('not an object');
    const { namespace, name, labels, annotations } = meta(raw, true);
    const proxyLabel = labels[LABEL_PROXY_NAME];
    if (proxyLabel !== undefined && proxyLabel !== proxyName) return quiet(`labelled ${LABEL_PROXY_NAME}=${String(proxyLabel)}`);
    const spec = obj(raw.spec, 'spec');
    const type = (str(spec.type, 'spec.type', 'ClusterIP') || 'ClusterIP') as ServiceSpec['type'] | 'ExternalName';
    if (type === 'ExternalName') return quiet('type ExternalName');
    if (type !== 'ClusterIP' && type !== 'NodePort' && type !== 'LoadBalancer') fail(`spec.type ${JSON.stringify(type)} is unknown`);
    const rawIPs = spec.clusterIPs !== undefined && spec.clusterIPs !== null
      ? arr(spec.clusterIPs, 'spec.clusterIPs', 2)
      : spec.clusterIP !== undefined && spec.clusterIP !== null && spec.clusterIP !== '' ? [spec.clusterIP] : [];
    if (rawIPs.includes('None')) return quiet('headless (clusterIP None)');
    if (rawIPs.length === 0) fail('spec.clusterIP is missing');
    const clusterIPs = rawIPs.map((v, i) => ip(v, `spec.clusterIPs[${i}]`));
    if (clusterIPs.length === 2 && ipFamily(clusterIPs[0]) === ipFamily(clusterIPs[1])) fail('spec.clusterIPs has two addresses of one family');

    const ports: ServicePortSpec[] = arr(spec.ports, 'spec.ports', LIMITS.servicePorts).map((p, i) => {
      const po = obj(p, `spec.ports[${i}]`);
      return {
        name: str(po.name, `spec.ports[${i}].name`),
        protocol: protocol(po.protocol, `spec.ports[${i}].protocol`),
        port: port(po.port, `spec.ports[${i}].port`, false),
        nodePort: port(po.nodePort, `spec.ports[${i}].nodePort`, true),
      };
    });
    const seen = new Set<string>();
    for (const p of ports) {
      const k = `${p.protocol}/${p.port}`;
      if (seen.has(k)) fail(`spec.ports has port ${p.port} twice for one protocol`);
      seen.add(k);
    }
    const names = new Set(ports.map((p) => p.name));
    if (names.size !== ports.length) fail('spec.ports has two ports with one name');

    const externalIPs: string[] = [];
    arr(spec.externalIPs, 'spec.externalIPs', LIMITS.ips).forEach((v, i) => {
      const c = canonicalIP(v);
      if (c) externalIPs.push(c); else skipped.push(`spec.externalIPs[${i}] ${JSON.stringify(v)} is not an IP address`);
    });
    const loadBalancerSourceRanges: string[] = [];
    arr(spec.loadBalancerSourceRanges, 'spec.loadBalancerSourceRanges', LIMITS.sourceRanges).forEach((v, i) => {
      const c = canonicalCIDR(typeof v === 'string' ? v.trim() : v);
      if (c) loadBalancerSourceRanges.push(c); else skipped.push(`spec.loadBalancerSourceRanges[${i}] ${JSON.stringify(v)} is not a CIDR`);
    });
    const status = obj(raw.status, 'status');
    const lb = obj(status.loadBalancer, 'status.loadBalancer');
    const loadBalancerIPs: string[] = [];
    arr(lb.ingress, 'status.loadBalancer.ingress', LIMITS.ips).forEach((g, i) => {
      const go = obj(g, `status.loadBalancer.ingress[${i}]`);
      if (go.ip === undefined || go.ip === null || go.ip === '') return; // hostname-only ingress
      const v = ip(go.ip, `status.loadBalancer.ingress[${i}].ip`);
      if (go.ipMode !== 'Proxy') loadBalancerIPs.push(v);
    });

    let affinityTimeout: number | null = null;
    const affinity = str(spec.sessionAffinity, 'spec.sessionAffinity', 'None') || 'None';
    if (affinity === 'ClientIP') {
      const cfg = obj(obj(spec.sessionAffinityConfig, 'spec.sessionAffinityConfig').clientIP, 'spec.sessionAffinityConfig.clientIP');
      const t = cfg.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT;
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 1 || t > 86400) fail(`spec.sessionAffinityConfig.clientIP.timeoutSeconds ${JSON.stringify(t)} out of range (1-86400)`);
      affinityTimeout = t as number;
    } else if (affinity !== 'None') fail(`spec.sessionAffinity ${JSON.stringify(affinity)} is not None or ClientIP`);

    const hc = spec.healthCheckNodePort;
    const td = spec.trafficDistribution;
    const mode = annotations[ANNOTATION_TOPOLOGY_MODE] ?? annotations[ANNOTATION_TOPOLOGY_HINTS];
    return {
      namespace, name, type, clusterIPs,
      externalIPs: orEmpty(externalIPs), loadBalancerIPs: orEmpty(loadBalancerIPs), loadBalancerSourceRanges: orEmpty(loadBalancerSourceRanges),
      ports: internPorts(servicePortLists, ports),
      affinityTimeout,
      internalTrafficPolicy: policy(spec.internalTrafficPolicy, 'spec.internalTrafficPolicy'),
      externalTrafficPolicy: policy(spec.externalTrafficPolicy, 'spec.externalTrafficPolicy'),
      healthCheckNodePort: port(hc, 'spec.healthCheckNodePort', true),
      trafficDistribution: typeof td === 'string' && td !== '' ? td : null,
      topologyMode: typeof mode === 'string' && mode !== '' ? mode : null,
    } satisfies ServiceSpec;
  });
}

export interface ParsedSlice {
  slice: SliceSpec;
  /** Endpoints dropped for a reason (the slice itself is kept). */
  skipped: string[];
}

export function parseEndpointSlice(raw: unknown): Parsed<ParsedSlice> {
  return guard(() => {
    if (!isObj(raw)) return fail('not an object');
    const { namespace, name, labels } = meta(raw, true);
    const service = labels[LABEL_SERVICE_NAME];
    if (typeof service !== 'string' || service === '') fail(`label ${LABEL_SERVICE_NAME} is missing`);
    const addressType = raw.addressType;
    if (addressType === 'FQDN') return quiet('addressType FQDN');
    if (addressType !== 'IPv4' && addressType !== 'IPv6') fail(`addressType ${JSON.stringify(addressType)} is not IPv4 or IPv6`);
    const family = addressType as Family;
    const ports: SlicePort[] = [];
    arr(raw.ports, 'ports', LIMITS.slicePorts).forEach((p, i) => {
      const po = obj(p, `ports[${i}]`);
      // A port without a number means "all ports": kube-proxy has nothing to program for it.
      if (po.port === undefined || po.port === null) return;
      ports.push({ name: str(po.name, `ports[${i}].name`), protocol: protocol(po.protocol, `ports[${i}].protocol`), port: port(po.port, `ports[${i}].port`, false) });
    });
    const skipped: string[] = [];
    const endpoints: SliceEndpoint[] = [];
    arr(raw.endpoints, 'endpoints', LIMITS.sliceEndpoints).forEach((e, i) => {
      try {
        endpoints.push(parseEndpoint(e, i, family));
      } catch (err) {
        if (!(err instanceof Invalid)) throw err;
        skipped.push(err.message);
      }
    });
    return { slice: { namespace, name, service: service as string, family, ports: internPorts(slicePortLists, ports), endpoints: SliceEndpoints.of(endpoints) }, skipped };
  });
}

function bool(v: unknown, what: string): boolean | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') return fail(`${what} is not a boolean`);
  return v;
}

function hintNames(v: unknown, what: string): string[] | null {
  const list = arr(v, what, LIMITS.hints).map((h, i) => str(obj(h, `${what}[${i}]`).name, `${what}[${i}].name`));
  return list.length ? [...new Set(list)].sort() : null;
}

/**
 * One string per node name: every endpoint names its node, and a parsed list gives each its own copy
 * (on a large cluster, hundreds of thousands of copies of a few hundred names).
 */
const nodeNames = new Interner<string>(65_536);

/**
 * One frozen list per distinct port list: most services and slices of a cluster have one of a few
 * (80/TCP "http", 443/TCP...), and the model's items reuse the service's port objects.
 */
const servicePortLists = new Interner<ServicePortSpec[]>(16_384);
const slicePortLists = new Interner<SlicePort[]>(16_384);
function internPorts<P extends SlicePort>(table: Interner<P[]>, ports: P[]): P[] {
  if (ports.length === 0) return orEmpty(ports);
  const key = JSON.stringify(ports); // every field, so a field added to the specs is never left out
  return table.intern(key, Object.freeze(ports.map((p) => Object.freeze(p))) as P[]);
}

function parseEndpoint(e: unknown, i: number, family: Family): SliceEndpoint {
  const eo = obj(e, `endpoints[${i}]`);
  const addrs = arr(eo.addresses, `endpoints[${i}].addresses`, 100);
  if (addrs.length === 0) fail(`endpoints[${i}] has no address`);
  const address = ip(addrs[0], `endpoints[${i}].addresses[0]`);
  if (ipFamily(address) !== family) fail(`endpoints[${i}].addresses[0] ${address} is not ${family}`);
  const c = obj(eo.conditions, `endpoints[${i}].conditions`);
  // As kube-proxy reads them (the API's defaults): ready and serving unset mean true, terminating unset means false.
  const ready = bool(c.ready, `endpoints[${i}].conditions.ready`) ?? true;
  const serving = bool(c.serving, `endpoints[${i}].conditions.serving`) ?? true;
  const terminating = bool(c.terminating, `endpoints[${i}].conditions.terminating`) ?? false;
  const hints = obj(eo.hints, `endpoints[${i}].hints`);
  const nodeName = str(eo.nodeName, `endpoints[${i}].nodeName`);
  return {
    ip: address, ready, serving, terminating,
    nodeName: nodeName ? nodeNames.intern(nodeName, nodeName) : null,
    zoneHints: hintNames(hints.forZones, `endpoints[${i}].hints.forZones`),
    nodeHints: hintNames(hints.forNodes, `endpoints[${i}].hints.forNodes`),
  };
}

export function parseNode(raw: unknown): Parsed<NodeSpec> {
  return guard(() => {
    if (!isObj(raw)) return fail('not an object');
    const { name, labels } = meta(raw, false);
    const zone = labels[LABEL_ZONE];
    const status = obj(raw.status, 'status');
    const addresses = new Set<string>();
    const internal: string[] = [], external: string[] = [];
    arr(status.addresses, 'status.addresses', LIMITS.ips).forEach((a, i) => {
      const ao = obj(a, `status.addresses[${i}]`);
      const v = canonicalIP(ao.address);
      if (!v || (ao.type !== 'InternalIP' && ao.type !== 'ExternalIP')) return;
      addresses.add(v);
      (ao.type === 'InternalIP' ? internal : external).push(v);
    });
    // The node's primary address per family, as kubelet and kube-proxy pick it: the first InternalIP
    // of the family, else the first ExternalIP.
    const primary: string[] = [];
    for (const fam of ['IPv4', 'IPv6'] as const) {
      const p = internal.find((ip) => ipFamily(ip) === fam) ?? external.find((ip) => ipFamily(ip) === fam);
      if (p) primary.push(p);
    }
    // spec.podCIDRs (spec.podCIDR on objects written before it existed); an entry that is not a CIDR
    // is skipped rather than rejecting the Node, whose addresses matter more.
    const spec = obj(raw.spec, 'spec');
    const given = spec.podCIDRs !== undefined && spec.podCIDRs !== null ? arr(spec.podCIDRs, 'spec.podCIDRs', LIMITS.ips) : [spec.podCIDR];
    const podCIDRs = given.map((c) => canonicalCIDR(c)).filter((c): c is string => c !== null);
    return { name, zone: typeof zone === 'string' ? zone : '', addresses: [...addresses].sort(), primary, podCIDRs };
  });
}
