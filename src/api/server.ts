// `kpng ... --to api`: serves every node's ENLS over gRPC (proto/watch.proto).
//  - unix:///run/kpng/kpng.sock by default: mode 0600 (0660 with --socket-group), no TLS needed;
//  - tcp://HOST:PORT only with TLS (--tls-cert/--tls-key), client certificates verified against
//    --tls-ca when given. There is no plain-text TCP mode.
// Limits: requests are tiny (max 4 KiB), a few streams per connection, a bounded number of
// streams in all; a misbehaving stream is closed with an error status, the others go on.
import { promises as fsp } from 'node:fs';
import { Server, ServerCredentials, status, type ServerDuplexStream } from '@grpc/grpc-js';
import type { TlsFiles } from '../util/address';
import type { ClusterStore } from '../store/cluster';
import type { Logger } from '../util/log';
import { parseApiAddress } from '../util/address';
import type { BadRequest, WatchRequest } from './codec';
import { NodeRegistry } from './node-registry';
import { watchService } from './service';
import { WatchSession, type SessionStats } from './session';
import { prepareUnixSocket } from '../util/unix-socket';

export interface ServeApiOptions extends TlsFiles {
  store: ClusterStore;
  log: Logger;
  /** unix:///PATH or tcp://HOST:PORT (port 0: any free port). */
  listen: string;
  /** Unix socket only: mode 0660 and this group (name or gid). */
  socketGroup?: string;
  signal?: AbortSignal;
  /** Streams served at once, all clients together (default 4096). */
  maxStreams?: number;
  /** Streams per client connection (default 16). */
  maxStreamsPerConnection?: number;
  /** Largest request accepted, in bytes (default 4096). */
  maxRequestBytes?: number;
  /** Time a new stream has to send its first request (default 10 s). */
  firstRequestTimeoutMs?: number;
  /** Target size of one OpBatch message (default 64 KiB). */
  chunkBytes?: number;
  /**
   * Send the parts of full states that nodes share compressed (deflated_ops) to clients that accept
   * it (default true). Each shared part is compressed once; nothing is compressed per client.
   */
  deflate?: boolean;
}

export interface ApiServer {
  /** The address clients use (tcp:// with the bound port when port 0 was asked for). */
  address: string;
  /** Per-stream figures. */
  stats(): SessionStats[];
  /** Nodes with at least one client (each has one shared node state). */
  nodes(): string[];
  close(): Promise<void>;
}

async function readTls(what: string, file: string): Promise<Buffer> {
  try {
    return await fsp.readFile(file);
  } catch (e) {
    throw new Error(`${what} ${file}: ${(e as Error).message}`);
  }
}

export async function serveApi(opts: ServeApiOptions): Promise<ApiServer> {
  const { log } = opts;
  const addr = parseApiAddress(opts.listen, true);
  let creds: ServerCredentials;
  if (addr.kind === 'tcp') {
    if (!opts.tlsCert || !opts.tlsKey) {
      throw new Error(`refusing to serve the API on ${opts.listen} without TLS: give --tls-cert and --tls-key (and --tls-ca to require client certificates), or listen on a unix socket`);
    }
    if (opts.socketGroup) log.warn('api: --socket-group applies to unix sockets only; ignored');
    const [cert, key, ca] = await Promise.all([
      readTls('--tls-cert', opts.tlsCert),
      readTls('--tls-key', opts.tlsKey),
      opts.tlsCA ? readTls('--tls-ca', opts.tlsCA) : Promise.resolve(null),
    ]);
    try {
      creds = ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], ca !== null);
    } catch (e) {
      throw new Error(`api: unusable TLS files: ${(e as Error).message}`);
    }
    if (!ca) log.warn(`api: no --tls-ca: any client that reaches ${addr.text} may read every node's state (encrypted, but not authenticated)`);
  } else {
    if (opts.tlsCert || opts.tlsKey || opts.tlsCA) log.warn('api: TLS options do not apply to a unix socket (its file mode protects it); ignored');
    creds = ServerCredentials.createInsecure();
  }

  const server = new Server({
    'grpc.max_receive_message_length': opts.maxRequestBytes ?? 4096,
    'grpc.max_concurrent_streams': opts.maxStreamsPerConnection ?? 16,
    'grpc.keepalive_time_ms': 60_000,
    'grpc.keepalive_timeout_ms': 20_000,
  });
  const registry = new NodeRegistry(opts.store, log);
  const sessions = new Set<WatchSession>();
  const maxStreams = opts.maxStreams ?? 4096;

  server.addService(watchService, {
    Watch: (call: ServerDuplexStream<WatchRequest | BadRequest, Buffer>) => {
      if (sessions.size >= maxStreams) {
        log.warn(`api: refusing a stream from ${call.getPeer()}: ${maxStreams} streams already`);
        call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: `the server already serves ${maxStreams} streams` });
        return;
      }
      const s = new WatchSession(call, {
        log, registry,
        firstRequestTimeoutMs: opts.firstRequestTimeoutMs ?? 10_000,
        chunkBytes: opts.chunkBytes ?? 64 * 1024,
        deflate: opts.deflate ?? true,
        onClose: (x) => sessions.delete(x),
      });
      sessions.add(s);
    },
  });

  const bind = (target: string) => new Promise<number>((resolve, reject) => {
    server.bindAsync(target, creds, (err, port) => (err ? reject(err) : resolve(port)));
  });

  let address: string;
  let cleanup: () => Promise<void> = async () => {};
  if (addr.kind === 'unix') {
    const plan = await prepareUnixSocket(addr.path, { group: opts.socketGroup, log });
    try {
      await bind(`unix://${plan.tmpPath}`);
      cleanup = await plan.publish();
    } catch (e) {
      server.forceShutdown();
      await plan.abandon();
      throw new Error(`cannot serve on ${addr.text}: ${(e as Error).message}`);
    }
    address = addr.text;
  } else {
    let port: number;
    try {
      port = await bind(addr.target);
    } catch (e) {
      server.forceShutdown();
      throw new Error(`cannot serve on ${addr.text}: ${(e as Error).message}`);
    }
    address = `tcp://${addr.host.includes(':') ? `[${addr.host}]` : addr.host}:${port}`;
  }

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      opts.signal?.removeEventListener('abort', onAbort);
      for (const s of [...sessions]) s.finish(status.UNAVAILABLE, 'the server is shutting down', true);
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => { server.forceShutdown(); resolve(); }, 1000);
        server.tryShutdown(() => { clearTimeout(t); resolve(); });
      });
      registry.close();
      await cleanup();
    })();
    return closing;
  };
  const onAbort = () => { void close(); };
  opts.signal?.addEventListener('abort', onAbort, { once: true });

  return {
    address,
    stats: () => [...sessions].map((s) => ({ ...s.stats })),
    nodes: () => registry.nodes,
    close,
  };
}
