// The socket load balancer's Dataplane: keeps what it wrote to the maps and, per sync, writes only what
// changed, in an order that keeps every lookup of the BPF program valid:
//   1. new or changed backends   2. slots >= 1   3. slot 0 (the count, affinity, flags)
//   4. removed slot 0s           5. removed slots   6. removed backends
// so a connect() never follows a slot to a missing backend or a count past the last slot. Each group
// goes to the kernel as one batched map update / delete. Then the TCP and UDP sockets the programs
// connected to a backend that left a service are destroyed (for that service only), so their clients
// reconnect (when the kernel can: LoaderInfo.socketDestroyOff).
// A full sync reads the maps back from the kernel (they are pinned: after a restart they still hold
// the previous process's state and keep balancing) and converges them to the ENLS the same way, so a
// restart never interrupts the service. A failed batch throws: the KernelSink's next sync is a full one.
// So after a sync that succeeded the kernel holds exactly the desired maps, and no copy of what was
// applied is kept: an update records the previous value of each entry it writes (a Journal) and sends
// those that differ.
import { serviceKey, type NodeInfo, type Service } from '../../model/enls';
import type { EbpfLoader, EbpfMapGroup } from '../../native/ebpf';
import { Yielder } from '../../util/yielder';
import { NeedsFullSync, type Dataplane, type ServiceChange, type SyncReport } from '../kernel/dataplane';
import { BACKEND_MAP, BACKEND_VALUE_SIZE, DEFAULT_MAP_ENTRIES, isHeadKey, isTcpKey, packLatin1, packU32, slotValuesBuffer, SVC_KEY_SIZE, SVC_MAP, SVC_VALUE_SIZE, svcIdOfValue, vipProtoOfKey } from './maps';
import { newPlan, planService, serviceEntries, serviceEntriesAtMost, type EbpfPlan, type Ids, type PlanMap, type PlanMaps } from './plan';

/**
 * What one service put in the desired maps: its service-map keys (slot 0 keys are also its service-id
 * keys) and its backends (endpoint key and id, side by side). Kept so that a change removes exactly
 * these without planning the old service again, and so that an endpoint that stays keeps its id.
 */
interface Footprint { keys: string[]; endpointKeys: string[]; backendIds: number[] }

/** A map's entries before a sync, for the keys the sync touched. */
interface Before<K, V> { touched(): Iterable<K>; before(k: K): V | undefined }

/**
 * A desired map as an update writes it: remembers the value each key had before its first write or
 * delete, so that the update sends only the entries that differ from what the kernel holds.
 */
class Journal<K, V> implements PlanMap<K, V>, Before<K, V> {
  private readonly old = new Map<K, V | undefined>();
  constructor(private readonly map: Map<K, V>) {}
  has(k: K): boolean { return this.map.has(k); }
  set(k: K, v: V): void {
    if (!this.old.has(k)) this.old.set(k, this.map.get(k));
    this.map.set(k, v);
  }
  delete(k: K): void {
    if (!this.old.has(k)) this.old.set(k, this.map.get(k));
    this.map.delete(k);
  }
  touched(): Iterable<K> { return this.old.keys(); }
  before(k: K): V | undefined { return this.old.has(k) ? this.old.get(k) : this.map.get(k); }
}

/** Everything the desired map or the kernel's copy has, the kernel's copy being the before. */
function againstKernel<K, V>(desired: Map<K, V>, kernel: Map<K, V>): Before<K, V> {
  // An empty kernel map (a first start): the desired keys alone, without a generator's turns.
  return { touched: () => (kernel.size === 0 ? desired.keys() : keysOfBoth(desired, kernel)), before: (k) => kernel.get(k) };
}

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
  /** The maps as planned; after a sync that succeeded, what the kernel holds. */
  private desired: PlanMaps = newPlan();
  private serviceIds = new Map<string, number>();
  private nextBackend = 1;
  private nextService = 1;

  /** The open in progress (started with the backend, so that it overlaps the initial lists). */
  private opening: Promise<EbpfLoader> | undefined;
  private openMs = 0;

  /**
   * `open`: attaches (or takes over) the programs and pinned maps. Started at once, on the addon's
   * worker thread, while the source lists the cluster, rather than adding to the first sync.
   * Programs attached before the maps are filled find no entry and leave connect() alone, as no
   * program would. A failed open is tried again at the next sync.
   */
  constructor(private readonly open: () => Promise<EbpfLoader>, private readonly log: (m: string) => void,
    /** Entries of the service map (its max_entries). */
    private readonly capacity = DEFAULT_MAP_ENTRIES,
    /**
     * destroyTcp: TCP sockets connected to a removed endpoint are destroyed too. Off by default: the
     * ENLS lists no endpoint that started terminating while others are ready, so a TCP connection
     * to it would be cut at once instead of draining as kube-proxy lets it (UDP has no such drain).
     */
    private readonly opts: { destroyTcp?: boolean } = {}) {
    this.startOpen();
  }

  /** Services left to the nft part because the service map is full. */
  get overflowed(): number { return this.overflow.size; }

  /** Entries in the service map (its slot 0s and other slots). */
  private get svcEntries(): number { return this.desired.heads.size + this.desired.slots.size; }

  /**
   * Plans the service into `out` if its entries fit beside the others (`freed`: entries about to be
   * removed), reusing the backend ids of `old`; otherwise records it as overflowed and returns undefined.
   */
  private planIfFits(key: string, svc: Service, out: EbpfPlan, old?: Footprint, freed = 0): Footprint | undefined {
    const room = this.capacity - (this.svcEntries - freed);
    // The exact count walks the service's destinations, as planService does next: only near the top.
    if (serviceEntriesAtMost(svc, this.node) > room && serviceEntries(svc, this.node) > room) {
      this.overflow.set(key, svc);
      return undefined;
    }
    this.overflow.delete(key);
    const fp: Footprint = { keys: [], endpointKeys: [], backendIds: [] };
    planService(svc, this.ids(old, fp), this.node, out, fp.keys);
    return fp;
  }

  private reportOverflow(): void {
    if (this.overflow.size === 0) return;
    let need = this.svcEntries;
    for (const svc of this.overflow.values()) need += serviceEntries(svc, this.node);
    this.log(`ebpf: the service map is full (${this.capacity} entries, --ebpf-map-entries): ${this.overflow.size} service${this.overflow.size === 1 ? '' : 's'} that need ` +
      `${need - this.svcEntries} more entries are served by the nft part only (DNAT instead of connect()-time balancing); ` +
      `restart with --ebpf-map-entries ${Math.ceil((need * 1.25) / 1024) * 1024} or more (the pinned maps are then replaced by maps of that size)`);
  }

  private startOpen(): void {
    const t0 = performance.now();
    this.opening = this.open().then((lb) => { this.openMs = performance.now() - t0; return lb; });
    this.opening.catch(() => {});   // reported by loader(), at the sync that needs it
  }

  private async loader(): Promise<EbpfLoader> {
    // Links severed since the last sync (the cgroup was removed): the programs run nowhere. A new open
    // replaces the links if the cgroup is back, and fails (the sync with it) while it is not.
    if (this.lb && this.checkLinks()) {
      const lb = this.lb;
      this.lb = undefined;
      await lb.close();
    }
    if (!this.lb) {
      if (!this.opening) this.startOpen();
      try {
        this.lb = await this.opening!;
      } finally {
        this.opening = undefined;
      }
      const i = this.lb.info;
      this.log(`ebpf: ${i.programs.length} programs attached from ${i.object} in ${this.openMs.toFixed(0)} ms; reused ${i.reusedMaps} pinned maps and ${i.reusedLinks} pinned links`);
      // What the pin directory held that could not be taken over as it was (once: the open is done once).
      for (const f of i.found ?? []) this.log(`ebpf: pin directory: ${f}`);
      if (i.hostNetns) this.log(`ebpf: only sockets of the host network namespace (cookie ${i.hostNetns}) are balanced at connect(); other namespaces' (pods') reach services through the nft part`);
      // Said once: a re-open (severed links) finds the same kernel.
      if (i.socketDestroyOff && !this.destroyOffSaid) {
        this.destroyOffSaid = true;
        this.log(`ebpf: socket destroy is off: ${i.socketDestroyOff}; sockets connected to a removed endpoint stay until their application closes them`);
      }
      this.fullSynced = false;
    }
    return this.lb;
  }

  private destroyOffSaid = false;

  /** Whether the open loader's maps had a full sync (an update alone would leave new maps incomplete). */
  private fullSynced = false;

  /** Set by watch(): told once when the links are found severed. */
  private onLost: ((why: string) => void) | undefined;
  private lostSaid = false;
  private watchTimer: NodeJS.Timeout | undefined;

  /**
   * Whether the open loader's links were severed, saying so (log, onLost) once per loss. A sync asks
   * first; the timer asks between syncs, so that a node where nothing changes still notices.
   */
  private checkLinks(): boolean {
    const gone = this.lb?.severed() ?? [];
    if (gone.length === 0) { this.lostSaid = false; return false; }
    if (!this.lostSaid) {
      this.lostSaid = true;
      const why = `the socket LB's links were severed (the cgroup they were attached to was removed; ${gone.join(', ')} run nowhere)`;
      this.log(`ebpf: ${why}; attaching again at the next sync`);
      this.onLost?.(why);
    }
    return true;
  }

  /** Looks at the links every `everyMs` between syncs (the sync itself looks first anyway). */
  watch(lost: (why: string) => void, everyMs = 5000): void {
    this.onLost = lost;
    clearInterval(this.watchTimer);
    this.watchTimer = setInterval(() => { try { this.checkLinks(); } catch { /* closed meanwhile */ } }, everyMs);
    this.watchTimer.unref();
  }

  /**
   * Why the socket LB is not programmed (undefined: it is), so that its state shows in the log once
   * per change rather than only in each failed sync's line.
   */
  private offReason: string | undefined;

  /** Runs a sync, saying in the log when the socket LB goes off (or stale) and when it is back. */
  private async tracked(run: () => Promise<SyncReport>, signal?: AbortSignal): Promise<SyncReport> {
    try {
      const r = await run();
      if (this.offReason !== undefined) this.log('ebpf: the socket LB is programmed again');
      this.offReason = undefined;
      return r;
    } catch (e) {
      if (e instanceof NeedsFullSync) throw e;   // not a failure: the KernelSink does a full sync now
      const msg = (e as Error).message;
      const why = this.lb
        ? `the socket LB is not programmed (its maps keep what they had): ${msg}`
        : `the socket LB is off (no programs attached): ${msg}`;
      // A stop is no failure; the same failure again is already said.
      if (!signal?.aborted && why !== this.offReason) {
        this.offReason = why;
        this.log(`ebpf: ${why}; connections it leaves alone go through the nft part (DNAT); tried again at every sync; /healthz turns unhealthy if this outlasts the health timeout`);
      }
      throw e;
    }
  }

  /** The node item of the last full sync (node ports answer on its addresses). */
  private node: NodeInfo | undefined;

  /**
   * Ids for planning one service: an endpoint it had before (`old`) keeps its backend id, a new one gets
   * the next; each is recorded in `fp`.
   */
  private ids(old: Footprint | undefined, fp: Footprint): Ids {
    let oldIds: Map<string, number> | undefined;
    return {
      backend: (k) => {
        if (old && !oldIds) oldIds = new Map(old.endpointKeys.map((ek, i) => [ek, old.backendIds[i]]));
        const id = oldIds?.get(k) ?? this.nextBackend++;
        fp.endpointKeys.push(k);
        fp.backendIds.push(id);
        return id;
      },
      service: (k) => {
        let id = this.serviceIds.get(k);
        if (id === undefined) this.serviceIds.set(k, (id = this.nextService++));
        return id;
      },
    };
  }

  fullSync(services: Service[], node: NodeInfo | undefined, _revision?: number, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    return this.tracked(() => this.fullSyncOnce(services, node, waiting, signal), signal);
  }

  update(changes: ServiceChange[], _node: NodeInfo | undefined, _revision?: number, waiting?: () => void): Promise<SyncReport> {
    return this.tracked(() => this.updateOnce(changes, waiting));
  }

  private async fullSyncOnce(services: Service[], node: NodeInfo | undefined, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    const lb = await this.loader();
    signal?.throwIfAborted();
    // A node item change always comes as a full sync (KernelSink): updates plan with this one.
    this.node = node;
    const t0 = performance.now();
    // At 50k services the maps hold over a million entries: every loop below gives the event loop a
    // turn every few ms (nothing else touches this dataplane meanwhile: the KernelSink runs one sync
    // at a time). A stop ends the sync at the next turn, before the maps are written.
    const y = new Yielder(undefined, signal);
    let syscalls = 0;
    // What the kernel has (the previous process's state after a restart).
    const svcDump = await lb.dump(SVC_MAP);
    const beDump = await lb.dump(BACKEND_MAP);
    syscalls += svcDump.syscalls + beDump.syscalls;
    const kernel = newPlan();
    for (let i = 0; i < svcDump.count; i++) {
      if ((i & 1023) === 0 && y.due()) await y.turn();
      const k = svcDump.keys.toString('latin1', i * SVC_KEY_SIZE, (i + 1) * SVC_KEY_SIZE);
      const at = i * svcDump.valueSize;
      if (isHeadKey(k)) {
        const v = svcDump.values.toString('latin1', at, at + SVC_VALUE_SIZE);
        kernel.heads.set(k, v);
        this.nextService = Math.max(this.nextService, svcIdOfValue(v) + 1);
      } else {
        kernel.slots.set(k, svcDump.values.readUInt32LE(at));   // svc_value.backend_id
      }
    }
    for (let i = 0; i < beDump.count; i++) {
      if ((i & 1023) === 0 && y.due()) await y.turn();
      const id = beDump.keys.readUInt32LE(i * 4);
      kernel.backends.set(id, beDump.values.toString('latin1', i * beDump.valueSize, i * beDump.valueSize + BACKEND_VALUE_SIZE));
      this.nextBackend = Math.max(this.nextBackend, id + 1);
    }
    // Ids of this process are kept while still used (backend ids through the old footprints), so a
    // periodic resync rewrites nothing.
    const old = this.footprints;
    this.footprints = new Map();
    this.overflow.clear();
    this.desired = newPlan();
    for (const svc of services) {
      if (y.due()) await y.turn();
      const key = serviceKey(svc.namespace, svc.name);
      const fp = this.planIfFits(key, svc, this.desired, old.get(key));
      if (fp) this.footprints.set(key, fp);
    }
    this.reportOverflow();
    for (const k of [...this.serviceIds.keys()]) if (!this.desired.heads.has(k)) this.serviceIds.delete(k);
    const r = await this.converge(lb, againstKernel(this.desired.heads, kernel.heads), againstKernel(this.desired.slots, kernel.slots),
      againstKernel(this.desired.backends, kernel.backends), y, waiting);
    this.fullSynced = true;
    // Maps were replaced at the open: the pinned links still ran the previous programs on the previous
    // maps (the last state, still balancing); the new maps are full now, so the links move.
    if (lb.info.pendingLinks > 0) {
      const n = lb.activate();
      this.log(`ebpf: ${n} pinned links moved to the new programs now that their new maps are filled`);
    }
    return { messages: r.messages + syscalls, bytes: r.bytes, ms: performance.now() - t0 };
  }

  private async updateOnce(changes: ServiceChange[], waiting?: () => void): Promise<SyncReport> {
    const lb = await this.loader();
    // Reopened since the last full sync (its links were severed): its maps may be new ones.
    if (!this.fullSynced) throw new NeedsFullSync('the socket LB was opened again');
    const heads = new Journal(this.desired.heads), slots = new Journal(this.desired.slots), backends = new Journal(this.desired.backends);
    const out: EbpfPlan = { heads, slots, backends };
    const overflowBefore = this.overflow.size;
    for (const ch of changes) {
      const old = this.footprints.get(ch.key);
      this.footprints.delete(ch.key);
      this.overflow.delete(ch.key);
      // The new service first: the backends it keeps still have their encoding in the desired map.
      const next = ch.new ? this.planIfFits(ch.key, ch.new, out, old, old?.keys.length) : undefined;
      if (next) this.footprints.set(ch.key, next);
      if (!old) continue;
      // Then what only the old one had. Ids of endpoints that left are freed for good (never reused:
      // affinity entries may still name them).
      const keptKeys = new Set(next?.keys), keptIds = new Set(next?.backendIds);
      for (const k of old.keys) {
        if (keptKeys.has(k)) continue;
        if (isHeadKey(k)) {
          heads.delete(k);
          this.serviceIds.delete(k);
        } else {
          slots.delete(k);
        }
      }
      for (const id of old.backendIds) if (!keptIds.has(id)) backends.delete(id);
    }
    // Room made by removals: services that did not fit before, in the order they overflowed.
    for (const [key, svc] of this.overflow) {
      const fp = this.planIfFits(key, svc, out);
      if (!fp) break;
      this.footprints.set(key, fp);
    }
    if (this.overflow.size > overflowBefore) this.reportOverflow();
    return this.converge(lb, heads, slots, backends, new Yielder(), waiting);
  }

  /**
   * Sends the entries whose desired value differs from their value before, in the safe order. The
   * desired maps are the kernel's afterwards; if the batch fails they are not, and the KernelSink's
   * next sync is a full one, which reads the kernel again.
   */
  private async converge(lb: EbpfLoader, heads: Before<string, string>, slots: Before<string, number>, backends: Before<number, string>, y: Yielder, waiting?: () => void): Promise<SyncReport> {
    const want = this.desired;
    const beUp: number[] = [], beDel: number[] = [];
    const slotUp: string[] = [], headUp: string[] = [], headDel: string[] = [], slotDel: string[] = [];
    const sort = async <K, V>(b: Before<K, V>, desired: Map<K, V>, up: K[], del: K[]) => {
      let n = 0;
      for (const k of b.touched()) {
        if ((++n & 1023) === 0 && y.due()) await y.turn();
        const w = desired.get(k), have = b.before(k);
        if (w !== undefined && w !== have) up.push(k);
        else if (w === undefined && have !== undefined) del.push(k);
      }
    };
    await sort(backends, want.backends, beUp, beDel);
    await sort(slots, want.slots, slotUp, slotDel);
    await sort(heads, want.heads, headUp, headDel);
    const svcGroup = async (op: 'update' | 'delete', keys: string[], values?: Buffer): Promise<EbpfMapGroup> =>
      ({ map: SVC_MAP, op, count: keys.length, keys: await packLatin1(keys, SVC_KEY_SIZE, y, (k) => k), ...(values ? { values } : {}) });
    const beGroup = async (op: 'update' | 'delete', ids: number[]): Promise<EbpfMapGroup> => ({
      map: BACKEND_MAP, op, count: ids.length,
      keys: await packU32(ids, 4, y, (id) => id), // backend ids are the map's u32 keys
      ...(op === 'update' ? { values: await packLatin1(ids, BACKEND_VALUE_SIZE, y, (id) => want.backends.get(id)!) } : {}),
    });
    const groups = [
      await beGroup('update', beUp),
      await svcGroup('update', slotUp, await slotValuesBuffer(slotUp, (k) => want.slots.get(k)!, y)),
      await svcGroup('update', headUp, await packLatin1(headUp, SVC_VALUE_SIZE, y, (k) => want.heads.get(k)!)),
      await svcGroup('delete', headDel), await svcGroup('delete', slotDel), await beGroup('delete', beDel),
    ].filter((g) => g.count > 0);
    const bytes = groups.reduce((n, g) => n + g.keys.length + (g.values?.length ?? 0), 0);
    if (groups.length === 0) return { messages: 0, bytes: 0, ms: 0 };
    const gone = lb.info.socketDestroyOff ? [] : this.goneTriples([slotUp, slotDel], slots, backends);
    waiting?.(); // only the kernel's part is left (and the sockets' after it)
    const r = await lb.apply(groups);
    const report = { messages: r.syscalls, bytes, ms: r.ms };
    if (gone.length) {
      try {
        const d = await lb.destroySockets(Buffer.concat(gone), gone.length);
        report.messages += d.syscalls;
        this.destroyed += d.tcp + d.udp;
        this.log(`ebpf: destroyed ${d.tcp} TCP and ${d.udp} UDP sockets of ${gone.length} removed (backend, service, protocol) triples (${d.namespaces} network namespaces searched in ${d.ms.toFixed(1)} ms)`);
      } catch (e) {
        // The maps are right; only already-connected clients keep talking to a gone endpoint.
        this.log(`ebpf: destroying sockets of removed backends failed: ${(e as Error).message}`);
      }
    }
    return report;
  }

  /** Sockets destroyed because their backend was removed, in total. */
  destroyed = 0;

  /**
   * kpng_gone keys (backend value + service addr[16], port, protocol, pad) for every backend that a
   * changed or removed slot had before and that its service address and protocol no longer have in the
   * desired state. Only changed slots can lose a backend, so a sync that rewrites no slot looks at nothing.
   */
  private goneTriples(changed: string[][], slots: Before<string, number>, backends: Before<number, string>): Buffer[] {
    const before = new Map<string, Set<string>>();   // address, port and protocol of a service -> its backends before
    for (const keys of changed) {
      for (const k of keys) {
        const id = slots.before(k);
        const b = id === undefined ? undefined : backends.before(id);
        if (!b || (isTcpKey(k) && !this.opts.destroyTcp)) continue;
        const vip = vipProtoOfKey(k);
        if (!before.has(vip)) before.set(vip, new Set());
        before.get(vip)!.add(b);
      }
    }
    if (before.size === 0) return [];
    // What those services still have: every slot of theirs in the desired maps (a backend may have moved to another slot).
    for (const k of slots.touched()) {
      const bs = before.get(vipProtoOfKey(k));
      if (!bs) continue;
      const id = this.desired.slots.get(k);
      if (id !== undefined) bs.delete(this.desired.backends.get(id)!);
    }
    const out: Buffer[] = [];
    for (const [vip, bs] of before) for (const b of bs) out.push(Buffer.from(b + vip + '\0', 'latin1'));
    return out;
  }

  /** What the maps hold, as this dataplane believes (tests, debugging). */
  get counts(): { services: number; slots: number; backends: number } {
    return { services: this.desired.heads.size, slots: this.desired.slots.size, backends: this.desired.backends.size };
  }

  async close(): Promise<void> {
    clearInterval(this.watchTimer);
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
