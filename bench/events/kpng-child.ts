// `kpng` as a child process, for the kube-source e2e tests and the events benchmark: spawns the
// built CLI (dist/src/cli/main.js), follows its trace output into a key -> description map (what
// the sink was told, Set by Set), and parses its stats lines.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { StatsSample } from '../../src/stats';

/** The repository root (the directory holding kpng's package.json), from here or dist/. */
export function repoRoot(): string {
  let d = __dirname;
  for (;;) {
    const pj = path.join(d, 'package.json');
    if (fs.existsSync(pj) && (JSON.parse(fs.readFileSync(pj, 'utf8')) as { name?: string }).name === 'kpng') return d;
    const up = path.dirname(d);
    if (up === d) throw new Error(`cannot find kpng's package.json above ${__dirname}`);
    d = up;
  }
}

/** The Node binary to run kpng with: the pinned one (node_modules/.bin/node) when present. */
export function nodeBinary(): string {
  const pinned = path.join(repoRoot(), 'node_modules', '.bin', 'node');
  return fs.existsSync(pinned) ? pinned : process.execPath;
}

/** dist/src/cli/main.js, or a clear error when the project has not been built. */
export function kpngMain(): string {
  const main = path.join(repoRoot(), 'dist', 'src', 'cli', 'main.js');
  const kube = path.join(repoRoot(), 'dist', 'src', 'source', 'kube', 'index.js');
  if (!fs.existsSync(main) || !fs.existsSync(kube)) throw new Error(`${main} or ${kube} is missing: run \`npm run build\` first`);
  return main;
}

/** A parsed stats line (src/stats.ts prints them). */
export interface StatsLine extends StatsSample {
  /** Extra fields after the standard ones (e.g. heap), as printed. */
  extra: string[];
}

/** "stats: 1000 12 3 5 1 0.60% 60.1MiB 25.00%" -> StatsLine (undefined for other lines). */
export function parseStatsLine(line: string): StatsLine | undefined {
  const m = /^stats: (\d+) (\d+) (\d+) (\d+) (\d+) ([\d.]+)% ([\d.]+)MiB ([\d.]+)%(.*)$/.exec(line.trim());
  if (!m) return undefined;
  return {
    timeMs: +m[1], events: +m[2], rev: +m[3], usrCpuMs: +m[4], sysCpuMs: +m[5], totCpuPct: +m[6], memMiB: +m[7], revsPerEventsPct: +m[8],
    extra: m[9].trim() ? m[9].trim().split(/\s+/) : [],
  };
}

export interface KpngChildOptions {
  kubeconfig: string;
  node: string;
  /** Extra CLI arguments (after `kube --kubeconfig K --node N --to trace`). */
  args?: string[];
  env?: Record<string, string>;
  /** Node options before the script (e.g. --require a probe). */
  nodeArgs?: string[];
  /** Keep every stdout line (tests); the bench only needs counts. Default true. */
  keepLines?: boolean;
  /** Called with each stderr line. */
  onStderr?: (line: string) => void;
}

export interface SyncLine { rev: number; changes: number; line: number }

export class KpngChild {
  readonly proc: ChildProcess;
  /** Trace lines on stdout, in order (if keepLines). */
  readonly lines: string[] = [];
  readonly stderr: string[] = [];
  /** What the trace sink holds now: item key -> description. */
  readonly state = new Map<string, string>();
  readonly syncs: SyncLine[] = [];
  readonly stats: StatsLine[] = [];
  /** Set/Delete lines seen. */
  changes = 0;
  exited: Promise<number | null>;
  private waiters = new Set<() => void>();
  private lineNo = 0;

  constructor(readonly opts: KpngChildOptions) {
    const args = [...(opts.nodeArgs ?? []), kpngMain(), 'kube', '--kubeconfig', opts.kubeconfig, '--node', opts.node, '--to', 'trace',
      // kpng's metrics and health servers on free loopback ports (kube-proxy's defaults could be taken).
      '--metrics-bind-address', '127.0.0.1:0', '--healthz-bind-address', '127.0.0.1:0', ...(opts.args ?? [])];
    this.proc = spawn(nodeBinary(), args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code) => { this.notify(); resolve(code); }));
    lines(this.proc.stdout!, (l) => this.onStdout(l));
    lines(this.proc.stderr!, (l) => {
      this.stderr.push(l);
      const s = parseStatsLine(l);
      if (s) this.stats.push(s);
      opts.onStderr?.(l);
      this.notify();
    });
  }

  get pid(): number { return this.proc.pid!; }
  /** The ENLS revision of the last sync the sink saw (0 before the first). */
  get rev(): number { return this.syncs.length ? this.syncs[this.syncs.length - 1].rev : 0; }

  private onStdout(l: string): void {
    this.lineNo++;
    if (this.opts.keepLines !== false) this.lines.push(l);
    if (l === 'reset') this.state.clear();
    else if (l.startsWith('set ')) {
      const rest = l.slice(4);
      const sp = rest.indexOf(' ');
      this.state.set(rest.slice(0, sp), rest.slice(sp + 1));
      this.changes++;
    } else if (l.startsWith('delete ')) {
      this.state.delete(l.slice(7));
      this.changes++;
    } else {
      const m = /^sync rev=(\d+) changes=(\d+)$/.exec(l);
      if (m) this.syncs.push({ rev: +m[1], changes: +m[2], line: this.lineNo });
    }
    this.notify();
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolves when `pred` holds (checked after every line); rejects after timeoutMs or on exit. */
  waitFor(what: string, pred: () => boolean, timeoutMs = 20_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        let ok = false;
        try { ok = pred(); } catch { ok = false; }
        if (ok) { done(); resolve(); return; }
        if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
          done();
          reject(new Error(`kpng exited (${this.proc.exitCode ?? this.proc.signalCode}) while waiting for ${what}\n${this.tail()}`));
        }
      };
      const timer = setTimeout(() => { done(); reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${this.tail()}`)); }, timeoutMs);
      const done = () => { clearTimeout(timer); this.waiters.delete(check); };
      this.waiters.add(check);
      check();
    });
  }

  /** Waits until the sink's state has `key` with a description matching `desc` (string = exact). */
  waitForItem(key: string, desc: string | RegExp, timeoutMs?: number): Promise<void> {
    const ok = () => { const d = this.state.get(key); return d !== undefined && (typeof desc === 'string' ? d === desc : desc.test(d)); };
    return this.waitFor(`${key} ${desc}`, ok, timeoutMs);
  }

  waitForGone(key: string, timeoutMs?: number): Promise<void> {
    return this.waitFor(`${key} deleted`, () => this.rev > 0 && !this.state.has(key), timeoutMs);
  }

  waitForStderr(re: RegExp, from = 0, timeoutMs?: number): Promise<void> {
    return this.waitFor(`stderr ${re}`, () => this.stderr.slice(from).some((l) => re.test(l)), timeoutMs);
  }

  /** The last lines of both streams, for error messages. */
  tail(n = 30): string {
    return `--- kpng stdout (last ${n}):\n${this.lines.slice(-n).join('\n')}\n--- kpng stderr (last ${n}):\n${this.stderr.slice(-n).join('\n')}`;
  }

  /** SIGTERM, then SIGKILL after a bound; resolves with the exit code. */
  async stop(graceMs = 5000): Promise<number | null> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
      const code = await this.exited;
      clearTimeout(t);
      return code;
    }
    return this.exited;
  }
}

/** Runs `kpng kube ... --once` to completion and returns its stdout. */
export function kpngOnce(kubeconfig: string, node: string, args: string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(nodeBinary(), [kpngMain(), 'kube', '--kubeconfig', kubeconfig, '--node', node, '--once', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const t = setTimeout(() => { p.kill('SIGKILL'); reject(new Error(`kpng --once did not finish within ${timeoutMs} ms\n${stderr}`)); }, timeoutMs);
    p.on('exit', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
  });
}

/** The state a trace holds after all its lines (key -> description). */
export function traceState(text: string): Map<string, string> {
  const state = new Map<string, string>();
  for (const l of text.split('\n')) {
    if (l === 'reset') state.clear();
    else if (l.startsWith('set ')) {
      const rest = l.slice(4);
      const sp = rest.indexOf(' ');
      state.set(rest.slice(0, sp), rest.slice(sp + 1));
    } else if (l.startsWith('delete ')) state.delete(l.slice(7));
  }
  return state;
}

function lines(stream: NodeJS.ReadableStream, f: (line: string) => void): void {
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const p of parts) f(p);
  });
  stream.on('end', () => { if (rest) f(rest); rest = ''; });
}
