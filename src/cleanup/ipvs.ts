// IPVS virtual services, kpng's IPVS backend's or upstream kube-proxy's IPVS mode's (the same objects:
// neither marks what it made). Every virtual service goes except those whose address is in one of the
// excluded CIDRs (--ipvs-exclude-cidrs: services another program keeps in IPVS), which is what
// upstream's proxier spares on every sync. A kernel without IPVS has nothing to clean: a note, no error.
// The exclusion is the IPVS backend's (a firewall-mark service has no address: no CIDR excludes it).
import { isExcluded } from '../backend/ipvs/settings';
import { ipvsApply, ipvsDump, ipvsInfo, describeIpvsOp, type IpvsOp, type IpvsServiceInfo, type IpvsServiceKey } from '../native/ipvs';
import type { NativeCallOptions } from '../native';
import { errorLine, type CleanupReport } from './report';

export const IPVS_NOT_AVAILABLE = 'IPVS not available';

const keyOf = (s: IpvsServiceInfo): IpvsServiceKey =>
  (s.fwmark !== undefined ? { address: s.address, protocol: s.protocol, port: s.port, fwmark: s.fwmark }
    : { address: s.address, protocol: s.protocol, port: s.port });

/** Deletes every IPVS virtual service (with its real servers) outside the excluded CIDRs. */
export async function removeIpvsServices(excludeCIDRs: readonly string[], call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  try {
    await ipvsInfo(call);
  } catch (e) {
    // ipvsInfo fails with ENOENT only when the "IPVS" generic netlink family is absent (no ip_vs module).
    if ((e as { code?: string }).code === 'ENOENT') return { notes: [IPVS_NOT_AVAILABLE] };
    return { errors: [errorLine('ipvs', 'IPVS info', e)] };
  }
  let services: IpvsServiceInfo[];
  try {
    services = await ipvsDump({ ...call, dests: false });
  } catch (e) {
    return { errors: [errorLine('ipvs', 'IPVS dump', e)] };
  }
  const kept = services.filter((s) => isExcluded(s, excludeCIDRs));
  const ops: IpvsOp[] = services.filter((s) => !isExcluded(s, excludeCIDRs)).map((s) => ({ op: 'delService', service: keyOf(s) }));
  const ipvsKept = kept.map((s) => describeIpvsOp({ op: 'delService', service: keyOf(s) }).replace(/^delService /, ''));
  if (ops.length === 0) return { ipvsKept };
  let r;
  try {
    r = await ipvsApply(ops, call);
  } catch (e) {
    return { ipvsKept, errors: [errorLine('ipvs', 'deleting IPVS services', e)] };
  }
  // A service deleted by someone else in between (ESRCH / ENOENT) is gone all the same.
  const gone = (code: string) => code === 'ESRCH' || code === 'ENOENT';
  const refused = new Set(r.failed.filter((f) => !gone(f.code)).map((f) => f.index));
  return {
    ipvsKept,
    ipvsServices: ops.filter((_, i) => !refused.has(i)).map((op) => describeIpvsOp(op).replace(/^delService /, '')),
    errors: [
      ...r.failed.filter((f) => !gone(f.code)).map((f) => ({ part: 'ipvs' as const, what: f.what, code: f.code, message: f.message ?? f.code })),
      ...(r.unknown ? [{ part: 'ipvs' as const, what: 'deleting IPVS services', message: 'some kernel replies were lost: the outcome is unknown' }] : []),
    ],
  };
}
