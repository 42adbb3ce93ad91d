// Network programming latency as ClusterLoader2's NetworkProgrammingLatency measurement computes it:
// histogram_quantile(q, sum by (le) (increase(kubeproxy_network_programming_duration_seconds_bucket
// over the run))) across every proxy of the cluster, with Prometheus' linear interpolation inside the
// bucket that holds the quantile. Here the increase is the difference of two scrapes of each proxy's
// /metrics, so no Prometheus is needed.

export const SLI_METRIC = 'kubeproxy_network_programming_duration_seconds';

/** Cumulative bucket counts by upper bound (le, +Inf included), summed over every label set. */
export type Buckets = Map<number, number>;

/** One metric's histogram buckets from Prometheus text format, summed over its other labels. */
export function parseHistogram(text: string, metric = SLI_METRIC): Buckets {
  const out: Buckets = new Map();
  const prefix = `${metric}_bucket`;
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const m = /le="([^"]+)"[^}]*\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
    out.set(le, (out.get(le) ?? 0) + Number(m[2]));
  }
  return out;
}

/** A sample of a plain counter or gauge, summed over its label sets (NaN when absent). */
export function parseScalar(text: string, metric: string): number {
  let sum = NaN;
  for (const line of text.split('\n')) {
    if (!line.startsWith(metric)) continue;
    const rest = line.slice(metric.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) sum = (Number.isNaN(sum) ? 0 : sum) + v;
  }
  return sum;
}

/** after - before, bucket by bucket (a proxy that restarted in between counts from zero). */
export function increase(before: Buckets, after: Buckets): Buckets {
  const out: Buckets = new Map();
  const restarted = [...after].some(([le, n]) => n < (before.get(le) ?? 0));
  for (const [le, n] of after) out.set(le, restarted ? n : n - (before.get(le) ?? 0));
  return out;
}

export function addBuckets(a: Buckets, b: Buckets): Buckets {
  const out: Buckets = new Map(a);
  for (const [le, n] of b) out.set(le, (out.get(le) ?? 0) + n);
  return out;
}

export const countOf = (b: Buckets): number => b.get(Infinity) ?? 0;

/**
 * Prometheus' histogram_quantile: the bucket where the rank falls, interpolated linearly between its
 * bounds (the first bucket from 0); a rank in the +Inf bucket answers the highest finite bound.
 * NaN when the histogram is empty.
 */
export function histogramQuantile(q: number, buckets: Buckets): number {
  const bs = [...buckets].sort((x, y) => x[0] - y[0]);
  const total = bs.length ? bs[bs.length - 1][1] : 0;
  if (!bs.length || total === 0 || bs[bs.length - 1][0] !== Infinity) return NaN;
  const rank = q * total;
  let i = bs.findIndex(([, n]) => n >= rank);
  if (i < 0) i = bs.length - 1;
  if (bs[i][0] === Infinity) return bs.length > 1 ? bs[bs.length - 2][0] : NaN;
  const lo = i === 0 ? 0 : bs[i - 1][0];
  const below = i === 0 ? 0 : bs[i - 1][1];
  const inBucket = bs[i][1] - below;
  return inBucket === 0 ? bs[i][0] : lo + (bs[i][0] - lo) * ((rank - below) / inBucket);
}

export interface Quantiles { p50: number; p90: number; p99: number; count: number }

export function quantiles(b: Buckets): Quantiles {
  return { p50: histogramQuantile(0.5, b), p90: histogramQuantile(0.9, b), p99: histogramQuantile(0.99, b), count: countOf(b) };
}
