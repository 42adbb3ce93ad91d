// Reference counts of a shared set's elements (several services may hold one element), kept in
// shards. One Map grows by rehashing all of its entries at once: on a large cluster the hairpin
// set's ids doubling their table was a long stall inside one service's render of a full sync (the
// event loop cannot turn in the middle of it). A shard rehashes 1/64 of the entries.

import { fnv1a } from '../../util/fnv';

const SHARDS = 64;

/** Which shard an id lives in: a hash of all its characters (ids share long prefixes and suffixes). */
const shardOf = (id: string): number => fnv1a(id) % SHARDS;

export class RefCounts {
  private readonly shards: Map<string, number>[] = Array.from({ length: SHARDS }, () => new Map<string, number>());

  get(id: string): number | undefined { return this.shards[shardOf(id)]!.get(id); }

  get size(): number {
    let n = 0;
    for (const s of this.shards) n += s.size;
    return n;
  }

  /** Adds one reference; the count after. */
  add(id: string): number {
    const s = this.shards[shardOf(id)]!;
    const n = (s.get(id) ?? 0) + 1;
    s.set(id, n);
    return n;
  }

  /** Drops one reference (an absent id counts as held once); the count after, the id gone at 0. */
  drop(id: string): number {
    const s = this.shards[shardOf(id)]!;
    const n = (s.get(id) ?? 1) - 1;
    if (n <= 0) s.delete(id); else s.set(id, n);
    return n;
  }
}
