// What aggregation saves: K producers (1, 4, 16, 64), each with its own nftables table, each changing
// a few set elements at a steady rate, applied (a) each by its own netlink transaction, as
// independent agents do today, and (b) through the aggregator (one transaction per tick for all).
// Prints commits per second, netlink messages, syscalls of the process (counted by `perf stat -e
// raw_syscalls:sys_enter` attached to it: every thread, the addon's workers included), CPU of the
// process (the kernel's work on our syscalls included) and p50/p99 from a producer's change to the
// kernel's ack, side by side with ratios. Runs in a private network namespace (root). Figures only.
//
// Then the aggregator's own cost for kpng's nft backend at 10k services: full sync and one endpoint
// change, direct to the addon vs through the aggregator (the diff pass over kpng's table).
//
//   npm run build && node dist/bench/aggregator.bench.js [durationMs=2000] [periodMs=20] [minIntervalMs=10] [services=10000]
import { execFileSync, spawn } from 'node:child_process';
import { Aggregator } from '../src/aggregator/aggregator';
import { nativeTransport } from '../src/nft/transport';
import { nftApply, ipv4, type NftOp } from '../src/native';
import * as native from '../src/native';
import { aggregatorKernel } from '../src/backend/nft/aggregator-kernel';
import { nftKernelSink, nativeKernel, type NftKernel } from '../src/backend/nft';
import type { Item } from '../src/model/enls';
import type { Batch, StateView } from '../src/sink/sink';
import { enlsNode, enlsService, stateView } from '../test/shared/objects';
import { NetLab } from '../test/shared/netlab';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const DURATION = Number(process.argv[2] ?? 2000);
const PERIOD = Number(process.argv[3] ?? 20);
const MIN_INTERVAL = Number(process.argv[4] ?? 10);
const SERVICES = Number(process.argv[5] ?? 10000);
const KS = [1, 4, 16, 64];
const lab = new NetLab('kba-bench');
const NS = lab.name('ns');
const opts = { netns: `/var/run/netns/${NS}` };

const addr = (p: number, n: number) => `10.${p}.${(n >> 8) & 255}.${n & 255}`;
const tbl = (p: number) => ({ family: 'ip' as const, table: `p${p}` });

function baseOps(p: number): NftOp[] {
  const t = tbl(p);
  return [
    { op: 'add', table: { family: 'ip', name: t.table } },
    { op: 'add', chain: { ...t, name: 'c' } },
    { op: 'add', set: { ...t, name: 's', keyType: 'ipv4_addr' } },
    { op: 'add', elements: { ...t, set: 's', elements: [0, 1].map((n) => ({ key: ipv4(addr(p, n)) })) } },
    { op: 'add', rule: { ...t, chain: 'c', exprs: [{ type: 'payload', base: 'network', offset: 12, len: 4, dreg: 1 }, { type: 'lookup', sreg: 1, set: 's' }, { type: 'verdict', verdict: 'accept' }] } },
  ];
}

/** Change number n of producer p: two new elements in, the two oldest out. */
function changeOps(p: number, n: number): NftOp[] {
  const t = tbl(p);
  const el = (k: number) => ({ key: ipv4(addr(p, k % 60000)) });
  return [
    { op: 'delete', elements: { ...t, set: 's', elements: [el(2 * n), el(2 * n + 1)] } },
    { op: 'add', elements: { ...t, set: 's', elements: [el(2 * n + 2), el(2 * n + 3)] } },
  ];
}

interface Figures { changes: number; commits: number; messages: number; syscalls: number; cpuMs: number; lat: number[]; wallMs: number }

/**
 * Counts this process's syscalls (all its threads at the time of the call) until stop(), with perf
 * attached from outside (NaN when perf is missing or not allowed). Its start-up wait is idle time.
 */
async function countSyscalls(): Promise<{ stop(): Promise<number> }> {
  let out = '';
  const perf = spawn('perf', ['stat', '-e', 'raw_syscalls:sys_enter', '-x,', '-p', String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  perf.stderr.on('data', (b: Buffer) => { out += b.toString(); });
  const exited = new Promise<void>((resolve) => { perf.on('exit', () => resolve()); perf.on('error', () => resolve()); });
  await sleep(300); // let perf attach
  return {
    async stop() {
      perf.kill('SIGINT');
      await exited;
      const m = /^(\d+),,raw_syscalls:sys_enter/m.exec(out);
      return m ? Number(m[1]) : NaN;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], q: number) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN; };

async function run(k: number, mode: 'separate' | 'aggregated'): Promise<Figures> {
  execFileSync('ip', ['netns', 'exec', NS, 'nft', 'flush', 'ruleset']);
  const f: Figures = { changes: 0, commits: 0, messages: 0, syscalls: 0, cpuMs: 0, lat: [], wallMs: 0 };
  let apply: (p: number, ops: NftOp[]) => Promise<void>;
  let agg: Aggregator | undefined;
  if (mode === 'separate') {
    apply = async (_p, ops) => { const r = await nftApply(ops, opts); f.commits++; f.messages += r.messages; };
    for (let p = 0; p < k; p++) await apply(p, baseOps(p));
  } else {
    const t = nativeTransport(opts);
    agg = new Aggregator({ minIntervalMs: MIN_INTERVAL, burst: 1, transport: { apply: async (ops) => { const r = await t.apply(ops); f.commits++; f.messages += r.messages; return r; } } });
    const hs = Array.from({ length: k }, (_, p) => agg!.connect(`p${p}`));
    await Promise.all(hs.map((h, p) => h.declare(baseOps(p))));
    apply = async (p, ops) => { await hs[p].apply(ops); };
  }
  Object.assign(f, { commits: 0, messages: 0 });
  const syscalls = await countSyscalls();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + DURATION;
  await Promise.all(Array.from({ length: k }, async (_, p) => {
    await sleep(Math.random() * PERIOD); // producers are not in phase
    for (let n = 0; performance.now() < end; n++) {
      const s = performance.now();
      await apply(p, changeOps(p, n));
      f.lat.push(performance.now() - s);
      f.changes++;
      await sleep(PERIOD);
    }
  }));
  f.wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  f.cpuMs = (cpu.user + cpu.system) / 1000;
  f.syscalls = await syscalls.stop();
  agg?.close();
  return f;
}

// ---- kpng's backend through the aggregator: its own overhead ----

const NODE = enlsNode();
const service = (i: number, epBase = 0): Item => enlsService(i, { shift: epBase });
const view = (items: Item[], revision: number): StateView => stateView(NODE, items, revision);

async function kpngOverhead(kernel: NftKernel, services = SERVICES): Promise<{ fullMs: number; p50: number; p99: number }> {
  execFileSync('ip', ['netns', 'exec', NS, 'nft', 'flush', 'ruleset']);
  const sink = nftKernelSink({ log: () => undefined }, kernel);
  const items = Array.from({ length: services }, (_, i) => service(i));
  let t = performance.now();
  await sink.apply({ revision: 1, reset: true, changes: items.map((item) => ({ op: 'set', key: item.key, item })) } as Batch, view(items, 1));
  const fullMs = performance.now() - t;
  const lat: number[] = [];
  for (let c = 0; c < 100; c++) {
    const i = (c * 97) % services;
    items[i] = service(i, 1000 + c);
    t = performance.now();
    await sink.apply({ revision: c + 2, reset: false, changes: [{ op: 'set', key: items[i].key, item: items[i] }] } as Batch, view(items, c + 2));
    lat.push(performance.now() - t);
  }
  return { fullMs, p50: pct(lat, 0.5), p99: pct(lat, 0.99) };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root (a private network namespace)');
  lab.netns('ns');
  try {
    console.log(`aggregator bench: ${DURATION} ms per run, each producer changes 4 elements every ${PERIOD} ms (after its previous change is acked); aggregator min interval ${MIN_INTERVAL} ms, burst 1`);
    console.log('K   mode        changes  commits/s  msgs     msgs/change  syscalls  sys/change  cpu ms  cpu/change  p50 ms  p99 ms');
    for (const k of KS) {
      const a = await run(k, 'separate');
      const b = await run(k, 'aggregated');
      for (const [name, x] of [['separate', a], ['aggregated', b]] as const) {
        console.log(`${String(k).padEnd(4)}${name.padEnd(12)}${String(x.changes).padStart(7)}  ${(x.commits / (x.wallMs / 1000)).toFixed(0).padStart(9)}  ${String(x.messages).padStart(7)}  ${(x.messages / x.changes).toFixed(2).padStart(11)}  ${String(x.syscalls).padStart(8)}  ${(x.syscalls / x.changes).toFixed(1).padStart(10)}  ${x.cpuMs.toFixed(0).padStart(6)}  ${(x.cpuMs / x.changes).toFixed(3).padStart(10)}  ${pct(x.lat, 0.5).toFixed(2).padStart(6)}  ${pct(x.lat, 0.99).toFixed(2).padStart(6)}`);
      }
      console.log(`    ratio separate/aggregated: commits ${(a.commits / a.changes / (b.commits / b.changes)).toFixed(1)}x per change, messages ${(a.messages / a.changes / (b.messages / b.changes)).toFixed(1)}x, syscalls ${(a.syscalls / a.changes / (b.syscalls / b.changes)).toFixed(1)}x, cpu ${(a.cpuMs / a.changes / (b.cpuMs / b.changes)).toFixed(1)}x per change`);
    }
    // Both paths once, untimed, at a smaller size first: the one measured first would otherwise be
    // the one timed while V8 still compiles kpng's renderer, and the ratio would favour the other.
    const viaAggregator = async (services?: number) => {
      const agg = new Aggregator({ minIntervalMs: 0, burst: 1, transport: nativeTransport(opts) });
      try { return await kpngOverhead(aggregatorKernel(agg.connect('kpng'), (f) => native.conntrackDelete(f, opts)), services); } finally { agg.close(); }
    };
    const warmSize = Math.min(SERVICES, 1000);
    await kpngOverhead(nativeKernel(opts), warmSize);
    await viaAggregator(warmSize);
    const direct = await kpngOverhead(nativeKernel(opts));
    const via = await viaAggregator();
    console.log(`\nkpng's nft backend, ${SERVICES} services x 10 endpoints: full sync / one service's endpoints changed (p50, p99 of 100), the wall clock around the sink's apply on both rows, both warmed up first`);
    console.log(`direct      ${direct.fullMs.toFixed(0).padStart(6)} ms  ${direct.p50.toFixed(2).padStart(6)} ms  ${direct.p99.toFixed(2).padStart(6)} ms`);
    console.log(`aggregator  ${via.fullMs.toFixed(0).padStart(6)} ms  ${via.p50.toFixed(2).padStart(6)} ms  ${via.p99.toFixed(2).padStart(6)} ms`);
    console.log(`ratio       ${(via.fullMs / direct.fullMs).toFixed(2).padStart(6)}x    ${(via.p50 / direct.p50).toFixed(2).padStart(6)}x`);
  } finally {
    lab.destroy();
  }
}

main().catch((e) => { console.error(e); process.exitCode = 1; });
