// Localhost node ports, kube-proxy's iptables mode behaviour, with real packets: the netns lab
// (test/e2e/lab), kpng on n1 with the nft backend and --localhost-nodeports. A process on n1 reaches
// a node port on 127.0.0.1, the pod sees the node's address (masqueraded), and route_localnet does
// not open n1's loopback services to the LAN (kube-proxy's "block incoming localnet connections").
import { execFileSync } from 'node:child_process';
import { ADDR, Lab } from './lab/lab';
import { Kpng, type KpngOptions } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';

// This file's namespaces and interfaces carry the prefix klh- (parallel labs on one machine).
process.env.KPNG_LAB_PREFIX = 'klh';

const d = gated(need.root()).describe;

const services: SvcSpec[] = [
  {
    name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10', 'fd00:96::10'], pods: ['p1a', 'p2a'],
    ports: [{ name: 'tcp', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'udp', protocol: 'UDP', port: 80, targetPort: 8080, nodePort: 30080 }],
  },
  // externalTrafficPolicy Local without a local endpoint: a client on the node itself still gets the
  // cluster's endpoints (as upstream, for every local source, 127.0.0.1 included).
  { name: 'local-none', type: 'NodePort', etp: 'Local', clusterIPs: ['10.96.0.60'], ports: [{ port: 80, targetPort: 8080, nodePort: 30060 }], pods: ['p2a'] },
];

/** A service of n1 itself that listens on every address (127.0.0.1 included), not a Kubernetes one. */
const HOST_PORT = 9090;

const sh = (ns: string, ...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
const routeLocalnet = (ns: string): string => sh(ns, 'cat', '/proc/sys/net/ipv4/conf/all/route_localnet').trim();

d('localhost node ports (iptables mode), nft backend, real packets', () => {
  let lab: Lab;
  let state: StateFile;
  let kpng: Kpng | undefined;

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write(services);
    await lab.startServer(lab.ns.n1, 'n1-host', [HOST_PORT]);
    // The client sends 127.0.0.0/8 (but 127.0.0.1, its lo's own) to n1 over the LAN, as a hostile
    // neighbour could once route_localnet is set on n1.
    sh(lab.ns.client, 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1');
    sh(lab.ns.client, 'ip', 'route', 'del', 'local', '127.0.0.0/8', 'dev', 'lo', 'table', 'local');
    sh(lab.ns.client, 'ip', 'route', 'add', '127.0.0.0/8', 'via', ADDR.n1.v4, 'dev', 'eth0');
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  afterEach(async () => {
    const s = expect.getState();
    if (kpng && s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng (${kpng.mode}) log:\n${kpng.log}\n\nruleset:\n${lab.nftList(lab.ns.n1)}`);
    }
    await kpng?.stop();
    kpng = undefined;
    sh(lab.ns.n1, 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=0');
  });

  const start = async (opts: KpngOptions) => {
    kpng = await Kpng.start(lab, state.file, opts);
    // Outside the CLI, nothing sets the sysctl: do what kpng does at start.
    if (opts.localhostNodePorts && kpng.mode !== 'cli') sh(lab.ns.n1, 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1');
  };
  const fromNode = (proto: 'tcp' | 'udp', host: string, port: number, count = 1) => lab.probe(lab.ns.n1, proto, host, port, count, 1000);

  test('without --localhost-nodeports (kpng\'s default, as nftables mode): 127.0.0.1 serves no node port', async () => {
    await start({ nodePortAddresses: ['all'] });
    const [r] = await fromNode('tcp', '127.0.0.1', 30080);
    expect(r).toMatchObject({ ok: false });
    expect((await fromNode('tcp', ADDR.n1.v4, 30080))[0]).toMatchObject({ ok: true });
    expect(routeLocalnet(lab.ns.n1)).toBe('0');
  });

  test('--localhost-nodeports: TCP and UDP node ports answer on 127.0.0.1, masqueraded; ::1 does not', async () => {
    await start({ nodePortAddresses: ['all'], localhostNodePorts: true });
    if (kpng!.mode === 'cli') expect(routeLocalnet(lab.ns.n1)).toBe('1');
    const tcp = await fromNode('tcp', '127.0.0.1', 30080, 8);
    expect(tcp.every((r) => r.ok)).toBe(true);
    // Both endpoints, the local one and n2's, each seeing the node's own address on its side.
    expect(new Set(tcp.map((r) => r.name))).toEqual(new Set(['p1a', 'p2a']));
    for (const r of tcp) expect(r.peer).toBe(r.name === 'p1a' ? ADDR.n1.gw4 : ADDR.n1.v4);
    const udp = await fromNode('udp', '127.0.0.1', 30080, 4);
    expect(udp.every((r) => r.ok && r.peer !== '127.0.0.1')).toBe(true);
    // externalTrafficPolicy Local: the node's own client goes to n2's endpoint.
    expect((await fromNode('tcp', '127.0.0.1', 30060))[0]).toMatchObject({ ok: true, name: 'p2a' });
    // Never IPv6 loopback, as upstream.
    expect((await fromNode('tcp', '::1', 30080))[0]).toMatchObject({ ok: false });
    expect((await fromNode('tcp', ADDR.n1.v4, 30080))[0]).toMatchObject({ ok: true });
  });

  test('--localhost-nodeports: the LAN cannot reach n1\'s loopback services through route_localnet', async () => {
    // The set-up can tell: with route_localnet and no rule, the client does reach n1's loopback.
    // (kpng leaves its table when it stops, as kube-proxy leaves its rules: the last test's goes first.)
    sh(lab.ns.n1, 'nft', 'flush', 'ruleset');
    sh(lab.ns.n1, 'sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1');
    expect((await lab.probe(lab.ns.client, 'tcp', '127.0.0.2', HOST_PORT, 1, 1000))[0]).toMatchObject({ ok: true, name: 'n1-host' });
    await start({ nodePortAddresses: ['all'], localhostNodePorts: true });
    expect((await lab.probe(lab.ns.client, 'tcp', '127.0.0.2', HOST_PORT, 1, 1000))[0]).toMatchObject({ ok: false, err: 'timeout' });
    // n1's own processes still reach it, and the client still reaches node ports.
    expect((await fromNode('tcp', '127.0.0.2', HOST_PORT))[0]).toMatchObject({ ok: true, name: 'n1-host' });
    expect((await lab.probe(lab.ns.client, 'tcp', ADDR.n1.v4, 30080, 1, 1000))[0]).toMatchObject({ ok: true });
  });
});
