// The proxy's health as kube-proxy defines it (pkg/proxy/healthcheck/proxy_health.go): per IP family,
// unhealthy when an update was queued and not applied within the health timeout; healthy when nothing
// is pending. A family counts from its first updated() on: ops.ts marks every family updated when the
// sink starts, as upstream's SyncLoop does, so the body lists them from the start. /healthz is
// also unhealthy while this Node is being deleted or is tainted ToBeDeletedByClusterAutoscaler, and
// (set so by ops.ts) while the Node has not been seen yet.
//
// One difference, on purpose: kube-proxy forgets every pending update when a sync ends; kpng knows
// which revision each queued update belongs to, so an update queued while a sync was running stays
// pending until a sync that includes it succeeds.

export type IPFamilyName = 'IPv4' | 'IPv6';

/** One family's state in the JSON body (upstream's ProxierHealth). */
export interface ProxierHealthBody { lastUpdated: string; healthy: boolean }

/** The JSON body of /healthz and /livez, field for field as upstream's ProxyHealth. */
export interface ProxyHealthBody {
  lastUpdated: string;
  currentTime: string;
  /** Only in /healthz answers. */
  nodeEligible?: boolean;
  healthy: boolean;
  status?: Partial<Record<IPFamilyName, ProxierHealthBody>>;
}

export interface HealthSnapshot {
  healthy: boolean;
  /** The most recent successful sync of any family, ms since the epoch (0: never). */
  lastUpdated: number;
  now: number;
  families: Map<IPFamilyName, { lastUpdated: number; healthy: boolean }>;
}

interface Pending { revision: number; since: number }

/** Bounded so a stalled sink under churn cannot grow it without end (merging keeps the oldest time). */
const MAX_PENDING = 10000;

export class ProxyHealth {
  private readonly lastUpdated = new Map<IPFamilyName, number>();
  private readonly pending = new Map<IPFamilyName, Pending[]>();
  private eligible = true;

  constructor(readonly timeoutMs: number, private readonly clock: () => number = Date.now) {}

  /** A change that needs a sync was seen for this family (revision: the state revision carrying it). */
  queued(family: IPFamilyName, revision = Number.MAX_SAFE_INTEGER): void {
    let list = this.pending.get(family);
    if (!list) this.pending.set(family, (list = []));
    const last = list[list.length - 1];
    if (last && last.revision >= revision) return;
    if (list.length >= MAX_PENDING) last.revision = revision;
    else list.push({ revision, since: this.clock() });
  }

  /** A sync of this family up to `revision` succeeded. */
  updated(family: IPFamilyName, revision = Number.MAX_SAFE_INTEGER): void {
    this.lastUpdated.set(family, this.clock());
    const list = this.pending.get(family);
    if (!list) return;
    let i = 0;
    while (i < list.length && list[i].revision <= revision) i++;
    if (i === list.length) this.pending.delete(family);
    else list.splice(0, i);
  }

  /** The oldest queued and not yet applied update of a family, ms since the epoch, or undefined. */
  oldestPending(family: IPFamilyName): number | undefined {
    return this.pending.get(family)?.[0]?.since;
  }

  /** Node eligibility (deletion, autoscaler taint) is set by whoever watches the Node. */
  setNodeEligible(eligible: boolean): void { this.eligible = eligible; }
  get nodeEligible(): boolean { return this.eligible; }

  snapshot(): HealthSnapshot {
    const now = this.clock();
    let healthy = true;
    let lastUpdated = 0;
    const families = new Map<IPFamilyName, { lastUpdated: number; healthy: boolean }>();
    for (const [family, updated] of this.lastUpdated) {
      lastUpdated = Math.max(lastUpdated, updated);
      const since = this.oldestPending(family);
      // Only a family marked updated once can be late (ops.ts marks them all when the sink starts).
      const ok = since === undefined || now - since < this.timeoutMs;
      if (!ok) healthy = false;
      families.set(family, { lastUpdated: updated, healthy: ok });
    }
    return { healthy, lastUpdated, now, families };
  }

  /** The body and status of /healthz (withNode) or /livez. */
  report(withNode: boolean): { code: 200 | 503; body: ProxyHealthBody } {
    const s = this.snapshot();
    const healthy = s.healthy && (!withNode || this.eligible);
    const status: Partial<Record<IPFamilyName, ProxierHealthBody>> = {};
    for (const [f, h] of [...s.families].sort(([a], [b]) => a.localeCompare(b))) status[f] = { lastUpdated: goTime(h.lastUpdated), healthy: h.healthy };
    const body: ProxyHealthBody = {
      // Upstream compatibility: a healthy answer reports "now" as the last update.
      lastUpdated: goTime(healthy ? s.now : s.lastUpdated),
      currentTime: goTime(s.now),
      ...(withNode ? { nodeEligible: this.eligible } : {}),
      healthy: s.healthy,
      ...(s.families.size ? { status } : {}),
    };
    return { code: healthy ? 200 : 503, body };
  }
}

/** A time as Go's encoding/json writes a UTC time.Time (RFC 3339, fraction without trailing zeros). */
export function goTime(ms: number): string {
  if (ms <= 0) return '0001-01-01T00:00:00Z';
  return new Date(ms).toISOString().replace(/\.?0*Z$/, 'Z');
}
