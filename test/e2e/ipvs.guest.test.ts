// kpng's IPVS backend with real packets, in a kernel that has IPVS (the qemu guest, hack/qemu/test-guest.sh):
// the netns cluster of test/e2e/lab, the real `kpng file --to ipvs` on node n1, TCP and UDP probes from the
// node, from pods and from an outside client; the kernel's state checked with ipvsadm / ip / nft.
import { Lab, ADDR, PODS, NODE_BIN } from './lab/lab';
import { StateFile, type SvcSpec } from './lab/world';
import { KpngIpvs, STREAM, StreamClient, ipvsadm, realServers, udpConnected } from './ipvs/harness';

const podIP = (n: string) => PODS.find((p) => p.name === n)!.v4;
const podIP6 = (n: string) => PODS.find((p) => p.name === n)!.v6;
const ALL = ['p1a', 'p1b', 'p2a', 'p2b'];
const N1 = ADDR.n1.v4;

const base: SvcSpec[] = [
  {
    name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], externalIPs: ['192.168.60.20'],
    ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080, nodePort: 30081 }],
    pods: ALL,
  },
  { name: 'lb', type: 'LoadBalancer', clusterIPs: ['10.96.0.20'], lbIPs: ['192.168.60.10'], ports: [{ port: 80, targetPort: 8081, nodePort: 30082 }], pods: ALL },
  { name: 'lb-deny', type: 'LoadBalancer', clusterIPs: ['10.96.0.22'], lbIPs: ['192.168.60.12'], sourceRanges: ['10.0.0.0/8'], ports: [{ port: 80, targetPort: 8080, nodePort: 30084 }], pods: ALL },
  { name: 'aff', clusterIPs: ['10.96.0.30'], affinity: 60, ports: [{ port: 80, targetPort: 8080 }], pods: ALL },
  { name: 'empty', type: 'NodePort', clusterIPs: ['10.96.0.40'], ports: [{ port: 80, targetPort: 8080, nodePort: 30040 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080 }], pods: [] },
  { name: 'local', type: 'LoadBalancer', etp: 'Local', clusterIPs: ['10.96.0.50'], lbIPs: ['192.168.60.50'], ports: [{ port: 80, targetPort: 8080, nodePort: 30050 }], pods: ['p1a', 'p2a', 'p2b'] },
  { name: 'local-none', type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.60'], ports: [{ port: 80, targetPort: 8080, nodePort: 30060 }], pods: ['p2a'] },
  { name: 'itp-local', itp: 'Local', clusterIPs: ['10.96.0.90'], ports: [{ port: 80, targetPort: 8080 }], pods: ['p2a'] },
  { name: 'hairpin', clusterIPs: ['10.96.0.70'], ports: [{ port: 80, targetPort: 8080 }], pods: ['p1a'] },
  { name: 'churn', clusterIPs: ['10.96.0.80'], ports: [{ port: 80, targetPort: 8080 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080 }], pods: ['p1a'] },
  { name: 'stream', clusterIPs: ['10.96.0.85'], ports: [{ port: 7070, targetPort: 7070 }], pods: ['p1a', 'p2a'] },
  {
    name: 'dual', type: 'LoadBalancer', clusterIPs: ['10.96.0.15', 'fd00:96::15'], lbIPs: ['192.168.60.15', 'fd00:60::15'],
    ports: [{ port: 80, targetPort: 8080, nodePort: 30085 }, { name: 'u', protocol: 'UDP', port: 80, targetPort: 8080, nodePort: 30086 }], pods: ALL,
  },
  { name: 'empty6', clusterIPs: ['fd00:96::41'], ports: [{ port: 80, targetPort: 8080 }], pods: [] },
];

describe('IPVS backend e2e (guest kernel)', () => {
  let lab: Lab;
  let kpng: KpngIpvs;
  let state: StateFile;
  let current: SvcSpec[] = base;

  const names = (rs: { name?: string }[]) => new Set(rs.map((r) => r.name));
  const set = async (svcs: SvcSpec[]) => {
    const before = kpng.syncs;
    current = svcs;
    state.write(svcs);
    await kpng.waitSyncs(before + 1);
  };
  const withSvc = (name: string, patch: Partial<SvcSpec>) => current.map((s) => (s.name === name ? { ...s, ...patch } : s));

  beforeAll(async () => {
    lab = await Lab.create();
    // Stream servers (long-lived connections) in the pods behind "stream".
    await Promise.all(['p1a', 'p2a'].map(async (p) => {
      const child = lab.spawnIn(lab.ns[p as 'p1a'], NODE_BIN, [STREAM, 'server', p, '7070']);
      await new Promise<void>((resolve, reject) => {
        child.stdout!.once('data', () => resolve());
        child.once('exit', (c) => reject(new Error(`stream server ${p} exited ${c}`)));
      });
    }));
    state = new StateFile();
    state.write(base);
    kpng = new KpngIpvs(lab, state.file);
    await kpng.start();
  }, 180000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng log:\n${kpng.log}\n\nipvsadm:\n${ipvsadm(lab, lab.ns.n1)}\n\n${lab.nftList(lab.ns.n1, 'table', 'ip', 'kpng-ipvs')}`);
    }
  });

  test('the kernel state: virtual servers, kube-ipvs0 addresses, sysctls', () => {
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.10:80')).toEqual(ALL.map((p) => `${podIP(p)}:8080 1`).sort());
    expect(realServers(lab, lab.ns.n1, 'udp', '10.96.0.10:80')).toEqual(ALL.map((p) => `${podIP(p)}:8080 1`).sort());
    expect(realServers(lab, lab.ns.n1, 'tcp', `${N1}:30080`)).toHaveLength(4);
    expect(ipvsadm(lab, lab.ns.n1, '-t', '10.96.0.30:80')).toMatch(/persistent 60/);
    expect(ipvsadm(lab, lab.ns.n1)).not.toContain('10.96.0.40'); // no endpoints: rejected by nft, no virtual server
    const addrs = lab.exec(lab.ns.n1, 'ip', ['-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0']);
    for (const a of ['10.96.0.10', '192.168.60.20', '192.168.60.10', '10.96.0.40', '10.96.0.90']) expect(addrs).toContain(`${a}/32`);
    expect(kpng.log).toMatch(/sysctl net\/ipv4\/vs\/conntrack (0 -> 1|= 1)/);
    expect(lab.exec(lab.ns.n1, 'sysctl', ['-n', 'net.ipv4.vs.expire_nodest_conn']).trim()).toBe('1');
  });

  test('ClusterIP from the node and from a pod, TCP and UDP, spread over every endpoint', async () => {
    for (const from of [lab.ns.n1, lab.ns.p1a]) {
      const tcp = await lab.probe(from, 'tcp', '10.96.0.10', 80, 16);
      expect(tcp.every((r) => r.ok)).toBe(true);
      expect(names(tcp)).toEqual(new Set(ALL));
      const udp = await lab.probe(from, 'udp', '10.96.0.10', 80, 8);
      expect(udp.every((r) => r.ok)).toBe(true);
      expect(names(udp).size).toBeGreaterThan(1);
    }
    // A pod is not masqueraded; the node is (its source would be the cluster IP itself).
    const fromPod = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.10', 80, 8);
    expect(fromPod.filter((r) => r.name !== 'p1b').every((r) => r.peer === podIP('p1b'))).toBe(true);
  });

  test('node port, external IP and load-balancer IP from an outside client, masqueraded', async () => {
    for (const [host, port] of [[N1, 30080], ['192.168.60.20', 80], ['192.168.60.10', 80], [N1, 30082]] as const) {
      const rs = await lab.probe(lab.ns.client, 'tcp', host, port, 8);
      expect(rs.every((r) => r.ok)).toBe(true);
      expect(names(rs).size).toBeGreaterThan(1);
      // Endpoints on n2 answer through n1: the connection is masqueraded (source = an address of n1).
      for (const r of rs) expect(r.peer).not.toBe(ADDR.client.v4);
    }
    const udp = await lab.probe(lab.ns.client, 'udp', N1, 30081, 4);
    expect(udp.every((r) => r.ok)).toBe(true);
  });

  test('IPv6: ClusterIP from the node and a pod (TCP and UDP), node port and LB IP from an outside client, refused without endpoints', async () => {
    expect(realServers(lab, lab.ns.n1, 'tcp', '[fd00:96::15]:80')).toEqual(ALL.map((p) => `[${podIP6(p)}]:8080 1`).sort());
    expect(realServers(lab, lab.ns.n1, 'udp', '[fd00:96::15]:80')).toHaveLength(4);
    const addrs = lab.exec(lab.ns.n1, 'ip', ['-6', '-o', 'addr', 'show', 'dev', 'kube-ipvs0']);
    for (const a of ['fd00:96::15', 'fd00:60::15', 'fd00:96::41']) expect(addrs).toContain(`${a}/128`);
    for (const from of [lab.ns.n1, lab.ns.p1a]) {
      const tcp = await lab.probe(from, 'tcp', 'fd00:96::15', 80, 16);
      expect(tcp.every((r) => r.ok)).toBe(true);
      expect(names(tcp).size).toBeGreaterThan(1);
      expect((await lab.probe(from, 'udp', 'fd00:96::15', 80, 4)).every((r) => r.ok)).toBe(true);
    }
    for (const [host, port] of [[ADDR.n1.v6, 30085], ['fd00:60::15', 80]] as const) {
      const rs = await lab.probe(lab.ns.client, 'tcp', host, port, 8);
      expect(rs.every((r) => r.ok)).toBe(true);
      expect(names(rs).size).toBeGreaterThan(1);
    }
    expect((await lab.probe(lab.ns.client, 'udp', ADDR.n1.v6, 30086, 2)).every((r) => r.ok)).toBe(true);
    const [refused] = await lab.probe(lab.ns.p1a, 'tcp', 'fd00:96::41', 80, 1, 3000);
    expect(refused).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
  });

  test('ClientIP affinity: one client sticks to one endpoint (IPVS persistence)', async () => {
    const rs = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.30', 80, 10);
    expect(rs.every((r) => r.ok)).toBe(true);
    expect(names(rs).size).toBe(1);
  });

  test('reject without endpoints and on ports a service does not serve; drop where the model says drop', async () => {
    const [tcp] = await lab.probe(lab.ns.client, 'tcp', N1, 30040, 1, 3000);
    expect(tcp).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    const [fromPod] = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.40', 80, 1, 3000);
    expect(fromPod).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    expect(udpConnected(lab, lab.ns.p1a, '10.96.0.40', 80)).toEqual({ ok: false, err: 'ECONNREFUSED' });
    expect(udpConnected(lab, lab.ns.p1a, '10.96.0.10', 80).ok).toBe(true);
    const [unserved] = await lab.probe(lab.ns.n1, 'tcp', '10.96.0.10', 81, 1, 3000);
    expect(unserved).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    // Source ranges: the outside client is not in 10.0.0.0/8.
    const [denied] = await lab.probe(lab.ns.client, 'tcp', '192.168.60.12', 80, 1, 1500);
    expect(denied).toMatchObject({ ok: false, err: 'timeout' });
    // internalTrafficPolicy Local without a local endpoint: dropped.
    const [itp] = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.90', 80, 1, 1500);
    expect(itp).toMatchObject({ ok: false, err: 'timeout' });
  });

  test('externalTrafficPolicy Local: outside clients keep their address and reach local endpoints only', async () => {
    const rs = await lab.probe(lab.ns.client, 'tcp', '192.168.60.50', 80, 6);
    expect(rs.every((r) => r.ok && r.name === 'p1a' && r.peer === ADDR.client.v4)).toBe(true);
    const np = await lab.probe(lab.ns.client, 'tcp', N1, 30050, 4);
    expect(np.every((r) => r.ok && r.name === 'p1a' && r.peer === ADDR.client.v4)).toBe(true);
    // Pods are short-circuited to every endpoint (a firewall-mark virtual server).
    const fromPod = await lab.probe(lab.ns.p1b, 'tcp', '192.168.60.50', 80, 16);
    expect(fromPod.every((r) => r.ok)).toBe(true);
    expect(names(fromPod)).toEqual(new Set(['p1a', 'p2a', 'p2b']));
    expect(ipvsadm(lab, lab.ns.n1)).toMatch(/FWM\s+\d+ rr/);
    // No local endpoint: outside clients are dropped, the node still reaches the cluster endpoint.
    const [none] = await lab.probe(lab.ns.client, 'tcp', N1, 30060, 1, 1500);
    expect(none).toMatchObject({ ok: false, err: 'timeout' });
    const fromNode = await lab.probe(lab.ns.n1, 'tcp', '10.96.0.60', 80, 2);
    expect(fromNode.every((r) => r.ok && r.name === 'p2a')).toBe(true);
  });

  test('hairpin: a pod reaches itself through its service (masqueraded)', async () => {
    const [r] = await lab.probe(lab.ns.p1a, 'tcp', '10.96.0.70', 80, 1);
    expect(r).toMatchObject({ ok: true, name: 'p1a' });
    expect(r.peer).not.toBe(podIP('p1a'));
  });

  test('churn: endpoints follow the state file, TCP and UDP', async () => {
    for (const pods of [['p2a'], ['p1b', 'p2b'], ['p1a']]) {
      await set(withSvc('churn', { pods }));
      expect(realServers(lab, lab.ns.n1, 'udp', '10.96.0.80:80')).toEqual(pods.map((p) => `${podIP(p)}:8080 1`).sort());
      const rs = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80, 6);
      expect(names(rs)).toEqual(new Set(pods));
      const u = await lab.probe(lab.ns.p1b, 'udp', '10.96.0.80', 80, 3);
      expect(u.every((r) => r.ok && pods.includes(r.name!))).toBe(true);
    }
    // A service removed and added back.
    await set(current.filter((s) => s.name !== 'churn'));
    expect(ipvsadm(lab, lab.ns.n1)).not.toContain('10.96.0.80');
    const [gone] = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80, 1, 1500);
    expect(gone.ok).toBe(false);
    await set([...current, base.find((s) => s.name === 'churn')!]);
    const back = await lab.probe(lab.ns.p1b, 'tcp', '10.96.0.80', 80, 2);
    expect(back.every((r) => r.ok && r.name === 'p1a')).toBe(true);
  });

  test('graceful termination: a removed endpoint keeps its open connection, takes no new one, goes once it closes', async () => {
    // Open connections until one lands on p2a.
    let conn: StreamClient | undefined;
    for (let i = 0; i < 12 && !conn; i++) {
      const c = await StreamClient.open(lab, lab.ns.p1b, '10.96.0.85', 7070);
      if ((await c.ping()).name === 'p2a') conn = c; else await c.reset();
    }
    expect(conn).toBeDefined();
    await set(withSvc('stream', { pods: ['p1a'] }));
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.85:7070')).toEqual([`${podIP('p1a')}:7070 1`, `${podIP('p2a')}:7070 0`]);
    // The open connection still works; new ones all go to p1a.
    expect((await conn!.ping()).name).toBe('p2a');
    for (let i = 0; i < 4; i++) {
      const c = await StreamClient.open(lab, lab.ns.p1b, '10.96.0.85', 7070);
      expect((await c.ping()).name).toBe('p1a');
      await c.reset();
    }
    await new Promise((r) => setTimeout(r, 2500));
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.85:7070')).toContain(`${podIP('p2a')}:7070 0`);
    // Closed with a reset: IPVS forgets the connection within seconds, then kpng deletes the real server.
    await conn!.reset();
    await kpng.waitLog(/drained real server 10\.244\.2\.10:7070 .* deleted/, 60000);
    expect(realServers(lab, lab.ns.n1, 'tcp', '10.96.0.85:7070')).toEqual([`${podIP('p1a')}:7070 1`]);
  });

  test('restart with traffic flowing: connections survive, virtual servers are reconciled, not rebuilt', async () => {
    await set(withSvc('stream', { pods: ['p1a', 'p2a'] }));
    const conn = await StreamClient.open(lab, lab.ns.p1b, '10.96.0.85', 7070);
    const first = await conn.ping();
    const stats = () => ipvsadm(lab, lab.ns.n1, '--stats', '-t', '10.96.0.85:7070').split('\n').filter((l) => l.includes('TCP')).join('');
    const before = stats();
    await kpng.stop();
    expect((await conn.ping()).name).toBe(first.name);
    state.write(current);
    await kpng.start();
    expect(kpng.log).toMatch(/full \(\d+ services/);
    // The same connection goes on, to the same endpoint; the virtual server kept its counters (not re-created).
    expect((await conn.ping()).name).toBe(first.name);
    const after = stats();
    expect(Number(after.trim().split(/\s+/)[2])).toBeGreaterThanOrEqual(Number(before.trim().split(/\s+/)[2]));
    const rs = await lab.probe(lab.ns.client, 'tcp', N1, 30080, 4);
    expect(rs.every((r) => r.ok)).toBe(true);
    await conn.reset();
  });
});
