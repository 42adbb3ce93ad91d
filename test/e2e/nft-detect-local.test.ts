// --detect-local-mode and --bind-address with real packets: the netns lab (test/e2e/lab), kpng on n1
// with the nft backend. The observable difference is upstream's externalTrafficPolicy Local
// short-circuit: service "local-none" has its only endpoint on n2, so n1 drops outside clients at its
// node port, while pods (as the detection mode tells them apart) are sent to the cluster endpoint.
//
// Besides the lab's bridged pods (n1's br0: p1a, p1b), n1 gets a routed pod, "rp" (10.244.9.10), in a
// namespace of its own behind a veth whose n1 side is named kld-v0, the way Calico-like CNIs attach
// pods (an interface per pod, a name prefix for all of them).
import { execFileSync } from 'node:child_process';
import { ADDR, Lab } from './lab/lab';
import { Kpng, type KpngOptions } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';
import { NetLab } from '../shared/netlab';

// This file's namespaces and interfaces carry the prefix kld- (parallel labs on one machine).
process.env.KPNG_LAB_PREFIX = 'kld';

const d = gated(need.root()).describe;

const ROUTED_POD = '10.244.9.10';
const ROUTED_GW = '10.244.9.1';
const ROUTED_IF = 'kld-v0';
const BIND_IP = '192.168.50.111';

const services: SvcSpec[] = [
  { name: 'local-none', type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.60'], ports: [{ port: 80, targetPort: 8080, nodePort: 30060 }], pods: ['p2a'] },
  { name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }], pods: ['p1a', 'p2a'] },
];

const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });

d('local traffic detection and --bind-address, nft backend, real packets', () => {
  let lab: Lab;
  let state: StateFile;
  const extra = new NetLab('kld');
  let routedPod = '';
  let kpng: Kpng | undefined;

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write(services);
    routedPod = extra.netns('rp');
    const n1 = lab.ns.n1;
    extra.veth({ ns: n1, name: ROUTED_IF, addrs: [`${ROUTED_GW}/32`] }, { ns: routedPod, name: 'eth0', addrs: [`${ROUTED_POD}/32`] });
    ip('-n', n1, 'route', 'add', `${ROUTED_POD}/32`, 'dev', ROUTED_IF);
    ip('-n', routedPod, 'route', 'add', ROUTED_GW, 'dev', 'eth0');
    ip('-n', routedPod, 'route', 'add', 'default', 'via', ROUTED_GW);
    // n2's pods answer the routed pod through n1 (its source is kept: pods are not masqueraded).
    ip('-n', lab.ns.n2, 'route', 'add', `${ROUTED_POD}/32`, 'via', ADDR.n1.v4);
    // A second address on n1's LAN interface, for --bind-address.
    ip('-n', n1, 'addr', 'add', `${BIND_IP}/24`, 'dev', 'eth0');
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
    extra.destroy();
  });

  afterEach(async () => {
    const s = expect.getState();
    if (kpng && s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng (${kpng.mode}) log:\n${kpng.log}\n\nruleset:\n${lab.nftList(lab.ns.n1)}`);
    }
    await kpng?.stop();
    kpng = undefined;
  });

  const start = async (opts: KpngOptions) => { kpng = await Kpng.start(lab, state.file, opts); };
  /** One TCP probe to n1's "local-none" node port. */
  const nodePort = async (from: string) => (await lab.probe(from, 'tcp', ADDR.n1.v4, 30060, 1, 800))[0];

  test('the lab: the routed pod reaches n2\'s pods with its own address (no kpng rule involved)', async () => {
    const [r] = await lab.probe(routedPod, 'tcp', '10.244.2.10', 8080);
    expect(r).toMatchObject({ ok: true, name: 'p2a', peer: ROUTED_POD });
  });

  test('InterfaceNamePrefix: packets in on kld-* are pods (short-circuited, source kept); the bridged pod is not', async () => {
    await start({ clusterCIDRs: [], detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'kld-' });
    expect(await nodePort(routedPod)).toMatchObject({ ok: true, name: 'p2a', peer: ROUTED_POD });
    expect(await nodePort(lab.ns.p1b)).toMatchObject({ ok: false, err: 'timeout' });
    expect(lab.nftList(lab.ns.n1)).toMatch(/iifname "kld-\*"/);
  });

  test('BridgeInterface: packets in on br0 are pods; the routed pod is not', async () => {
    await start({ clusterCIDRs: [], detectLocalMode: 'BridgeInterface', podBridgeInterface: 'br0' });
    expect(await nodePort(lab.ns.p1b)).toMatchObject({ ok: true, name: 'p2a', peer: '10.244.1.11' });
    expect(await nodePort(routedPod)).toMatchObject({ ok: false, err: 'timeout' });
  });

  test('NodeCIDR: sources in n1\'s podCIDRs are pods; a pod of n2 (inside --cluster-cidr) is not', async () => {
    await start({ clusterCIDRs: ['10.244.0.0/16'], detectLocalMode: 'NodeCIDR' });
    expect(await nodePort(lab.ns.p1b)).toMatchObject({ ok: true, name: 'p2a', peer: '10.244.1.11' });
    expect(await nodePort(lab.ns.p2b)).toMatchObject({ ok: false, err: 'timeout' });
    expect(lab.nftList(lab.ns.n1)).toMatch(/ip saddr 10\.244\.1\.0\/24 /);
  });

  test('--bind-address: node ports answer on it (the "primary" address), not on the Node object\'s address', async () => {
    await start({ bindAddress: BIND_IP });
    const [on] = await lab.probe(lab.ns.client, 'tcp', BIND_IP, 30080, 1, 1500);
    expect(on).toMatchObject({ ok: true });
    const [off] = await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 1, 1500);
    expect(off).toMatchObject({ ok: false, err: 'ECONNREFUSED' });
  });
});
