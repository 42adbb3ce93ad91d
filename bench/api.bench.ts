// The Watch API under load: a server with 10k services and 100 clients (in 4 worker threads,
// each client on its own connection over a unix socket). Prints, for two shapes (100 nodes with one client
// each, as in a cluster; one node with 100 clients, the pure fan-out), the time until every
// client has its first full state, the bytes of gRPC messages, and the cost of one change
// fanned out to all clients. Figures only; nothing is asserted.
//
//   npm run build && node dist/bench/api.bench.js [services=10000] [clients=100] [workers=4]
import { mkdtempSync, rmSync } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import os from 'node:os';
import path from 'node:path';
import { serveApi } from '../src/api/server';
import { WatchClient } from '../src/api/client';
import { ClusterStore } from '../src/store/cluster';
import { silentLogger } from '../src/util/log';

const SERVICES = Number(process.argv[2] ?? 10000);
const CLIENTS = Number(process.argv[3] ?? 100);
const NODES = 100;
const WORKERS = Number(process.argv[4] ?? 4);
/** The burst changes services BURST_FIRST.. BURST_FIRST+99; clients watch the first one. */
const BURST_FIRST = Math.floor(SERVICES / 2);
const BURST_KEY = `svc/ns${BURST_FIRST % 50}/svc${BURST_FIRST}`;

function slice(i: number, ports: number) {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { namespace: `ns${i % 50}`, name: `svc${i}-abcde`, labels: { 'kubernetes.io/service-name': `svc${i}` } },
    addressType: 'IPv4', ports: [{ name: 'http', protocol: 'TCP', port: ports }],
    endpoints: [0, 1, 2].map((k) => ({ addresses: [`10.${(i >> 8) & 255}.${i & 255}.${k + 1}`], conditions: { ready: true }, nodeName: `n${(i + k * 37) % NODES}` })),
  };
}

function makeCluster(): ClusterStore {
  const c = new ClusterStore({ log: silentLogger });
  for (let n = 0; n < NODES; n++) c.apply('Node', { metadata: { name: `n${n}`, labels: { 'topology.kubernetes.io/zone': `z${n % 3}` } } });
  for (let i = 0; i < SERVICES; i++) {
    const ip = `10.96.${(i >> 8) & 255}.${i & 255}`;
    c.apply('Service', { metadata: { namespace: `ns${i % 50}`, name: `svc${i}` }, spec: { type: i % 10 ? 'ClusterIP' : 'NodePort', clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: i % 10 ? undefined : 30000 + (i % 2000) }] } });
    c.apply('EndpointSlice', slice(i, 8080));
  }
  c.markSynced();
  return c;
}

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const mib = (b: number) => `${fmt(b / 1048576, 1)} MiB`;

interface Row { shape: string; what: string; ms: number; bytes: number; messages: number; note: string }

/** What a worker tells about one batch of one of its clients. */
interface BatchNote { i: number; reset: boolean; changes: number; items: number; keys: string[]; port1000: number; bytes: number; messages: number }

/** Clients run in worker threads (their decoding is not charged to the server's thread). */
function runWorker(): void {
  const { api, nodes, first } = workerData as { api: string; nodes: string[]; first: number };
  const clients = nodes.map((node, k) => {
    const c = new WatchClient({ api, node, log: silentLogger });
    void c.run((b) => {
      const svc = b.changes.find((ch) => ch.key === BURST_KEY);
      const note: BatchNote = {
        i: first + k, reset: b.reset, changes: b.changes.length, items: b.items,
        keys: b.changes.length <= 5 ? b.changes.map((ch) => ch.key) : [],
        port1000: svc?.op === 'set' ? svc.item.service!.ports[0].clusterEndpoints[0]?.port ?? 0 : 0,
        bytes: c.stats.bytes, messages: c.stats.messages,
      };
      parentPort!.postMessage(note);
    });
    return c;
  });
  parentPort!.on('message', async () => {
    await Promise.all(clients.map((c) => c.stop()));
    parentPort!.postMessage('stopped');
  });
}

async function scenario(shape: string, nodeOf: (i: number) => string, rows: Row[]): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kpng-bench-'));
  const store = makeCluster();
  const server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/kpng.sock`, maxStreamsPerConnection: 16 });
  const last: (BatchNote | undefined)[] = new Array(CLIENTS).fill(undefined);
  const batches = new Array<number>(CLIENTS).fill(0);
  let check: () => void = () => undefined;
  const until = (f: () => boolean) => new Promise<void>((resolve) => { check = () => { if (f()) resolve(); }; check(); });
  const t0 = performance.now();
  const workers: Worker[] = [];
  const per = Math.ceil(CLIENTS / WORKERS);
  for (let w = 0; w < WORKERS; w++) {
    const first = w * per;
    const nodes = Array.from({ length: Math.max(0, Math.min(per, CLIENTS - first)) }, (_, k) => nodeOf(first + k));
    const worker = new Worker(__filename, { workerData: { api: server.address, nodes, first }, argv: process.argv.slice(2) });
    worker.on('message', (m: BatchNote | string) => {
      if (typeof m === 'string') return;
      if (process.env.BENCH_DEBUG) console.error(JSON.stringify(m));
      last[m.i] = m;
      batches[m.i]++;
      check();
    });
    workers.push(worker);
  }
  const sum = (f: (n: BatchNote) => number) => last.reduce((a, n) => a + (n ? f(n) : 0), 0);
  await until(() => batches.every((b) => b >= 1));
  const tFirst = performance.now() - t0;
  const bytes1 = sum((n) => n.bytes);
  const msgs1 = sum((n) => n.messages);
  rows.push({ shape, what: 'first full state to all', ms: tFirst, bytes: bytes1, messages: msgs1, note: `${last[0]!.items} items/client, ${server.nodes().length} node state(s), heap of the bench process ${mib(process.memoryUsage().heapUsed)}` });

  // One change: a service's endpoints move; every node's state for it changes.
  const t1 = performance.now();
  store.apply('EndpointSlice', slice(42, 9090));
  store.flush();
  await until(() => batches.every((b) => b >= 2));
  const tChange = performance.now() - t1;
  const keys = new Set(last.map((n) => n!.keys.join(',')));
  rows.push({ shape, what: 'one change to all', ms: tChange, bytes: sum((n) => n.bytes) - bytes1, messages: sum((n) => n.messages) - msgs1, note: `batch keys: ${[...keys].join(' | ')}` });

  // A burst: 10 rounds of 100 changes while clients keep up as they can (coalescing).
  const bytes2 = sum((n) => n.bytes);
  const batches2 = batches.reduce((a, b) => a + b, 0);
  const t2 = performance.now();
  for (let r = 0; r < 10; r++) {
    for (let i = 0; i < 100; i++) store.apply('EndpointSlice', slice(BURST_FIRST + i, 7000 + r));
    store.flush();
  }
  await until(() => last.every((n) => n!.port1000 === 7009));
  rows.push({ shape, what: '10 rounds x 100 changes', ms: performance.now() - t2, bytes: sum((n) => n.bytes) - bytes2, messages: batches.reduce((a, b) => a + b, 0) - batches2, note: '(messages column: batches in all; 10 per client if nothing coalesced)' });

  await Promise.all(workers.map((w) => new Promise<void>((r) => { w.once('message', () => r()); w.postMessage('stop'); })));
  await Promise.all(workers.map((w) => w.terminate()));
  await server.close();
  rmSync(dir, { recursive: true, force: true });
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  console.log(`kpng Watch API: ${fmt(SERVICES)} services, ${CLIENTS} clients in ${WORKERS} worker threads, unix socket, ${os.cpus().length} CPUs (node ${process.version})\n`);
  await scenario(`${CLIENTS} clients on ${Math.min(CLIENTS, NODES)} nodes`, (i) => `n${i % NODES}`, rows);
  await scenario(`${CLIENTS} clients on 1 node`, () => 'n0', rows);
  const header = ['shape', 'measure', 'time', 'bytes', 'per client', 'messages', 'notes'];
  const cells = rows.map((r) => [r.shape, r.what, `${fmt(r.ms, 1)} ms`, r.bytes > 1e6 ? mib(r.bytes) : `${fmt(r.bytes)} B`, `${fmt(r.bytes / CLIENTS)} B`, fmt(r.messages), r.note]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  for (const line of [header, ...cells]) console.log(line.map((c, i) => (i === line.length - 1 ? c : c.padEnd(widths[i]))).join('  '));
  console.log('\nbytes: gRPC message payloads received by the clients (HTTP/2 framing not counted).');
}

if (isMainThread) main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
else runWorker();
