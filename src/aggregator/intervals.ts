// Elements of interval sets and maps (`flags: [interval]`): CIDRs and ranges of addresses or ports
// as the kernel stores them — a start element per range and an end element (flag interval-end) at
// the first value after it. Ranges are sorted; a set's overlapping or adjacent ranges are merged
// (as nft's auto-merge); a map's ranges may not overlap (which data would win?).
import { ipAddr, port, type NftDataType, type NftElement } from '../native/nft-types';

/** Key types that can be intervals: compared by the kernel as big-endian bytes. */
export const INTERVAL_TYPES: NftDataType[] = ['ipv4_addr', 'ipv6_addr', 'inet_service'];

export interface Range { lo: Uint8Array; hi: Uint8Array }

const cmp = (a: Uint8Array, b: Uint8Array): number => Buffer.compare(a, b);

/** The value right after `b` (big-endian +1); undefined past the top. */
function next(b: Uint8Array): Uint8Array | undefined {
  const out = Uint8Array.from(b);
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i] < 255) { out[i]++; return out; }
    out[i] = 0;
  }
  return undefined;
}

/** "10.0.0.0/8", "10.0.0.1-10.0.0.9", "10.0.0.1", 80, "1000-2000" as an inclusive range. Throws on bad input. */
export function parseRange(t: NftDataType, v: unknown): Range {
  if (t === 'inet_service') {
    const m = typeof v === 'number' ? [String(v), String(v), undefined] : typeof v === 'string' ? /^(\d{1,5})(?:\s*-\s*(\d{1,5}))?$/.exec(v.trim()) : null;
    const lo = m ? Number(m[1]) : NaN, hi = m?.[2] !== undefined ? Number(m[2]) : lo;
    if (!m || !(lo <= hi && hi <= 65535)) throw new Error(`${JSON.stringify(v)}: expected a port or LOW-HIGH`);
    return { lo: port(lo), hi: port(hi) };
  }
  if (typeof v !== 'string') throw new Error('expected an address, CIDR or FIRST-LAST');
  const len = t === 'ipv4_addr' ? 4 : 16;
  const addr = (s: string) => {
    const b = ipAddr(s.trim());
    if (b.length !== len) throw new Error(`${JSON.stringify(s)} is not an ${t === 'ipv4_addr' ? 'IPv4' : 'IPv6'} address`);
    return b;
  };
  if (v.includes('/')) {
    const [a, l] = v.split('/');
    const bits = Number(l);
    if (!/^\d{1,3}$/.test(l) || bits > len * 8) throw new Error(`${JSON.stringify(v)}: bad prefix length`);
    const lo = addr(a);
    const hi = Uint8Array.from(lo);
    for (let i = 0; i < len; i++) {
      const keep = Math.max(0, Math.min(8, bits - i * 8));
      const mask = 0xff & (0xff << (8 - keep));
      if (lo[i] & ~mask) throw new Error(`${JSON.stringify(v)} has host bits set`);
      hi[i] = lo[i] | (~mask & 0xff);
    }
    return { lo, hi };
  }
  const dash = v.indexOf('-', 1);
  if (dash > 0) { // FIRST-LAST (IPv6 addresses have no '-')
    const lo = addr(v.slice(0, dash)), hi = addr(v.slice(dash + 1));
    if (cmp(lo, hi) > 0) throw new Error(`${JSON.stringify(v)}: the first address is after the last`);
    return { lo, hi };
  }
  const b = addr(v);
  return { lo: b, hi: b };
}

/**
 * The kernel elements of ranges. `data` (one per range) makes it a map: then ranges may not overlap.
 * Returns the elements, or the index of a range that overlaps an earlier one.
 */
export function intervalElements<D>(ranges: Range[], data?: D[], withData?: (e: NftElement, d: D) => void): NftElement[] | { overlap: number } {
  const order = ranges.map((_r, i) => i).sort((a, b) => cmp(ranges[a].lo, ranges[b].lo) || cmp(ranges[a].hi, ranges[b].hi));
  // Merged (sets) or checked (maps) ranges, in order.
  const out: { lo: Uint8Array; hi: Uint8Array; i: number }[] = [];
  for (const i of order) {
    const r = ranges[i];
    const last = out[out.length - 1];
    if (last) {
      const after = next(last.hi);
      if (data) {
        if (after === undefined || cmp(r.lo, after) < 0) return { overlap: Math.max(i, last.i) };
      } else if (after === undefined || cmp(r.lo, after) <= 0) {
        if (cmp(r.hi, last.hi) > 0) last.hi = r.hi;
        continue;
      }
    }
    out.push({ lo: r.lo, hi: r.hi, i });
  }
  const els: NftElement[] = [];
  out.forEach((r, k) => {
    const start: NftElement = { key: r.lo };
    if (data && withData) withData(start, data[r.i]);
    els.push(start);
    const end = next(r.hi);
    // No end element at the top of the space, or where the next range starts (its start ends this one).
    if (end !== undefined && !(out[k + 1] && cmp(out[k + 1].lo, end) === 0)) els.push({ key: end, intervalEnd: true });
  });
  return els;
}
