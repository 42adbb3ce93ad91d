// `kpng local --api ...`: follows one node's state from a kpng API server (proto/watch.proto).
// WatchClient speaks the protocol: it names its node, receives a batch (Reset?, Set/Delete...,
// Sync), hands it to a handler and asks for the next batch only once the handler is done,
// so the server coalesces whatever changes meanwhile. When the stream breaks (server restart,
// network) it reconnects with jittered exponential backoff and starts over with a Reset.
// startApiSource feeds an ItemStore from it, for the CLI's sinks and the library.
import { Client, credentials, Metadata, status, type ChannelCredentials, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { promises as fsp } from 'node:fs';
import type { TlsFiles } from '../util/address';
import type { Batch, Change } from '../sink/sink';
import { ItemStore } from '../store/item-store';
import { sleep } from '../runner';
import type { Logger } from '../util/log';
import { parseApiAddress } from '../util/address';
import { Backoff, type BackoffOptions } from '../util/backoff';
import type { WatchRequest, WireOp } from './codec';
import { watchService } from './service';

export interface WatchClientOptions extends TlsFiles {
  /** unix:///PATH or tcp://HOST:PORT (TLS). */
  api: string;
  node: string;
  log: Logger;
  signal?: AbortSignal;
  backoff?: BackoffOptions;
  /** Largest message accepted from the server (default 64 MiB). */
  maxMessageBytes?: number;
  /**
   * HTTP/2 flow-control window this client grants the server, per stream and for the connection
   * (default 4 MiB). A full state (megabytes on a large cluster) then flows without waiting for a window
   * update every 64 KiB, which costs the server a wake-up and a write each.
   */
  flowControlWindowBytes?: number;
  /**
   * Ask the server for compressed full states (OpBatch.deflated_ops; default true). A server with
   * many nodes sends what they share compressed once, about 5-8x smaller; the client pays the
   * inflating (a few ms for 10k services).
   */
  acceptDeflate?: boolean;
  /**
   * Give up (run() rejects) after this many failed attempts before the first batch was delivered;
   * default: never (a node agent keeps waiting for its server). `kpng local --once` sets it.
   */
  giveUpAfterFailures?: number;
}

export const DEFAULT_FLOW_CONTROL_WINDOW = 4 * 1024 * 1024;

/** A batch as received: the Sink contract's Batch plus the item count the server announced. */
export interface ReceivedBatch extends Batch { items: number }

export type BatchHandler = (batch: ReceivedBatch) => void | Promise<void>;

export interface ClientStats {
  /** Streams that delivered at least one batch. */
  connects: number;
  /** Attempts that failed or ended (each followed by a backoff). */
  failures: number;
  batches: number;
  resets: number;
  messages: number;
  bytes: number;
  /** Server revision of the last applied batch. */
  revision: number;
  /** The delay before the last reconnection, in ms. */
  lastBackoffMs: number;
}

type Call = ClientDuplexStream<Partial<WatchRequest>, WireOp[]>;

export async function clientCredentials(opts: WatchClientOptions): Promise<ChannelCredentials> {
  const addr = parseApiAddress(opts.api);
  if (addr.kind === 'unix') return credentials.createInsecure();
  if (!!opts.tlsCert !== !!opts.tlsKey) throw new Error('--tls-cert and --tls-key go together (the client certificate and its key)');
  const read = async (what: string, f?: string) => {
    if (!f) return null;
    try { return await fsp.readFile(f); } catch (e) { throw new Error(`${what} ${f}: ${(e as Error).message}`); }
  };
  const [ca, key, cert] = await Promise.all([read('--tls-ca', opts.tlsCA), read('--tls-key', opts.tlsKey), read('--tls-cert', opts.tlsCert)]);
  return credentials.createSsl(ca, key, cert);
}

export class WatchClient {
  readonly stats: ClientStats = { connects: 0, failures: 0, batches: 0, resets: 0, messages: 0, bytes: 0, revision: 0, lastBackoffMs: 0 };
  private readonly ac = new AbortController();
  private call: Call | null = null;
  private client: Client | null = null;
  private running: Promise<void> | null = null;
  private readonly backoff: Backoff;
  private readonly target: string;

  constructor(private readonly opts: WatchClientOptions) {
    this.target = parseApiAddress(opts.api).target;
    this.backoff = new Backoff({ initialMs: 200, ...opts.backoff });
    opts.signal?.addEventListener('abort', () => void this.stop(), { once: true });
  }

  /** Follows the node until stop() (or the signal); resolves then. */
  run(handler: BatchHandler): Promise<void> {
    this.running ??= this.loop(handler);
    return this.running;
  }

  async stop(): Promise<void> {
    this.ac.abort();
    this.call?.cancel();
    this.client?.close();
    await this.running?.catch(() => undefined);
  }

  private async loop(handler: BatchHandler): Promise<void> {
    const { log, api, node } = this.opts;
    const creds = await clientCredentials(this.opts);
    let everDelivered = false;
    let failedBefore = 0;
    while (!this.ac.signal.aborted) {
      const { delivered, reason } = await this.streamOnce(creds, handler);
      if (this.ac.signal.aborted) break;
      this.stats.failures++;
      everDelivered ||= delivered;
      const giveUp = this.opts.giveUpAfterFailures;
      if (!everDelivered && giveUp !== undefined && ++failedBefore >= giveUp) {
        throw new Error(`cannot follow node ${node} on ${api} (${reason}); gave up after ${failedBefore} attempts`);
      }
      if (delivered) this.backoff.reset();
      const delay = this.backoff.next();
      this.stats.lastBackoffMs = delay;
      const msg = `api: ${delivered ? 'lost the stream from' : 'cannot follow node ' + node + ' on'} ${api} (${reason}); reconnecting in ${delay} ms`;
      if (this.backoff.failures > 3) log.warn(msg); else log.info(msg);
      await sleep(delay, this.ac.signal);
    }
  }

  /** One stream: resolves when it ends, telling whether it delivered at least one batch. */
  private streamOnce(creds: ChannelCredentials, handler: BatchHandler): Promise<{ delivered: boolean; reason: string }> {
    const { log, node, api } = this.opts;
    const client = new Client(this.target, creds, {
      'grpc.max_receive_message_length': this.opts.maxMessageBytes ?? 64 * 1024 * 1024,
      'grpc.use_local_subchannel_pool': 1,
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc-node.flow_control_window': this.opts.flowControlWindowBytes ?? DEFAULT_FLOW_CONTROL_WINDOW,
    });
    this.client = client;
    const m = watchService.Watch;
    const deserialize = (b: Buffer): WireOp[] => { this.stats.bytes += b.length; return m.responseDeserialize(b); };
    const call: Call = client.makeBidiStreamRequest(m.path, m.requestSerialize, deserialize, new Metadata());
    this.call = call;
    let delivered = false;
    /** Keys the client holds, to check the item count the server announces at each Sync. */
    const keys = new Set<string>();
    let changes: Change[] = [];
    let reset = false;
    let chain = Promise.resolve();

    return new Promise((resolve) => {
      let ended = false;
      const end = (reason: string) => {
        if (ended) return;
        ended = true;
        call.cancel();
        client.close();
        void chain.finally(() => resolve({ delivered, reason }));
      };
      call.on('data', (ops: WireOp[]) => {
        this.stats.messages++;
        for (const op of ops) {
          switch (op.op) {
            case 'reset': reset = true; changes = []; keys.clear(); break;
            case 'set': changes.push({ op: 'set', key: op.item.key, item: op.item }); keys.add(op.item.key); break;
            case 'delete': changes.push({ op: 'delete', key: op.key }); keys.delete(op.key); break;
            case 'sync': {
              const batch: ReceivedBatch = { revision: op.revision, reset, changes, items: op.items };
              changes = [];
              reset = false;
              const consistent = keys.size === op.items;
              chain = chain.then(() => this.deliver(call, handler, batch, consistent, keys.size, () => {
                if (!delivered) {
                  this.stats.connects++;
                  log.info(`api: following node ${node} on ${api}: ${batch.items} items (revision ${batch.revision})`);
                }
                delivered = true;
              }));
            }
          }
        }
      });
      call.on('error', (e: ServiceError) => end(e.code === status.CANCELLED && this.ac.signal.aborted ? 'stopped' : `${status[e.code] ?? e.code}: ${e.details.replace(/\.? ?Resolution note: ?$/, '')}`));
      call.on('end', () => end('the server ended the stream'));
      call.on('close', () => end('the stream closed'));
      call.write({ node, acceptDeflate: this.opts.acceptDeflate ?? true });
    });
  }

  private async deliver(call: Call, handler: BatchHandler, batch: ReceivedBatch, consistent: boolean, held: number, onFirst: () => void): Promise<void> {
    if (this.ac.signal.aborted) return;
    this.stats.batches++;
    if (batch.reset) this.stats.resets++;
    this.stats.revision = batch.revision;
    let resync = !consistent;
    if (!consistent) this.opts.log.warn(`api: the server says node ${this.opts.node} has ${batch.items} items at revision ${batch.revision}, but the stream gave ${held}; asking for the full state`);
    try {
      await handler(batch);
      onFirst();
    } catch (e) {
      this.opts.log.error(`api: applying revision ${batch.revision} failed (${(e as Error).message}); asking for the full state`);
      resync = true;
      await sleep(this.backoff.next(), this.ac.signal);
    }
    if (this.ac.signal.aborted) return;
    try {
      call.write({ reset: resync, appliedRevision: batch.revision });
    } catch { /* the stream is gone; the loop reconnects */ }
  }
}

/** Applies a batch to an ItemStore (a Reset replaces everything) and commits; the changed keys. */
export function applyBatch(store: ItemStore, batch: Batch): string[] {
  const changed: string[] = [];
  if (batch.reset) {
    const incoming = new Set(batch.changes.map((c) => c.key));
    for (const key of [...store.allKeys()]) if (!incoming.has(key) && store.put(key, null)) changed.push(key);
  }
  for (const c of batch.changes) if (store.put(c.key, c.op === 'set' ? c.item : null)) changed.push(c.key);
  store.commit(changed);
  store.markSynced();
  return changed;
}

export interface ApiSource {
  state: ItemStore;
  client: WatchClient;
  stop(): Promise<void>;
}

/**
 * Follows a node's state from a kpng API server into an ItemStore: put/commit per Sync,
 * synced after the first Sync, a Reset replaces the state (only real differences reach the
 * store's subscribers, so a reconnection after a server restart costs them nothing).
 */
export async function startApiSource(opts: WatchClientOptions & { onGiveUp?: (e: Error) => void }): Promise<ApiSource> {
  // Bad addresses and TLS files fail right away rather than in the background.
  await clientCredentials(opts);
  const state = new ItemStore(opts.node);
  const client = new WatchClient(opts);
  const done = client.run((batch) => {
    const changed = applyBatch(state, batch);
    opts.log.debug(`api: node ${opts.node}: revision ${batch.revision}${batch.reset ? ' (full state)' : ''}: ${changed.length} of ${batch.changes.length} changes were new`);
  });
  done.catch((e) => {
    opts.log.error(`api: ${(e as Error).message}`);
    opts.onGiveUp?.(e as Error);
  });
  return { state, client, stop: () => client.stop() };
}
