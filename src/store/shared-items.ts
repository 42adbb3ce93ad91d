// Service items shared by every node state of one cluster store. A service's item depends on the
// node only through its name, zone and (with source ranges) addresses (model/compute.ts,
// nodeDependence): most nodes fall in one class per service and get the very same item, computed,
// hashed and encoded once. Only nodes the service names (its endpoints' nodes and node hints) get
// items of their own, which their NodeState keeps. So N node states cost the shared items once plus
// what differs per node, not N x services.
import { computeServiceItem, nodeClass, nodeDependence, type ModelNode, type NodeDependence } from '../model/compute';
import { NODE_KEY, serviceKey, type Item } from '../model/enls';
import type { ServiceSpec, SliceSpec } from '../model/objects';
import type { ClusterChange, ClusterStore } from './cluster';
import { makeEntry, SHARED_BLOCK, type Entry } from './item-store';

/** The naming index's answer for a node no service names. */
const NO_KEYS: ReadonlySet<string> = new Set();

/** One version of a service: its inputs (immutable snapshots) and the items of its node classes. */
export class ServiceRecord {
  /** Item per node class other than "" (that one is `generic`), computed on first use; most
   *  services have no other class, and a Map each would cost heap for every service. */
  byClass: Map<string, Entry> | undefined;
  /** Every node it does not name is in one class (no zone hints, no source ranges). */
  readonly uniform: boolean;
  /** The item of class "" (nodes not named, outside the hinted zones), once computed. */
  generic: Entry | undefined;
  /** What of a node its items depend on (NodeDependence's fields, kept here: one object less a service). */
  readonly names: readonly string[];
  readonly zones: readonly string[];
  readonly ranges: NodeDependence['ranges'];
  constructor(readonly svc: ServiceSpec, readonly slices: readonly SliceSpec[], dep: NodeDependence) {
    this.names = dep.names;
    this.zones = dep.zones;
    this.ranges = dep.ranges;
    this.uniform = dep.zones.length === 0 && dep.ranges === null;
  }
}

/**
 * Blocks of SHARED_BLOCK records in one order whose items are the same on every node that holds
 * none of its own there: all of them uniform (every node they do not name gets the generic item).
 * A block's array is made once per order, so it is the same object in every node's full list.
 */
export class SharedBlocks {
  /** Per block: its items, or null when a record there is not uniform (or it is "node"). */
  private readonly cache: (readonly Item[] | null)[] = [];
  constructor(readonly recs: readonly (ServiceRecord | null)[], private readonly shared: SharedItems) {}

  /**
   * Block `b`'s items, asked for by a node (`view`) that holds none of its own there: a uniform
   * record's item for it is then the generic one (computed now if no node asked for it yet).
   */
  at(b: number, view: ModelNode): readonly Item[] | undefined {
    let block: readonly Item[] | null | undefined = this.cache[b];
    if (block === undefined) {
      block = this.build(b * SHARED_BLOCK, view);
      if (block === undefined) return undefined; // the node is named there after all: not cached
      this.cache[b] = block;
    }
    return block ?? undefined;
  }

  private build(from: number, view: ModelNode): Item[] | null | undefined {
    if (from + SHARED_BLOCK > this.recs.length) return null;
    const items = new Array<Item>(SHARED_BLOCK);
    for (let j = 0; j < SHARED_BLOCK; j++) {
      const rec = this.recs[from + j];
      if (!rec?.uniform) return null;
      const e = this.shared.entryFor(rec, view);
      if (e.own) return undefined;
      items[j] = e.entry.item;
    }
    return items;
  }
}

/** What entryFor() gives: the entry, and whether it is this node's own (not shared). */
export interface NodeEntry { entry: Entry; own: boolean }

const perCluster = new WeakMap<ClusterStore, SharedItems>();

export class SharedItems {
  /** Current records by item key ("svc/ns/name"). */
  private readonly records = new Map<string, ServiceRecord>();
  /** Node name -> item keys of the services that name it. */
  private readonly naming = new Map<string, Set<string>>();
  /** Item keys of services whose items depend on the zone or the node's addresses. */
  private readonly classDependent = new Set<string>();
  private sorted: string[] | null = null;
  /** The record of each of `sorted` (null for "node"); rebuilt after any record changed. */
  private sortedRecs: (ServiceRecord | null)[] | null = null;
  /** The shared blocks of sortedRecs (one cache per order). */
  private blocks: SharedBlocks | null = null;
  /** The change last applied, and the records it replaced (read while node states catch up with it). */
  private lastChange: ClusterChange | null = null;
  private replaced = new Map<string, ServiceRecord | undefined>();

  /** The one instance of a cluster store (created on first use). */
  static of(cluster: ClusterStore): SharedItems {
    let s = perCluster.get(cluster);
    if (!s) perCluster.set(cluster, (s = new SharedItems(cluster)));
    return s;
  }

  private constructor(private readonly cluster: ClusterStore) {
    for (const key of cluster.serviceKeys()) this.load(key);
    // Follows the store even while no node state is open (the next one must not see stale records).
    // Registered before any node state's listener, so it runs first on every flush.
    cluster.onChange((c) => this.apply(c));
  }

  /**
   * Brings the records up to a flush of the cluster store. Every node state also calls it first
   * thing in its listener (one created during a flush may be called before this instance's own
   * listener); only the first call for a change does the work.
   */
  apply(c: ClusterChange): void {
    if (c === this.lastChange) return;
    this.lastChange = c;
    this.replaced = new Map();
    for (const key of c.services) {
      const itemKey = toItemKey(key);
      this.replaced.set(itemKey, this.records.get(itemKey));
      this.load(key);
    }
  }

  /** The record of a service as it was before change `c` (the last one applied). */
  recordBefore(c: ClusterChange, itemKey: string): ServiceRecord | undefined {
    if (c !== this.lastChange) throw new Error('shared items: asked about a change that is not the last one');
    return this.replaced.has(itemKey) ? this.replaced.get(itemKey) : this.records.get(itemKey);
  }

  record(itemKey: string): ServiceRecord | undefined { return this.records.get(itemKey); }

  /** "node" and every service's item key, sorted (every node state has exactly these keys). */
  keys(): readonly string[] {
    if (!this.sorted) this.sorted = [NODE_KEY, ...this.records.keys()].sort();
    return this.sorted;
  }

  /** The records in the order of keys() (null at "node"). */
  recordsInOrder(): readonly (ServiceRecord | null)[] {
    if (!this.sortedRecs) this.sortedRecs = this.keys().map((k) => (k === NODE_KEY ? null : this.records.get(k)!));
    return this.sortedRecs;
  }

  /** The blocks of recordsInOrder() that nodes share whole (ItemList.sharedBlock), read on demand. */
  sharedBlocks(): SharedBlocks {
    const recs = this.recordsInOrder();
    if (this.blocks?.recs !== recs) this.blocks = new SharedBlocks(recs, this);
    return this.blocks;
  }

  get size(): number { return this.records.size + 1; }

  /** Item keys of the services that name this node (it has items of its own for them). */
  namingNode(node: string): ReadonlySet<string> { return this.naming.get(node) ?? NO_KEYS; }

  /** Item keys of the services whose items depend on a node's zone or addresses. */
  dependingOnClass(): ReadonlySet<string> { return this.classDependent; }

  /** Whether a service version names the node (the node then has an item of its own for it). */
  namesNode(rec: ServiceRecord, node: ModelNode): boolean { return nodeClass(rec, node) === null; }

  /** The item of a service version for a node: the shared one of its class, or one of its own. */
  entryFor(rec: ServiceRecord, node: ModelNode): NodeEntry {
    const cls = nodeClass(rec, node);
    if (cls === null) return { entry: this.compute(rec, node), own: true };
    let entry = cls === '' ? rec.generic : rec.byClass?.get(cls);
    if (!entry) {
      entry = this.compute(rec, node);
      if (cls === '') rec.generic = entry;
      else (rec.byClass ??= new Map()).set(cls, entry);
    }
    return { entry, own: false };
  }

  /**
   * entryFor() for a node the caller knows the service does not name (a node state's hot path: a
   * full state reads every service; most are uniform and this is one field read).
   */
  sharedFor(rec: ServiceRecord, node: ModelNode): Entry {
    return (rec.uniform && rec.generic) || this.entryFor(rec, node).entry;
  }

  private compute(rec: ServiceRecord, node: ModelNode): Entry {
    return makeEntry(computeServiceItem(rec.svc, rec.slices, node, this.cluster.modelOptions));
  }

  /** (Re)reads one service ("ns/name") from the cluster store. */
  private load(key: string): void {
    const itemKey = toItemKey(key);
    const old = this.records.get(itemKey);
    this.sortedRecs = null;
    if (old) for (const n of old.names) this.unname(n, itemKey);
    const svc = this.cluster.getService(key);
    if (!svc) {
      if (old) this.sorted = null;
      this.records.delete(itemKey);
      this.classDependent.delete(itemKey);
      return;
    }
    const slices = this.cluster.slicesOf(key);
    const rec = new ServiceRecord(svc, slices, nodeDependence(svc, slices));
    if (!old) this.sorted = null;
    this.records.set(itemKey, rec);
    for (const n of rec.names) {
      let s = this.naming.get(n);
      if (!s) this.naming.set(n, (s = new Set()));
      s.add(itemKey);
    }
    if (rec.zones.length > 0 || rec.ranges) this.classDependent.add(itemKey);
    else this.classDependent.delete(itemKey);
  }

  private unname(node: string, itemKey: string): void {
    const s = this.naming.get(node);
    if (!s) return;
    s.delete(itemKey);
    if (s.size === 0) this.naming.delete(node);
  }
}


/** "ns/name" (cluster store key) to "svc/ns/name" (item key). */
export function toItemKey(key: string): string {
  const i = key.indexOf('/');
  return serviceKey(key.slice(0, i), key.slice(i + 1));
}
