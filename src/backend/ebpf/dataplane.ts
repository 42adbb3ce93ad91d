// The socket load balancer's Dataplane: keeps what it wrote to the maps, one plan per service (its
// entries as byte strings, plan.ts), and per sync writes only what changed (changes.ts), in an order
// that keeps every lookup of the BPF program valid:
//   1. new or changed backends   2. slots >= 1   3. slot 0 (the count, affinity, flags)
//   4. removed slot 0s           5. removed slots   6. removed backends
// so a connect() never follows a slot to a missing backend or a count past the last slot. Each group
// goes to the kernel as one batched map update / delete. Then the TCP and UDP sockets the programs
// connected to a backend that left a service are destroyed (for that service only), so their clients
// reconnect (when the kernel can: LoaderInfo.socketDestroyOff).
// A full sync reads the maps back from the kernel (they are pinned: after a restart they still hold
// the previous process's state and keep balancing) and converges them to the ENLS the same way, so a
// restart never interrupts the service; a process that starts over pinned maps takes their ids over,
// so it rewrites only what changed. Into empty maps (a node's first start) there is nothing to compare:
// the entries go straight into batch buffers as they are planned (fresh-plan.ts). A failed batch
// throws: the KernelSink's next sync is a full one.
// Two services that claim the same service address (an external IP given twice) share its entries:
// the last planned wins, and removing either removes them.
import { serviceKey, type NodeInfo, type Service } from '../../model/enls';
import type { EbpfDump, EbpfMapGroup, EbpfMaps } from '../../native/ebpf';
import { Yielder } from '../../util/yielder';
import { NeedsFullSync, type Dataplane, type ServiceChange, type SyncReport } from '../kernel/dataplane';
import { MapAudit } from './audit';
import { Adoption, contentsOf, countDiffering, diff, goneKeys, MapChanges, readKernel, type MapContents } from './changes';
import { addDigest, addPlan, digestDumps, emptyDigest, sameDigest, type MapDigest } from './digest';
import { FreshPlan, type FreshResult } from './fresh-plan';
import { BACKEND_MAP, ByteWriter, DEFAULT_MAP_ENTRIES, isTcpKey, SVC_MAP, SVC_VALUE_SIZE, svcIdOfValue, u32At } from './maps';
import { fitsIn, planService, serviceEntries, writePlanIds, type Ids, type ServicePlan } from './plan';

/**
 * Batches of whole services (disjoint entries) sent as they are planned, two in the kernel at a time
 * on the addon's worker threads while the next is planned: the kernel's part of a first sync (about
 * 1 µs an entry without --ebpf-prealloc) then runs on both cores once the nft transaction is done,
 * rather than on one.
 */
class ChunkedWrite {
  private readonly inFlight: Promise<unknown>[] = [];
  private readonly report: SyncReport = { messages: 0, bytes: 0, ms: 0 };
  constructor(private readonly lb: EbpfMaps, private readonly parallel = 2) {}

  /** Sends a batch once fewer than `parallel` are in the kernel (`afterEarlier`: once none is). */
  async send(groups: EbpfMapGroup[], afterEarlier = false): Promise<void> {
    if (afterEarlier) await this.all();
    if (this.inFlight.length >= this.parallel) await this.inFlight.shift();
    if (groups.length === 0) return;
    this.report.bytes += groups.reduce((n, g) => n + g.keys.length + (g.values?.length ?? 0), 0);
    const p = this.lb.apply(groups).then((r) => { this.report.messages += r.syscalls; this.report.ms += r.ms; });
    // Awaited by a later send or done(); until then a failure must not count as unhandled.
    p.catch(() => {});
    this.inFlight.push(p);
  }

  async done(): Promise<SyncReport> {
    await this.all();
    return this.report;
  }

  /** Waits for every batch in the kernel, then throws the first failure: none is left behind a throw. */
  private async all(): Promise<void> {
    const results = await Promise.allSettled(this.inFlight.splice(0));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Waits for the batches in the kernel, failed or not (a failed sync leaves none behind it). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.inFlight.splice(0));
  }
}

/**
 * A planned service as the dataplane keeps it: the service (the same object the KernelSink keeps as
 * applied), the ids its plan was given in the order planService asked for them (backend ids, then
 * service ids: little-endian u32s in a byte string), and its counts. Its plan is made again from these
 * when needed (a few µs a service) rather than kept (about 600 bytes a 10-endpoint service).
 */
class Planned {
  private constructor(readonly svc: Service, readonly ids: string, readonly heads: number, readonly slots: number, readonly backends: number) {}

  /** Its entries' part of the maps' digest (digest.ts), made at the first audit that needs it. */
  digest: MapDigest | undefined;

  static of(svc: Service, p: ServicePlan): Planned {
    const w = idsWriter.reset();
    writePlanIds(p, w);
    return new Planned(svc, w.text(), p.heads, p.slots, p.backends);
  }

  /** A service planned by a FreshPlan: its ids as writePlanIds writes them, and its counts. */
  static fromIds(svc: Service, ids: string, heads: number, slots: number, backends: number): Planned {
    return new Planned(svc, ids, heads, slots, backends);
  }

  get entries(): number { return this.heads + this.slots; }

  /** The ids again, in the order they were given (`fresh` once they run out: a plan that differs). */
  replaying(fresh: Ids): Ids {
    let b = 0, h = 0;
    return {
      backend: (keys) => (b < this.backends ? u32At(this.ids, 4 * b++) : fresh.backend(keys)),
      service: (keys) => (h < this.heads ? u32At(this.ids, 4 * (this.backends + h++)) : fresh.service(keys)),
    };
  }

  /** Whether a plan made with replaying() is this one's again (the same service and node give it). */
  same(p: ServicePlan): boolean {
    return p.backends === this.backends && p.heads === this.heads && p.slots === this.slots && p.section(p.backendIdsAt, p.backendValuesAt) === this.ids.slice(0, 4 * this.backends);
  }
}

const idsWriter = new ByteWriter(256);

/** Ids for plans made again from their own: never asked for a new one (a service planned as before gives the same plan). */
const NO_NEW_IDS: Ids = {
  backend: () => { throw new Error('a plan made again asked for a new backend id'); },
  service: () => { throw new Error('a plan made again asked for a new service id'); },
};

export class EbpfDataplane implements Dataplane {
  readonly name = 'ebpf';
  private lb: EbpfMaps | undefined;
  /**
   * What was planned for each service, by service key: after a sync that succeeded, the kernel holds
   * their entries. Only the ids are kept: an update makes the service's previous plan again from the
   * service as the KernelSink applied it (its `old`), which costs a few µs and saves the entries'
   * bytes (about 600 a 10-endpoint service).
   */
  private planned = new Map<string, Planned>();
  /** Service-map entries of all planned services. */
  private entries = 0;
  /** Backend-map entries of all planned services. */
  private backendCount = 0;
  /**
   * Services that did not fit in the service map (--ebpf-map-entries), by key. They have no entry, so
   * connect() leaves their addresses alone and the nft part of `--to ebpf` DNATs them like any packet;
   * they are planned again as soon as there is room.
   */
  private overflow = new Map<string, Service>();
  private nextBackend = 1;
  private nextService = 1;

  /** The open in progress (started with the backend, so that it overlaps the initial lists). */
  private opening: Promise<EbpfMaps> | undefined;
  private openMs = 0;

  /**
   * `open`: attaches (or takes over) the programs and pinned maps. Started at once, on the addon's
   * worker thread, while the source lists the cluster, rather than adding to the first sync.
   * Programs attached before the maps are filled find no entry and leave connect() alone, as no
   * program would. A failed open is tried again at the next sync.
   */
  constructor(private readonly open: () => Promise<EbpfMaps>, private readonly log: (m: string) => void,
    /** Entries of the service map (its max_entries). */
    private readonly capacity = DEFAULT_MAP_ENTRIES,
    /**
     * destroyTcp: TCP sockets connected to a removed endpoint are destroyed too. Off by default: the
     * ENLS lists no endpoint that started terminating while others are ready, so a TCP connection
     * to it would be cut at once instead of draining as kube-proxy lets it (UDP has no such drain).
     */
    private readonly opts: {
      destroyTcp?: boolean;
      /** Work between two event-loop turns in a sync, in ms (Yielder's default when unset; 0 yields at every step). */
      yieldMs?: number;
      /** The shortest pause between two reads of the maps by the tamper audit (audit.ts; default 1 s). */
      auditEveryMs?: number;
    } = {}) {
    this.startOpen();
  }

  /** Services left to the nft part because the service map is full. */
  get overflowed(): number { return this.overflow.size; }

  /**
   * Plans the service with the ids `ids()` gives if its entries fit beside the others' (its own
   * previous plan already out of the count); otherwise records it as overflowed and returns undefined.
   */
  private planIfFits(key: string, svc: Service, ids: () => Ids): ServicePlan | undefined {
    if (!fitsIn(svc, this.node, this.capacity - this.entries)) {
      this.overflow.set(key, svc);
      return undefined;
    }
    this.overflow.delete(key);
    const plan = planService(svc, ids(), this.node);
    this.planned.set(key, Planned.of(svc, plan));
    this.entries += plan.entries;
    this.backendCount += plan.backends;
    return plan;
  }

  /**
   * Takes a service out of the planned ones (its entries are about to be removed or replaced) and
   * returns its previous plan, made again with the ids it had (the node has not changed since: a node
   * change comes as a full sync).
   */
  private unplan(key: string): ServicePlan | undefined {
    const was = this.planned.get(key);
    if (!was) return undefined;
    this.planned.delete(key);
    this.entries -= was.entries;
    this.backendCount -= was.backends;
    const plan = planService(was.svc, was.replaying(this.ids()), this.node);
    // Never seen: the service and node it was planned with give the same plan.
    if (!was.same(plan)) throw new NeedsFullSync(`the socket LB's previous plan of ${key} could not be made again`);
    return plan;
  }

  private reportOverflow(): void {
    if (this.overflow.size === 0) return;
    let need = 0;
    for (const svc of this.overflow.values()) need += serviceEntries(svc, this.node);
    this.log(`ebpf: the service map is full (${this.capacity} entries, --ebpf-map-entries): ${this.overflow.size} service${this.overflow.size === 1 ? '' : 's'} that need ` +
      `${need} more entries are served by the nft part only (DNAT instead of connect()-time balancing); ` +
      `restart with --ebpf-map-entries ${Math.ceil(((this.entries + need) * 1.25) / 1024) * 1024} or more (the pinned maps are then replaced by maps of that size)`);
  }

  private startOpen(): void {
    const t0 = performance.now();
    this.opening = this.open().then((lb) => { this.openMs = performance.now() - t0; return lb; });
    this.opening.catch(() => {});   // reported by loader(), at the sync that needs it
  }

  private async loader(): Promise<EbpfMaps> {
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
    this.audit?.stop();
    this.audit = new MapAudit(() => this.auditNow(), this.opts.auditEveryMs === undefined ? {} : { everyMs: this.opts.auditEveryMs });
    this.audit.start();
  }

  /**
   * One read of the audit: entries that differ from what this dataplane wrote are said (log, the
   * watcher's `lost`: a full sync follows, which rewrites them) once, until a sync succeeds again.
   */
  async auditNow(): Promise<number | undefined> {
    const n = await this.differences();
    if (n) {
      this.consistent = false;
      const why = `${n} entr${n === 1 ? 'y' : 'ies'} of the socket LB's maps differ from what kpng wrote (changed by another process)`;
      this.log(`ebpf: ${why}; rewriting them`);
      this.onLost?.(why);
    }
    return n;
  }

  /** How the map audit went (reads, differences found, the last read's ms). */
  get auditStats(): MapAudit['stats'] | undefined { return this.audit?.stats; }

  /**
   * Why the socket LB is not programmed (undefined: it is), so that its state shows in the log once
   * per change rather than only in each failed sync's line.
   */
  private offReason: string | undefined;

  /** Runs a sync, saying in the log when the socket LB goes off (or stale) and when it is back. */
  private async tracked(run: () => Promise<SyncReport>, signal?: AbortSignal): Promise<SyncReport> {
    this.syncing++;
    this.syncGen++;
    try {
      const r = await run();
      this.consistent = true;
      if (this.offReason !== undefined) this.log('ebpf: the socket LB is programmed again');
      this.offReason = undefined;
      return r;
    } catch (e) {
      this.consistent = false;
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
    } finally {
      this.syncing--;
    }
  }

  /** Syncs under way, and syncs begun in all (an audit read during one compares nothing). */
  private syncing = 0;
  private syncGen = 0;
  /** The last sync succeeded: the maps hold exactly the plans (unless someone else wrote them). */
  private consistent = false;
  private audit: MapAudit | undefined;

  /**
   * Map entries that differ from what this dataplane wrote (added, changed or deleted by another
   * process), or undefined when there is nothing to compare: no maps, the last sync failed, or a sync
   * ran during the read. The plans are made again from the services as planned, with their own ids.
   */
  async differences(): Promise<number | undefined> {
    const lb = this.lb;
    if (!lb || !this.consistent || this.syncing > 0) return undefined;
    const gen = this.syncGen;
    const stale = () => this.syncGen !== gen || this.syncing > 0;
    const planned = [...this.planned.values()];
    const node = this.node;
    const svcDump = await lb.dump(SVC_MAP);
    const beDump = await lb.dump(BACKEND_MAP);
    if (stale()) return undefined;
    const seen = digestDumps(svcDump, beDump);
    if (this.verified?.gen === gen && sameDigest(seen, this.verified.digest)) return 0;
    const y = new Yielder(this.opts.yieldMs);
    const want = emptyDigest();
    const sameGen = await this.replanned(planned, node, y, stale, (p, plan) => {
      if (!p.digest) addPlan((p.digest = emptyDigest()), plan());
      addDigest(want, p.digest);
    });
    if (!sameGen) return undefined;
    let n = 0;
    // Different sums: something differs, or two services share an address (its entries counted twice
    // in the sum, held once). Entry by entry, as a sync would compare them, the last planned winning.
    if (!sameDigest(seen, want)) {
      this.entryByEntry++;
      const contents: MapContents = { svc: new Map(), be: new Map() };
      if (!(await this.replanned(planned, node, y, stale, (_, plan) => contentsOf(plan(), contents)))) return undefined;
      const kernel = await readKernel(svcDump, beDump, y);
      if (stale()) return undefined;
      n = countDiffering(contents, kernel);
    }
    if (n === 0) this.verified = { gen, digest: seen };
    return n;
  }

  /**
   * Each planned service with its plan made again on demand (its own ids), giving the event loop turns;
   * false when a sync began meanwhile (`stale`), and the visit stopped there.
   */
  private async replanned(planned: Planned[], node: NodeInfo | undefined, y: Yielder, stale: () => boolean, visit: (p: Planned, plan: () => ServicePlan) => void): Promise<boolean> {
    for (let i = 0; i < planned.length; i++) {
      if ((i & 63) === 0 && y.due()) {
        await y.turn();
        if (stale()) return false;
      }
      const p = planned[i]!;
      visit(p, () => planService(p.svc, p.replaying(NO_NEW_IDS), node));
    }
    return true;
  }

  /** Audit reads whose digests differed, so that the maps were compared entry by entry (tests). */
  entryByEntry = 0;

  /** The maps' digest last found to hold exactly the plans, and the sync it was after. */
  private verified: { gen: number; digest: MapDigest } | undefined;

  /** The node item of the last full sync (node ports answer on its addresses). */
  private node: NodeInfo | undefined;

  /**
   * Ids for planning one service: an endpoint or address it had before (`old`) keeps its id, then one
   * the kernel's maps hold (`adopt`: a new process over pinned maps), else a new one.
   */
  private ids(old?: ServicePlan, adopt?: Adoption): Ids {
    let oldBackends: Map<string, number> | undefined, oldServices: Map<string, number> | undefined;
    return {
      backend: (keys) => {
        if (old) {
          if (!oldBackends) {
            oldBackends = new Map();
            for (let i = 0; i < old.backends; i++) oldBackends.set(old.endpointKey(i), old.backendId(i));
          }
          const id = oldBackends.get(keys.endpoint());
          if (id !== undefined) return id;
        } else if (adopt) {
          const id = adopt.backend(keys.head(), keys.endpoint());
          if (id !== undefined) return id;
        }
        return this.nextBackend++;
      },
      service: (keys) => {
        if (old) {
          if (!oldServices) {
            oldServices = new Map();
            for (let j = 0; j < old.heads; j++) oldServices.set(old.headKey(j), svcIdOfValue(old.bytes, old.headValuesAt + j * SVC_VALUE_SIZE));
          }
          const id = oldServices.get(keys.head());
          if (id !== undefined) return id;
        } else if (adopt) {
          const id = adopt.service(keys.head());
          if (id !== undefined) return id;
        }
        return this.nextService++;
      },
    };
  }

  /** Whether the sockets of a service address's removed backends are destroyed (UDP always, TCP on --ebpf-destroy-tcp). */
  private readonly destroys = (vip: string): boolean => this.opts.destroyTcp === true || !isTcpKey(vip);

  fullSync(services: Service[], node: NodeInfo | undefined, _revision?: number, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    return this.tracked(() => this.fullSyncOnce(services, node, waiting, signal), signal);
  }

  update(changes: ServiceChange[], _node: NodeInfo | undefined, _revision?: number, waiting?: () => void): Promise<SyncReport> {
    return this.tracked(() => this.updateOnce(changes, waiting));
  }

  private async fullSyncOnce(services: Service[], node: NodeInfo | undefined, waiting?: () => void, signal?: AbortSignal): Promise<SyncReport> {
    const lb = await this.loader();
    signal?.throwIfAborted();
    const t0 = performance.now();
    // At 50k services the maps hold over a million entries: every loop gives the event loop a turn
    // every few ms (nothing else touches this dataplane meanwhile: the KernelSink runs one sync at a
    // time). A stop ends the sync at the next turn.
    const y = new Yielder(this.opts.yieldMs, signal);
    // What the kernel has (the previous process's state after a restart; empty on a node's first start).
    const svcDump = await lb.dump(SVC_MAP);
    const beDump = await lb.dump(BACKEND_MAP);
    const r = svcDump.count + beDump.count > 0
      ? await this.converge(lb, svcDump, beDump, services, node, y, waiting)
      : await this.fresh(lb, services, node, y, waiting);
    this.filled(lb);
    return { messages: r.messages + svcDump.syscalls + beDump.syscalls, bytes: r.bytes, ms: performance.now() - t0 };
  }

  /** Resets what the dataplane keeps for a full sync's plans. */
  private forget(node: NodeInfo | undefined): void {
    this.planned = new Map();
    this.entries = 0;
    this.backendCount = 0;
    // A node item change always comes as a full sync (KernelSink): updates plan with this one.
    this.node = node;
    this.overflow.clear();
  }

  /**
   * Into empty maps (a node's first start): nothing is compared or deleted and every id is a new one,
   * so the entries are written straight into batch buffers as they are planned (FreshPlan), two
   * batches in the kernel at a time while the next is planned. A stop or a failed batch ends the sync
   * once the batches in the kernel are done, those sent so far written; the next sync, a full one,
   * reads the maps again and converges them.
   */
  private async fresh(lb: EbpfMaps, services: Service[], node: NodeInfo | undefined, y: Yielder, waiting?: () => void): Promise<SyncReport> {
    this.forget(node);
    const plan = new FreshPlan({ node, capacity: this.capacity, firstBackend: this.nextBackend, firstService: this.nextService, services: services.length });
    const chunks = new ChunkedWrite(lb);
    let r: SyncReport;
    try {
      let i = 0;
      for (const svc of services) {
        if ((++i & 63) === 0 && y.due()) await y.turn();
        if (plan.add(svc)) { const b = plan.take(); await chunks.send(b.groups, b.afterEarlier); }
      }
      const last = plan.take();
      await chunks.send(last.groups, last.afterEarlier);
      waiting?.();
      r = await chunks.done();
    } catch (e) {
      await chunks.settle();
      throw e;
    }
    await this.keepFresh(services, plan.result(), y);
    this.reportOverflow();
    return r;
  }

  /** Records a fresh plan: each service's ids and counts, or its overflow. */
  private async keepFresh(services: Service[], res: FreshResult, y: Yielder): Promise<void> {
    // One string for all the ids; each service keeps a slice of it.
    const ids = Buffer.from(res.ids.buffer, res.ids.byteOffset, res.ids.byteLength).toString('latin1');
    let at = 0;
    for (let i = 0; i < services.length; i++) {
      if ((i & 255) === 0 && y.due()) await y.turn();
      const svc = services[i]!, key = serviceKey(svc.namespace, svc.name);
      const heads = res.counts[3 * i]!, slots = res.counts[3 * i + 1]!, backends = res.counts[3 * i + 2]!;
      if (heads < 0) {
        this.overflow.set(key, svc);
        continue;
      }
      const len = 4 * (backends + heads);
      this.planned.set(key, Planned.fromIds(svc, ids.slice(at, at + len), heads, slots, backends));
      at += len;
      this.entries += heads + slots;
      this.backendCount += backends;
    }
    this.nextBackend = res.nextBackend;
    this.nextService = res.nextService;
  }

  /**
   * Over maps that hold something (a restart, a resync, a failed batch): what differs between the
   * dumped maps and the plans is written, what the maps hold beyond them deleted (a stop ends the sync
   * before the maps are written).
   */
  private async converge(lb: EbpfMaps, svcDump: EbpfDump, beDump: EbpfDump, services: Service[], node: NodeInfo | undefined, y: Yielder, waiting?: () => void): Promise<SyncReport> {
    const kernel = await readKernel(svcDump, beDump, y);
    this.nextService = Math.max(this.nextService, kernel.maxService + 1);
    this.nextBackend = Math.max(this.nextBackend, kernel.maxBackend + 1);
    // Ids are kept: a service planned before keeps its own (an unchanged one is planned again with the
    // same ids, a changed one keeps those of the endpoints that stay), and one this process has not
    // planned takes the ids the maps hold (a new process takes its predecessor's maps over as they
    // are). So a periodic resync rewrites nothing, and neither does a restart where nothing changed.
    const adopt = new Adoption(kernel);
    const nodeBefore = this.node;
    const before = this.planned;
    this.forget(node);
    const plans: ServicePlan[] = [];
    let i = 0;
    for (const svc of services) {
      if ((++i & 63) === 0 && y.due()) await y.turn();
      const key = serviceKey(svc.namespace, svc.name);
      const was = before.get(key);
      const plan = this.planIfFits(key, svc, () => {
        if (!was) return this.ids(undefined, adopt);
        if (was.svc === svc && node === nodeBefore) return was.replaying(this.ids());
        const old = planService(was.svc, was.replaying(this.ids()), nodeBefore);
        return this.ids(was.same(old) ? old : undefined, adopt);
      });
      if (plan) plans.push(plan);
    }
    this.reportOverflow();
    const ch = new MapChanges(this.destroys);
    await diff(plans, kernel, ch, y);
    return this.send(lb, await ch.groups(y, this.shortOfRoom(svcDump.count, beDump.count, ch)), ch.gone, waiting);
  }

  /** After a full sync that succeeded. */
  private filled(lb: EbpfMaps): void {
    this.fullSynced = true;
    // Maps were replaced at the open: the pinned links still ran the previous programs on the previous
    // maps (the last state, still balancing); the new maps are full now, so the links move.
    if (lb.info.pendingLinks > 0) {
      const n = lb.activate();
      this.log(`ebpf: ${n} pinned links moved to the new programs now that their new maps are filled`);
    }
  }

  private async updateOnce(changes: ServiceChange[], waiting?: () => void): Promise<SyncReport> {
    const lb = await this.loader();
    // Reopened since the last full sync (its links were severed): its maps may be new ones.
    if (!this.fullSynced) throw new NeedsFullSync('the socket LB was opened again');
    const ch = new MapChanges(this.destroys);
    const y = new Yielder(this.opts.yieldMs);
    const overflowBefore = this.overflow.size;
    const held = { svc: this.entries, be: this.backendCount };
    for (const c of changes) {
      const old = this.unplan(c.key);
      this.overflow.delete(c.key);
      // Endpoints that stay keep their ids; ids of endpoints that left are freed for good (never
      // reused: affinity entries may still name them).
      const next = c.new ? this.planIfFits(c.key, c.new, () => this.ids(old)) : undefined;
      await diff(next ? [next] : [], contentsOf(old), ch, y);
    }
    // Room made by removals: services that did not fit before, in the order they overflowed.
    for (const [key, svc] of this.overflow) {
      const plan = this.planIfFits(key, svc, () => this.ids());
      if (!plan) break;
      await diff([plan], contentsOf(undefined), ch, y);
    }
    if (this.overflow.size > overflowBefore) this.reportOverflow();
    return this.send(lb, await ch.groups(y, this.shortOfRoom(held.svc, held.be, ch)), ch.gone, waiting);
  }

  /**
   * Whether the sync's new entries do not fit beside all that the maps hold (written in the safe
   * order, the entries they replace are removed only after them): the kernel would refuse the writes
   * (E2BIG), at every retry. Then the removals go first (MapChanges.groups' roomFirst), said in the log.
   */
  private shortOfRoom(heldSvc: number, heldBe: number, ch: MapChanges): boolean {
    if (heldSvc + ch.newSvc <= this.capacity && heldBe + ch.newBe <= this.capacity) return false;
    this.log(`ebpf: the maps (${this.capacity} entries each) hold ${heldSvc} service entries and ${heldBe} backends: this sync's ${ch.newSvc} and ${ch.newBe} new ones ` +
      `do not fit beside the ones they replace, so those are removed first; meanwhile the ${ch.changedAddresses} service addresses it changes are served by the nft part (DNAT)`);
    return true;
  }

  /**
   * Sends the groups (in the safe order), then destroys the sockets of the lost backends. After it the
   * planned services' entries are what the kernel holds; if the batch fails they are not, and the KernelSink's next sync is
   * a full one, which reads the kernel again.
   */
  private async send(lb: EbpfMaps, groups: EbpfMapGroup[], gone: Map<string, Set<string>>, waiting?: () => void): Promise<SyncReport> {
    const bytes = groups.reduce((n, g) => n + g.keys.length + (g.values?.length ?? 0), 0);
    if (groups.length === 0) return { messages: 0, bytes: 0, ms: 0 };
    const keys = lb.info.socketDestroyOff ? [] : goneKeys(gone);
    waiting?.(); // only the kernel's part is left (and the sockets' after it)
    const r = await lb.apply(groups);
    const report = { messages: r.syscalls, bytes, ms: r.ms };
    if (keys.length) {
      try {
        const d = await lb.destroySockets(Buffer.concat(keys), keys.length);
        report.messages += d.syscalls;
        this.destroyed += d.tcp + d.udp;
        this.log(`ebpf: destroyed ${d.tcp} TCP and ${d.udp} UDP sockets of ${keys.length} removed (backend, service, protocol) triples (${d.namespaces} network namespaces searched in ${d.ms.toFixed(1)} ms)`);
      } catch (e) {
        // The maps are right; only already-connected clients keep talking to a gone endpoint.
        this.log(`ebpf: destroying sockets of removed backends failed: ${(e as Error).message}`);
      }
    }
    return report;
  }

  /** Sockets destroyed because their backend was removed, in total. */
  destroyed = 0;

  /** What the maps hold, as this dataplane believes (tests, debugging). */
  get counts(): { services: number; slots: number; backends: number } {
    let services = 0, slots = 0, backends = 0;
    for (const p of this.planned.values()) { services += p.heads; slots += p.slots; backends += p.backends; }
    return { services, slots, backends };
  }

  async close(): Promise<void> {
    clearInterval(this.watchTimer);
    this.audit?.stop();
    // An open still in progress is finished and closed (its handle would leak otherwise).
    const lb = this.lb ?? (await this.opening?.catch(() => undefined));
    this.lb = undefined;
    this.opening = undefined;
    await lb?.close();
  }
}
