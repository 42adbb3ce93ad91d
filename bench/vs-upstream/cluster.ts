// The cluster both proxies follow: synthetic (N services x E endpoints) or a user's dump
// (`kubectl get nodes,services,endpointslices -A -o yaml`), created in the benchmark's API server,
// plus the writes the benchmark makes to it (one endpoint replaced, readiness flipped).
import * as fs from 'node:fs';
import { parseObjectsText } from '../../src/source/objects-file';
import type { ControlPlane } from '../../test/e2e/support/controlplane';
import { newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../../test/shared/objects';
import { ipv4Allocator, putAll, storedService, storedSlice, waitListed, type EtcdObject } from './etcd-fill';

/** One EndpointSlice as the benchmark last wrote it (the body it PUTs back, changed). */
export interface Slice { namespace: string; name: string; body: any }

export interface Cluster {
  /** The node both proxies run as. */
  node: string;
  /** Cluster IPs a service proxy programs (not headless, not ExternalName, no service-proxy-name). */
  clusterIps: string[];
  /** Slices with at least one endpoint: the ones the churn and the probes change. */
  slices: Slice[];
  services: number;
  endpoints: number;
}

export const POD_CIDR = '10.244.0.0/14';

/** Allocates endpoint addresses from a /16 range, e.g. ipRange(250) -> 10.250.0.1, 10.250.0.2, ... */
export function ipRange(second: number): () => string {
  let n = 0;
  return () => {
    const k = n++;
    return `10.${second + Math.floor(k / 65024)}.${Math.floor((k % 65024) / 254)}.${(k % 254) + 1}`;
  };
}

/** Runs tasks with at most `n` in flight. */
export async function pool<T>(items: T[], n: number, f: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) await f(items[i++]);
  }));
}

export async function must(cp: ControlPlane, method: string, p: string, body?: unknown): Promise<any> {
  for (let attempt = 0; ; attempt++) {
    const r = await cp.request(method, p, body, { timeoutMs: 60_000 });
    if (r.status >= 200 && r.status < 300) return r.body;
    if ((r.status === 429 || r.status >= 500 || r.status === 409) && attempt < 5) {
      await new Promise((res) => setTimeout(res, 100 * (attempt + 1)));
      continue;
    }
    throw new Error(`${method} ${p}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  }
}

function proxied(svc: any): string[] {
  const spec = svc?.spec ?? {};
  if (spec.type === 'ExternalName' || svc?.metadata?.labels?.['service.kubernetes.io/service-proxy-name']) return [];
  const ips: string[] = spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : []);
  return ips.filter((ip) => ip && ip !== 'None');
}

/**
 * How the synthetic objects get into the cluster: `api` creates them through the API server (as a
 * controller would), `etcd` writes them into etcd (etcd-fill.ts: for sizes the API server's quadratic
 * ClusterIP allocation makes impractical).
 */
export type Fill = 'api' | 'etcd';

/** N services with one TCP port each and E ready endpoints each, spread over 10 nodes. */
export async function createSynthetic(cp: ControlPlane, services: number, endpoints: number, concurrency: number, fill: Fill = 'api', serviceCidr = '10.96.0.0/12'): Promise<Cluster> {
  const nextIp = ipRange(244);
  const nodes = 10;
  for (let i = 0; i < nodes; i++) {
    await must(cp, 'POST', NODES, newNode(`n${i + 1}`, `zone-${'abc'[i % 3]}`));
    await must(cp, 'PATCH', `${NODES}/n${i + 1}/status`, nodeStatus([`192.168.0.${i + 1}`], new Date()));
  }
  const cluster: Cluster = { node: 'n1', clusterIps: [], slices: [], services, endpoints: services * endpoints };
  let podSeq = 0;
  const sliceOf = (name: string) => {
    const eps = Array.from({ length: endpoints }, () => {
      const k = podSeq++;
      return { ip: nextIp(), nodeName: `n${(k % nodes) + 1}`, zone: `zone-${'abc'[k % 3]}`, pod: `${name}-${k}` };
    });
    const body = newEndpointSlice(`${name}-abcde`, name, eps);
    if (endpoints > 0) cluster.slices.push({ namespace: 'default', name: `${name}-abcde`, body });
    return body;
  };
  if (fill === 'etcd') {
    const v4 = serviceCidr.split(',').find((c) => !c.includes(':'));
    if (!v4) throw new Error(`--fill etcd needs an IPv4 service CIDR (got ${serviceCidr})`);
    const clusterIp = ipv4Allocator(v4);
    const objects: EtcdObject[] = [];
    for (let i = 0; i < services; i++) {
      const ip = clusterIp();
      objects.push(storedService('default', `svc-${i}`, ip), storedSlice('default', sliceOf(`svc-${i}`)));
      cluster.clusterIps.push(ip);
    }
    await putAll(cp.etcdEndpoint, objects);
    // The `kubernetes` Service is in default too.
    await waitListed(cp, 'default', services + 1, services);
    return cluster;
  }
  await pool(Array.from({ length: services }, (_, i) => i), concurrency, async (i) => {
    const name = `svc-${i}`;
    const created = await must(cp, 'POST', SERVICES('default'), newService(name));
    cluster.clusterIps.push(...proxied(created));
    await must(cp, 'POST', SLICES('default'), sliceOf(name));
  });
  return cluster;
}

const DROP_META = ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'generation', 'ownerReferences', 'selfLink', 'generateName'];

function clean(o: any): any {
  const c = structuredClone(o);
  for (const k of DROP_META) delete c.metadata?.[k];
  delete c.status;
  return c;
}

/** The objects of a kubectl dump, recreated in the API server (cluster IPs are re-allocated). */
export async function createFromDump(cp: ControlPlane, file: string, nodeName: string | undefined, concurrency: number): Promise<Cluster> {
  const objs = parseObjectsText(fs.readFileSync(file, 'utf8'));
  const nodes = objs.Node as any[];
  const chosen = nodeName ?? nodes[0]?.metadata?.name ?? 'n1';
  if (!nodes.some((n) => n?.metadata?.name === chosen)) nodes.push({ metadata: { name: chosen }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.1' }] } });
  const namespaces = new Set<string>();
  for (const o of [...objs.Service, ...objs.EndpointSlice] as any[]) namespaces.add(o?.metadata?.namespace ?? 'default');
  for (const ns of namespaces) {
    if (ns === 'default') continue;
    const r = await cp.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    if (r.status !== 201 && r.status !== 409) throw new Error(`namespace ${ns}: HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  }
  for (const n of nodes) {
    const name = n?.metadata?.name;
    if (typeof name !== 'string') continue;
    await must(cp, 'POST', NODES, { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: n.metadata.labels ?? {} } });
    const addresses = n.status?.addresses ?? [];
    if (addresses.length) await must(cp, 'PATCH', `${NODES}/${name}/status`, { status: { addresses } });
  }
  const cluster: Cluster = { node: chosen, clusterIps: [], slices: [], services: 0, endpoints: 0 };
  const withIps = new Set<string>();
  await pool(objs.Service as any[], concurrency, async (s) => {
    const body = clean(s);
    // The dump's cluster IPs belong to its cluster's service range, not this API server's.
    delete body.spec?.clusterIP;
    delete body.spec?.clusterIPs;
    if (body.spec?.type === 'ExternalName' || s.spec?.clusterIP === 'None') {
      if (s.spec?.clusterIP === 'None') body.spec.clusterIP = 'None';
    }
    for (const p of body.spec?.ports ?? []) if (body.spec.type !== 'NodePort' && body.spec.type !== 'LoadBalancer') delete p.nodePort;
    delete body.spec?.healthCheckNodePort;
    const ns = s.metadata?.namespace ?? 'default';
    const created = await must(cp, 'POST', SERVICES(ns), body);
    const ips = proxied(created);
    cluster.clusterIps.push(...ips);
    if (ips.length) withIps.add(`${ns}/${created.metadata.name}`);
    cluster.services++;
  });
  await pool(objs.EndpointSlice as any[], concurrency, async (e) => {
    const body = clean(e);
    const ns = e.metadata?.namespace ?? 'default';
    await must(cp, 'POST', SLICES(ns), body);
    const n = (body.endpoints ?? []).length;
    cluster.endpoints += n;
    // The churn and the probes write IPv4 addresses into slices of proxied services.
    const svc = `${ns}/${body.metadata?.labels?.['kubernetes.io/service-name']}`;
    if (n > 0 && body.metadata?.name && body.addressType === 'IPv4' && withIps.has(svc)) cluster.slices.push({ namespace: ns, name: body.metadata.name, body });
  });
  return cluster;
}

/** Replaces the address of one endpoint of the slice with `ip` (ready, when `ready`) and writes the slice. */
export async function replaceEndpoint(cp: ControlPlane, s: Slice, ip: string, ready = false): Promise<void> {
  const eps = s.body.endpoints as any[];
  const e = eps[Math.floor(Math.random() * eps.length)];
  e.addresses = [ip];
  if (ready) e.conditions = { ...e.conditions, ready: true, serving: true, terminating: false };
  if (e.targetRef) e.targetRef = { ...e.targetRef, name: `pod-${ip.replace(/[.:]/g, '-')}` };
  await must(cp, 'PUT', `${SLICES(s.namespace)}/${s.name}`, s.body);
}

/** Flips the readiness of one endpoint of the slice and writes it. */
export async function flipReady(cp: ControlPlane, s: Slice): Promise<void> {
  const eps = s.body.endpoints as any[];
  const e = eps[Math.floor(Math.random() * eps.length)];
  const ready = !(e.conditions?.ready ?? true);
  e.conditions = { ...e.conditions, ready, serving: ready };
  await must(cp, 'PUT', `${SLICES(s.namespace)}/${s.name}`, s.body);
}

/** Makes every endpoint ready again (after a churn), so the next proxy starts from the same shape. */
export async function restoreReady(cp: ControlPlane, slices: Slice[], concurrency: number): Promise<number> {
  const dirty = slices.filter((s) => (s.body.endpoints as any[]).some((e) => e.conditions?.ready === false));
  await pool(dirty, concurrency, async (s) => {
    for (const e of s.body.endpoints as any[]) e.conditions = { ...e.conditions, ready: true, serving: true };
    await must(cp, 'PUT', `${SLICES(s.namespace)}/${s.name}`, s.body);
  });
  return dirty.length;
}

export interface ChurnOptions {
  /** Writes per second. */
  rate: number;
  seconds: number;
  nextIp: () => string;
  concurrency: number;
  /** Share of writes that change an endpoint (the rest only touch an annotation); default 1. */
  relevant?: number;
  log: (line: string) => void;
}

/**
 * Writes at `rate`/s for `seconds`, never two at once on one slice: an endpoint's address replaced or
 * its readiness flipped (half each), or, for the share that is not `relevant`, an annotation only
 * (what a proxy must ignore). Resolves with the number of writes that succeeded.
 */
export async function churn(cp: ControlPlane, slices: Slice[], o: ChurnOptions): Promise<number> {
  const busy = new Set<Slice>();
  let inFlight = 0, writes = 0, failures = 0, seq = 0;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const end = performance.now() + o.seconds * 1000;
  let due = performance.now();
  while (performance.now() < end) {
    const now = performance.now();
    if (now < due || inFlight >= o.concurrency || busy.size >= slices.length) { await sleep(Math.max(1, Math.min(due - now, 10))); continue; }
    due += 1000 / o.rate;
    let s: Slice;
    do s = slices[Math.floor(Math.random() * slices.length)]; while (busy.has(s));
    busy.add(s);
    inFlight++;
    const u = Math.random();
    const relevant = o.relevant ?? 1;
    const write = u >= relevant
      ? must(cp, 'PATCH', `${SLICES(s.namespace)}/${s.name}`, { metadata: { annotations: { 'bench/seq': String(++seq) } } })
      : u < relevant / 2 ? replaceEndpoint(cp, s, o.nextIp()) : flipReady(cp, s);
    write
      .then(() => writes++, (e: Error) => { if (++failures <= 3) o.log(`  write failed: ${e.message}`); })
      .finally(() => { inFlight--; busy.delete(s); });
  }
  while (inFlight > 0) await sleep(10);
  return writes;
}
