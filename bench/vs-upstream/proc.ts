// Cheap per-process figures from /proc and perf (counting only: no sampling, no strace).
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

const TICK_MS = 1000 / 100; // USER_HZ

export interface ProcSample {
  /** utime + stime of the process and of its reaped children (kube-proxy's `nft` runs), in ms. */
  cpuMs: number;
  rssMiB: number;
  /** VmHWM: the process's peak resident set so far. */
  peakMiB: number;
}

export function procSample(pid: number): ProcSample {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields 14-17 of stat(5): utime stime cutime cstime
  const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
  return { cpuMs: ticks * TICK_MS, rssMiB: kb('VmRSS') / 1024, peakMiB: kb('VmHWM') / 1024 };
}

/**
 * Counts the syscalls of a process, its threads and the children it starts (perf's inherited
 * counters) on the raw_syscalls:sys_enter tracepoint, until stop() is called.
 */
export class SyscallCounter {
  private readonly proc;
  private out = '';
  private readonly done: Promise<void>;

  constructor(pid: number) {
    this.proc = spawn('perf', ['stat', '-x', ',', '-e', 'raw_syscalls:sys_enter', '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr!.setEncoding('utf8');
    this.proc.stderr!.on('data', (c: string) => (this.out += c));
    this.done = new Promise((resolve) => this.proc.once('exit', () => resolve()));
  }

  /** Stops counting; resolves with the count (perf prints it on SIGINT). */
  async stop(): Promise<number> {
    this.proc.kill('SIGINT');
    await this.done;
    const line = this.out.split('\n').find((l) => l.includes('raw_syscalls:sys_enter'));
    const n = Number(line?.split(',')[0]);
    if (!Number.isFinite(n)) throw new Error(`perf stat printed no count: ${this.out.trim().slice(0, 300)}`);
    return n;
  }
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
