// The backend's model of what is in each family's table (programs per service, slot allocator,
// hairpin reference counts) and the diff that turns a change of programs into the few ops needed.
import type { NodeInfo, Service } from '../../model/enls';
import { baseOps, baseOptions, SHARED_SETS } from './base';
import { buildProgram, elemId, emptyProgram, inFamily, indexElems, pickElems, sameElem, type PickDest, type Program } from './program';
import { pushAll } from '../../util/push-all';
import { ElemWriter } from './netlink';
import { PackedElems } from './packed';
import { RefCounts } from './ref-counts';
import type { SlotState } from './slots';
import type { Yielder } from '../../util/yielder';
import { elemChunks, SHARED_NAMES, type Elem, type IpFamily, type FastPathSpec, type Op, type Stmt } from './types';


/**
 * The big sets get a capacity at creation (SetSpec.size): filling a resizable kernel hash with
 * hundreds of thousands of elements in one transaction spends most of its time growing it
 * (rhashtable_insert_slow). Half as much again as the elements they hold, at least MIN_CAPACITY;
 * an update that would overflow one asks for a full sync, which sizes every set again.
 */
const MIN_CAPACITY = 1024;
export const sizedSet = (name: string): boolean => name === SHARED_NAMES.hairpin || name === SHARED_NAMES.clusterIPs || name === SHARED_NAMES.vips || name.startsWith('picks-');
export const capacityFor = (n: number): number => Math.max(MIN_CAPACITY, Math.ceil((n * 1.5) / 1024) * 1024);

/**
 * What the kernel holds for one service: not its rendered program (the programs of a large cluster
 * are a large part of the heap) but what renders it again, identically: the service as the ENLS gave it
 * (the store holds that object anyway), the node item it was rendered with, and its slot assignment.
 */
export interface Rendered {
  svc: Service;
  node: NodeInfo | undefined;
  /** Only the slot lists not in key order (see keptSlots); undefined when there is none. */
  slots: Map<string, SlotState> | undefined;
}

/**
 * The slot states worth keeping for the next render: a list whose slots are in key order is what the
 * render gives anyway without a previous state (the endpoints sorted), so it is dropped. After a full
 * sync that is every list, so a large cluster's heap does not keep every endpoint's key twice.
 */
export function keptSlots(slots: Map<string, SlotState>): Map<string, SlotState> | undefined {
  let kept: Map<string, SlotState> | undefined;
  for (const [key, st] of slots) {
    const b = st.bySlot;
    let sorted = true;
    for (let i = 1; i < b.length && sorted; i++) sorted = b[i - 1]! < b[i]!;
    if (!sorted) (kept ??= new Map()).set(key, st);
  }
  return kept;
}

export class TableModel {
  readonly programs = new Map<string, Rendered>();
  /** Reference counts of shared set elements (set -> id -> count): several services may hold one. */
  readonly sharedRefs = new Map<string, RefCounts>();
  /** Picks map shards created in the kernel (created on first use, kept). */
  readonly shards = new Set<string>();
  /** Shared chains: services using each, and the ones the kernel has. */
  readonly chainRefs = new Map<string, number>();
  readonly liveChains = new Set<string>();
  /** Shared chains whose reference count changed since the last settleSharedChains(). */
  readonly touchedChains = new Map<string, Stmt[]>();
  /** Sized sets: elements held and the capacity each was created with. */
  readonly counts = new Map<string, number>();
  readonly capacity = new Map<string, number>();
  /** The fast path the next full sync programs (set by the dataplane before each one). */
  fastPath: FastPathSpec | undefined;
  constructor(readonly fam: IpFamily, fastPath?: FastPathSpec) { this.fastPath = fastPath; }
  /** The capacity to create a set with (undefined: not a sized set). */
  readonly sizeOf = (set: string): number | undefined => this.capacity.get(set);
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
  /** Added elements, encoded as they come (`packFam` set: a full sync). */
  private readonly packed = new Map<string, PackedElems>();
  private readonly writer?: ElemWriter;
  /** Counts for reports. */
  changedChains = 0;

  /**
   * `packFam`: encode added elements as they come instead of keeping them (a full sync: its Elems
   * then die young; see packed.ts). Ops then carry them as 'addPacked'.
   */
  constructor(private readonly packFam?: IpFamily) {
    if (packFam) this.writer = new ElemWriter();
  }

  delElem(map: string, e: Elem): void { push(this.delElems, map, e); }
  addElem(map: string, e: Elem): void {
    if (this.packFam) this.pack(map).add(e);
    else push(this.addElems, map, e);
  }
  /** A destination's pick elements (packed straight from its endpoints in a full sync). */
  addPicks(d: PickDest): void {
    if (this.packFam) this.pack(d.map).addPicks(d);
    else for (const e of pickElems(d)) push(this.addElems, d.map, e);
  }
  addAll(map: string, es: Elem[]): void {
    if (this.packFam) {
      const p = this.pack(map);
      for (let i = 0; i < es.length; i++) p.add(es[i]);
      return;
    }
    const l = this.addElems.get(map);
    if (!l) this.addElems.set(map, es.slice());
    else for (let i = 0; i < es.length; i++) l.push(es[i]);
  }
  private pack(map: string): PackedElems {
    let p = this.packed.get(map);
    if (!p) this.packed.set(map, (p = new PackedElems(this.packFam!, this.writer)));
    return p;
  }
  flushChain(name: string): void { this.flush.push(name); this.changedChains++; }
  delChain(name: string): void { this.delChains.push(name); }
  delSet(name: string): void { this.delSets.push(name); }
  addSet(name: string, timeoutSec: number): void { this.addSets.push({ kind: 'addSet', set: { name, kind: 'affinity', timeoutSec } }); }
  addPickMap(name: string, kind: 'pickVipMap' | 'pickPortMap'): void { this.addSets.push({ kind: 'addSet', set: { name, kind } }); }
  addChain(name: string): void { this.addChains.push(name); this.changedChains++; }
  addRules(chain: string, stmts: Stmt[]): void { for (const stmt of stmts) this.rules.push({ chain, stmt }); }

  /** Net change of each set's element count in this batch. */
  elemDeltas(): Map<string, number> {
    const d = new Map<string, number>();
    for (const [set, l] of this.addElems) d.set(set, l.length);
    for (const [set, p] of this.packed) d.set(set, (d.get(set) ?? 0) + p.count);
    for (const [set, l] of this.delElems) d.set(set, (d.get(set) ?? 0) - l.length);
    return d;
  }

  get empty(): boolean {
    return this.delElems.size + this.flush.length + this.delChains.length + this.delSets.length + this.addSets.length +
      this.addChains.length + this.rules.length + this.addElems.size + this.packed.size === 0;
  }

  /** The ops, sets created with the capacity `sizeOf` gives them. */
  ops(sizeOf: (set: string) => number | undefined = () => undefined): Op[] {
    const ops: Op[] = [];
    for (const [set, elems] of this.delElems) for (const c of elemChunks(elems)) ops.push({ kind: 'delElems', set, elems: c });
    for (const name of this.flush) ops.push({ kind: 'flushChain', name });
    for (const name of this.delChains) ops.push({ kind: 'delChain', name });
    for (const name of this.delSets) ops.push({ kind: 'delSet', name });
    for (const op of this.addSets) {
      const size = op.kind === 'addSet' ? sizeOf(op.set.name) : undefined;
      ops.push(size === undefined || op.kind !== 'addSet' ? op : { ...op, set: { ...op.set, size } });
    }
    for (const name of this.addChains) ops.push({ kind: 'addChain', chain: { name } });
    for (const r of this.rules) ops.push({ kind: 'addRule', chain: r.chain, stmt: r.stmt });
    for (const [set, elems] of this.addElems) for (const c of elemChunks(elems)) ops.push({ kind: 'addElems', set, elems: c });
    for (const [set, elems] of this.packed) ops.push({ kind: 'addPacked', set, elems });
    return ops;
  }
}

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const l = m.get(k);
  if (l) l.push(v); else m.set(k, [v]);
}


const sameRules = (a: Stmt[], b: Stmt[]): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Diff one service's program (old -> new) into `c`, and update the model's shared bookkeeping. */
export function diffProgram(model: TableModel, oldP: Program | undefined, newP: Program, c: OpCollector): void {
  if (!oldP) { addProgram(model, newP, c); return; }
  // Elements of the shared maps.
  const oldElems = indexElems(oldP), newElems = indexElems(newP);
  for (const [map, olds] of oldElems) {
    const news = newElems.get(map);
    for (const [id, e] of olds) {
      const n = news?.get(id);
      if (!n || !sameElem(n, e)) c.delElem(map, e);
    }
  }
  for (const [map, news] of newElems) {
    const olds = oldElems.get(map);
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
  addPickMaps(model, newP, c);
  // Affinity sets (the timeout is in the name).
  for (const name of oldP.sets.keys()) if (!newP.sets.has(name)) c.delSet(name);
  for (const [name, t] of newP.sets) if (!oldP.sets.has(name)) c.addSet(name, t);
  // Shared set elements, reference counted.
  for (const [set, olds] of oldP.shared) {
    const refs = model.sharedRefs.get(set);
    for (const [id, e] of olds) {
      if (newP.shared.get(set)?.has(id)) continue;
      if ((refs?.drop(id) ?? 0) <= 0) c.delElem(set, e);
    }
  }
  for (const [set, news] of newP.shared) {
    let refs = model.sharedRefs.get(set);
    if (!refs) model.sharedRefs.set(set, (refs = new RefCounts()));
    for (const [id, e] of news) {
      if (oldP.shared.get(set)?.has(id)) continue;
      if (refs.add(id) === 1) c.addElem(set, e);
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

/** The picks map shards a program's picks use that the kernel does not have yet (created on first use). */
function addPickMaps(model: TableModel, p: Program, c: OpCollector): void {
  for (const { map } of p.picks) {
    if (model.shards.has(map)) continue;
    model.shards.add(map);
    c.addPickMap(map, map.startsWith(`${SHARED_NAMES.picksVip}-`) || map.startsWith(`${SHARED_NAMES.picksVipLocal}-`) ? 'pickVipMap' : 'pickPortMap');
  }
}

/** diffProgram from nothing (a full sync, a new service): everything of `p` is added. */
function addProgram(model: TableModel, p: Program, c: OpCollector): void {
  for (const [map, news] of p.elems) c.addAll(map, news);
  for (const d of p.picks) c.addPicks(d);
  for (const [name, rules] of p.chains) { c.addChain(name); c.addRules(name, rules); }
  addPickMaps(model, p, c);
  for (const [name, t] of p.sets) c.addSet(name, t);
  for (const [set, news] of p.shared) {
    let refs = model.sharedRefs.get(set);
    if (!refs) model.sharedRefs.set(set, (refs = new RefCounts()));
    for (const [id, e] of news) if (refs.add(id) === 1) c.addElem(set, e);
  }
  for (const [name, rules] of p.sharedChains) {
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

/**
 * Counts the batch's elements into the sized sets; sets created by this batch (every set on a full
 * sync) get their capacity. Returns a set the batch would overflow, if any (the caller then does a
 * full sync instead).
 */
export function applyCapacity(model: TableModel, c: OpCollector, fresh: boolean): { set: string; count: number; capacity: number } | undefined {
  let over: { set: string; count: number; capacity: number } | undefined;
  if (fresh) for (const s of SHARED_SETS) if (sizedSet(s.name)) model.counts.set(s.name, 0);
  for (const [set, d] of c.elemDeltas()) {
    if (!sizedSet(set)) continue;
    const count = (model.counts.get(set) ?? 0) + d;
    model.counts.set(set, count);
    const cap = model.capacity.get(set);
    if (cap !== undefined && !fresh && count > cap) over ??= { set, count, capacity: cap };
  }
  for (const [set, count] of model.counts) if (fresh || !model.capacity.has(set)) model.capacity.set(set, capacityFor(count));
  return over;
}

/** Update one service in the model, its changes collected into `c`. */
export function updateService(model: TableModel, key: string, svc: Service | undefined, node: NodeInfo | undefined, c: OpCollector): void {
  const old = model.programs.get(key);
  // Rendering is a pure function of (service, node, slots): the old program is rendered again.
  const oldP = old ? buildProgram(old.svc, model.fam, { node: old.node, prevSlots: old.slots }) : undefined;
  const newP = svc ? buildProgram(svc, model.fam, { node, prevSlots: oldP?.slots }) : emptyProgram();
  diffProgram(model, oldP, newP, c);
  if (!svc || newP.chains.size + newP.elems.size + newP.picks.length + newP.sets.size + newP.shared.size + newP.sharedChains.size === 0) model.programs.delete(key);
  else model.programs.set(key, { svc, node, slots: keptSlots(newP.slots) });
}

/** Ops that replace the table with the full state (one transaction: old table deleted, new one built). */
export function fullSyncOps(model: TableModel, services: Iterable<[string, Service]>, node: NodeInfo | undefined): Op[] {
  const c = new OpCollector();
  // A service without an address of this family has nothing here (a fresh model has nothing of it).
  for (const [key, svc] of services) if (inFamily(svc, model.fam)) updateService(model, key, svc, node, c);
  settleSharedChains(model, c);
  applyCapacity(model, c, true);
  return [...baseOps(model.fam, baseOptions(model.fam, node, model.fastPath), model.sizeOf), ...c.ops(model.sizeOf)];
}

/**
 * fullSyncOps, giving the event loop a turn whenever `y`'s budget is spent; the same ops, except
 * that added elements come packed ('addPacked', the same elements in the same order and chunks).
 */
export async function fullSyncOpsChunked(model: TableModel, services: Iterable<[string, Service]>, node: NodeInfo | undefined, y: Yielder): Promise<Op[]> {
  const c = new OpCollector(model.fam); // elements packed as they come
  let k = 0;
  for (const [key, svc] of services) {
    // Every service counts toward the check: skipping the other family's services adds up on a large
    // cluster. Checked every 4th: V8's incremental marking steps can land within a few services.
    if ((++k & 3) === 0 && y.due()) await y.turn();
    if (!inFamily(svc, model.fam)) continue; // as in fullSyncOps
    updateService(model, key, svc, node, c);
  }
  settleSharedChains(model, c);
  applyCapacity(model, c, true);
  await y.maybe();
  const ops = baseOps(model.fam, baseOptions(model.fam, node, model.fastPath), model.sizeOf);
  pushAll(ops, c.ops(model.sizeOf));
  await y.maybe();
  return ops;
}

export { SHARED_SETS, elemId };
