// Lookups in sorted string lists (binary search, by UTF-16 code units as `<` compares).

/** Where `x` is in sorted `list`, or -1. */
export function sortedIndexOf(list: readonly string[], x: string): number {
  let lo = 0, hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1, v = list[mid]!;
    if (v === x) return mid;
    if (v < x) lo = mid + 1; else hi = mid - 1;
  }
  return -1;
}
