// A small seeded pseudo-random generator (mulberry32) for the faulty kernels: the same seed draws the
// same faults, so a failing property prints a seed that replays it. Not for anything secret.

/** Numbers in [0, 1), the same sequence for the same seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
