// The malloc arena cap and trim through the addon (real glibc; the bench shows the effect on RSS).
import { ARENA_MAX, fixMallocThresholds, limitMallocArenas, trimMalloc } from './malloc';
import { loadNative } from './index';
import { gated, need } from '../../test/helpers/gate';

const maybe = gated(need.native()).test;

test('MALLOC_ARENA_MAX in the environment wins: kpng leaves the arenas alone', () => {
  expect(limitMallocArenas({ MALLOC_ARENA_MAX: '8' })).toBe('user');
});

test('malloc thresholds the environment sets win', () => {
  expect(fixMallocThresholds({ MALLOC_TRIM_THRESHOLD_: '1' })).toBe('user');
  expect(fixMallocThresholds({ MALLOC_MMAP_THRESHOLD_: '1' })).toBe('user');
  expect(fixMallocThresholds({ GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=4096' })).toBe('user');
});

maybe('on glibc the thresholds are fixed', () => {
  expect(fixMallocThresholds({})).toBe('set');
});

maybe('on glibc the cap is set, trim runs in a worker, and bad options are refused', async () => {
  expect(limitMallocArenas({})).toBe('set');
  expect(ARENA_MAX).toBe(2);
  expect(typeof (await trimMalloc())).toBe('boolean');
  expect(loadNative().mallocTune({ trimThreshold: -1 }).applied).toEqual([]);
  expect(() => (loadNative().mallocTune as unknown as (x: unknown) => unknown)(42)).toThrow(/expects an object/);
});
