// The nft Sink: keeps a model of what kpng put in each family's table and, per batch, sends only
// what changed (map elements, the chains of services whose endpoints changed), in one atomic batch.
// The first batch (reset) and any batch after a failure replace the tables in one transaction.
import type { ConntrackFilter } from '../../native/nft-types';
import type { Service } from '../../model/enls';
import type { Batch, Sink, StateView } from '../../sink/sink';
import { fullSyncOps, OpCollector, staleConntrack, TableModel, updateService } from './plan';
import type { Fam, FamOps } from './types';

export interface NftSinkOptions {
  /** This node's name (the ENLS is already computed for it; used in logs). */
  node: string;
  /** Pod CIDRs of the cluster: traffic to a cluster IP from outside them is masqueraded. */
  clusterCIDRs: string[];
  /** Masquerade all traffic sent to services. */
  masqueradeAll: boolean;
  /** Table name in both families (default 'kpng'). */
  tablePrefix?: string;
  log: (msg: string) => void;
}

export interface KernelApplyResult { messages: number; bytes: number; ms: number }

/** Where ops go: the native addon in production; tests and benchmarks may substitute. */
export interface NftKernel {
  apply(table: string, ops: FamOps[]): Promise<KernelApplyResult>;
  conntrackDelete(filters: ConntrackFilter[]): Promise<number>;
}

export interface NftSinkStats {
  syncs: number;
  fullSyncs: number;
  failures: number;
  lastMessages: number;
  lastBytes: number;
  lastMs: number;
  conntrackDeleted: number;
}

const FAMS: Fam[] = ['ip', 'ip6'];

export class NftSink implements Sink {
  readonly name = 'nft';
  readonly table: string;
  readonly stats: NftSinkStats = { syncs: 0, fullSyncs: 0, failures: 0, lastMessages: 0, lastBytes: 0, lastMs: 0, conntrackDeleted: 0 };
  private models: Record<Fam, TableModel> = { ip: new TableModel('ip'), ip6: new TableModel('ip6') };
  private needFull = true;

  constructor(private readonly opts: NftSinkOptions, private readonly kernel: NftKernel) {
    this.table = opts.tablePrefix || 'kpng';
  }

  async apply(batch: Batch, state: StateView): Promise<void> {
    if (batch.reset || this.needFull) return this.fullSync(batch, state);
    const coll: Record<Fam, OpCollector> = { ip: new OpCollector(), ip6: new OpCollector() };
    const stale: ConntrackFilter[] = [];
    let services = 0;
    for (const ch of batch.changes) {
      if (!ch.key.startsWith('svc/')) continue;
      services++;
      const svc = ch.op === 'set' ? (ch.item.service as Service | null | undefined) ?? undefined : undefined;
      for (const fam of FAMS) {
        const { oldP, newP } = updateService(this.models[fam], ch.key, svc, this.opts, coll[fam]);
        stale.push(...staleConntrack(fam, oldP, newP));
      }
    }
    const ops: FamOps[] = FAMS.filter((f) => !coll[f].empty).map((fam) => ({ fam, ops: coll[fam].ops() }));
    if (ops.length > 0) {
      await this.send(ops, batch.revision, `incremental (${services} services)`);
    }
    await this.clearConntrack(stale);
  }

  private async fullSync(batch: Batch, state: StateView): Promise<void> {
    // A fresh model: whatever happens, the previous one is no longer trusted.
    this.models = { ip: new TableModel('ip'), ip6: new TableModel('ip6') };
    this.needFull = true;
    const services: Array<[string, Service]> = [];
    for (const item of state.items()) if (item.key.startsWith('svc/') && item.service) services.push([item.key, item.service as Service]);
    const ops: FamOps[] = FAMS.map((fam) => ({ fam, ops: fullSyncOps(this.models[fam], services, this.opts) }));
    await this.send(ops, batch.revision, `full (${services.length} services)`);
    this.stats.fullSyncs++;
    this.needFull = false;
  }

  private async send(ops: FamOps[], revision: number, what: string): Promise<void> {
    try {
      const r = await this.kernel.apply(this.table, ops);
      this.stats.syncs++;
      this.stats.lastMessages = r.messages;
      this.stats.lastBytes = r.bytes;
      this.stats.lastMs = r.ms;
      this.opts.log(`nft: revision ${revision}: ${what} sync, ${r.messages} messages, ${r.bytes} bytes, ${r.ms.toFixed(1)} ms`);
    } catch (e) {
      // The kernel applied nothing: the previous rules are intact. Rebuild everything next time.
      this.stats.failures++;
      this.needFull = true;
      this.opts.log(`nft: revision ${revision}: ${what} sync failed (failure #${this.stats.failures}), next sync is a full one: ${describe(e)}`);
      throw e;
    }
  }

  private async clearConntrack(filters: ConntrackFilter[]): Promise<void> {
    if (filters.length === 0) return;
    try {
      this.stats.conntrackDeleted += await this.kernel.conntrackDelete(filters);
    } catch (e) {
      this.opts.log(`nft: conntrack clean-up failed (${filters.length} filters): ${describe(e)}`);
    }
  }

  async close(): Promise<void> {
    // Rules stay in place on exit (like kube-proxy): a restart replaces them in one transaction.
  }
}

function describe(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const failed = (e as Error & { failed?: Array<{ object: string; code: string; message?: string }> }).failed;
  if (failed && failed.length) return `${e.message}; ${failed.slice(0, 3).map((f) => `${f.object}: ${f.code}${f.message ? ` (${f.message})` : ''}`).join('; ')}`;
  return e.message;
}
