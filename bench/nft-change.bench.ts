// One endpoint change through the real nft dataplane (root; prints figures, never asserts on time).
// For each size (services x 10 endpoints, ClusterIP, --cluster-cidr set):
//   1. full sync from the store into an empty table in a fresh netns: time, messages, and the longest
//      event-loop stall while the sink works (perf_hooks.monitorEventLoopDelay) and the longest GC pause
//      within it (kpng's GC policy applied: promoteWholePagesOnLargeHeaps), and the major page faults
//      of the process meanwhile (pages read back from disk);
//   2. N single-endpoint changes: an EndpointSlice enters the store -> the kernel's ack, p50 / p99, and
//      the split: JS (model + diff + render to NftOps), encode (TS encoder + the addon's libnftnl build),
//      kernel (sendmsg -> last ack, i.e. the nf_tables transaction and commit).
//   3. reference: 100 changes with the socket closed after each batch (how kpng sent them before).
//   (JS = model + diff + NftOps + the TS encoder; encode = the addon's libnftnl build.)
// Run: npm run bench:nft-change -- [--sizes 1000,10000,50000] [--changes 200]
//      [--hold]  (keep the last netns and print its name, for `perf record` against the kernel)
//      [--trace-stalls]  (print the full sync's ticks over 25 ms late, with the GC pauses inside them
//                         and how long the main thread waited for a CPU meanwhile)
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { encodeFamOps, nftKernelSink, type NftKernel } from '../src/backend/nft';
import * as native from '../src/native';
import { ClusterStore } from '../src/store/cluster';
import { modelOptions } from '../src/model/options';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { limitYoungGeneration, promoteWholePagesOnLargeHeaps } from '../src/util/memory';
import { NetLab } from '../test/shared/netlab';
import { ep, ip4, slice, svc } from '../test/shared/objects';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

/** How long this thread has waited on a run queue, in ms (Linux schedstat; 0 elsewhere). */
function runQueueWaitMs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0;
  }
}

const args = process.argv.slice(2);
const arg = (name: string, def: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const SIZES = arg('--sizes', '1000,10000,50000').split(',').map(Number);
const CHANGES = Number(arg('--changes', '200'));
const HOLD = args.includes('--hold');
const TRACE_STALLS = args.includes('--trace-stalls');
// Fresh namespaces, removed on exit.
const lab = new NetLab('kn3-bc');
let made = 0;
const netns = (): string => lab.netns(String(made++));
const cleanup = (): void => lab.clear();

const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]; };
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);

function table(title: string, head: string[], rows: (string | number)[][]): void {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r: (string | number)[]) => r.map((c, i) => String(c).padStart(w[i])).join('  ');
  console.log(`\n${title}\n${line(head)}\n${w.map((x) => '-'.repeat(x)).join('  ')}`);
  for (const r of rows) console.log(line(r));
}

/** Timings of the last apply, split by stage. */
interface Split { calledAt: number; toOpsMs: number; encodeMs: number; buildMs: number; kernelMs: number; wallMs: number; queueMs: number; returnMs: number }

/** The production kernel (index.ts nativeKernel), with each stage timed. */
function timedKernel(nsPath: string, last: Split): NftKernel {
  return {
    async apply(table, famOps) {
      last.calledAt = performance.now();
      const batch = await encodeFamOps(table, famOps);
      last.toOpsMs = performance.now() - last.calledAt;
      const tw = performance.now();
      const r = await native.nftApply(batch, { netns: nsPath });
      last.wallMs = performance.now() - tw;
      last.encodeMs = r.encodeMs;
      last.buildMs = r.buildMs ?? 0;
      last.kernelMs = r.ms - last.buildMs;
      last.queueMs = r.queueMs ?? 0;
      last.returnMs = r.returnMs ?? 0;
      return { messages: r.messages, bytes: r.bytes, ms: r.ms + r.encodeMs };
    },
    conntrackDelete: (filters) => native.conntrackDelete(filters, { netns: nsPath }),
  };
}

/** Service s<i>'s slice: 10 endpoints from 10.128.0.0 + 16 i; change c > 0 swaps endpoint c % 10 for 10.100.0.0 + c. */
function sliceOf(i: number, swap: number) {
  const epIP = (e: number) => ip4(((10 << 24) | (128 << 16)) + i * 16 + e);
  return slice(`s${i}`, `s${i}`, Array.from({ length: 10 }, (_, e) =>
    ep(swap > 0 && e === swap % 10 ? ip4(((10 << 24) | (100 << 16)) + swap) : epIP(e), { ready: true, node: `n${e % 3}` })), { ns: 'bench' });
}

async function run(n: number, last: boolean): Promise<(string | number)[]> {
  const ns = netns();
  const split: Split = { calledAt: 0, toOpsMs: 0, encodeMs: 0, buildMs: 0, kernelMs: 0, wallMs: 0, queueMs: 0, returnMs: 0 };
  const sink = nftKernelSink({ log: () => undefined }, timedKernel(`/var/run/netns/${ns}`, split));
  const store = new ClusterStore({ log: silentLogger, model: modelOptions({ clusterCIDRs: ['10.244.0.0/16'] }) });
  const state = new NodeState(store, 'n1');
  const sub = state.subscribe();
  for (let i = 0; i < n; i++) {
    store.apply('Service', svc(`s${i}`, { bare: true, ns: 'bench', clusterIP: ip4(((10 << 24) | (96 << 16)) + i + 1), ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
    store.apply('EndpointSlice', sliceOf(i, 0));
  }
  store.markSynced();
  await sub.ready();
  const first = sub.take();
  // The node state's items (the model's ENLS of every service) before the sink starts, so the stall
  // below is the sink's own (the model's first state is a separate, synchronous step: modelMs).
  const tm = performance.now();
  let svcCount = 0;
  for (const it of state.items()) if (it.service) svcCount++;
  const modelMs = performance.now() - tm;
  if (svcCount !== n) throw new Error(`expected ${n} services, the node state has ${svcCount}`);
  // Full sync: the sink's part only (the model's first state is computed above).
  const h = monitorEventLoopDelay({ resolution: 5 });
  // A timer keeps the loop turning so that a stall shows up as a late tick (--trace-stalls: ticks
  // over 25 ms late are printed, with the GC pauses inside them).
  // With --trace-stalls each tick also reads how long this thread waited for a CPU (run queue):
  // on 2 vCPUs the main thread shares them with the addon's worker and V8's GC helpers.
  const late: Array<{ at: number; ms: number; waitMs: number }> = [];
  let lastTick = performance.now();
  let lastWait = TRACE_STALLS ? runQueueWaitMs() : 0;
  const tick = setInterval(() => {
    const now = performance.now();
    const wait = TRACE_STALLS ? runQueueWaitMs() : 0;
    if (TRACE_STALLS && now - lastTick > 25) late.push({ at: lastTick, ms: now - lastTick, waitMs: wait - lastWait });
    lastTick = now;
    lastWait = wait;
  }, 5);
  // The longest GC pause inside the sync: with the stall, tells the GC's part from the sink's own.
  // (Entries arrive after their GC: one that started before the sync is left out.)
  let gcMax = 0;
  const gcFrom = performance.now();
  const gcList: Array<{ at: number; ms: number }> = [];
  const gcs = new PerformanceObserver((l) => {
    for (const e of l.getEntries()) {
      if (e.startTime < gcFrom) continue;
      gcMax = Math.max(gcMax, e.duration);
      if (TRACE_STALLS) gcList.push({ at: e.startTime, ms: e.duration });
    }
  });
  gcs.observe({ entryTypes: ['gc'] });
  h.enable();
  // The histogram's first sample only sets its baseline: let it take one before the sync starts, or
  // a block at the sync's start would not count.
  await new Promise((r) => setTimeout(r, 20));
  const faults0 = process.resourceUsage().majorPageFault;
  const t0 = performance.now();
  await sink.apply(first, state);
  const fullMs = performance.now() - t0;
  // Pages read back from disk during the sync (this VM's DAMON reclaims file pages cold for 60 s,
  // the node binary's code among them): a long GC pause with faults here was not the GC's own work.
  const majorFaults = process.resourceUsage().majorPageFault - faults0;
  h.disable();
  clearInterval(tick);
  await new Promise((r) => setImmediate(r)); // the observer's last entries
  gcs.disconnect();
  const stallMs = h.max / 1e6;
  for (const l of late) {
    if (l.at < t0) continue; // the baseline wait
    const inside = gcList.filter((g) => g.at >= l.at && g.at < l.at + l.ms);
    console.log(`  ${n} services: tick ${l.ms.toFixed(1)} ms late at +${(l.at - t0).toFixed(0)} ms of the sync; GC pauses inside: ${inside.length ? inside.map((g) => g.ms.toFixed(1)).join(', ') + ' ms' : 'none'}; ` +
      `waiting for a CPU: ${l.waitMs.toFixed(1)} ms`);
  }
  const fullMsgs = sink.stats.lastMessages;
  const fullSplit = `${(split.calledAt - t0 + split.toOpsMs).toFixed(0)} / ${split.buildMs.toFixed(0)} / ${split.kernelMs.toFixed(0)}`;

  // A few changes untimed first: the reference below would otherwise be the one timed while V8 still
  // compiles the change path, and the kept socket's figures would look better than they are.
  for (let c = 1; c <= 20; c++) {
    store.apply('EndpointSlice', sliceOf(Math.floor(Math.random() * n), 200000 + c));
    store.flush();
    await sink.apply(sub.take(), state);
  }
  // Reference: the same changes with the socket closed after each batch (kpng before the kept socket).
  const ref: number[] = [];
  for (let c = 1; c <= Math.min(CHANGES, 100); c++) {
    const i = Math.floor(Math.random() * n);
    const t = performance.now();
    store.apply('EndpointSlice', sliceOf(i, 100000 + c));
    store.flush();
    await sink.apply(sub.take(), state);
    native.nftCloseSockets();
    ref.push(performance.now() - t);
  }
  const wall: number[] = [], queue: number[] = [], ret: number[] = [], total: number[] = [], js: number[] = [], enc: number[] = [], kern: number[] = [], msgs: number[] = [];
  for (let c = 1; c <= CHANGES; c++) {
    const i = Math.floor(Math.random() * n);
    const t = performance.now();
    store.apply('EndpointSlice', sliceOf(i, c + n * 0));
    store.flush();
    await sink.apply(sub.take(), state);
    const end = performance.now();
    total.push(end - t);
    js.push(split.calledAt - t + split.toOpsMs);
    enc.push(split.buildMs);
    kern.push(split.kernelMs);
    wall.push(split.wallMs);
    queue.push(split.queueMs);
    ret.push(split.returnMs);
    msgs.push(sink.stats.lastMessages);
  }
  if (last && HOLD) {
    console.log(`\nholding netns ${ns} (${n} services); Ctrl-C to clean up`);
    lab.keep(ns);
    console.log(`remove it with: ip netns del ${ns}`);
  }
  state.close();
  native.nftCloseSockets(); // an open socket would keep the deleted namespace alive
  cleanup();
  return [n, f1(modelMs), f1(fullMs), fullSplit, fullMsgs, f1(stallMs), f1(gcMax), majorFaults, CHANGES, f2(pct(total, 50)), f2(pct(total, 99)), `${f1(pct(ref, 50))} / ${f1(pct(ref, 99))}`, `${f2(pct(js, 50))} / ${f2(pct(js, 99))}`, f2(pct(enc, 50)), f2(pct(kern, 50)), f2(pct(kern, 99)), `${f2(pct(wall, 50))} / ${f2(pct(wall, 99))}`, `${f2(pct(queue, 99))} / ${f2(pct(ret, 99))}`, pct(msgs, 50)];
}

(async () => {
  if (process.getuid?.() !== 0) { console.log('nft-change bench: needs root, skipped'); return; }
  if (!native.nativeAvailable()) { console.log('nft-change bench: native addon not built, skipped'); return; }
  // The young generation as kpng runs it (src/cli/main.ts): its size decides the scavenge pauses.
  limitYoungGeneration();
  // Young pages promoted whole in major GCs once the heap is large (src/cli/main.ts does the same;
  // `node --page-promotion-threshold=70 dist/bench/...` runs with V8's default instead).
  const promotion = promoteWholePagesOnLargeHeaps();
  console.log(`page promotion: ${promotion ? 'whole pages on heaps of 64 MiB and more' : 'as the node command line says'}`);
  const rows: (string | number)[][] = [];
  for (const [k, n] of SIZES.entries()) {
    rows.push(await run(n, k === SIZES.length - 1));
    if (globalThis.gc) globalThis.gc();
  }
  table('nft: full sync from the store, then one endpoint change (EndpointSlice into the store -> kernel ack), 10 endpoints per service',
    ['services', 'state items ms', 'full sync ms', 'JS / build / kernel ms', 'messages', 'max stall ms', 'longest GC ms', 'major faults', 'changes', 'p50 ms', 'p99 ms', 'closing p50 / p99', 'JS p50 / p99', 'encode p50', 'kernel p50', 'kernel p99', 'addon wall p50 / p99', 'queue / return p99', 'msgs/change'], rows);
})().catch((e) => { console.error(e); process.exitCode = 1; }).finally(() => { if (!HOLD) cleanup(); });
