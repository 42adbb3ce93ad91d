// A token bucket for commits: up to `burst` commits back to back, then one per `minIntervalMs`
// (the shape of kube-proxy's min-sync-period with a burst). Time is passed in, for tests.
export class CommitBudget {
  private tokens: number;
  private last: number;

  constructor(readonly minIntervalMs: number, readonly burst: number, now: number) {
    if (!(burst >= 1)) throw new Error('burst must be at least 1');
    this.tokens = burst;
    this.last = now;
  }

  private refill(now: number): void {
    if (this.minIntervalMs <= 0) { this.tokens = this.burst; this.last = now; return; }
    const gained = (now - this.last) / this.minIntervalMs;
    this.tokens = Math.min(this.burst, this.tokens + gained);
    this.last = now;
  }

  /** Milliseconds until a commit may start (0: now). */
  waitMs(now: number): number {
    this.refill(now);
    return this.tokens >= 1 ? 0 : Math.ceil((1 - this.tokens) * this.minIntervalMs);
  }

  /** Spends one commit; call only when waitMs() is 0. */
  take(now: number): void {
    this.refill(now);
    this.tokens = Math.max(0, this.tokens - 1);
  }
}
