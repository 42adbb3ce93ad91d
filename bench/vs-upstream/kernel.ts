// How the benchmark sees each proxy's work in the kernel, the same way for every proxy:
//   GenWatcher   nf_tables generation id of the namespace (one per committed transaction), polled
//                with NFT_MSG_GETGEN (nfgen.py), so no event listener makes commits slower
//   listedIps    every IP address printed by `nft list ruleset` (is every cluster IP programmed?)
//   Monitor      `nft monitor` lines (which commit first names an endpoint IP)
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../../test/shared/kpng-process';

/** Lines of a child's stdout, one callback per line. */
export function onLines(stream: NodeJS.ReadableStream, f: (line: string) => void): void {
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buf += chunk;
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      f(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
}

export function stopChild(p: ChildProcess | undefined): void {
  if (p && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
}

export interface Gen { id: number; at: number }

export class GenWatcher {
  readonly proc: ChildProcess;
  /** Every generation change seen, with performance.now() when it was read. */
  readonly gens: Gen[] = [];
  private listeners = new Set<(g: Gen) => void>();

  constructor(netns: string, intervalMs = 2) {
    const script = path.join(repoRoot(), 'bench', 'vs-upstream', 'nfgen.py');
    this.proc = spawn('ip', ['netns', 'exec', netns, 'python3', script, String(intervalMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
    onLines(this.proc.stdout!, (l) => {
      const m = /^gen (\d+)$/.exec(l);
      if (!m) return;
      const g = { id: Number(m[1]), at: performance.now() };
      this.gens.push(g);
      for (const f of [...this.listeners]) f(g);
    });
  }

  get last(): Gen | undefined { return this.gens[this.gens.length - 1]; }
  /** When the poller first saw generation `id` or a later one (it can miss one of two quick commits). */
  seenAt(id: number): number | undefined { return this.gens.find((g) => g.id >= id)?.at; }
  onGen(f: (g: Gen) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }
  stop(): void { stopChild(this.proc); }
}

const IPV4 = /(?<![\d.])\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\d])/g;
const IPV6 = /(?<![0-9a-f:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?![0-9a-f:])/g;

/** The IP addresses (v4 and v6, as nft prints them) found anywhere in the namespace's ruleset. */
export function listedIps(netns: string): Promise<Set<string>> {
  return new Promise((resolve, reject) => {
    const p = spawn('ip', ['netns', 'exec', netns, 'nft', 'list', 'ruleset'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const ips = new Set<string>();
    let rest = '';
    let err = '';
    const scan = (text: string) => {
      for (const m of text.matchAll(IPV4)) ips.add(m[0]);
      if (text.includes(':')) for (const m of text.matchAll(IPV6)) if (m[0].includes('::') || m[0].split(':').length === 8) ips.add(m[0]);
    };
    p.stdout.setEncoding('utf8');
    p.stdout.on('data', (chunk: string) => {
      const text = rest + chunk;
      const cut = text.lastIndexOf('\n');
      scan(text.slice(0, cut + 1));
      rest = text.slice(cut + 1);
    });
    p.stderr.on('data', (c) => (err += c));
    p.on('error', reject);
    p.on('exit', (code) => {
      scan(rest);
      if (code === 0) resolve(ips);
      else reject(new Error(`nft list ruleset in ${netns}: exit ${code}: ${err.trim()}`));
    });
  });
}

/**
 * `nft monitor` in a namespace: finds the transaction (generation) whose committed changes first
 * mention an address. Only the generation is taken from the monitor, not the time its line was read:
 * nft formats every object of a transaction, so a line can be read long after a big commit.
 */
export class Monitor {
  readonly proc: ChildProcess;
  private waiters = new Map<string, { re: RegExp; seen: boolean; resolve: (gen: number) => void }>();
  lines = 0;

  constructor(netns: string) {
    this.proc = spawn('ip', ['netns', 'exec', netns, 'nft', 'monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
    onLines(this.proc.stdout!, (l) => {
      this.lines++;
      if (this.waiters.size === 0) return;
      // "# new generation N by process P (name)" ends each transaction's events.
      const g = /^# new generation (\d+)/.exec(l);
      for (const [ip, w] of this.waiters) {
        if (g && w.seen) {
          this.waiters.delete(ip);
          w.resolve(Number(g[1]));
        } else if (!g && w.re.test(l)) w.seen = true;
      }
    });
  }

  /** Resolves with the generation of the first committed transaction naming `ip` (not a longer address). */
  waitForIp(ip: string, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(ip);
        reject(new Error(`${ip} did not appear in the kernel within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref(); // a wait nobody needs any more must not hold the process
      const re = new RegExp(`(?<![\\d.])${ip.replace(/\./g, '\\.')}(?![\\d]|\\.\\d)`);
      this.waiters.set(ip, { re, seen: false, resolve: (gen) => { clearTimeout(timer); resolve(gen); } });
    });
  }

  /**
   * Resolves once the monitor prints changes. nft monitor first reads the whole ruleset (seconds at
   * 10k services) and starts over when a commit lands meanwhile, so the probe table is added again
   * only after a doubling wait (1, 2, 4, ... s), never often enough to keep it from finishing.
   */
  async ready(netns: string, timeoutMs = 180_000): Promise<void> {
    const end = performance.now() + timeoutMs;
    let seen = false;
    const onData = (c: Buffer | string) => { if (String(c).includes('add table ip kbv_ready')) seen = true; };
    const nft = (...args: string[]) => spawnSync('ip', ['netns', 'exec', netns, 'nft', ...args]);
    this.proc.stdout!.on('data', onData);
    try {
      for (let wait = 1000; !seen; wait *= 2) {
        nft('delete', 'table', 'ip', 'kbv_ready');
        nft('add', 'table', 'ip', 'kbv_ready');
        const until = performance.now() + wait;
        while (!seen && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
        if (!seen && performance.now() > end) throw new Error(`nft monitor in ${netns} printed nothing within ${timeoutMs} ms`);
      }
    } finally {
      this.proc.stdout!.off('data', onData);
      nft('delete', 'table', 'ip', 'kbv_ready');
    }
  }
  stop(): void { stopChild(this.proc); }
}

// ---- The eBPF backend's maps (bpfmaps.py): its socket LB has no nftables generation to watch. ----

/**
 * Resolves when every address has a service entry in the pinned service map, with performance.now()
 * at the end of the scan that found them all and that scan's duration. Until the map's first entry
 * appears the scanner only asks for it (one syscall every 2 ms), so it takes no CPU from the start it
 * measures; then scans are spaced by a pause as long as a scan (at least 5 ms), so that it takes at
 * most half a core from the proxy. The answer is late by at most two scans and a pause (a scan, with
 * batched map reads, grows with the map; the bench prints its time). `onProgress` gets the count
 * found every 10 s.
 */
export function waitBpfVips(pinDir: string, ips: string[], onProgress: (have: number) => void): { done: Promise<{ at: number; scanMs: number }>; stop: () => void } {
  const script = path.join(repoRoot(), 'bench', 'vs-upstream', 'bpfmaps.py');
  const p = spawn('python3', [script, 'wait-vips', pinDir], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  p.stderr!.on('data', (c) => (err += c));
  p.stdin!.end(`${ips.join(' ')}\n`);
  const done = new Promise<{ at: number; scanMs: number }>((resolve, reject) => {
    p.on('error', reject);
    p.on('exit', (code, signal) => reject(new Error(`bpfmaps.py wait-vips ${pinDir}: exit ${code ?? signal}: ${err.trim()}`)));
    onLines(p.stdout!, (l) => {
      const all = /^all ([\d.]+)$/.exec(l);
      if (all) return resolve({ at: performance.now(), scanMs: Number(all[1]) });
      const have = /^have (\d+)$/.exec(l);
      if (have) onProgress(Number(have[1]));
    });
  });
  return { done, stop: () => stopChild(p) };
}

/**
 * Every backend the eBPF backend adds from now on, with when the poller (every 2 ms) saw it. kpng
 * writes a new backend, then the slots that point to it, then the service's count, in three batched
 * map updates right after each other, so a backend's appearance is when the change reaches the kernel
 * (early by at most those two syscalls).
 */
export class BackendWatcher {
  readonly proc: ChildProcess;
  private readonly waiters = new Map<string, (at: number) => void>();
  readonly ready: Promise<void>;

  constructor(pinDir: string) {
    const script = path.join(repoRoot(), 'bench', 'vs-upstream', 'bpfmaps.py');
    this.proc = spawn('python3', [script, 'backends', pinDir, '2'], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.ready = new Promise((resolve, reject) => {
      this.proc.once('exit', (code) => reject(new Error(`bpfmaps.py backends ${pinDir} exited (${code})`)));
      onLines(this.proc.stdout!, (l) => {
        if (l === 'ready') return resolve();
        const m = /^be \d+ (\S+)$/.exec(l);
        const w = m && this.waiters.get(m[1]);
        if (w) { this.waiters.delete(m[1]); w(performance.now()); }
      });
    });
  }

  /** Resolves with performance.now() when a backend with this address appeared. */
  waitForIp(ip: string, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { this.waiters.delete(ip); reject(new Error(`${ip} did not appear in the BPF maps within ${timeoutMs} ms`)); }, timeoutMs);
      this.waiters.set(ip, (at) => { clearTimeout(timer); resolve(at); });
    });
  }

  stop(): void { stopChild(this.proc); }
}
