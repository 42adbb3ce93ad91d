// The proxy's own share of network programming latency, measured the same way for every proxy from
// outside it: the bench's own watch of EndpointSlices sees a new ready endpoint address, then waits
// until that address is in the node's kernel. nftables: `nft monitor` names the first committed
// transaction that mentions the address, and the generation poller (nfgen.py) says when that
// generation became visible. eBPF: bpfmaps.py sees the backend appear in the pinned maps. A sample is
// taken at most every `gapMs` per node, one at a time, so the watchers never fall behind.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { GenWatcher, listedIps, onLines, stopChild } from '../vs-upstream/kernel';
import { repoRoot } from '../../test/shared/kpng-process';
import type { Kube } from './kube';
import type { ProxyTarget } from './targets';

export interface ShareSample { node: string; ip: string; ms: number }

interface Watcher { waitForIp(ip: string, timeoutMs: number): Promise<number>; stop(): void; ready(): Promise<void> }

/**
 * `nft monitor` (its warnings on the same pipe, in the order written) and the generation poller. nft
 * cannot print some element events (kpng's maps filled in the transaction that points a chain at
 * them: "Received event for an unknown set"): when a transaction had such a warning and an address is
 * still awaited, the ruleset is listed once right after it, and an address found there is counted at
 * that transaction's generation.
 */
class NftWatcher implements Watcher {
  private readonly gens: GenWatcher;
  private readonly proc: ChildProcess;
  private readonly waiters = new Map<string, { re: RegExp; resolve: (gen: number) => void }>();
  private readonly seen = new Set<string>();
  private undecoded = false;
  private listing: Promise<void> = Promise.resolve();

  constructor(private readonly netns: string) {
    this.gens = new GenWatcher(netns, 5);
    this.proc = spawn('ip', ['netns', 'exec', netns, 'sh', '-c', 'exec nft monitor 2>&1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    onLines(this.proc.stdout!, (l) => this.onLine(l));
  }

  private onLine(l: string): void {
    const g = /^# new generation (\d+)/.exec(l);
    if (!g) {
      if (l.startsWith('W: ')) this.undecoded = true;
      else for (const [ip, w] of this.waiters) if (w.re.test(l)) this.seen.add(ip);
      return;
    }
    const gen = Number(g[1]);
    for (const ip of this.seen) { this.waiters.get(ip)?.resolve(gen); this.waiters.delete(ip); }
    this.seen.clear();
    if (this.undecoded && this.waiters.size) this.listing = this.listing.then(() => this.checkListing(gen));
    this.undecoded = false;
  }

  private async checkListing(gen: number): Promise<void> {
    if (!this.waiters.size) return;
    const ips = await listedIps(this.netns).catch(() => new Set<string>());
    for (const [ip, w] of this.waiters) if (ips.has(ip)) { w.resolve(gen); this.waiters.delete(ip); }
  }

  async ready(): Promise<void> {
    // The monitor prints once it has read the ruleset: a table added and removed shows it listens.
    const end = Date.now() + 180_000;
    let up = false;
    const onData = (c: Buffer | string) => { if (String(c).includes('kss_ready')) up = true; };
    this.proc.stdout!.on('data', onData);
    try {
      for (let wait = 1000; !up; wait *= 2) {
        spawnSync('ip', ['netns', 'exec', this.netns, 'nft', 'add', 'table', 'ip', 'kss_ready']);
        spawnSync('ip', ['netns', 'exec', this.netns, 'nft', 'delete', 'table', 'ip', 'kss_ready']);
        const until = Date.now() + wait;
        while (!up && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
        if (!up && Date.now() > end) throw new Error(`nft monitor in ${this.netns} printed nothing within 180 s`);
      }
    } finally {
      this.proc.stdout!.off('data', onData);
    }
  }

  async waitForIp(ip: string, timeoutMs: number): Promise<number> {
    const gen = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => { this.waiters.delete(ip); reject(new Error(`${ip} did not appear in the kernel within ${timeoutMs} ms`)); }, timeoutMs);
      timer.unref();
      const re = new RegExp(`(?<![\\d.])${ip.replace(/\./g, '\\.')}(?![\\d]|\\.\\d)`);
      this.waiters.set(ip, { re, resolve: (g) => { clearTimeout(timer); resolve(g); } });
    });
    for (let i = 0; i < 500; i++) {
      const at = this.gens.seenAt(gen);
      if (at !== undefined) return at;
      await new Promise((r) => setTimeout(r, 2));
    }
    throw new Error(`generation ${gen} never seen by the poller in ${this.netns}`);
  }

  stop(): void { this.gens.stop(); stopChild(this.proc); }
}

/** bpfmaps.py `backends` inside the node's mount namespace (its /sys/fs/bpf is private; the proxy's container has no python). */
class BpfWatcher implements Watcher {
  private readonly proc: ChildProcess;
  private readonly waiters = new Map<string, (at: number) => void>();
  private readonly up: Promise<void>;
  constructor(pid: number, pinDir = '/sys/fs/bpf/kpng') {
    const script = path.join(repoRoot(), 'bench', 'vs-upstream', 'bpfmaps.py');
    this.proc = spawn('nsenter', ['-t', String(pid), '-m', '--', 'python3', script, 'backends', pinDir, '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.up = new Promise((resolve, reject) => {
      this.proc.once('exit', (code) => reject(new Error(`bpfmaps.py backends in the mount namespace of ${pid} exited (${code})`)));
      onLines(this.proc.stdout!, (l) => {
        if (l === 'ready') return resolve();
        const m = /^be \d+ (\S+)$/.exec(l);
        const w = m && this.waiters.get(m[1]);
        if (w) { this.waiters.delete(m[1]); w(performance.now()); }
      });
    });
  }
  ready(): Promise<void> { return this.up; }
  waitForIp(ip: string, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.waiters.delete(ip); reject(new Error(`${ip} not in the BPF maps within ${timeoutMs} ms`)); }, timeoutMs);
      timer.unref();
      this.waiters.set(ip, (at) => { clearTimeout(timer); resolve(at); });
    });
  }
  stop(): void { stopChild(this.proc); }
}

/**
 * Samples the own share on every proxy that runs on this host while the load runs. stop() ends the
 * watchers and returns the samples; timeouts (an address that never showed) are counted apart.
 */
export class OwnShare {
  readonly samples: ShareSample[] = [];
  readonly missed: string[] = [];
  private readonly watchers = new Map<string, Watcher>();
  private readonly busy = new Set<string>();
  private readonly lastAt = new Map<string, number>();
  private readonly known = new Set<string>();
  /** The ready addresses of every slice (with their zone hints), by uid: is a sampled address still an endpoint for that node? */
  private readonly sliceIps = new Map<string, Map<string, string[] | undefined>>();
  private readonly open = new Set<{ node: string; ip: string; open: boolean }>();
  /** Samples dropped because their address left the API before any node could program it. */
  withdrawn = 0;
  private readonly zoneOf = new Map<string, string>();
  private stopWatch?: () => void;
  private stopped = false;

  constructor(private readonly kube: Kube, private readonly targets: ProxyTarget[], private readonly gapMs = 2000, private readonly timeoutMs = 30_000) {}

  async start(): Promise<void> {
    for (const t of this.targets) {
      if (!t.netns) continue;
      const w = t.kind === 'kpng-ebpf' ? (t.nodePid ? new BpfWatcher(t.nodePid) : undefined) : new NftWatcher(t.netns);
      if (w) { await w.ready(); this.watchers.set(t.node, w); }
    }
    const { items, resourceVersion } = await this.kube.list('/apis/discovery.k8s.io/v1/endpointslices');
    for (const s of items) {
      for (const e of readyEndpoints(s)) this.known.add(e.addresses[0]);
      this.sliceIps.set(s.metadata.uid, readyByIp(s));
    }
    for (const t of this.targets) this.zoneOf.set(t.node, t.zone ?? '');
    const begin = async (rv: string): Promise<void> => {
      this.stopWatch = await this.kube.watch('/apis/discovery.k8s.io/v1/endpointslices', rv, (e) => this.onEvent(e.type, e.object), () => {
        // The server ends a watch now and then: start again from a fresh list (the known set stays).
        if (!this.stopped) void this.kube.list('/apis/discovery.k8s.io/v1/endpointslices').then((l) => begin(l.resourceVersion)).catch(() => {});
      });
    };
    await begin(resourceVersion);
  }

  private onEvent(type: string, slice: any): void {
    const uid: string | undefined = slice.metadata?.uid;
    if (uid) {
      if (type === 'DELETED') this.sliceIps.delete(uid);
      else if (type === 'ADDED' || type === 'MODIFIED') this.sliceIps.set(uid, readyByIp(slice));
      this.withdraw();
    }
    if (type !== 'ADDED' && type !== 'MODIFIED') return;
    const at = performance.now();
    const svc = slice.metadata?.labels?.['kubernetes.io/service-name'];
    for (const e of readyEndpoints(slice)) {
      const ip: string = e.addresses[0];
      if (this.known.has(ip)) continue;
      this.known.add(ip);
      if (!svc) continue;
      const zones: string[] | undefined = e.hints?.forZones?.map((z: { name: string }) => z.name);
      for (const [node, w] of this.watchers) {
        // An endpoint hinted for other zones may never reach this node's kernel (topology).
        if (zones && !zones.includes(this.zoneOf.get(node) ?? '')) continue;
        if (this.busy.has(node) || at - (this.lastAt.get(node) ?? -Infinity) < this.gapMs) continue;
        this.busy.add(node);
        this.lastAt.set(node, at);
        const sample = { node, ip, open: true };
        this.open.add(sample);
        const close = () => { sample.open = false; this.open.delete(sample); this.busy.delete(node); };
        void w.waitForIp(ip, this.timeoutMs)
          .then((seen) => { if (sample.open) this.samples.push({ node, ip, ms: Math.max(0, seen - at) }); })
          .catch((err) => { if (sample.open) this.missed.push(`${node} ${ip}: ${(err as Error).message}`); })
          .finally(close);
      }
    }
  }

  /**
   * A sampled address that left every slice before the node programmed it (a pod ready, then gone
   * within one sync), or that the EndpointSlice controller has since hinted for other zones only,
   * needs never reach this node's kernel: the sample is dropped, counted apart.
   */
  private withdraw(): void {
    for (const sample of [...this.open]) {
      let present = false;
      const zone = this.zoneOf.get(sample.node) ?? '';
      for (const ips of this.sliceIps.values()) {
        if (!ips.has(sample.ip)) continue;
        const zones = ips.get(sample.ip);
        if (!zones || zones.includes(zone)) { present = true; break; }
      }
      if (present) continue;
      sample.open = false;
      this.open.delete(sample);
      this.busy.delete(sample.node);
      this.withdrawn++;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopWatch?.();
    // Open samples get their answer or their timeout; withdrawn ones are not waited for.
    const end = Date.now() + this.timeoutMs + 1000;
    while (this.open.size && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
    for (const w of this.watchers.values()) w.stop();
  }
}

/** A slice's ready addresses with their zone hints (undefined: no hints). */
function readyByIp(slice: any): Map<string, string[] | undefined> {
  return new Map(readyEndpoints(slice).map((e) => [e.addresses[0] as string, e.hints?.forZones?.map((z: { name: string }) => z.name)]));
}

function readyEndpoints(slice: any): any[] {
  return (slice.endpoints ?? []).filter((e: any) => e.conditions?.ready !== false && e.addresses?.[0]);
}
