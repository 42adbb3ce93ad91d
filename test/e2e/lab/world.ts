// kubectl-style state files for the lab: Nodes, Services, EndpointSlices, written as JSON (valid YAML)
// and replaced atomically (write + rename), the way the file source expects edits.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ADDR, PODS } from './lab';

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
  const items: unknown[] = [
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' }, spec: { podCIDRs: [ADDR.n1.podCidr4, ADDR.n1.podCidr6] }, status: { addresses: [{ type: 'InternalIP', address: ADDR.n1.v4 }, { type: 'InternalIP', address: ADDR.n1.v6 }] } },
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n2' }, spec: { podCIDRs: [ADDR.n2.podCidr4, ADDR.n2.podCidr6] }, status: { addresses: [{ type: 'InternalIP', address: ADDR.n2.v4 }, { type: 'InternalIP', address: ADDR.n2.v6 }] } },
  ];
  for (const s of svcs) {
    const ns = s.ns ?? 'default';
    const fams = [...new Set(s.clusterIPs.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4')))];
    const spec: Record<string, unknown> = {
      type: s.type ?? 'ClusterIP',
      clusterIP: s.clusterIPs[0],
      clusterIPs: s.clusterIPs,
      ipFamilies: fams,
      ipFamilyPolicy: fams.length > 1 ? 'RequireDualStack' : 'SingleStack',
      ports: s.ports.map((p, i) => ({ name: p.name ?? `p${i}`, protocol: p.protocol ?? 'TCP', port: p.port, targetPort: p.targetPort, ...(p.nodePort ? { nodePort: p.nodePort } : {}) })),
    };
    if (s.externalIPs) spec.externalIPs = s.externalIPs;
    if (s.sourceRanges) spec.loadBalancerSourceRanges = s.sourceRanges;
    if (s.etp && s.type && s.type !== 'ClusterIP') spec.externalTrafficPolicy = s.etp;
    if (s.itp) spec.internalTrafficPolicy = s.itp;
    if (s.affinity) { spec.sessionAffinity = 'ClientIP'; spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: s.affinity } }; }
    const svc: Record<string, unknown> = { apiVersion: 'v1', kind: 'Service', metadata: { namespace: ns, name: s.name }, spec };
    if (s.lbIPs) svc.status = { loadBalancer: { ingress: s.lbIPs.map((ip) => ({ ip })) } };
    items.push(svc);
    for (const fam of fams) {
      const v6 = fam === 'IPv6';
      items.push({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { namespace: ns, name: `${s.name}-${v6 ? 'v6' : 'v4'}`, labels: { 'kubernetes.io/service-name': s.name } },
        addressType: fam,
        ports: s.ports.map((p, i) => ({ name: p.name ?? `p${i}`, protocol: p.protocol ?? 'TCP', port: p.targetPort })),
        endpoints: s.pods.map((n) => {
          const p = podByName(n);
          const ready = !(s.notReady ?? []).includes(n);
          return { addresses: [v6 ? p.v6 : p.v4], conditions: { ready, serving: ready, terminating: false }, nodeName: p.node };
        }),
      });
    }
  }
  return { apiVersion: 'v1', kind: 'List', items };
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
