// Wraps a backend's Sink to see every sync: when it starts, how long it took, whether it was a full or a
// partial one, what it cost the kernel (for kernel backends), and whether it failed. The sink itself is
// untouched: the wrapper only observes.
import type { Batch, Sink, StateView } from '../sink/sink';
import type { ConntrackCleanup, KernelSinkStats } from '../backend/kernel/kernel-sink';

export interface SyncResult {
  batch: Batch;
  state: StateView;
  /** Wall time of apply(), seconds. */
  seconds: number;
  /** A full sync (reset batch, or a kernel backend that chose to rebuild everything). */
  full: boolean;
  /** Kernel backends: what the dataplane reported for this apply (absent when it had nothing to send). */
  kernel?: { messages: number; bytes: number; seconds: number };
  /** Kernel backends: stale conntrack entries deleted by this apply. */
  conntrackDeleted: number;
  /** Kernel backends: this apply's conntrack clean-ups, per IP family. */
  conntrack: ConntrackCleanup[];
}

export interface SyncObserver {
  started(batch: Batch): void;
  succeeded(result: SyncResult): void;
  failed(batch: Batch, seconds: number, error: unknown): void;
  /** What the sink applied stopped working (Sink.watch). */
  lost?(why: string): void;
}

/** The shared kernel layer's counters, when the sink is one (duck-typed: plugins may wrap their own). */
function kernelStats(sink: Sink): KernelSinkStats | undefined {
  const s = (sink as { stats?: Partial<KernelSinkStats> }).stats;
  return s && typeof s.syncs === 'number' && typeof s.fullSyncs === 'number' ? (s as KernelSinkStats) : undefined;
}

export function instrumentSink(sink: Sink, obs: SyncObserver): Sink {
  return {
    name: sink.name,
    async apply(batch: Batch, state: StateView, signal?: AbortSignal): Promise<void> {
      const k = kernelStats(sink);
      const before = k ? { syncs: k.syncs, full: k.fullSyncs, ct: k.conntrackDeleted } : undefined;
      obs.started(batch);
      const t0 = performance.now();
      try {
        await sink.apply(batch, state, signal);
      } catch (e) {
        // A sync abandoned because kpng is stopping did not fail.
        if (!signal?.aborted) obs.failed(batch, (performance.now() - t0) / 1000, e);
        throw e;
      }
      const seconds = (performance.now() - t0) / 1000;
      const synced = k && before && k.syncs > before.syncs;
      obs.succeeded({
        batch, state, seconds,
        full: k && before ? k.fullSyncs > before.full : batch.reset,
        kernel: synced ? { messages: k.lastMessages, bytes: k.lastBytes, seconds: k.lastMs / 1000 } : undefined,
        conntrackDeleted: k && before ? k.conntrackDeleted - before.ct : 0,
        conntrack: k?.lastConntrack ?? [],
      });
    },
    watch: sink.watch ? (lost) => sink.watch!((why) => { obs.lost?.(why); lost(why); }) : undefined,
    close: sink.close ? () => sink.close!() : undefined,
  };
}
