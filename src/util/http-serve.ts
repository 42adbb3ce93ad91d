// Small HTTP server plumbing shared by /metrics, /healthz and the health-check node ports: kube-proxy's
// bind address syntax, listening with a retry, and closing without waiting for idle keep-alive clients.
import http from 'node:http';
import { isIP } from 'node:net';
import type { Logger } from './log';

export interface BindAddress { host: string; port: number }

/**
 * "IP:PORT", "[IPv6]:PORT" or a bare IP (then `defaultPort`), as kube-proxy's --metrics-bind-address and
 * --healthz-bind-address. Port 0 picks a free port (tests). Throws with a message naming `what`.
 */
export function parseBindAddress(text: string, defaultPort: number, what: string): BindAddress {
  const t = text.trim();
  const bad = () => new Error(`${what}: ${JSON.stringify(text)} is not IP:PORT (e.g. 0.0.0.0:${defaultPort} or [::]:${defaultPort})`);
  if (isIP(t)) return { host: t, port: defaultPort };
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(t) ?? /^([^:]+):(\d+)$/.exec(t);
  if (!m || !isIP(m[1])) throw bad();
  const port = Number(m[2]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw bad();
  return { host: m[1], port };
}

export const formatAddress = (host: string, port: number): string => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** Resolves with the bound address, rejects with the listen error (EADDRINUSE, EADDRNOTAVAIL...). */
export function listen(server: http.Server, addr: BindAddress, ipv6Only = false): Promise<BindAddress> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => { server.off('listening', onListening); reject(e); };
    const onListening = () => {
      server.off('error', onError);
      const a = server.address();
      resolve(typeof a === 'object' && a ? { host: a.address, port: a.port } : addr);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen({ host: addr.host, port: addr.port, ipv6Only, exclusive: true });
  });
}

/** Errors of an IPv6 socket on a kernel without IPv6 (booted with ipv6.disable=1, or no IPv6 at all). */
const NO_IPV6 = new Set(['EAFNOSUPPORT', 'EADDRNOTAVAIL', 'EPROTONOSUPPORT']);

/**
 * Listens as kube-proxy does: 0.0.0.0 means every address of both families (Go's listener opens one
 * dual-stack socket for it, and a kubelet probing a hostNetwork pod on an IPv6 or dual-stack node
 * connects to its IPv6 address), on IPv4 alone when the kernel has no IPv6. Any other address as given.
 */
export async function listenLikeKubeProxy(server: http.Server, addr: BindAddress): Promise<BindAddress> {
  if (addr.host !== '0.0.0.0') return listen(server, addr);
  try {
    return await listen(server, { host: '::', port: addr.port });
  } catch (e) {
    if (!NO_IPV6.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
    return listen(server, addr);
  }
}

export async function closeServer(server: http.Server): Promise<void> {
  if (!server.listening) return;
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A long-lived server (metrics, healthz): listens, and when that fails either throws (hardFail, as
 *  kube-proxy's bindAddressHardFail) or logs and retries every `retryMs` until it binds or is stopped. */
export class RetryingServer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  bound: BindAddress | undefined;

  constructor(readonly name: string, readonly server: http.Server, readonly addr: BindAddress, private readonly log: Logger, private readonly retryMs = 5000) {}

  async start(hardFail: boolean): Promise<void> {
    try {
      this.bound = await listenLikeKubeProxy(this.server, this.addr);
      const both = this.addr.host === '0.0.0.0' && this.bound.host === '::' ? ' (every IPv4 and IPv6 address)' : '';
      this.log.info(`${this.name}: serving on http://${formatAddress(this.bound.host, this.bound.port)}${both}`);
    } catch (e) {
      const msg = `${this.name}: cannot listen on ${formatAddress(this.addr.host, this.addr.port)}: ${(e as Error).message}`;
      if (hardFail) throw new Error(msg);
      this.log.error(`${msg}; retrying every ${this.retryMs / 1000}s`);
      this.timer = setTimeout(() => { if (!this.stopped) void this.start(false); }, this.retryMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await closeServer(this.server);
  }
}
