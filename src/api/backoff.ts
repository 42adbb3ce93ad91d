// Jittered exponential backoff for reconnecting: attempt n waits a random time between half
// and all of min(max, initial * 2^n), so many clients restarting together spread out.
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  /** Source of randomness in [0, 1) (tests make it deterministic). */
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly initial: number;
  private readonly max: number;
  private readonly random: () => number;

  constructor(opts: BackoffOptions = {}) {
    this.initial = opts.initialMs ?? 200;
    this.max = opts.maxMs ?? 30000;
    this.random = opts.random ?? Math.random;
  }

  /** The delay before the next attempt (and counts the attempt). */
  next(): number {
    const ceiling = Math.min(this.max, this.initial * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return Math.round(ceiling / 2 + (this.random() * ceiling) / 2);
  }

  /** A connection worked: start again from the initial delay. */
  reset(): void { this.attempt = 0; }

  get attempts(): number { return this.attempt; }
}
