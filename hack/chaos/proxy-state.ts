// What the proxy said about itself: its metrics (Prometheus text) before and after a scenario, and
// its /healthz polled through it. Pure functions: test/chaos-report.test.ts.

/** The series a scenario's report shows (each proxy exposes those it has). */
export const WATCHED_SERIES = [
  'kpng_syncs_total{result="failed"}',
  'kpng_kernel_state_lost_total',
  'kubeproxy_sync_proxy_rules_nftables_sync_failures_total',
  'kubeproxy_sync_proxy_rules_last_timestamp_seconds',
] as const;

/**
 * Prometheus text to a map "name{labels}" -> value. Series are summed over labels the name in
 * WATCHED_SERIES does not give (kpng_kernel_state_lost_total{backend=...} -> kpng_kernel_state_lost_total);
 * timestamps take the latest.
 */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)/.exec(line);
    if (!m) continue;
    const [, name, labels = '', value] = m;
    const v = Number(value);
    if (!Number.isFinite(v)) continue;
    for (const want of WATCHED_SERIES) {
      const [wname, wlabels] = want.includes('{') ? [want.slice(0, want.indexOf('{')), want.slice(want.indexOf('{') + 1, -1)] : [want, ''];
      if (wname !== name) continue;
      if (wlabels && !labels.slice(1, -1).split(',').includes(wlabels)) continue;
      // Counters add up over their labels; a timestamp (one per IP family upstream) is the latest.
      const prev = out.get(want);
      out.set(want, prev === undefined ? v : want.endsWith('_timestamp_seconds') ? Math.max(prev, v) : prev + v);
    }
  }
  return out;
}

/**
 * What changed between two scrapes, in words: counters as "+N", the last sync as its age at the
 * second scrape. A counter that went down means the proxy restarted in between (its value is given).
 */
export function describeMetrics(before: Map<string, number> | undefined, after: Map<string, number> | undefined, afterAt: number): string {
  if (!after) return 'metrics not reachable';
  const parts: string[] = [];
  for (const k of WATCHED_SERIES) {
    const a = after.get(k);
    if (a === undefined) continue;
    if (k === 'kubeproxy_sync_proxy_rules_last_timestamp_seconds') {
      parts.push(`last sync ${a > 0 ? `${(afterAt - a).toFixed(1)} s before the end` : 'never'}`);
      continue;
    }
    const b = before?.get(k);
    const name = k.replace(/^kubeproxy_sync_proxy_rules_/, '…');
    if (b === undefined) parts.push(`${name} ${a}`);
    else if (a < b) parts.push(`${name} ${a} (restarted)`);
    else parts.push(`${name} +${a - b}`);
  }
  return parts.join(', ') || 'none of the watched series';
}

export interface HealthSample {
  t: number;
  node: string;
  /** The HTTP status, or "down" when nothing answered within the timeout. */
  status: number | 'down';
}

/** Per node, the statuses /healthz gave in [from, to) in order, runs collapsed: "200 ×12, 503 ×3, 200 ×40". */
export function describeHealth(samples: HealthSample[], node: string, from: number, to: number): string {
  const runs: { status: number | 'down'; n: number }[] = [];
  for (const s of samples.filter((x) => x.node === node && x.t >= from && x.t < to).sort((a, b) => a.t - b.t)) {
    const last = runs[runs.length - 1];
    if (last && last.status === s.status) last.n++;
    else runs.push({ status: s.status, n: 1 });
  }
  return runs.length ? runs.map((r) => `${r.status} ×${r.n}`).join(', ') : 'no sample';
}
