// Reads the socket LB's maps back between syncs, so that entries another process changed (`bpftool
// map update` or `delete`, another loader writing the pinned maps) are found and repaired in about a
// second, not at the next periodic resync. BPF maps send no change notifications (nf_tables does):
// reading them back is the only way to know. A read costs about what the maps hold, so the pause after
// each one grows with it, keeping the audit under `maxShare` of one core: every `everyMs` for the
// small maps of most nodes, less often for a million entries.

export interface MapAuditOptions {
  /** The shortest pause between two reads. Default 1 s. */
  everyMs?: number;
  /** The largest share of one core the reads may take (a read of t ms is followed by t/maxShare ms). Default 0.02. */
  maxShare?: number;
}

export class MapAudit {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly everyMs: number;
  private readonly maxShare: number;
  /** Reads made; reads that found a difference. */
  readonly stats = { reads: 0, found: 0, lastMs: 0 };

  /**
   * `read`: one read of the maps, with what it found reported; resolves with the entries that differ
   * from what was written, or undefined when there was nothing to compare (a sync under way or failed,
   * no maps yet).
   */
  constructor(private readonly read: () => Promise<number | undefined>, opts: MapAuditOptions = {}) {
    this.everyMs = opts.everyMs ?? 1000;
    this.maxShare = opts.maxShare ?? 0.02;
  }

  start(): void {
    this.stopped = false;
    this.schedule(this.everyMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const t0 = performance.now();
    try {
      const n = await this.read();
      if (n !== undefined) this.stats.reads++;
      if (n) this.stats.found++;
    } catch {
      // A read that failed (the maps closed meanwhile, ENOMEM) proves nothing: the next one tries again.
    }
    this.stats.lastMs = performance.now() - t0;
    this.schedule(Math.max(this.everyMs, this.stats.lastMs / this.maxShare));
  }
}
