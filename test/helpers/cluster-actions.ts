// Random cluster changes for property tests of the nft backend: services of every type and family
// mix, EndpointSlices with every endpoint condition, node changes; each index has its own addresses.
import fc from 'fast-check';
import { cluster, ep, node, slice, svc } from './k8s';

export type TestCluster = ReturnType<typeof cluster>;

type Obj = Record<string, unknown>;
export const N_SVC = 4;

export const svcSpec = fc.record({
  type: fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer'),
  fams: fc.constantFrom(['v4'], ['v6'], ['v4', 'v6'], ['v6', 'v4']),
  ports: fc.subarray([0, 1, 2], { minLength: 1 }),
  ext: fc.boolean(),
  lb: fc.boolean(),
  ranges: fc.constantFrom(null, ['203.0.113.0/25'], ['192.168.0.0/24', '2001:db8::/64']),
  itp: fc.constantFrom(undefined, 'Local'),
  etp: fc.constantFrom(undefined, 'Local'),
  affinity: fc.constantFrom(0, 100, 10800),
});
export type SvcSpec = typeof svcSpec extends fc.Arbitrary<infer T> ? T : never;

export const epSpec = fc.record({
  ip: fc.nat(5),
  node: fc.constantFrom('n1', 'n2', 'n3', undefined),
  ready: fc.constantFrom(true, false, undefined),
  serving: fc.constantFrom(true, false, undefined),
  terminating: fc.constantFrom(true, false, undefined),
  zone: fc.constantFrom(undefined, 'zone-a', 'zone-b'),
});

export const action = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant('svc' as const), i: fc.nat(N_SVC - 1), spec: svcSpec }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('delSvc' as const), i: fc.nat(N_SVC - 1) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('slice' as const), i: fc.nat(N_SVC - 1), v6: fc.boolean(), eps: fc.array(epSpec, { maxLength: 5 }), target: fc.constantFrom(80, 8080) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('delSlice' as const), i: fc.nat(N_SVC - 1), v6: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('node' as const), zone: fc.constantFrom('zone-a', 'zone-b'), alt: fc.boolean() }) },
);
export type Action = typeof action extends fc.Arbitrary<infer T> ? T : never;

export const options = fc.record({
  clusterCIDRs: fc.constantFrom([], ['10.0.0.0/8', 'fd00:10::/64']),
  masqueradeAll: fc.boolean(),
  nodePortAddresses: fc.constantFrom([], ['192.168.1.0/24'], ['0.0.0.0/0', '::/0']),
});

// Addresses: every service index has its own.
const clusterIP = (i: number, v6: boolean) => (v6 ? `fd00:10:96::${10 + i}` : `172.30.0.${10 + i}`);
const extIP = (i: number, v6: boolean) => (v6 ? `2001:db8:99::${10 + i}` : `192.168.99.${10 + i}`);
const lbIP = (i: number, v6: boolean) => (v6 ? `2001:db8:1b::${10 + i}` : `1.2.3.${10 + i}`);
export const epIP = (k: number, v6: boolean) => (v6 ? `fd00:10::1:${k + 1}` : `10.180.0.${k + 1}`);
const PORTS = [
  { name: 'p80', protocol: 'TCP', port: 80 },
  { name: 'dns', protocol: 'UDP', port: 53 },
  { name: 'p443', protocol: 'TCP', port: 443 },
];
const nodePortOf = (i: number, p: number) => 30000 + i * 10 + p;

export function svcObject(i: number, s: SvcSpec): Obj {
  const fams = s.fams.map((f) => f === 'v6');
  return svc(`s${i}`, {
    type: s.type,
    clusterIPs: fams.map((v6) => clusterIP(i, v6)),
    ports: s.ports.map((p) => ({ ...PORTS[p], ...(s.type !== 'ClusterIP' ? { nodePort: nodePortOf(i, p) } : {}) })),
    externalIPs: s.ext ? fams.map((v6) => extIP(i, v6)) : undefined,
    lbIPs: s.type === 'LoadBalancer' && s.lb ? fams.map((v6) => lbIP(i, v6)) : undefined,
    sourceRanges: s.type === 'LoadBalancer' && s.ranges ? [...s.ranges] : undefined,
    itp: s.itp, etp: s.type !== 'ClusterIP' || s.ext ? s.etp : undefined,
    affinity: s.affinity || undefined,
    extraSpec: { ipFamilies: s.fams.map((f) => (f === 'v6' ? 'IPv6' : 'IPv4')) },
  });
}

export function sliceObject(a: Extract<Action, { k: 'slice' }>): Obj {
  return slice(`s${a.i}-${a.v6 ? 'v6' : 'v4'}`, `s${a.i}`, a.eps.map((e) => ep(epIP(e.ip, a.v6), {
    node: e.node, ready: e.ready, serving: e.serving, terminating: e.terminating, zones: e.zone ? [e.zone] : undefined,
  })), { family: a.v6 ? 'IPv6' : 'IPv4', ports: [{ ...PORTS[0], port: a.target }, PORTS[1], { ...PORTS[2], port: 8443 }] });
}

export const nodeObject = (zone: string, alt: boolean): Obj => node('n1', zone, {
  addresses: [
    { type: 'InternalIP', address: '192.168.0.2' }, { type: 'InternalIP', address: '2001:db8::2' },
    ...(alt ? [{ type: 'ExternalIP', address: '192.168.1.2' }] : []),
  ],
});

/** Applies one action to a test cluster (the real store and model). */
export function applyAction(c: TestCluster, a: Action): void {
  switch (a.k) {
    case 'svc': c.add(svcObject(a.i, a.spec)); break;
    case 'delSvc': c.del(svc(`s${a.i}`)); break;
    case 'slice': c.add(sliceObject(a)); break;
    case 'delSlice': c.del(slice(`s${a.i}-${a.v6 ? 'v6' : 'v4'}`, `s${a.i}`, [])); break;
    case 'node': c.add(nodeObject(a.zone, a.alt)); break;
  }
}
