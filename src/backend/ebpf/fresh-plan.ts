// A full sync into empty maps (a node's first start): the services in order, each with ids counted up
// from the first ones given, or left out when its entries no longer fit (as EbpfDataplane.planIfFits);
// their entries written straight into batch buffers of about CHUNK_ENTRIES entries, each batch in the
// safe order (nothing is compared or deleted, so no plan string per service is made); and what the
// dataplane keeps of each service (its ids and counts: Planned).
// Batches may be in the kernel together, in any order, as long as they hold disjoint keys. Two services
// that claim the same service address (an external IP given twice) share its keys: the last planned
// must win, so a batch that claims an address an earlier batch holds goes in only after it.
import type { NodeInfo, Service } from '../../model/enls';
import type { EbpfMapGroup } from '../../native/ebpf';
import { BACKEND_MAP, ByteWriter, SVC_KEY_SIZE, SVC_MAP, SVC_VALUE_SIZE } from './maps';
import { fitsIn, planInto, type Ids, type PlanSections } from './plan';

/**
 * Entries (both maps) a batch holds: about 0.3 MB of buffers. At 50k services the sync took as long
 * as with 32k-entry batches.
 */
export const CHUNK_ENTRIES = 8192;

/** What a fresh plan starts from. */
export interface FreshStart {
  node: NodeInfo | undefined;
  /** Entries of the service map. */
  capacity: number;
  /** The first backend and service ids to give. */
  firstBackend: number;
  firstService: number;
  /** How many services are coming. */
  services: number;
}

/** What the dataplane keeps of a fresh plan. */
/** One batch: its map groups, and whether it must wait for every batch before it. */
export interface FreshBatch {
  groups: EbpfMapGroup[];
  /** It claims a service address an earlier batch holds too (the last planned wins). */
  afterEarlier: boolean;
}

export interface FreshResult {
  /** Per service, in order: its slot 0s, other slots and backends; slot 0s -1: it did not fit (left to the nft part). */
  counts: Int32Array;
  /** The planned services' ids, one after the other, each as writePlanIds writes them. */
  ids: Uint8Array;
  /** The ids to give next. */
  nextBackend: number;
  nextService: number;
}

/** svc_value.svc_id: bytes 12-15 of a slot 0's value. */
const SVC_ID_AT = 12;

export class FreshPlan {
  private readonly counts: Int32Array;
  private readonly ids = new ByteWriter(1 << 16);
  private nextBackend: number;
  private nextService: number;
  private readonly give: Ids = { backend: () => this.nextBackend++, service: () => this.nextService++ };
  /** The batch being filled: slot values are the map's (the backend id, then zeros). */
  private readonly out: PlanSections = {
    headKeys: new ByteWriter(), headValues: new ByteWriter(), slotKeys: new ByteWriter(), slotValues: new ByteWriter(),
    slotValuePad: SVC_VALUE_SIZE - 4, backendIds: new ByteWriter(), backendValues: new ByteWriter(),
  };
  private heads = 0;
  private slots = 0;
  private backends = 0;
  /** Service-map entries planned so far. */
  private entries = 0;
  private planned = 0;
  /** The batch each service address (slot 0 key) was planned in. */
  private readonly headBatch = new Map<string, number>();
  private batch = 0;
  private afterEarlier = false;

  constructor(private readonly start: FreshStart) {
    this.counts = new Int32Array(start.services * 3);
    this.nextBackend = start.firstBackend;
    this.nextService = start.firstService;
  }

  /** Plans the next service; true when the batch is full (take it). */
  add(svc: Service): boolean {
    const i = this.planned++;
    if (i >= this.start.services) throw new Error(`ebpf: a fresh plan of ${this.start.services} services was given more`);
    if (!fitsIn(svc, this.start.node, this.start.capacity - this.entries)) {
      this.counts[3 * i] = -1;
      return false;
    }
    const out = this.out;
    const backendsAt = out.backendIds.n, headsAt = out.headValues.n, headKeysAt = out.headKeys.n;
    const n = planInto(svc, this.give, this.start.node, out);
    for (let at = headKeysAt; at < out.headKeys.n; at += SVC_KEY_SIZE) {
      const key = out.headKeys.text(at, at + SVC_KEY_SIZE);
      const was = this.headBatch.get(key);
      if (was !== undefined && was < this.batch) this.afterEarlier = true;
      this.headBatch.set(key, this.batch);
    }
    this.counts[3 * i] = n.heads;
    this.counts[3 * i + 1] = n.slots;
    this.counts[3 * i + 2] = n.backends;
    // Its ids as Planned keeps them: backend ids, then the service ids of its slot 0s.
    this.ids.copyOf(out.backendIds, backendsAt, out.backendIds.n);
    for (let at = headsAt + SVC_ID_AT; at < out.headValues.n; at += SVC_VALUE_SIZE) this.ids.copyOf(out.headValues, at, at + 4);
    this.heads += n.heads;
    this.slots += n.slots;
    this.backends += n.backends;
    this.entries += n.heads + n.slots;
    return this.heads + this.slots + this.backends >= CHUNK_ENTRIES;
  }

  /** The batch of the services planned since the last one (no groups when none): backends, then slots, then slot 0s. */
  take(): FreshBatch {
    const o = this.out;
    // Copies: the writers are filled again for the next batch while this one is in the kernel.
    const copy = (w: ByteWriter): Buffer => Buffer.from(w.bytes());
    const all: EbpfMapGroup[] = [
      { map: BACKEND_MAP, op: 'update', count: this.backends, keys: copy(o.backendIds), values: copy(o.backendValues) },
      { map: SVC_MAP, op: 'update', count: this.slots, keys: copy(o.slotKeys), values: copy(o.slotValues) },
      { map: SVC_MAP, op: 'update', count: this.heads, keys: copy(o.headKeys), values: copy(o.headValues) },
    ];
    const groups = all.filter((g) => g.count > 0);
    for (const w of [o.headKeys, o.headValues, o.slotKeys, o.slotValues, o.backendIds, o.backendValues]) w.reset();
    this.heads = this.slots = this.backends = 0;
    const batch = { groups, afterEarlier: this.afterEarlier };
    this.afterEarlier = false;
    this.batch++;
    return batch;
  }

  /** Once every service was added. */
  result(): FreshResult {
    if (this.planned !== this.start.services) throw new Error(`ebpf: a fresh plan of ${this.start.services} services was given ${this.planned}`);
    return { counts: this.counts, ids: new Uint8Array(this.ids.bytes()), nextBackend: this.nextBackend, nextService: this.nextService };
  }
}

