// The backend's model of what is in each family's table (programs per service, slot allocator,
// hairpin reference counts) and the diff that turns a change of programs into the few ops needed.
import type { NodeInfo, Service } from '../../model/enls';
import { baseOps, baseOptions, SHARED_SETS } from './base';
import { buildProgram, elemId, emptyProgram, sameElem, type Program } from './program';
import { pushAll } from '../../util/push-all';
import type { SlotState } from './slots';
import type { Yielder } from './yielder';
import { N, type Elem, type Fam, type Op, type Stmt } from './types';


/** Elements per add/delete op (the addon packs each op into netlink messages). */
const ELEM_CHUNK = 1000;

/**
 * What the kernel holds for one service: not its rendered program (at 10k services x 10 endpoints
 * the programs held 84 MiB) but what renders it again, identically: the service as the ENLS gave it
 * (the store holds that object anyway), the node item it was rendered with, and its slot assignment.
 */
export interface Rendered {
  svc: Service;
  node: NodeInfo | undefined;
  slots: Map<string, SlotState>;
}

export class TableModel {
  readonly programs = new Map<string, Rendered>();
  /** Reference counts of shared set elements (set -> id -> count): several services may hold one. */
  readonly sharedRefs = new Map<string, Map<string, number>>();
  /** Picks map shards created in the kernel (created on first use, kept). */
  readonly shards = new Set<string>();
  /** Shared chains: services using each, and the ones the kernel has. */
  readonly chainRefs = new Map<string, number>();
  readonly liveChains = new Set<string>();
  /** Shared chains whose reference count changed since the last settleSharedChains(). */
  readonly touchedChains = new Map<string, Stmt[]>();
  constructor(readonly fam: Fam) {}
}

/** Ops collected by kind, emitted in an order the kernel accepts within one transaction. */
export class OpCollector {
  private readonly delElems = new Map<string, Elem[]>();
  private readonly flush: string[] = [];
  private readonly delChains: string[] = [];
  private readonly delSets: string[] = [];
  private readonly addSets: Op[] = [];
  private readonly addChains: string[] = [];
  private readonly rules: Array<{ chain: string; stmt: Stmt }> = [];
  private readonly addElems = new Map<string, Elem[]>();
  /** Counts for reports. */
  changedChains = 0;

  delElem(map: string, e: Elem): void { push(this.delElems, map, e); }
  addElem(map: string, e: Elem): void { push(this.addElems, map, e); }
  flushChain(name: string): void { this.flush.push(name); this.changedChains++; }
  delChain(name: string): void { this.delChains.push(name); }
  delSet(name: string): void { this.delSets.push(name); }
  addSet(name: string, timeoutSec: number): void { this.addSets.push({ k: 'addSet', set: { name, kind: 'affinity', timeoutSec } }); }
  addPickMap(name: string, kind: 'pickVipMap' | 'pickPortMap'): void { this.addSets.push({ k: 'addSet', set: { name, kind } }); }
  addChain(name: string): void { this.addChains.push(name); this.changedChains++; }
  addRules(chain: string, stmts: Stmt[]): void { for (const stmt of stmts) this.rules.push({ chain, stmt }); }

  get empty(): boolean {
    return this.delElems.size + this.flush.length + this.delChains.length + this.delSets.length + this.addSets.length +
      this.addChains.length + this.rules.length + this.addElems.size === 0;
  }

  ops(): Op[] {
    const ops: Op[] = [];
    for (const [set, elems] of this.delElems) for (const c of chunks(elems)) ops.push({ k: 'delElems', set, elems: c });
    for (const name of this.flush) ops.push({ k: 'flushChain', name });
    for (const name of this.delChains) ops.push({ k: 'delChain', name });
    for (const name of this.delSets) ops.push({ k: 'delSet', name });
    ops.push(...this.addSets);
    for (const name of this.addChains) ops.push({ k: 'addChain', chain: { name } });
    for (const r of this.rules) ops.push({ k: 'addRule', chain: r.chain, stmt: r.stmt });
    for (const [set, elems] of this.addElems) for (const c of chunks(elems)) ops.push({ k: 'addElems', set, elems: c });
    return ops;
  }
}

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const l = m.get(k);
  if (l) l.push(v); else m.set(k, [v]);
}

function chunks<T>(l: T[]): T[][] {
  if (l.length <= ELEM_CHUNK) return [l];
  const out: T[][] = [];
  for (let i = 0; i < l.length; i += ELEM_CHUNK) out.push(l.slice(i, i + ELEM_CHUNK));
  return out;
}

const sameRules = (a: Stmt[], b: Stmt[]): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Diff one service's program (old -> new) into `c`, and update the model's shared bookkeeping. */
export function diffProgram(model: TableModel, oldP: Program, newP: Program, c: OpCollector): void {
  // Elements of the shared maps.
  for (const [map, olds] of oldP.elems) {
    const news = newP.elems.get(map);
    for (const [id, e] of olds) {
      const n = news?.get(id);
      if (!n || !sameElem(n, e)) c.delElem(map, e);
    }
  }
  for (const [map, news] of newP.elems) {
    const olds = oldP.elems.get(map);
    for (const [id, e] of news) {
      const o = olds?.get(id);
      if (!o || !sameElem(o, e)) c.addElem(map, e);
    }
  }
  // Chains.
  for (const [name, rules] of oldP.chains) {
    const n = newP.chains.get(name);
    if (!n) { c.flushChain(name); c.delChain(name); } else if (!sameRules(rules, n)) { c.flushChain(name); c.addRules(name, n); }
  }
  for (const [name, rules] of newP.chains) {
    if (!oldP.chains.has(name)) { c.addChain(name); c.addRules(name, rules); }
  }
  // Picks map shards, created on first use.
  for (const map of newP.elems.keys()) {
    if (!map.startsWith('picks-') || model.shards.has(map)) continue;
    model.shards.add(map);
    c.addPickMap(map, map.startsWith(`${N.picksVip}-`) || map.startsWith(`${N.picksVipLocal}-`) ? 'pickVipMap' : 'pickPortMap');
  }
  // Affinity sets (the timeout is in the name).
  for (const name of oldP.sets.keys()) if (!newP.sets.has(name)) c.delSet(name);
  for (const [name, t] of newP.sets) if (!oldP.sets.has(name)) c.addSet(name, t);
  // Shared set elements, reference counted.
  for (const [set, olds] of oldP.shared) {
    const refs = model.sharedRefs.get(set);
    for (const [id, e] of olds) {
      if (newP.shared.get(set)?.has(id)) continue;
      const n = (refs?.get(id) ?? 1) - 1;
      if (n <= 0) { refs?.delete(id); c.delElem(set, e); } else refs!.set(id, n);
    }
  }
  for (const [set, news] of newP.shared) {
    let refs = model.sharedRefs.get(set);
    if (!refs) model.sharedRefs.set(set, (refs = new Map()));
    for (const [id, e] of news) {
      if (oldP.shared.get(set)?.has(id)) continue;
      const n = (refs.get(id) ?? 0) + 1;
      refs.set(id, n);
      if (n === 1) c.addElem(set, e);
    }
  }
  // Shared chains, reference counted; created or deleted once the whole batch is known.
  for (const [name, rules] of oldP.sharedChains) {
    if (newP.sharedChains.has(name)) continue;
    model.chainRefs.set(name, (model.chainRefs.get(name) ?? 1) - 1);
    model.touchedChains.set(name, rules);
  }
  for (const [name, rules] of newP.sharedChains) {
    if (oldP.sharedChains.has(name)) continue;
    model.chainRefs.set(name, (model.chainRefs.get(name) ?? 0) + 1);
    model.touchedChains.set(name, rules);
  }
}

/**
 * Creates the shared chains that gained their first user and deletes those that lost their last one,
 * after every service of a batch was diffed (a chain one service drops and another takes stays).
 */
export function settleSharedChains(model: TableModel, c: OpCollector): void {
  for (const [name, rules] of model.touchedChains) {
    const used = (model.chainRefs.get(name) ?? 0) > 0;
    if (!used) model.chainRefs.delete(name);
    if (used && !model.liveChains.has(name)) { c.addChain(name); c.addRules(name, rules); model.liveChains.add(name); }
    if (!used && model.liveChains.has(name)) { c.flushChain(name); c.delChain(name); model.liveChains.delete(name); }
  }
  model.touchedChains.clear();
}

/** Update one service in the model; returns its old and new programs. */
export function updateService(model: TableModel, key: string, svc: Service | undefined, node: NodeInfo | undefined, c: OpCollector): { oldP: Program; newP: Program } {
  const old = model.programs.get(key);
  // Rendering is a pure function of (service, node, slots): the old program is rendered again.
  const oldP = old ? buildProgram(old.svc, model.fam, { node: old.node, prevSlots: old.slots }) : emptyProgram();
  const newP = svc ? buildProgram(svc, model.fam, { node, prevSlots: oldP.slots }) : emptyProgram();
  diffProgram(model, oldP, newP, c);
  if (!svc || newP.chains.size + newP.elems.size + newP.sets.size + newP.shared.size + newP.sharedChains.size === 0) model.programs.delete(key);
  else model.programs.set(key, { svc, node, slots: newP.slots });
  return { oldP, newP };
}

/** Ops that replace the table with the full state (one transaction: old table deleted, new one built). */
export function fullSyncOps(model: TableModel, services: Iterable<[string, Service]>, node: NodeInfo | undefined): Op[] {
  const c = new OpCollector();
  for (const [key, svc] of services) updateService(model, key, svc, node, c);
  settleSharedChains(model, c);
  return [...baseOps(model.fam, baseOptions(model.fam, node)), ...c.ops()];
}

/** fullSyncOps, giving the event loop a turn whenever `y`'s budget is spent (same ops). */
export async function fullSyncOpsChunked(model: TableModel, services: Iterable<[string, Service]>, node: NodeInfo | undefined, y: Yielder): Promise<Op[]> {
  const c = new OpCollector();
  let k = 0;
  for (const [key, svc] of services) {
    updateService(model, key, svc, node, c);
    if (++k % 16 === 0 && y.due()) await y.turn();
  }
  settleSharedChains(model, c);
  const ops = baseOps(model.fam, baseOptions(model.fam, node));
  pushAll(ops, c.ops());
  return ops;
}

export { SHARED_SETS, elemId };
