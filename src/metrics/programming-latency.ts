// kubeproxy_network_programming_duration_seconds: from the time the EndpointSlice controller says an
// endpoint change was triggered (the endpoints.kubernetes.io/last-change-trigger-time annotation) to
// the kernel's acknowledgement of the sync that carries it. As upstream, trigger times from before kpng
// started are not measured (they would measure kpng's start, not the network), and an update that does
// not change this node's state is not measured (there is nothing to program).
import type { IPFamilyName } from '../health/proxy-health';

export const TRIGGER_TIME_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';
const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
/** A stalled sink must not grow this without end. */
const MAX_QUEUED = 100000;

interface Trigger { at: number; family: IPFamilyName }

/** What the tracker needs from the node state: content hashes by item key, and the revision. */
export interface HashedState { readonly revision: number; hashOf(key: string): string | undefined }

export class ProgrammingLatency {
  /** Last trigger time recorded per slice ("ns/name"): a no-op update repeats it. */
  private readonly lastSeen = new Map<string, number>();
  /** Received, not yet known to change the state, by service "ns/name". */
  private readonly waiting = new Map<string, Trigger[]>();
  /** Changed the state at `revision`: measured when a sync of that revision succeeds. */
  private readonly queued: Array<Trigger & { revision: number }> = [];
  private readonly hashes = new Map<string, string | undefined>();
  dropped = 0;

  constructor(private readonly state: HashedState, private readonly startMs: number = Date.now()) {}

  /** A raw EndpointSlice from the source. Never throws. */
  onSlice(raw: unknown, deleted: boolean): void {
    const meta = (raw as { metadata?: { namespace?: unknown; name?: unknown; labels?: Record<string, unknown>; annotations?: Record<string, unknown> } } | null)?.metadata;
    if (!meta || typeof meta.name !== 'string') return;
    const ns = typeof meta.namespace === 'string' ? meta.namespace : 'default';
    const sliceKey = `${ns}/${meta.name}`;
    if (deleted) { this.lastSeen.delete(sliceKey); return; }
    const text = meta.annotations?.[TRIGGER_TIME_ANNOTATION];
    const svc = meta.labels?.[SERVICE_NAME_LABEL];
    if (typeof text !== 'string' || typeof svc !== 'string') return;
    const at = Date.parse(text);
    if (!Number.isFinite(at) || at <= this.startMs || this.lastSeen.get(sliceKey) === at) return;
    this.lastSeen.set(sliceKey, at);
    const family: IPFamilyName = (raw as { addressType?: unknown }).addressType === 'IPv6' ? 'IPv6' : 'IPv4';
    const key = `${ns}/${svc}`;
    let list = this.waiting.get(key);
    if (!list) this.waiting.set(key, (list = []));
    list.push({ at, family });
  }

  /** The store flushed and the node state recomputed: keep the triggers whose service changed. */
  onFlush(services: ReadonlySet<string>, nodeChanged: boolean): void {
    const changed = new Set<string>();
    const keys = nodeChanged ? new Set([...services, ...this.waiting.keys()]) : services;
    for (const svc of keys) {
      const itemKey = `svc/${svc}`;
      const h = this.state.hashOf(itemKey);
      if (h !== this.hashes.get(itemKey)) changed.add(svc);
      if (h === undefined) this.hashes.delete(itemKey); else this.hashes.set(itemKey, h);
    }
    for (const [svc, list] of this.waiting) {
      if (!changed.has(svc)) continue;
      for (const t of list) {
        if (this.queued.length >= MAX_QUEUED) { this.dropped++; continue; }
        this.queued.push({ ...t, revision: this.state.revision });
      }
    }
    this.waiting.clear();
  }

  /** A sync up to `revision` succeeded: the latencies it completes, in seconds. */
  onApplied(revision: number, now: number = Date.now()): Array<{ seconds: number; family: IPFamilyName }> {
    let i = 0;
    while (i < this.queued.length && this.queued[i].revision <= revision) i++;
    return this.queued.splice(0, i).map((t) => ({ seconds: Math.max(0, now - t.at) / 1000, family: t.family }));
  }
}
