// FNV-1a (32-bit) of a string's UTF-16 code units: a cheap, stable hash for spreading keys over
// shards (not for security, not for content digests).
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
