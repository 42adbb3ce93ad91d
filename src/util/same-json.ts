// Structural equality of JSON-shaped values (what JSON.stringify would print the same), without
// building the text: the store compares each trimmed object with the one it holds instead of keeping
// a JSON copy of every object, which grows with the cluster.

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
  // Both key lists walked side by side, skipping what JSON.stringify leaves out (no arrays built:
  // the store compares every object a watch delivers).
  const oa = a as Record<string, unknown>, ob = b as Record<string, unknown>;
  const ka = Object.keys(oa), kb = Object.keys(ob);
  let i = 0, j = 0;
  for (;;) {
    while (i < ka.length && !printed(oa[ka[i]])) i++;
    while (j < kb.length && !printed(ob[kb[j]])) j++;
    if (i === ka.length || j === kb.length) return i === ka.length && j === kb.length;
    if (ka[i] !== kb[j] || !sameJson(oa[ka[i]], ob[kb[j]])) return false;
    i++;
    j++;
  }
}

/** Whether JSON.stringify prints a member: undefined and function members are left out. */
const printed = (v: unknown): boolean => v !== undefined && typeof v !== 'function';
