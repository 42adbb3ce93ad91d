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
   * Runs the parts one after the other, in order: the socket LB's maps first, so that this node's
   * own connections are balanced as early as possible (run at once, the two parts' JavaScript
   * interleaved and the maps were complete ~0.2 s later at a 1k start; at 50k it saved 5-10% of the
   * whole sync's time). Each
   * part runs even when the one before it failed; the first failure fails the whole.
   */
  private async each(run: (d: Dataplane) => Promise<SyncReport>): Promise<SyncReport> {
    const total: SyncReport = { messages: 0, bytes: 0, ms: 0 };
    let failure: unknown;
    for (const d of this.parts) {
      try {
        const r = await run(d);
        total.messages += r.messages;
        total.bytes += r.bytes;
        total.ms += r.ms;
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure !== undefined) throw failure;
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
