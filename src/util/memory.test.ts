import * as v8 from 'node:v8';
import { LARGE_HEAP_BYTES, pagePromotionFor, reduceMemory, SMALL_HEAP_BYTES, SYNC_GC_MAX_HEAP_BYTES } from './memory';

const newSpaceMiB = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size / 2 ** 20;

describe('reduceMemory', () => {
  it('shrinks the young generation that a burst of surviving allocations grew', () => {
    // Objects that survive a few scavenges make V8 grow the young generation, as the first lists do.
    let keep: object[] = [];
    for (let i = 0; i < 2_000_000; i++) {
      keep.push({ i, s: `x${i}` });
      if (keep.length > 300_000) keep = [];
    }
    keep = [];
    const grown = newSpaceMiB();
    // The blocking collection, whatever the size of the jest worker's heap (it can pass 256 MiB).
    const r = reduceMemory(SYNC_GC_MAX_HEAP_BYTES / 4);
    expect(r).toBeDefined();
    expect(grown).toBeGreaterThan(8);
    expect(newSpaceMiB()).toBeLessThan(grown / 4);
    expect(r!.afterMiB).toBeLessThan(r!.beforeMiB);
    expect(r!.incremental).toBe(false);
  });

  it('only starts an incremental major GC on a large heap (the blocking one paused 0.9-2.1 s at 50k services)', () => {
    const r = reduceMemory(SYNC_GC_MAX_HEAP_BYTES + 1);
    expect(r).toBeDefined();
    expect(r!.incremental).toBe(true);
  });
});

describe('pagePromotionFor', () => {
  const MiB = 2 ** 20;
  it('promotes whole pages from 64 MiB of heap and goes back below 32 MiB, keeping its choice in between', () => {
    expect(pagePromotionFor(10 * MiB, 'default')).toBe('default');
    expect(pagePromotionFor(LARGE_HEAP_BYTES, 'default')).toBe('whole-pages');
    expect(pagePromotionFor(48 * MiB, 'whole-pages')).toBe('whole-pages');
    expect(pagePromotionFor(48 * MiB, 'default')).toBe('default');
    expect(pagePromotionFor(SMALL_HEAP_BYTES - 1, 'whole-pages')).toBe('default');
  });
});
