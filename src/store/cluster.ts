// The cluster's objects as kpng keeps them (trimmed), and what changed since the last flush.
// Sources feed it raw objects; node states read it. Every other concern is downstream.
import { DEFAULT_MODEL_OPTIONS, modelNotes, type ModelOptions } from '../model/options';
import { objectName, parseEndpointSlice, parseNode, parseService, type Parsed } from '../model/parse';
import type { NodeSpec, ServiceSpec, SliceSpec } from '../model/objects';
import { orEmpty } from '../util/intern';
import { ObjectWarnings, type Logger } from '../util/log';
import { sameJson } from '../util/same-json';

export type Kind = 'Service' | 'EndpointSlice' | 'Node';

/** What a flush reports: the services ("ns/name") and nodes whose inputs changed. */
export interface ClusterChange {
  services: ReadonlySet<string>;
  nodes: ReadonlySet<string>;
}

export interface ClusterStoreOptions {
  log: Logger;
  /** This proxy's service-proxy-name ("" = proxy only unlabelled services). */
  serviceProxyName?: string;
  /** Node-wide settings of the model (--cluster-cidr, --masquerade-all, --nodeport-addresses). */
  model?: ModelOptions;
  /** Sees every raw object before it is trimmed (metrics and health read fields the model drops:
   *  trigger-time annotations, the Node's deletion and taints). Must not throw. */
  observe?: (kind: Kind, raw: unknown, deleted: boolean) => void;
}

const nsName = (ns: string, name: string) => `${ns}/${name}`;

const NO_SLICES: readonly SliceSpec[] = orEmpty<SliceSpec>([]);

/** A new list: `list` with `slice` in place of the one of its name, or inserted in name order. */
function withSlice(list: readonly SliceSpec[], slice: SliceSpec): readonly SliceSpec[] {
  const out = list.filter((s) => s.name !== slice.name);
  let i = 0;
  while (i < out.length && out[i]!.name < slice.name) i++;
  out.splice(i, 0, slice);
  return out;
}

/** Trimmed objects by key; a no-op update (an equal object) is told from a real change. */
class TrimmedMap<T> {
  private readonly entries = new Map<string, T>();
  get(key: string): T | undefined { return this.entries.get(key); }
  keys(): IterableIterator<string> { return this.entries.keys(); }
  get size(): number { return this.entries.size; }
  /** Stores (or with null, removes) a value; true when that changed anything. */
  set(key: string, value: T | null): boolean {
    if (value === null) return this.entries.delete(key);
    const prev = this.entries.get(key);
    if (prev !== undefined && sameJson(prev, value)) return false;
    this.entries.set(key, value);
    return true;
  }
}

export class ClusterStore {
  private readonly services = new TrimmedMap<ServiceSpec>();
  /**
   * Slices by owning service "ns/svc", in name order. Each list is replaced on a change, never
   * written to, so slicesOf() hands it out as is (a Map per service, and a copy of it per service
   * record, were 100k objects at 50k services).
   */
  private readonly slicesByService = new Map<string, readonly SliceSpec[]>();
  /** slice "ns/name" -> owner "ns/svc" */
  private readonly slices = new Map<string, string>();
  private readonly nodes = new TrimmedMap<NodeSpec>();
  private dirtyServices = new Set<string>();
  private dirtyNodes = new Set<string>();
  private readonly listeners = new Set<(c: ClusterChange) => void>();
  private readonly warnings: ObjectWarnings;
  private flushScheduled = false;
  private syncedFlag = false;
  private readonly syncedWaiters: (() => void)[] = [];
  /** Objects received from the source (adds, updates, deletes), the "events" of the stats line. */
  events = 0;

  /** The model's settings, shared by every node state computed from this store. */
  readonly modelOptions: ModelOptions;

  constructor(private readonly opts: ClusterStoreOptions) {
    this.modelOptions = opts.model ?? DEFAULT_MODEL_OPTIONS;
    this.warnings = new ObjectWarnings(opts.log);
    for (const note of modelNotes(this.modelOptions)) opts.log[note.level](note.text);
  }

  /** The store's logger (node states report their node's conditions through it). */
  get log(): Logger { return this.opts.log; }

  get synced(): boolean { return this.syncedFlag; }

  /** The source has applied every initial list: sinks may now sync (an empty first sync would wipe rules). */
  markSynced(): void {
    this.flush();
    if (this.syncedFlag) return;
    this.syncedFlag = true;
    for (const w of this.syncedWaiters.splice(0)) w();
  }

  whenSynced(): Promise<void> {
    return this.syncedFlag ? Promise.resolve() : new Promise((r) => this.syncedWaiters.push(r));
  }

  onChange(f: (c: ClusterChange) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  getService(key: string): ServiceSpec | undefined { return this.services.get(key); }
  serviceKeys(): IterableIterator<string> { return this.services.keys(); }
  get serviceCount(): number { return this.services.size; }
  get sliceCount(): number { return this.slices.size; }
  slicesOf(key: string): readonly SliceSpec[] { return this.slicesByService.get(key) ?? NO_SLICES; }
  getNode(name: string): NodeSpec | undefined { return this.nodes.get(name); }

  /** Add or update (`deleted` false) or delete an object of a kind. Never throws on bad input. */
  apply(kind: Kind, raw: unknown, deleted = false): void {
    this.events++;
    this.opts.observe?.(kind, raw, deleted);
    if (kind === 'Service') this.applyService(raw, deleted);
    else if (kind === 'EndpointSlice') this.applySlice(raw, deleted);
    else this.applyNode(raw, deleted);
    this.scheduleFlush();
  }

  /** Replace every object of a kind (a relist or a file reload): vanished objects are deleted. */
  replace(kind: Kind, raws: readonly unknown[]): void {
    const keep = new Set<string>();
    for (const raw of raws) {
      const name = objectName(raw);
      keep.add(kind === 'Node' ? name : name.includes('/') ? name : `default/${name}`);
      this.apply(kind, raw, false);
    }
    const existing = kind === 'Service' ? [...this.services.keys()] : kind === 'EndpointSlice' ? [...this.slices.keys()] : [...this.nodes.keys()];
    for (const key of existing) {
      if (keep.has(key)) continue;
      const [ns, name] = kind === 'Node' ? ['', key] : key.split('/');
      this.apply(kind, { metadata: { namespace: ns || undefined, name } }, true);
    }
  }

  private applyService(raw: unknown, deleted: boolean): void {
    const name = objectName(raw);
    const skipped: string[] = [];
    const parsed = deleted ? null : parseService(raw, this.opts.serviceProxyName ?? '', skipped);
    if (parsed?.ok && skipped.length) this.warnings.warn('Service', name, `ignored ${skipped.join('; ')}`, true);
    else this.report('Service', name, parsed);
    const key = name.includes('/') ? name : `default/${name}`;
    // Deleted, invalid or not ours: the service stops being proxied.
    if (this.services.set(key, parsed?.ok ? parsed.value : null)) this.dirtyServices.add(key);
  }

  /** Warns about an object that is invalid (not one that is merely not ours), once per reason. */
  private report(kind: Kind, name: string, parsed: Parsed<unknown> | null): void {
    if (parsed && !parsed.ok && !parsed.quiet) this.warnings.warn(kind, name, parsed.reason);
    else this.warnings.clear(kind, name);
  }

  private applySlice(raw: unknown, deleted: boolean): void {
    const name = objectName(raw);
    const key = name.includes('/') ? name : `default/${name}`;
    const parsed = deleted ? null : parseEndpointSlice(raw);
    if (parsed?.ok && parsed.value.skipped.length) {
      this.warnings.warn('EndpointSlice', name, `dropped ${parsed.value.skipped.length} endpoint(s): ${parsed.value.skipped.join('; ')}`);
    } else this.report('EndpointSlice', name, parsed);
    const prev = this.slices.get(key);
    if (parsed?.ok) {
      const slice = parsed.value.slice;
      const owner = nsName(slice.namespace, slice.service);
      if (prev === owner && sameJson(this.slicesByService.get(owner)?.find((s) => s.name === slice.name), slice)) return;
      if (prev !== undefined && prev !== owner) this.dropSlice(key, prev);
      this.slices.set(key, owner);
      this.slicesByService.set(owner, withSlice(this.slicesByService.get(owner) ?? NO_SLICES, slice));
      this.dirtyServices.add(owner);
    } else if (prev !== undefined) {
      this.dropSlice(key, prev);
    }
  }

  private dropSlice(key: string, owner: string): void {
    this.slices.delete(key);
    const name = key.slice(key.indexOf('/') + 1);
    const rest = (this.slicesByService.get(owner) ?? NO_SLICES).filter((s) => s.name !== name);
    if (rest.length > 0) this.slicesByService.set(owner, rest);
    else this.slicesByService.delete(owner);
    this.dirtyServices.add(owner);
  }

  private applyNode(raw: unknown, deleted: boolean): void {
    const name = objectName(raw);
    const parsed = deleted ? null : parseNode(raw);
    this.report('Node', name, parsed);
    if (this.nodes.set(name, parsed?.ok ? parsed.value : null)) this.dirtyNodes.add(name);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Tell listeners what changed since the last flush (also runs by itself after events). */
  flush(): void {
    this.flushScheduled = false;
    if (this.dirtyServices.size === 0 && this.dirtyNodes.size === 0) return;
    const change: ClusterChange = { services: this.dirtyServices, nodes: this.dirtyNodes };
    this.dirtyServices = new Set();
    this.dirtyNodes = new Set();
    for (const l of this.listeners) l(change);
  }
}
