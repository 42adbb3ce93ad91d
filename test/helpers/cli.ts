// Runs the built `kpng` command (npm run build first; `make test` does).
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..');
export const KPNG = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');

function ensureBuilt(): void {
  if (!fs.existsSync(KPNG)) throw new Error(`${KPNG} is missing: run 'npm run build' (or 'make test')`);
}

/** A long-running kpng serves /metrics and /healthz (kube-proxy's ports 10249 and 10256 by default): in
 *  tests, on free loopback ports unless the test chooses, so parallel runs never collide. */
export function withTestServers(args: string[]): string[] {
  const has = (f: string) => args.some((a) => a === f || a.startsWith(f + '='));
  return [...args, ...(has('--metrics-bind-address') ? [] : ['--metrics-bind-address', '127.0.0.1:0']), ...(has('--healthz-bind-address') ? [] : ['--healthz-bind-address', '127.0.0.1:0'])];
}

export function runKpng(args: string[], opts: { timeoutMs?: number } = {}) {
  ensureBuilt();
  const r = spawnSync(process.execPath, [KPNG, ...args], { encoding: 'utf8', timeout: opts.timeoutMs ?? 30000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A running kpng whose stdout lines can be awaited. */
export class KpngProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly lines: string[] = [];
  stderr = '';
  private waiters: { re: RegExp; from: number; resolve: (l: string) => void }[] = [];

  constructor(args: string[], opts: { cmd?: string[] } = {}) {
    ensureBuilt();
    const cmd = opts.cmd ?? [];
    this.child = spawn(cmd[0] ?? process.execPath, [...cmd.slice(1), ...(cmd.length ? [process.execPath] : []), KPNG, ...withTestServers(args)]);
    let buf = '';
    this.child.stdout.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        this.lines.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
        this.check();
      }
    });
    this.child.stderr.setEncoding('utf8').on('data', (d: string) => { this.stderr += d; });
  }

  /** Resolves with the first line at index >= `from` matching `re`. */
  waitFor(re: RegExp, from = 0, timeoutMs = 15000): Promise<string> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timed out waiting for ${re}; got:\n${this.lines.slice(from).join('\n')}\nstderr:\n${this.stderr}`)), timeoutMs);
      this.waiters.push({ re, from, resolve: (l) => { clearTimeout(t); resolve(l); } });
      this.check();
    });
  }

  private check(): void {
    this.waiters = this.waiters.filter((w) => {
      const hit = this.lines.slice(w.from).find((l) => w.re.test(l));
      if (hit === undefined) return true;
      w.resolve(hit);
      return false;
    });
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    const done = new Promise<number | null>((r) => this.child.once('exit', (code) => r(code)));
    this.child.kill('SIGTERM');
    return done;
  }
}
