// `--to ebpf --aggregator` with real packets: kpng (the CLI, from dist/) in a node namespace, its BPF
// programs on a test cgroup, its nft part (node ports, traffic from other hosts) sent to the
// in-process aggregator as producer "kpng". A second producer connects over the aggregator's unix
// socket and drops the outside host in its own table, then lets it in again while kpng adds a node
// port: both changes wait for the same tick (min interval 2 s, burst 1) and land as ONE nftables
// transaction, which `nft monitor` shows as one new ruleset generation. Names: ka3-*; cgroup, pins,
// namespaces and the socket directory removed on every path.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ebpfCleanup } from '../../src/native/ebpf';
import { aggregatorStatus, ProducerClient } from '../../src/aggregator/client';
import type { ProducerStatus } from '../../src/aggregator';
import { sh } from '../helpers/netns';
import { gated, need } from '../helpers/gate';
import { ECHO_SERVER, runClient, startServers } from '../helpers/ebpf-lab';
import { NetLab } from '../shared/netlab';
import { KpngProcess, NODE } from '../shared/kpng-process';
import { ep, internalIPs, list, node, READY, slice, svc } from '../shared/objects';

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'dist/src/cli/main.js');
const BPF_OBJ = path.join(ROOT, 'build/Release/sock_lb.bpf.o');

const d = gated(need.root(), need.cgroup2(), need.native(), need.built(CLI), need.built(BPF_OBJ)).describe;

const POD = { pa: '10.244.1.10', pb: '10.244.1.11', cl: '10.244.1.20' };
const NODE_IP = '192.168.50.1';
const EXT_IP = '192.168.50.2';
const TABLE = 'ka3-kpng';

/** A NodePort service (TCP 80 -> 8080) on pa and pb. */
function state(svcs: Array<{ name: string; ip: string; nodePort: number }>): unknown {
  return list([node('n1', undefined, internalIPs(NODE_IP)), ...svcs.flatMap((s) => [
    svc(s.name, { type: 'NodePort', clusterIPs: [s.ip], families: ['IPv4'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: s.nodePort }] }),
    slice(`${s.name}-v4`, s.name, (['pa', 'pb'] as const).map((p) => ep(POD[p], { ...READY, node: 'n1' }))),
  ])]);
}
const WEB = { name: 'web', ip: '10.96.0.10', nodePort: 30080 };
const EXTRA = { name: 'extra', ip: '10.96.0.11', nodePort: 31001 };

/** The second producer's table: before conntrack and kpng's DNAT, drop the sources in @deny. */
const firewall = (deny: string[]) => ({
  tables: [{
    family: 'ip', name: 'ka3-fw',
    sets: [{ name: 'deny', type: 'ipv4_addr', elements: deny }],
    chains: [{ name: 'pre', hook: 'prerouting', type: 'filter', priority: -300, rules: [{ comment: 'deny-list', match: { saddr: '@deny' }, counter: true, verdict: 'drop' }] }],
  }],
});

interface Reply { ok: boolean; name?: string; from?: string; err?: string }

d('eBPF backend through the aggregator (--to ebpf --aggregator), real packets', () => {
  const lab = new NetLab('ka3');
  const ns = { node: lab.name('node'), pa: lab.name('pa'), pb: lab.name('pb'), cl: lab.name('cl'), ext: lab.name('ext') };
  let cgroup = '';
  const pinDir = `/sys/fs/bpf/${lab.name('pins')}`;
  const dir = fs.mkdtempSync('/tmp/ka3-');
  const stateFile = path.join(dir, 'state.json');
  const sock = `unix://${path.join(dir, 'agg.sock')}`;
  let kpng: KpngProcess | undefined;
  let fw: ProducerClient | undefined;

  const log = () => kpng?.log ?? '';
  const SYNC = /ebpf: revision \d+: .* sync, /;
  const syncs = () => kpng!.count(SYNC);
  const waitSyncs = (n: number) => kpng!.waitForCount(SYNC, n, { timeoutMs: 20000 });
  const writeState = (svcs: Parameters<typeof state>[0]) => {
    fs.writeFileSync(`${stateFile}.tmp`, JSON.stringify(state(svcs)));
    fs.renameSync(`${stateFile}.tmp`, stateFile);
  };
  /** The client COUNT times in a namespace; inCgroup: a process of the attach cgroup (socket LB). */
  const client = (host: string, port: number, count: number, from: string, inCgroup = false): Promise<Reply[]> =>
    runClient<Reply>(from, ['tcp', host, port, count], inCgroup ? cgroup : undefined);
  const names = (rs: Reply[]) => new Set(rs.map((r) => (r.ok ? r.name : r.err)));
  const status = async () => (await aggregatorStatus(sock)) as ProducerStatus[];

  beforeAll(async () => {
    for (const role of ['node', 'pa', 'pb', 'cl', 'ext']) lab.netns(role);
    lab.bridge(ns.node, 'br0', ['10.244.1.1/24']);
    for (const p of ['pa', 'pb', 'cl'] as const) {
      lab.veth({ ns: ns.node, name: `v${p}`, master: 'br0' }, { ns: ns[p], name: 'eth0', addrs: [`${POD[p]}/24`] });
      if (p !== 'cl') lab.ip(ns[p], 'route', 'add', 'default', 'via', '10.244.1.1');
    }
    lab.veth({ ns: ns.node, name: 'vext', addrs: [`${NODE_IP}/24`] }, { ns: ns.ext, name: 'eth0', addrs: [`${EXT_IP}/24`] });
    lab.sysctl(ns.node, 'net.ipv4.ip_forward=1');
    cgroup = lab.cgroup('cg');
    await startServers(lab, (['pa', 'pb'] as const).map((p) => [ns[p], [ECHO_SERVER, p, '8080']]));
    writeState([WEB]);
    kpng = new KpngProcess(['file', '--input', stateFile, '--node', 'n1', '--to', 'ebpf',
      '--cgroup', cgroup, '--bpffs', pinDir, '--ebpf-nft-table', TABLE, '--cluster-cidr', '10.244.0.0/16', '--min-sync-period', '100ms', '--sync-period', '1h',
      '--aggregator', '--aggregator-listen', sock, '--aggregator-min-interval', '2s', '--aggregator-burst', '1'], { netns: ns.node, node: NODE, testServers: false });
    await waitSyncs(1);
  }, 60000);

  afterAll(async () => {
    fw?.close();
    await kpng?.stop();
    try { await ebpfCleanup(pinDir); } catch { /* nothing pinned */ }
    lab.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
    expect(fs.existsSync(pinDir)).toBe(false);
  }, 30000);

  afterEach(() => {
    const s = expect.getState();
    // eslint-disable-next-line no-console
    if (s.assertionCalls !== s.numPassingAsserts) console.log(`kpng log:\n${log()}\nruleset:\n${sh('ip', ['netns', 'exec', ns.node, 'nft', 'list', 'ruleset'])}`);
  });

  test('the nft part serves the outside host through the aggregator (producer kpng owns it); the socket LB still balances', async () => {
    const outside = await client(NODE_IP, 30080, 20, ns.ext);
    expect(outside.filter((r) => !(r.ok && r.from === `${NODE_IP}:30080`))).toEqual([]);
    expect(names(outside)).toEqual(new Set(['pa', 'pb']));
    const kp = (await status()).find((s) => s.name === 'kpng')!;
    expect(kp.tables).toEqual([`ip ${TABLE}`, `ip6 ${TABLE}`]);
    expect(kp.last).toMatchObject({ ok: true });
    expect(log()).toMatch(/aggregator: producer kpng connected/);
    // A process of the attach cgroup, in a namespace with no route to service addresses: the BPF part.
    const inside = await client('10.96.0.10', 80, 10, ns.cl, true);
    expect(inside.filter((r) => !(r.ok && r.from === '10.96.0.10:80'))).toEqual([]);
  }, 60000);

  test('a second producer drops the outside host, then lets it in while kpng adds a node port: one tick, one generation', async () => {
    const monitor = spawn('ip', ['netns', 'exec', ns.node, 'stdbuf', '-oL', 'nft', 'monitor'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    monitor.stdout!.on('data', (x) => { out += x; });
    try {
      await new Promise((r) => setTimeout(r, 300)); // monitor subscribed
      fw = await ProducerClient.connect(sock, 'ka3-fw');
      const blocked = await fw.declare(firewall([EXT_IP]));
      expect(await client(NODE_IP, 30080, 1, ns.ext)).toEqual([{ ok: false, err: 'timeout' }]);
      // One more address spends the burst: both changes below wait for the same tick, 2 s after it.
      const spent = await fw.patch({ set: { tables: [{ family: 'ip', name: 'ka3-fw', sets: [{ name: 'deny', elements: ['192.0.2.1'] }] }] } });
      expect(Number(spent.commit)).toBe(Number(blocked.commit) + 1);
      const before = syncs();
      writeState([WEB, EXTRA]);
      const unblocked = fw.patch({ delete: { tables: [{ family: 'ip', name: 'ka3-fw', sets: [{ name: 'deny', elements: [EXT_IP] }] }] } });
      const r = await unblocked;
      await waitSyncs(before + 1);
      expect(Number(r.commit)).toBe(Number(spent.commit) + 1);
      const st = await status();
      expect(st.find((s) => s.name === 'kpng')!.last!.commit).toBe(Number(r.commit));
      expect(st.find((s) => s.name === 'ka3-fw')!.tables).toEqual(['ip ka3-fw']);
      await new Promise((r2) => setTimeout(r2, 300));
      // Three commits since the monitor started (the block, one address, then both changes together):
      // three generations, the last one carrying both producers' changes.
      const parts = out.split(/^# new generation.*$/m);
      expect(parts).toHaveLength(4);
      const joint = parts[2];
      expect(joint).toMatch(/ip ka3-fw/);
      expect(joint).toMatch(new RegExp(`ip ${TABLE}`));
      // Both changes are live: the outside host reaches the new node port.
      const rs = await client(NODE_IP, 31001, 10, ns.ext);
      expect(rs.filter((x) => !(x.ok && x.from === `${NODE_IP}:31001`))).toEqual([]);
    } finally {
      monitor.kill('SIGTERM');
    }
  }, 60000);
});
