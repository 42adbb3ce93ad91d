// Upstream kube-proxy (nftables mode) and kpng side by side, on the same real kube-apiserver, the
// same objects and the same churn, each proxy alone in its own network namespace (one after the
// other, so they never compete for the CPU).
//
//   npm run bench:vs-upstream -- --services N --endpoints E [--duration S] [--input cluster.yaml]
//        [--node NAME] [--rate 50] [--probes 60] [--backends nft] [--strace-seconds 10] [--out DIR]
//        [--service-cidr 10.96.0.0/12,fd00:10:96::/108] [--starts 1] [--fill api|etcd] [--skip-upstream]
//        [--runs 3]
//
// --runs N (default 3): the whole measurement N times on the same cluster, the proxies' order rotated
// from run to run (run r starts with the r-th proxy: with two, they alternate), so that neither is
// always the one measured on a fresh API server or page cache; the table shows each figure's median
// of the runs and its range (min..max).
// For each proxy it measures, checking the kernel the same way for both:
//   start       process start -> every cluster IP present in `nft list ruleset`, timed at the
//               nf_tables generation (commit) that made the listing complete; --starts N: N starts
//               per run, each in a fresh network namespace (the table: all runs' starts together).
//               kpng starts with an empty compile cache directory of its own (KPNG_COMPILE_CACHE: a
//               host or image without one). A separate row: kpng started once more per run with the
//               cache the image ships, made the same way (hack/image/warm-compile-cache.js) for this
//               checkout's paths
//   change      one endpoint replaced by an API write -> the commit whose changes name the new
//               address (found with `nft monitor`, timed by the generation poller), p50/p99 over --probes writes spaced 1.2 s apart (more than the 1 s
//               minimum sync period of both)
//   churn       --rate endpoint writes/s for --duration s: CPU of the process and its reaped
//               children (kube-proxy runs `nft`), syscalls (perf's raw_syscalls:sys_enter counter,
//               inherited by threads and children), kernel transactions (generations)
//   memory      VmHWM (peak resident set) of the process, and its resident set after the churn
//   netlink     a separate pass under strace (it slows the process down: no time is taken from it):
//               bytes and messages exchanged with the kernel over netlink per second of churn
// kpng --to ebpf (--backends nft,ebpf): its socket LB's work is in BPF maps, not nftables, so its start
// and change are read from the pinned maps (bpfmaps.py: every cluster IP with a service entry; the new
// endpoint's backend appearing); its programs attach to a cgroup made for the run, removed after.
// --fill: how the synthetic objects are created: through the API server (default up to 10k services),
// or written into etcd (default above: the API server's ClusterIP allocation is quadratic; etcd-fill.ts).
// A proxy that has not programmed every service after --start-timeout s (default 1200) is reported as
// such (its start as a lower bound) and not measured further; the other proxies still are.
// It prints one table with ratios (upstream / kpng: above 1, kpng is ahead; with --skip-upstream, the
// first kpng column / the others) and writes an SVG chart.
// Figures, never pass/fail.
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane, type ControlPlane } from '../../test/e2e/support/controlplane';
import { repoRoot } from '../../test/shared/kpng-process';
import { ebpfCleanup } from '../../src/native/ebpf';
import { DEFAULT_MAP_ENTRIES } from '../../src/backend/ebpf/maps';
import { churn, createFromDump, createSynthetic, ipRange, POD_CIDR, replaceEndpoint, restoreReady, type Cluster, type Fill } from './cluster';
import { BackendWatcher, listedIps, Monitor, waitBpfVips } from './kernel';
import { Lab } from './lab';
import { SyscallCounter, percentile, procSample } from './proc';
import { buildKubeProxy, compileCacheEnv, kpng, upstream, type ProxySpec } from './proxies';
import { spread, spreadFigure, table, writeSvg, type Figure, type Spread } from './report';
import { stracePass, type NetlinkFigures } from './strace';
import { helpIfAsked } from '../help';

helpIfAsked(__filename);

interface Options {
  services: number; endpoints: number; duration: number; rate: number; probes: number; input?: string; node?: string;
  backends: string[]; straceSeconds: number; out: string; concurrency: number; startTimeout: number;
  /** Process starts measured per proxy and run (each in a fresh network namespace). */
  starts: number;
  /** Whole measurements, the proxies' order rotated between them. */
  runs: number;
  /** The API server's --service-cluster-ip-range: a /12 by default, so that more than 65k services
   *  fit (the control plane's default /16 holds 65,534). */
  serviceCidr: string;
  fill: Fill;
  /** Leave upstream out (re-measuring kpng's columns; the ratios are then against the first kpng column). */
  skipUpstream: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      services: { type: 'string', default: '1000' },
      endpoints: { type: 'string', default: '10' },
      duration: { type: 'string', default: '30' },
      rate: { type: 'string', default: '50' },
      probes: { type: 'string', default: '60' },
      input: { type: 'string' },
      node: { type: 'string' },
      backends: { type: 'string', default: 'nft' },
      'strace-seconds': { type: 'string', default: '10' },
      out: { type: 'string' },
      concurrency: { type: 'string', default: '16' },
      'start-timeout': { type: 'string', default: '1200' },
      starts: { type: 'string', default: '1' },
      runs: { type: 'string', default: '3' },
      'service-cidr': { type: 'string', default: '10.96.0.0/12,fd00:10:96::/108' },
      fill: { type: 'string' },
      'skip-upstream': { type: 'boolean', default: false },
    },
  });
  const n = (k: string, v: string | undefined, min: number) => {
    const x = Number(v);
    if (!Number.isFinite(x) || x < min) throw new Error(`--${k} must be a number >= ${min}`);
    return x;
  };
  const fill = values.fill ?? (Number(values.services) > 10_000 ? 'etcd' : 'api');
  if (fill !== 'api' && fill !== 'etcd') throw new Error(`--fill must be api or etcd (got ${fill})`);
  if (fill === 'etcd' && values.input) throw new Error('--fill etcd is for synthetic clusters; --input objects are created through the API server');
  return {
    fill,
    skipUpstream: values['skip-upstream'] ?? false,
    services: n('services', values.services, 1),
    endpoints: n('endpoints', values.endpoints, 1),
    duration: n('duration', values.duration, 1),
    rate: n('rate', values.rate, 0.1),
    probes: n('probes', values.probes, 1),
    input: values.input,
    node: values.node,
    backends: (values.backends ?? 'nft').split(',').filter(Boolean),
    straceSeconds: n('strace-seconds', values['strace-seconds'], 0),
    out: values.out ?? path.join(repoRoot(), '.cache', 'bench'),
    concurrency: n('concurrency', values.concurrency, 1),
    startTimeout: n('start-timeout', values['start-timeout'], 1),
    starts: Math.round(n('starts', values.starts, 1)),
    runs: Math.round(n('runs', values.runs, 1)),
    serviceCidr: values['service-cidr'] ?? '10.96.0.0/12,fd00:10:96::/108',
  };
}

const out = (l: string) => process.stdout.write(l + '\n');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One proxy's figures from one run. */
interface Result {
  name: string;
  /** This run's starts (--starts), ms; kpng's each with an empty compile cache. */
  startsMs: number[];
  /** kpng: a start with the compile cache the image ships, ms (empty: not measured). */
  warmStartsMs: number[];
  /** Not every service was programmed within --start-timeout: the last start is a lower bound, nothing else was measured. */
  startTimedOut?: boolean;
  p50: number; p99: number; probesDone: number;
  cpuPct: number; syscallsPerS: number; syscallsPerTx: number; txPerS: number; writesPerS: number;
  peakMiB: number; rssAfterStartMiB: number; rssEndMiB: number;
  netlink?: NetlinkFigures;
}

/** A proxy that did not program every service within --start-timeout. */
class StartTimeout extends Error {
  constructor(readonly seconds: number, what: string) { super(`${what} after ${seconds} s`); }
}

/** Resolves with the time (ms after the proxy started) of the commit after which every IP is listed. */
async function waitProgrammed(lab: Lab, ips: string[], timeoutS: number): Promise<number> {
  const deadline = performance.now() + timeoutS * 1000;
  let missing = ips.length;
  let lastReport = performance.now();
  let listedGen = -1;
  for (;;) {
    if (!lab.proxyRunning) throw new Error(`the proxy in ${lab.netns} exited:\n${lab.stderrTail.join('\n')}`);
    if (performance.now() > deadline) throw new StartTimeout(timeoutS, `not every cluster IP programmed (${missing} missing)`);
    const gen = lab.gens.last;
    if (!gen || gen.id === listedGen) { await sleep(20); continue; }
    // The listing shows this generation or a later one; a commit during the listing may make us
    // attribute completeness one generation early (never when the proxy programs in one transaction).
    listedGen = gen.id;
    const have = await listedIps(lab.netns);
    missing = ips.filter((ip) => !have.has(ip)).length;
    if (missing === 0) return gen.at - lab.startedAt;
    if (performance.now() - lastReport > 10_000) {
      lastReport = performance.now();
      out(`  ... ${((performance.now() - lab.startedAt) / 1000).toFixed(0)} s: ${ips.length - missing}/${ips.length} cluster IPs programmed`);
    }
  }
}

/**
 * The eBPF backend's start: every cluster IP has a service entry in the pinned map. Resolves with the
 * end of the first complete scan (ms after the proxy started: late by at most two scans and the pause
 * between them, which is as long as a scan; the scan time is printed).
 */
async function waitProgrammedBpf(lab: Lab, pinDir: string, ips: string[], timeoutS: number): Promise<{ ms: number; scanMs: number }> {
  const w = waitBpfVips(pinDir, ips, (have) => out(`  ... ${((performance.now() - lab.startedAt) / 1000).toFixed(0)} s: ${have}/${ips.length} cluster IPs in the BPF maps`));
  let timer: NodeJS.Timeout | undefined;
  const failed = new Promise<never>((_, reject) => {
    const t0 = performance.now();
    timer = setInterval(() => {
      if (!lab.proxyRunning) reject(new Error(`the proxy in ${lab.netns} exited:\n${lab.stderrTail.join('\n')}`));
      else if (performance.now() - t0 > timeoutS * 1000) reject(new StartTimeout(timeoutS, 'not every cluster IP in the BPF maps'));
    }, 100);
  });
  try {
    const r = await Promise.race([w.done, failed]);
    return { ms: r.at - lab.startedAt, scanMs: r.scanMs };
  } finally {
    clearInterval(timer);
    w.stop();
  }
}

/** Waits until no transaction was committed for quietMs (at most maxMs). */
async function quiet(lab: Lab, quietMs: number, maxMs = 60_000): Promise<void> {
  const end = performance.now() + maxMs;
  while (performance.now() < end) {
    const last = lab.gens.last?.at ?? 0;
    if (performance.now() - Math.max(last, lab.startedAt) >= quietMs) return;
    await sleep(100);
  }
}

/** Endpoint replacements, API write -> the commit naming the new address (nft monitor + generation poller). */
async function probesNft(lab: Lab, cp: ControlPlane, cluster: Cluster, opts: Options, probeIp: () => string): Promise<number[]> {
  const monitor = new Monitor(lab.netns);
  const lat: number[] = [];
  try {
    await monitor.ready(lab.netns);
    await sleep(500); // the proxy's own commits are done; nothing else writes now
    for (let i = 0; i < opts.probes; i++) {
      const s = cluster.slices[Math.floor(Math.random() * cluster.slices.length)];
      const ip = probeIp();
      const seen = monitor.waitForIp(ip, 30_000);
      const t = performance.now();
      await replaceEndpoint(cp, s, ip, true);
      try {
        const gen = await seen;
        // The commit's time as the generation poller saw it (every 2 ms), not the monitor's.
        for (let w = 0; lab.gens.seenAt(gen) === undefined && w < 100; w++) await sleep(10);
        const at = lab.gens.seenAt(gen);
        if (at === undefined) throw new Error(`generation ${gen} not seen by the poller`);
        lat.push(at - t);
      } catch (e) {
        out(`  probe ${i}: ${(e as Error).message}`);
      }
      await sleep(Math.max(0, 1200 - (performance.now() - t)));
    }
  } finally {
    monitor.stop();
  }
  return lat;
}

/** Endpoint replacements, API write -> the new endpoint's backend in the socket LB's map (every 2 ms). */
async function probesBpf(pinDir: string, cp: ControlPlane, cluster: Cluster, opts: Options, probeIp: () => string): Promise<number[]> {
  const be = new BackendWatcher(pinDir);
  const lat: number[] = [];
  try {
    await be.ready;
    for (let i = 0; i < opts.probes; i++) {
      const s = cluster.slices[Math.floor(Math.random() * cluster.slices.length)];
      const ip = probeIp();
      const seen = be.waitForIp(ip, 30_000);
      const t = performance.now();
      await replaceEndpoint(cp, s, ip, true);
      try { lat.push((await seen) - t); } catch (e) { out(`  probe ${i}: ${(e as Error).message}`); }
      await sleep(Math.max(0, 1200 - (performance.now() - t)));
    }
  } finally {
    be.stop();
  }
  return lat;
}

/** Starts the proxy in a new lab and waits until every cluster IP is programmed. */
async function startOnce(spec: ProxySpec, cp: ControlPlane, cluster: Cluster, opts: Options, apiPort: number, cacheDir?: string): Promise<{ lab: Lab; pid: number; startMs: number }> {
  const lab = await Lab.create(spec.tag, apiPort);
  try {
    await sleep(200); // the generation watcher's first reading
    if (spec.ebpf) fs.mkdirSync(spec.ebpf.cgroup, { recursive: true });
    const proxy = lab.startProxy(spec.argv(cp.kubeconfigPath, cluster.node, POD_CIDR), !!spec.ebpf, cacheDir ? compileCacheEnv(cacheDir) : undefined);
    let startMs: number;
    if (spec.ebpf) {
      const r = await waitProgrammedBpf(lab, spec.ebpf.pinDir, cluster.clusterIps, opts.startTimeout);
      startMs = r.ms;
      out(`  start -> all ${cluster.clusterIps.length} cluster IPs in the socket LB's service map: ${(startMs / 1000).toFixed(2)} s (end of the first complete map scan; a scan took ${r.scanMs.toFixed(0)} ms)`);
    } else {
      startMs = await waitProgrammed(lab, cluster.clusterIps, opts.startTimeout);
      out(`  start -> all ${cluster.clusterIps.length} cluster IPs programmed: ${(startMs / 1000).toFixed(2)} s`);
    }
    return { lab, pid: proxy.pid!, startMs };
  } catch (e) {
    await lab.stop();
    if (spec.ebpf) await cleanEbpf(spec.ebpf);
    throw e;
  }
}

/** A fresh, empty compile cache directory (removed by the caller). */
function newCacheDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `${process.env.KPNG_BENCH_NETNS_PREFIX || 'kbv'}-compile-cache-`));
}

/** Files in a directory tree (a compile cache's entries). */
function fileCount(dir: string): number {
  try { return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length; } catch { return 0; }
}

/** The compile cache the image ships (hack/image/warm-compile-cache.js), made in `dir` for this checkout. */
function shippedCache(dir: string): void {
  const root = repoRoot();
  execFileSync(process.execPath, [path.join(root, 'hack/image/warm-compile-cache.js'), dir, root], { stdio: 'ignore' });
}

/** One run of one proxy: its starts, then the rest on the last one; kpng: a start with the cache the image ships after. */
async function measure(spec: ProxySpec, cp: ControlPlane, cluster: Cluster, opts: Options, apiPort: number, probeIp: () => string, churnIp: () => string, run: string): Promise<Result> {
  out(`\n## ${spec.name} (${run})`);
  const caches: string[] = [];
  try {
    const r = await measureStarted(spec, cp, cluster, opts, apiPort, probeIp, churnIp, () => { const d = newCacheDir(); caches.push(d); return d; });
    if (spec.compileCache && !r.startTimedOut && caches.length > 0) {
      const dir = newCacheDir();
      caches.push(dir);
      shippedCache(dir);
      out(`  start with the compile cache the image ships (${fileCount(dir)} entries):`);
      try {
        const w = await startOnce(spec, cp, cluster, opts, apiPort, dir);
        r.warmStartsMs.push(w.startMs);
        await w.lab.stop();
      } catch (e) {
        if (!(e instanceof StartTimeout)) throw e;
        out(`  ${e.message}: the start with a warm cache is not recorded`);
      } finally {
        if (spec.ebpf) await cleanEbpf(spec.ebpf);
      }
    }
    return r;
  } finally {
    for (const d of caches) fs.rmSync(d, { recursive: true, force: true });
  }
}

async function measureStarted(spec: ProxySpec, cp: ControlPlane, cluster: Cluster, opts: Options, apiPort: number, probeIp: () => string, churnIp: () => string, cacheDir: () => string): Promise<Result> {
  // --starts N: N-1 starts measured and stopped first, each in its own namespace; the last one goes on.
  const starts: number[] = [];
  let started: Awaited<ReturnType<typeof startOnce>>;
  const cache = () => (spec.compileCache ? cacheDir() : undefined);
  try {
    for (let i = 1; i < opts.starts; i++) {
      const s = await startOnce(spec, cp, cluster, opts, apiPort, cache());
      starts.push(s.startMs);
      await s.lab.stop();
      if (spec.ebpf) await cleanEbpf(spec.ebpf);
    }
    started = await startOnce(spec, cp, cluster, opts, apiPort, cache());
  } catch (e) {
    if (!(e instanceof StartTimeout)) throw e;
    out(`  ${e.message}: start recorded as > ${e.seconds} s; nothing else measured for ${spec.name}`);
    const na = NaN;
    return {
      name: spec.name, startsMs: [...starts, e.seconds * 1000], warmStartsMs: [], startTimedOut: true, p50: na, p99: na, probesDone: 0, cpuPct: na, syscallsPerS: na,
      syscallsPerTx: na, txPerS: na, writesPerS: na, peakMiB: na, rssAfterStartMiB: na, rssEndMiB: na,
    };
  }
  const { lab, pid, startMs: lastStart } = started;
  starts.push(lastStart);
  if (starts.length > 1) {
    const sp = spread(starts);
    out(`  start: median ${(sp.median / 1000).toFixed(2)} s of ${starts.length} (${starts.map((m) => (m / 1000).toFixed(2)).join(', ')} s)`);
  }
  try {
    await quiet(lab, 2000);
    const afterStart = procSample(pid);

    // One endpoint change at a time, API write -> kernel.
    const lat = spec.ebpf ? await probesBpf(spec.ebpf.pinDir, cp, cluster, opts, probeIp) : await probesNft(lab, cp, cluster, opts, probeIp);
    lat.sort((a, b) => a - b);
    out(`  one endpoint change, API write -> kernel: p50 ${percentile(lat, 50).toFixed(1)} ms, p99 ${percentile(lat, 99).toFixed(1)} ms (${lat.length}/${opts.probes})`);

    // Steady churn.
    await quiet(lab, 1500);
    const g0 = lab.gens.last?.id ?? 0;
    const s0 = procSample(pid);
    const counter = new SyscallCounter(pid);
    await sleep(200); // perf attached
    const w0 = performance.now();
    const writes = await churn(cp, cluster.slices, { rate: opts.rate, seconds: opts.duration, nextIp: churnIp, concurrency: opts.concurrency, log: out });
    await sleep(1500); // the last writes' sync
    const wall = (performance.now() - w0) / 1000;
    const syscalls = await counter.stop();
    const s1 = procSample(pid);
    const tx = (lab.gens.last?.id ?? 0) - g0;
    const r: Result = {
      name: spec.name,
      startsMs: starts,
      warmStartsMs: [],
      p50: percentile(lat, 50), p99: percentile(lat, 99), probesDone: lat.length,
      cpuPct: ((s1.cpuMs - s0.cpuMs) / 1000 / wall) * 100,
      syscallsPerS: syscalls / wall,
      syscallsPerTx: tx > 0 ? syscalls / tx : NaN,
      txPerS: tx / wall,
      writesPerS: writes / wall,
      peakMiB: s1.peakMiB,
      rssAfterStartMiB: afterStart.rssMiB,
      rssEndMiB: s1.rssMiB,
    };
    out(`  churn ${writes} writes in ${wall.toFixed(1)} s: cpu ${r.cpuPct.toFixed(1)}%, ${r.syscallsPerS.toFixed(0)} syscalls/s, ${tx} transactions, ${r.syscallsPerTx.toFixed(0)} syscalls/transaction; rss after start ${afterStart.rssMiB.toFixed(0)} MiB, at the end ${s1.rssMiB.toFixed(0)} MiB, peak ${s1.peakMiB.toFixed(0)} MiB`);

    if (opts.straceSeconds > 0) {
      await quiet(lab, 1500);
      const g1 = lab.gens.last?.id ?? 0;
      const pass = stracePass(pid, opts.straceSeconds + 2);
      await sleep(1000);
      await churn(cp, cluster.slices, { rate: opts.rate, seconds: opts.straceSeconds, nextIp: churnIp, concurrency: opts.concurrency, log: out });
      r.netlink = await pass;
      r.netlink.seconds = opts.straceSeconds; // the writes of this many seconds, with their syncs
      r.netlink.transactions = (lab.gens.last?.id ?? 0) - g1;
      out(`  netlink (strace pass): ${r.netlink.sentBytes} B / ${r.netlink.sentMessages} messages to the kernel, ${r.netlink.receivedBytes} B back, in ${r.netlink.seconds} s, ${r.netlink.transactions} transactions`);
    }
    return r;
  } finally {
    await lab.stop();
    if (spec.ebpf) await cleanEbpf(spec.ebpf);
    await restoreReady(cp, cluster.slices, opts.concurrency);
  }
}

/** Detaches and unpins what kpng --to ebpf left (it keeps balancing after exit by design), removes the cgroup. */
async function cleanEbpf(places: { cgroup: string; pinDir: string }): Promise<void> {
  try {
    const removed = await ebpfCleanup(places.pinDir);
    out(`  clean-up: detached and unpinned ${removed.length} objects under ${places.pinDir}`);
  } catch (e) {
    out(`  clean-up of ${places.pinDir} failed: ${(e as Error).message}`);
  }
  try { fs.rmdirSync(places.cgroup); } catch (e) { out(`  rmdir ${places.cgroup}: ${(e as Error).message}`); }
}

async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  if (process.getuid?.() !== 0) throw new Error('bench:vs-upstream needs root (network namespaces, perf)');
  for (const [cmd, arg] of [['nft', '--version'], ['perf', '--version'], ['python3', '--version']]) {
    if (spawnSync(cmd, [arg]).status !== 0) throw new Error(`${cmd} is needed (hack/install-deps.sh installs it)`);
  }
  const root = repoRoot();
  const cpBuild = spawnSync(path.join(root, 'hack', 'controlplane', 'build.sh'), [], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (cpBuild.status !== 0) throw new Error('hack/controlplane/build.sh failed');
  const kubeProxy = buildKubeProxy();

  const cp = await startControlPlane({ log: (m) => process.stderr.write(`[controlplane] ${m}\n`), serviceClusterIPRange: opts.serviceCidr, keepAlive: true });
  try {
    const version = (await cp.request('GET', '/version')).body;
    const t0 = performance.now();
    const cluster = opts.input
      ? await createFromDump(cp, opts.input, opts.node, opts.concurrency)
      : await createSynthetic(cp, opts.services, opts.endpoints, opts.concurrency, opts.fill, opts.serviceCidr);
    if (cluster.slices.length === 0) throw new Error('no EndpointSlice with IPv4 endpoints of a proxied service: nothing to change');
    const shape = opts.input ? `${path.basename(opts.input)}: ${cluster.services} services, ${cluster.endpoints} endpoints` : `${opts.services} services x ${opts.endpoints} endpoints`;
    out(`kube-apiserver ${version.gitVersion}; ${shape} created in ${((performance.now() - t0) / 1000).toFixed(1)} s${opts.input ? '' : ` (${opts.fill === 'etcd' ? 'written into etcd' : 'through the API server'})`}; node ${cluster.node}`);
    out(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model.trim()}, kernel ${os.release()}, ${new Date().toISOString().slice(0, 10)}`);
    // The eBPF maps sized for the cluster (a slot 0 per cluster IP and a slot per endpoint, +25%), at
    // least kpng's default: services that do not fit would be served by its nft part instead.
    const mapEntries = Math.max(DEFAULT_MAP_ENTRIES, Math.ceil((1.25 * (cluster.clusterIps.length + cluster.endpoints)) / 1024) * 1024);
    const specs: ProxySpec[] = [...(opts.skipUpstream ? [] : [upstream(kubeProxy)]), ...opts.backends.map((b) => kpng(b, mapEntries))];
    const apiPort = Number(new URL(cp.server).port);
    const probeIp = ipRange(250);
    const churnIp = ipRange(248);
    // Run r measures the proxies starting with the r-th (rotation): each goes first as often as the others.
    const runs: Result[][] = specs.map(() => []);
    for (let r = 0; r < opts.runs; r++) {
      const order = specs.map((_, i) => (i + r) % specs.length);
      out(`\n# run ${r + 1} of ${opts.runs}: ${order.map((i) => specs[i].name).join(', then ')}`);
      for (const i of order) {
        if (runs[i].some((x) => x.startTimedOut)) { out(`\n## ${specs[i].name}: not measured again (it did not finish its start in an earlier run)`); continue; }
        runs[i].push(await measure(specs[i], cp, cluster, opts, apiPort, probeIp, churnIp, `run ${r + 1} of ${opts.runs}`));
      }
    }

    const names = specs.map((sp) => sp.name);
    /** Per proxy, the spread over its runs of one per-run figure (runs that finished their start). */
    const per = (f: (r: Result) => number): Spread[] => runs.map((rs) => spread(rs.filter((r) => !r.startTimedOut).map(f)));
    const timedOut = runs.map((rs) => rs.some((r) => r.startTimedOut));
    const startsS = runs.map((rs) => spread(rs.flatMap((r) => r.startsMs).map((ms) => ms / 1000)));
    // Upstream has no compile cache: its warm row is its start.
    const warmS = runs.map((rs, i) => (specs[i].compileCache ? spread(rs.flatMap((r) => r.warmStartsMs).map((ms) => ms / 1000)) : startsS[i]));
    const nStarts = runs.map((rs) => rs.reduce((a, r) => a + r.startsMs.length, 0));
    const figures: Figure[] = [
      spreadFigure({ label: 'process start -> all services programmed; kpng: empty compile cache', unit: 's', digits: 2, lowerBound: timedOut }, startsS),
      spreadFigure({ label: 'process start, kpng with the compile cache the image ships (upstream: its start)', unit: 's', digits: 2, lowerBound: timedOut }, warmS),
      spreadFigure({ label: 'one endpoint change, API write -> kernel, p50', unit: 'ms', digits: 1 }, per((r) => r.p50)),
      spreadFigure({ label: 'one endpoint change, API write -> kernel, p99', unit: 'ms', digits: 1 }, per((r) => r.p99)),
      spreadFigure({ label: `churn at ${opts.rate} writes/s: CPU`, unit: '% of a core', digits: 1 }, per((r) => r.cpuPct)),
      spreadFigure({ label: 'syscalls/s under churn', unit: '/s', digits: 0 }, per((r) => r.syscallsPerS)),
      spreadFigure({ label: 'syscalls per kernel transaction', unit: 'n', digits: 0 }, per((r) => r.syscallsPerTx)),
      spreadFigure({ label: 'peak RSS of the process', unit: 'MiB', digits: 0 }, per((r) => r.peakMiB)),
      spreadFigure({ label: 'RSS at the end of the churn', unit: 'MiB', digits: 0 }, per((r) => r.rssEndMiB)),
    ];
    if (runs.some((rs) => rs.some((r) => r.netlink))) {
      const nl = (f: (n: NetlinkFigures) => number) => per((r) => (r.netlink ? f(r.netlink) / r.netlink.seconds : NaN));
      figures.push(
        spreadFigure({ label: 'netlink to the kernel under churn', unit: 'KiB/s', digits: 1 }, nl((n) => n.sentBytes / 1024)),
        spreadFigure({ label: 'netlink messages to the kernel under churn', unit: '/s', digits: 0 }, nl((n) => n.sentMessages)),
        spreadFigure({ label: 'netlink from the kernel under churn', unit: 'KiB/s', digits: 1 }, nl((n) => n.receivedBytes / 1024)),
      );
    }
    const measured = runs.map((rs) => rs.filter((r) => !r.startTimedOut).length);
    out(`\n${shape}; churn ${opts.duration} s at ${opts.rate} endpoint writes/s; ${opts.probes} probes; ${opts.runs} run${opts.runs === 1 ? '' : 's'}, the proxies' order rotated between runs`);
    out(`(each figure: the median of the runs (min..max); starts: of every start, ${names.map((n, i) => `${n} ${nStarts[i]}`).join(', ')}; runs measured: ${names.map((n, i) => `${n} ${measured[i]}`).join(', ')})`);
    out(table(names, figures));
    const tx = per((r) => r.txPerS);
    out(`(ratios: ${names[0]} / the others, of the medians, above 1 = the other is ahead; kernel transactions/s under churn, median: ${names.map((n, i) => `${n} ${tx[i].median.toFixed(2)}`).join(', ')}; kube-proxy's peak RSS does not include its short-lived nft children)`);
    if (specs.some((sp) => sp.ebpf)) out('(kpng ebpf: start and one change are read from the socket LB\'s pinned BPF maps, the others\' from nftables; its netlink figures are its nftables part\'s: node ports and LB IPs from other hosts)');
    fs.mkdirSync(opts.out, { recursive: true });
    const svg = path.join(opts.out, `vs-upstream-${opts.input ? path.basename(opts.input).replace(/\W+/g, '_') : `${opts.services}x${opts.endpoints}`}.svg`);
    writeSvg(svg, `kpng vs kube-proxy ${version.gitVersion} (nftables): ${shape}`, names, figures);
    out(`chart: ${svg}`);
  } finally {
    await cp.stop();
  }
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`bench:vs-upstream: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
