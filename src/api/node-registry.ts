// One served state per requested node, shared by all of that node's clients, created on
// demand and dropped when its last client leaves. A node the cluster does not know gets an
// empty state (so a typo or a node not yet registered is quiet, not an error loop); when the
// Node object appears (or goes away) the entry switches stores and its clients get a Reset.
import type { ClusterStore } from '../store/cluster';
import { ItemStore } from '../store/item-store';
import { NodeState } from '../store/node-state';
import type { Logger } from '../util/log';

export class NodeEntry {
  private nodeState: NodeState | null = null;
  private empty: ItemStore | null = null;
  private readonly switchListeners = new Set<() => void>();
  private readonly unlisten: () => void;
  refs = 0;

  constructor(readonly node: string, private readonly cluster: ClusterStore, private readonly log: Logger) {
    this.update();
    this.unlisten = cluster.onChange((c) => { if (c.nodes.has(node)) this.update(); });
  }

  /** The store clients of this node subscribe to now. */
  get store(): ItemStore { return (this.nodeState ?? this.empty)!; }

  get exists(): boolean { return this.nodeState !== null; }

  /** Called when `store` is replaced: subscribers must resubscribe (their next batch is a Reset). */
  onSwitch(f: () => void): () => void {
    this.switchListeners.add(f);
    return () => this.switchListeners.delete(f);
  }

  private update(): void {
    const exists = this.cluster.getNode(this.node) !== undefined;
    if (exists && !this.nodeState) {
      this.nodeState = new NodeState(this.cluster, this.node);
      this.empty?.closeSubscribers();
      this.empty = null;
      this.log.debug(`api: node ${this.node} exists: serving its state`);
    } else if (!exists && !this.empty) {
      const empty = new ItemStore(this.node);
      void this.cluster.whenSynced().then(() => empty.markSynced());
      this.empty = empty;
      if (this.nodeState) {
        this.nodeState.close();
        this.nodeState = null;
        this.log.info(`api: node ${this.node} is gone: serving an empty state`);
      } else {
        this.log.debug(`api: node ${this.node} is unknown: serving an empty state until it appears`);
      }
    } else {
      return;
    }
    for (const f of [...this.switchListeners]) f();
  }

  close(): void {
    this.unlisten();
    this.nodeState?.close();
    this.empty?.closeSubscribers();
    this.switchListeners.clear();
  }
}

export class NodeRegistry {
  private readonly entries = new Map<string, NodeEntry>();

  constructor(private readonly cluster: ClusterStore, private readonly log: Logger) {}

  acquire(node: string): NodeEntry {
    let e = this.entries.get(node);
    if (!e) {
      e = new NodeEntry(node, this.cluster, this.log);
      this.entries.set(node, e);
    }
    e.refs++;
    return e;
  }

  release(e: NodeEntry): void {
    if (--e.refs > 0 || this.entries.get(e.node) !== e) return;
    this.entries.delete(e.node);
    e.close();
  }

  /** Nodes with at least one client. */
  get nodes(): string[] { return [...this.entries.keys()].sort(); }

  close(): void {
    for (const e of this.entries.values()) e.close();
    this.entries.clear();
  }
}
