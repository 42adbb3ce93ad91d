// A running kpng (the built CLI, dist/src/cli/main.js) for tests and benches: started with its
// arguments and environment, on this host, in a network namespace or through a caller's spawn; its
// output kept line by line; waited on for a log line or a count of them; stopped with a signal.
// Every one still running when this process exits is killed (test/helpers/cli.ts also kills them at
// the end of each test file). No jest here: benches import it.
//
//   const k = new KpngProcess(['file', '--input', f, '--node', 'n1', '--to', 'nft'], { netns: ns });
//   await k.waitForLine(/nft: revision 1: /);
//   expect(await k.stop()).toBe(0);
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

// From test/shared or, compiled, dist/test/shared.
export const ROOT = path.resolve(__dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`), '..', '..');
export const KPNG = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');
/** The pinned Node binary (node_modules/.bin/node) when present: what kpng runs on in a lab. */
export const NODE = ((pinned) => (fs.existsSync(pinned) ? pinned : process.execPath))(path.join(ROOT, 'node_modules', '.bin', 'node'));

export function ensureBuilt(): void {
  if (!fs.existsSync(KPNG)) throw new Error(`${KPNG} is missing: run 'npm run build' (or 'make test')`);
}

/** The repository root (for benches and tests that run from test/ or dist/). */
export const repoRoot = (): string => ROOT;
/** The Node binary kpng runs on: the pinned one when present. */
export const nodeBinary = (): string => NODE;
/** dist/src/cli/main.js, or a clear error when the project has not been built. */
export function kpngMain(): string {
  ensureBuilt();
  return KPNG;
}

/** A long-running kpng serves /metrics and /healthz (kube-proxy's ports 10249 and 10256 by default): in
 *  tests, on free loopback ports unless the test chooses, so parallel runs never collide. */
export function withTestServers(args: string[]): string[] {
  const has = (f: string) => args.some((a) => a === f || a.startsWith(f + '='));
  return [...args, ...(has('--metrics-bind-address') ? [] : ['--metrics-bind-address', '127.0.0.1:0']), ...(has('--healthz-bind-address') ? [] : ['--healthz-bind-address', '127.0.0.1:0'])];
}

export interface KpngProcessOptions {
  /** Run inside this network namespace (by name, with nsenter: /sys stays as it is, which eBPF needs). */
  netns?: string;
  /** A command kpng's command line is appended to, e.g. ['ip', 'netns', 'exec', ns]. */
  prefix?: string[];
  /** Starts the process instead (a lab that tracks what it started); gets the whole command line. */
  spawn?: (argv: string[]) => ChildProcess;
  /** Variables added to this process's environment. */
  env?: Record<string, string>;
  /** The Node binary (this process's unless given; a lab passes NODE). */
  node?: string;
  /** Add free loopback ports for /metrics and /healthz unless the arguments choose (default true). */
  testServers?: boolean;
  /** Node options before kpng's script (e.g. `--require` a probe). */
  nodeArgs?: string[];
  /** Called with every line as it arrives. */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Keep the lines of these streams (default both; a long bench keeps none and counts in onLine). */
  keep?: Array<'stdout' | 'stderr'>;
}

export type Stream = 'stdout' | 'stderr' | 'both';

const running = new Set<KpngProcess>();
let hooked = false;

/** SIGKILLs every kpng started here and still running. */
export function killAllKpng(): void {
  for (const k of running) k.kill();
}

export class KpngProcess {
  readonly child: ChildProcess;
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  /** Both streams' lines in the order they arrived. */
  readonly lines: string[] = [];
  /** Resolves once the process has exited and its output is read to the end. */
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private closed = false;
  private readonly waiters = new Set<() => void>();

  constructor(args: string[], opts: KpngProcessOptions = {}) {
    ensureBuilt();
    const argv = [opts.node ?? process.execPath, ...(opts.nodeArgs ?? []), KPNG, ...(opts.testServers === false ? args : withTestServers(args))];
    const full = [...(opts.netns ? ['nsenter', `--net=/var/run/netns/${opts.netns}`] : []), ...(opts.prefix ?? []), ...argv];
    this.child = opts.spawn ? opts.spawn(full)
      : spawn(full[0], full.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
    running.add(this);
    if (!hooked) {
      hooked = true;
      process.on('exit', killAllKpng);
    }
    const keep = new Set(opts.keep ?? ['stdout', 'stderr']);
    this.follow('stdout', keep.has('stdout'), opts.onLine);
    this.follow('stderr', keep.has('stderr'), opts.onLine);
    // 'close', not 'exit': the last lines are in only after the streams end.
    this.exit = new Promise((resolve) => this.child.once('close', (code, signal) => {
      this.closed = true;
      running.delete(this);
      this.notify();
      resolve({ code, signal });
    }));
  }

  private follow(stream: 'stdout' | 'stderr', keep: boolean, onLine?: KpngProcessOptions['onLine']): void {
    let buf = '';
    const line = (l: string) => {
      if (keep) { this[stream].push(l); this.lines.push(l); }
      onLine?.(l, stream);
    };
    this.child[stream]!.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) line(buf.slice(0, i));
      this.notify();
    }).on('end', () => {
      if (buf) { line(buf); buf = ''; }
      this.notify();
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  get pid(): number { return this.child.pid!; }
  /** Both streams, one line each. */
  get log(): string { return this.lines.join('\n'); }
  get running(): boolean { return !this.closed; }
  /** One stream's lines (or both) as one text. */
  text(stream: Stream = 'both'): string { return this.of(stream).join('\n'); }

  /** How many lines of `stream` match `re`. */
  count(re: RegExp, stream: Stream = 'both'): number {
    return this.of(stream).filter((l) => re.test(l)).length;
  }

  private of(stream: Stream): string[] {
    return stream === 'both' ? this.lines : this[stream];
  }

  /** Resolves when `ready()` holds, checked after each read of output; rejects after `timeoutMs` or when
   *  kpng ends first. */
  waitUntil(what: string, ready: () => boolean, timeoutMs = 15000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (ready()) { done(); resolve(); } else if (this.closed) { done(); reject(new Error(`kpng exited (${this.child.exitCode ?? this.child.signalCode}) before ${what}; log:\n${this.log}`)); }
      };
      const timer = setTimeout(() => { done(); reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; log:\n${this.log}`)); }, timeoutMs);
      const done = () => { clearTimeout(timer); this.waiters.delete(check); };
      this.waiters.add(check);
      check();
    });
  }

  /** The first line of `stream` at index >= `from` that matches `re`, and its index. */
  async waitForLine(re: RegExp, o: { from?: number; timeoutMs?: number; stream?: Stream } = {}): Promise<{ line: string; index: number }> {
    const lines = this.of(o.stream ?? 'both');
    const find = () => lines.findIndex((l, i) => i >= (o.from ?? 0) && re.test(l));
    await this.waitUntil(`a line matching ${re}`, () => find() >= 0, o.timeoutMs);
    const index = find();
    return { line: lines[index], index };
  }

  /** Until `n` lines of `stream` match `re` (e.g. n syncs done). */
  waitForCount(re: RegExp, n: number, o: { timeoutMs?: number; stream?: Stream } = {}): Promise<void> {
    return this.waitUntil(`${n} lines matching ${re}`, () => this.count(re, o.stream) >= n, o.timeoutMs);
  }

  /** The exit code once kpng has ended by itself. */
  async wait(): Promise<number | null> {
    return (await this.exit).code;
  }

  /** Sends `signal` and resolves with the exit code; with `timeoutMs`, rejects (and SIGKILLs) when kpng
   *  is still running by then. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs?: number): Promise<number | null> {
    if (!this.closed) this.child.kill(signal);
    if (timeoutMs === undefined) return this.wait();
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<never>((_, reject) => {
      timer = setTimeout(() => { this.kill(); reject(new Error(`kpng still running ${timeoutMs} ms after ${signal}; log:\n${this.lines.slice(-30).join('\n')}`)); }, timeoutMs);
    });
    try {
      return (await Promise.race([this.exit, hung])).code;
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL now (the end of a test; a process that hung). */
  kill(): void {
    if (!this.closed) { try { this.child.kill('SIGKILL'); } catch { /* gone */ } }
  }
}
