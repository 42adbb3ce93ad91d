// Soak: kpng programming nftables (in a kbv-soak network namespace) against a real kube-apiserver
// under steady churn, for a long time; prints its resident set and open file
// descriptors every --every seconds, its JS heap and external memory (from its /metrics), and their slopes (least squares over the run after the first
// tenth, per hour). Flat is the goal. Figures, never pass/fail.
//
//   npm run soak -- --minutes 30 [--services 1000] [--endpoints 10] [--rate 73] [--relevant 0.45] [--every 10]
//
// Default churn: KPNG's proposal rate (130,942 events in 30 min = 73 writes/s), 45% of the writes
// changing an endpoint (address or readiness), the rest an annotation only.
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../test/e2e/support/controlplane';
import { nodeBinary, repoRoot } from '../test/shared/kpng-process';
import { churn, createSynthetic, ipRange, POD_CIDR } from './vs-upstream/cluster';
import { listedIps } from './vs-upstream/kernel';
import { Lab } from './vs-upstream/lab';
import { procSample } from './vs-upstream/proc';
import { kpng } from './vs-upstream/proxies';
import { helpIfAsked } from './help';

helpIfAsked(__filename);

const out = (l: string) => process.stdout.write(l + '\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Least-squares slope of y over x. */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return NaN;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0, den = 0;
  for (let i = 0; i < n; i++) { num += (xs[i] - mx) * (ys[i] - my); den += (xs[i] - mx) ** 2; }
  return den === 0 ? NaN : num / den;
}

/** kpng's JS heap and external (Buffer) memory, from its /metrics in the lab's namespace (MiB; NaN if unreadable). */
function heapSample(netns: string): Promise<{ heap: number; external: number }> {
  const script = 'fetch("http://127.0.0.1:10249/metrics").then((r) => r.text()).then((t) => process.stdout.write(t))';
  return new Promise((resolve) => {
    execFile('ip', ['netns', 'exec', netns, nodeBinary(), '-e', script], { timeout: 5000, maxBuffer: 8 << 20 }, (err, stdout) => {
      const metric = (name: string) => {
        const m = err ? null : new RegExp(`^${name} (\\S+)`, 'm').exec(stdout);
        return m ? Number(m[1]) / 2 ** 20 : NaN;
      };
      resolve({ heap: metric('nodejs_heap_size_used_bytes'), external: metric('nodejs_external_memory_bytes') });
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      minutes: { type: 'string', default: '30' }, services: { type: 'string', default: '1000' }, endpoints: { type: 'string', default: '10' },
      rate: { type: 'string', default: '73' }, relevant: { type: 'string', default: '0.45' }, every: { type: 'string', default: '10' },
    },
  });
  const num = (k: keyof typeof values) => {
    const v = Number(values[k]);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`--${k} must be a positive number`);
    return v;
  };
  const [minutes, services, endpoints, rate, relevant, every] = (['minutes', 'services', 'endpoints', 'rate', 'relevant', 'every'] as const).map(num);
  if (process.getuid?.() !== 0) throw new Error('soak needs root (a network namespace)');
  const build = spawnSync(path.join(repoRoot(), 'hack', 'controlplane', 'build.sh'), [], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (build.status !== 0) throw new Error('hack/controlplane/build.sh failed');

  const cp = await startControlPlane({ log: (m) => process.stderr.write(`[controlplane] ${m}\n`) });
  let lab: Lab | undefined;
  try {
    const cluster = await createSynthetic(cp, services, endpoints, 16);
    lab = await Lab.create('soak', Number(new URL(cp.server).port));
    const proxy = lab.startProxy(kpng('nft').argv(cp.kubeconfigPath, cluster.node, POD_CIDR));
    const pid = proxy.pid!;
    for (;;) {
      if (!lab.proxyRunning) throw new Error(`kpng exited:\n${lab.stderrTail.join('\n')}`);
      const have = await listedIps(lab.netns);
      if (cluster.clusterIps.every((ip) => have.has(ip))) break;
      await sleep(500);
    }
    out(`kpng programmed ${services} services x ${endpoints} endpoints; churn ${rate} writes/s (${Math.round(relevant * 100)}% endpoint changes) for ${minutes} min`);
    out('minute  rss MiB  peak MiB  heap MiB  external MiB  fds  transactions');
    const fds = () => fs.readdirSync(`/proc/${pid}/fd`).length;
    const samples: { t: number; rss: number; heap: number; fds: number }[] = [];
    const t0 = performance.now();
    const gen0 = lab.gens.last?.id ?? 0;
    const running = churn(cp, cluster.slices, { rate, seconds: minutes * 60, nextIp: ipRange(248), concurrency: 16, relevant, log: out });
    let done = false;
    void running.finally(() => (done = true));
    while (!done) {
      await Promise.race([sleep(every * 1000), running]);
      if (!lab.proxyRunning) throw new Error(`kpng exited:\n${lab.stderrTail.join('\n')}`);
      const p = procSample(pid);
      const h = await heapSample(lab.netns);
      const s = { t: (performance.now() - t0) / 60_000, rss: p.rssMiB, heap: h.heap, fds: fds() };
      samples.push(s);
      out(`${s.t.toFixed(1).padStart(6)}  ${p.rssMiB.toFixed(1).padStart(7)}  ${p.peakMiB.toFixed(1).padStart(8)}  ${h.heap.toFixed(1).padStart(8)}  ${h.external.toFixed(1).padStart(12)}  ${String(s.fds).padStart(3)}  ${(lab.gens.last?.id ?? 0) - gen0}`);
    }
    const writes = await running;
    const steady = samples.filter((s) => s.t >= minutes / 10);
    const perHour = (ys: number[]) => slope(steady.map((s) => s.t / 60), ys);
    out(`writes: ${writes}; kernel transactions: ${(lab.gens.last?.id ?? 0) - gen0}`);
    const heaps = steady.filter((s) => Number.isFinite(s.heap));
    const heapSlope = slope(heaps.map((s) => s.t / 60), heaps.map((s) => s.heap));
    out(`slope after the first ${(minutes / 10).toFixed(1)} min: rss ${perHour(steady.map((s) => s.rss)).toFixed(2)} MiB/h, JS heap ${heapSlope.toFixed(2)} MiB/h, fds ${perHour(steady.map((s) => s.fds)).toFixed(2)}/h; rss min/max ${Math.min(...steady.map((s) => s.rss)).toFixed(1)}/${Math.max(...steady.map((s) => s.rss)).toFixed(1)} MiB`);
  } finally {
    await lab?.stop();
    await cp.stop();
  }
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`soak: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
