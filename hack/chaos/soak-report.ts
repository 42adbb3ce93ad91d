// `make soak`'s arithmetic and its Markdown: the samples a run took every 30 s (per node: the proxy's
// RSS, JS heap, open descriptors, network programming latency histogram; the probes' failures), least-
// squares slopes per hour beside the noise around them, and a row per stretch of the run. Pure (no
// cluster): test/soak-report.test.ts.

/** "2h", "10m", "90s", "1h30m", or plain seconds, to seconds. */
export function parseDuration(s: string): number {
  const t = s.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t);
  const re = /(\d+(?:\.\d+)?)(h|m|s)/gy;
  let total = 0, m: RegExpExecArray | null, end = 0;
  while ((m = re.exec(t))) { total += Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1); end = re.lastIndex; }
  if (end === 0 || end !== t.length || total <= 0) throw new Error(`duration: "${s}" is not like 2h, 10m, 90s or 1h30m`);
  return total;
}

/** One Prometheus series: name, labels, value. */
export interface PromSample { name: string; labels: Record<string, string>; value: number }

export function parsePrometheus(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value)) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value });
  }
  return out;
}

/** A histogram summed over every label but `le`: cumulative counts by upper bound, and the count and sum. */
export interface Histogram { buckets: [number, number][]; count: number; sum: number }

export function histogramOf(samples: PromSample[], name: string): Histogram | undefined {
  const byLe = new Map<number, number>();
  let count = 0, sum = 0, seen = false;
  for (const s of samples) {
    if (s.name === `${name}_bucket` && s.labels.le !== undefined) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      byLe.set(le, (byLe.get(le) ?? 0) + s.value);
      seen = true;
    } else if (s.name === `${name}_count`) count += s.value;
    else if (s.name === `${name}_sum`) sum += s.value;
  }
  if (!seen) return undefined;
  return { buckets: [...byLe].sort((a, b) => a[0] - b[0]), count, sum };
}

/** b - a, bucket by bucket (a restarted proxy resets its counters: then b alone). */
export function histogramDelta(a: Histogram | undefined, b: Histogram | undefined): Histogram | undefined {
  if (!b) return undefined;
  if (!a || b.count < a.count) return b;
  const before = new Map(a.buckets);
  return { buckets: b.buckets.map(([le, n]) => [le, n - (before.get(le) ?? 0)]), count: b.count - a.count, sum: b.sum - a.sum };
}

/** Prometheus's histogram_quantile: linear within the bucket that holds the rank; undefined when empty. */
export function histogramQuantile(h: Histogram | undefined, q: number): number | undefined {
  if (!h || h.buckets.length === 0) return undefined;
  const total = h.buckets[h.buckets.length - 1][1];
  if (total <= 0) return undefined;
  const rank = q * total;
  let prevLe = 0, prevN = 0;
  for (const [le, n] of h.buckets) {
    if (n >= rank) {
      if (le === Infinity) return prevLe;
      return n === prevN ? le : prevLe + ((le - prevLe) * (rank - prevN)) / (n - prevN);
    }
    prevLe = le; prevN = n;
  }
  return prevLe;
}

/** Least squares v = a + b·t over the points: the slope, its standard error and the residuals' SD. */
export interface Fit { n: number; slope: number; intercept: number; slopeSe: number; residualSd: number }

export function fitLine(points: { t: number; v: number }[]): Fit | undefined {
  const n = points.length;
  if (n < 3) return undefined;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const mv = points.reduce((s, p) => s + p.v, 0) / n;
  let stt = 0, stv = 0;
  for (const p of points) { stt += (p.t - mt) ** 2; stv += (p.t - mt) * (p.v - mv); }
  if (stt === 0) return undefined;
  const slope = stv / stt;
  const intercept = mv - slope * mt;
  const sse = points.reduce((s, p) => s + (p.v - intercept - slope * p.t) ** 2, 0);
  const residualSd = Math.sqrt(sse / (n - 2));
  return { n, slope, intercept, slopeSe: residualSd / Math.sqrt(stt), residualSd };
}

/**
 * Whether a fit (t in hours) shows growth beyond noise: the 95% interval of the slope is above 0 and
 * the rise it predicts over the span exceeds twice the residuals' SD (a step at the start, a GC's
 * sawtooth, are not a leak).
 */
export function upward(f: Fit | undefined, spanHours: number): boolean {
  if (!f) return false;
  return f.slope - 1.96 * f.slopeSe > 0 && f.slope * spanHours > 2 * f.residualSd;
}

export interface NodeSample {
  /** Seconds since the epoch. */
  t: number;
  node: string;
  /** The proxy pod's uid: a new one is a restart. */
  pod?: string;
  rssBytes?: number;
  heapBytes?: number;
  fds?: number;
  programming?: Histogram;
}

export interface ProbeWindow { from: number; to: number; attempted: number; failed: number; reasons: string[] }

export interface SoakResult {
  proxy: string;
  command: string;
  commit: string;
  startedAt: number;
  endedAt: number;
  /** Samples before this (seconds since the epoch) are left out of the fits: start-up, first syncs. */
  warmupUntil: number;
  samples: NodeSample[];
  probes: ProbeWindow[];
  churn: { ok: number; failed: number };
}

const MiB = 1024 * 1024;
const f1 = (x: number): string => x.toFixed(Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2);
const ms = (s: number | undefined): string => (s === undefined ? '-' : `${(s * 1000).toFixed(s < 0.1 ? 1 : 0)} ms`);

interface Series { name: string; unit: string; scale: number; pick: (s: NodeSample) => number | undefined }
const SERIES: Series[] = [
  { name: 'RSS', unit: 'MiB', scale: MiB, pick: (s) => s.rssBytes },
  { name: 'JS heap used', unit: 'MiB', scale: MiB, pick: (s) => s.heapBytes },
  { name: 'open descriptors', unit: 'fds', scale: 1, pick: (s) => s.fds },
];

/** Per node and series: the fit over the samples after the warm-up, t in hours from the run's start. */
export function fits(r: SoakResult): { node: string; series: Series; fit?: Fit; first?: number; last?: number; min?: number; max?: number; halves: (Fit | undefined)[] }[] {
  const nodes = [...new Set(r.samples.map((s) => s.node))].sort();
  const out = [];
  for (const node of nodes) {
    for (const series of SERIES) {
      const pts = r.samples.filter((s) => s.node === node && s.t >= r.warmupUntil).flatMap((s) => {
        const v = series.pick(s);
        return v === undefined ? [] : [{ t: (s.t - r.startedAt) / 3600, v: v / series.scale }];
      });
      const vs = pts.map((p) => p.v);
      const mid = pts.length ? (pts[0].t + pts[pts.length - 1].t) / 2 : 0;
      out.push({
        node, series, fit: fitLine(pts),
        ...(vs.length ? { first: vs[0], last: vs[vs.length - 1], min: Math.min(...vs), max: Math.max(...vs) } : {}),
        halves: [fitLine(pts.filter((p) => p.t < mid)), fitLine(pts.filter((p) => p.t >= mid))],
      });
    }
  }
  return out;
}

export function renderSoak(r: SoakResult, windowSec = 600): string {
  const out: string[] = [];
  const hours = (r.endedAt - r.startedAt) / 3600;
  const fitHours = (r.endedAt - r.warmupUntil) / 3600;
  out.push(`# Soak: ${r.proxy}`, '');
  out.push(`${new Date(r.startedAt * 1000).toISOString().replace(/\.\d+Z$/, 'Z')}, commit ${r.commit}; \`${r.command}\`; ${(hours * 60).toFixed(1)} min, ` +
    `${r.samples.length} samples; fits over the ${(fitHours * 60).toFixed(1)} min after a ${((r.warmupUntil - r.startedAt) / 60).toFixed(1)} min warm-up; ` +
    `churn ${r.churn.ok} scale operations (${r.churn.failed} failed).`, '');
  const restarts = new Map<string, number>();
  for (const node of new Set(r.samples.map((s) => s.node))) {
    const pods = new Set(r.samples.filter((s) => s.node === node && s.pod).map((s) => s.pod));
    restarts.set(node, Math.max(0, pods.size - 1));
  }
  out.push('## Slopes', '');
  out.push('Least squares over the samples after the warm-up; ± the 95% interval of the slope; "noise": the SD of the samples around the line; the two halves\' slopes show how much a slope moves within one run. ' +
    '"upward" only when the interval is above 0 and the predicted rise exceeds twice the noise.', '');
  out.push('| node | series | first → last | min / max | slope per hour | noise (SD) | halves\' slopes | verdict |', '|---|---|---|---|---|---|---|---|');
  for (const x of fits(r)) {
    const u = `${x.series.unit}`;
    const slope = x.fit ? `${x.fit.slope >= 0 ? '+' : ''}${f1(x.fit.slope)} ± ${f1(1.96 * x.fit.slopeSe)} ${u}/h` : '-';
    const halves = x.halves.map((h) => (h ? `${h.slope >= 0 ? '+' : ''}${f1(h.slope)}` : '-')).join(', ');
    const verdict = !x.fit ? 'too few samples' : upward(x.fit, fitHours) ? '**upward**' : 'no upward slope beyond noise';
    out.push(`| ${x.node} | ${x.series.name} | ${x.first === undefined ? '-' : `${f1(x.first)} → ${f1(x.last!)} ${u}`} | ${x.min === undefined ? '-' : `${f1(x.min)} / ${f1(x.max!)}`} | ${slope} | ${x.fit ? `${f1(x.fit.residualSd)} ${u}` : '-'} | ${halves} | ${verdict} |`);
  }
  out.push('', `Proxy restarts seen (a new pod): ${[...restarts].map(([n, k]) => `${n} ${k}`).join(', ') || 'none'}.`, '');
  out.push('## Over time', '');
  out.push(`Per ${windowSec / 60} min: probe failures over all probes; network programming latency (kubeproxy_network_programming_duration_seconds, both nodes, from the histogram's deltas); each node's RSS and descriptors at the window's last sample.`, '');
  const nodes = [...new Set(r.samples.map((s) => s.node))].sort();
  out.push(`| from (min) | probes failed/attempted | programmed | p50 | p90 | p99 | ${nodes.map((n) => `${n} RSS, fds`).join(' | ')} |`, `|---|---|---|---|---|---|${nodes.map(() => '---|').join('')}`);
  for (let w = r.startedAt; w < r.endedAt; w += windowSec) {
    const end = Math.min(w + windowSec, r.endedAt);
    const pw = r.probes.filter((p) => p.from >= w && p.from < end);
    // The run's last seconds past a whole window: nothing sampled there.
    if (pw.length === 0 && !r.samples.some((s) => s.t >= w && s.t < end)) continue;
    const att = pw.reduce((n, p) => n + p.attempted, 0), fail = pw.reduce((n, p) => n + p.failed, 0);
    let prog: Histogram | undefined;
    for (const node of nodes) {
      const inW = r.samples.filter((s) => s.node === node && s.t >= w && s.t < end && s.programming);
      const before = r.samples.filter((s) => s.node === node && s.t < w && s.programming).pop();
      const last = inW[inW.length - 1];
      const d = last ? histogramDelta(before?.programming, last.programming) : undefined;
      prog = addHistograms(prog, d);
    }
    const cells = nodes.map((node) => {
      const last = r.samples.filter((s) => s.node === node && s.t >= w && s.t < end).pop();
      return last ? `${last.rssBytes === undefined ? '-' : f1(last.rssBytes / MiB)} MiB, ${last.fds ?? '-'}` : '-';
    });
    out.push(`| ${((w - r.startedAt) / 60).toFixed(0)} | ${fail}/${att} | ${prog ? prog.count : '-'} | ${ms(histogramQuantile(prog, 0.5))} | ${ms(histogramQuantile(prog, 0.9))} | ${ms(histogramQuantile(prog, 0.99))} | ${cells.join(' | ')} |`);
  }
  const reasons = new Map<string, number>();
  for (const p of r.probes) for (const x of p.reasons) reasons.set(x, (reasons.get(x) ?? 0) + 1);
  const tot = r.probes.reduce((a, p) => ({ att: a.att + p.attempted, fail: a.fail + p.failed }), { att: 0, fail: 0 });
  out.push('', `Probes over the whole run: ${tot.fail}/${tot.att} failed${reasons.size ? ` (${[...reasons].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ×${n}`).join(', ')})` : ''}.`);
  return `${out.join('\n')}\n`;
}

export function addHistograms(a: Histogram | undefined, b: Histogram | undefined): Histogram | undefined {
  if (!a) return b;
  if (!b) return a;
  const m = new Map(a.buckets);
  for (const [le, n] of b.buckets) m.set(le, (m.get(le) ?? 0) + n);
  return { buckets: [...m].sort((x, y) => x[0] - y[0]), count: a.count + b.count, sum: a.sum + b.sum };
}
