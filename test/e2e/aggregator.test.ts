// The aggregator with real packets: kpng's nft backend (producer "kpng") and a second producer's
// firewall table (producer "firewall", dropping one outside client before kpng's DNAT) programmed
// into node n1 through one Aggregator; a bad object of the firewall is refused while kpng's updates
// land; both producers' concurrent changes land in one transaction, seen by `nft monitor` as one
// new ruleset generation.
import type { ChildProcess } from 'node:child_process';
import { Aggregator, ProducerRefused, type ProducerHandle } from '../../src/aggregator';
import { nativeTransport } from '../../src/nft/transport';
import { opTable } from '../../src/nft/ruleset';
import { ipv4, type NftOp, type NftRule } from '../../src/native/nft-types';
import { Lab, ADDR } from './lab/lab';
import { Kpng } from './lab/kpng';
import { StateFile, type SvcSpec } from './lab/world';
import { gated, need } from '../helpers/gate';

const d = gated(need.root(), need.native()).describe;

const ALL = ['p1a', 'p1b', 'p2a', 'p2b'];
const web: SvcSpec = { name: 'web', type: 'NodePort', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }], pods: ALL };
const extra = (n: number): SvcSpec => ({ name: `extra${n}`, type: 'NodePort', clusterIPs: [`10.96.1.${n}`], ports: [{ port: 80, targetPort: 8080, nodePort: 31000 + n }], pods: ALL });

const FW = { family: 'ip' as const, table: 'firewall' };
const dropRule = (set: string, comment: string): NftRule => ({
  ...FW, chain: 'pre', comment,
  exprs: [
    { type: 'payload', base: 'network', offset: 12, len: 4, dreg: 1 },
    { type: 'lookup', sreg: 1, set },
    { type: 'counter' },
    { type: 'verdict', verdict: 'drop' },
  ],
});
/** The firewall: before conntrack and kpng's DNAT, drop the sources in @deny. */
const firewall = (deny: string[], extraRules: NftRule[] = []): NftOp[] => [
  { op: 'add', table: { family: 'ip', name: 'firewall' } },
  { op: 'add', chain: { ...FW, name: 'pre', hook: 'prerouting', type: 'filter', priority: -300, policy: 'accept' } },
  { op: 'add', set: { ...FW, name: 'deny', keyType: 'ipv4_addr' } },
  ...(deny.length ? [{ op: 'add', elements: { ...FW, set: 'deny', elements: deny.map((a) => ({ key: ipv4(a) })) } } as NftOp] : []),
  { op: 'add', rule: dropRule('deny', 'deny-list') },
  ...extraRules.map((rule): NftOp => ({ op: 'add', rule })),
];

d('aggregator e2e (kpng and a firewall producer on n1, real packets)', () => {
  let lab: Lab;
  let kpng: Kpng;
  let state: StateFile;
  let agg: Aggregator;
  let fw: ProducerHandle;
  const batches: { ops: number; tables: Set<string>; ok: boolean }[] = [];
  const aggLog: string[] = [];

  const reaches = async (from: string, host: string, port: number) => (await lab.probe(from, 'tcp', host, port, 1, 800))[0].ok;
  const waitPending = async (names: string[]) => {
    for (let i = 0; i < 500 && !names.every((n) => agg.pendingProducers().includes(n)); i++) await new Promise((r) => setTimeout(r, 20));
    expect(agg.pendingProducers().sort()).toEqual([...names].sort());
  };

  beforeAll(async () => {
    lab = await Lab.create();
    state = new StateFile();
    state.write([web]);
    const transport = nativeTransport({ netns: `/var/run/netns/${lab.ns.n1}` });
    agg = new Aggregator({
      minIntervalMs: 50, burst: 2, retryMs: 60000, log: (m) => aggLog.push(m),
      transport: {
        // Records every transaction the aggregator sends (tables touched, and whether the kernel took it).
        async apply(ops) {
          const tables = new Set(ops.map((o) => opTable(o).table));
          try {
            const r = await transport.apply(ops);
            batches.push({ ops: ops.length, tables, ok: true });
            return r;
          } catch (e) {
            batches.push({ ops: ops.length, tables, ok: false });
            throw e;
          }
        },
      },
    });
    kpng = await Kpng.start(lab, state.file, { mode: 'native', aggregator: agg });
    fw = agg.connect('firewall', { peer: 'test process' });
  }, 60000);

  afterAll(async () => {
    await kpng?.stop();
    agg?.close();
    await lab?.destroy();
  });

  afterEach(() => {
    const s = expect.getState();
    if (s.assertionCalls !== s.numPassingAsserts) {
      // eslint-disable-next-line no-console
      console.log(`kpng log:\n${kpng.log}\naggregator:\n${aggLog.join('\n')}\nruleset:\n${lab.nftList(lab.ns.n1)}`);
    }
  });

  test('kpng serves through the aggregator; the firewall drops one outside client, others still served', async () => {
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.every((b) => b.ok && b.tables.has('kpng'))).toBe(true);
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 30080)).toBe(true);
    const info = await fw.declare(firewall([ADDR.client.v4]));
    expect(info.ops).toBeGreaterThan(0);
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 30080)).toBe(false);
    expect(await reaches(lab.ns.n2, ADDR.n1.v4, 30080)).toBe(true); // another outside source
    expect(await reaches(lab.ns.p1a, '10.96.0.10', 80)).toBe(true);
    expect(agg.status().map((s) => [s.name, s.tables])).toEqual([['kpng', ['ip kpng', 'ip6 kpng']], ['firewall', ['ip firewall']]]);
  });

  test('a bad object from the firewall is refused with a clear error while kpng\'s update lands', async () => {
    const before = batches.length;
    agg.pause();
    const bad = fw.apply([{ op: 'add', rule: dropRule('no-such-set', 'bad-rule') }]);
    const syncs = kpng.syncs;
    state.write([web, extra(1)]);
    await waitPending(['kpng', 'firewall']);
    agg.resume();
    const err = await bad.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ProducerRefused);
    expect((err as ProducerRefused).message).toMatch(/^producer firewall: the kernel refused add rule ip firewall pre "bad-rule": ENOENT/);
    expect((err as ProducerRefused).failures).toHaveLength(1);
    await kpng.waitSyncs(syncs + 1);
    // kpng never saw a failure: its change went in with the first retry, without the firewall's.
    expect(kpng.log).not.toMatch(/sync failed/);
    // One transaction with both, refused; then the same tick without the firewall's change, taken.
    const sent = batches.slice(before);
    expect(sent.map((b) => [b.ok, [...b.tables].sort()])).toEqual([[false, ['firewall', 'kpng']], [true, ['kpng']]]);
    expect(await reaches(lab.ns.p1a, '10.96.1.1', 80)).toBe(true);
    expect(await reaches(lab.ns.n2, ADDR.n1.v4, 31001)).toBe(true);
    // The firewall's previous rules are intact: the client is still dropped.
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 31001)).toBe(false);
    expect(agg.status().find((s) => s.name === 'firewall')!.last).toMatchObject({ ok: false, error: expect.stringMatching(/bad-rule/) });
    // Fixing its state lands at once (a full resync of the firewall only).
    const fixed = await fw.declare(firewall([ADDR.client.v4]));
    expect(fixed.ops).toBeGreaterThan(0);
    expect(batches[batches.length - 1].tables).toEqual(new Set(['firewall']));
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 31001)).toBe(false);
  });

  test('both producers\' concurrent changes land in ONE transaction: nft monitor sees one new generation', async () => {
    const monitor: ChildProcess = lab.spawnIn(lab.ns.n1, 'stdbuf', ['-oL', 'nft', 'monitor']);
    let out = '';
    monitor.stdout!.on('data', (x) => { out += x; });
    await new Promise((r) => setTimeout(r, 300)); // monitor subscribed
    const before = { batches: batches.length, commits: agg.stats.commits };
    agg.pause();
    const syncs = kpng.syncs;
    const unblock = fw.declare(firewall([])); // the client is let in again
    state.write([web, extra(1), extra(2)]);
    await waitPending(['kpng', 'firewall']);
    agg.resume();
    const info = await unblock;
    await kpng.waitSyncs(syncs + 1);
    expect(agg.stats.commits - before.commits).toBe(1);
    expect(batches.slice(before.batches).map((b) => [b.ok, [...b.tables].sort()])).toEqual([[true, ['firewall', 'kpng']]]);
    expect(info.commit).toBe(agg.stats.commits);
    await new Promise((r) => setTimeout(r, 300));
    monitor.kill('SIGTERM');
    const generations = out.split('\n').filter((l) => l.startsWith('# new generation'));
    expect(generations).toHaveLength(1);
    const events = out.slice(0, out.indexOf('# new generation'));
    expect(events).toMatch(/ip firewall/);
    expect(events).toMatch(/ip kpng/);
    // Both changes are live: the client reaches the new service.
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 31002)).toBe(true);
  });

  test('a producer that disconnects keeps its objects; removing it deletes them', async () => {
    await fw.declare(firewall([ADDR.client.v4]));
    fw.disconnect();
    await new Promise((r) => setTimeout(r, 200));
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 30080)).toBe(false);
    expect(lab.nftList(lab.ns.n1, 'tables')).toMatch(/ip firewall/);
    await agg.remove('firewall');
    expect(lab.nftList(lab.ns.n1, 'tables')).not.toMatch(/firewall/);
    expect(await reaches(lab.ns.client, ADDR.n1.v4, 30080)).toBe(true);
    expect(agg.status().map((s) => s.name)).toEqual(['kpng']);
  });
});
