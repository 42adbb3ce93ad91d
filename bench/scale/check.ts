// Correctness at scale, from outside the proxy: once the load has settled, every node's kernel must
// send each cluster IP to the endpoints the API says (expected.ts), read from the kernel itself
// (kernel-state.ts). Proxies program changes with a delay (their minimum sync period, a sync's own
// time), so the check retries until the kernel matches or `timeoutMs` has passed, then reports what
// still differs.
import { diffTables, readClusterIps } from './kernel-state';
import { expectedClusterIps } from './expected';
import type { Kube } from './kube';
import type { ProxyTarget } from './targets';

export interface CheckResult {
  phase: string;
  /** Mismatched service ports summed over the nodes at the last attempt (0 = the kernel matched). */
  mismatches: number;
  /** A few of them, for the report. */
  examples: string[];
  /** Seconds from the first attempt until the kernel matched on every node (NaN if it never did). */
  convergedAfter: number;
  servicePorts: number;
  nodes: number;
}

export async function checkKernels(kube: Kube, targets: ProxyTarget[], phase: string, timeoutMs = 120_000): Promise<CheckResult> {
  const t0 = Date.now();
  const checkable = targets.filter((t) => t.place);
  let last: { mismatches: number; examples: string[]; servicePorts: number } = { mismatches: NaN, examples: [], servicePorts: 0 };
  for (;;) {
    const services = (await kube.list('/api/v1/services')).items;
    const slices = (await kube.list('/apis/discovery.k8s.io/v1/endpointslices')).items;
    let mismatches = 0;
    let servicePorts = 0;
    const examples: string[] = [];
    for (const t of checkable) {
      const want = expectedClusterIps(services, slices, { name: t.node, zone: t.zone });
      servicePorts = Math.max(servicePorts, want.size);
      const got = await readClusterIps(t.kind, t.place!);
      const diff = diffTables(want, got);
      mismatches += diff.length;
      for (const d of diff.slice(0, 5 - examples.length)) examples.push(`${t.node}: ${d}`);
    }
    last = { mismatches, examples, servicePorts };
    if (mismatches === 0) return { phase, ...last, convergedAfter: (Date.now() - t0) / 1000, nodes: checkable.length };
    if (Date.now() - t0 > timeoutMs) return { phase, ...last, convergedAfter: NaN, nodes: checkable.length };
    await new Promise((r) => setTimeout(r, 3000));
  }
}
