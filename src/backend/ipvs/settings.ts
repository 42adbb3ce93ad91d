// kube-proxy's IPVS settings as flags of `--to ipvs` (same names and meaning as kube-proxy's):
//   --ipvs-strict-arp            net/ipv4/conf/all/arp_ignore=1, arp_announce=2 at start
//   --ipvs-tcp-timeout D         IPVS timeouts at start (Go durations; 0 leaves the kernel's value)
//   --ipvs-tcpfin-timeout D
//   --ipvs-udp-timeout D
//   --ipvs-exclude-cidrs CIDR,.. virtual servers kpng never deletes
// Parsing and the exclusion decision only (no kernel): the dataplane and kernel-settings.ts apply them.
import { parseGoDuration } from '../../util/duration';
import { canonicalCIDR, cidrContains } from '../../model/ip';
import type { IpvsTimeouts } from '../../native/ipvs';
import type { FlagValue } from '../registry';

export interface IpvsSettings {
  /** ARP replies only for addresses of the receiving interface and announcements from the best local
   * address, so the service addresses on kube-ipvs0 are not answered for on the node's real links
   * (what load-balancer address announcers such as MetalLB's L2 mode need). */
  strictArp: boolean;
  /** Seconds; 0 leaves the kernel's value (the kernel ignores a zero, and kube-proxy sends zeros the same way). */
  timeouts: IpvsTimeouts;
  /** Canonical CIDRs: virtual servers no service asks for inside them are left alone (not deleted). */
  excludeCIDRs: string[];
}

/** The IPVS timeout flags and the IpvsTimeouts field each sets. */
export const TIMEOUT_FLAGS: Array<[flag: string, key: keyof IpvsTimeouts]> = [
  ['ipvs-tcp-timeout', 'tcp'],
  ['ipvs-tcpfin-timeout', 'tcpFin'],
  ['ipvs-udp-timeout', 'udp'],
];

/** The kernel keeps timeouts in jiffies in an int: beyond this many seconds it refuses them at any HZ. */
const MAX_TIMEOUT_S = Math.floor(0x7fffffff / 100);

/**
 * A timeout flag's Go duration in whole seconds, truncated as kube-proxy truncates (so "1500ms" is 1 s and
 * "500ms" is 0, which leaves the kernel's value, as in kube-proxy). Errors name the flag.
 */
export function timeoutSeconds(flag: string, text: string): number {
  const ms = parseGoDuration(text);
  if (ms === null) throw new Error(`--${flag}: ${JSON.stringify(text)} is not a duration >= 0 (e.g. 900s, 15m, 0s)`);
  const s = Math.floor(ms / 1000);
  if (s > MAX_TIMEOUT_S) throw new Error(`--${flag}: ${JSON.stringify(text)} is longer than the kernel accepts (${MAX_TIMEOUT_S}s)`);
  return s;
}

/**
 * --ipvs-exclude-cidrs values (repeated and/or comma-separated) as canonical CIDRs. Host bits may be set
 * ("10.1.2.3/16" means 10.1.0.0/16), as kube-proxy reads them. Errors name the flag.
 */
export function excludeCIDRs(value: FlagValue): string[] {
  const texts = (Array.isArray(value) ? value : typeof value === 'string' ? [value] : []).flatMap((v) => v.split(','));
  const out: string[] = [];
  for (const raw of texts) {
    const t = raw.trim();
    if (t === '') continue;
    const c = canonicalCIDR(t);
    if (!c) throw new Error(`--ipvs-exclude-cidrs: ${JSON.stringify(t)} is not a CIDR (e.g. 10.1.0.0/16, fd00:1::/64)`);
    out.push(c);
  }
  return out;
}

/** The IPVS settings of a `--to ipvs` invocation, validated (errors name the flag). */
export function ipvsSettings(flags: Record<string, FlagValue>): IpvsSettings {
  const timeouts: IpvsTimeouts = { tcp: 0, tcpFin: 0, udp: 0 };
  for (const [flag, key] of TIMEOUT_FLAGS) {
    const v = flags[flag];
    if (v === undefined) continue;
    if (typeof v !== 'string') throw new Error(`--${flag}: expected a duration (e.g. 900s)`);
    timeouts[key] = timeoutSeconds(flag, v);
  }
  return { strictArp: flags['ipvs-strict-arp'] === true, timeouts, excludeCIDRs: excludeCIDRs(flags['ipvs-exclude-cidrs']) };
}

/**
 * Is this virtual server inside an excluded CIDR? A firewall-mark virtual server has no address of its own
 * (the kernel reports the family's zero address): no CIDR covers it. kpng's own mark-keyed servers are
 * the ones there are, and `kpng --cleanup` decides the same way (src/cleanup/ipvs.ts).
 */
export function isExcluded(vs: { address: string; fwmark?: number }, cidrs: readonly string[]): boolean {
  if (vs.fwmark !== undefined) return false;
  return cidrs.some((c) => cidrContains(c, vs.address));
}

/** Any timeout to set? (kube-proxy sets them only when one is non-zero.) */
export function hasTimeouts(t: IpvsTimeouts): boolean {
  return t.tcp > 0 || t.tcpFin > 0 || t.udp > 0;
}
