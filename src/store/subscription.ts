// A pull-based consumer of a node state (KPNG's model): the consumer asks for the next batch
// when it has applied the last one; whatever changed meanwhile is coalesced into that batch.
// Its memory is the keys changed since the last batch, never the whole state (a server holds
// one per client: a thousand nodes must not cost a thousand copies of every key).
import type { Item } from '../model/enls';
import type { Batch, Change } from '../sink/sink';

/** What a subscription reads of its store (ItemStore). */
export interface SubscribedStore {
  readonly synced: boolean;
  readonly revision: number;
  get(key: string): Item | undefined;
  hashOf(key: string): string | undefined;
  fullList(): OpList;
  itemList(): OpList;
}

/** Ops by index: an Item is a set, a string the key of a delete. An array is one. */
export interface OpList {
  readonly length: number;
  at(index: number): Item | string | undefined;
  /** As ItemList.sharedBlock (a reset's ops are a state's fullList()). */
  sharedBlock?(index: number): readonly Item[] | undefined;
}

/**
 * A batch in compact form, in key order. A reset's ops are the state's fullList(): read on demand,
 * and as the state was when the batch was taken.
 */
export interface OpsBatch {
  revision: number;
  reset: boolean;
  ops: OpList;
}

export class Subscription {
  /** Keys changed since the consumer's last batch, each with the hash the consumer has (undefined: none). */
  private dirty = new Map<string, string | undefined>();
  private resetPending = true;
  private waiter: (() => void) | null = null;
  private closed = false;

  constructor(private readonly state: SubscribedStore, private readonly onClose: () => void) {}

  /**
   * Keys changed by one commit; `before` is each one's hash before that commit. The first change of
   * a key since the last batch records what the consumer holds: the hash it had before that change.
   */
  markDirty(keys: readonly string[], before: (key: string) => string | undefined): void {
    if (!this.resetPending) for (const k of keys) if (!this.dirty.has(k)) this.dirty.set(k, before(k));
    this.wake();
  }

  /** The consumer lost track (e.g. a failed kernel batch): the next batch is a full reset. */
  requestReset(): void {
    this.resetPending = true;
    this.dirty.clear();
    this.wake();
  }

  /** Something is pending and the source is synced: take() will not be empty. */
  /** The next batch will be a full reset (the first one, or one a consumer asked for). */
  get resetNext(): boolean {
    return this.resetPending;
  }

  get pending(): boolean {
    return !this.closed && this.state.synced && (this.resetPending || this.dirty.size > 0);
  }

  /** Resolves when there is something to take (never before the source is synced). Rejects when closed,
   *  also while the source has not synced yet: a consumer stopped before the first sync (an API server
   *  never reached) must not wait for a sync that will not come. */
  async ready(): Promise<void> {
    while (!this.pending) {
      if (this.closed) throw new Error('subscription closed');
      // Woken by a change, a reset request, close(), or the state becoming synced (synced()).
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  /** The state became synced: a consumer waiting in ready() may now take its first batch. */
  synced(): void {
    this.wake();
  }

  /**
   * Takes the coalesced batch now, compact (possibly with no ops if everything flapped back). A
   * reset's ops are read on demand (a stream sends them over many turns of the event loop).
   */
  takeOps(): OpsBatch {
    return this.takeWith(() => this.state.fullList());
  }

  private takeWith(full: () => OpList): OpsBatch {
    let ops: OpList;
    const reset = this.resetPending;
    if (reset) {
      ops = full();
    } else {
      const changed: (Item | string)[] = [];
      ops = changed;
      for (const key of [...this.dirty.keys()].sort()) {
        const had = this.dirty.get(key);
        const item = this.state.get(key);
        // Came back to what the consumer has (or absent on both sides): nothing to send. The hash is
        // only computed when the consumer had the key.
        if (item === undefined ? had === undefined : had !== undefined && this.state.hashOf(key) === had) continue;
        changed.push(item === undefined ? key : item);
      }
    }
    this.dirty = new Map();
    this.resetPending = false;
    return { revision: this.state.revision, reset, ops };
  }

  /** Takes the coalesced batch now (possibly with no changes if everything flapped back). */
  take(): Batch {
    // A reset is used at once here: the state's array of every item is the quicker read.
    const b = this.takeWith(() => this.state.itemList());
    const changes: Change[] = [];
    for (let i = 0; i < b.ops.length; i++) {
      const o = b.ops.at(i)!;
      changes.push(typeof o === 'string' ? { op: 'delete', key: o } : { op: 'set', key: o.key, item: o });
    }
    return { revision: b.revision, reset: b.reset, changes };
  }

  /** ready() then take(), skipping batches that coalesced to nothing. */
  async next(): Promise<Batch> {
    for (;;) {
      await this.ready();
      const b = this.take();
      if (b.reset || b.changes.length > 0) return b;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}
