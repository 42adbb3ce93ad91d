// Whether the API server can be reached at all, so that the reflectors retry as soon as it can again
// rather than at the end of a backoff grown during an outage. After a network partition the backoff
// has reached its 30 s cap (up to 60 s with jitter) and a connection attempt under way waits for its
// next SYN retransmission (1, 3, 7, 15 s...): a node could stay blind for half a minute after the
// API server was back. While some reflector waits after a failure that had no HTTP response, one
// shared loop tries a plain TCP connection to the server every ~2 s (a SYN and a close, no TLS and
// no request: nothing the API server spends anything on); a success after a failure wakes them.
// An early wake needs the server to have been seen unreachable during the attempt that failed or
// the wait: when it stays reachable (a TLS error, a reset after connecting), the backoff alone sets
// the pace, so a server that answers badly is never retried faster than before.
import * as net from 'node:net';

/** One TCP connection attempt: true once connected, false on error or after `timeoutMs`. */
export type ReachProbe = (timeoutMs: number) => Promise<boolean>;

export interface ReachabilityOptions {
  /** Time between probes while someone waits (each jittered by up to ±25%). Default 2 s. */
  periodMs?: number;
  /** A probe that has not connected by then counts as unreachable. Default 2 s. */
  timeoutMs?: number;
  now?: () => number;
  random?: () => number;
}

/** A TCP connection to host:port (the socket is closed at once). */
export function tcpProbe(host: string, port: number): ReachProbe {
  return (timeoutMs) =>
    new Promise((resolve) => {
      const s = net.connect({ host, port });
      const done = (ok: boolean) => { clearTimeout(timer); s.destroy(); resolve(ok); };
      const timer = setTimeout(() => done(false), timeoutMs);
      s.once('connect', () => done(true));
      s.once('error', () => done(false));
    });
}

interface Waiter { since: number; wake: () => void }

export class Reachability {
  /** When the server was last seen unreachable (a probe, or a request that could not connect). */
  private lastDown = -Infinity;
  private readonly waiters = new Set<Waiter>();
  private looping = false;
  private readonly periodMs: number;
  private readonly timeoutMs: number;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Probes made (for tests and logs). */
  probes = 0;

  constructor(private readonly probe: ReachProbe, opts: ReachabilityOptions = {}) {
    this.periodMs = opts.periodMs ?? 2000;
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
  }

  /** A request could not connect (timeout, refused, unreachable). */
  markDown(): void { this.lastDown = this.now(); }

  /**
   * Resolves once a probe connects after the server was seen unreachable at or after `since` (the
   * start of the attempt that failed); never while it stays reachable. Resolves at once when `signal`
   * aborts (the caller's backoff ended first, or the source stops).
   */
  back(since: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const w: Waiter = { since, wake: () => done() };
      const done = () => { this.waiters.delete(w); signal.removeEventListener('abort', done); resolve(); };
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(w);
      void this.loop();
    });
  }

  private jittered(ms: number): number { return ms * (0.75 + 0.5 * this.random()); }

  private async loop(): Promise<void> {
    if (this.looping) return;
    this.looping = true;
    try {
      while (this.waiters.size > 0) {
        await new Promise((r) => setTimeout(r, this.jittered(this.periodMs)).unref());
        if (this.waiters.size === 0) break;
        this.probes++;
        if (!(await this.probe(this.timeoutMs))) {
          this.markDown();
          continue;
        }
        for (const w of [...this.waiters]) if (this.lastDown >= w.since) w.wake();
      }
    } finally {
      this.looping = false;
    }
  }
}
