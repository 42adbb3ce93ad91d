// Gives back the memory the initial lists needed. While kpng parses the first lists and computes the
// first state, nearly everything it allocates survives, so V8 grows the young generation to its
// maximum and keeps it; old-space pages freed after the sync stay committed too. One
// memory-reducing ("last resort") full GC once the loop is idle after the first sync shrinks both,
// at the price of one pause at a moment when nothing waits for kpng.
// It does not lower the peak reached during the first sync (the process's high-water mark): that is
// what limitYoungGeneration() is for.
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { constants as perfConstants, performance, PerformanceObserver } from 'node:perf_hooks';
import type { Logger } from './log';
import { userNodeFlags } from './node-flags';

type GcFn = (opts: { type: 'major'; execution: 'sync'; flavor: 'last-resort' } | { type: 'major'; execution: 'async' }) => void;

let gcFn: GcFn | undefined | null;

/** V8's gc(), without --expose-gc on the command line (null when this V8 refuses). */
function gc(): GcFn | null {
  if (gcFn !== undefined) return gcFn;
  try {
    v8.setFlagsFromString('--expose-gc');
    gcFn = vm.runInNewContext('gc') as GcFn;
  } catch {
    gcFn = null;
  }
  return gcFn;
}

/** Semi-space flags a user may pass (node command line or NODE_OPTIONS): theirs win over ours. */
const SEMI_SPACE_FLAG = /--(max|min)[-_]semi[-_]space[-_]size|--semi[-_]space[-_]growth[-_]factor/;

/**
 * Keeps V8's young generation at its initial size (--semi-space-growth-factor=1). While the first
 * lists are parsed almost everything allocated survives, and V8 answers by doubling the young
 * generation up to its maximum, which makes most of the peak resident set on a large cluster.
 * --max-semi-space-size would bound it too, but only on the command line (the heap is configured at
 * start); the growth factor is read at each growth, so setting it here at run time takes effect.
 * bench/first-sync.bench.ts shows the peak it saves, at no cost in time. Returns false when the user
 * set a semi-space flag (theirs win) or V8 refused.
 */
export function limitYoungGeneration(): boolean {
  if (SEMI_SPACE_FLAG.test(userNodeFlags())) return false;
  try {
    v8.setFlagsFromString('--semi-space-growth-factor=1');
    return true;
  } catch {
    return false;
  }
}

/** A page-promotion flag a user may pass (node command line or NODE_OPTIONS): theirs wins over ours. */
const PAGE_PROMOTION_FLAG = /--page[-_]promotion/;
/** V8's own default for --page-promotion-threshold (percent of a young page's bytes alive). */
export const V8_PAGE_PROMOTION_THRESHOLD = 70;
/** Heap used after a major GC from which young pages are promoted whole, and below which not again. */
export const LARGE_HEAP_BYTES = 64 * 2 ** 20;
export const SMALL_HEAP_BYTES = 32 * 2 ** 20;

export type PagePromotion = 'default' | 'whole-pages';

/** The policy for the next major GCs, given the heap used after the last one (with hysteresis). */
export function pagePromotionFor(heapUsed: number, current: PagePromotion): PagePromotion {
  if (heapUsed >= LARGE_HEAP_BYTES) return 'whole-pages';
  if (heapUsed < SMALL_HEAP_BYTES) return 'default';
  return current;
}

/**
 * On a large heap, lets V8's major GCs move the young generation's pages to the old generation whole
 * instead of copying their live objects out one by one (--page-promotion-threshold=0; V8's default
 * moves a page whole only when 70% of it is alive). On a large cluster's heap the copying was most of
 * a major GC's atomic pause, and that pause the longest stall of the full sync (bench/nft-change
 * shows it with and without whole pages). A small heap keeps V8's
 * default: there the copying is short and leaves the old generation more compact (1k services' peak
 * RSS is what kpng is measured on). The policy is re-read after every major GC; returns a function
 * that stops it, or undefined when the user set the flag (theirs wins) or V8 refused.
 */
export function promoteWholePagesOnLargeHeaps(onChange?: (p: PagePromotion, heapUsed: number) => void): (() => void) | undefined {
  if (PAGE_PROMOTION_FLAG.test(userNodeFlags())) return undefined;
  let current: PagePromotion = 'default';
  const set = (p: PagePromotion): boolean => {
    try {
      v8.setFlagsFromString(`--page-promotion-threshold=${p === 'whole-pages' ? 0 : V8_PAGE_PROMOTION_THRESHOLD}`);
      return true;
    } catch {
      return false;
    }
  };
  if (!set('default')) return undefined;
  const major = perfConstants.NODE_PERFORMANCE_GC_MAJOR | perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL;
  const obs = new PerformanceObserver((list) => {
    if (!list.getEntries().some((e) => ((e as { detail?: { kind?: number } }).detail?.kind ?? 0) & major)) return;
    const used = v8.getHeapStatistics().used_heap_size;
    const next = pagePromotionFor(used, current);
    if (next === current || !set(next)) return;
    current = next;
    onChange?.(next, used);
  });
  obs.observe({ entryTypes: ['gc'] });
  return () => obs.disconnect();
}

/**
 * JS heap above which the memory-reducing GC is started incrementally instead of run to the end at
 * once: on a large heap the blocking last-resort collection pauses the event loop for seconds.
 */
export const SYNC_GC_MAX_HEAP_BYTES = 256 * 2 ** 20;

/**
 * One memory-reducing full GC (only started, `incremental`, above SYNC_GC_MAX_HEAP_BYTES of heap);
 * returns the resident set before and after (MiB), or undefined when no GC function is at hand.
 */
export function reduceMemory(heapUsed = process.memoryUsage().heapUsed): { beforeMiB: number; afterMiB: number; ms: number; incremental: boolean } | undefined {
  const f = gc();
  if (!f) return undefined;
  const before = process.memoryUsage.rss();
  const t = performance.now();
  const incremental = heapUsed > SYNC_GC_MAX_HEAP_BYTES;
  f(incremental ? { type: 'major', execution: 'async' } : { type: 'major', execution: 'sync', flavor: 'last-resort' });
  return { beforeMiB: before / 2 ** 20, afterMiB: process.memoryUsage.rss() / 2 ** 20, ms: performance.now() - t, incremental };
}

/**
 * Calls reduceMemory() once, the first time the event loop was less than `maxUtilization` busy over
 * a whole `windowMs` (the first state has then been computed and handed to the sink).
 */
export function reduceMemoryWhenIdle(log: Logger, signal: AbortSignal, then?: () => void, windowMs = 1000, maxUtilization = 0.05, giveUpMs = 300_000): void {
  let last = performance.eventLoopUtilization();
  const start = performance.now();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const u = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    if (signal.aborted || performance.now() - start > giveUpMs) { clearInterval(timer); return; }
    if (u > maxUtilization) return;
    clearInterval(timer);
    const r = reduceMemory();
    if (r?.incremental) log.info(`memory: resident set ${r.beforeMiB.toFixed(0)} MiB after the first sync; a major GC started (incremental: the heap is above ${SYNC_GC_MAX_HEAP_BYTES / 2 ** 20} MiB)`);
    else if (r) log.info(`memory: resident set ${r.beforeMiB.toFixed(0)} -> ${r.afterMiB.toFixed(0)} MiB after the first sync (one memory-reducing GC, ${r.ms.toFixed(0)} ms)`);
    then?.();
  }, windowMs);
  timer.unref();
}
