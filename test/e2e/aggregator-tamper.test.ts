// Tampering with a producer's table of the aggregator, repaired from the kernel's change notifications:
// an Aggregator over the native addon in a throwaway namespace, one producer's table (a chain, a set
// with elements, a rule); another process (nft) deletes the table, inserts a rule into its chain,
// flushes the ruleset. Each time the aggregator logs who did what and rebuilds the table as the
// producer declared it; its own commits are never taken for tampering.
import { Aggregator, type ProducerHandle } from '../../src/aggregator';
import { nativeTransport } from '../../src/nft/transport';
import { ipv4, type NftOp } from '../../src/native/nft-types';
import { gated, need } from '../helpers/gate';
import { Netns } from '../helpers/netns';
import { waitFor } from '../helpers/wait';

const d = gated(need.root(), need.native()).describe;

const T = { family: 'ip' as const, table: 'guard' };
const declared = (deny: string[]): NftOp[] => [
  { op: 'add', table: { family: 'ip', name: 'guard' } },
  { op: 'add', chain: { ...T, name: 'pre', hook: 'prerouting', type: 'filter', priority: -300, policy: 'accept' } },
  { op: 'add', set: { ...T, name: 'deny', keyType: 'ipv4_addr' } },
  { op: 'add', elements: { ...T, set: 'deny', elements: deny.map((a) => ({ key: ipv4(a) })) } },
  { op: 'add', rule: { ...T, chain: 'pre', comment: 'deny-list', exprs: [
    { type: 'payload', base: 'network', offset: 12, len: 4, dreg: 1 }, { type: 'lookup', sreg: 1, set: 'deny' }, { type: 'verdict', verdict: 'drop' },
  ] } },
];

d('tampering with an aggregator producer\'s table is repaired from nftables notifications', () => {
  let ns: Netns;
  let agg: Aggregator;
  let producer: ProducerHandle;
  const logs: string[] = [];
  /** The table as nft lists it, handles left out. */
  const listed = (): string => {
    try { return ns.nft('list', 'table', 'ip', 'guard').replace(/ # handle \d+/g, ''); } catch { return '(no table)'; }
  };
  let want = '';

  beforeAll(async () => {
    ns = new Netns('kagt');
    agg = new Aggregator({ transport: nativeTransport({ netns: ns.path }), minIntervalMs: 0, log: (m) => logs.push(m) });
    producer = agg.connect('guard');
    await producer.declare(declared(['192.0.2.1', '192.0.2.2']));
    want = listed();
    expect(want).toMatch(/deny-list/);
  });

  afterAll(() => {
    agg?.close();
    ns?.destroy();
  });

  // The rebuild's commit is seen by the producer once the transport has resumed watching: a change
  // made while the aggregator's own transaction is in flight is not noticed (the producer's next
  // resync repairs it), so each tampering waits for that.
  const repaired = async (what: string, tamper: () => void, logged: RegExp) => {
    const before = agg.stats.repairs;
    let commits = 0;
    const off = producer.on((e) => { if (e.kind === 'committed') commits++; });
    try {
      tamper();
      await waitFor(`the table rebuilt after ${what}`, () => agg.stats.repairs > before && commits > 0 && listed() === want);
    } finally {
      off();
    }
    expect(logs.join('\n')).toMatch(logged);
  };

  test('a deleted table comes back', async () => {
    await repaired('nft delete table', () => ns.nft('delete', 'table', 'ip', 'guard'),
      /table ip guard of producer guard changed by another process \(pid \d+ nft: .*1 table deleted.*\): rebuilding it/);
  });

  test('a rule inserted into its chain is removed', async () => {
    await repaired('nft insert rule', () => ns.nft('insert', 'rule', 'ip', 'guard', 'pre', 'counter', 'accept'), /nft: 1 rule added\): rebuilding it/);
    expect(listed()).not.toMatch(/counter/);
  });

  test('an element deleted from its set comes back', async () => {
    await repaired('nft delete element', () => ns.nft('delete', 'element', 'ip', 'guard', 'deny', '{ 192.0.2.2 }'), /nft: 1 element deleted\): rebuilding it/);
  });

  test('a flushed ruleset is rebuilt', async () => {
    await repaired('nft flush ruleset', () => ns.nft('flush', 'ruleset'), /changed by another process \(pid \d+ nft:/);
  });

  test('the producer\'s own changes are not taken for tampering', async () => {
    const before = agg.stats.repairs;
    await producer.declare(declared(['192.0.2.1', '192.0.2.3']));
    await producer.declare(declared(['192.0.2.4']));
    await new Promise((r) => setTimeout(r, 300));
    expect(agg.stats.repairs).toBe(before);
    expect(listed()).toMatch(/192\.0\.2\.4/);
  });
});
