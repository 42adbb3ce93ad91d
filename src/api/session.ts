// One client's Watch stream on the server. The pull model: the client's first request names
// its node; the server answers with one batch (Reset?, Set/Delete..., Sync) and then waits
// for the next request, sent by the client once it has applied the batch. Changes made
// meanwhile accumulate in the subscription as a set of dirty keys (at most one per item) and
// go out coalesced in the next batch, so a slow client costs a bounded amount of memory:
// its subscription (keys and hashes it holds), one batch in flight, and the stream's buffer.
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import type { ItemStore } from '../store/item-store';
import type { Subscription } from '../store/subscription';
import type { Logger } from '../util/log';
import { encodeBatch, isBadRequest, type BadRequest, type WatchRequest } from './codec';
import type { NodeEntry, NodeRegistry } from './node-registry';

export type WatchCall = ServerDuplexStream<WatchRequest | BadRequest, Buffer>;

/** Node names are DNS subdomains (kpng also accepts upper case, for hostnames). */
const NODE_NAME = /^[A-Za-z0-9]([-A-Za-z0-9._]{0,251}[A-Za-z0-9])?$/;

export interface SessionStats {
  id: number;
  peer: string;
  node: string;
  /** Batches sent and acknowledged by a later request. */
  batches: number;
  messages: number;
  bytes: number;
  /** The client asked for a batch that is not sent yet (false: it holds the last one). */
  requested: boolean;
  appliedRevision: number;
}

export interface SessionOptions {
  log: Logger;
  registry: NodeRegistry;
  /** Time a client has to send its first request. */
  firstRequestTimeoutMs: number;
  chunkBytes: number;
  /** Send full states' shared parts compressed to clients that accept it. */
  deflate: boolean;
  onClose: (s: WatchSession) => void;
}

let nextId = 1;

export class WatchSession {
  readonly id = nextId++;
  private entry: NodeEntry | null = null;
  private sub: Subscription | null = null;
  private store: ItemStore | null = null;
  private unlistenSwitch: (() => void) | null = null;
  private requested = false;
  /** The client accepts deflated_ops (its first request says so). */
  private deflate = false;
  private sending = false;
  private closed = false;
  private wake: (() => void) | null = null;
  private firstTimer: NodeJS.Timeout | null;
  readonly stats: SessionStats;

  constructor(private readonly call: WatchCall, private readonly opts: SessionOptions) {
    this.stats = { id: this.id, peer: safePeer(call), node: '', batches: 0, messages: 0, bytes: 0, requested: false, appliedRevision: 0 };
    call.on('data', (r: WatchRequest | BadRequest) => this.onRequest(r));
    call.on('end', () => this.finish(status.OK, 'client closed its side'));
    call.on('cancelled', () => this.close());
    call.on('close', () => this.close());
    call.on('error', () => this.close());
    // Checked once more after pending I/O: a server busy with many streams may run this timer
    // before reading a request that arrived in time.
    this.firstTimer = setTimeout(() => setImmediate(() => {
      if (!this.entry) this.finish(status.DEADLINE_EXCEEDED, `no request within ${opts.firstRequestTimeoutMs} ms`);
    }), opts.firstRequestTimeoutMs);
  }

  private onRequest(r: WatchRequest | BadRequest): void {
    if (this.closed) return;
    if (isBadRequest(r)) return this.finish(status.INVALID_ARGUMENT, `malformed WatchRequest: ${r.bad}`);
    if (!this.entry) {
      if (!r.node) return this.finish(status.INVALID_ARGUMENT, 'the first WatchRequest must name a node');
      if (!NODE_NAME.test(r.node)) return this.finish(status.INVALID_ARGUMENT, `${JSON.stringify(r.node.slice(0, 64))} is not a node name`);
      if (this.firstTimer) clearTimeout(this.firstTimer);
      this.firstTimer = null;
      this.stats.node = r.node;
      this.deflate = r.acceptDeflate && this.opts.deflate;
      this.entry = this.opts.registry.acquire(r.node);
      this.store = this.entry.store;
      this.sub = this.store.subscribe();
      this.unlistenSwitch = this.entry.onSwitch(() => this.resubscribe());
      this.opts.log.debug(`api: client ${this.id} (${this.stats.peer}) follows node ${r.node}`);
      this.requested = true;
      void this.pump();
      return;
    }
    if (r.node && r.node !== this.entry.node) return this.finish(status.INVALID_ARGUMENT, `this stream follows node ${this.entry.node}, not ${r.node}`);
    if (this.requested || this.sending) return this.finish(status.FAILED_PRECONDITION, 'a WatchRequest came before the previous batch was sent in full');
    this.stats.batches++;
    this.stats.appliedRevision = r.appliedRevision;
    if (r.reset) this.sub!.requestReset();
    this.requested = true;
    this.kick();
  }

  private resubscribe(): void {
    if (this.closed || !this.entry) return;
    this.sub?.close();
    this.store = this.entry.store;
    this.sub = this.store.subscribe();
    this.kick();
  }

  private kick(): void {
    this.stats.requested = this.requested;
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  private waitKick(): Promise<void> {
    return new Promise((r) => (this.wake = r));
  }

  /** Sends a batch each time the client asked for one and something is pending. */
  private async pump(): Promise<void> {
    while (!this.closed) {
      const sub = this.sub!;
      if (!this.requested) { await this.waitKick(); continue; }
      try {
        await Promise.race([sub.ready(), this.waitKick()]);
      } catch {
        // The subscription was closed: resubscribed (loop again) or the state went away.
        if (sub === this.sub && !this.closed) this.finish(status.UNAVAILABLE, 'the node state was closed');
        continue;
      }
      if (this.closed || sub !== this.sub || !sub.pending) continue;
      const batch = sub.takeOps();
      if (!batch.reset && batch.ops.length === 0) continue;
      this.requested = false;
      this.stats.requested = false;
      this.sending = true;
      try {
        const msgs = encodeBatch(batch, this.store!.size, this.opts.chunkBytes, this.deflate);
        let cur = msgs.next();
        while (!cur.done && !this.closed) {
          const msg = cur.value;
          cur = msgs.next();
          // Once the last message (with Sync) is handed over the client may ask again.
          if (cur.done) this.sending = false;
          this.stats.messages++;
          this.stats.bytes += msg.length;
          if (!this.call.write(msg)) await this.drained();
        }
      } finally {
        this.sending = false;
      }
    }
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => { this.call.off('drain', done); this.call.off('close', done); this.call.off('error', done); resolve(); };
      this.call.on('drain', done);
      this.call.on('close', done);
      this.call.on('error', done);
    });
  }

  /** Ends the stream with a status (an error status concerns this stream only). */
  finish(code: status, details: string, quiet = false): void {
    if (this.closed) return;
    if (code !== status.OK && !quiet) this.opts.log.warn(`api: client ${this.id} (${this.stats.peer}${this.stats.node ? `, node ${this.stats.node}` : ''}): ${details}; closing its stream`);
    this.close();
    try {
      if (code === status.OK) this.call.end();
      else this.call.emit('error', { code, details });
    } catch { /* the stream is gone already */ }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.firstTimer) clearTimeout(this.firstTimer);
    this.unlistenSwitch?.();
    this.sub?.close();
    if (this.entry) this.opts.registry.release(this.entry);
    this.entry = null;
    this.kick();
    this.opts.onClose(this);
  }
}

function safePeer(call: WatchCall): string {
  try { return call.getPeer(); } catch { return 'unknown'; }
}
