// The socket load balancer's Dataplane: keeps what it wrote to the maps and, per sync, writes only what
// changed, in an order that keeps every lookup of the BPF program valid:
//   1. new or changed backends   2. slots >= 1   3. slot 0 (the count, affinity, flags)
//   4. removed slot 0s           5. removed slots   6. removed backends
// so a connect() never follows a slot to a missing backend or a count past the last slot. Each group
// goes to the kernel as one batched map update / delete. Then the UDP sockets the programs connected to
// a backend that left a UDP service are destroyed (for that service only), so their clients reconnect.
// A full sync reads the maps back from the kernel (they are pinned: after a restart they still hold
// the previous process's state and keep balancing) and converges them to the ENLS the same way, so a
// restart never interrupts the service. A failed batch throws: the KernelSink's next sync is a full one.
import type { NodeInfo, Service } from '../../model/enls';
import type { EbpfLoader, EbpfMapGroup } from '../../native/ebpf';
import type { Dataplane, ServiceChange, SyncReport } from '../kernel/dataplane';
import { BACKEND_MAP, backendIdOfHex, DEFAULT_MAP_ENTRIES, isHeadHex, SVC_KEY_SIZE, SVC_MAP } from './maps';
import { planService, serviceEntries, type Ids } from './plan';

/**
 * What one service put in the desired maps: its service-map keys (slot 0 keys are also its service-id
 * keys) and its backend-id keys. Kept so that a change removes exactly these without planning the old
 * service again (that was half of an update's CPU); ~2 MB at 10k services x 10 endpoints.
 */
interface Footprint { svc: string[]; be: string[] }

export class EbpfDataplane implements Dataplane {
  readonly name = 'ebpf';
  private lb: EbpfLoader | undefined;
  /** Each planned service's footprint, by service key. */
  private footprints = new Map<string, Footprint>();
  /**
   * Services that did not fit in the service map (--ebpf-map-entries), by key. They have no entry, so
   * connect() leaves their addresses alone and the nft part of `--to ebpf` DNATs them like any packet;
   * they are planned again as soon as there is room.
   */
  private overflow = new Map<string, Service>();
  // Map contents as hex text (keys and values): desired (the plans) and applied (what the kernel has).
  private desiredSvc = new Map<string, string>();
  private desiredBe = new Map<number, string>();
  private appliedSvc = new Map<string, string>();
  private appliedBe = new Map<number, string>();
  private backendIds = new Map<string, number>();
  private serviceIds = new Map<string, number>();
  private nextBackend = 1;
  private nextService = 1;

  /** The open in progress (started with the backend, so that it overlaps the initial lists). */
  private opening: Promise<EbpfLoader> | undefined;
  private openMs = 0;

  /**
   * `open`: attaches (or takes over) the programs and pinned maps. Started at once, on the addon's
   * worker thread, while the source lists the cluster: it is ~50 ms of the first sync otherwise.
   * Programs attached before the maps are filled find no entry and leave connect() alone, as no
   * program would. A failed open is tried again at the next sync.
   */
  constructor(private readonly open: () => Promise<EbpfLoader>, private readonly log: (m: string) => void,
    /** Entries of the service map (its max_entries). */
    private readonly capacity = DEFAULT_MAP_ENTRIES) {
    this.startOpen();
  }

  /** Services left to the nft part because the service map is full. */
  get overflowed(): number { return this.overflow.size; }

  /**
   * Plans the service if its entries fit beside the others (`freed`: entries about to be removed);
   * otherwise records it as overflowed and returns undefined.
   */
  private planIfFits(key: string, svc: Service, freed = 0): Footprint | undefined {
    if (this.desiredSvc.size - freed + serviceEntries(svc, this.node) > this.capacity) {
      this.overflow.set(key, svc);
      return undefined;
    }
    this.overflow.delete(key);
    return this.plan(svc);
  }

  private reportOverflow(): void {
    if (this.overflow.size === 0) return;
    let need = this.desiredSvc.size;
    for (const svc of this.overflow.values()) need += serviceEntries(svc, this.node);
    this.log(`ebpf: the service map is full (${this.capacity} entries, --ebpf-map-entries): ${this.overflow.size} service${this.overflow.size === 1 ? '' : 's'} that need ` +
      `${need - this.desiredSvc.size} more entries are served by the nft part only (DNAT instead of connect()-time balancing); ` +
      `restart with --ebpf-map-entries ${Math.ceil((need * 1.25) / 1024) * 1024} or more (after --ebpf-cleanup: pinned maps keep their size)`);
  }

  private startOpen(): void {
    const t0 = performance.now();
    this.opening = this.open().then((lb) => { this.openMs = performance.now() - t0; return lb; });
    this.opening.catch(() => {});   // reported by loader(), at the sync that needs it
  }

  private async loader(): Promise<EbpfLoader> {
    if (!this.lb) {
      if (!this.opening) this.startOpen();
      try {
        this.lb = await this.opening!;
      } finally {
        this.opening = undefined;
      }
      const i = this.lb.info;
      this.log(`ebpf: ${i.programs.length} programs attached from ${i.object} in ${this.openMs.toFixed(0)} ms; reused ${i.reusedMaps} pinned maps and ${i.reusedLinks} pinned links`);
    }
    return this.lb;
  }

  /** The node item of the last full sync (node ports answer on its addresses). */
  private node: NodeInfo | undefined;

  /** Ids for a plan, pushing each backend-id key it asks for to `beKeys`. */
  private ids(beKeys: string[]): Ids {
    return {
      backend: (k) => {
        beKeys.push(k);
        let id = this.backendIds.get(k);
        if (id === undefined) this.backendIds.set(k, (id = this.nextBackend++));
        return id;
      },
      service: (k) => {
        let id = this.serviceIds.get(k);
        if (id === undefined) this.serviceIds.set(k, (id = this.nextService++));
        return id;
      },
    };
  }

  /** Plans the service straight into the desired maps; returns what it put there. */
  private plan(svc: Service): Footprint {
    const fp: Footprint = { svc: [], be: [] };
    planService(svc, this.ids(fp.be), this.node, { svc: this.desiredSvc, backends: this.desiredBe }, fp.svc);
    return fp;
  }

  async fullSync(services: Service[], node: NodeInfo | undefined, _revision?: number): Promise<SyncReport> {
    const lb = await this.loader();
    // A node item change always comes as a full sync (KernelSink): updates plan with this one.
    this.node = node;
    const t0 = performance.now();
    let syscalls = 0;
    // What the kernel has (the previous process's state after a restart).
    const svcDump = await lb.dump(SVC_MAP);
    const beDump = await lb.dump(BACKEND_MAP);
    syscalls += svcDump.syscalls + beDump.syscalls;
    this.appliedSvc = new Map();
    for (let i = 0; i < svcDump.count; i++) {
      const k = svcDump.keys.subarray(i * SVC_KEY_SIZE, (i + 1) * SVC_KEY_SIZE).toString('hex');
      const v = svcDump.values.subarray(i * svcDump.valueSize, (i + 1) * svcDump.valueSize);
      this.appliedSvc.set(k, v.toString('hex'));
      if (isHeadHex(k)) this.nextService = Math.max(this.nextService, v.readUInt32LE(12) + 1);   // svc_value.svc_id
    }
    this.appliedBe = new Map();
    for (let i = 0; i < beDump.count; i++) {
      const id = beDump.keys.readUInt32LE(i * 4);
      this.appliedBe.set(id, beDump.values.subarray(i * beDump.valueSize, (i + 1) * beDump.valueSize).toString('hex'));
      this.nextBackend = Math.max(this.nextBackend, id + 1);
    }
    // Ids of this process are kept while still used, so a periodic resync rewrites nothing.
    this.footprints.clear();
    this.overflow.clear();
    this.desiredSvc.clear();
    this.desiredBe.clear();
    for (const svc of services) {
      const key = `svc/${svc.namespace}/${svc.name}`;
      const fp = this.planIfFits(key, svc);
      if (fp) this.footprints.set(key, fp);
    }
    this.reportOverflow();
    const usedBe = new Set<string>(), usedSvc = new Set<string>();
    for (const fp of this.footprints.values()) {
      for (const k of fp.be) usedBe.add(k);
      for (const k of fp.svc) if (isHeadHex(k)) usedSvc.add(k);
    }
    for (const k of [...this.backendIds.keys()]) if (!usedBe.has(k)) this.backendIds.delete(k);
    for (const k of [...this.serviceIds.keys()]) if (!usedSvc.has(k)) this.serviceIds.delete(k);
    const r = await this.converge(lb, keysOfBoth(this.desiredSvc, this.appliedSvc), keysOfBoth(this.desiredBe, this.appliedBe));
    return { messages: r.messages + syscalls, bytes: r.bytes, ms: performance.now() - t0 };
  }

  async update(changes: ServiceChange[], _node: NodeInfo | undefined, _revision?: number): Promise<SyncReport> {
    const lb = await this.loader();
    const touchedSvc = new Set<string>(), touchedBe = new Set<number>();
    const overflowBefore = this.overflow.size;
    for (const ch of changes) {
      const old = this.footprints.get(ch.key);
      this.footprints.delete(ch.key);
      this.overflow.delete(ch.key);
      // The new service first: the backends it keeps still have their encoding in the desired map.
      const next = ch.new ? this.planIfFits(ch.key, ch.new, old?.svc.length) : undefined;
      if (next) {
        this.footprints.set(ch.key, next);
        for (const k of next.svc) touchedSvc.add(k);
        for (const k of next.be) touchedBe.add(this.backendIds.get(k)!);
      }
      if (!old) continue;
      // Then what only the old one had. Ids of endpoints that left are freed for good (never reused:
      // affinity entries may still name them).
      const keptSvc = new Set(next?.svc), keptBe = new Set(next?.be);
      for (const k of old.svc) {
        if (keptSvc.has(k)) continue;
        this.desiredSvc.delete(k);
        touchedSvc.add(k);
        if (isHeadHex(k)) this.serviceIds.delete(k);
      }
      for (const k of old.be) {
        if (keptBe.has(k)) continue;
        const id = this.backendIds.get(k);
        if (id === undefined) continue;
        this.desiredBe.delete(id);
        this.backendIds.delete(k);
        touchedBe.add(id);
      }
    }
    // Room made by removals: services that did not fit before, in the order they overflowed.
    for (const [key, svc] of this.overflow) {
      const fp = this.planIfFits(key, svc);
      if (!fp) break;
      this.footprints.set(key, fp);
      for (const k of fp.svc) touchedSvc.add(k);
      for (const k of fp.be) touchedBe.add(this.backendIds.get(k)!);
    }
    if (this.overflow.size > overflowBefore) this.reportOverflow();
    return this.converge(lb, touchedSvc, touchedBe);
  }

  /** Writes the difference between desired and applied for the touched keys, in the safe order. */
  private async converge(lb: EbpfLoader, touchedSvc: Iterable<string>, touchedBe: Iterable<number>): Promise<SyncReport> {
    const beUp: number[] = [], beDel: number[] = [];
    const slotUp: string[] = [], headUp: string[] = [], headDel: string[] = [], slotDel: string[] = [];
    for (const id of touchedBe) {
      const want = this.desiredBe.get(id), have = this.appliedBe.get(id);
      if (want !== undefined && want !== have) beUp.push(id);
      else if (want === undefined && have !== undefined) beDel.push(id);
    }
    for (const k of touchedSvc) {
      const want = this.desiredSvc.get(k), have = this.appliedSvc.get(k);
      const head = isHeadHex(k);
      if (want !== undefined && want !== have) (head ? headUp : slotUp).push(k);
      else if (want === undefined && have !== undefined) (head ? headDel : slotDel).push(k);
    }
    const svcGroup = (op: 'update' | 'delete', keys: string[]): EbpfMapGroup => ({
      map: SVC_MAP, op, count: keys.length,
      keys: Buffer.from(keys.join(''), 'hex'),
      ...(op === 'update' ? { values: Buffer.from(keys.map((k) => this.desiredSvc.get(k)!).join(''), 'hex') } : {}),
    });
    const beGroup = (op: 'update' | 'delete', ids: number[]): EbpfMapGroup => ({
      map: BACKEND_MAP, op, count: ids.length,
      keys: idsBuffer(ids),
      ...(op === 'update' ? { values: Buffer.from(ids.map((id) => this.desiredBe.get(id)!).join(''), 'hex') } : {}),
    });
    const groups = [beGroup('update', beUp), svcGroup('update', slotUp), svcGroup('update', headUp),
      svcGroup('delete', headDel), svcGroup('delete', slotDel), beGroup('delete', beDel)].filter((g) => g.count > 0);
    const bytes = groups.reduce((n, g) => n + g.keys.length + (g.values?.length ?? 0), 0);
    if (groups.length === 0) return { messages: 0, bytes: 0, ms: 0 };
    const gone = this.goneUdpPairs(touchedSvc);
    const r = await lb.apply(groups);
    for (const id of beUp) this.appliedBe.set(id, this.desiredBe.get(id)!);
    for (const id of beDel) this.appliedBe.delete(id);
    for (const k of [...slotUp, ...headUp]) this.appliedSvc.set(k, this.desiredSvc.get(k)!);
    for (const k of [...headDel, ...slotDel]) this.appliedSvc.delete(k);
    const report = { messages: r.syscalls, bytes, ms: r.ms };
    if (gone.length) {
      try {
        const d = await lb.destroyUdp(Buffer.concat(gone), gone.length);
        report.messages += d.syscalls;
        this.destroyed += d.destroyed;
        this.log(`ebpf: destroyed ${d.destroyed} UDP sockets of ${gone.length} removed (backend, service) pairs (${d.namespaces} network namespaces searched)`);
      } catch (e) {
        // The maps are right; only already-connected UDP clients keep talking to a gone endpoint.
        this.log(`ebpf: destroying UDP sockets of removed backends failed: ${(e as Error).message}`);
      }
    }
    return report;
  }

  /** Sockets destroyed because their backend was removed, in total. */
  destroyed = 0;

  /**
   * kpng_gone keys (backend value + service addr[16], port, pad) for every backend that the touched UDP
   * service addresses had in the kernel and no longer have in the desired state.
   */
  private goneUdpPairs(touched: Iterable<string>): Buffer[] {
    const backendsOf = (svc: Map<string, string>, be: Map<number, string>) => {
      const out = new Map<string, Set<string>>();
      for (const k of touched) {
        if (k.charCodeAt(36) !== 49 || k.charCodeAt(37) !== 49 || isHeadHex(k)) continue;   // proto byte 17: UDP; slots only
        const v = svc.get(k);
        const b = v && be.get(backendIdOfHex(v));
        if (!b) continue;
        const vip = k.slice(0, 36);   // addr[16] + port
        if (!out.has(vip)) out.set(vip, new Set());
        out.get(vip)!.add(b);
      }
      return out;
    };
    const before = backendsOf(this.appliedSvc, this.appliedBe);
    if (before.size === 0) return [];
    const after = backendsOf(this.desiredSvc, this.desiredBe);
    const out = new Map<string, Buffer>();
    for (const [vip, bs] of before) {
      for (const b of bs) {
        if (after.get(vip)?.has(b)) continue;
        const key = b + vip + '0000';
        out.set(key, Buffer.from(key, 'hex'));
      }
    }
    return [...out.values()];
  }

  /** What the maps hold, as this dataplane believes (tests, debugging). */
  get counts(): { services: number; slots: number; backends: number } {
    let heads = 0;
    for (const k of this.appliedSvc.keys()) if (isHeadHex(k)) heads++;
    return { services: heads, slots: this.appliedSvc.size - heads, backends: this.appliedBe.size };
  }

  async close(): Promise<void> {
    // An open still in progress is finished and closed (its handle would leak otherwise).
    const lb = this.lb ?? (await this.opening?.catch(() => undefined));
    this.lb = undefined;
    this.opening = undefined;
    await lb?.close();
  }
}

/** The keys of a and then those only b has; iterable more than once (converge reads it twice). */
function keysOfBoth<K>(a: Map<K, unknown>, b: Map<K, unknown>): Iterable<K> {
  return {
    *[Symbol.iterator]() {
      yield* a.keys();
      for (const k of b.keys()) if (!a.has(k)) yield k;
    },
  };
}

/** Backend ids as the map's u32 keys (little-endian), one buffer. */
function idsBuffer(ids: number[]): Buffer {
  const b = Buffer.allocUnsafe(ids.length * 4);
  for (let i = 0; i < ids.length; i++) b.writeUInt32LE(ids[i], i * 4);
  return b;
}
