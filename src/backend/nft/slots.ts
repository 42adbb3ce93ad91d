// Slot ranges in the shared `endpoints` map. A service chain with N endpoints owns a range
// [base, base + cap) and picks one with `numgen random mod N offset base`. Capacities are powers of
// two so that a service can grow a little without moving; freed ranges are reused by size class.
// The key space is 32 bits: 4 billion slots, far more than any node will program.

/** Slots per endpoints map shard: bounds the rules bound to one map (at most SHARD_SLOTS / 2). */
export const SHARD_SLOTS = 2048;

/** The endpoints map holding a range that starts at `base`. */
export const shardOf = (base: number): number => Math.floor(base / SHARD_SLOTS);

export class SlotAllocator {
  private next = 0;
  private readonly free = new Map<number, number[]>();

  alloc(cap: number): number {
    const list = this.free.get(cap);
    if (list && list.length > 0) return list.pop()!;
    // Aligned to its capacity, so a range never straddles two shards (SHARD_SLOTS is a power of two).
    let base = Math.ceil(this.next / cap) * cap;
    if (cap <= SHARD_SLOTS && Math.floor(base / SHARD_SLOTS) !== Math.floor((base + cap - 1) / SHARD_SLOTS)) {
      base = Math.ceil(base / SHARD_SLOTS) * SHARD_SLOTS;
    }
    this.next = base + cap;
    if (this.next > 0xffffffff) throw new Error('endpoint slot space exhausted');
    return base;
  }

  release(base: number, cap: number): void {
    let list = this.free.get(cap);
    if (!list) this.free.set(cap, (list = []));
    list.push(base);
  }

  /** Slots handed out so far (high-water mark). */
  get highWater(): number {
    return this.next;
  }
}

export interface SlotState {
  base: number;
  cap: number;
  /** Endpoint key ("addr|port") in each used slot; length = N. */
  bySlot: string[];
}

export function capacityFor(n: number): number {
  let c = 2;
  while (c < n) c *= 2;
  return c;
}

/**
 * Place endpoints in slots, keeping every endpoint that stays in its slot when it can (so that one
 * endpoint change rewrites one element). Reuses the previous range when it is big enough, otherwise
 * allocates a new one (the caller releases `prev` if the returned base differs).
 */
export function assignSlots(keys: string[], prev: SlotState | undefined, alloc: SlotAllocator): SlotState {
  const n = keys.length;
  if (!prev || n > prev.cap) {
    const cap = capacityFor(n);
    return { base: alloc.alloc(cap), cap, bySlot: [...keys] };
  }
  const want = new Set(keys);
  const bySlot: (string | undefined)[] = new Array(n).fill(undefined);
  const placed = new Set<string>();
  for (let i = 0; i < Math.min(n, prev.bySlot.length); i++) {
    const k = prev.bySlot[i];
    if (want.has(k)) { bySlot[i] = k; placed.add(k); }
  }
  let j = 0;
  for (const k of keys) {
    if (placed.has(k)) continue;
    while (bySlot[j] !== undefined) j++;
    bySlot[j] = k;
  }
  return { base: prev.base, cap: prev.cap, bySlot: bySlot as string[] };
}
