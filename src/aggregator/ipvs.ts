// The aggregator's second subsystem: IPVS messages (generic netlink). Producers hand their message
// lists in; per tick every queued list goes to the kernel as ONE batch (one ipvsApply: the messages
// written back to back, their acks read together), at most `burst` batches back to back then one per
// `minIntervalMs` (the same CommitBudget as the nftables commits, with its own budget).
//
// IPVS has no transactions: the kernel applies each message on its own and keeps going after a
// refused one, so a batch is not atomic. What the aggregator can do, it does: messages keep each
// producer's order, and the batch's failures are mapped back to the producer that sent the message
// (indexes re-based to its own list). The producer decides what a failure means; kpng's IPVS backend
// throws, which makes its KernelSink's next sync a full one (a resync of that producer only).
import type { IpvsApplyResult, IpvsOp } from '../native/ipvs';
import { CommitBudget } from './rate';

export interface IpvsTransport {
  /** Sends the messages in order; refused ones are listed by index in the result (others applied). */
  apply(ops: IpvsOp[]): Promise<IpvsApplyResult>;
}

export interface IpvsBatcherOptions {
  transport: IpvsTransport;
  minIntervalMs?: number;
  burst?: number;
  log?: (msg: string) => void;
}

/** One producer's IPVS figures (debug view). */
export interface IpvsProducerStatus {
  batches: number;
  messages: number;
  refused: number;
  last?: { at: string; ok: boolean; batch: number; error?: string };
}

interface Request { producer: string; ops: IpvsOp[]; resolve(r: IpvsApplyResult): void; reject(e: Error): void }

export class IpvsBatcher {
  private queue: Request[] = [];
  private readonly budget: CommitBudget;
  private timer?: NodeJS.Timeout;
  private running = false;
  private closed = false;
  private readonly perProducer = new Map<string, IpvsProducerStatus>();
  private readonly log: (m: string) => void;
  /** Batches sent, messages in them, messages the kernel refused. */
  readonly stats = { batches: 0, messages: 0, refused: 0 };

  constructor(private readonly opts: IpvsBatcherOptions) {
    this.budget = new CommitBudget(opts.minIntervalMs ?? 100, opts.burst ?? 3, Date.now());
    this.log = opts.log ?? (() => {});
  }

  /**
   * Queues a producer's messages for the next batch. Resolves with this producer's share of the result:
   * `failed[].index` are positions in `ops`; `messages`, `bytes`, `ms` are the whole batch's.
   */
  send(producer: string, ops: IpvsOp[]): Promise<IpvsApplyResult> {
    if (this.closed) return Promise.reject(new Error('aggregator closed'));
    if (ops.length === 0) return Promise.resolve({ messages: 0, bytes: 0, ms: 0, encodeMs: 0, failed: [], unknown: false });
    return new Promise((resolve, reject) => {
      this.queue.push({ producer, ops, resolve, reject });
      this.schedule();
    });
  }

  status(): Map<string, IpvsProducerStatus> { return this.perProducer; }

  /** Requests waiting for the next batch, by producer (tests, debugging). */
  pending(): string[] { return [...new Set(this.queue.map((r) => r.producer))]; }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const r of this.queue.splice(0)) r.reject(new Error('aggregator closed'));
  }

  private schedule(): void {
    if (this.closed || this.running || this.timer || this.queue.length === 0) return;
    // Even with no delay, wait for the end of this turn of the event loop: lists sent together go together.
    this.timer = setTimeout(() => { this.timer = undefined; void this.run(); }, this.budget.waitMs(Date.now()));
  }

  private async run(): Promise<void> {
    if (this.running || this.closed) return;
    this.running = true;
    const batch = this.queue.splice(0);
    try {
      if (batch.length) await this.sendBatch(batch);
    } finally {
      this.running = false;
      this.schedule();
    }
  }

  private async sendBatch(batch: Request[]): Promise<void> {
    this.budget.take(Date.now());
    const ops: IpvsOp[] = [];
    const starts: number[] = [];
    for (const r of batch) { starts.push(ops.length); for (const o of r.ops) ops.push(o); }
    const n = ++this.stats.batches;
    const at = new Date().toISOString();
    let res: IpvsApplyResult;
    try {
      res = await this.opts.transport.apply(ops);
    } catch (e) {
      // Nothing was sent (e.g. the namespace or the family could not be opened).
      for (const r of batch) {
        const s = this.statusOf(r.producer);
        s.last = { at, ok: false, batch: n, error: (e as Error).message };
        r.reject(e as Error);
      }
      return;
    }
    this.stats.messages += ops.length;
    this.stats.refused += res.failed.length;
    batch.forEach((r, i) => {
      const from = starts[i], to = from + r.ops.length;
      // A failure the kernel did not tie to a message (index -1) is every producer's in the batch.
      const failed = res.failed.filter((f) => f.index < 0 || (f.index >= from && f.index < to)).map((f) => ({ ...f, index: f.index < 0 ? -1 : f.index - from }));
      const s = this.statusOf(r.producer);
      s.batches++;
      s.messages += r.ops.length;
      s.refused += failed.length;
      const ok = failed.length === 0 && !res.unknown;
      s.last = { at, ok, batch: n, ...(ok ? {} : { error: res.unknown ? 'the kernel\'s replies were lost' : `${failed[0].what}: ${failed[0].code}${failed.length > 1 ? ` (+${failed.length - 1} more)` : ''}` }) };
      if (!ok) this.log(`aggregator: ipvs: producer ${r.producer}: ${s.last.error} (${failed.length} of ${r.ops.length} messages refused); others' messages applied`);
      r.resolve({ ...res, failed });
    });
  }

  private statusOf(producer: string): IpvsProducerStatus {
    let s = this.perProducer.get(producer);
    if (!s) this.perProducer.set(producer, (s = { batches: 0, messages: 0, refused: 0 }));
    return s;
  }
}
