// bench:scale's report: a Markdown table per proxy and per phase, a JSON file with every figure, and
// SVG plots over the run (network programming latency p99 per window, CPU, RSS), one line per proxy.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { histogramQuantile, increase, quantiles, type Buckets, type Quantiles } from './sli';
import type { CheckResult } from './check';
import type { Mark, Point } from './measure';

export interface ProxyResult {
  proxy: string;
  run: number;
  nodes: string[];
  seconds: number;
  sli: Quantiles;
  sliByPhase: Record<string, Quantiles>;
  own: { p50: number; p90: number; p99: number; count: number; missed: number; withdrawn: number };
  cpuS: number;
  syscallsPerS: number;
  generations: number;
  apiRequests: number;
  peakMiB: number;
  steadyMiB: number;
  checks: CheckResult[];
  phaseSeconds: Record<string, number>;
  failures: string[];
  points: { t: number; cpuS: number; rssMiB: number; p99: number }[];
}

export interface Report {
  command: string;
  date: string;
  profile: string;
  seed: number;
  kwokNodes: number;
  results: ProxyResult[];
}

/** Per-phase quantiles from the marks (each mark holds the histogram since the run's start). */
export function byPhase(marks: Mark[]): Record<string, Quantiles> {
  const out: Record<string, Quantiles> = {};
  let prev: Buckets = new Map();
  for (const m of marks) { out[m.phase] = quantiles(increase(prev, m.buckets)); prev = m.buckets; }
  return out;
}

/** The plot's points: p99 of each window between two samples (NaN when nothing was observed in it). */
export function windowed(points: Point[]): ProxyResult['points'] {
  let prev: Buckets = new Map();
  return points.map((p) => {
    const w = increase(prev, p.buckets);
    prev = p.buckets;
    return { t: p.t, cpuS: p.cpuS, rssMiB: p.rssMiB, p99: histogramQuantile(0.99, w) };
  });
}

const f = (v: number, d = 2) => (Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : 'n/a');
const q = (x: Quantiles) => `${f(x.p50)} / ${f(x.p90)} / ${f(x.p99)} s (${x.count})`;

export function markdown(r: Report): string {
  const cols = r.results;
  const row = (label: string, cell: (x: ProxyResult) => string) => `| ${label} | ${cols.map(cell).join(' | ')} |`;
  const phases = [...new Set(cols.flatMap((c) => Object.keys(c.sliByPhase)))];
  const lines = [
    `# bench:scale — ${r.profile}`,
    '',
    `${r.date}; seed ${r.seed}; ${r.kwokNodes} kwok nodes; command: \`${r.command}\``,
    '',
    `| | ${cols.map((c) => `${c.proxy} (run ${c.run})`).join(' | ')} |`,
    `|---|${cols.map(() => '---').join('|')}|`,
    row('network programming latency p50 / p90 / p99 (observations), the proxies\' histogram', (c) => q(c.sli)),
    ...phases.map((p) => row(`&nbsp;&nbsp;${p}`, (c) => (c.sliByPhase[p] ? q(c.sliByPhase[p]) : 'n/a'))),
    row('own share p50 / p90 / p99 (samples, missed, withdrawn): slice event -> kernel', (c) => `${f(c.own.p50, 0)} / ${f(c.own.p90, 0)} / ${f(c.own.p99, 0)} ms (${c.own.count}, ${c.own.missed}, ${c.own.withdrawn})`),
    row('CPU seconds (all nodes\' proxies)', (c) => f(c.cpuS, 1)),
    row('syscalls/s (all nodes)', (c) => f(c.syscallsPerS, 0)),
    row('kernel transactions (nf_tables generations, all nodes)', (c) => f(c.generations, 0)),
    row('API requests (rest_client_requests_total)', (c) => f(c.apiRequests, 0)),
    row('peak RSS (largest node)', (c) => `${f(c.peakMiB, 0)} MiB`),
    row('steady RSS at the end (largest node)', (c) => `${f(c.steadyMiB, 0)} MiB`),
    ...phases.map((p) => row(`API vs kernel mismatches after ${p}`, (c) => {
      const k = c.checks.find((x) => x.phase === p);
      return k ? `${k.mismatches} of ${k.servicePorts} ports x ${k.nodes} nodes${Number.isFinite(k.convergedAfter) ? ` (matched after ${f(k.convergedAfter, 0)} s)` : ''}` : 'n/a';
    })),
    ...phases.map((p) => row(`${p} phase took`, (c) => `${f(c.phaseSeconds[p] ?? NaN, 0)} s`)),
    row('load operations that failed', (c) => String(c.failures.length)),
    '',
  ];
  const ex = cols.flatMap((c) => c.checks.flatMap((k) => k.examples.map((e) => `- ${c.proxy} run ${c.run}, after ${k.phase}: ${e}`)));
  if (ex.length) lines.push('Mismatches (examples):', '', ...ex, '');
  lines.push('![network programming latency p99 per window](latency.svg)', '', '![CPU seconds](cpu.svg)', '', '![RSS](rss.svg)', '');
  return lines.join('\n');
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

/** A line chart of one series per proxy. */
export function svgLines(title: string, unit: string, series: { name: string; xy: [number, number][] }[]): string {
  const W = 720, H = 320, L = 60, R = 160, T = 30, B = 40;
  const xs = series.flatMap((s) => s.xy.map((p) => p[0]));
  const ys = series.flatMap((s) => s.xy.map((p) => p[1])).filter(Number.isFinite);
  const xMax = Math.max(1, ...xs), yMax = Math.max(1e-9, ...ys) * 1.1;
  const X = (x: number) => L + (x / xMax) * (W - L - R);
  const Y = (y: number) => H - B - (y / yMax) * (H - T - B);
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<text x="${L}" y="18" font-size="14">${title}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#000"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#000"/>`,
    `<text x="${(W - R) / 2}" y="${H - 8}">seconds since the proxy's run began</text>`,
    `<text x="4" y="${T - 6}">${unit}</text>`];
  for (let i = 0; i <= 4; i++) {
    const y = (yMax / 4) * i;
    parts.push(`<text x="${L - 6}" y="${Y(y) + 4}" text-anchor="end">${y.toPrecision(3)}</text>`);
    const x = (xMax / 4) * i;
    parts.push(`<text x="${X(x)}" y="${H - B + 16}" text-anchor="middle">${Math.round(x)}</text>`);
  }
  series.forEach((s, i) => {
    const pts = s.xy.filter((p) => Number.isFinite(p[1])).map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ');
    parts.push(`<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" points="${pts}"/>`);
    parts.push(`<text x="${W - R + 10}" y="${T + 16 * i + 10}" fill="${COLORS[i % COLORS.length]}">${s.name}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

export function writeReport(dir: string, r: Report): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'report.json'), JSON.stringify(r, (_k, v) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2));
  fs.writeFileSync(path.join(dir, 'report.md'), markdown(r));
  const name = (c: ProxyResult) => `${c.proxy} #${c.run}`;
  fs.writeFileSync(path.join(dir, 'latency.svg'), svgLines('Network programming latency, p99 per window', 's', r.results.map((c) => ({ name: name(c), xy: c.points.map((p) => [p.t, p.p99] as [number, number]) }))));
  fs.writeFileSync(path.join(dir, 'cpu.svg'), svgLines('CPU used by the proxies so far', 'CPU s', r.results.map((c) => ({ name: name(c), xy: c.points.map((p) => [p.t, p.cpuS] as [number, number]) }))));
  fs.writeFileSync(path.join(dir, 'rss.svg'), svgLines('Resident set of the largest proxy', 'MiB', r.results.map((c) => ({ name: name(c), xy: c.points.map((p) => [p.t, p.rssMiB] as [number, number]) }))));
}
