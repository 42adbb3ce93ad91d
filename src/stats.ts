// The stats line of KPNG's proposal, once a second on stderr:
//   stats: time events rev usr-cpu sys-cpu tot-cpu mem revs/events
// time: ms since start; events: objects received from the source; rev: ENLS revision;
// usr-cpu / sys-cpu: ms of CPU spent in the interval; tot-cpu: % of one core in the interval;
// mem: resident set size in MiB (2^20 bytes); revs/events: % of events that changed the state.
export interface StatsSource {
  events(): number;
  revision(): number;
}

export interface StatsSample {
  timeMs: number;
  events: number;
  rev: number;
  usrCpuMs: number;
  sysCpuMs: number;
  totCpuPct: number;
  memMiB: number;
  revsPerEventsPct: number;
}

export const STATS_HEADER = 'stats: time events rev usr-cpu sys-cpu tot-cpu mem revs/events';

export class StatsMeter {
  private readonly start = performance.now();
  private lastWall = this.start;
  private lastCpu = process.cpuUsage();

  constructor(private readonly src: StatsSource) {}

  sample(): StatsSample {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const usr = (cpu.user - this.lastCpu.user) / 1000;
    const sys = (cpu.system - this.lastCpu.system) / 1000;
    const wall = now - this.lastWall;
    this.lastWall = now;
    this.lastCpu = cpu;
    const events = this.src.events();
    const rev = this.src.revision();
    return {
      timeMs: Math.round(now - this.start),
      events,
      rev,
      usrCpuMs: usr,
      sysCpuMs: sys,
      totCpuPct: wall > 0 ? ((usr + sys) / wall) * 100 : 0,
      memMiB: process.memoryUsage.rss() / (1024 * 1024),
      revsPerEventsPct: events > 0 ? (rev / events) * 100 : 0,
    };
  }
}

export function formatStats(s: StatsSample): string {
  return `stats: ${s.timeMs} ${s.events} ${s.rev} ${s.usrCpuMs.toFixed(0)} ${s.sysCpuMs.toFixed(0)} ${s.totCpuPct.toFixed(2)}% ${s.memMiB.toFixed(1)}MiB ${s.revsPerEventsPct.toFixed(2)}%`;
}

/** Prints the header, then one line a second until stopped. */
export function startStats(src: StatsSource, write: (line: string) => void, intervalMs = 1000): () => void {
  const meter = new StatsMeter(src);
  write(STATS_HEADER);
  const t = setInterval(() => write(formatStats(meter.sample())), intervalMs);
  t.unref();
  return () => clearInterval(t);
}
