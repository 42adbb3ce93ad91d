// Probes the runner keeps in its own event loop, from the host (outside the nodes): a new TCP
// connection to each node's NodePort every 0.2 s (the echo port: "ping" written, "ping" back within
// 2 s), and each node's /healthz every second.
import * as http from 'node:http';
import * as net from 'node:net';
import { now } from './cluster';
import type { ProbeEvent } from './probes';
import type { HealthSample } from './proxy-state';

/** One exchange with an echo server; resolves ok or the reason it failed. */
export function echoOnce(host: string, port: number, timeoutMs = 2000): Promise<{ ok: boolean; detail?: string }> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    let got = '';
    const done = (ok: boolean, detail?: string) => { clearTimeout(timer); s.destroy(); resolve(detail ? { ok, detail } : { ok }); };
    const timer = setTimeout(() => done(false, 'timeout'), timeoutMs);
    s.on('connect', () => s.write('ping'));
    s.on('data', (d) => { got += d; if (got === 'ping') done(true); });
    s.on('error', (e: NodeJS.ErrnoException) => done(false, e.code ?? e.message));
    s.on('close', () => done(got === 'ping', got === 'ping' ? undefined : 'closed'));
  });
}

export class OutsideProbes {
  readonly events: ProbeEvent[] = [];
  readonly health: HealthSample[] = [];
  private timers: NodeJS.Timeout[] = [];

  constructor(private readonly nodes: { name: string; ip: string }[], private readonly nodePort: number, private readonly healthPort = 10256) {}

  start(): void {
    for (const n of this.nodes) {
      this.timers.push(setInterval(() => {
        const t = now();
        void echoOnce(n.ip, this.nodePort).then((r) => this.events.push({ t, probe: `host→${n.name} NodePort`, ok: r.ok, ...(r.detail ? { detail: r.detail } : {}) }));
      }, 200));
      this.timers.push(setInterval(() => {
        const t = now();
        void healthz(n.ip, this.healthPort).then((status) => this.health.push({ t, node: n.name, status }));
      }, 1000));
    }
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
  }
}

export function healthz(ip: string, port: number): Promise<number | 'down'> {
  return new Promise((resolve) => {
    const req = http.get({ host: ip, port, path: '/healthz', timeout: 1000 }, (res) => { res.resume(); resolve(res.statusCode ?? 'down'); });
    req.on('timeout', () => { req.destroy(); });
    req.on('error', () => resolve('down'));
  });
}

/**
 * The time (seconds since the epoch) the NodePort first answered again, polling every 20 ms from
 * `since` for at most timeoutMs: how long tampering kept services down, as closely as from outside.
 */
export async function firstEchoAfter(host: string, port: number, timeoutMs: number): Promise<number | undefined> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const t = now();
    if ((await echoOnce(host, port, 500)).ok) return t;
    await new Promise((r) => setTimeout(r, 20));
  }
  return undefined;
}
