// Drives one sink from a node state: waits for changes (never before the source is synced),
// respects a minimum interval between syncs with a burst allowance (kube-proxy's
// --min-sync-period), and turns a failed apply into a full resync after a backoff. Given a change
// period (kpng's --min-change-period), syncs of changes only get a limiter of their own: a full sync
// rewrites and compares everything, a sync of changes costs what the changes cost.
import type { ItemStore } from './store/item-store';
import type { Batch, Sink } from './sink/sink';
import type { Logger } from './util/log';
import { sleep } from './util/sleep';

export { sleep };

export interface RunnerOptions {
  log: Logger;
  /** Minimum time between two syncs, in ms (0 = none). */
  minSyncPeriodMs: number;
  /** Minimum time between two syncs of changes only, in ms (0 = none: a change is applied as soon as the
   *  sync before it has finished; what arrives meanwhile goes in one batch). Default: minSyncPeriodMs. */
  minChangePeriodMs?: number;
  /** Syncs allowed back to back before the minimum interval applies. */
  burst: number;
  /** Apply one batch and return. */
  once?: boolean;
  /** Called after each successful apply. */
  onApplied?: (batch: Batch, ms: number) => void;
  /** Ask for a full resync this often, ms (0 = never): kernel backends repair state edited behind kpng's back. */
  fullSyncPeriodMs?: number;
  /** Upper bound of the retry backoff after a failed apply, in ms. */
  maxBackoffMs?: number;
}

export interface RunnerStats { syncs: number; failures: number; lastRevision: number }

/** A token bucket: `burst` tokens, one more every `periodMs`. */
export class SyncLimiter {
  private tokens: number;
  private last = Date.now();
  constructor(private readonly periodMs: number, private readonly burst: number) {
    this.tokens = Math.max(1, burst);
  }
  /** Resolves when a sync may run, and uses up a token; at once when `signal` aborts. */
  async acquire(signal?: AbortSignal): Promise<void> {
    if (this.periodMs <= 0) return;
    for (;;) {
      // An aborted signal makes sleep() return at once: without this the loop spun until a token came.
      if (signal?.aborted) return;
      const now = Date.now();
      this.tokens = Math.min(Math.max(1, this.burst), this.tokens + (now - this.last) / this.periodMs);
      this.last = now;
      if (this.tokens >= 1) { this.tokens -= 1; return; }
      await sleep((1 - this.tokens) * this.periodMs, signal);
    }
  }
}


/** How often a backoff looks for a reason to end early. */
const BACKOFF_POLL_MS = 100;

/**
 * The wait after a failed sync: `ms`, or less once `changed()` (a new change to the state, or the
 * kernel's notice of another process's change). The retry then waits only for the sync limiter, as
 * kube-proxy retries at its next change: on the cluster, a table another process held for 20 s was
 * repaired 11 s after its release while the backoff had grown to 16 s, and with the eBPF backend
 * the maps missed every endpoint change meanwhile (`make chaos SCENARIOS=batch-rejected`).
 */
async function backoffWait(ms: number, changed: () => boolean, signal?: AbortSignal): Promise<void> {
  const end = Date.now() + ms;
  while (!signal?.aborted && !changed()) {
    const left = end - Date.now();
    if (left <= 0) return;
    await sleep(Math.min(left, BACKOFF_POLL_MS), signal);
  }
}

export async function runSink(state: ItemStore, sink: Sink, opts: RunnerOptions, signal?: AbortSignal): Promise<RunnerStats> {
  const stats: RunnerStats = { syncs: 0, failures: 0, lastRevision: 0 };
  const sub = state.subscribe();
  const fullLimiter = new SyncLimiter(opts.minSyncPeriodMs, opts.burst);
  const changeLimiter = opts.minChangePeriodMs === undefined ? fullLimiter : new SyncLimiter(opts.minChangePeriodMs, opts.burst);
  const onAbort = () => sub.close();
  signal?.addEventListener('abort', onAbort, { once: true });
  // Kernel state lost between syncs (a sink that can tell): resync in full now, not at the next period.
  let noticed = 0;
  sink.watch?.((why) => { opts.log.info(`${sink.name}: ${why}: full resync`); noticed++; sub.requestReset(); });
  const period = opts.fullSyncPeriodMs ?? 0;
  const resync = period > 0 ? setInterval(() => { opts.log.info(`${sink.name}: periodic full resync`); sub.requestReset(); }, period) : undefined;
  resync?.unref();
  let backoff = 1000;
  try {
    for (;;) {
      try {
        await sub.ready();
      } catch {
        return stats; // closed
      }
      await (sub.resetNext ? fullLimiter : changeLimiter).acquire(signal);
      if (signal?.aborted) return stats;
      const batch = sub.take();
      if (!batch.reset && batch.changes.length === 0) continue;
      const t0 = performance.now();
      const seen = noticed;
      try {
        await sink.apply(batch, state, signal);
      } catch (e) {
        // Stopping: the sink abandoned the batch (or failed because of it); nothing to retry.
        if (signal?.aborted) return stats;
        stats.failures++;
        opts.log.error(`${sink.name}: sync to revision ${batch.revision} failed (${(e as Error).message}); retrying with a full sync in ${backoff} ms`);
        sub.requestReset();
        if (opts.once) return stats;
        await backoffWait(backoff, () => state.revision !== batch.revision || noticed !== seen, signal);
        backoff = Math.min(backoff * 2, opts.maxBackoffMs ?? 30000);
        continue;
      }
      backoff = 1000;
      stats.syncs++;
      stats.lastRevision = batch.revision;
      opts.onApplied?.(batch, performance.now() - t0);
      if (opts.once) return stats;
    }
  } finally {
    if (resync) clearInterval(resync);
    signal?.removeEventListener('abort', onAbort);
    sub.close();
  }
}
