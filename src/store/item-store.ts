// Keyed ENLS items with content hashes, a revision, and pull-based subscribers. NodeState
// fills one from the cluster; the `local` source fills one from another kpng's stream.
import { hash } from 'node:crypto';
import type { Item } from '../model/enls';
import type { StateView } from '../sink/sink';
import { Subscription } from './subscription';

/** How many items a shared block holds (ItemList.sharedBlock). */
export const SHARED_BLOCK = 16;

/** Items by index (an array is one). */
export interface ItemList {
  readonly length: number;
  at(index: number): Item | undefined;
  /**
   * The SHARED_BLOCK items from `index` (a multiple of SHARED_BLOCK) as one array, when they are the
   * items every node holding none of its own there has: the same array object for all those nodes'
   * lists, so that their encoding can be cached by it (api/codec.ts). Undefined otherwise: read them
   * with at().
   */
  sharedBlock?(index: number): readonly Item[] | undefined;
}

/** A stored item and its hash. Immutable: NodeStates share one entry for an item alike on many nodes. */
export interface Entry { readonly item: Item; readonly hash: string }

/**
 * A digest of an item's content, to compare two versions of it. Hashed from its JSON text, not its
 * protobuf encoding: JSON.stringify is native code (quick warm or not), while protobufjs's encoder
 * is JS that is as quick only once compiled. Under churn on a small cluster it mostly is not, and
 * encoding for the hash showed up as a large share of kpng's main thread in CPU profiles. Items of
 * one state are built with one property order (the model,
 * or normalizeItem), so equal content gives equal text.
 */
export function itemHash(item: Item): string {
  return hash('sha1', JSON.stringify(item), 'base64');
}

/**
 * The hash is computed when first asked for: it only serves to compare two versions of an item, and
 * most items never get a second version (hashing every item up front spent a noticeable part of a
 * small cluster's start on hashes nothing read).
 */
class LazyEntry implements Entry {
  private h: string | undefined;
  constructor(readonly item: Item) {}
  get hash(): string { return (this.h ??= itemHash(this.item)); }
}

export function makeEntry(item: Item): Entry {
  return new LazyEntry(item);
}

/** Same content (absent on both sides counts as the same); hashes only when both are there. */
export function sameEntry(a: Entry | undefined, b: Entry | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return a.hash === b.hash;
}

export class ItemStore implements StateView {
  private readonly entries = new Map<string, Entry>();
  private sortedKeys: string[] | null = null;
  /** For the keys put() since the last commit: their hash before the first put (undefined: absent). */
  private readonly hashesBefore = new Map<string, string | undefined>();
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
    for (const s of this.subs) s.synced();
  }

  whenSynced(): Promise<void> {
    return this.syncedFlag ? Promise.resolve() : new Promise((r) => this.syncedWaiters.push(r));
  }

  get(key: string): Item | undefined { return this.entries.get(key)?.item; }
  hashOf(key: string): string | undefined { return this.entries.get(key)?.hash; }

  *items(): Iterable<Item> {
    for (const k of this.keys()) yield this.get(k)!;
  }

  /** Every item in key order, as an array. */
  itemList(): Item[] {
    return [...this.items()];
  }

  /**
   * Every item in key order as it is now, for a full batch that is streamed while the state goes on
   * changing: later changes do not show in it. Here an array; a NodeState reads its shared items on
   * demand instead of holding an array of every item for each stream in flight.
   */
  fullList(): ItemList {
    return this.itemList();
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
      this.noteBefore(key, prev);
      this.ownDelete(key);
      return true;
    }
    const entry = makeEntry(item);
    if (sameEntry(prev, entry)) return false;
    this.noteBefore(key, prev);
    this.ownSet(key, entry);
    return true;
  }

  private noteBefore(key: string, prev: Entry | undefined): void {
    if (!this.hashesBefore.has(key)) this.hashesBefore.set(key, prev?.hash);
  }

  /**
   * Ends a round of changes: a new revision when anything changed, and subscribers are told. `before`
   * gives each changed key's hash before the round (default: as put() recorded it), so a subscriber
   * can drop a change that came back to what its consumer already has.
   */
  commit(changed: readonly string[], before?: (key: string) => string | undefined): void {
    const recorded = this.hashesBefore;
    if (changed.length > 0) {
      this.rev++;
      const was = before ?? ((k: string) => recorded.get(k));
      for (const s of this.subs) s.markDirty(changed, was);
    }
    recorded.clear();
  }

  /** Keys currently held (for a producer that replaces the whole state). */
  allKeys(): IterableIterator<string> { return this.entries.keys(); }

  closeSubscribers(): void {
    for (const s of [...this.subs]) s.close();
  }

  /** For subclasses that keep part of their state elsewhere: the entries this store holds itself. */
  protected ownEntry(key: string): Entry | undefined { return this.entries.get(key); }
  protected ownSet(key: string, entry: Entry): void {
    if (!this.entries.has(key)) this.sortedKeys = null;
    this.entries.set(key, entry);
  }
  protected ownDelete(key: string): void {
    if (this.entries.delete(key)) this.sortedKeys = null;
  }
}
