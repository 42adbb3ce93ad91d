// One measured first sync: kpng's kube source (reflectors + ClusterStore) and this node's first state
// (NodeState, what a sink would be handed), nothing else. Prints one JSON line on stdout:
// times from process start, peak RSS (the kernel's high-water mark, VmHWM), peak JS heap (sampled),
// and the RSS once the source's post-sync GC has run. Env: KPNG_KUBE_WATCH_LIST=0 for lists,
// KPNG_BENCH_V8_FLAGS (see v8-flags.ts). Args: --kubeconfig PATH --node NAME.
import './v8-flags';
import * as fs from 'node:fs';
import * as v8 from 'node:v8';
import { performance } from 'node:perf_hooks';
import { ClusterStore } from '../../src/store/cluster';
import { NodeState } from '../../src/store/node-state';
import { startKubeSource } from '../../src/source/kube';
import { createLogger } from '../../src/util/log';

export interface FirstSyncResult {
  syncedMs: number;
  stateMs: number;
  services: number;
  peakRssMiB: number;
  peakHeapMiB: number;
  /** The young generation's committed size at its peak (sampled): shows whether a semi-space flag took. */
  peakNewSpaceMiB: number;
  rssAfterMiB: number;
  heapAfterMiB: number;
}

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};

function vmHwmMiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function main(): Promise<void> {
  const log = createLogger((process.env.KPNG_BENCH_LOG as 'info' | undefined) ?? 'warn');
  const node = arg('node') ?? 'n1';
  let peakHeap = 0;
  let peakNew = 0;
  const sample = () => {
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
    const ns = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    if (ns) peakNew = Math.max(peakNew, ns.space_size);
  };
  const sampler = setInterval(sample, 5);
  const store = new ClusterStore({ log });
  const state = new NodeState(store, node);
  const ac = new AbortController();
  const source = await startKubeSource({ store, log, kubeconfig: arg('kubeconfig'), node, serviceProxyName: '', signal: ac.signal,
    contentType: process.env.KPNG_BENCH_CONTENT_TYPE === 'json' ? 'json' : undefined });
  await store.whenSynced();
  const syncedMs = performance.now();
  await state.whenSynced();
  const stateMs = performance.now();
  sample();
  clearInterval(sampler);
  const peakRss = vmHwmMiB();
  // The source runs one memory-reducing GC once the loop has been idle for a second.
  await new Promise((r) => setTimeout(r, 3000));
  const result: FirstSyncResult = {
    syncedMs, stateMs, services: store.serviceCount,
    peakRssMiB: peakRss, peakHeapMiB: peakHeap / 2 ** 20, peakNewSpaceMiB: peakNew / 2 ** 20,
    rssAfterMiB: process.memoryUsage.rss() / 2 ** 20, heapAfterMiB: process.memoryUsage().heapUsed / 2 ** 20,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  ac.abort();
  await source.stop();
  state.close();
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`first-sync child: ${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
