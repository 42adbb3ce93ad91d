// nft backend benchmark (root; prints tables, never asserts on time).
//   1. Full sync of 1k / 10k / 50k services (10 endpoints each) into an empty table in a fresh netns:
//      native netlink batch vs `nft -f` of the same ruleset rendered as text. Both spans start from
//      the same plan ops and end at the kernel's answer: the native one converts them to netlink ops
//      and sends them, the nft -f one renders them as text, writes the file and runs nft on it.
//   2. One endpoint change in a 10k-service state: apply() -> kernel ack, p50/p99, messages per change.
//   3. Data path: TCP connect latency to a service with 10 vs 10k services programmed.
// Run: npx tsc -p tsconfig.json && node dist/bench/nft-sync.bench.js [--sizes 1000,10000,50000] [--changes 300]
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { EndpointList, type Endpoint, type Item, type Service } from '../src/model/enls';
import { fullSyncOps, TableModel } from '../src/backend/nft/plan';
import { toNftOps } from '../src/backend/nft/netlink';
import { toNftText } from '../src/backend/nft/text';
import { nftKernelSink, nativeKernel } from '../src/backend/nft';
import * as native from '../src/native';
import type { Batch, StateView } from '../src/sink/sink';
import { ClusterStore } from '../src/store/cluster';
import { modelOptions } from '../src/model/options';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { Lab, PODS } from '../test/e2e/lab/lab';
import { NetLab } from '../test/shared/netlab';
import { enlsNode, enlsService, ep, ip4, slice, stateView, svc } from '../test/shared/objects';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const SIZES = arg('--sizes', '1000,10000,50000').split(',').map(Number);
const CHANGES = Number(arg('--changes', '300'));
// The node item as the model computes it with --cluster-cidr 10.244.0.0/16 (pods are not masqueraded).
const NODE = enlsNode();
const service = (i: number) => enlsService(i);
const view = (items: Item[], revision = 1): StateView => stateView(NODE, items, revision);
// Fresh namespaces, removed on exit.
const lab = new NetLab('kb');
let made = 0;
const netns = (): string => lab.netns(String(made++));
const cleanup = (): void => lab.clear();

/** The item with its first port's cluster endpoints replaced (items are immutable: a new item). */
function withEndpoints(item: Item, eps: Endpoint[]): Item {
  const svc = item.service!;
  return { key: item.key, service: { ...svc, ports: [{ ...svc.ports[0], clusterEndpoints: EndpointList.from(eps) }, ...svc.ports.slice(1)] } };
}

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const f1 = (x: number) => x.toFixed(1);

function table(title: string, head: string[], rows: (string | number)[][]): void {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r: (string | number)[]) => r.map((c, i) => String(c).padStart(w[i])).join('  ');
  console.log(`\n${title}\n${line(head)}\n${w.map((x) => '-'.repeat(x)).join('  ')}`);
  for (const r of rows) console.log(line(r));
}

async function fullSync(): Promise<void> {
  const rows: (string | number)[][] = [];
  for (const n of SIZES) {
    const items = Array.from({ length: n }, (_, i) => service(i));
    const svcs = items.map((x): [string, Service] => [x.key, x.service!]);
    const ops = fullSyncOps(new TableModel('ip'), svcs, NODE);
    // native
    const ns1 = netns();
    const t0 = performance.now();
    const nops = toNftOps('ip', 'kpng', ops);
    const r = await native.nftApply(nops, { netns: `/var/run/netns/${ns1}` });
    const nativeMs = performance.now() - t0;
    // nft -f (same ruleset as text)
    const ns2 = netns();
    const file = `/tmp/${lab.name(String(n))}.nft`;
    const t1 = performance.now();
    const text = toNftText('ip', 'kpng', ops);
    fs.writeFileSync(file, text);
    let textMs: number | string;
    try {
      execFileSync('ip', ['netns', 'exec', ns2, 'nft', '-f', file], { stdio: 'pipe', timeout: 600000 });
      textMs = performance.now() - t1;
    } catch (e) {
      textMs = `failed: ${(e as Error).message.split('\n')[0]}`;
    }
    fs.rmSync(file, { force: true });
    const listed = execFileSync('ip', ['netns', 'exec', ns1, 'nft', 'list', 'chains', 'ip'], { encoding: 'utf8', maxBuffer: 1 << 30 }).split('\n').filter((l) => l.includes('chain ')).length;
    rows.push([n, n * 10, listed, r.messages, (r.bytes / 1e6).toFixed(1) + ' MB', f1(nativeMs), typeof textMs === 'number' ? f1(textMs) : textMs,
      typeof textMs === 'number' ? (textMs / nativeMs).toFixed(1) + 'x' : '-', (text.length / 1e6).toFixed(1) + ' MB']);
    cleanup();
  }
  table('Full sync into an empty table (fresh netns), 10 endpoints per service',
    ['services', 'endpoints', 'chains', 'messages', 'netlink', 'native ms', 'nft -f ms', 'nft/native', 'text size'], rows);
}

async function incremental(): Promise<void> {
  const n = 10000;
  const ns = netns();
  const logs: string[] = [];
  const sink = nftKernelSink({ log: (m: string) => logs.push(m) }, nativeKernel({ netns: `/var/run/netns/${ns}` }));
  const items = Array.from({ length: n }, (_, i) => service(i));
  const t0 = performance.now();
  await sink.apply({ revision: 1, reset: true, changes: items.map((item) => ({ op: 'set', key: item.key, item })) } as Batch, view(items));
  const fullMs = performance.now() - t0;
  const fullMsgs = sink.stats.lastMessages;
  const times: number[] = [];
  const msgs: number[] = [];
  const bytes: number[] = [];
  let rev = 2;
  for (let c = 0; c < CHANGES; c++) {
    const i = Math.floor(Math.random() * n);
    const item = items[i];
    // Replace one endpoint by a new address.
    const eps = item.service!.ports[0].clusterEndpoints.toArray();
    eps[c % 10] = { ip: ip4((10 << 24) | (201 << 16) + c + 1), port: 8080, local: false, terminating: false };
    const next = withEndpoints(item, eps);
    items[i] = next;
    const t = performance.now();
    await sink.apply({ revision: rev++, reset: false, changes: [{ op: 'set', key: next.key, item: next }] }, view(items, rev));
    times.push(performance.now() - t);
    msgs.push(sink.stats.lastMessages);
    bytes.push(sink.stats.lastBytes);
  }
  // Endpoint count change (rule rewrite) for comparison.
  const scale: number[] = [];
  for (let c = 0; c < 50; c++) {
    const i = Math.floor(Math.random() * n);
    const next = withEndpoints(items[i], items[i].service!.ports[0].clusterEndpoints.toArray().slice(0, 5 + (c % 5)));
    items[i] = next;
    const t = performance.now();
    await sink.apply({ revision: rev++, reset: false, changes: [{ op: 'set', key: next.key, item: next }] }, view(items, rev));
    scale.push(performance.now() - t);
  }
  table(`Incremental syncs in a ${n}-service state (full sync first: ${f1(fullMs)} ms, ${fullMsgs} messages)`,
    ['change', 'count', 'p50 ms', 'p99 ms', 'max ms', 'messages', 'bytes'],
    [
      ['one endpoint replaced', times.length, f1(pct(times, 50)), f1(pct(times, 99)), f1(Math.max(...times)), pct(msgs, 50), pct(bytes, 50)],
      ['endpoint count changed', scale.length, f1(pct(scale, 50)), f1(pct(scale, 99)), f1(Math.max(...scale)), '-', '-'],
    ]);
  cleanup();
}

/**
 * The whole path for one endpoint change: an EndpointSlice update enters the store, the node state
 * recomputes the service, the subscription hands over the batch, the sink sends it, the kernel acks.
 */
async function storeToKernel(): Promise<void> {
  const n = 10000;
  const ns = netns();
  const sink = nftKernelSink({ log: () => undefined }, nativeKernel({ netns: `/var/run/netns/${ns}` }));
  const store = new ClusterStore({ log: silentLogger, model: modelOptions({ clusterCIDRs: ['10.244.0.0/16'] }) });
  const state = new NodeState(store, 'n1');
  const sub = state.subscribe();
  // Service s<i>: 10 endpoints from 10.128.0.0 + 16 i; change c > 0 swaps endpoint c % 10 for 10.200.0.0 + c.
  const epIP = (i: number, e: number) => ip4(((10 << 24) | (128 << 16)) + i * 16 + e);
  const sliceOf = (i: number, swap: number) => slice(`s${i}`, `s${i}`, Array.from({ length: 10 }, (_, e) =>
    ep(e === swap % 10 && swap > 0 ? ip4(((10 << 24) | (200 << 16)) + swap) : epIP(i, e), { ready: true, node: `n${e % 3}` })), { ns: 'bench' });
  for (let i = 0; i < n; i++) {
    store.apply('Service', svc(`s${i}`, { bare: true, ns: 'bench', clusterIP: ip4(((10 << 24) | (96 << 16)) + i + 1), ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
    store.apply('EndpointSlice', sliceOf(i, 0));
  }
  store.markSynced();
  await sub.ready();
  await sink.apply(sub.take(), state);
  const times: number[] = [];
  const msgs: number[] = [];
  for (let c = 1; c <= CHANGES; c++) {
    const i = Math.floor(Math.random() * n);
    const t = performance.now();
    store.apply('EndpointSlice', sliceOf(i, c));
    store.flush();
    const batch = sub.take();
    await sink.apply(batch, state);
    times.push(performance.now() - t);
    msgs.push(sink.stats.lastMessages);
  }
  table(`One endpoint change, EndpointSlice into the store -> kernel ack, ${n}-service state`,
    ['changes', 'p50 ms', 'p99 ms', 'max ms', 'messages (p50)'],
    [[times.length, f1(pct(times, 50)), f1(pct(times, 99)), f1(Math.max(...times)), pct(msgs, 50)]]);
  state.close();
  cleanup();
}

async function dataPath(): Promise<void> {
  const lab = await Lab.create();
  try {
    const nsPath = `/var/run/netns/${lab.ns.n1}`;
    const target = enlsService(0, {
      name: 'target', clusterIP: '10.95.0.1',
      endpoints: PODS.map((p) => ({ ip: p.v4, port: 8080, local: p.node === 'n1', terminating: false })),
    });
    const rows: (string | number)[][] = [];
    for (const n of [10, 10000]) {
      const sink = nftKernelSink({ log: () => {} }, nativeKernel({ netns: nsPath }));
      const items = [target, ...Array.from({ length: n }, (_, i) => service(i))];
      await sink.apply({ revision: 1, reset: true, changes: [] }, view(items));
      const rs = await lab.probe(lab.ns.n1, 'tcp', '10.95.0.1', 80, 300, 2000);
      const ok = rs.filter((r) => r.ok);
      const c = ok.map((r) => r.connectMs ?? 0);
      rows.push([n + 1, ok.length, f1(pct(c, 50) * 1000), f1(pct(c, 99) * 1000), f1(pct(ok.map((r) => r.ms), 50) * 1000)]);
    }
    table('Data path: TCP connect from node n1 to a cluster IP (300 connections, endpoints on n1 and n2)',
      ['services', 'ok', 'connect p50 us', 'connect p99 us', 'request p50 us'], rows);
  } finally {
    await lab.destroy();
  }
}

(async () => {
  if (process.getuid?.() !== 0) { console.log('nft-sync bench: needs root, skipped'); return; }
  if (!native.nativeAvailable()) { console.log('nft-sync bench: native addon not built, skipped'); return; }
  await fullSync();
  await incremental();
  await storeToKernel();
  await dataPath();
})().catch((e) => { console.error(e); process.exitCode = 1; }).finally(cleanup);
