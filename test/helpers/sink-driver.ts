// The runner's part for sink tests that drive a Sink by hand: each call hands the sink the items that
// changed since the last batch it handed out (a failed apply is retried by the next batch: a kernel
// sink makes that one a full sync), with a view of the whole current state.
import type { Item } from '../../src/model/enls';
import type { Batch, StateView } from '../../src/sink/sink';
import { itemHash } from '../../src/store/item-store';

export function stateView(items: Item[], revision: number, node = 'n1'): StateView {
  const m = new Map(items.map((x) => [x.key, x]));
  return { node, revision, get: (k) => m.get(k), items: () => m.values(), size: m.size };
}

export class SinkDriver {
  private revision = 0;
  private hashes = new Map<string, string>();

  constructor(private readonly state: { items(): Iterable<Item> }) {}

  /** The next batch (the first one resets) and the state it brings the sink to. */
  next(): { batch: Batch; view: StateView; items: Item[] } {
    const items = [...this.state.items()];
    const now = new Map(items.map((it) => [it.key, itemHash(it)]));
    const byKey = new Map(items.map((it) => [it.key, it]));
    const keys = [...new Set([...now.keys(), ...this.hashes.keys()])].filter((k) => now.get(k) !== this.hashes.get(k)).sort();
    this.hashes = now;
    const revision = ++this.revision;
    const batch: Batch = {
      revision, reset: revision === 1,
      changes: keys.map((key) => { const item = byKey.get(key); return item ? { op: 'set' as const, key, item } : { op: 'delete' as const, key }; }),
    };
    return { batch, view: stateView(items, revision), items };
  }
}
