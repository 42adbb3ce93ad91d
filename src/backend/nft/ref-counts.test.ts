import { RefCounts } from './ref-counts';

describe('RefCounts', () => {
  it('counts references per id across its shards, and forgets an id at zero', () => {
    const r = new RefCounts();
    const ids = Array.from({ length: 5000 }, (_, i) => `10.${i >> 8}.${i & 255}.1|6|80`);
    for (const id of ids) expect(r.add(id)).toBe(1);
    for (const id of ids.slice(0, 100)) expect(r.add(id)).toBe(2);
    expect(r.size).toBe(5000);
    expect(r.get(ids[0]!)).toBe(2);
    expect(r.drop(ids[0]!)).toBe(1);
    expect(r.drop(ids[0]!)).toBe(0);
    expect(r.get(ids[0]!)).toBeUndefined();
    expect(r.size).toBe(4999);
    // An id never added counts as held once (a kernel element kpng did not count): dropping it frees it.
    expect(r.drop('10.255.255.255')).toBe(0);
  });

  it('spreads ids that share prefixes and suffixes over its shards', () => {
    const r = new RefCounts();
    for (let i = 0; i < 6400; i++) r.add(`10.128.${i >> 8}.${i & 255}`);
    const sizes = (r as unknown as { shards: Map<string, number>[] }).shards.map((s) => s.size);
    expect(Math.max(...sizes)).toBeLessThan(3 * 100); // 100 each if even
    expect(Math.min(...sizes)).toBeGreaterThan(0);
  });
});
