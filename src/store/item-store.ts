// Keyed ENLS items with content hashes, a revision, and pull-based subscribers. NodeState
// fills one from the cluster; the `local` source fills one from another kpng's stream.
import { createHash } from 'node:crypto';
import { encodeItem, type Item } from '../model/enls';
import type { StateView } from '../sink/sink';
import { Subscription } from './subscription';

interface Entry { item: Item; hash: string }

export function itemHash(item: Item): string {
  return createHash('sha1').update(encodeItem(item)).digest('base64');
}

export class ItemStore implements StateView {
  private readonly entries = new Map<string, Entry>();
  private sortedKeys: string[] | null = null;
  private rev = 0;
  private readonly subs = new Set<Subscription>();
  private syncedFlag = false;
  private readonly syncedWaiters: (() => void)[] = [];

  constructor(readonly node: string) {}

  get revision(): number { return this.rev; }
  get size(): number { return this.entries.size; }
  get synced(): boolean { return this.syncedFlag; }

  /** The producer has delivered a complete state: subscribers may now get batches. */
  markSynced(): void {
    if (this.syncedFlag) return;
    this.syncedFlag = true;
    for (const w of this.syncedWaiters.splice(0)) w();
  }

  whenSynced(): Promise<void> {
    return this.syncedFlag ? Promise.resolve() : new Promise((r) => this.syncedWaiters.push(r));
  }

  get(key: string): Item | undefined { return this.entries.get(key)?.item; }
  hashOf(key: string): string | undefined { return this.entries.get(key)?.hash; }

  *items(): Iterable<Item> {
    for (const k of this.keys()) yield this.entries.get(k)!.item;
  }

  keys(): readonly string[] {
    if (!this.sortedKeys) this.sortedKeys = [...this.entries.keys()].sort();
    return this.sortedKeys;
  }

  /** A pull-based consumer of this state's changes. */
  subscribe(): Subscription {
    const sub = new Subscription(this, () => this.subs.delete(sub));
    this.subs.add(sub);
    return sub;
  }

  /** Store an item (null deletes); true when the state changed. Call commit() with the changed keys. */
  put(key: string, item: Item | null): boolean {
    const prev = this.entries.get(key);
    if (!item) {
      if (!prev) return false;
      this.entries.delete(key);
      this.sortedKeys = null;
      return true;
    }
    const hash = itemHash(item);
    if (prev?.hash === hash) return false;
    if (!prev) this.sortedKeys = null;
    this.entries.set(key, { item, hash });
    return true;
  }

  /** Ends a round of put()s: a new revision when anything changed, and subscribers are told. */
  commit(changed: readonly string[]): void {
    if (changed.length === 0) return;
    this.rev++;
    for (const s of this.subs) s.markDirty(changed);
  }

  /** Keys currently held (for a producer that replaces the whole state). */
  allKeys(): IterableIterator<string> { return this.entries.keys(); }

  closeSubscribers(): void {
    for (const s of [...this.subs]) s.close();
  }
}
