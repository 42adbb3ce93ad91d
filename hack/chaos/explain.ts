// Why a probe failed, as far as the run can tell: each failure beside the last proxy outage on the
// target node (kill to /healthz 200 again) and the last scale-down of the churn. A failure while the
// proxy was down, a few seconds after a scale-down, is an endpoint that stopped serving (preStop 5 s
// over) before any proxy could take it out of the rules: the kernel keeps the last rules, and nothing
// runs that could change them. Pure: test/chaos-explain.test.ts.
import type { ProbeEvent } from './probes';

/** A proxy outage on the target node: killed at `at`, serving again (/healthz 200) at `back`, if it was. */
export interface Outage { at: number; back?: number }

/** A scale operation of the churn: when it was asked for, and to how many replicas. */
export interface ScaleEvent { t: number; replicas: number }

export interface FailureContext {
  event: ProbeEvent;
  /** Seconds since the last kill before the failure (undefined: none). */
  sinceKill?: number;
  /** True when the proxy was not serving yet (killed, /healthz not back) when the attempt started. */
  proxyDown: boolean;
  /** Seconds since the last scale-down before the failure (undefined: none). */
  sinceScaleDown?: number;
}

export function failureContexts(events: ProbeEvent[], outages: Outage[], scales: ScaleEvent[]): FailureContext[] {
  const kills = [...outages].sort((a, b) => a.at - b.at);
  const downs = scales.filter((s, i) => i > 0 && s.replicas < scales[i - 1].replicas).map((s) => s.t).sort((a, b) => a - b);
  const lastBefore = (xs: number[], t: number): number | undefined => {
    let r: number | undefined;
    for (const x of xs) if (x <= t) r = x;
    return r;
  };
  return events.filter((e) => !e.ok).sort((a, b) => a.t - b.t).map((event) => {
    const kill = [...kills].reverse().find((k) => k.at <= event.t);
    const down = lastBefore(downs, event.t);
    return {
      event,
      ...(kill ? { sinceKill: event.t - kill.at } : {}),
      proxyDown: !!kill && (kill.back === undefined || event.t < kill.back),
      ...(down !== undefined ? { sinceScaleDown: event.t - down } : {}),
    };
  });
}

const s1 = (x: number | undefined): string => (x === undefined ? '-' : `${x.toFixed(1)} s`);

/** One line per failure, for the report's figures. */
export function describeFailures(ctxs: FailureContext[]): string[] {
  return ctxs.map((c) => `failure ${c.event.probe}${c.event.detail ? ` (${c.event.detail})` : ''}: ${s1(c.sinceKill)} after the last kill, ` +
    `proxy ${c.proxyDown ? 'not serving yet' : 'serving'}, ${s1(c.sinceScaleDown)} after the last scale-down`);
}
