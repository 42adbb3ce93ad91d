// One node's ENLS, kept current from a ClusterStore. The items most nodes have alike come from
// SharedItems (one object for all of them); this state holds only the node's own: its node item
// and the items of services that name it. Only the services whose inputs changed are looked at;
// a change of this node's zone or addresses looks at the services that depend on them.
import { NODE_KEY, type Item } from '../model/enls';
import { computeNodeItem, primaryAddresses } from '../model/compute';
import type { ModelNode } from '../model/compute';
import type { ClusterChange, ClusterStore } from './cluster';
import { ItemStore, makeEntry, sameEntry, SHARED_BLOCK, type Entry, type ItemList } from './item-store';
import { SharedItems, toItemKey, type ServiceRecord } from './shared-items';
import { sortedIndexOf } from '../util/sorted';

export { itemHash } from './item-store';

export class NodeState extends ItemStore {
  private readonly unlisten: () => void;
  private readonly shared: SharedItems;
  private view: ModelNode;

  constructor(private readonly cluster: ClusterStore, node: string) {
    super(node);
    this.shared = SharedItems.of(cluster);
    this.view = this.readView();
    this.ownSet(NODE_KEY, this.nodeEntry());
    for (const key of this.shared.namingNode(node)) this.ownSet(key, this.shared.entryFor(this.shared.record(key)!, this.view).entry);
    this.commit([NODE_KEY]); // revision 1: the first state (no subscriber can exist yet)
    this.unlisten = cluster.onChange((c) => this.onClusterChange(c));
    void cluster.whenSynced().then(() => {
      this.noteMissingPodCIDRs(this.ownEntry(NODE_KEY)!.item);
      this.markSynced();
    });
  }

  close(): void {
    this.unlisten();
    this.closeSubscribers();
  }

  override get size(): number { return this.shared.size; }
  override keys(): readonly string[] { return this.shared.keys(); }
  override allKeys(): IterableIterator<string> { return this.shared.keys().values(); }
  override get(key: string): Item | undefined { return this.entry(key)?.item; }
  override hashOf(key: string): string | undefined { return this.entry(key)?.hash; }

  /**
   * The items one by one, merged as they are read (no array of the whole state): a sink may read them
   * with turns for the event loop in between, and then sees the shared items as of the call and its
   * own as they are when read (one no longer its own is read as it is now, or not at all if gone).
   */
  override *items(): Iterable<Item> {
    const keys = this.shared.keys(), recs = this.shared.recordsInOrder();
    const own = super.keys();
    for (let i = 0, j = 0; i < keys.length; i++) {
      let rec = recs[i]!;
      if (j < own.length && own[j] === keys[i]) {
        const e = this.ownEntry(own[j++]!);
        if (e) { yield e.item; continue; }
        const now = this.shared.record(keys[i]!);
        if (!now) continue;
        rec = now;
      }
      yield ((rec.uniform && rec.generic) || this.shared.sharedFor(rec, this.view)).item;
    }
  }

  /**
   * The full state: own entries merged (both lists sorted) into the shared ones, as items() does one
   * at a time. For a reset read at once (Subscription.take), quicker than [...items()].
   */
  override itemList(): Item[] {
    const keys = this.shared.keys(), recs = this.shared.recordsInOrder();
    const own = super.keys(); // exactly the node item and the services that name this node
    const out = new Array<Item>(keys.length);
    for (let i = 0, j = 0; i < keys.length; i++) {
      if (j < own.length && own[j] === keys[i]) out[i] = this.ownEntry(own[j++])!.item;
      else {
        const rec = recs[i]!;
        out[i] = ((rec.uniform && rec.generic) || this.shared.sharedFor(rec, this.view)).item;
      }
    }
    return out;
  }

  /**
   * The full state as it is now, read on demand: the shared keys and records in order (arrays that
   * are replaced, never changed, when a service changes), this node's view, and a copy of its own
   * items by position. A thousand nodes' streams in flight then hold their own items each, not a
   * thousand arrays of every item.
   */
  override fullList(): ItemList {
    const keys = this.shared.keys(), recs = this.shared.recordsInOrder();
    const isOwn = new Uint8Array(keys.length); // the hot path's test: most reads are of shared items
    const ownKeys = super.keys();
    // Few own items (a large cluster: the node, the services with an endpoint here) are kept in a Map
    // and found by binary search; many (a small cluster, where most services have one) in an array
    // filled by one merge pass of the two sorted lists (a search and a Map entry for each would not
    // fit in one slice).
    const sparse = ownKeys.length * 16 < keys.length;
    const own = sparse ? new Map<number, Item>() : undefined;
    const dense = sparse ? undefined : new Array<Item | undefined>(keys.length);
    if (own) {
      for (const key of ownKeys) {
        const i = sortedIndex(keys, key);
        own.set(i, this.ownEntry(key)!.item);
        isOwn[i] = 1;
      }
    } else {
      for (let i = 0, j = 0; i < keys.length && j < ownKeys.length; i++) {
        if (keys[i] !== ownKeys[j]) continue;
        dense![i] = this.ownEntry(ownKeys[j++]!)!.item;
        isOwn[i] = 1;
      }
    }
    const { shared, view } = this;
    const blocks = shared.sharedBlocks();
    return {
      length: keys.length,
      sharedBlock: (i) => {
        if (i % SHARED_BLOCK !== 0 || i < 0 || i + SHARED_BLOCK > keys.length) return undefined;
        for (let j = i; j < i + SHARED_BLOCK; j++) if (isOwn[j]) return undefined;
        return blocks.at(i / SHARED_BLOCK, view);
      },
      at: (i) => {
        if (!(i >= 0 && i < keys.length)) return undefined;
        if (isOwn[i]) return dense ? dense[i] : own!.get(i);
        // sharedFor's own first test, inlined as in itemList(): markedly faster reads, and a full
        // state is one read per service per stream.
        const rec = recs[i]!;
        return ((rec.uniform && rec.generic) || shared.sharedFor(rec, view)).item;
      },
    };
  }

  /** Items are computed by the cluster, never put from outside. */
  override put(): boolean {
    throw new Error('NodeState is computed from its cluster store; put() is not for it');
  }

  /** Whether the item of `key` is this node's own (not shared with other nodes). For tests and figures. */
  isOwn(key: string): boolean { return this.ownEntry(key) !== undefined; }

  /** How many items this node holds itself (the rest are shared). */
  get ownCount(): number { return [...super.allKeys()].length; }

  private entry(key: string): Entry | undefined {
    return this.ownEntry(key) ?? this.sharedEntry(this.shared.record(key), this.view);
  }

  private sharedEntry(rec: ServiceRecord | undefined, view: ModelNode): Entry | undefined {
    return rec && this.shared.entryFor(rec, view).entry;
  }

  private readView(): ModelNode {
    const n = this.cluster.getNode(this.node);
    return { name: this.node, zone: n?.zone ?? '', primary: primaryAddresses(n, this.cluster.modelOptions) };
  }

  private nodeEntry(): Entry {
    const item = computeNodeItem(this.node, this.cluster.getNode(this.node), this.cluster.modelOptions);
    this.noteMissingPodCIDRs(item);
    return makeEntry(item);
  }

  /** NodeCIDR detection without the Node's podCIDRs: said once until they appear (kube-proxy would wait for them). */
  private warnedNoPodCIDRs = false;
  private noteMissingPodCIDRs(item: Item): void {
    if (this.cluster.modelOptions.detectLocalMode !== 'NodeCIDR') return;
    const cidrs = item.node!.podCidrs;
    const missing = cidrs.v4.length + cidrs.v6.length === 0;
    if (missing && !this.warnedNoPodCIDRs && this.cluster.synced) {
      this.cluster.log.warn(`node ${this.node}: --detect-local-mode NodeCIDR, but its Node object has no spec.podCIDRs (yet): `
        + 'its pods are treated as other clients until it has (kube-proxy waits for them at start)');
    }
    this.warnedNoPodCIDRs = missing && (this.warnedNoPodCIDRs || this.cluster.synced);
  }

  private onClusterChange(c: ClusterChange): void {
    this.shared.apply(c);
    const oldView = this.view;
    const before = new Map<string, string | undefined>();
    const changed: string[] = [];
    // Before the state is synced no consumer holds anything (a subscriber's first batch is a reset):
    // changes need no content comparison, so no hashes while the first lists arrive.
    const exact = this.cluster.synced;
    const note = (key: string, was: Entry | undefined, now: Entry | undefined) => {
      if (exact ? sameEntry(was, now) : was === now) return;
      before.set(key, exact ? was?.hash : undefined);
      changed.push(key);
    };

    const keys = new Set<string>();
    for (const key of c.services) keys.add(toItemKey(key));
    if (c.nodes.has(this.node)) {
      const was = this.ownEntry(NODE_KEY)!;
      const now = this.nodeEntry();
      if (was.hash !== now.hash) this.ownSet(NODE_KEY, now);
      note(NODE_KEY, was, now);
      this.view = this.readView();
      const moved = oldView.zone !== this.view.zone || oldView.primary.join() !== this.view.primary.join();
      if (moved) {
        for (const key of this.shared.dependingOnClass()) keys.add(key);
        for (const key of this.shared.namingNode(this.node)) keys.add(key);
      }
    }

    for (const key of keys) {
      const rec = this.shared.record(key);
      if (!exact) {
        // Nothing to compare with, so nothing computed but this node's own items: a shared item is
        // computed when first read, once, instead of at each list event that touches its service
        // (at 1k services a start computed 1.6k items for 1k services).
        if (!rec && !this.ownEntry(key) && !this.shared.recordBefore(c, key)) continue;
        if (rec && this.shared.namesNode(rec, this.view)) this.ownSet(key, this.shared.entryFor(rec, this.view).entry);
        else this.ownDelete(key);
        before.set(key, undefined);
        changed.push(key);
        continue;
      }
      const was = this.ownEntry(key) ?? this.sharedEntry(this.shared.recordBefore(c, key), oldView);
      let now: Entry | undefined;
      if (!rec) {
        this.ownDelete(key);
      } else {
        const e = this.shared.entryFor(rec, this.view);
        now = e.own && was && sameEntry(was, e.entry) ? was : e.entry; // keep the object consumers hold
        if (e.own) this.ownSet(key, now);
        else this.ownDelete(key);
      }
      note(key, was, now);
    }
    changed.sort();
    this.commit(changed, (k) => before.get(k));
  }
}

/** Where `key` is in the sorted `keys` (it must be there: own keys are a subset of the shared ones). */
function sortedIndex(keys: readonly string[], key: string): number {
  const i = sortedIndexOf(keys, key);
  if (i < 0) throw new Error(`node state: own key ${key} is not among the shared keys`);
  return i;
}
