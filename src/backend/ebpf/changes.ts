// What one sync sends to the socket LB's maps: the entries that differ between what the maps hold (a
// service's previous plan, or the kernel's maps as dumped) and the new plans, in the six groups of the
// safe order (dataplane.ts), and the backends each service address lost (their sockets are destroyed).
import type { EbpfDump, EbpfMapGroup } from '../../native/ebpf';
import type { Yielder } from '../../util/yielder';
import { BACKEND_MAP, BACKEND_VALUE_SIZE, ByteWriter, isHeadKey, packLatin1, packU32, SVC_KEY_SIZE, SVC_MAP, SVC_VALUE_SIZE, svcIdOfValue, u32At, vipProtoOfKey } from './maps';
import type { ServicePlan } from './plan';

/**
 * What the maps hold, as dumped from the kernel or as a service's previous plan wrote them: service-map
 * key -> value (a slot's value starts with its backend id), backend id -> value (byte strings).
 */
export interface MapContents { svc: Map<string, string>; be: Map<number, string> }

/** The maps as dumped from the kernel, with the highest ids they hold. */
export interface KernelMaps extends MapContents { maxService: number; maxBackend: number }

/**
 * A plan's entries as the maps hold them once it is written (a slot's value: its backend id alone),
 * added to `out` (a later plan's entry replaces an earlier one's with the same key, as in the maps).
 */
export function contentsOf(p: ServicePlan | undefined, out: MapContents = { svc: new Map(), be: new Map() }): MapContents {
  if (!p) return out;
  for (let j = 0; j < p.heads; j++) out.svc.set(p.headKey(j), p.headValue(j));
  for (let j = 0; j < p.slots; j++) out.svc.set(p.slotKey(j), p.section(p.slotIdsAt + j * 4, p.slotIdsAt + (j + 1) * 4));
  for (let i = 0; i < p.backends; i++) out.be.set(p.backendId(i), p.backendValue(i));
  return out;
}

export async function readKernel(svc: EbpfDump, be: EbpfDump, y: Yielder): Promise<KernelMaps> {
  const out: KernelMaps = { svc: new Map(), be: new Map(), maxService: 0, maxBackend: 0 };
  for (let i = 0; i < svc.count; i++) {
    if ((i & 1023) === 0 && y.due()) await y.turn();
    const k = svc.keys.toString('latin1', i * SVC_KEY_SIZE, (i + 1) * SVC_KEY_SIZE);
    const v = svc.values.toString('latin1', i * svc.valueSize, i * svc.valueSize + SVC_VALUE_SIZE);
    out.svc.set(k, v);
    if (isHeadKey(k)) out.maxService = Math.max(out.maxService, svcIdOfValue(v));
  }
  for (let i = 0; i < be.count; i++) {
    if ((i & 1023) === 0 && y.due()) await y.turn();
    const id = be.keys.readUInt32LE(i * 4);
    out.be.set(id, be.values.toString('latin1', i * be.valueSize, i * be.valueSize + BACKEND_VALUE_SIZE));
    out.maxBackend = Math.max(out.maxBackend, id);
  }
  return out;
}

/**
 * The ids the maps already hold, for a full sync over maps that hold something (a restart, a resync):
 * the same service address and endpoint keep their backend id, and the same service address its
 * service id, so a resync rewrites nothing that did not change (and a restart needs no room for a
 * second copy of every backend). Read per service address, when a plan first asks for it.
 */
export class Adoption {
  /** Per slot 0 key: the kernel's backend value -> id of its slots. */
  private readonly byHead = new Map<string, Map<string, number>>();
  private readonly taken = new Set<number>();
  private readonly takenServices = new Set<number>();
  private readonly key = new ByteWriter(SVC_KEY_SIZE);
  constructor(private readonly kernel: KernelMaps) {}

  /** The kernel's id of this endpoint at this service address, once (undefined: none, or already given). */
  backend(headKey: string, endpointKey: string): number | undefined {
    let ids = this.byHead.get(headKey);
    if (!ids) this.byHead.set(headKey, (ids = this.slotsOf(headKey)));
    const id = ids.get(endpointKey.slice(0, BACKEND_VALUE_SIZE));
    if (id === undefined || this.taken.has(id)) return undefined;
    this.taken.add(id);
    return id;
  }

  service(headKey: string): number | undefined {
    const v = this.kernel.svc.get(headKey);
    const id = v === undefined ? undefined : svcIdOfValue(v);
    if (id === undefined || this.takenServices.has(id)) return undefined;
    this.takenServices.add(id);
    return id;
  }

  /** The backends of a service address's slots 1..count in the kernel's maps. */
  private slotsOf(headKey: string): Map<string, number> {
    const out = new Map<string, number>();
    const head = this.kernel.svc.get(headKey);
    if (head === undefined) return out;
    const key = this.key.reset();
    key.latin1(headKey);
    for (let slot = 1, count = u32At(head, 4); slot <= count; slot++) {
      key.n = 20;
      key.u16le(slot);
      key.n = SVC_KEY_SIZE;
      const v = this.kernel.svc.get(key.text());
      const b = v === undefined ? undefined : this.kernel.be.get(u32At(v, 0));
      if (b !== undefined) out.set(b, u32At(v!, 0));
    }
    return out;
  }
}

/** The entries one sync writes and deletes, and the backends each service address lost. */
export class MapChanges {
  beUp: number[] = [];
  beUpValues: string[] = [];
  slotUp: string[] = [];
  slotUpIds: number[] = [];
  headUp: string[] = [];
  headUpValues: string[] = [];
  headDel: string[] = [];
  slotDel: string[] = [];
  beDel: number[] = [];
  /** Service address (19 bytes) -> the backend values it had and no longer has (for socket destroy). */
  gone = new Map<string, Set<string>>();
  /** Keys the writes add to each map (not held before): the room the sync needs beside what the maps hold. */
  newSvc = 0;
  newBe = 0;
  /** Slot 0 keys the maps held that the plans keep, with the plans' values (for roomFirst groups). */
  heldHeads = new Map<string, string>();

  /** `track(vip)`: whether the sockets of a service address's lost backends are to be destroyed. */
  constructor(private readonly track: (vip: string) => boolean) {}

  lost(vip: string, backend: string | undefined): void {
    if (backend === undefined || !this.track(vip)) return;
    let s = this.gone.get(vip);
    if (!s) this.gone.set(vip, (s = new Set()));
    s.add(backend);
  }

  /** What the plan still sends to a service address is not lost (a backend may have moved to another slot). */
  keep(plan: ServicePlan): void {
    if (this.gone.size === 0) return;
    let index: Map<number, number> | undefined;
    for (let j = 0; j < plan.slots; j++) {
      const at = plan.slotKeysAt + j * SVC_KEY_SIZE;
      const s = this.gone.get(vipProtoOfKey(plan.bytes, at));
      if (!s) continue;
      index ??= plan.backendIndex();
      s.delete(plan.backendValue(index.get(plan.slotId(j))!));
    }
  }

  /**
   * A key both written and deleted in one sync (a service address that moved from a removed service to
   * a new one in the same batch) is written: the deletes come after the writes.
   */
  private dropRewritten(): void {
    if (this.slotDel.length === 0 && this.headDel.length === 0) return;
    const up = new Set([...this.slotUp, ...this.headUp]);
    this.slotDel = this.slotDel.filter((k) => !up.has(k));
    this.headDel = this.headDel.filter((k) => !up.has(k));
    const ids = new Set(this.beUp);
    this.beDel = this.beDel.filter((id) => !ids.has(id));
  }

  /**
   * The groups in the safe order (empty ones left out). `roomFirst`: the maps cannot hold the new
   * entries beside the ones they replace, so the removals go first; a service address whose entries
   * change then has its slot 0 removed before them and written again last, so that meanwhile connect()
   * finds no entry and leaves it to the nft part (a slot 0 without its slots or backends would refuse).
   */
  async groups(y: Yielder, roomFirst = false): Promise<EbpfMapGroup[]> {
    const svcDelete = async (keys: string[]): Promise<EbpfMapGroup> =>
      ({ map: SVC_MAP, op: 'delete', count: keys.length, keys: await packLatin1(keys, SVC_KEY_SIZE, y, (k) => k) });
    const headUpdate = async (keys: string[], values: string[]): Promise<EbpfMapGroup> =>
      ({ map: SVC_MAP, op: 'update', count: keys.length, keys: await packLatin1(keys, SVC_KEY_SIZE, y, (k) => k), values: await packLatin1(values, SVC_VALUE_SIZE, y, (v) => v) });
    const beDelete = async (ids: number[]): Promise<EbpfMapGroup> =>
      ({ map: BACKEND_MAP, op: 'delete', count: ids.length, keys: await packU32(ids, 4, y, (id) => id) });
    // New or changed backends, then slots >= 1 (slot values: only the backend id set).
    const writes = async (): Promise<EbpfMapGroup[]> => [
      { map: BACKEND_MAP, op: 'update', count: this.beUp.length, keys: await packU32(this.beUp, 4, y, (id) => id), values: await packLatin1(this.beUpValues, BACKEND_VALUE_SIZE, y, (v) => v) },
      { map: SVC_MAP, op: 'update', count: this.slotUp.length, keys: await packLatin1(this.slotUp, SVC_KEY_SIZE, y, (k) => k), values: await packU32(this.slotUpIds, SVC_VALUE_SIZE, y, (id) => id) },
    ];
    let groups: EbpfMapGroup[];
    if (!roomFirst) {
      this.dropRewritten();
      groups = [...await writes(), await headUpdate(this.headUp, this.headUpValues), await svcDelete(this.headDel), await svcDelete(this.slotDel), await beDelete(this.beDel)];
    } else {
      // Deletes before writes: a key both deleted and written is written in the end (no dropRewritten).
      const heads = this.headsAround();
      groups = [await svcDelete(heads.off), await svcDelete([...new Set(this.slotDel)]), await beDelete([...new Set(this.beDel)]), ...await writes(), await headUpdate(heads.back, heads.backValues)];
    }
    return groups.filter((g) => g.count > 0);
  }

  /** Service addresses whose entries this sync changes (roomFirst takes them off meanwhile). */
  get changedAddresses(): number { return this.changed().size; }

  private changed(): Set<string> {
    const out = new Set<string>();
    for (const l of [this.slotUp, this.slotDel, this.headUp, this.headDel]) for (const k of l) out.add(vipProtoOfKey(k));
    return out;
  }

  /**
   * roomFirst's slot 0s: the ones removed first (those going, and every one held of an address whose
   * entries change) and the ones written last (the plans' slot 0s of those addresses).
   */
  private headsAround(): { off: string[]; back: string[]; backValues: string[] } {
    const changed = this.changed();
    const off = new Set(this.headDel);
    const back = this.headUp.slice(), backValues = this.headUpValues.slice();
    const written = new Set(this.headUp);
    for (const [k, v] of this.heldHeads) {
      if (!changed.has(vipProtoOfKey(k))) continue;
      off.add(k);
      if (!written.has(k)) { back.push(k); backValues.push(v); }
    }
    return { off: [...off], back, backValues };
  }
}

/** Adds k and v to the writes unless `have` holds the same value under k; takes k out of `have` (what is left there goes). */
function compare<K>(have: Map<K, string>, k: K, v: string, keys: K[], values: string[]): void {
  const was = have.get(k);
  have.delete(k);
  if (was === v) return;
  keys.push(k);
  values.push(v);
}

/**
 * The plans' entries that differ from what the maps hold (`kernel`, which it consumes): the kernel's
 * dump in a full sync (so it converges the maps from whatever they hold), or an update's previous plan
 * of one service (contentsOf). What is left in `kernel` afterwards is deleted.
 */
export async function diff(plans: ServicePlan[], kernel: MapContents, out: MapChanges, y: Yielder): Promise<void> {
  // Service-map entries first: a slot's previous backend is read from the backend map.
  for (let p = 0; p < plans.length; p++) {
    if ((p & 63) === 0 && y.due()) await y.turn();
    const plan = plans[p];
    for (let j = 0; j < plan.slots; j++) {
      const k = plan.slotKey(j), id = plan.slotId(j);
      const was = kernel.svc.get(k);
      if (was !== undefined) {
        kernel.svc.delete(k);
        const wasId = u32At(was, 0);
        if (wasId === id) continue;
        out.lost(vipProtoOfKey(k), kernel.be.get(wasId));
      } else out.newSvc++;
      out.slotUp.push(k);
      out.slotUpIds.push(id);
    }
    for (let j = 0; j < plan.heads; j++) {
      const k = plan.headKey(j), v = plan.headValue(j);
      if (kernel.svc.has(k)) out.heldHeads.set(k, v); else out.newSvc++;
      compare(kernel.svc, k, v, out.headUp, out.headUpValues);
    }
  }
  for (const [k, v] of kernel.svc) {
    if (isHeadKey(k)) {
      out.headDel.push(k);
    } else {
      out.slotDel.push(k);
      out.lost(vipProtoOfKey(k), kernel.be.get(u32At(v, 0)));
    }
  }
  if (out.gone.size > 0) {
    for (let p = 0; p < plans.length; p++) {
      if ((p & 63) === 0 && y.due()) await y.turn();
      out.keep(plans[p]);
    }
  }
  for (let p = 0; p < plans.length; p++) {
    if ((p & 63) === 0 && y.due()) await y.turn();
    const plan = plans[p];
    for (let i = 0; i < plan.backends; i++) {
      const id = plan.backendId(i);
      if (!kernel.be.has(id)) out.newBe++;
      compare(kernel.be, id, plan.backendValue(i), out.beUp, out.beUpValues);
    }
  }
  for (const id of kernel.be.keys()) out.beDel.push(id);
}

/**
 * How many entries differ between what the maps should hold (`want`, contentsOf) and what they hold
 * (`kernel`, which it consumes): missing or different, compared as diff() compares them (a slot by its
 * backend id), plus those the maps hold beyond `want`.
 */
export function countDiffering(want: MapContents, kernel: MapContents): number {
  let n = 0;
  for (const [k, v] of want.svc) {
    const has = kernel.svc.get(k);
    kernel.svc.delete(k);
    if (has === undefined || (isHeadKey(k) ? has !== v : u32At(has, 0) !== u32At(v, 0))) n++;
  }
  for (const [id, v] of want.be) {
    if (kernel.be.get(id) !== v) n++;
    kernel.be.delete(id);
  }
  return n + kernel.svc.size + kernel.be.size;
}

/** kpng_gone keys (backend value + service address, port, protocol + a pad byte) of the lost backends. */
export function goneKeys(gone: Map<string, Set<string>>): Buffer[] {
  const out: Buffer[] = [];
  for (const [vip, bs] of gone) for (const b of bs) out.push(Buffer.from(b + vip + '\0', 'latin1'));
  return out;
}
