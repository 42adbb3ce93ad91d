// The IPVS dataplane on a fake of its kernel (src/backend/ipvs/fake.ts): what it asks for, in which
// order, how it drains, takes over a restarted node's state and recovers from a failed batch. The
// same behaviour against the real kernel: test/e2e/ipvs*.guest.test.ts in the qemu guest.
import { IpvsDataplane } from '../src/backend/ipvs/dataplane';
import type { Service } from '../src/model/enls';
import { FakeIpvsKernel } from '../src/backend/ipvs/fake';
import { cluster, ep, node, slice, svc, type Obj } from './helpers/k8s';

const NODE_IP = '192.168.50.1';

/** The services and node item of a cluster seen from n1. */
function stateOf(objects: Obj[]) {
  const items = [...cluster('n1', [node('n1'), ...objects]).state.items()];
  return { services: items.flatMap((i) => (i.service ? [i.service] : [])) as Service[], node: items.find((i) => i.node)?.node ?? undefined };
}

const web = (eps: string[], o: { udp?: boolean } = {}) => [
  svc('web', { clusterIPs: ['10.96.0.10'], type: 'NodePort', ports: [{ name: 'p', protocol: o.udp ? 'UDP' : 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }] }),
  slice('web-1', 'web', eps.map((ip) => ep(ip, { node: 'n2' })), { ports: [{ name: 'p', protocol: o.udp ? 'UDP' : 'TCP', port: 8080 }] }),
];

const dataplane = (fake: FakeIpvsKernel, logs: string[] = [], opts: { drainCheckMs?: number; excludeCIDRs?: string[] } = {}) => new IpvsDataplane({
  scheduler: 'rr', interface: 'kube-ipvs0', table: 'kpng-ipvs', drainCheckMs: opts.drainCheckMs ?? 0, log: (m) => logs.push(m), kernel: fake, paths: fake,
  settings: { strictArp: false, timeouts: { tcp: 0, tcpFin: 0, udp: 0 }, excludeCIDRs: opts.excludeCIDRs ?? [] },
});

test('a full sync: virtual servers before their addresses, then the companion table; node ports on the node\'s address, not on kube-ipvs0', async () => {
  const fake = new FakeIpvsKernel([NODE_IP]);
  const { services, node: n } = stateOf(web(['10.244.2.5', '10.244.2.6']));
  await dataplane(fake).fullSync(services, n);
  expect(fake.text()).toEqual([
    'kube-ipvs0 10.96.0.10',
    'tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w1',
    `tcp/${NODE_IP}/30080 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w1`,
  ]);
  expect(fake.calls).toEqual(['ipvs addService,addDest,addDest,addService,addDest,addDest', 'addrs add 10.96.0.10', 'nft']);
  // The companion table in the fake nftables kernel: both families, the service's address in its set.
  expect([...fake.nftFake.ruleset.keys()].sort()).toEqual(['ip kpng-ipvs', 'ip6 kpng-ipvs']);
  expect(fake.nftFake.ruleset.get('ip kpng-ipvs')!.sets.get('service-ips')!.elements.has('0a60000a/')).toBe(true);
});

test('a removed TCP endpoint is drained (weight 0) and deleted once its connections end; a UDP one goes at once', async () => {
  const fake = new FakeIpvsKernel([NODE_IP]);
  const dp = dataplane(fake, [], { drainCheckMs: 5 });
  try {
    const before = stateOf(web(['10.244.2.5', '10.244.2.6']));
    await dp.fullSync(before.services, before.node);
    fake.connect('tcp/10.96.0.10/80', '10.244.2.6/8080', 1);
    const after = stateOf(web(['10.244.2.5']));
    await dp.update([{ key: 'svc/default/web', old: before.services[0], new: after.services[0] }], after.node);
    expect(fake.text()).toContain('tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w0');
    // The node port's real server had no connection: deleted by the next drain check.
    await waitFor(() => fake.text().includes(`tcp/${NODE_IP}/30080 rr -> 10.244.2.5/8080 w1`));
    expect(fake.text()).toContain('tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w0');
    fake.connect('tcp/10.96.0.10/80', '10.244.2.6/8080', 0);
    await waitFor(() => fake.text().includes('tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1'));
    expect(dp.counters).toEqual({ drained: 2, drainDeleted: 2 });
  } finally {
    await dp.close();
  }
  const udp = new FakeIpvsKernel([NODE_IP]);
  const u = dataplane(udp);
  const b = stateOf(web(['10.244.2.5', '10.244.2.6'], { udp: true }));
  await u.fullSync(b.services, b.node);
  const a = stateOf(web(['10.244.2.5'], { udp: true }));
  await u.update([{ key: 'svc/default/web', old: b.services[0], new: a.services[0] }], a.node);
  expect(udp.text()).toContain('udp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1');
});

test('a restarted dataplane takes the kernel over: what no service asks for goes, except inside --ipvs-exclude-cidrs; what stays is not re-added', async () => {
  const fake = new FakeIpvsKernel([NODE_IP]);
  const first = stateOf([...web(['10.244.2.5']),
    svc('old', { clusterIPs: ['10.96.0.20'] }), slice('old-1', 'old', [ep('10.244.2.9', { node: 'n2' })])]);
  await dataplane(fake).fullSync(first.services, first.node);
  // Someone else's virtual server, inside the excluded range.
  await fake.ipvs([{ op: 'addService', service: { address: '10.200.0.1', protocol: 'tcp', port: 443, scheduler: 'rr' } }]);
  fake.calls.length = 0;
  const next = stateOf(web(['10.244.2.5']));
  await dataplane(fake, [], { excludeCIDRs: ['10.200.0.0/16'] }).fullSync(next.services, next.node);
  expect(fake.text()).toEqual([
    'kube-ipvs0 10.96.0.10',
    'tcp/10.200.0.1/443 rr -> ',
    'tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1',
    `tcp/${NODE_IP}/30080 rr -> 10.244.2.5/8080 w1`,
  ]);
  expect(fake.calls).toEqual(['nft', 'addrs del 10.96.0.20', 'ipvs delService']);
});

test('a failed IPVS batch fails the sync; the next full sync converges from what the kernel holds', async () => {
  const fake = new FakeIpvsKernel([NODE_IP]);
  const dp = dataplane(fake);
  const s = stateOf(web(['10.244.2.5', '10.244.2.6']));
  fake.failNextIpvs = true;
  await expect(dp.fullSync(s.services, s.node)).rejects.toThrow(/some replies lost/);
  await dp.fullSync(s.services, s.node);
  expect(fake.text()).toEqual([
    'kube-ipvs0 10.96.0.10',
    'tcp/10.96.0.10/80 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w1',
    `tcp/${NODE_IP}/30080 rr -> 10.244.2.5/8080 w1, 10.244.2.6/8080 w1`,
  ]);
});

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
  if (!cond()) throw new Error('condition not met');
}
