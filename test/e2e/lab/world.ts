// kubectl-style state files for the lab: Nodes, Services, EndpointSlices, written as JSON (valid YAML)
// and replaced atomically (write + rename), the way the file source expects edits.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ADDR, PODS } from './lab';
import { ep, familiesOf, internalIPs, list, node, slice, svc, type Obj } from '../../shared/objects';

export interface PortSpec { name?: string; protocol?: 'TCP' | 'UDP' | 'SCTP'; port: number; targetPort: number; nodePort?: number }

export interface SvcSpec {
  ns?: string;
  name: string;
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  clusterIPs: string[];
  ports: PortSpec[];
  externalIPs?: string[];
  lbIPs?: string[];
  sourceRanges?: string[];
  etp?: 'Cluster' | 'Local';
  itp?: 'Cluster' | 'Local';
  affinity?: number;
  /** Pod names (see PODS) serving it; both families are listed for dual-stack services. */
  pods: string[];
  /** Pods listed but not ready. */
  notReady?: string[];
}

function podByName(n: string) {
  const p = PODS.find((x) => x.name === n);
  if (!p) throw new Error(`no pod ${n}`);
  return p;
}

export function objects(svcs: SvcSpec[]): unknown {
  const items: Obj[] = (['n1', 'n2'] as const).map((n) => ({
    ...node(n, undefined, internalIPs(ADDR[n].v4, ADDR[n].v6)),
    spec: { podCIDRs: [ADDR[n].podCidr4, ADDR[n].podCidr6] },
  }));
  for (const s of svcs) {
    const { families } = familiesOf(s.clusterIPs);
    items.push(svc(s.name, {
      ns: s.ns, type: s.type, clusterIPs: s.clusterIPs, ...familiesOf(s.clusterIPs),
      ports: s.ports.map((p, i) => ({ name: p.name ?? `p${i}`, protocol: p.protocol ?? 'TCP', port: p.port, targetPort: p.targetPort, ...(p.nodePort ? { nodePort: p.nodePort } : {}) })),
      externalIPs: s.externalIPs, sourceRanges: s.sourceRanges, itp: s.itp, affinity: s.affinity, lbIPs: s.lbIPs,
      // externalTrafficPolicy only where it applies (not on a ClusterIP service).
      etp: s.type && s.type !== 'ClusterIP' ? s.etp : undefined,
    }));
    for (const fam of families) {
      const v6 = fam === 'IPv6';
      items.push(slice(`${s.name}-${v6 ? 'v6' : 'v4'}`, s.name, s.pods.map((n) => {
        const p = podByName(n);
        const ready = !(s.notReady ?? []).includes(n);
        return ep(v6 ? p.v6 : p.v4, { ready, serving: ready, terminating: false, node: p.node });
      }), { ns: s.ns, family: fam, ports: s.ports.map((p, i) => ({ name: p.name ?? `p${i}`, protocol: p.protocol ?? 'TCP', port: p.targetPort })) }));
    }
  }
  return list(items);
}

export class StateFile {
  readonly file: string;
  constructor(dir?: string) {
    const d = dir ?? fs.mkdtempSync('/tmp/kpng-e2e-');
    this.file = path.join(d, 'state.yaml');
    process.on('exit', () => { try { fs.rmSync(d, { recursive: true, force: true }); } catch { /* ignore */ } });
  }

  write(svcs: SvcSpec[]): void {
    const tmp = `${this.file}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(objects(svcs), null, 1));
    fs.renameSync(tmp, this.file);
  }
}
