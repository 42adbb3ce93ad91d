// Per-proxy figures over a run, read from outside the proxy: CPU and memory from /proc, syscalls
// counted by perf, kernel transactions (nf_tables generations, nfgen.py), and from its /metrics the
// network programming histogram and client-go's request counter. Sampled every `everyMs` for the
// report's plots, and at each phase's end for the per-phase table.
import * as fs from 'node:fs';
import { GenWatcher } from '../vs-upstream/kernel';
import { procSample, SyscallCounter } from '../vs-upstream/proc';
import { addBuckets, increase, parseHistogram, parseScalar, type Buckets } from './sli';
import { scrapeMetrics, type ProxyTarget } from './targets';
import type { Kube } from './kube';

export interface Point {
  /** Seconds since the run started. */
  t: number;
  /** CPU seconds used so far, summed over the nodes' proxies. */
  cpuS: number;
  /** Resident set, the largest of the nodes' proxies. */
  rssMiB: number;
  /** The histogram so far, summed over the nodes. */
  buckets: Buckets;
}

export interface Mark { phase: string; at: number; buckets: Buckets; cpuS: number; generations: number; requests: number }

const API_REQUESTS = 'rest_client_requests_total';

export class RunMeasure {
  readonly points: Point[] = [];
  readonly marks: Mark[] = [];
  private readonly start = Date.now();
  private readonly t0: Map<string, { buckets: Buckets; requests: number; cpuMs: number }> = new Map();
  private readonly gens = new Map<string, GenWatcher>();
  private readonly syscalls = new Map<string, SyscallCounter>();
  private timer?: NodeJS.Timeout;
  peakMiB = 0;

  constructor(private readonly kube: Kube, readonly targets: ProxyTarget[], private readonly everyMs = 10_000) {}

  async begin(): Promise<void> {
    for (const t of this.targets) {
      const text = await scrapeMetrics(this.kube, t);
      this.t0.set(t.node, { buckets: parseHistogram(text), requests: parseScalar(text, API_REQUESTS), cpuMs: t.pid ? procSample(t.pid).cpuMs : NaN });
      if (t.netns) this.gens.set(t.node, new GenWatcher(t.netns, 20));
      if (t.pid && fs.existsSync('/usr/bin/perf')) this.syscalls.set(t.node, new SyscallCounter(t.pid));
    }
    this.timer = setInterval(() => { void this.sample().catch(() => {}); }, this.everyMs);
  }

  /** The histogram's increase since begin(), summed over the nodes; CPU seconds; API requests. */
  private async now(): Promise<{ buckets: Buckets; cpuS: number; rssMiB: number; requests: number }> {
    let buckets: Buckets = new Map();
    let cpuMs = 0, rssMiB = 0, requests = 0;
    for (const t of this.targets) {
      const text = await scrapeMetrics(this.kube, t);
      const base = this.t0.get(t.node)!;
      buckets = addBuckets(buckets, increase(base.buckets, parseHistogram(text)));
      requests += parseScalar(text, API_REQUESTS) - base.requests;
      if (t.pid) {
        try {
          const p = procSample(t.pid);
          cpuMs += p.cpuMs - base.cpuMs;
          rssMiB = Math.max(rssMiB, p.rssMiB);
          this.peakMiB = Math.max(this.peakMiB, p.peakMiB);
        } catch { /* the process is gone: the report says so through NaN */ cpuMs = NaN; }
      } else cpuMs = NaN;
    }
    return { buckets, cpuS: cpuMs / 1000, rssMiB, requests };
  }

  private async sample(): Promise<void> {
    const n = await this.now();
    this.points.push({ t: (Date.now() - this.start) / 1000, cpuS: n.cpuS, rssMiB: n.rssMiB, buckets: n.buckets });
  }

  async mark(phase: string): Promise<void> {
    const n = await this.now();
    const generations = [...this.gens.values()].reduce((a, g) => a + Math.max(0, (g.last?.id ?? 0) - (g.gens[0]?.id ?? 0)), 0);
    this.marks.push({ phase, at: (Date.now() - this.start) / 1000, buckets: n.buckets, cpuS: n.cpuS, generations, requests: n.requests });
    this.points.push({ t: (Date.now() - this.start) / 1000, cpuS: n.cpuS, rssMiB: n.rssMiB, buckets: n.buckets });
  }

  /** Stops sampling; the syscalls counted since begin(), summed over the nodes (NaN without perf). */
  async end(): Promise<{ syscalls: number; seconds: number; steadyMiB: number }> {
    clearInterval(this.timer);
    let syscalls = this.syscalls.size ? 0 : NaN;
    for (const c of this.syscalls.values()) syscalls += await c.stop().catch(() => NaN);
    for (const g of this.gens.values()) g.stop();
    const steadyMiB = Math.max(0, ...this.targets.map((t) => { try { return t.pid ? procSample(t.pid).rssMiB : 0; } catch { return 0; } }));
    return { syscalls, seconds: (Date.now() - this.start) / 1000, steadyMiB };
  }
}
