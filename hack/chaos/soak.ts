// `make soak`: the local cluster (make cluster) under steady endpoint churn and the chaos probes for a
// long time with one proxy, sampled every 30 s: per node, the proxy's RSS, JS heap (Go heap for
// kube-proxy) and open descriptors from its metrics endpoint (:10249; /proc when a series is missing),
// the network programming latency histogram, and the probes' failures. The report (least-squares
// slopes per hour beside the noise, soak-report.ts) goes to .cache/soak-results/<backend>.md, the
// samples beside it as JSON.
//
//   node dist/hack/chaos/soak.js [--backend nft|ebpf|upstream] [--duration 2h] [--every 30s] [--warmup D]
//                                [--no-deploy] [--out FILE]
//     --warmup   samples left out of the fits (default: a sixth of the run, at most 10 min)
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Cluster, inNode, now, openCluster, proxyPod, REPO, run, sleep } from './cluster';
import { OutsideProbes } from './outside';
import { type Backend, parseBackend } from './scenario-list';
import { histogramOf, type NodeSample, parseDuration, parsePrometheus, type ProbeWindow, renderSoak, type SoakResult } from './soak-report';
import { Churn, clientEvents, deployWorkload, removeWorkload } from './workload';

interface Args { backend: Backend; duration: number; every: number; warmup?: number; deploy: boolean; out?: string }

function parseArgs(argv: string[]): Args {
  const a: Args = { backend: 'nft', duration: 7200, every: 30, deploy: true };
  for (let i = 0; i < argv.length; i++) {
    const f = argv[i];
    if (f === '--backend') a.backend = parseBackend(argv[++i]);
    else if (f === '--duration') a.duration = parseDuration(argv[++i]);
    else if (f === '--every') a.every = parseDuration(argv[++i]);
    else if (f === '--warmup') a.warmup = parseDuration(argv[++i]);
    else if (f === '--no-deploy') a.deploy = false;
    else if (f === '--out') a.out = argv[++i];
    else throw new Error(`unknown argument ${f} (see the header of hack/chaos/soak.ts)`);
  }
  return a;
}

const say = (msg: string): void => { process.stdout.write(`soak ${new Date().toISOString().slice(11, 19)}: ${msg}\n`); };

/** The first series of these names that the proxy exposes (kpng: Node.js's; kube-proxy: Go's). */
const pick = (samples: ReturnType<typeof parsePrometheus>, names: string[]): number | undefined => {
  for (const n of names) {
    const s = samples.find((x) => x.name === n);
    if (s) return s.value;
  }
  return undefined;
};

/** The proxy's main process on a node: the pid whose cmdline is kpng's or kube-proxy's, in that node's network namespace. */
function proxyPid(netns: string): number | undefined {
  const want = fs.statSync(`/run/netns/${netns}`).ino;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (fs.statSync(`/proc/${d}/ns/net`).ino !== want) continue;
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (cmd.some((a) => /kube-proxy$|kpng(\.js)?$|dist\/src\/index\.js$/.test(a)) && cmd.some((a) => a.startsWith('--hostname-override'))) return Number(d);
    } catch { /* gone meanwhile */ }
  }
  return undefined;
}

function fromProc(pid: number | undefined): { rss?: number; fds?: number } {
  if (pid === undefined) return {};
  try {
    const rss = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return { ...(rss ? { rss: Number(rss) * 1024 } : {}), fds: fs.readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return {};
  }
}

async function sampleNode(c: Cluster, node: { name: string; netns: string }): Promise<NodeSample> {
  const t = now();
  const r = await inNode(node.netns, ['curl', '-sf', '-m', '5', 'http://127.0.0.1:10249/metrics'], { allowFail: true, timeoutMs: 10_000 });
  const m = r.code === 0 ? parsePrometheus(r.stdout) : [];
  const pod = await proxyPod(c, node.name);
  let rss = pick(m, ['process_resident_memory_bytes']);
  let fds = pick(m, ['process_open_fds']);
  if (rss === undefined || fds === undefined) {
    const p = fromProc(proxyPid(node.netns));
    rss ??= p.rss;
    fds ??= p.fds;
  }
  const heap = pick(m, ['nodejs_heap_size_used_bytes', 'go_memstats_heap_inuse_bytes']);
  const programming = histogramOf(m, 'kubeproxy_network_programming_duration_seconds');
  return {
    t, node: node.name, ...(pod ? { pod: pod.uid } : {}),
    ...(rss !== undefined ? { rssBytes: rss } : {}), ...(heap !== undefined ? { heapBytes: heap } : {}), ...(fds !== undefined ? { fds } : {}),
    ...(programming ? { programming } : {}),
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (process.getuid?.() !== 0) throw new Error('needs root (network namespaces of the nodes)');
  const c = await openCluster();
  const proxy = args.backend === 'upstream' ? 'upstream kube-proxy (nftables mode)' : `kpng, ${args.backend} backend`;
  if (args.deploy) {
    if (args.backend !== 'upstream') await run(path.join(REPO, 'hack/cluster/images.sh'), [], { timeoutMs: 600_000 });
    say(`deploying ${proxy}`);
    say((await run(path.join(REPO, 'hack/cluster/proxy.sh'), [args.backend], { timeoutMs: 600_000 })).stdout.trim());
  }
  say('deploying the workload (namespace chaos)');
  const { nodePort } = await deployWorkload(c);
  const outside = new OutsideProbes(c.plan.nodes.map((n) => ({ name: n.name, ip: n.ip })), nodePort);
  const churn = new Churn(c);
  const startedAt = now();
  outside.start();
  churn.start();
  const out = args.out ?? path.join(REPO, '.cache', 'soak-results', `${args.backend}.md`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const result: SoakResult = {
    proxy, commit: (await run('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'], { allowFail: true })).stdout.trim() || 'unknown',
    command: `make soak BACKEND=${args.backend} DURATION=${process.argv.includes('--duration') ? process.argv[process.argv.indexOf('--duration') + 1] : '2h'}`,
    startedAt, endedAt: startedAt, warmupUntil: startedAt + (args.warmup ?? Math.min(600, args.duration / 6)),
    samples: [], probes: [], churn: { ok: 0, failed: 0 },
  };
  say(`${(args.duration / 60).toFixed(0)} min, a sample every ${args.every} s; report: ${out}`);
  // A row per minute up to an hour's run, per 10 minutes beyond.
  const windowSec = args.duration <= 3600 ? 60 : 600;
  let from = startedAt;
  let stopped = false;
  process.once('SIGINT', () => { stopped = true; say('SIGINT: writing the report of what was sampled'); });
  while (!stopped && now() < startedAt + args.duration) {
    await sleep(Math.max(0, (result.endedAt + args.every) * 1000 - Date.now()));
    const to = now();
    for (const n of c.plan.nodes) result.samples.push(await sampleNode(c, n));
    // The probes' attempts begun in [from, cut): an attempt is logged when it ends (a timeout 2 s
    // after it began), so the window closes 5 s before now and the next one starts there.
    const cut = to - 5;
    const events = [...(await clientEvents(c, from)), ...outside.events.filter((e) => e.t >= from)].filter((e) => e.t < cut && !e.probe.endsWith(' marker'));
    const keep = outside.events.filter((e) => e.t >= cut);
    outside.events.length = 0;
    outside.events.push(...keep);
    const fails = events.filter((e) => !e.ok);
    const w: ProbeWindow = { from, to: cut, attempted: events.length, failed: fails.length, reasons: fails.map((e) => `${e.probe} ${e.detail ?? 'fail'}`) };
    result.probes.push(w);
    result.endedAt = to;
    result.churn = { ok: churn.ok, failed: churn.failed };
    from = cut;
    const last = result.samples.slice(-c.plan.nodes.length).map((s) => `${s.node} ${s.rssBytes === undefined ? '-' : (s.rssBytes / 2 ** 20).toFixed(1)} MiB ${s.fds ?? '-'} fds`).join(', ');
    say(`${((to - startedAt) / 60).toFixed(1)} min: ${w.failed}/${w.attempted} failed; ${last}`);
    fs.writeFileSync(out, renderSoak(result, windowSec));
    // Infinity (a histogram's +Inf bound) as "+Inf": JSON has no Infinity.
    fs.writeFileSync(out.replace(/\.md$/, '.json'), JSON.stringify(result, (_k, v: unknown) => (v === Infinity ? '+Inf' : v)));
  }
  outside.stop();
  await churn.stop();
  await removeWorkload(c);
  fs.writeFileSync(out, renderSoak(result, windowSec));
  process.stdout.write(`\n${renderSoak(result, windowSec)}`);
}

main().catch((e: Error) => {
  process.stderr.write(`soak: ${e.message}\n`);
  process.exit(1);
});
