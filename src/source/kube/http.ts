// The HTTP(S) transport of the kube source. Connection settings and credentials come from the
// kubeconfig through @kubernetes/client-node (`applyOptions` = KubeConfig.applyToHTTPSOptions:
// CA, client certificate, bearer token or exec/OIDC plugin, proxy agent), applied again on every
// request so that rotating tokens are picked up. This file itself does not load the library, so
// the reflector can be tested against a plain HTTP server.
import * as http from 'node:http';
import * as https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import { Reachability, tcpProbe } from './reachability';

export type ApplyOptions = (opts: https.RequestOptions) => Promise<void>;

/** What client-go's rest_client metrics see of each request to the API server (metrics/rest-client.ts). */
export interface RequestObserver {
  /** A request's outcome: the HTTP status, or '<error>' when no response came (client-go's RequestResult). */
  result(code: string, method: string, host: string): void;
  /** A request's time until its response was read whole, or it failed (client-go's RequestLatency).
   *  Not for watches: a watch is a stream open for minutes, and client-go does not time them either. */
  latency(verb: string, host: string, seconds: number): void;
  /** A request's body size as sent (client-go's RequestSize): kpng only GETs, with no body. Not for
   *  watches, which client-go does not measure either. */
  requestBytes?(verb: string, host: string, bytes: number): void;
  /** A whole response body's size (client-go's ResponseSize): not for watches, which client-go streams unmeasured. */
  responseBytes?(verb: string, host: string, bytes: number): void;
  /** The time a new connection spent resolving the server's name, labelled with the name (none for an IP
   *  address or a reused connection). */
  resolved?(host: string, seconds: number): void;
  /** The wait for the client-side rate limit in front of the transport (client-go's RateLimiterLatency). */
  rateLimited?(verb: string, host: string, seconds: number): void;
  /** A transport was made (client-go's transport cache counts its creations). */
  transportCreated?(): void;
}

/** Who is told a response's size once readBody() has read it whole (set for every response but watches'). */
const bodySizeSeen = new WeakMap<http.IncomingMessage, (bytes: number) => void>();

/** `watch=1` / `watch=true` in a request's query. */
const isWatch = (url: URL): boolean => { const w = url.searchParams.get('watch'); return w !== null && w !== '0' && w !== 'false'; };

export interface Transport {
  /** The API server's URL (for logs). */
  readonly server: string;
  /** GET `path` (with its query) asking for `accept` (default JSON); resolves once the response headers arrived. */
  get(path: string, signal: AbortSignal, accept?: string): Promise<http.IncomingMessage>;
  /** Whether the server can be reached at all (reflectors retry as soon as it can again); absent
   *  when connections go through a proxy, which a direct probe would not test. */
  readonly reachability?: Reachability;
}

export interface TransportOptions {
  /** A new connection (TCP) not made by then fails the request. Default 10 s. */
  connectTimeoutMs?: number;
}

/** KPNG_KUBE_CONNECT_TIMEOUT_MS, a test knob beside index.ts's tuningFromEnv (not part of the CLI). */
function connectTimeoutFromEnv(): number | undefined {
  const n = Number(process.env.KPNG_KUBE_CONNECT_TIMEOUT_MS);
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

/** A request's connection was not made (the server is unreachable, as opposed to answering badly). */
export class ConnectError extends Error {}

/** No proxy in the way: the default agents, or one the kubeconfig's TLS settings made (a proxy's agent subclasses them). */
const isDirectAgent = (agent: unknown): boolean => agent === undefined || agent === false || (agent as object).constructor === https.Agent || (agent as object).constructor === http.Agent;

/** The host label as client-go writes it: the server's host[:port] as the kubeconfig spells it (URL
 *  would drop a default port that client-go keeps, e.g. in-cluster's :443). */
export function hostLabel(server: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?([^/?#]+)/i.exec(server)?.[1] ?? new URL(server).host;
}

export function createTransport(server: string, applyOptions: ApplyOptions, userAgent = 'kpng', observer?: RequestObserver, topts: TransportOptions = {}): Transport {
  const base = new URL(server);
  const connectTimeoutMs = topts.connectTimeoutMs ?? connectTimeoutFromEnv() ?? 10_000;
  const port = Number(base.port) || (base.protocol === 'http:' ? 80 : 443);
  const reachability = new Reachability(tcpProbe(base.hostname.replace(/^\[(.*)\]$/, '$1'), port));
  let direct = true;
  // A server URL may carry a path prefix (some proxies in front of API servers use one).
  const prefix = base.pathname.replace(/\/+$/, '');
  const mod = base.protocol === 'http:' ? http : https;
  const host = hostLabel(server);
  observer?.transportCreated?.();
  return {
    server,
    get reachability() { return direct ? reachability : undefined; },
    async get(path: string, signal: AbortSignal, accept = 'application/json'): Promise<http.IncomingMessage> {
      const opts: https.RequestOptions = { method: 'GET', headers: { Accept: accept, 'User-Agent': userAgent } };
      const t0 = performance.now();
      await applyOptions(opts);
      direct = isDirectAgent(opts.agent);
      const url = new URL(base.origin + prefix + path);
      const timed = !isWatch(url);
      const done = () => { if (timed) observer?.latency('GET', host, (performance.now() - t0) / 1000); };
      return new Promise((resolve, reject) => {
        let responded = false;
        const req = mod.request(url, { ...opts, signal }, (res) => {
          responded = true;
          observer?.result(String(res.statusCode ?? 0), 'GET', host);
          if (timed && observer?.responseBytes) bodySizeSeen.set(res, (n) => observer.responseBytes!('GET', host, n));
          // 'close' comes once the body is read whole, or the response is abandoned.
          res.once('close', done);
          resolve(res);
        });
        let connecting = false;
        let connectTimer: NodeJS.Timeout | undefined;
        req.on('error', (e) => {
          clearTimeout(connectTimer);
          // An error after the response (a dropped body) is the response's, already counted.
          if (!responded) { observer?.result('<error>', 'GET', host); done(); }
          if (connecting && direct) reachability.markDown();
          reject(connecting && !(e instanceof ConnectError) && !signal.aborted ? new ConnectError(`cannot connect to ${host}: ${e.message}`) : e);
        });
        // Keepalive probes notice a peer that vanished without closing (the watchdog is the backstop).
        req.on('socket', (s) => {
          s.setKeepAlive(true, 15_000);
          // A connection that cannot be made fails in connectTimeoutMs, not when the kernel gives up
          // its SYN retransmissions (~2 min) or the caller's whole-request bound runs out.
          if (s.connecting) {
            connecting = true;
            connectTimer = setTimeout(() => req.destroy(new ConnectError(`cannot connect to ${host} within ${connectTimeoutMs / 1000} s`)), connectTimeoutMs);
            s.once('connect', () => { connecting = false; clearTimeout(connectTimer); });
          }
          // A new connection to a name resolves it first ('lookup', failed or not); an IP address or a
          // reused connection does not. client-go's label is the name alone, without the port.
          if (observer?.resolved && s.connecting) {
            const t1 = performance.now();
            s.once('lookup', (_err: Error | null, _address: string, _family: number, name: string) => observer.resolved!(name || base.hostname, (performance.now() - t1) / 1000));
          }
        });
        req.once('close', () => clearTimeout(connectTimer));
        req.end();
        if (timed) observer?.requestBytes?.('GET', host, 0); // a GET has no body
      });
    },
  };
}

/** Reads a whole response body (bounded). */
export function readBody(res: http.IncomingMessage, maxBytes = 1 << 30): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes) {
        res.destroy(new Error(`response larger than ${maxBytes} bytes`));
        return;
      }
      chunks.push(c);
    });
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
    res.on('close', () => { if (!res.complete) reject(new Error('connection closed before the response ended')); });
    res.on('end', () => { bodySizeSeen.get(res)?.(size); resolve(Buffer.concat(chunks, size)); });
  });
}

/** A whole response body as JSON (undefined when empty). */
export function parseJsonBody(res: http.IncomingMessage, body: Buffer): unknown {
  const text = body.toString('utf8');
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    throw new Error(`HTTP ${res.statusCode}: response is not JSON: ${text.slice(0, 200)}`);
  }
}

/** The media type of a response, lower case, without parameters ("" when absent). */
export function mediaType(res: http.IncomingMessage): string {
  return (res.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

/** Splits a byte stream into lines (a watch response carries one JSON event per line). */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private rest = '';

  constructor(private readonly maxLine = 64 << 20) {}

  /** The complete lines in `chunk` (plus what was pending); throws on an oversized line. */
  push(chunk: Buffer): string[] {
    const text = this.rest + this.decoder.write(chunk);
    const lines = text.split('\n');
    this.rest = lines.pop() ?? '';
    if (this.rest.length > this.maxLine) throw new Error(`watch event longer than ${this.maxLine} bytes`);
    return lines.filter((l) => l.trim() !== '');
  }

  /** What remains at the end of the stream (a last line without a newline). */
  end(): string[] {
    const last = (this.rest + this.decoder.end()).trim();
    this.rest = '';
    return last ? [last] : [];
  }
}
