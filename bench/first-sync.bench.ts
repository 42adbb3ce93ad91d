// The first sync of kpng's kube source against the real kube-apiserver, paginated lists against
// watch-list, in one command: creates N services x E endpoints (one EndpointSlice each), then runs
// bench/first-sync/child.ts once per variant (a fresh process each: peak RSS is a process's
// high-water mark) and prints time to synced, time to the node's first state, peak RSS and heap.
// Variants with V8 flags show whether kpng could set them for itself (v8.setFlagsFromString at
// start, no re-exec) and what they buy, beside the same flag on the node command line. The last
// variant reads the watch-list in JSON instead of protobuf.
//
//   node dist/bench/first-sync.bench.js [--services 10000] [--endpoints 10] [--runs 1]
//     [--variants 0,1] (indexes into VARIANTS; default all) [--concurrency 16]
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startControlPlane } from '../test/e2e/support/controlplane';
import { createSynthetic } from './vs-upstream/cluster';
import { nodeBinary } from '../test/shared/kpng-process';
import type { FirstSyncResult } from './first-sync/child';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

interface Variant { name: string; env: Record<string, string>; nodeArgs: string[] }

// kpng keeps V8's young generation at its initial size by itself (src/util/memory.ts), unless
// a semi-space flag is on the node command line: --semi-space-growth-factor=2 (V8's default) there
// gives the "V8 default" rows, i.e. kpng before that change.
const V8_DEFAULT = '--semi-space-growth-factor=2';
const VARIANTS: Variant[] = [
  { name: 'list, V8 default young generation', env: { KPNG_KUBE_WATCH_LIST: '0' }, nodeArgs: [V8_DEFAULT] },
  { name: 'list', env: { KPNG_KUBE_WATCH_LIST: '0' }, nodeArgs: [] },
  { name: 'watch-list, V8 default young generation', env: {}, nodeArgs: [V8_DEFAULT] },
  { name: 'watch-list', env: {}, nodeArgs: [] },
  // Does --max-semi-space-size take when set at run time? (It does not: the heap is configured at start.)
  { name: 'watch-list, V8 default + setFlagsFromString --max-semi-space-size=2', env: { KPNG_BENCH_V8_FLAGS: '--max-semi-space-size=2' }, nodeArgs: [V8_DEFAULT] },
  { name: 'watch-list, V8 default + node --max-semi-space-size=2', env: {}, nodeArgs: ['--max-semi-space-size=2'] },
  // kpng asks for protobuf (as kube-proxy); this is the same watch-list in JSON.
  { name: 'watch-list, JSON', env: { KPNG_BENCH_CONTENT_TYPE: 'json' }, nodeArgs: [] },
];

function argValue(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : dflt;
}

function runChild(v: Variant, kubeconfig: string): Promise<FirstSyncResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(nodeBinary(), [...v.nodeArgs, path.join(__dirname, 'first-sync', 'child.js'), '--kubeconfig', kubeconfig, '--node', 'n1'], {
      env: { ...process.env, KPNG_KUBE_WATCH_LIST: '', KPNG_BENCH_V8_FLAGS: '', KPNG_BENCH_CONTENT_TYPE: '', ...v.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${v.name}: child exited with ${code}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as FirstSyncResult);
      } catch {
        reject(new Error(`${v.name}: no result: ${out.slice(0, 200)}`));
      }
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const services = Number(argValue('services', '10000'));
  const endpoints = Number(argValue('endpoints', '10'));
  const runs = Number(argValue('runs', '1'));
  const concurrency = Number(argValue('concurrency', '16'));
  const only = argValue('variants', '');
  const variants = only ? only.split(',').map((i) => VARIANTS[Number(i)]).filter((v) => v !== undefined) : VARIANTS;
  const cp = await startControlPlane({ log: (m) => process.stderr.write(`[controlplane] ${m}\n`) });
  try {
    const t0 = performance.now();
    await createSynthetic(cp, services, endpoints, concurrency);
    process.stderr.write(`created ${services} services x ${endpoints} endpoints in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    const rows: { v: Variant; r: FirstSyncResult }[] = [];
    for (let i = 0; i < runs; i++) {
      // The order rotated from run to run: no variant is always the first after the cluster's creation.
      for (const v of [...variants.slice(i % variants.length), ...variants.slice(0, i % variants.length)]) {
        const r = await runChild(v, cp.kubeconfigPath);
        if (r.services < services) throw new Error(`${v.name}: synced ${r.services} services, expected ${services}+`);
        rows.push({ v, r });
        process.stderr.write(`${v.name}: ${JSON.stringify(r)}\n`);
      }
    }
    console.log(`\nFirst sync of the kube source, ${services} services x ${endpoints} endpoints (median of ${runs} run${runs === 1 ? '' : 's'}, the variants' order rotated between runs; times from process start)\n`);
    console.log('| variant | synced | first state | peak RSS | peak heap | peak young gen | RSS after the idle GC |');
    console.log('|---|---|---|---|---|---|---|');
    const med = (v: Variant, f: (r: FirstSyncResult) => number) => median(rows.filter((x) => x.v === v).map((x) => f(x.r)));
    for (const v of variants) {
      console.log(`| ${v.name} | ${(med(v, (r) => r.syncedMs) / 1000).toFixed(2)} s | ${(med(v, (r) => r.stateMs) / 1000).toFixed(2)} s | ${med(v, (r) => r.peakRssMiB).toFixed(0)} MiB | ${med(v, (r) => r.peakHeapMiB).toFixed(0)} MiB | ${med(v, (r) => r.peakNewSpaceMiB).toFixed(0)} MiB | ${med(v, (r) => r.rssAfterMiB).toFixed(0)} MiB |`);
    }
    const ratios = (a: string, b: string) => {
      const va = variants.find((v) => v.name === a);
      const vb = variants.find((v) => v.name === b);
      if (!va || !vb) return;
      const ratio = (f: (r: FirstSyncResult) => number) => (med(va, f) / med(vb, f)).toFixed(2);
      console.log(`${a} / ${b}: time to first state ${ratio((r) => r.stateMs)}x, peak RSS ${ratio((r) => r.peakRssMiB)}x, peak heap ${ratio((r) => r.peakHeapMiB)}x`);
    };
    console.log('\n(above 1 = the second is better)');
    ratios('list', 'watch-list');
    ratios('list, V8 default young generation', 'watch-list');
    ratios('watch-list, JSON', 'watch-list');
  } finally {
    await cp.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
