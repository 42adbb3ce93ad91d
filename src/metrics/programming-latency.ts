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
  /**
   * Received, not yet known to change the state, by service "ns/name", with the service's hash when
   * the first of them came (the state as of the last flush: observed objects reach it at the next).
   */
  private readonly waiting = new Map<string, { before: string | undefined; triggers: Trigger[] }>();
  /** Changed the state at `revision`: measured when a sync of that revision succeeds. */
  private readonly queued: Array<Trigger & { revision: number }> = [];
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
    let w = this.waiting.get(key);
    if (!w) this.waiting.set(key, (w = { before: this.state.hashOf(`svc/${key}`), triggers: [] }));
    w.triggers.push({ at, family });
  }

  /**
   * The store flushed and the node state recomputed: keep the triggers whose service changed. Only
   * services with triggers are hashed (hashing every flushed service made a first sync hash them all).
   */
  onFlush(services: ReadonlySet<string>, nodeChanged: boolean): void {
    for (const [svc, w] of this.waiting) {
      // Not flushed (and the node did not change): its item is what it was.
      if (!nodeChanged && !services.has(svc)) continue;
      if (this.state.hashOf(`svc/${svc}`) === w.before) continue;
      for (const t of w.triggers) {
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
