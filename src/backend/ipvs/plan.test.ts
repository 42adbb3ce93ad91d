// The IPVS planner and the companion table's diff, without a kernel (the guest e2e tests send packets).
import { IPFamily, Protocol, Target, normalizeItem, type Route, type Routes, type Service } from '../../model/enls';
import { CompanionTable, classChain } from './companion';
import { NFT_REG_1, type NftExpr } from '../../native/nft-types';
import { planService, type DestPlan } from './plan';

const r = (target: Target, masquerade = false): Route => ({ target, masquerade });
const all = (x: Route): Routes => ({ pod: x, node: x, other: x });
const ep = (ip: string, local = false) => ({ ip, port: 8080, local, terminating: false });

function svc(over: Record<string, unknown>, port: Record<string, unknown>): Service {
  return normalizeItem({
    key: 'svc/ns/s',
    service: {
      namespace: 'ns', name: 's', type: 'LoadBalancer', clusterIps: { v4: ['10.96.0.1'], v6: [] }, loadBalancerIps: { v4: ['192.168.60.1'], v6: [] },
      ...over,
      ports: [{ port: { name: 'p', protocol: Protocol.TCP, port: 80, nodePort: 30001 }, family: IPFamily.IPV4, ...port }],
    },
  }).service!;
}

// Stable marks per id, as the dataplane allocates them.
const ctx = () => {
  const marks = new Map<string, number>();
  const markFor = (id: string) => marks.get(id) ?? (marks.set(id, 1000 + marks.size), marks.get(id)!);
  return { node: undefined, localAddrs: [], markFor, nodePortAddrs: { ip: ['192.168.50.11'], ip6: [] as string[] } };
};

test('a Cluster service: one virtual server per address, pods pass, the rest is masqueraded', () => {
  const eps = [ep('10.244.1.10', true), ep('10.244.2.10')];
  const p = planService(svc({}, {
    clusterEndpoints: eps, clusterIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.CLUSTER, true) },
    loadBalancerIp: all(r(Target.CLUSTER, true)), nodePort: all(r(Target.CLUSTER, true)),
  }), ctx());
  expect(p.virtuals.map((v) => `${v.addr}:${v.port} ${v.endpoints.map((e) => e.ip).join(',')}`)).toEqual([
    '10.96.0.1:80 10.244.1.10,10.244.2.10', '192.168.60.1:80 10.244.1.10,10.244.2.10', '192.168.50.11:30001 10.244.1.10,10.244.2.10',
  ]);
  const cip = p.dests.find((d) => d.addr === '10.96.0.1')!;
  expect(cip.actions).toEqual({ pod: { kind: 'pass', masq: false }, node: { kind: 'pass', masq: true }, other: { kind: 'pass', masq: true } });
  expect(cip.bind).toBe(true);
  expect(p.dests.find((d) => d.addr === '192.168.50.11')!.bind).toBe(false); // node addresses are not bound to kube-ipvs0
  // Hairpin: only the endpoint on this node can be its own client here.
  expect(p.endpointIPs.map((e) => e.ip)).toEqual(['10.244.1.10']);
});

test('externalTrafficPolicy Local: outside clients get the local endpoints, pods and the node a firewall-mark server', () => {
  const p = planService(svc({}, {
    clusterEndpoints: [ep('10.244.1.10', true), ep('10.244.2.10')], localEndpoints: [ep('10.244.1.10', true)],
    clusterIp: all(r(Target.CLUSTER)),
    loadBalancerIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.LOCAL) },
  }), ctx());
  const lb = p.virtuals.find((v) => v.addr === '192.168.60.1')!;
  expect(lb.endpoints.map((e) => e.ip)).toEqual(['10.244.1.10']);
  const d = p.dests.find((x) => x.addr === '192.168.60.1')!;
  expect(d.actions.other).toEqual({ kind: 'pass', masq: false });
  expect(d.actions.pod.fwmark).toBeDefined();
  expect(d.actions.node).toEqual({ kind: 'pass', masq: true, fwmark: d.actions.pod.fwmark });
  const fwm = p.virtuals.find((v) => v.fwmark === d.actions.pod.fwmark)!;
  expect(fwm.endpoints.map((e) => e.ip)).toEqual(['10.244.1.10', '10.244.2.10']);
});

test('no endpoints: every class rejected and no virtual server; drop classes keep the others\' server', () => {
  const none = planService(svc({}, { clusterIp: all(r(Target.REJECT)) }), ctx());
  expect(none.virtuals).toEqual([]);
  expect(none.dests[0].actions.other.kind).toBe('reject');
  const drop = planService(svc({}, {
    clusterEndpoints: [ep('10.244.2.10')], clusterIp: all(r(Target.CLUSTER)),
    loadBalancerIp: { pod: r(Target.CLUSTER), node: r(Target.CLUSTER, true), other: r(Target.DROP) },
  }), ctx());
  expect(drop.virtuals.find((v) => v.addr === '192.168.60.1')!.endpoints.map((e) => e.ip)).toEqual(['10.244.2.10']);
  const d = drop.dests.find((x) => x.addr === '192.168.60.1')!;
  expect([d.actions.pod.fwmark, d.actions.other.kind]).toEqual([undefined, 'drop']);
});

test('the companion table adds and removes only what changed; shared class chains go with their last user', () => {
  const t = new CompanionTable('ip', 'kpng-ipvs', [{ cidr: '10.244.0.0/16' }]);
  const dest = (addr: string, masq: boolean): DestPlan => ({
    fam: 'ip', addr, proto: 'tcp', port: 80, bind: true, allowed: null,
    actions: { pod: { kind: 'pass', masq: false }, node: { kind: 'pass', masq }, other: { kind: 'pass', masq } },
  });
  t.setDest('a', dest('10.96.0.1', true));
  t.setDest('b', dest('10.96.0.2', true));
  t.setDest('c', dest('10.96.0.3', false));
  const full = t.fullOps([{ cidr: '10.244.0.0/16' }]);
  expect(full.filter((o) => 'chain' in o && o.op === 'add').map((o) => (o as { chain: { name: string } }).chain.name))
    .toEqual(['cls-pass-masq-masq', 'input', 'output', 'postrouting']);
  t.committed(true);
  expect(t.diffOps()).toEqual([]);
  t.setDest('a', null);
  const one = t.diffOps();
  expect(one.map((o) => o.op)).toEqual(['delete']);
  t.committed(false);
  t.setDest('b', null);
  const last = t.diffOps();
  expect(last.map((o) => `${o.op} ${'chain' in o ? `chain ${(o as { chain: { name: string } }).chain.name}` : 'elements'}`))
    .toEqual(['delete elements', 'flush chain cls-pass-masq-masq', 'delete chain cls-pass-masq-masq']);
});

test('the class chain matches pods by source CIDR, or by incoming interface (whole name, or prefix bytes only)', () => {
  const actions: DestPlan['actions'] = { pod: { kind: 'pass', masq: false }, node: { kind: 'pass', masq: true }, other: { kind: 'drop', masq: false } };
  const podRule = (pods: Parameters<typeof classChain>[2]) => classChain('ip', actions, pods).rules[0]!;
  const ifname = (e: NftExpr | undefined) => (e && e.type === 'cmp' ? Buffer.from(e.data).toString('latin1') : null);
  const cidr = podRule([{ cidr: '10.244.0.0/16' }]);
  expect(cidr[0]).toMatchObject({ type: 'payload', offset: 12 });
  const bridge = podRule([{ iifname: 'cni0', prefix: false }]);
  expect(bridge[0]).toEqual({ type: 'meta', key: 'iifname', dreg: NFT_REG_1 });
  expect(ifname(bridge[1])).toBe('cni0'.padEnd(16, '\0'));
  const prefix = podRule([{ iifname: 'veth', prefix: true }]);
  expect(ifname(prefix[1])).toBe('veth');
  expect(bridge.at(-1)).toEqual({ type: 'verdict', verdict: 'accept' });
  // No pod source (no detection): pods are not a rule of their own; the node and the rest follow.
  expect(classChain('ip', actions, []).rules).toHaveLength(2);
});
