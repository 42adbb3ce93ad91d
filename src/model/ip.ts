// IP and CIDR parsing with canonical forms, so "2001:DB8:0::1" and "2001:db8::1" are the
// same endpoint and hash the same.
import { isIPv4, isIPv6 } from 'node:net';
import type { Family } from './objects';

export function ipFamily(ip: string): Family | null {
  if (isIPv4(ip)) return 'IPv4';
  if (isIPv6(ip) && !ip.includes('%')) return 'IPv6';
  return null;
}

/** Canonical text of an IP (RFC 5952 for IPv6), or null when it is not an IP. */
export function canonicalIP(ip: unknown): string | null {
  if (typeof ip !== 'string' || ip.length > 45) return null;
  if (isIPv4(ip)) return ip;
  const sloppy = sloppyIPv4(ip);
  if (sloppy) return sloppy;
  if (!isIPv6(ip) || ip.includes('%')) return null;
  const words = ipv6Words(ip);
  if (!words) return null;
  // IPv4-mapped addresses keep their dotted form.
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff) {
    return `::ffff:${words[6] >> 8}.${words[6] & 255}.${words[7] >> 8}.${words[7] & 255}`;
  }
  // Longest run of at least two zero words becomes "::" (first one on ties).
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * Dotted-quad IPv4 with leading zeros ("010.001.002.003"), read as upstream reads legacy objects
 * (netutils.ParseIPSloppy: every part decimal), in canonical form ("10.1.2.3"); null otherwise.
 */
function sloppyIPv4(ip: string): string | null {
  const m = /^(\d{1,10})\.(\d{1,10})\.(\d{1,10})\.(\d{1,10})$/.exec(ip);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.every((n) => n <= 255) ? parts.join('.') : null;
}

/** The 8 16-bit words of a valid IPv6 address. */
export function ipv6Words(ip: string): number[] | null {
  let tail: number[] = [];
  let text = ip;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const b = dotted[1].split('.').map(Number);
    tail = [(b[0] << 8) | b[1], (b[2] << 8) | b[3]];
    text = text.slice(0, -dotted[1].length) + '0:0';
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (s: string): number[] => (s === '' ? [] : s.split(':').map((h) => parseInt(h, 16)));
  const head = parse(halves[0]);
  const rest = halves.length === 2 ? parse(halves[1]) : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const words = [...head, ...new Array(halves.length === 2 ? fill : 0).fill(0), ...rest];
  if (words.length !== 8 || words.some((w) => !Number.isInteger(w) || w < 0 || w > 0xffff)) return null;
  if (tail.length) { words[6] = tail[0]; words[7] = tail[1]; }
  return words;
}

/** Canonical CIDR text ("10.0.0.0/8"), or null. The address part must be a valid IP. */
export function canonicalCIDR(cidr: unknown): string | null {
  if (typeof cidr !== 'string' || cidr.length > 64) return null;
  const slash = cidr.indexOf('/');
  if (slash < 0) return null;
  const ip = canonicalIP(cidr.slice(0, slash));
  const lenText = cidr.slice(slash + 1);
  if (!ip || !/^\d{1,3}$/.test(lenText)) return null;
  const len = Number(lenText);
  if (len > (ipFamily(ip) === 'IPv4' ? 32 : 128)) return null;
  return `${ip}/${len}`;
}

/** "ip:port", with brackets for IPv6. */
export function hostPort(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/** The address as a bigint (IPv4: 32 bits, IPv6: 128 bits), or null. */
function ipBits(ip: string): { bits: bigint; width: number } | null {
  if (isIPv4(ip)) return { bits: ip.split('.').reduce((a, b) => (a << 8n) | BigInt(Number(b)), 0n), width: 32 };
  const w = isIPv6(ip) ? ipv6Words(ip) : null;
  return w ? { bits: w.reduce((a, b) => (a << 16n) | BigInt(b), 0n), width: 128 } : null;
}

/** Does canonical CIDR `cidr` contain address `ip` (same family only)? */
export function cidrContains(cidr: string, ip: string): boolean {
  const slash = cidr.indexOf('/');
  const net = ipBits(cidr.slice(0, slash));
  const addr = ipBits(ip);
  if (!net || !addr || net.width !== addr.width) return false;
  const shift = BigInt(net.width - Number(cidr.slice(slash + 1)));
  return net.bits >> shift === addr.bits >> shift;
}
