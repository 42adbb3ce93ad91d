// What every kernel backend needs, written once: a Sink around a Dataplane that
//  - does a full sync on the first batch, after a failed sync (the runner retries with a reset), when
//    this node's item changes, and on each reset the runner requests every --sync-period (which also
//    repairs state edited behind kpng's back);
//  - otherwise hands the dataplane only the services that changed, with their old and new ENLS;
//  - deletes stale UDP conntrack entries computed from the ENLS (after the kernel has the new rules);
//  - counts and logs every sync.
import type { ConntrackFilter } from '../../native/nft-types';
import { NODE_KEY, type NodeInfo, type Service } from '../../model/enls';
import type { Batch, Sink, StateView } from '../../sink/sink';
import { addFullSyncUdpFilters, staleUdpFilters } from './conntrack';
import { NeedsFullSync, type Dataplane, type ServiceChange, type SyncReport } from './dataplane';
import { Yielder } from '../../util/yielder';

export interface KernelSinkOptions {
  log: (msg: string) => void;
  /** Deletes conntrack entries; absent for dataplanes that do not DNAT (nothing to clean). */
  conntrackDelete?: (filters: ConntrackFilter[]) => Promise<number>;
  /** Longest stretch of reading the state between two turns of the event loop on a full sync (5 ms). */
  sliceMs?: number;
}

/** One IP family's conntrack clean-up (kube-proxy's conntrack reconciler metrics count these). */
export interface ConntrackCleanup {
  family: 'IPv4' | 'IPv6';
  /** Entries deleted (0 when the deletion failed). */
  deleted: number;
  seconds: number;
}

export interface KernelSinkStats {
  syncs: number;
  fullSyncs: number;
  failures: number;
  lastMessages: number;
  lastBytes: number;
  lastMs: number;
  conntrackDeleted: number;
  conntrackFailures: number;
  /** The clean-ups the last apply() did, one per IP family that had stale entries. */
  lastConntrack: ConntrackCleanup[];
  /** Services handed to the dataplane, in total. */
  servicesSynced: number;
}

export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const failed = (e as Error & { failed?: Array<{ object: string; code: string; message?: string }> }).failed;
  if (failed && failed.length) return `${e.message}; ${failed.slice(0, 3).map((f) => `${f.object}: ${f.code}${f.message ? ` (${f.message})` : ''}`).join('; ')}`;
  return e.message;
}

export class KernelSink implements Sink {
  readonly name: string;
  readonly stats: KernelSinkStats = { syncs: 0, fullSyncs: 0, failures: 0, lastMessages: 0, lastBytes: 0, lastMs: 0, conntrackDeleted: 0, conntrackFailures: 0, lastConntrack: [], servicesSynced: 0 };
  /** The ENLS services the kernel has, as of the last successful sync. */
  private applied = new Map<string, Service>();
  private node: NodeInfo | undefined;
  private needFull = true;

  constructor(readonly dataplane: Dataplane, private readonly opts: KernelSinkOptions) {
    this.name = dataplane.name;
  }

  async apply(batch: Batch, state: StateView, signal?: AbortSignal): Promise<void> {
    this.stats.lastConntrack = [];
    const nodeChanged = batch.changes.some((c) => c.key === NODE_KEY);
    if (batch.reset || this.needFull || nodeChanged) return this.fullSync(batch, state, batch.reset ? 'reset' : nodeChanged ? 'node changed' : 'after a failure', signal);
    const changes: ServiceChange[] = [];
    for (const ch of batch.changes) {
      if (!ch.key.startsWith('svc/')) continue;
      const next = ch.op === 'set' ? ch.item.service ?? null : null;
      changes.push({ key: ch.key, old: this.applied.get(ch.key) ?? null, new: next });
    }
    if (changes.length === 0) return;
    let r: SyncReport;
    try {
      r = await this.guard(batch.revision, `incremental (${changes.length} services)`, () => this.dataplane.update(changes, this.node, batch.revision));
    } catch (e) {
      if (e instanceof NeedsFullSync) return this.fullSync(batch, state, e.message, signal);
      throw e;
    }
    this.stats.servicesSynced += changes.length;
    const stale: ConntrackFilter[] = [];
    for (const c of changes) {
      if (c.new) this.applied.set(c.key, c.new); else this.applied.delete(c.key);
      stale.push(...staleUdpFilters(c.old, c.new));
    }
    void r;
    await this.clearConntrack(stale);
  }

  /** `signal`: a stop abandons the sync before the dataplane sends it (a large one takes seconds). */
  private async fullSync(batch: Batch, state: StateView, why: string, signal?: AbortSignal): Promise<void> {
    // Whatever happens, what was applied before is no longer trusted.
    this.needFull = true;
    // Read with turns for the event loop: at 50k services, reading the state at once blocked it 20-350
    // ms. The state may change between turns; what is read is what `applied` records, so the next
    // batch's changes are diffed against it (and a node change brings another full sync).
    const y = new Yielder(this.opts.sliceMs, signal);
    const services = new Map<string, Service>();
    let n = 0;
    for (const item of state.items()) {
      // A store's items() may read live: an item deleted meanwhile can come as undefined.
      if (item?.service && item.key.startsWith('svc/')) services.set(item.key, item.service);
      // Checked every 64th item: every 1024th made slices several times the budget on a large cluster.
      if ((++n & 63) === 0 && y.due()) await y.turn();
    }
    const node = state.get(NODE_KEY)?.node ?? undefined;
    await y.turn(); // the dataplane's own turns start from here
    await this.guard(batch.revision, `full (${services.size} services, ${why})`, () => this.dataplane.fullSync([...services.values()], node, batch.revision, undefined, signal), signal);
    this.stats.fullSyncs++;
    this.stats.servicesSynced += services.size;
    this.applied = services;
    this.node = node;
    this.needFull = false;
    // With turns: a large cluster's services take more than a slice even with no UDP port among them. Not
    // abandoned on a stop: the rules are in, their conntrack clean-up goes with them.
    const filters: ConntrackFilter[] = [];
    const after = new Yielder(this.opts.sliceMs);
    let k = 0;
    for (const svc of services.values()) {
      addFullSyncUdpFilters(svc, filters);
      if ((++k & 255) === 0 && after.due()) await after.turn();
    }
    await this.clearConntrack(filters);
  }

  private async guard(revision: number, what: string, run: () => Promise<SyncReport>, signal?: AbortSignal): Promise<SyncReport> {
    const t0 = performance.now();
    try {
      const r = await run();
      const wall = performance.now() - t0;
      this.stats.syncs++;
      this.stats.lastMessages = r.messages;
      this.stats.lastBytes = r.bytes;
      this.stats.lastMs = r.ms;
      // The dataplane's own time (kernel and encoding, as it counts them), then the whole sync's.
      const parts = r.parts?.length ? `: ${r.parts.map((p) => `${p.name} ${p.wallMs.toFixed(1)}`).join(', ')}` : '';
      this.opts.log(`${this.name}: revision ${revision}: ${what} sync, ${r.messages} messages, ${r.bytes} bytes, ${r.ms.toFixed(1)} ms (${wall.toFixed(1)} ms wall${parts})`);
      return r;
    } catch (e) {
      // The change needs a full sync (nothing was sent): the caller does it now.
      if (e instanceof NeedsFullSync) { this.needFull = true; throw e; }
      // Abandoned because kpng is stopping: not a failure, and the previous rules stay.
      if (signal?.aborted) {
        this.needFull = true;
        this.opts.log(`${this.name}: revision ${revision}: ${what} sync abandoned (stopping); the previous rules stay`);
        throw e;
      }
      // The dataplane left the previous state in place: rebuild everything next time.
      this.stats.failures++;
      this.needFull = true;
      this.opts.log(`${this.name}: revision ${revision}: ${what} sync failed (failure #${this.stats.failures}), next sync is a full one: ${describeError(e)}`);
      throw e;
    }
  }

  /** One deletion per IP family, timed: kube-proxy reconciles (and measures) each family apart. */
  private async clearConntrack(filters: ConntrackFilter[]): Promise<void> {
    const del = this.opts.conntrackDelete;
    if (filters.length === 0 || !del) return;
    for (const fam of ['ip', 'ip6'] as const) {
      const these = filters.filter((f) => f.family === fam);
      if (these.length === 0) continue;
      const t0 = performance.now();
      let deleted = 0;
      try {
        deleted = await del(these);
        this.stats.conntrackDeleted += deleted;
      } catch (e) {
        this.stats.conntrackFailures++;
        this.opts.log(`${this.name}: conntrack clean-up failed (${these.length} ${fam} filters): ${describeError(e)}`);
      }
      this.stats.lastConntrack.push({ family: fam === 'ip' ? 'IPv4' : 'IPv6', deleted, seconds: (performance.now() - t0) / 1000 });
    }
  }

  /** The dataplane's losses, if it can tell (the next sync is a full one anyway: the runner resets). */
  watch(lost: (why: string) => void): void {
    this.dataplane.watch?.((why) => { this.needFull = true; lost(why); });
  }

  async close(): Promise<void> {
    await this.dataplane.close?.();
  }
}
