// Structural equality of JSON-shaped values (what JSON.stringify would print the same), without
// building the text: the store compares each trimmed object with the one it holds instead of keeping
// a JSON copy of every object (17 MiB at 10k services x 10 endpoints).

/** True when `a` and `b` serialize to the same JSON text (same keys in the same order). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    // Different primitives (an undefined array member, printed as null, counts as a change: the
    // store's parsers never make one).
    return Number.isNaN(a) && Number.isNaN(b);
  }
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = definedKeys(a as Record<string, unknown>);
  const kb = definedKeys(b as Record<string, unknown>);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    if (ka[i] !== kb[i]) return false;
    if (!sameJson((a as Record<string, unknown>)[ka[i]], (b as Record<string, unknown>)[kb[i]])) return false;
  }
  return true;
}

/** Keys JSON.stringify prints: undefined and function members are left out. */
function definedKeys(o: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const k of Object.keys(o)) {
    const v = o[k];
    if (v !== undefined && typeof v !== 'function') out.push(k);
  }
  return out;
}
