// One node's ENLS, kept current from a ClusterStore. Only the services whose inputs changed
// are recomputed; a change of this node's own Node object (zone, addresses) recomputes all.
import { NODE_KEY, serviceKey } from '../model/enls';
import { computeNodeItem, computeServiceItem } from '../model/compute';
import type { ModelNode } from '../model/compute';
import type { ClusterChange, ClusterStore } from './cluster';
import { ItemStore } from './item-store';

export { itemHash } from './item-store';

export class NodeState extends ItemStore {
  private readonly unlisten: () => void;

  constructor(private readonly cluster: ClusterStore, node: string) {
    super(node);
    this.recomputeAll();
    this.unlisten = cluster.onChange((c) => this.onClusterChange(c));
    void cluster.whenSynced().then(() => this.markSynced());
  }

  close(): void {
    this.unlisten();
    this.closeSubscribers();
  }

  private view(): ModelNode {
    const n = this.cluster.getNode(this.node);
    return { name: this.node, zone: n?.zone ?? '', primary: n?.primary ?? [] };
  }

  private onClusterChange(c: ClusterChange): void {
    if (c.nodes.has(this.node)) return this.recomputeAll();
    const view = this.view();
    const changed: string[] = [];
    for (const key of c.services) if (this.recomputeService(key, view)) changed.push(toItemKey(key));
    this.commit(changed);
  }

  private recomputeAll(): void {
    const view = this.view();
    const changed: string[] = [];
    if (this.put(NODE_KEY, computeNodeItem(this.node, this.cluster.getNode(this.node), this.cluster.modelOptions))) changed.push(NODE_KEY);
    const live = new Set<string>([NODE_KEY]);
    for (const key of this.cluster.serviceKeys()) {
      live.add(toItemKey(key));
      if (this.recomputeService(key, view)) changed.push(toItemKey(key));
    }
    for (const key of [...this.allKeys()]) {
      if (!live.has(key) && this.put(key, null)) changed.push(key);
    }
    this.commit(changed);
  }

  private recomputeService(key: string, view: ModelNode): boolean {
    const svc = this.cluster.getService(key);
    return this.put(toItemKey(key), svc ? computeServiceItem(svc, this.cluster.slicesOf(key), view, this.cluster.modelOptions) : null);
  }
}

/** "ns/name" (cluster store key) to "svc/ns/name" (item key). */
function toItemKey(key: string): string {
  const i = key.indexOf('/');
  return serviceKey(key.slice(0, i), key.slice(i + 1));
}
