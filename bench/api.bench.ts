// The Watch API under load: a server with S services and N nodes' clients (in worker threads,
// each client on its own connection over a unix socket). Prints, for two shapes (N nodes with one
// client each, as in a cluster; one node with N clients, the pure fan-out), the time until every
// client has its first full state, the bytes of gRPC messages, the server's memory growth per
// node, and the cost of one change fanned out to all clients. Before that, the node states alone
// (no gRPC): N shared node states against a reference that computes each node's state from
// scratch (the algorithm before items were shared), both warmed up first; the reference is measured
// on --reference nodes and its totals printed as "projected (R measured x N/R)" unless R >= N.
// Figures only; nothing is asserted.
//
//   npm run bench:api -- [--services 10000] [--nodes 100] [--clients N] [--workers 4]
//                        [--decode full|light] [--deflate on|off] [--shape both|nodes|one] [--reference 5]
// --deflate off: clients do not accept compressed full states (OpBatch.deflated_ops).
// --decode light: clients count the ops of a full state and decode only the small batches (a
// client's decoding is its node's cost, not the server's; 1000 full decoders do not fit in 2 CPUs).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, credentials, Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import { serveApi } from '../src/api/server';
import { DEFAULT_FLOW_CONTROL_WINDOW, WatchClient } from '../src/api/client';
import { decodeOpBatch, encodeRequest, MAX_INFLATED_BYTES, WATCH_METHOD } from '../src/api/codec';
import { inflateOps } from '../src/api/deflate';
import { computeNodeItem, computeServiceItem } from '../src/model/compute';
import { NODE_KEY } from '../src/model/enls';
import { kpng } from '../src/gen/proto';
import { ClusterStore } from '../src/store/cluster';
import { ItemStore } from '../src/store/item-store';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { ep, slice, svc } from '../test/shared/objects';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    services: { type: 'string' }, nodes: { type: 'string' }, clients: { type: 'string' }, workers: { type: 'string' },
    decode: { type: 'string' }, deflate: { type: 'string', default: 'on' }, shape: { type: 'string', default: 'both' }, reference: { type: 'string', default: '5' },
  },
});
// Positional form kept: [services] [clients] [workers].
const SERVICES = Number(args.services ?? positionals[0] ?? 10000);
const NODES = Number(args.nodes ?? 100);
const CLIENTS = Number(args.clients ?? positionals[1] ?? NODES);
const WORKERS = Number(args.workers ?? positionals[2] ?? 4);
/** Clients ask for compressed full states (--deflate off: plain messages, for comparison). */
const DEFLATE = args.deflate !== 'off';
const LIGHT = (args.decode ?? (CLIENTS > 100 ? 'light' : 'full')) === 'light';
/** The burst changes services BURST_FIRST.. BURST_FIRST+99; clients watch the first one. */
const BURST_FIRST = Math.floor(SERVICES / 2);
const BURST_KEY = `svc/ns${BURST_FIRST % 50}/svc${BURST_FIRST}`;

const endpointSlice = (i: number, ports: number) => slice(`svc${i}-abcde`, `svc${i}`,
  [0, 1, 2].map((k) => ep(`10.${(i >> 8) & 255}.${i & 255}.${k + 1}`, { ready: true, node: `n${(i + k * 37) % NODES}` })),
  { ns: `ns${i % 50}`, ports: [{ name: 'http', protocol: 'TCP', port: ports }] });

function makeCluster(): ClusterStore {
  const c = new ClusterStore({ log: silentLogger });
  for (let n = 0; n < NODES; n++) c.apply('Node', { metadata: { name: `n${n}`, labels: { 'topology.kubernetes.io/zone': `z${n % 3}` } } });
  for (let i = 0; i < SERVICES; i++) {
    c.apply('Service', svc(`svc${i}`, {
      bare: true, ns: `ns${i % 50}`, type: i % 10 ? 'ClusterIP' : 'NodePort', clusterIPs: [`10.96.${(i >> 8) & 255}.${i & 255}`],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: i % 10 ? undefined : 30000 + (i % 2000) }],
    }));
    c.apply('EndpointSlice', endpointSlice(i, 8080));
  }
  c.markSynced();
  return c;
}

const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
const mib = (b: number) => `${fmt(b / 1048576, 1)} MiB`;

interface Row { shape: string; what: string; ms: number; bytes: number; messages: number; note: string }

/** CPU time of this thread (the server's; clients run in workers), in ms. */
const threadCpu = (): number => {
  const u = (process as unknown as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.() ?? process.cpuUsage();
  return (u.user + u.system) / 1000;
};
/**
 * CPU time of the process's threads by kind, in ms, from /proc (Linux): "WorkerThread" (the
 * clients), "V8Worker" (V8's helpers: concurrent marking and sweeping for every thread's heap),
 * "MainThread" (the server) and the rest. Empty where /proc is not there.
 */
function cpuByThreadKind(): Map<string, number> {
  const out = new Map<string, number>();
  const tick = 1000 / 100; // USER_HZ is 100 on Linux
  let tasks: string[] = [];
  try { tasks = readdirSync('/proc/self/task'); } catch { return out; }
  for (const t of tasks) {
    try {
      const st = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')'));
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) * tick);
    } catch { /* the thread ended */ }
  }
  return out;
}

/** BENCH_PROFILE=prefix: a CPU profile of the server thread while the first full states go out. */
async function startProfile(): Promise<(file: string) => Promise<void>> {
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const s = new Session();
  s.connect();
  await s.post('Profiler.enable');
  await s.post('Profiler.start');
  return async (file) => {
    const { profile } = await s.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
    s.disconnect();
  };
}

const gc = (): void => { (globalThis as { gc?: () => void }).gc?.(); };
const heap = (): number => { gc(); return process.memoryUsage().heapUsed; };

/** Peak heap and RSS of the process, sampled every 50 ms while a phase runs. */
function peakMeter() {
  const peak = { heap: 0, rss: 0 };
  const sample = () => { const m = process.memoryUsage(); peak.heap = Math.max(peak.heap, m.heapUsed); peak.rss = Math.max(peak.rss, m.rss); };
  const t = setInterval(sample, 50);
  return { stop: () => { clearInterval(t); sample(); return peak; } };
}

/** What a worker tells about one batch of one of its clients. */
interface BatchNote { i: number; reset: boolean; changes: number; items: number; keys: string[]; port1000: number; bytes: number; messages: number; reconnects?: number }

/** Clients run in worker threads (their decoding is not charged to the server's thread). */
function runWorker(): void {
  const { api, nodes, first, light } = workerData as { api: string; nodes: string[]; first: number; light: boolean };
  if (light) return runLightClients(api, nodes, first);
  const clients = nodes.map((node, k) => {
    const c = new WatchClient({ api, node, log: silentLogger, acceptDeflate: DEFLATE });
    void c.run((b) => {
      const svc = b.changes.find((ch) => ch.key === BURST_KEY);
      const note: BatchNote = {
        i: first + k, reset: b.reset, changes: b.changes.length, items: b.items,
        keys: b.changes.length <= 5 ? b.changes.map((ch) => ch.key) : [],
        port1000: svc?.op === 'set' ? svc.item.service!.ports[0].clusterEndpoints.at(0)?.port ?? 0 : 0,
        bytes: c.stats.bytes, messages: c.stats.messages, reconnects: c.stats.failures,
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

/**
 * Clients that speak the protocol on raw messages: a full state's ops are counted (their framing
 * walked, not decoded); other batches are decoded. What a node's own kpng would do with the state
 * is its own CPU, not the server's.
 */
function runLightClients(api: string, nodes: string[], first: number): void {
  const target = `unix:${api.slice('unix://'.length)}`;
  const calls = nodes.map((node, k) => {
    const client = new Client(target, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1, 'grpc.max_receive_message_length': 64 * 1024 * 1024, 'grpc-node.flow_control_window': DEFAULT_FLOW_CONTROL_WINDOW });
    const c = { client, call: null as ClientDuplexStream<Buffer, Buffer> | null, stopped: false };
    let bytes = 0, messages = 0, reconnects = 0, port1000 = 0;
    const start = () => {
      const call = client.makeBidiStreamRequest(WATCH_METHOD, (r: Buffer) => r, (b: Buffer) => b, new Metadata());
      c.call = call;
      let ops = 0, reset = false, inBatch = false;
      let small: Buffer[] = [];
      call.on('data', (wire: Buffer) => {
        bytes += wire.length;
        messages++;
        // A compressed message (deflated_ops only, field 2) is inflated and walked like a plain one.
        const b = wire[0] === 0x12 ? inflateOps(kpng.watchv1.OpBatch.decode(wire).deflatedOps, MAX_INFLATED_BYTES) : wire;
        let lastOp: Buffer | null = null;
        for (let i = 0; i < b.length;) {
          if (b[i++] !== 10) throw new Error('not an OpBatch');
          let len = 0, shift = 0, x: number;
          do { x = b[i++]; len |= (x & 127) << shift; shift += 7; } while (x & 128);
          if (!inBatch) { inBatch = true; reset = b[i] === 10; }
          lastOp = b.subarray(i, i + len);
          i += len;
          ops++;
        }
        if (!reset) small.push(b);
        if (!lastOp || lastOp[0] !== 0x22) return; // the batch ends with Sync (Op field 4)
        const sync = kpng.watchv1.Op.decode(lastOp).sync!;
        let changes = ops - 1 - (reset ? 1 : 0);
        let keys: string[] = [];
        if (!reset) {
          const decoded = small.flatMap((m) => decodeOpBatch(m)).filter((o) => o.op === 'set' || o.op === 'delete');
          changes = decoded.length;
          keys = decoded.length <= 5 ? decoded.map((o) => (o.op === 'set' ? o.item.key : o.op === 'delete' ? o.key : '')) : [];
          const svc = decoded.find((o) => o.op === 'set' && o.item.key === BURST_KEY);
          if (svc?.op === 'set') port1000 = svc.item.service!.ports[0].clusterEndpoints.at(0)?.port ?? 0;
        }
        const note: BatchNote = { i: first + k, reset, changes, items: sync.items ?? 0, keys, port1000, bytes, messages, reconnects };
        parentPort!.postMessage(note);
        ops = 0; inBatch = false; small = [];
        call.write(encodeRequest({ appliedRevision: Number(sync.revision) }));
      });
      // Like WatchClient: a broken stream is started again (its next batch is a full state).
      call.on('error', (e: Error & { code?: number; details?: string }) => {
        if (c.stopped) return;
        if (process.env.BENCH_DEBUG) console.error(`client ${node}: ${e.code} ${e.details}`);
        reconnects++;
        setTimeout(start, 200);
      });
      call.write(encodeRequest({ node, acceptDeflate: DEFLATE }));
    };
    return { c, start };
  });
  // Connections first, 100 at a time (a unix socket's listen backlog refuses a thousand at once
  // with EAGAIN); then every stream starts together when the main thread says go.
  void (async () => {
    for (let i = 0; i < calls.length; i += 100) {
      await Promise.all(calls.slice(i, i + 100).map(({ c }) => new Promise<void>((resolve) => {
        const wait = () => c.client.waitForReady(Date.now() + 60_000, (err) => (err ? setTimeout(wait, 100) : resolve()));
        wait();
      })));
    }
    parentPort!.postMessage('connected');
  })();
  parentPort!.on('message', (m: string) => {
    if (m === 'go') { for (const { start } of calls) start(); return; }
    for (const { c } of calls) { c.stopped = true; c.call?.cancel(); c.client.close(); }
    parentPort!.postMessage('stopped');
  });
}

async function scenario(shape: string, nodeOf: (i: number) => string, rows: Row[]): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kpng-bench-'));
  const store = makeCluster();
  const heap0 = heap();
  const rss0 = process.memoryUsage().rss;
  const meter = peakMeter();
  const server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/kpng.sock`, maxStreamsPerConnection: 16 });
  const last: (BatchNote | undefined)[] = new Array(CLIENTS).fill(undefined);
  const batches = new Array<number>(CLIENTS).fill(0);
  let check: () => void = () => undefined;
  const until = (f: () => boolean) => new Promise<void>((resolve) => { check = () => { if (f()) resolve(); }; check(); });
  const workers: Worker[] = [];
  let connected = 0;
  const tConnect = performance.now();
  const per = Math.ceil(CLIENTS / WORKERS);
  for (let w = 0; w < WORKERS; w++) {
    const first = w * per;
    const nodes = Array.from({ length: Math.max(0, Math.min(per, CLIENTS - first)) }, (_, k) => nodeOf(first + k));
    const worker = new Worker(__filename, { workerData: { api: server.address, nodes, first, light: LIGHT }, argv: process.argv.slice(2) });
    worker.on('message', (m: BatchNote | string) => {
      if (m === 'connected') { connected++; check(); }
      if (typeof m === 'string') return;
      if (process.env.BENCH_DEBUG) console.error(JSON.stringify(m));
      last[m.i] = m;
      batches[m.i]++;
      check();
    });
    workers.push(worker);
  }
  // Light clients connect first and start their streams together; full clients connect as they go.
  let connectNote = '';
  if (LIGHT) {
    await until(() => connected === WORKERS);
    connectNote = `; ${fmt(CLIENTS)} connections set up before, in ${fmt((performance.now() - tConnect) / 1000, 1)} s`;
  }
  const profile = process.env.BENCH_PROFILE ? await startProfile() : null;
  const cpu = threadCpu();
  const processCpu0 = process.cpuUsage();
  const threads0 = cpuByThreadKind();
  const t0 = LIGHT ? performance.now() : tConnect;
  if (LIGHT) for (const w of workers) w.postMessage('go');
  const sum = (f: (n: BatchNote) => number) => last.reduce((a, n) => a + (n ? f(n) : 0), 0);
  const progress = setInterval(() => {
    const done = batches.filter((b) => b >= 1).length;
    console.error(`  ... ${fmt((performance.now() - t0) / 1000, 0)} s: ${done} of ${CLIENTS} clients have their full state; ${mib(sum((n) => n.bytes))} received so far (counted per batch)`);
  }, 10_000);
  await until(() => batches.every((b) => b >= 1));
  clearInterval(progress);
  const tFirst = performance.now() - t0;
  const bytes1 = sum((n) => n.bytes);
  const msgs1 = sum((n) => n.messages);
  const serverCpuMs = threadCpu() - cpu;
  const pc = process.cpuUsage(processCpu0);
  const clientsCpuMs = (pc.user + pc.system) / 1000 - serverCpuMs;
  const threads1 = cpuByThreadKind();
  const byKind = (k: string) => (threads1.get(k) ?? 0) - (threads0.get(k) ?? 0);
  const threadsNote = threads1.size ? ` (client threads ${fmt(byKind('WorkerThread') / 1000, 1)} s, V8 helper threads ${fmt(byKind('V8Worker') / 1000, 1)} s)` : '';
  if (profile) await profile(`${process.env.BENCH_PROFILE}.${shape.replace(/\W+/g, '-')}.cpuprofile`);
  const peak = meter.stop();
  const states = server.nodes().length;
  const heap1 = heap();
  rows.push({ shape, what: 'first full state to all', ms: tFirst, bytes: bytes1, messages: msgs1,
    note: `${last[0]!.items} items/client, ${states} node state(s); server thread CPU ${fmt(serverCpuMs / 1000, 1)} s, the rest of the process ${fmt(clientsCpuMs / 1000, 1)} s${threadsNote}; ${sum((n) => n.reconnects ?? 0)} stream(s) restarted${connectNote}; server heap after GC ${mib(heap1)} (${mib(heap0)} before the server), peak ${mib(peak.heap)}; process RSS (clients' threads too) peak +${mib(peak.rss - rss0)}` });

  // One change: a service's endpoints move; every node's state for it changes.
  const t1 = performance.now();
  store.apply('EndpointSlice', endpointSlice(42, 9090));
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
    for (let i = 0; i < 100; i++) store.apply('EndpointSlice', endpointSlice(BURST_FIRST + i, 7000 + r));
    store.flush();
  }
  await until(() => last.every((n) => n!.port1000 === 7009));
  rows.push({ shape, what: '10 rounds x 100 changes', ms: performance.now() - t2, bytes: sum((n) => n.bytes) - bytes2, messages: batches.reduce((a, b) => a + b, 0) - batches2, note: '(messages column: batches in all; 10 per client if nothing coalesced)' });

  await Promise.all(workers.map((w) => new Promise<void>((r) => { w.once('message', () => r()); w.postMessage('stop'); })));
  await Promise.all(workers.map((w) => w.terminate()));
  await server.close();
  rmSync(dir, { recursive: true, force: true });
}

/** One node's full state the way it was built before items were shared: every item computed and hashed from scratch into the node's own store. */
function fromScratch(store: ClusterStore, node: string): ItemStore {
  const s = new ItemStore(node);
  s.put(NODE_KEY, computeNodeItem(s.node, store.getNode(s.node), store.modelOptions));
  const view = { name: s.node, zone: store.getNode(s.node)?.zone ?? '', primary: store.getNode(s.node)?.primary ?? [] };
  for (const key of store.serviceKeys()) {
    const item = computeServiceItem(store.getService(key)!, store.slicesOf(key), view, store.modelOptions);
    s.put(item.key, item);
  }
  s.commit([NODE_KEY]);
  return s;
}

const readAll = (s: ItemStore) => { let n = 0; for (const it of s.items()) if (it) n++; return n; };

/**
 * The node states alone, without gRPC: every node's full state built and read, shared, against
 * the algorithm before sharing (fromScratch) measured on `sample` nodes; with fewer than all nodes
 * measured, its totals are a projection (per-node figures x the node count) and printed as one.
 * Both sides run once first on a cluster of their own (not timed), so that neither is timed while
 * V8 still compiles it, and the measured cluster's shared items are not made in advance.
 */
function compareStates(): void {
  const sample = Math.min(NODES, Number(args.reference));
  {
    const warm = makeCluster();
    for (let n = 0; n < sample; n++) readAll(fromScratch(warm, `n${n}`));
    const states: NodeState[] = [];
    for (let n = 0; n < NODES; n++) { const s = new NodeState(warm, `n${n}`); readAll(s); states.push(s); }
    for (const s of states) s.close();
  }
  const store = makeCluster();
  let h0 = heap();
  let t0 = performance.now();
  const old: ItemStore[] = [];
  for (let n = 0; n < sample; n++) {
    const s = fromScratch(store, `n${n}`);
    readAll(s);
    old.push(s);
  }
  const oldMs = (performance.now() - t0) / sample;
  const oldHeap = (heap() - h0) / sample;
  old.length = 0;
  h0 = heap();
  t0 = performance.now();
  const states: NodeState[] = [];
  for (let n = 0; n < NODES; n++) { const s = new NodeState(store, `n${n}`); readAll(s); states.push(s); }
  const newMs = performance.now() - t0;
  const newHeap = heap() - h0;
  const own = states.reduce((a, s) => a + s.ownCount, 0) / NODES;
  const projected = sample < NODES;
  const how = projected ? `projected (${fmt(sample)} measured x ${fmt(NODES / sample, NODES % sample ? 1 : 0)})` : `measured on all ${fmt(NODES)} nodes`;
  console.log(`node states alone, ${fmt(NODES)} nodes x ${fmt(SERVICES)} services (built and read once, both warmed up first):`);
  console.log(`  from scratch (before), ${how}: ${fmt(oldMs * NODES / 1000, 1)} s, ${mib(oldHeap * NODES)} (${fmt(oldMs)} ms, ${mib(oldHeap)} a node, measured)`);
  console.log(`  shared (now), measured on all ${fmt(NODES)} nodes: ${fmt(newMs / 1000, 2)} s, ${mib(newHeap)} (the shared items + ${fmt(own, 1)} own items a node, ${fmt(newHeap / NODES / 1024)} KiB a node)`);
  const x = (r: number) => `${fmt(r, r < 10 ? 1 : 0)}x`;
  console.log(`  ratio before / now${projected ? ' (the projection / the measured)' : ''}: time ${x(oldMs * NODES / newMs)}, memory ${x(oldHeap * NODES / newHeap)}\n`);
  for (const s of states) s.close();
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  console.log(`kpng Watch API: ${fmt(SERVICES)} services, ${fmt(NODES)} nodes, ${fmt(CLIENTS)} clients (${LIGHT ? 'light' : 'full'} decoding, ${DEFLATE ? 'accepting deflated_ops' : 'plain messages only'}) in ${WORKERS} worker threads, unix socket, ${os.cpus().length} CPUs (node ${process.version})${(globalThis as { gc?: unknown }).gc ? '' : '; run with --expose-gc for memory figures'}\n`);
  compareStates();
  if (args.shape !== 'one') await scenario(`${fmt(CLIENTS)} clients on ${fmt(Math.min(CLIENTS, NODES))} nodes`, (i) => `n${i % NODES}`, rows);
  if (args.shape !== 'nodes') await scenario(`${fmt(CLIENTS)} clients on 1 node`, () => 'n0', rows);
  const header = ['shape', 'measure', 'time', 'bytes', 'per client', 'messages', 'notes'];
  const cells = rows.map((r) => [r.shape, r.what, `${fmt(r.ms, 1)} ms`, r.bytes > 1e6 ? mib(r.bytes) : `${fmt(r.bytes)} B`, `${fmt(r.bytes / CLIENTS)} B`, fmt(r.messages), r.note]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  for (const line of [header, ...cells]) console.log(line.map((c, i) => (i === line.length - 1 ? c : c.padEnd(widths[i]))).join('  '));
  console.log('\nbytes: gRPC message payloads received by the clients (HTTP/2 framing not counted).');
}

if (isMainThread) main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
else runWorker();
