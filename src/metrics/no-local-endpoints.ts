// kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family, traffic_policy}: service ports with
// a Local internal (or external) traffic policy and no local endpoint on this node, read from the ENLS
// the backend applied, kept incrementally per service.
import { IPFamily, type Service } from '../model/enls';
import { externalRoutesOf } from '../model/views';
import type { Batch, StateView } from '../sink/sink';

type Key = `${'IPv4' | 'IPv6'}/${'internal' | 'external'}`;
type Counts = Partial<Record<Key, number>>;

export function noLocalEndpoints(svc: Service): Counts {
  const c: Counts = {};
  for (const sp of svc.ports) {
    if (sp.localEndpoints.length > 0) continue;
    const fam = sp.family === IPFamily.IPV6 ? 'IPv6' : 'IPv4';
    if (svc.internalTrafficPolicy === 'Local') c[`${fam}/internal`] = (c[`${fam}/internal`] ?? 0) + 1;
    if (svc.externalTrafficPolicy === 'Local' && externalRoutesOf(sp)) c[`${fam}/external`] = (c[`${fam}/external`] ?? 0) + 1;
  }
  return c;
}

export class NoLocalEndpointsGauge {
  private readonly per = new Map<string, Counts>();
  private readonly totals = new Map<Key, number>();

  applyBatch(batch: Batch, state: StateView): void {
    if (batch.reset) {
      for (const key of [...this.per.keys()]) this.set(key, null);
      for (const item of state.items()) if (item.service) this.set(item.key, item.service);
      return;
    }
    for (const ch of batch.changes) if (ch.key.startsWith('svc/')) this.set(ch.key, ch.op === 'set' ? ch.item.service ?? null : null);
  }

  /** Every (family, policy) with its count, zeros included, so a cleared count shows 0. */
  values(): Array<{ family: 'IPv4' | 'IPv6'; policy: 'internal' | 'external'; count: number }> {
    const out: Array<{ family: 'IPv4' | 'IPv6'; policy: 'internal' | 'external'; count: number }> = [];
    for (const family of ['IPv4', 'IPv6'] as const) for (const policy of ['internal', 'external'] as const) out.push({ family, policy, count: this.totals.get(`${family}/${policy}`) ?? 0 });
    return out;
  }

  private set(key: string, svc: Service | null): void {
    for (const [k, n] of Object.entries(this.per.get(key) ?? {}) as Array<[Key, number]>) this.totals.set(k, (this.totals.get(k) ?? 0) - n);
    const c = svc ? noLocalEndpoints(svc) : {};
    if (Object.keys(c).length) this.per.set(key, c); else this.per.delete(key);
    for (const [k, n] of Object.entries(c) as Array<[Key, number]>) this.totals.set(k, (this.totals.get(k) ?? 0) + n);
  }
}
