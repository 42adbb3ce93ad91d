// kpng's nft backend with real packets: a netns cluster (test/e2e/lab), kpng running on node n1 from
// a kubectl-style state file, TCP and UDP probes from the node, from pods and from an outside client.
import { Lab, ADDR, PODS } from './lab/lab';
import { Kpng, kpngMode } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';

const d = gated(need.root()).describe;

const podIP = (n: string) => PODS.find((p) => p.name === n)!.v4;
const podNames = new Set(PODS.map((p) => p.name));

const ALL = ['p1a', 'p1b', 'p2a', 'p2b'];
const base: SvcSpec[] = [
  {
    name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10', 'fd00:96::10'], externalIPs: ['192.168.60.20'],
    ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080, nodePort: 30081 }],
    pods: ALL,
  },
  {
    name: 'lb', type: 'LoadBalancer', clusterIPs: ['10.96.0.20', 'fd00:96::20'], lbIPs: ['192.168.60.10', 'fd00:60::10'],
    ports: [{ port: 80, targetPort: 8081, nodePort: 30082 }], pods: ALL,
  },
  {
    name: 'lb-allow', type: 'LoadBalancer', clusterIPs: ['10.96.0.21'], lbIPs: ['192.168.60.11'], sourceRanges: ['192.168.50.96/28'],
    ports: [{ port: 80, targetPort: 8080, nodePort: 30083 }], pods: ALL,
  },
  {
    name: 'lb-deny', type: 'LoadBalancer', clusterIPs: ['10.96.0.22'], lbIPs: ['192.168.60.12'], sourceRanges: ['10.0.0.0/8'],
    ports: [{ port: 80, targetPort: 8080, nodePort: 30084 }], pods: ALL,
  },
  { name: 'aff', clusterIPs: ['10.96.0.30'], affinity: 60, ports: [{ port: 80, targetPort: 8080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080 }], pods: ALL },
  { name: 'empty', type: 'NodePort', clusterIPs: ['10.96.0.40', 'fd00:96::40'], ports: [{ port: 80, targetPort: 8080, nodePort: 30040 }], pods: [] },
  {
    name: 'local', type: 'LoadBalancer', etp: 'Local', clusterIPs: ['10.96.0.50'], lbIPs: ['192.168.60.50'],
    ports: [{ port: 80, targetPort: 8080, nodePort: 30050 }], pods: ['p1a', 'p2a', 'p2b'],
  },
  { name: 'local-none', type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.60'], ports: [{ port: 80, targetPort: 8080, nodePort: 30060 }], pods: ['p2a'] },
  { name: 'hairpin', clusterIPs: ['10.96.0.70'], ports: [{ port: 80, targetPort: 8080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080 }], pods: ['p1a'] },
  { name: 'itp-local', itp: 'Local', clusterIPs: ['10.96.0.90'], ports: [{ port: 80, targetPort: 8080 }], pods: ['p2a'] },
  { name: 'churn', clusterIPs: ['10.96.0.80'], ports: [{ port: 80, targetPort: 8080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080 }], pods: ['p1a'] },
];

d(`nft backend e2e (kpng on n1, ${kpngMode()} mode)`, () => {
  let lab: Lab;
  let kpng: Kpng;
  let state: StateFile;
  let current: SvcSpec[];

  const names = (rs: { name?: string }[]) => new Set(rs.map((r) => r.name));
  const set = async (svcs: SvcSpec[]) => {
    const before = kpng.syncs;
    current = svcs;
    state.write(svcs);
    await kpng.waitSyncs(before + 1, 10000);
  };

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    current = base;
    state.write(base);
    kpng = await Kpng.start(lab, state.file);
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng (${kpng.mode}) log:\n${kpng.log}\n\nruleset:\n${lab.nftList(lab.ns.n1)}`);
    }
  });

  test('ClusterIP from the node and from a pod, TCP and UDP', async () => {
    for (const from of [lab.ns.n1, lab.ns.p1a]) {
      for (const proto of ['tcp', 'udp'] as const) {
        const rs = await lab.probe(from, proto, '10.96.0.10', 80, 3);
        for (const r of rs) {
          expect(r).toMatchObject({ ok: true, port: 8080 });
          expect(podNames.has(r.name!)).toBe(true);
        }
      }
    }
    // From a pod: the source is kept (no masquerade inside the cluster).
    for (const r of await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.10', 80, 8)) if (r.name !== 'p1a') expect(r.peer).toBe(podIP('p1a'));
    // From the node: masqueraded (its source is outside the cluster CIDR).
    const [n] = await lab.probe(lab.ns.n1, 'tcp', '10.96.0.10', 80);
    expect([ADDR.n1.gw4, ADDR.n1.v4]).toContain(n.peer);
  });

  test('endpoint spread: many connections reach several endpoints', async () => {
    const rs = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.10', 80, 40);
    expect(rs.every((r) => r.ok)).toBe(true);
    expect(names(rs).size).toBeGreaterThanOrEqual(3);
    const us = await lab.probe(lab.ns.n1, 'udp', '10.96.0.10', 80, 40);
    expect(us.every((r) => r.ok)).toBe(true);
    expect(names(us).size).toBeGreaterThanOrEqual(3);
  });

  test('NodePort, external IP and load-balancer IP from outside (masqueraded, ETP Cluster)', async () => {
    for (const [proto, host, port] of [
      ['tcp', ADDR.n1.v4, 30080], ['udp', ADDR.n1.v4, 30081], ['tcp', '192.168.60.20', 80], ['udp', '192.168.60.20', 80],
      ['tcp', '192.168.60.10', 80], ['tcp', ADDR.n1.v4, 30082],
    ] as const) {
      const rs = await lab.probe(lab.ns.client, proto, host, port, 4);
      for (const r of rs) {
        expect(r).toMatchObject({ ok: true });
        expect(r.peer).not.toBe(ADDR.client.v4);
      }
    }
  });

  test('IPv6: ClusterIP from a pod and the node, NodePort and LB IP from outside', async () => {
    const rs = await lab.probe(lab.ns.p1b, 'tcp', 'fd00:96::10', 80, 10);
    expect(rs.every((r) => r.ok && r.me!.includes(':'))).toBe(true);
    for (const r of rs) if (r.name !== 'p1b') expect(r.peer).toBe('fd00:244:1::11');
    expect(names(rs).size).toBeGreaterThanOrEqual(2);
    expect((await lab.probe(lab.ns.n1, 'udp', 'fd00:96::10', 80, 2)).every((r) => r.ok)).toBe(true);
    expect((await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v6, 30080, 2)).every((r) => r.ok)).toBe(true);
    expect((await lab.probe(lab.ns.client, 'tcp', 'fd00:60::10', 80, 2)).every((r) => r.ok)).toBe(true);
    const [e] = await lab.probe(lab.ns.p1a, 'tcp', 'fd00:96::40', 80, 1, 3000);
    expect(e).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
  });

  test('ClientIP affinity: the same endpoint every time', async () => {
    const rs = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.30', 80, 12);
    expect(rs.every((r) => r.ok)).toBe(true);
    expect(names(rs).size).toBe(1);
    const other = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.30', 80, 6);
    expect(names(other).size).toBe(1);
    const us = await lab.probe(lab.ns.p1b, 'udp', '10.96.0.30', 80, 8);
    expect(us.every((r) => r.ok)).toBe(true);
    expect(names(us).size).toBe(1);
  });

  test('no endpoints: rejected fast (connection refused), not a timeout', async () => {
    for (const [from, host, port] of [[lab.ns.p1a, '10.96.0.40', 80], [lab.ns.n1, '10.96.0.40', 80], [lab.ns.client, ADDR.n1.v4, 30040]] as const) {
      const [r] = await lab.probe(from, 'tcp', host, port, 1, 3000);
      // A reject (an ICMP/RST answer), not a drop: a drop would end in ETIMEDOUT after the probe's 3 s.
      expect(r).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    }
  });

  test('externalTrafficPolicy Local: client address kept, local endpoint only', async () => {
    for (const [host, port] of [[ADDR.n1.v4, 30050], ['192.168.60.50', 80]] as const) {
      const rs = await lab.probe(lab.ns.client, 'tcp', host, port, 8);
      for (const r of rs) expect(r).toMatchObject({ ok: true, name: 'p1a', peer: ADDR.client.v4 });
    }
    // From a pod, the cluster IP still spreads over every endpoint.
    const rs = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.50', 80, 30);
    expect(names(rs).size).toBeGreaterThanOrEqual(2);
  });

  test('externalTrafficPolicy Local without a local endpoint: dropped (timeout), internal traffic still served', async () => {
    const [r] = await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30060, 1, 800);
    expect(r).toMatchObject({ ok: false, err: 'timeout' });
    const [c] = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.60', 80);
    expect(c).toMatchObject({ ok: true, name: 'p2a' });
  });

  test('internalTrafficPolicy Local without a local endpoint: dropped', async () => {
    const [r] = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.90', 80, 1, 800);
    expect(r).toMatchObject({ ok: false, err: 'timeout' });
  });

  test('loadBalancerSourceRanges: allowed range served, others dropped', async () => {
    const [ok] = await lab.probe(lab.ns.client, 'tcp', '192.168.60.11', 80);
    expect(ok.ok).toBe(true);
    const [no] = await lab.probe(lab.ns.client, 'tcp', '192.168.60.12', 80, 1, 800);
    expect(no).toMatchObject({ ok: false, err: 'timeout' });
  });

  test('hairpin: a pod reaching its own service lands on itself, masqueraded', async () => {
    const rs = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.70', 80, 3);
    for (const r of rs) {
      expect(r).toMatchObject({ ok: true, name: 'p1a' });
      expect(r.peer).not.toBe(podIP('p1a'));
    }
    const [u] = await lab.probe(lab.ns.p1a, 'udp', '10.96.0.70', 80);
    expect(u).toMatchObject({ ok: true, name: 'p1a' });
    expect(u.peer).not.toBe(podIP('p1a'));
  });

  test('endpoint churn is followed within the sync period', async () => {
    expect((await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80))[0]).toMatchObject({ ok: true, name: 'p1a' });
    const moved = current.map((s) => (s.name === 'churn' ? { ...s, pods: ['p2b'] } : s));
    await set(moved);
    for (const proto of ['tcp', 'udp'] as const) {
      const rs = await lab.probe(lab.ns.p1b, proto, '10.96.0.80', 80, 4);
      for (const r of rs) expect(r).toMatchObject({ ok: true, name: 'p2b' });
    }
    // Grow to several endpoints, then back to none (rejected), then one again.
    await set(current.map((s) => (s.name === 'churn' ? { ...s, pods: ['p1a', 'p1b', 'p2a', 'p2b'] } : s)));
    expect(names(await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80, 30)).size).toBeGreaterThanOrEqual(3);
    await set(current.map((s) => (s.name === 'churn' ? { ...s, pods: [] } : s)));
    expect((await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80, 1, 3000))[0]).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    await set(current.map((s) => (s.name === 'churn' ? { ...s, pods: ['p2a'] } : s)));
    expect((await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80))[0]).toMatchObject({ ok: true, name: 'p2a' });
  });

  gated(need.that('kpng in cli or native mode', kpngMode() !== 'text', 'the text mode has no conntrack path: unset KPNG_E2E_MODE or set it to cli or native')).test('stale UDP conntrack entries of a removed endpoint are deleted', async () => {
    await set(current.map((s) => (s.name === 'churn' ? { ...s, pods: ['p2b'] } : s)));
    // Same client port every time: the flow's conntrack entry would keep it on the old endpoint.
    const [a] = await lab.probe(lab.ns.p1b, 'udp', '10.96.0.80', 80, 1, 1500, 40123);
    expect(a).toMatchObject({ ok: true, name: 'p2b' });
    await set(current.map((s) => (s.name === 'churn' ? { ...s, pods: ['p1a'] } : s)));
    const [b] = await lab.probe(lab.ns.p1b, 'udp', '10.96.0.80', 80, 1, 1500, 40123);
    expect(b).toMatchObject({ ok: true, name: 'p1a' });
  });

  test('service removal and addition; restart with traffic flowing leaves no stale rules', async () => {
    // Remove a service: its IP is no longer handled (routed to the default gateway: times out or is unreachable).
    await set(current.filter((s) => s.name !== 'hairpin'));
    const [gone] = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.70', 80, 1, 800);
    expect(gone.ok).toBe(false);
    expect(lab.nftList(lab.ns.n1, 'table', 'ip', 'kpng')).not.toContain('10.96.0.70');

    // Restart: traffic keeps flowing during the restart, and a service removed while kpng was down disappears.
    let stop = false;
    const failures: string[] = [];
    let okCount = 0;
    const traffic = (async () => {
      while (!stop) {
        const rs = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.10', 80, 5, 1000);
        for (const r of rs) { if (r.ok) okCount++; else failures.push(r.err ?? '?'); }
      }
    })();
    await kpng.stop();
    const without = current.filter((s) => s.name !== 'lb-deny');
    current = without;
    state.write(without);
    kpng = await Kpng.start(lab, state.file);
    await new Promise((r) => setTimeout(r, 300));
    stop = true;
    await traffic;
    expect(failures).toEqual([]);
    expect(okCount).toBeGreaterThan(0);
    const rules = lab.nftList(lab.ns.n1, 'table', 'ip', 'kpng');
    expect(rules).not.toContain('192.168.60.12');
    expect(rules).not.toContain('lb-deny');
    expect(rules).toContain('10.96.0.10');
    expect(lab.nftList(lab.ns.n1, 'tables').match(/table ip kpng/g)?.length).toBe(1);
  }, 60000);
});
