// Model + diff throughput on synthetic clusters: N services with 10 endpoints each (one
// EndpointSlice per service; slices hold up to 100 endpoints). Prints a table; asserts nothing.
//   node --expose-gc dist/bench/model.bench.js [--sizes 1000,10000,50000] [--events 20000]
import { parseArgs } from 'node:util';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { ep, slice, svc } from '../test/shared/objects';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '1000,10000,50000' }, events: { type: 'string', default: '20000' } } });
const sizes = values.sizes!.split(',').map(Number);
const EVENTS = Number(values.events);
const EPS = 10;
const NODES = 100;

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

const service = (i: number, resourceVersion = '1', app = `app-${i}`) => svc(`svc-${i}`, {
  bare: true, ns: `ns${i % 50}`, resourceVersion, labels: { app },
  type: i % 10 === 0 ? 'NodePort' : 'ClusterIP', clusterIP: `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
  ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: i % 10 === 0 ? 30000 + (i % 2000) : undefined }],
});

const endpointSlice = (i: number, gen: number, readyMask = 0x3ff) => slice(`svc-${i}-abcde`, `svc-${i}`, Array.from({ length: EPS }, (_, e) => {
  const n = i * EPS + e;
  return ep(`10.${128 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`, { ready: ((readyMask >> e) & 1) === 1, node: `node-${n % NODES}` });
}), { ns: `ns${i % 50}`, resourceVersion: String(gen) });

interface Row { services: number; endpoints: number; firstStateMs: number; eventsPerSec: number; changedPct: number; heapPerEndpoint: number; rss: number }

function run(n: number): Row {
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const store = new ClusterStore({ log: silentLogger });
  const state = new NodeState(store, 'node-0');
  const sub = state.subscribe();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) store.apply('Service', service(i));
  for (let i = 0; i < n; i++) store.apply('EndpointSlice', endpointSlice(i, 1));
  store.markSynced();
  const first = sub.take();
  const firstStateMs = performance.now() - t0;
  if (first.changes.length !== n + 1) throw new Error(`expected ${n + 1} items, got ${first.changes.length}`);
  gc();
  const heapPerEndpoint = (process.memoryUsage().heapUsed - heap0) / (n * EPS);

  // Churn like a live cluster: half the events flip one endpoint's readiness (a change), the
  // other half are no-op updates (new resourceVersion / labels only). One flush per event, as
  // the kube source does when events arrive one by one.
  const revBefore = state.revision;
  const t1 = performance.now();
  for (let k = 0; k < EVENTS; k++) {
    const i = (k * 7919) % n;
    if (k % 2 === 0) store.apply('EndpointSlice', endpointSlice(i, k + 2, 0x3ff ^ (1 << (k % EPS))));
    else store.apply('Service', service(i, String(k), `x${k}`));
    store.flush();
    if (k % 100 === 0) sub.take();
  }
  const churnMs = performance.now() - t1;
  const row = {
    services: n, endpoints: n * EPS, firstStateMs, eventsPerSec: EVENTS / (churnMs / 1000),
    changedPct: ((state.revision - revBefore) / EVENTS) * 100, heapPerEndpoint, rss: process.memoryUsage.rss() / 1048576,
  };
  state.close();
  return row;
}

const rows = sizes.map(run);
console.log(`model + diff benchmark (node ${process.version}, one core, ${EVENTS} churn events per size; ${(globalThis as { gc?: unknown }).gc ? 'gc exposed' : 'run with --expose-gc for exact heap figures'})`);
console.log('services  endpoints  first-full-state  events/s  revs/events  heap/endpoint  rss');
for (const r of rows) {
  console.log(`${String(r.services).padStart(8)}  ${String(r.endpoints).padStart(9)}  ${r.firstStateMs.toFixed(0).padStart(13)} ms  ${r.eventsPerSec.toFixed(0).padStart(8)}  ${r.changedPct.toFixed(1).padStart(10)}%  ${r.heapPerEndpoint.toFixed(0).padStart(11)} B  ${r.rss.toFixed(0)} MiB`);
}
