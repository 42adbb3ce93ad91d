// Where kpng used to differ from upstream kube-proxy (issue 8), checked with real packets through the
// nft backend: kpng on n1 of the netns lab, probes from a pod, the node and an outside client.
import { Lab, ADDR, PODS } from './lab/lab';
import { Kpng, type KpngOptions } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';

const d = gated(need.root()).describe;
const podIP = (n: string) => PODS.find((p) => p.name === n)!.v4;

const services: SvcSpec[] = [
  // Every endpoint on n2: n1 has none for the Local policy.
  {
    name: 'etp-remote', type: 'LoadBalancer', etp: 'Local', clusterIPs: ['10.96.1.10'], lbIPs: ['192.168.60.110'], externalIPs: ['192.168.60.111'],
    ports: [{ port: 80, targetPort: 8080, nodePort: 30110 }], pods: ['p2a'],
  },
  { name: 'web', type: 'NodePort', clusterIPs: ['10.96.1.20'], ports: [{ port: 80, targetPort: 8080, nodePort: 30120 }], pods: ['p1b', 'p2b'] },
  { name: 'dns', clusterIPs: ['10.96.1.30'], ports: [{ name: 'u', protocol: 'UDP', port: 53, targetPort: 8080 }], pods: ['p2a'] },
];

d('upstream parity, nft backend (kpng on n1)', () => {
  let lab: Lab;
  let kpng: Kpng | undefined;
  let state: StateFile;

  const start = async (opts: KpngOptions = {}) => {
    await kpng?.stop();
    kpng = await Kpng.start(lab, state.file, opts);
  };

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write(services);
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts && kpng) {
      // eslint-disable-next-line no-console
      console.log(`kpng log:\n${kpng.log}\n\nruleset:\n${lab.nftList(lab.ns.n1)}`);
    }
  });

  test('externalTrafficPolicy Local without a local endpoint: pods and the node are short-circuited to the cluster-wide endpoints, outside traffic is dropped', async () => {
    await start();
    for (const [host, port] of [['192.168.60.110', 80], ['192.168.60.111', 80], [ADDR.n1.v4, 30110]] as const) {
      const [pod] = await lab.probe(lab.ns.p1a, 'tcp', host, port);
      expect(pod).toMatchObject({ ok: true, name: 'p2a', peer: podIP('p1a') }); // pods are not masqueraded
      const [node] = await lab.probe(lab.ns.n1, 'tcp', host, port);
      // (The node is masqueraded too; in this lab its source address is n1's either way: the tracer tests check the mark.)
      expect(node).toMatchObject({ ok: true, name: 'p2a', peer: ADDR.n1.v4 });
      const [outside] = await lab.probe(lab.ns.client, 'tcp', host, port, 1, 800);
      expect(outside).toMatchObject({ ok: false, err: 'timeout' });
    }
  });

  test('a cluster IP on a port the service does not serve is rejected at once', async () => {
    for (const from of [lab.ns.p1a, lab.ns.n1]) {
      const [r] = await lab.probe(from, 'tcp', '10.96.1.20', 81, 1, 3000);
      // Rejected, not dropped: a drop would end in ETIMEDOUT after the probe's 3 s.
      expect(r).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
    }
    expect((await lab.probe(lab.ns.p1a, 'tcp', '10.96.1.20', 80))[0]).toMatchObject({ ok: true });
  });

  test('--nodeport-addresses default: node ports answer on the node\'s primary address only', async () => {
    expect((await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30120))[0]).toMatchObject({ ok: true });
    // The pod bridge address of n1 is not its primary address: nothing is DNATed there.
    const [r] = await lab.probe(lab.ns.p1a, 'tcp', ADDR.n1.gw4, 30120, 1, 2000);
    expect(r.ok).toBe(false);
  });

  test('--nodeport-addresses CIDR: node ports answer on the node\'s addresses inside it only', async () => {
    await start({ nodePortAddresses: [ADDR.n1.podCidr4] });
    const [bridge] = await lab.probe(lab.ns.p1a, 'tcp', ADDR.n1.gw4, 30120);
    expect(bridge).toMatchObject({ ok: true });
    const [primary] = await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30120, 1, 2000);
    expect(primary.ok).toBe(false);
  });

  test('stale UDP conntrack entries are cleaned after a restart (the endpoint changed while kpng was down)', async () => {
    await start();
    // Same client port every time: the flow's conntrack entry would keep it on the old endpoint.
    expect((await lab.probe(lab.ns.p1b, 'udp', '10.96.1.30', 53, 1, 1500, 40153))[0]).toMatchObject({ ok: true, name: 'p2a' });
    await kpng!.stop();
    kpng = undefined;
    state.write(services.map((s) => (s.name === 'dns' ? { ...s, pods: ['p2b'] } : s)));
    await start();
    expect((await lab.probe(lab.ns.p1b, 'udp', '10.96.1.30', 53, 1, 1500, 40153))[0]).toMatchObject({ ok: true, name: 'p2b' });
    state.write(services);
  });

  test('--masquerade-all: cluster-IP traffic is masqueraded, pods short-circuited to an eTP Local service are not', async () => {
    await start({ masqueradeAll: true });
    const rs = await lab.probe(lab.ns.p1a, 'tcp', '10.96.1.20', 80, 6);
    for (const r of rs) {
      expect(r.ok).toBe(true);
      expect(r.peer).not.toBe(podIP('p1a'));
    }
    for (const [host, port] of [['192.168.60.110', 80], [ADDR.n1.v4, 30110]] as const) {
      const [pod] = await lab.probe(lab.ns.p1a, 'tcp', host, port);
      expect(pod).toMatchObject({ ok: true, name: 'p2a', peer: podIP('p1a') });
    }
  });
});
