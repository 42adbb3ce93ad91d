// Go's time.Duration text ("30s", "1m30s", "2h22m", "250ms", "0s"), as metav1.Duration fields of a
// KubeProxyConfiguration hold it, to milliseconds.
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };

/** Milliseconds, or null when the text is not a Go duration. Negative durations are rejected. */
export function parseGoDuration(text: string): number | null {
  const t = text.trim();
  if (t === '0') return 0;
  if (!/^(\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))*$/.test(t)) return null;
  let ms = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]];
  return ms;
}

/**
 * A duration flag's value to milliseconds: Go's form ("1m30s", "250ms", "0"), or a bare number of
 * seconds ("2", "0.5"). Null when it is neither.
 */
export function parseDuration(text: string): number | null {
  const t = text.trim();
  if (/^(\d+(\.\d*)?|\.\d+)$/.test(t)) return Math.round(Number(t) * 1000);
  const ms = parseGoDuration(t);
  return ms === null ? null : Math.round(ms);
}

/** Go's time.Duration.String() ("24h0m0s", "15m0s", "30s", "1.5s", "250ms", "0s"), as kube-proxy writes durations. */
export function goDurationString(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${+ms.toFixed(6)}ms`;
  const h = Math.floor(ms / 3600000), m = Math.floor((ms % 3600000) / 60000), s = +((ms % 60000) / 1000).toFixed(9);
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
