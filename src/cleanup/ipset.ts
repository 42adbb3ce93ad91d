// The ipsets of upstream kube-proxy's IPVS mode (pkg/proxy/ipvs/ipset.go), destroyed by name once the
// iptables-nft chains whose rules matched them are gone (a referenced set cannot be destroyed).
import { ipsetDestroy, IPSET_ERR_BUSY } from '../native/ipset';
import type { NativeCallOptions } from '../native';
import { errorLine, type CleanupReport } from './report';

export const KUBE_PROXY_IPSETS: readonly string[] = [
  'KUBE-LOOP-BACK', 'KUBE-CLUSTER-IP', 'KUBE-EXTERNAL-IP', 'KUBE-EXTERNAL-IP-LOCAL',
  'KUBE-LOAD-BALANCER', 'KUBE-LOAD-BALANCER-LOCAL', 'KUBE-LOAD-BALANCER-FW',
  'KUBE-LOAD-BALANCER-SOURCE-IP', 'KUBE-LOAD-BALANCER-SOURCE-CIDR',
  'KUBE-NODE-PORT-TCP', 'KUBE-NODE-PORT-LOCAL-TCP', 'KUBE-NODE-PORT-UDP', 'KUBE-NODE-PORT-LOCAL-UDP',
  'KUBE-NODE-PORT-SCTP-HASH', 'KUBE-NODE-PORT-LOCAL-SCTP-HASH', 'KUBE-HEALTH-CHECK-NODE-PORT', 'KUBE-IPVS-IPS',
];

// The kernel drops a deleted rule's reference to its set after the nftables commit returns (the
// transaction's objects are released by a worker), so a set can be busy for a moment after its last
// rule went: asked again after a short pause, a few times. Still busy then: someone else's rule uses it.
const BUSY_RETRIES = 10;
const BUSY_PAUSE_MS = 50;

export const IPSET_NOT_AVAILABLE = 'ipset not available';
/** nfnetlink answers EINVAL to a message for a subsystem the kernel does not have (no ip_set). */
const EINVAL = 22;

export async function removeKubeProxyIpsets(call: NativeCallOptions): Promise<Partial<CleanupReport>> {
  const ipsets: string[] = [];
  let todo = [...KUBE_PROXY_IPSETS];
  for (let attempt = 0; ; attempt++) {
    let r;
    try {
      r = await ipsetDestroy(todo, call);
    } catch (e) {
      return { ipsets, errors: [errorLine('ipset', 'destroying kube-proxy ipsets', e)] };
    }
    ipsets.push(...r.destroyed);
    if (attempt === 0 && r.destroyed.length === 0 && r.absent.length === 0 && r.failed.length === todo.length && r.failed.every((f) => f.errno === EINVAL)) {
      return { notes: [IPSET_NOT_AVAILABLE] };
    }
    const busy = r.failed.filter((f) => f.errno === IPSET_ERR_BUSY);
    if (busy.length === r.failed.length && busy.length > 0 && !r.unknown && attempt < BUSY_RETRIES) {
      todo = busy.map((f) => f.name);
      await new Promise((resolve) => setTimeout(resolve, BUSY_PAUSE_MS));
      continue;
    }
    return {
      ipsets,
      errors: [
        ...r.failed.map((f) => ({
          part: 'ipset' as const, what: f.name, code: f.code,
          message: f.errno === IPSET_ERR_BUSY ? 'still referenced (by a rule or a list set)' : `refused: ${f.code}`,
        })),
        ...(r.unknown ? [{ part: 'ipset' as const, what: 'destroying kube-proxy ipsets', message: 'some kernel replies were lost: the outcome is unknown' }] : []),
      ],
    };
  }
}
