// The chains and sets one family's table holds, as kpng's own committed batches made them, and the
// full sync that repairs the table in place instead of replacing it.
//
// Why: a full sync that deletes the table and creates it again (resetTable) also empties the ClientIP
// affinity sets, whose elements the packets write (`update @aff-...`), not kpng. The periodic resync
// (kube-proxy's syncPeriod, 30s in kubeadm's configuration) would then move every affinity client to
// a new endpoint every period, as upstream kube-proxy never does. So when the table is known (every batch
// since the last reset committed), a full sync flushes every chain and every other set, deletes what the
// new state no longer has and adds the rest: rules and map elements are rewritten (edits made behind
// kpng's back are repaired), the affinity sets keep their elements. An unknown table (the first sync
// of a process, or after a failed batch) is still replaced whole.
import type { Op, SetSpec } from './types';

const sameSpec = (a: SetSpec, b: SetSpec): boolean =>
  a.kind === b.kind && a.size === b.size && a.timeoutSec === b.timeoutSec;

export class KernelObjects {
  private readonly chains = new Set<string>();
  private readonly sets = new Map<string, SetSpec>();
  private readonly flowtables = new Set<string>();

  /** The objects of a table made by `ops` from nothing (a full sync's ops start with resetTable). */
  static of(ops: readonly Op[]): KernelObjects {
    const k = new KernelObjects();
    k.record(ops);
    return k;
  }

  /** Follows a committed batch's ops. */
  record(ops: readonly Op[]): void {
    for (const op of ops) {
      switch (op.kind) {
        case 'resetTable': this.chains.clear(); this.sets.clear(); this.flowtables.clear(); break;
        case 'addFlowtable': this.flowtables.add(op.flowtable.name); break;
        case 'delFlowtable': this.flowtables.delete(op.name); break;
        case 'addChain': this.chains.add(op.chain.name); break;
        case 'delChain': this.chains.delete(op.name); break;
        case 'addSet': if (!this.sets.has(op.set.name)) this.sets.set(op.set.name, op.set); break;
        case 'delSet': this.sets.delete(op.name); break;
        default: break;
      }
    }
  }

  get chainCount(): number { return this.chains.size; }
  get setCount(): number { return this.sets.size; }

  /**
   * A full sync's ops (which start with resetTable) as a repair of this table: every chain and every
   * set but the affinity ones flushed, what the new state lacks (or has with another type or size)
   * deleted, then the full sync's own ops, whose adds of existing objects change nothing. After it
   * the table holds `want`, KernelObjects.of(fullOps) (the caller keeps it for the next sync).
   */
  repair(fullOps: readonly Op[], want: KernelObjects): Op[] {
    const out: Op[] = [{ kind: 'addTable' }];
    // Rules first: once no rule names a chain or set, the deletes below are allowed.
    for (const name of this.chains) out.push({ kind: 'flushChain', name });
    // Verdict maps name chains in their elements: flushed before those chains go.
    for (const [name, spec] of this.sets) if (spec.kind !== 'affinity') out.push({ kind: 'flushSet', name });
    // A flowtable is kept (the full sync's add adds devices it lacks: offloaded flows stay), unless unwanted.
    for (const name of this.flowtables) if (!want.flowtables.has(name)) out.push({ kind: 'delFlowtable', name });
    for (const name of this.chains) if (!want.chains.has(name)) out.push({ kind: 'delChain', name });
    for (const [name, spec] of this.sets) {
      const next = want.sets.get(name);
      if (!next || !sameSpec(spec, next)) out.push({ kind: 'delSet', name });
    }
    for (const op of fullOps) if (op.kind !== 'resetTable') out.push(op);
    return out;
  }
}
