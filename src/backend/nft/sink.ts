// The nft Dataplane: keeps a model of what kpng put in each family's table and, per sync, sends only
// what changed (map elements, the chains of services whose routes changed), in one atomic batch. A
// full sync rewrites both tables in one transaction: in place when every batch since the last one
// committed (the affinity sets keep their elements: kernel-objects.ts), else by replacing them.
// Wrapped by the shared KernelSink.
import type { ConntrackFilter } from '../../native/nft-types';
import { describeChanges, type NftForeignCommit } from '../../native/nft-monitor';
import { serviceKey, type NodeInfo, type Service } from '../../model/enls';
import { NeedsFullSync, type Dataplane, type ServiceChange, type SyncReport } from '../kernel/dataplane';
import { KernelSink } from '../kernel/kernel-sink';
import { applyCapacity, fullSyncOpsChunked, OpCollector, settleSharedChains, TableModel, updateService } from './plan';
import { Yielder } from '../../util/yielder';
import { SHARED_NAMES, type IpFamily, type FamOps } from './types';
import { KernelObjects } from './kernel-objects';
import type { FastPath } from './fast-path';

export interface KernelApplyResult { messages: number; bytes: number; ms: number }

/** Where ops go: the native addon in production; tests and benchmarks may substitute. */
export interface NftKernel {
  /** `waiting`, when given, is called once the batch is built and only the kernel's part remains. */
  apply(table: string, ops: FamOps[], waiting?: () => void): Promise<KernelApplyResult>;
  conntrackDelete(filters: ConntrackFilter[]): Promise<number>;
  /** Optional: reports nftables transactions of other processes (until close), never the kernel's own applies. */
  watchForeign?(onCommit: (c: NftForeignCommit) => void): void;
  /** Releases what the kernel side keeps between batches (pooled sockets, the monitor). */
  close?(): Promise<void>;
}

const FAMS: IpFamily[] = ['ip', 'ip6'];

/** Each service with its key, made as the render reaches it (inside its slices). */
function* keyedServices(services: readonly Service[]): Iterable<[string, Service]> {
  for (const s of services) yield [serviceKey(s.namespace, s.name), s];
}

export class NftDataplane implements Dataplane {
  readonly name = 'nft';
  private models: Record<IpFamily, TableModel> = { ip: new TableModel('ip'), ip6: new TableModel('ip6') };

  /**
   * What each family's table holds, while every batch since the last full sync committed (a batch
   * is atomic: a failed one left the table as it was, but the model has moved on); undefined: not known.
   */
  private objects: Partial<Record<IpFamily, KernelObjects>> = {};

  /**
   * `table`: the table name in both families; `log`: what is worth saying outside a sync's own line;
   * `fastPath`: the flowtable's devices, decided again at every full sync.
   */
  constructor(readonly table: string, private readonly kernel: NftKernel, private readonly log?: (msg: string) => void, private readonly fastPath?: FastPath) {}

  /** Whether the tables hold the fast path's flowtable (its last full sync made one). */
  private fastInTables = false;

  /** Applies a batch, following what the tables hold (forgotten if it fails). */
  private async apply(ops: FamOps[], after: (f: FamOps) => KernelObjects | undefined, waiting?: () => void): Promise<SyncReport> {
    try {
      const r = await this.kernel.apply(this.table, ops, waiting);
      for (const f of ops) this.objects[f.fam] = after(f);
      return r;
    } catch (e) {
      this.objects = {};
      throw e;
    }
  }

  async fullSync(services: Service[], node: NodeInfo | undefined, _revision?: number, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    // A fresh model: if the batch fails, the kernel keeps the old table and the next sync is full again.
    const fast = await this.fastPath?.spec();
    this.models = { ip: new TableModel('ip', fast), ip6: new TableModel('ip6', fast) };
    // Rendered in slices so that a large state never blocks the event loop for long; a stop abandons
    // the render at the next slice (the batch is atomic: nothing was sent, the old tables stay).
    const y = new Yielder(undefined, signal);
    const famOps: FamOps[] = [];
    const made: Partial<Record<IpFamily, KernelObjects>> = {};
    for (const fam of FAMS) {
      const ops = await fullSyncOpsChunked(this.models[fam], keyedServices(services), node, y);
      const want = (made[fam] = KernelObjects.of(ops));
      famOps.push({ fam, ops: this.objects[fam]?.repair(ops, want) ?? ops });
    }
    // The kernel's encoder counts its own slices from its start: the time since our last turn would
    // add to its first one.
    await y.turn();
    this.fastInTables = false;
    const r = await this.apply(famOps, (f) => made[f.fam], waiting);
    this.fastInTables = !!fast;
    return r;
  }

  async update(changes: ServiceChange[], node: NodeInfo | undefined): Promise<SyncReport> {
    const coll: Record<IpFamily, OpCollector> = { ip: new OpCollector(), ip6: new OpCollector() };
    for (const ch of changes) for (const fam of FAMS) updateService(this.models[fam], ch.key, ch.new ?? undefined, node, coll[fam]);
    for (const fam of FAMS) {
      settleSharedChains(this.models[fam], coll[fam]);
      const over = applyCapacity(this.models[fam], coll[fam], false);
      if (over) throw new NeedsFullSync(`set ${fam} ${over.set} would hold ${over.count} elements, it was created for ${over.capacity}`);
    }
    const ops: FamOps[] = FAMS.filter((f) => !coll[f].empty).map((fam) => ({ fam, ops: coll[fam].ops(this.models[fam].sizeOf) }));
    // A pod started since the last full sync: its interface joins the flowtable with this batch.
    const grown = this.fastInTables ? await this.fastPath?.grown() : undefined;
    if (grown) {
      for (const fam of FAMS) {
        const f = ops.find((x) => x.fam === fam) ?? (ops.push({ fam, ops: [] }), ops[ops.length - 1]!);
        f.ops.push({ kind: 'addFlowtable', flowtable: { name: SHARED_NAMES.fastPath, devices: grown.devices } });
      }
    }
    if (ops.length === 0) return { messages: 0, bytes: 0, ms: 0 };
    // An update of an unknown table (its last batch failed) is followed by a full sync that replaces it.
    return this.apply(ops, (f) => { const k = this.objects[f.fam]; k?.record(f.ops); return k; });
  }

  /**
   * Another process changed this dataplane's tables (`nft delete table`, `nft flush ruleset`, a rule
   * inserted into one of its chains, an element deleted): `lost` says who and what, and the runner
   * resyncs in full at once. Notifications lost to an overflow may have hidden such a change: the
   * same. Without a kernel that watches, tampering waits for the periodic resync.
   */
  watch(lost: (why: string) => void): void {
    try {
      this.kernel.watchForeign?.((c) => this.onForeign(c, lost));
    } catch (e) {
      this.log?.(`nft: cannot watch nftables changes (${(e as Error).message}): changes made to table ${this.table} by others are repaired at the periodic resync only`);
    }
  }

  private onForeign(c: NftForeignCommit, lost: (why: string) => void): void {
    if (c.overflow) { lost('nftables change notifications were lost (socket buffer overflow)'); return; }
    const mine = c.changes.filter((x) => x.table === this.table && (x.family === 'ip' || x.family === 'ip6'));
    if (mine.length === 0) return;
    // A table, chain, set or flowtable added or deleted by someone else: what the table holds is no
    // longer what kpng's batches made, so the repairing full sync replaces the table rather than
    // patching objects that may be gone (rules and elements alone are repaired in place, keeping the
    // affinity sets' clients).
    for (const x of mine) if (!/^(rule|element)[+-]$/.test(x.kind)) delete this.objects[x.family as IpFamily];
    const fams = [...new Set(mine.map((x) => x.family))].join(' and ');
    lost(`table ${this.table} (${fams}) changed by another process (pid ${c.pid}${c.comm ? ` ${c.comm}` : ''}: ${describeChanges(mine)})`);
  }

  async close(): Promise<void> {
    await this.kernel.close?.();
  }
}

export interface NftSinkOptions {
  log: (msg: string) => void;
  /** Table name in both families (default 'kpng'). */
  tablePrefix?: string;
  /** The fast path (--nft-flowtable); absent: off. */
  fastPath?: FastPath;
}

/** The nft backend as a Sink: the nft dataplane inside the shared kernel sink. */
export function nftKernelSink(opts: NftSinkOptions, kernel: NftKernel): KernelSink {
  return new KernelSink(new NftDataplane(opts.tablePrefix || 'kpng', kernel, opts.log, opts.fastPath), { log: opts.log, conntrackDelete: (f) => kernel.conntrackDelete(f) });
}
