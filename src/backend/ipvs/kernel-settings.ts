// What the IPVS backend sets in the kernel once, at start, the way kube-proxy's IPVS proxier does when it
// is created: the sysctls IPVS needs, strict ARP when asked, and the IPVS timeouts when one is non-zero.
// Through the addon (/proc/sys and generic netlink), never a process. Each value is logged before -> after.
import type { NativeCallOptions } from '../../native';
import { ipvsConfig, type IpvsTimeouts } from '../../native/ipvs';
import { sysctl } from '../../native/rtnl';
import { hasTimeouts, type IpvsSettings } from './settings';

/** Kernel parameters IPVS needs (kube-proxy sets the same): conntrack for the nft masquerade, expiry of
 * connections whose real server is gone, forwarding. */
export const IPVS_SYSCTLS: Array<[string, number]> = [
  ['net/ipv4/vs/conntrack', 1],
  ['net/ipv4/vs/expire_nodest_conn', 1],
  ['net/ipv4/vs/expire_quiescent_template', 1],
  ['net/ipv4/ip_forward', 1],
];

/** --ipvs-strict-arp: answer ARP only for addresses of the receiving link, announce from the best local
 * address, so the node does not claim the service addresses bound to kube-ipvs0 on its real links. */
export const STRICT_ARP_SYSCTLS: Array<[string, number]> = [
  ['net/ipv4/conf/all/arp_ignore', 1],
  ['net/ipv4/conf/all/arp_announce', 2],
];

export type IpvsKernelSettings = Pick<IpvsSettings, 'strictArp' | 'timeouts'>;

/**
 * Sets the sysctls (a failure is logged and the start goes on, as before) and the timeouts. A refused
 * timeout is logged, not fatal: kube-proxy logs it and carries on.
 */
export async function applyIpvsKernelSettings(s: IpvsKernelSettings, call: NativeCallOptions, log: (m: string) => void): Promise<void> {
  const results = await sysctl([...IPVS_SYSCTLS, ...(s.strictArp ? STRICT_ARP_SYSCTLS : [])], call);
  for (const r of results) {
    if (r.error) log(`ipvs: sysctl ${r.name}: ${r.error}`);
    else if (r.before !== r.after) log(`ipvs: sysctl ${r.name} ${r.before} -> ${r.after}`);
    else log(`ipvs: sysctl ${r.name} = ${r.after}`);
  }
  if (!hasTimeouts(s.timeouts)) return;
  try {
    const before = await ipvsConfig(undefined, call);
    const after = await ipvsConfig(s.timeouts, call);
    log(`ipvs: timeouts ${describeTimeouts(before, after)}`);
  } catch (e) {
    log(`ipvs: timeouts ${JSON.stringify(s.timeouts)} (seconds) not set: ${(e as Error).message}`);
  }
}

/** "tcp 900s -> 300s, tcpfin 120s, udp 300s -> 60s" */
export function describeTimeouts(before: IpvsTimeouts, after: IpvsTimeouts): string {
  const names: Array<[keyof IpvsTimeouts, string]> = [['tcp', 'tcp'], ['tcpFin', 'tcpfin'], ['udp', 'udp']];
  return names.map(([k, n]) => (before[k] !== after[k] ? `${n} ${before[k]}s -> ${after[k]}s` : `${n} ${after[k]}s`)).join(', ');
}
