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
   * Runs the parts in order (createEbpfSink puts the nft part first: on its own it already serves every
   * service and every kind of traffic, so a node's first start has a working dataplane sooner; the
   * socket LB then plans while the nft transaction is in the kernel). A part starts when the one
   * before it only waits for the kernel (its `waiting` call) or has ended: its JavaScript then
   * overlaps that wait, but never the JavaScript before it
   * (run fully at once, the two parts' JavaScript interleaved and the maps were complete later, for
   * no gain in total time; planned in a worker thread meanwhile, the socket LB slowed the nft part's
   * rendering on 2 cores about as much as it saved). Each part runs even when the one before it failed; the first failure (in part
   * order) fails the whole. The reports add up (their times overlap: the KernelSink logs the wall
   * time of the whole).
   */
  private async each(run: (d: Dataplane, waiting: () => void) => Promise<SyncReport>, signal?: AbortSignal): Promise<SyncReport> {
    const settled: Promise<PromiseSettledResult<SyncReport>>[] = [];
    for (const d of this.parts) {
      // Stopping: the parts not started yet keep their previous state (the ones started stop at their next turn).
      if (signal?.aborted) break;
      let waiting!: () => void;
      const waits = new Promise<void>((resolve) => (waiting = resolve));
      const t0 = performance.now();
      const done = run(d, waiting).then(
        (value): PromiseSettledResult<SyncReport> => ({ status: 'fulfilled', value: { ...value, parts: [{ name: d.name, wallMs: performance.now() - t0 }] } }),
        (reason: unknown): PromiseSettledResult<SyncReport> => ({ status: 'rejected', reason }));
      settled.push(done);
      await Promise.race([waits, done]);
    }
    const results = await Promise.all(settled);
    // Some parts never ran: the sync is abandoned, not done.
    if (results.length < this.parts.length) signal!.throwIfAborted();
    const total: SyncReport = { messages: 0, bytes: 0, ms: 0, parts: [] };
    for (const r of results) {
      if (r.status === 'rejected') throw r.reason;
      total.messages += r.value.messages;
      total.bytes += r.value.bytes;
      total.ms += r.value.ms;
      total.parts!.push(...r.value.parts!);
    }
    return total;
  }

  fullSync(services: Service[], node: NodeInfo | undefined, revision: number, _waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    return this.each((d, waiting) => d.fullSync(services, node, revision, waiting, signal), signal);
  }

  update(changes: ServiceChange[], node: NodeInfo | undefined, revision: number): Promise<SyncReport> {
    return this.each((d, waiting) => d.update(changes, node, revision, waiting));
  }

  watch(lost: (why: string) => void): void {
    for (const d of this.parts) d.watch?.(lost);
  }

  async close(): Promise<void> {
    for (const d of this.parts) await d.close?.();
  }
}
