// `kpng kube --to trace` against an API server, as a KpngProcess whose trace output is followed into
// a key -> description map (what the sink was told, Set by Set), with its stats lines parsed: for the
// kube-source e2e tests and the events benchmark.
import type { StatsSample } from '../../src/stats';
import { KpngProcess, NODE } from './kpng-process';

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
    timeMs: +m[1]!, events: +m[2]!, rev: +m[3]!, usrCpuMs: +m[4]!, sysCpuMs: +m[5]!, totCpuPct: +m[6]!, memMiB: +m[7]!, revsPerEventsPct: +m[8]!,
    extra: m[9]!.trim() ? m[9]!.trim().split(/\s+/) : [],
  };
}

export interface KpngTraceOptions {
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

export class KpngTrace {
  readonly process: KpngProcess;
  /** What the trace sink holds now: item key -> description. */
  readonly state = new Map<string, string>();
  readonly syncs: SyncLine[] = [];
  readonly stats: StatsLine[] = [];
  /** Set/Delete lines seen. */
  changes = 0;
  private lineNo = 0;

  constructor(readonly opts: KpngTraceOptions) {
    this.process = new KpngProcess(['kube', '--kubeconfig', opts.kubeconfig, '--node', opts.node, '--to', 'trace', ...(opts.args ?? [])], {
      node: NODE,
      env: opts.env,
      nodeArgs: opts.nodeArgs,
      keep: opts.keepLines === false ? ['stderr'] : undefined,
      onLine: (l, stream) => (stream === 'stdout' ? this.onStdout(l) : this.onStderr(l)),
    });
  }

  /** Trace lines on stdout, in order (if keepLines). */
  get lines(): string[] { return this.process.stdout; }
  get stderr(): string[] { return this.process.stderr; }
  get pid(): number { return this.process.pid; }
  /** The exit code once kpng has ended. */
  get exited(): Promise<number | null> { return this.process.exit.then((e) => e.code); }
  /** The ENLS revision of the last sync the sink saw (0 before the first). */
  get rev(): number { return this.syncs.length ? this.syncs[this.syncs.length - 1]!.rev : 0; }

  private onStdout(l: string): void {
    this.lineNo++;
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
      if (m) this.syncs.push({ rev: +m[1]!, changes: +m[2]!, line: this.lineNo });
    }
  }

  private onStderr(l: string): void {
    const s = parseStatsLine(l);
    if (s) this.stats.push(s);
    this.opts.onStderr?.(l);
  }

  /** Resolves when `pred` holds (checked as output arrives; a throwing pred is false); rejects after timeoutMs or on exit. */
  waitFor(what: string, pred: () => boolean, timeoutMs = 20_000): Promise<void> {
    return this.process.waitUntil(what, () => { try { return pred(); } catch { return false; } }, timeoutMs);
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
    try {
      return await this.process.stop('SIGTERM', graceMs);
    } catch {
      return (await this.process.exit).code;   // SIGKILLed after the grace
    }
  }
}

/** Runs `kpng kube ... --once` to completion and returns its output. */
export async function kpngOnce(kubeconfig: string, node: string, args: string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = new KpngProcess(['kube', '--kubeconfig', kubeconfig, '--node', node, '--once', ...args], { node: NODE, testServers: false });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => { p.kill(); reject(new Error(`kpng --once did not finish within ${timeoutMs} ms\n${p.text('stderr')}`)); }, timeoutMs);
  });
  try {
    const { code } = await Promise.race([p.exit, late]);
    return { code, stdout: p.text('stdout'), stderr: p.text('stderr') };
  } finally {
    clearTimeout(timer);
  }
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
