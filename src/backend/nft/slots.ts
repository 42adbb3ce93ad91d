// Endpoint slots of one destination in a picks map: slot i -> endpoint, i in 0..N-1, picked by
// `numgen random mod N`. Kept per endpoint list so that an endpoint that stays keeps its slot.

export interface SlotState {
  /** Endpoint key ("addr|port") in each slot; length = N. */
  bySlot: string[];
}

/**
 * Slots 0..n-1 for the endpoints: an endpoint that stays keeps its slot when it is still below n
 * (one endpoint replaced = one element rewritten); the others fill the free slots.
 */
export function denseSlots(keys: string[], prev: SlotState | undefined): SlotState {
  const n = keys.length;
  const want = new Set(keys);
  const bySlot: (string | undefined)[] = new Array(n).fill(undefined);
  const placed = new Set<string>();
  if (prev) {
    for (let i = 0; i < Math.min(n, prev.bySlot.length); i++) {
      const k = prev.bySlot[i];
      if (want.has(k)) { bySlot[i] = k; placed.add(k); }
    }
  }
  let j = 0;
  for (const k of keys) {
    if (placed.has(k)) continue;
    while (bySlot[j] !== undefined) j++;
    bySlot[j] = k;
  }
  return { bySlot: bySlot as string[] };
}
