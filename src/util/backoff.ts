// The one jittered exponential backoff of kpng (reflectors, API clients, retries), in the manner of
// client-go's: initial 800 ms by default, doubling, capped at 30 s, with up to 100% added at random
// (so many clients restarting together spread out), reset after a quiet period without failures so
// that one blip long ago does not slow a later recovery.
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  /** Fraction of the delay added at random (0 = none, 1 = up to double). */
  jitter?: number;
  /** Forget earlier failures after this long without one. */
  resetAfterMs?: number;
  now?: () => number;
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private lastFailure = -Infinity;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly jitter: number;
  private readonly resetAfterMs: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 800;
    this.maxMs = opts.maxMs ?? 30_000;
    this.jitter = opts.jitter ?? 1;
    this.resetAfterMs = opts.resetAfterMs ?? 120_000;
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
  }

  /** The delay before the next attempt, after a failure. */
  next(): number {
    const now = this.now();
    if (now - this.lastFailure > this.resetAfterMs) this.attempt = 0;
    this.lastFailure = now;
    const base = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return Math.round(Math.min(this.maxMs, base * (1 + this.jitter * this.random())));
  }

  /** Things work again: the next failure starts from the initial delay. */
  reset(): void {
    this.attempt = 0;
    this.lastFailure = -Infinity;
  }

  /** Failures since the last reset (for logs). */
  get failures(): number {
    return this.attempt;
  }
}
