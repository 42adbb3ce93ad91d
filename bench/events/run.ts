// The events benchmark: KPNG's "bigger cluster" on a real kube-apiserver, churned the way a live
// cluster churns, with `kpng kube --to trace --stats` following it as a child process.
//
//   npm run bench:events -- --services 1000 --pods 1500 --duration 120 [--rate 73] [--nodes 10]
//                           [--relevant 0.45] [--min-sync-period 1s] [--concurrency 16]
//
// It builds the control plane if needed (hack/controlplane/build.sh), creates the Services and
// EndpointSlices, starts kpng for node n1, then for --duration seconds writes at --rate writes/s
// (default 73/s: KPNG's 130,942 events in 30 min) a mix of
//   flap      an endpoint's readiness flips (and flips back on a later flap)
//   replace   a pod is replaced: the endpoint gets a new IP
//   slice-ann an EndpointSlice annotation changes (endpoints.kubernetes.io/last-change-trigger-time)
//   svc-label a Service label / annotation changes (kubectl apply, CI stamps)
//   reorder   an EndpointSlice is rewritten with its endpoints in another order (no-op for a proxy)
//   heartbeat node n1's kubelet updates its status conditions every 10 s
// --relevant is the share of flap + replace writes (default 0.45; 0.01 comes close to KPNG's mix).
// It prints kpng's stats lines, the kube-apiserver version, and a summary line:
//   summary: events=N revs=M revs/events=P% cpu=C% rss=R MiB heap=H MiB
// (over the churn period: events and revisions kpng counted, CPU of kpng's process as % of one
// core, its resident set and V8 heap at the end). Figures, never pass/fail.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane, type ControlPlane } from '../../test/e2e/support/controlplane';
import { repoRoot } from '../../test/shared/kpng-process';
import { KpngTrace, type StatsLine } from '../../test/shared/kpng-trace';
import { type EndpointSpec, newEndpointSlice, newNode, newService, NODES, nodeStatus, SERVICES, SLICES } from '../../test/shared/objects';
import { helpIfAsked } from '../help';
import { parseKlogLine, severityAndMessage } from '../../test/helpers/klog';

helpIfAsked(__filename);

interface Options { services: number; pods: number; duration: number; rate: number; nodes: number; concurrency: number; minSyncPeriod: string; relevant: number }

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      services: { type: 'string', default: '1000' },
      pods: { type: 'string', default: '1500' },
      duration: { type: 'string', default: '60' },
      rate: { type: 'string', default: '73' },
      nodes: { type: 'string', default: '10' },
      concurrency: { type: 'string', default: '16' },
      'min-sync-period': { type: 'string', default: '1s' },
      relevant: { type: 'string', default: '0.45' },
    },
  });
  const n = (k: string, v: string | undefined, min: number) => {
    const x = Number(v);
    if (!Number.isFinite(x) || x < min) throw new Error(`--${k} must be a number >= ${min}`);
    return x;
  };
  return {
    services: n('services', values.services, 1),
    pods: n('pods', values.pods, 0),
    duration: n('duration', values.duration, 1),
    rate: n('rate', values.rate, 0.1),
    nodes: n('nodes', values.nodes, 1),
    concurrency: n('concurrency', values.concurrency, 1),
    minSyncPeriod: values['min-sync-period'] ?? '1s',
    relevant: Math.min(1, n('relevant', values.relevant, 0)),
  };
}

const out = (l: string) => process.stdout.write(l + '\n');
const NS = 'default';

/** A pod's endpoint in the model the bench keeps of each slice. */
interface Ep { ip: string; ready: boolean; nodeName: string; zone: string; pod: string }
interface Svc { name: string; slice: string; eps: Ep[] }

class Cluster {
  readonly svcs: Svc[] = [];
  private ipSeq = 0;
  private podSeq = 0;
  constructor(private readonly opts: Options) {}

  nextIP(): string {
    const n = this.ipSeq++;
    return `10.${244 + Math.floor(n / 65024)}.${Math.floor((n % 65024) / 254)}.${(n % 254) + 1}`;
  }
  nextPod(svc: string): Ep {
    const k = this.podSeq++;
    const nodeIdx = k % this.opts.nodes;
    return { ip: this.nextIP(), ready: true, nodeName: `n${nodeIdx + 1}`, zone: `zone-${String.fromCharCode(97 + (nodeIdx % 3))}`, pod: `${svc}-${k}` };
  }
  build(): void {
    for (let i = 0; i < this.opts.services; i++) this.svcs.push({ name: `svc-${i}`, slice: `svc-${i}-abcde`, eps: [] });
    for (let p = 0; p < this.opts.pods; p++) {
      const s = this.svcs[p % this.svcs.length];
      s.eps.push(this.nextPod(s.name));
    }
  }
  sliceBody(s: Svc, annotations?: Record<string, string>): object {
    const spec: EndpointSpec[] = s.eps.map((e) => ({ ip: e.ip, ready: e.ready, serving: e.ready, nodeName: e.nodeName, zone: e.zone, pod: e.pod }));
    return newEndpointSlice(s.slice, s.name, spec, { annotations });
  }
}

/** Runs tasks with at most `n` in flight. */
async function pool<T>(items: T[], n: number, f: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) await f(items[i++]);
  }));
}

async function must(cp: ControlPlane, method: string, p: string, body?: unknown): Promise<any> {
  for (let attempt = 0; ; attempt++) {
    const r = await cp.request(method, p, body, { timeoutMs: 30_000 });
    if (r.status >= 200 && r.status < 300) return r.body;
    if ((r.status === 429 || r.status >= 500 || r.status === 409) && attempt < 5) {
      await new Promise((res) => setTimeout(res, 100 * (attempt + 1)));
      continue;
    }
    throw new Error(`${method} ${p}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  }
}

/** CPU ticks (user+system) and resident/peak memory of a process, from /proc. */
function procSample(pid: number): { cpuMs: number; rssMiB: number; hwmMiB: number } {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]); // utime, stime (fields 14, 15)
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { cpuMs: (ticks * 1000) / 100, rssMiB: kb('VmRSS') / 1024, hwmMiB: kb('VmHWM') / 1024 };
}

async function main(): Promise<void> {
  const opts = options(process.argv.slice(2));
  const root = repoRoot();
  const build = spawnSync(path.join(root, 'hack', 'controlplane', 'build.sh'), [], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (build.status !== 0) throw new Error('hack/controlplane/build.sh failed');

  const cp = await startControlPlane({ log: (m) => process.stderr.write(`[controlplane] ${m}\n`) });
  let kpng: KpngTrace | undefined;
  try {
    const version = await must(cp, 'GET', '/version');
    out(`kube-apiserver ${version.gitVersion} (${version.goVersion}, ${version.platform}) at ${cp.server}`);

    const cluster = new Cluster(opts);
    cluster.build();
    const t0 = performance.now();
    for (let i = 0; i < opts.nodes; i++) {
      const name = `n${i + 1}`;
      await must(cp, 'POST', NODES, newNode(name, `zone-${String.fromCharCode(97 + (i % 3))}`));
      await must(cp, 'PATCH', `${NODES}/${name}/status`, nodeStatus([`192.168.0.${i + 1}`], new Date()));
    }
    await pool(cluster.svcs, opts.concurrency, async (s) => {
      await must(cp, 'POST', SERVICES(NS), newService(s.name, { labels: { app: s.name } }));
      await must(cp, 'POST', SLICES(NS), cluster.sliceBody(s));
    });
    out(`created ${opts.nodes} nodes, ${opts.services} services, ${opts.services} endpointslices with ${opts.pods} endpoints in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const heapProbe = path.join(__dirname, 'heap-probe.js');
    let heapUsed = 0;
    let lastStats: StatsLine | undefined;
    kpng = new KpngTrace({
      kubeconfig: cp.kubeconfigPath,
      node: 'n1',
      args: ['--stats', '--min-sync-period', opts.minSyncPeriod],
      nodeArgs: fs.existsSync(heapProbe) ? ['--require', heapProbe] : [],
      keepLines: false,
      onStderr: (l) => {
        if (l.startsWith('heap: ')) heapUsed = Number(l.split(' ')[1]);
        else if (l.startsWith('stats:')) out(l);
        else {
          const k = parseKlogLine(l);
          if (k && (k.severity !== 'I' || k.message.startsWith('kube: '))) out(`kpng: ${severityAndMessage(l)}`);
        }
      },
    });
    await kpng.waitFor('the first sync', () => kpng!.syncs.length > 0, 120_000);
    await kpng.waitFor('a stats line after the first sync', () => { lastStats = kpng!.stats.at(-1); return !!lastStats && lastStats.rev >= kpng!.rev; }, 10_000);
    const start = { stats: kpng.stats.at(-1)!, proc: procSample(kpng.pid), wall: performance.now() };
    out(`kpng synced: ${kpng.state.size} items, events=${start.stats.events} rev=${start.stats.rev}; churning for ${opts.duration} s at ${opts.rate} writes/s`);

    // Churn: one write every 1/rate s, at most `concurrency` in flight, until the duration is over.
    const counts: Record<string, number> = { flap: 0, replace: 0, 'slice-ann': 0, 'svc-label': 0, reorder: 0, heartbeat: 0 };
    const end = performance.now() + opts.duration * 1000;
    const busy = new Set<string>();
    let inFlight = 0;
    let failures = 0;
    let seq = 0;
    let nextHeartbeat = performance.now();
    const pick = () => {
      for (;;) {
        const s = cluster.svcs[Math.floor(Math.random() * cluster.svcs.length)];
        if (!busy.has(s.name)) return s;
      }
    };
    const write = async (kind: string, s: Svc | undefined, f: () => Promise<unknown>) => {
      inFlight++;
      if (s) busy.add(s.name);
      try {
        await f();
        counts[kind]++;
      } catch (e) {
        failures++;
        if (failures <= 5) out(`write failed: ${(e as Error).message}`);
      } finally {
        inFlight--;
        if (s) busy.delete(s.name);
      }
    };
    const interval = 1000 / opts.rate;
    let due = performance.now();
    while (performance.now() < end) {
      const now = performance.now();
      if (now < due || inFlight >= opts.concurrency || busy.size >= cluster.svcs.length) {
        await new Promise((r) => setTimeout(r, Math.max(1, Math.min(due - now, 20))));
        continue;
      }
      due += interval;
      seq++;
      if (now >= nextHeartbeat) {
        nextHeartbeat = now + 10_000;
        void write('heartbeat', undefined, () => must(cp, 'PATCH', `${NODES}/n1/status`, nodeStatus(['192.168.0.1'], new Date())));
        continue;
      }
      const s = pick();
      // Share of proxy-relevant writes (flap 2/3, replace 1/3), the rest split as 20:25:10.
      const rel = opts.relevant;
      const u = Math.random();
      const r = u < rel ? (u / rel) * 0.45 : 0.45 + ((u - rel) / (1 - rel)) * 0.55;
      if (r < 0.3 && s.eps.length > 0) {
        const e = s.eps[Math.floor(Math.random() * s.eps.length)];
        e.ready = !e.ready;
        void write('flap', s, () => must(cp, 'PUT', `${SLICES(NS)}/${s.slice}`, cluster.sliceBody(s)));
      } else if (r < 0.45 && s.eps.length > 0) {
        const i = Math.floor(Math.random() * s.eps.length);
        s.eps[i] = cluster.nextPod(s.name);
        void write('replace', s, () => must(cp, 'PUT', `${SLICES(NS)}/${s.slice}`, cluster.sliceBody(s)));
      } else if (r < 0.65) {
        void write('slice-ann', s, () => must(cp, 'PATCH', `${SLICES(NS)}/${s.slice}`, { metadata: { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString(), 'bench/seq': String(seq) } } }));
      } else if (r < 0.9) {
        void write('svc-label', s, () => must(cp, 'PATCH', `${SERVICES(NS)}/${s.name}`, { metadata: { labels: { 'bench/seq': String(seq) }, annotations: { 'bench/deployed-at': new Date().toISOString() } } }));
      } else if (s.eps.length > 1) {
        s.eps.reverse();
        void write('reorder', s, () => must(cp, 'PUT', `${SLICES(NS)}/${s.slice}`, cluster.sliceBody(s)));
      } else {
        void write('svc-label', s, () => must(cp, 'PATCH', `${SERVICES(NS)}/${s.name}`, { metadata: { annotations: { 'bench/seq': String(seq) } } }));
      }
    }
    while (inFlight > 0) await new Promise((r) => setTimeout(r, 10));
    const writes = Object.values(counts).reduce((a, b) => a + b, 0);
    const churnWall = performance.now() - start.wall;
    // kpng's events for the churn: every write is one watch event (heartbeats of n1 included).
    const want = start.stats.events + writes;
    await kpng.waitFor('kpng to receive every write', () => (kpng!.stats.at(-1)?.events ?? 0) >= want, 30_000).catch((e: Error) => out(`note: ${e.message.split('\n')[0]}`));
    await new Promise((r) => setTimeout(r, 1500)); // one more stats line after the last sync
    const fin = { stats: kpng.stats.at(-1)!, proc: procSample(kpng.pid), wall: performance.now() };

    const events = fin.stats.events - start.stats.events;
    const revs = fin.stats.rev - start.stats.rev;
    const cpuPct = ((fin.proc.cpuMs - start.proc.cpuMs) / (fin.wall - start.wall)) * 100;
    out(`writes: ${writes} in ${(churnWall / 1000).toFixed(1)} s (${Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(' ')}), failed=${failures}`);
    out(`kpng totals (incl. the initial lists): events=${fin.stats.events} rev=${fin.stats.rev}; peak rss ${fin.proc.hwmMiB.toFixed(1)} MiB`);
    out(`summary: events=${events} revs=${revs} revs/events=${events ? ((revs / events) * 100).toFixed(2) : '0.00'}% cpu=${cpuPct.toFixed(2)}% rss=${fin.proc.rssMiB.toFixed(1)} MiB heap=${heapUsed ? (heapUsed / 2 ** 20).toFixed(1) : 'n/a'} MiB`);
  } finally {
    await kpng?.stop();
    await cp.stop();
  }
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`bench:events: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
