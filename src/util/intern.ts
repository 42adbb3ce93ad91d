// Values a cluster repeats by the thousand (node names, port lists, runs of endpoint conditions),
// kept once: every parsed object gets its own copy otherwise, and each copy is one more thing the
// GC traces. Bounded: past `max` keys the table starts over, which only costs the sharing.

export class Interner<T> {
  private readonly known = new Map<string, T>();
  constructor(private readonly max: number) {}

  /** The value first interned under `key`, else `value` (now interned). */
  intern(key: string, value: T): T {
    const known = this.known.get(key);
    if (known !== undefined) return known;
    if (this.known.size >= this.max) this.known.clear();
    this.known.set(key, value);
    return value;
  }
}

/**
 * Small codes (one per element of a list: conditions, flags) as one string, interned in `runs`: a
 * string is one heap object whatever its length, and most lists of a cluster share a handful of runs.
 */
export function internCodeRun(runs: Interner<string>, codes: readonly number[]): string {
  // String.fromCharCode takes its codes as arguments: a long list goes in chunks.
  let s = '';
  if (codes.length <= 4096) s = String.fromCharCode(...codes);
  else for (let i = 0; i < codes.length; i += 4096) s += String.fromCharCode(...codes.slice(i, i + 4096));
  return runs.intern(s, s);
}

/** One frozen empty list for every field that has nothing (at 50k services, 300k empty arrays). */
const EMPTY: readonly never[] = Object.freeze([]);

/** `xs`, or the shared empty list when `xs` is empty. Frozen: code that writes to it throws. */
export const orEmpty = <T>(xs: T[]): T[] => (xs.length ? xs : (EMPTY as unknown as T[]));
