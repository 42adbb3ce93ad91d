// Sees every change of a node state as soon as it is committed (its own pull subscription, taken at
// once), to tell the health checker and the metrics that a sync is now queued, per IP family, with the
// revision that carries it. Works for any state: one computed here or one received over the API.
import type { ItemStore } from '../store/item-store';
import type { Subscription } from '../store/subscription';
import { NODE_KEY } from '../model/enls';
import { familiesOf } from '../model/families';
import type { IPFamilyName } from './proxy-health';

export class UpdateTracker {
  private readonly itemFamilies = new Map<string, IPFamilyName[]>();
  private readonly sub: Subscription;
  private done: Promise<void> = Promise.resolve();

  constructor(state: ItemStore, private readonly onQueued: (families: IPFamilyName[], revision: number) => void) {
    this.sub = state.subscribe();
  }

  /** Every family seen in the state so far (IPv4 when there is none yet). */
  families(): IPFamilyName[] {
    const all = new Set<IPFamilyName>();
    for (const f of this.itemFamilies.values()) for (const x of f) all.add(x);
    return all.size ? [...all].sort() : ['IPv4'];
  }

  start(): void {
    this.done = (async () => {
      for (;;) {
        try { await this.sub.ready(); } catch { return; } // closed
        const batch = this.sub.take();
        const touched = new Set<IPFamilyName>();
        for (const ch of batch.changes) {
          const before = this.itemFamilies.get(ch.key) ?? [];
          const after = ch.op === 'set' ? familiesOf(ch.item) : [];
          if (after.length) this.itemFamilies.set(ch.key, after); else this.itemFamilies.delete(ch.key);
          // The node's own item changes every service's rules.
          for (const f of ch.key === NODE_KEY ? this.families() : [...before, ...after]) touched.add(f);
        }
        if (touched.size) this.onQueued([...touched].sort(), batch.revision);
      }
    })();
  }

  async stop(): Promise<void> {
    this.sub.close();
    await this.done;
  }
}
