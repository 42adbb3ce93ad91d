// How the benchmark sees each proxy's work in the kernel, the same way for every proxy:
//   GenWatcher   nf_tables generation id of the namespace (one per committed transaction), polled
//                with NFT_MSG_GETGEN (nfgen.py), so no event listener makes commits slower
//   listedIps    every IP address printed by `nft list ruleset` (is every cluster IP programmed?)
//   Monitor      `nft monitor` lines (an endpoint IP appearing in a committed change)
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from '../events/kpng-child';

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

/** `nft monitor` in a namespace: resolves waiters when a committed change mentions an address. */
export class Monitor {
  readonly proc: ChildProcess;
  private waiters = new Map<string, { re: RegExp; resolve: (at: number) => void }>();
  lines = 0;

  constructor(netns: string) {
    this.proc = spawn('ip', ['netns', 'exec', netns, 'nft', 'monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
    onLines(this.proc.stdout!, (l) => {
      this.lines++;
      if (this.waiters.size === 0) return;
      const at = performance.now();
      for (const [ip, w] of this.waiters) {
        if (w.re.test(l)) {
          this.waiters.delete(ip);
          w.resolve(at);
        }
      }
    });
  }

  /** Resolves with performance.now() of the first monitor line naming `ip` (not a longer address). */
  waitForIp(ip: string, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(ip);
        reject(new Error(`${ip} did not appear in the kernel within ${timeoutMs} ms`));
      }, timeoutMs);
      const re = new RegExp(`(?<![\\d.])${ip.replace(/\./g, '\\.')}(?![\\d]|\\.\\d)`);
      this.waiters.set(ip, { re, resolve: (at) => { clearTimeout(timer); resolve(at); } });
    });
  }

  /** Resolves once the monitor is subscribed (it prints nothing until a change, so: a short wait). */
  async ready(): Promise<void> { await new Promise((r) => setTimeout(r, 300)); }
  stop(): void { stopChild(this.proc); }
}
