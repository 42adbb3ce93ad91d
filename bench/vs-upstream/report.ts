// The side-by-side table (with ratios against upstream) and an SVG chart of the same figures; a
// figure measured over several runs shows its median with the range of the runs beside it.
import * as fs from 'node:fs';

export interface Figure {
  label: string;
  unit: string;
  /** One value per proxy, in column order (NaN: not measured). */
  values: number[];
  digits: number;
  /** Per value: it is a lower bound (e.g. a start that had not finished when the bench gave up). */
  lowerBound?: boolean[];
  /** Per value, when it is the median of several runs: the smallest and the largest of them. */
  min?: number[];
  max?: number[];
}

export interface Spread { min: number; median: number; max: number; n: number }

/** The smallest, median (the mean of the two middle ones for an even count) and largest of the finite values. */
export function spread(xs: number[]): Spread {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return { min: NaN, median: NaN, max: NaN, n: 0 };
  const m = s.length >> 1;
  return { min: s[0], median: s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2, max: s[s.length - 1], n: s.length };
}

/** A figure whose values are medians, from one Spread per column. */
export function spreadFigure(f: Omit<Figure, 'values' | 'min' | 'max'>, spreads: Spread[]): Figure {
  return { ...f, values: spreads.map((x) => x.median), min: spreads.map((x) => x.min), max: spreads.map((x) => x.max) };
}

const fmt = (v: number, digits: number) => (Number.isFinite(v) ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a');

/** A value as text, '>' before a lower bound, then its range (min..max) when it is a median of several. */
const value = (f: Figure, i: number) => {
  const v = (f.lowerBound?.[i] && Number.isFinite(f.values[i]) ? '>' : '') + fmt(f.values[i], f.digits);
  const lo = f.min?.[i], hi = f.max?.[i];
  return lo !== undefined && hi !== undefined && Number.isFinite(lo) && Number.isFinite(hi) ? `${v} (${fmt(lo, f.digits)}..${fmt(hi, f.digits)})` : v;
};

/** values[0] / values[i] ('>' when values[0] is a lower bound and values[i] is not; n/a when unknown). */
export function ratio(f: Figure, i: number): string | undefined {
  const ref = f.values[0], v = f.values[i];
  if (!Number.isFinite(ref) || !Number.isFinite(v) || v <= 0) return undefined;
  const [refLow, low] = [!!f.lowerBound?.[0], !!f.lowerBound?.[i]];
  if (low && refLow) return undefined;
  return `${refLow ? '>' : low ? '<' : ''}${(ref / v).toFixed(2)}x`;
}

/** Lower is better for every figure; the ratio is reference / other (> 1: the other is ahead), of the medians when the values are. */
export function table(names: string[], figures: Figure[]): string {
  const header = ['', ...names.map((n) => n), ...names.slice(1).map((n) => `${names[0]} / ${n}`)];
  const rows = figures.map((f) => [
    `${f.label} (${f.unit})`,
    ...f.values.map((_, i) => value(f, i)),
    ...f.values.slice(1).map((_, i) => ratio(f, i + 1) ?? 'n/a'),
  ]);
  const widths = header.map((_, i) => Math.max(header[i].length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

const COLORS = ['#8c8c8c', '#1f77b4', '#2ca02c', '#d62728'];

/** One group of horizontal bars per figure, each scaled to the larger value of its group. */
export function writeSvg(file: string, title: string, names: string[], figures: Figure[]): void {
  const barH = 16, gap = 6, groupGap = 18, left = 330, width = 360, top = 50, textRoom = 280;
  const groupH = names.length * (barH + gap) + groupGap;
  const h = top + figures.length * groupH + 30;
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${left + width + textRoom}" height="${h}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}</text>`);
  names.forEach((n, i) => {
    out.push(`<rect x="${10 + i * 170}" y="32" width="10" height="10" fill="${COLORS[i % COLORS.length]}"/><text x="${24 + i * 170}" y="41">${esc(n)}</text>`);
  });
  out.push(`<text x="${left + width + textRoom - 10}" y="41" text-anchor="end" fill="#555">lower is better</text>`);
  figures.forEach((f, g) => {
    const y0 = top + g * groupH;
    const max = Math.max(...f.values.filter(Number.isFinite), 1e-9);
    out.push(`<text x="10" y="${y0 + barH}" >${esc(`${f.label} (${f.unit})`)}</text>`);
    f.values.forEach((v, i) => {
      const y = y0 + i * (barH + gap);
      const w = Number.isFinite(v) ? Math.max(1, (v / max) * width) : 0;
      out.push(`<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[i % COLORS.length]}"/>`);
      const r = i > 0 ? ratio(f, i) : undefined;
      out.push(`<text x="${(left + w + 5).toFixed(1)}" y="${y + barH - 4}">${esc(value(f, i) + (r ? `  (${r})` : ''))}</text>`);
    });
  });
  out.push('</svg>');
  fs.writeFileSync(file, out.join('\n') + '\n');
}
