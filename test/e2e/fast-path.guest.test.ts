// The nft fast path (--nft-flowtable) with real packets, in the qemu guest (this machine's kernel has
// no flowtables; the guest's Debian 6.1 kernel has nf_flow_table): the netns cluster of test/e2e/lab,
// the real `kpng file` on node n1 with the nft backend. Service connections through n1 are offloaded
// (conntrack shows them [OFFLOAD]) and keep every semantic: a UDP flow moves to the endpoint left when
// its endpoint is removed (kpng's conntrack clean-up tears the offloaded flow down), and a TCP
// connection whose server goes away is closed, as without the fast path.
import * as path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { Lab, NODE_BIN } from './lab/lab';
import { StateFile, type SvcSpec } from './lab/world';
import { Kpng } from './lab/kpng';

const HERE = __dirname.replace(`${path.sep}dist${path.sep}test${path.sep}`, `${path.sep}test${path.sep}`);
const STREAM = path.join(HERE, 'lab/stream.js');
const STREAM_PORT = 7070;

const services = (udpPods: string[], tcpPods: string[]): SvcSpec[] => [
  { name: 'udp', clusterIPs: ['10.96.0.30'], ports: [{ protocol: 'UDP', port: 53, targetPort: 8080 }], pods: udpPods },
  { name: 'stream', type: 'NodePort', clusterIPs: ['10.96.0.31'], ports: [{ port: 70, targetPort: STREAM_PORT, nodePort: 30070 }], pods: tcpPods },
];

interface Line { t: number; name?: string; event?: string }

/** A stream.js client's lines so far. */
class Client {
  readonly lines: Line[] = [];
  constructor(readonly child: ChildProcess) {
    let buf = '';
    child.stdout!.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        try { this.lines.push(JSON.parse(buf.slice(0, i)) as Line); } catch { /* partial */ }
        buf = buf.slice(i + 1);
      }
    });
  }
  names(since = 0): string[] { return this.lines.filter((l) => l.t >= since && l.name).map((l) => l.name!); }
  get now(): number { return this.lines.length ? this.lines[this.lines.length - 1].t : 0; }
  async until(what: string, ok: () => boolean, ms = 15000): Promise<void> {
    const t0 = Date.now();
    while (!ok()) {
      if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms; client saw ${JSON.stringify(this.lines.slice(-8))}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('nft fast path (guest kernel)', () => {
  let lab: Lab;
  let state: StateFile;
  let kpng: Kpng | undefined;
  const servers = new Map<string, ChildProcess>();

  /** n1's conntrack entries (conntrack -L), one per line. */
  const conntrack = (): string[] => lab.exec(lab.ns.n1, 'conntrack', ['-L']).split('\n').filter(Boolean);
  const offloaded = (match: string): boolean => conntrack().some((l) => l.includes(match) && l.includes('[OFFLOAD]'));

  const startStream = async (pod: string): Promise<void> => {
    const child = lab.spawnIn(lab.ns[pod as 'p1a'], NODE_BIN, [STREAM, 'serve', pod, String(STREAM_PORT)]);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`stream server in ${pod} did not start`)), 20000);
      child.stdout!.on('data', (d) => { if (String(d).includes('ready')) { clearTimeout(t); resolve(); } });
    });
    servers.set(pod, child);
  };

  beforeAll(async () => {
    lab = await Lab.create();
    await Promise.all(['p1a', 'p2a'].map(startStream));
    state = new StateFile();
    state.write(services(['p1a', 'p2a'], ['p2a']));
  }, 180000);

  afterAll(async () => {
    await kpng?.stop();
    await lab?.destroy();
  });

  afterEach(() => {
    const s = expect.getState();
    // eslint-disable-next-line no-console
    if (kpng && s.assertionCalls !== s.numPassingAsserts) console.log(`kpng log:\n${kpng.log}\n\nruleset:\n${lab.nftList(lab.ns.n1)}\n\nconntrack:\n${conntrack().join('\n')}`);
  });

  test('the flowtable hooks every interface that is up but lo: the uplink, the bridge and its ports', async () => {
    kpng = await Kpng.start(lab, state.file, { flowtable: 'auto', flowtablePackets: 4 }, 60000);
    expect(kpng.log).toMatch(/nft fast path: flowtable on br0, eth0, v-p1a, v-p1b, offloading service connections after 4 packets/);
    const ruleset = lab.nftList(lab.ns.n1);
    expect(ruleset).toMatch(/flowtable fast-path \{[^}]*devices = \{ br0, eth0, v-p1a, v-p1b \}/);
    expect(ruleset).toMatch(/ct status dnat ct packets > 4 flow add @fast-path/);
  }, 120000);

  test('an interface that appears (a new pod) joins the flowtable with the next incremental sync', async () => {
    lab.ip(lab.ns.n1, 'link', 'add', 'v-new', 'type', 'dummy');
    lab.ip(lab.ns.n1, 'link', 'set', 'v-new', 'up');
    const before = kpng!.syncs;
    state.write(services(['p1a', 'p2a'], ['p2a', 'p1a']));
    await kpng!.waitSyncs(before + 1, 30000);
    expect(kpng!.log).toMatch(/nft fast path: flowtable gains v-new/);
    expect(lab.nftList(lab.ns.n1)).toMatch(/flowtable fast-path \{[^}]*devices = \{ br0, eth0, v-new, v-p1a, v-p1b \}/);
    state.write(services(['p1a', 'p2a'], ['p2a']));
    await kpng!.waitSyncs(before + 2, 30000);
  }, 120000);

  test('a UDP flow is offloaded, and moves to the endpoint left when its own is removed', async () => {
    const c = new Client(lab.spawnIn(lab.ns.p1b, NODE_BIN, [STREAM, 'udp', '10.96.0.30', '53', '100']));
    await c.until('replies', () => c.names().length >= 10, 30000);
    await c.until('offloaded', () => offloaded('dport=53'), 15000);
    const first = c.names()[c.names().length - 1];
    const other = first === 'p1a' ? 'p2a' : 'p1a';
    // Every datagram of the flow went to one endpoint (one conntrack entry).
    expect(new Set(c.names())).toEqual(new Set([first]));
    const removedAt = c.now;
    state.write(services([other], ['p2a']));
    await c.until(`replies from ${other} once ${first} was removed`, () => c.names(removedAt).includes(other), 15000);
    c.child.kill();
  }, 120000);

  test('a TCP connection through the node port is offloaded; when its server goes, the client sees it close', async () => {
    const c = new Client(lab.spawnIn(lab.ns.client, NODE_BIN, [STREAM, 'tcp', '192.168.50.11', '30070', '100']));
    await c.until('replies', () => c.names().length >= 10, 30000);
    await c.until('offloaded', () => offloaded('dport=30070'), 15000);
    expect(new Set(c.names())).toEqual(new Set(['p2a']));
    servers.get('p2a')!.kill('SIGKILL');
    await c.until('connection closed', () => c.lines.some((l) => l.event === 'closed' || l.event === 'error'), 15000);
  }, 120000);
});
