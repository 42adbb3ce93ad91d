// client-go's client-side rate limit (--kube-api-qps, --kube-api-burst): a token bucket in front of every
// request to the API server, so that a kpng restarting on every node of a large cluster does not
// hammer the API server harder than kube-proxy would. A watch counts once, when it starts.
import type { Transport } from './http';

export interface Clock { now(): number; sleep(ms: number, signal: AbortSignal): Promise<void> }

const realClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) => new Promise((resolve, reject) => {
    if (signal.aborted) { reject(signal.reason); return; }
    const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal.reason); };
    signal.addEventListener('abort', onAbort, { once: true });
  }),
};

/** client-go's defaults when a value is zero: 5 requests per second, bursts of 10. */
export const DEFAULT_QPS = 5;
export const DEFAULT_BURST = 10;

export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly qps: number;
  private readonly burst: number;

  /** qps < 0: no limit (as client-go); 0: the default. */
  constructor(qps: number, burst: number, private readonly clock: Clock = realClock) {
    this.qps = qps === 0 ? DEFAULT_QPS : qps;
    this.burst = burst > 0 ? burst : DEFAULT_BURST;
    this.tokens = this.burst;
    this.last = clock.now();
  }

  get unlimited(): boolean { return this.qps < 0; }

  /** Resolves when a request may go, with the time it waited (ms, 0: a token was there); rejects when
   *  `signal` aborts first. */
  async take(signal: AbortSignal): Promise<number> {
    if (this.unlimited) return 0;
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    // Reserve the token now: concurrent callers queue behind each other, as client-go's limiter does.
    this.tokens -= 1;
    if (this.tokens >= 0) return 0;
    const ms = (-this.tokens / this.qps) * 1000;
    await this.clock.sleep(ms, signal);
    return ms;
  }
}

/** The transport with every request waiting for the bucket first; `waited` is told each wait, in seconds
 *  (0 when a token was there: client-go's rate limiter latency). */
export function rateLimited(t: Transport, bucket: TokenBucket, waited?: (seconds: number) => void): Transport {
  if (bucket.unlimited) return t;
  return {
    server: t.server,
    get reachability() { return t.reachability; },
    async get(path, signal, accept) {
      const ms = await bucket.take(signal);
      waited?.(ms / 1000);
      return t.get(path, signal, accept);
    },
  };
}
