// A pull-based consumer of a node state (KPNG's model): the consumer asks for the next batch
// when it has applied the last one; whatever changed meanwhile is coalesced into that batch.
import type { Batch, Change } from '../sink/sink';
import type { ItemStore } from './item-store';

export class Subscription {
  /** Keys changed since the consumer's last batch. */
  private dirty = new Set<string>();
  /** Hash of each item as the consumer last received it. */
  private readonly known = new Map<string, string>();
  private resetPending = true;
  private waiter: (() => void) | null = null;
  private closed = false;

  constructor(private readonly state: ItemStore, private readonly onClose: () => void) {}

  markDirty(keys: readonly string[]): void {
    for (const k of keys) this.dirty.add(k);
    this.wake();
  }

  /** The consumer lost track (e.g. a failed kernel batch): the next batch is a full reset. */
  requestReset(): void {
    this.resetPending = true;
    this.wake();
  }

  /** Something is pending and the source is synced: take() will not be empty. */
  get pending(): boolean {
    return !this.closed && this.state.synced && (this.resetPending || this.dirty.size > 0);
  }

  /** Resolves when there is something to take (never before the source is synced). Rejects when closed. */
  async ready(): Promise<void> {
    await this.state.whenSynced();
    while (!this.pending) {
      if (this.closed) throw new Error('subscription closed');
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  /** Takes the coalesced batch now (possibly with no changes if everything flapped back). */
  take(): Batch {
    const changes: Change[] = [];
    const reset = this.resetPending;
    if (reset) {
      this.known.clear();
      for (const item of this.state.items()) {
        changes.push({ op: 'set', key: item.key, item });
        this.known.set(item.key, this.state.hashOf(item.key)!);
      }
    } else {
      for (const key of [...this.dirty].sort()) {
        const item = this.state.get(key);
        if (item) {
          const hash = this.state.hashOf(key)!;
          if (this.known.get(key) === hash) continue;
          this.known.set(key, hash);
          changes.push({ op: 'set', key, item });
        } else if (this.known.delete(key)) {
          changes.push({ op: 'delete', key });
        }
      }
    }
    this.dirty = new Set();
    this.resetPending = false;
    return { revision: this.state.revision, reset, changes };
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
