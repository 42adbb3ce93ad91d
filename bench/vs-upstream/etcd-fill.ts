// A large synthetic cluster written straight into etcd, for sizes the API server cannot create in
// reasonable time: kube-apiserver v1.37's ClusterIP allocator lists and parses every IPAddress object
// after each allocation (for its metrics), so creating n Services through the API costs O(n^2)
// (hours at the largest sizes). The objects are the ones createSynthetic() makes, in the
// form the API server stores them (defaults applied, cluster IPs chosen here from the service CIDR),
// as JSON: the API server decodes JSON from storage whatever its storage media type, and its watch
// cache picks them up from etcd's watch. Its IP repair loop then creates the IPAddress objects.
// Both proxies read them through the API server, as they would any Service and EndpointSlice.
import { randomUUID } from 'node:crypto';
import type { ControlPlane } from '../../test/e2e/support/controlplane';
import { newService, SERVICES, SLICES } from '../../test/shared/objects';

/** etcd's default limit of operations in one transaction (--max-txn-ops). */
const TXN_OPS = 128;

export interface EtcdObject { key: string; value: object }

/** The first usable addresses of an IPv4 CIDR, past `skip` (the API server allocates from the start). */
export function ipv4Allocator(cidr: string, skip = 1024): () => string {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr.trim());
  if (!m) throw new Error(`not an IPv4 CIDR: ${cidr}`);
  const base = ((+m[1] << 24) | (+m[2] << 16) | (+m[3] << 8) | +m[4]) >>> 0;
  const size = 2 ** (32 - +m[5]);
  let next = skip;
  return () => {
    if (next >= size - 1) throw new Error(`service CIDR ${cidr} is full (${size} addresses, the first ${skip} left to the API server)`);
    const a = (base + next++) >>> 0;
    return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
  };
}

const stamp = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** A Service as the API server stores it after defaulting and IP allocation (single-stack IPv4). */
export function storedService(ns: string, name: string, clusterIP: string): EtcdObject {
  const s = newService(name) as any;
  s.metadata = { name, namespace: ns, uid: randomUUID(), creationTimestamp: stamp() };
  s.spec = {
    ...s.spec,
    type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], sessionAffinity: 'None',
    ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack', internalTrafficPolicy: 'Cluster',
  };
  s.status = { loadBalancer: {} };
  return { key: `/registry/services/specs/${ns}/${name}`, value: s };
}

/** An EndpointSlice as stored: the body given plus the metadata the API server adds. */
export function storedSlice(ns: string, body: any): EtcdObject {
  const value = { ...body, metadata: { ...body.metadata, namespace: ns, uid: randomUUID(), generation: 1, creationTimestamp: stamp() } };
  return { key: `/registry/endpointslices/${ns}/${body.metadata.name}`, value };
}

/** Writes the objects with `concurrency` transactions of up to 128 puts in flight. */
export async function putAll(etcd: string, objects: EtcdObject[], concurrency = 4): Promise<void> {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  let i = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < objects.length) {
      const batch = objects.slice(i, (i += TXN_OPS));
      const body = JSON.stringify({ success: batch.map((o) => ({ requestPut: { key: b64(o.key), value: b64(JSON.stringify(o.value)) } })) });
      const res = await fetch(`${etcd}/v3/kv/txn`, { method: 'POST', body, headers: { 'Content-Type': 'application/json' } });
      if (!res.ok) throw new Error(`etcd txn of ${batch.length} puts: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
    }
  }));
}

/** How many objects a list through the API server returns (one item, plus remainingItemCount). */
async function count(cp: ControlPlane, p: string): Promise<number> {
  const r = await cp.request('GET', `${p}?limit=1`, undefined, { timeoutMs: 60_000 });
  if (r.status !== 200) throw new Error(`GET ${p}: HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  return (r.body.items?.length ?? 0) + (r.body.metadata?.remainingItemCount ?? 0);
}

/** Resolves once the API server lists at least `services` Services and `slices` EndpointSlices in `ns`. */
export async function waitListed(cp: ControlPlane, ns: string, services: number, slices: number, timeoutS = 600): Promise<void> {
  const deadline = performance.now() + timeoutS * 1000;
  for (;;) {
    const [s, e] = [await count(cp, SERVICES(ns)), await count(cp, SLICES(ns))];
    if (s >= services && e >= slices) return;
    if (performance.now() > deadline) throw new Error(`the API server lists ${s}/${services} services and ${e}/${slices} slices after ${timeoutS} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
