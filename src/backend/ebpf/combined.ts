// Two dataplanes as one, inside one KernelSink: `--to ebpf` is the socket load balancer (connect() of
// this node's processes) plus the nft renderer for what is not a socket operation here (node ports, LB
// and external IPs reached from other hosts, and processes outside the attach cgroup). Both see every
// sync, each even when the one before it failed (the nft part also serves, by DNAT, every connect()
// the socket LB leaves alone); a failure of either fails the sync, so the KernelSink's next sync is a
// full one for both.
import type { NodeInfo, Service } from '../../model/enls';
import type { Dataplane, ServiceChange, SyncReport } from '../kernel/dataplane';

export class CombinedDataplane implements Dataplane {
  constructor(readonly name: string, readonly parts: Dataplane[]) {}

  /**
   * Runs every part at once: they program different kernel subsystems, and one part's kernel work
   * (on the addon's threads) then overlaps the other's JavaScript. Each part runs to its end even
   * when another fails; the first failure (in part order) fails the whole. The reports add up
   * (their times overlap: the KernelSink logs the wall time of the whole).
   */
  private async each(run: (d: Dataplane) => Promise<SyncReport>): Promise<SyncReport> {
    const results = await Promise.allSettled(this.parts.map((d) => run(d)));
    const total: SyncReport = { messages: 0, bytes: 0, ms: 0 };
    for (const r of results) {
      if (r.status === 'rejected') throw r.reason;
      total.messages += r.value.messages;
      total.bytes += r.value.bytes;
      total.ms += r.value.ms;
    }
    return total;
  }

  fullSync(services: Service[], node: NodeInfo | undefined, revision: number): Promise<SyncReport> {
    return this.each((d) => d.fullSync(services, node, revision));
  }

  update(changes: ServiceChange[], node: NodeInfo | undefined, revision: number): Promise<SyncReport> {
    return this.each((d) => d.update(changes, node, revision));
  }

  async close(): Promise<void> {
    for (const d of this.parts) await d.close?.();
  }
}
