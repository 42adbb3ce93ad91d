// Unit tests over FaultyNftTransport (src/backend/nft/faulty.ts): FakeNft's kernel, the same model
// the aggregator keeps its state in, refusing the ops a test chooses and reporting their indexes as
// the addon does. The real kernel is exercised by test/e2e/aggregator.test.ts.
import type { NftOp, NftRule } from '../native/nft-types';
import { Aggregator, DeclarationError, ProducerRefused, type ProducerEvent, type ProducerState } from './aggregator';
import { diffStates } from './diff';
import { applyOps, opTable } from '../nft/ruleset';
import { FaultyNftTransport } from '../backend/nft/faulty';
import type { NftForeignCommit, NftTableChange } from '../native/nft-monitor';

class FakeKernel extends FaultyNftTransport {
  get state(): ProducerState { return this.fake.ruleset; }
}

const table = (name: string): NftOp => ({ op: 'add', table: { family: 'inet', name } });
const chain = (t: string, name: string, policy?: 'accept' | 'drop'): NftOp =>
  ({ op: 'add', chain: { family: 'inet', table: t, name, hook: 'input', type: 'filter', priority: 0, policy: policy ?? 'accept' } });
const rule = (t: string, c: string, comment: string): NftOp =>
  ({ op: 'add', rule: { family: 'inet', table: t, chain: c, comment, exprs: [{ type: 'counter' }, { type: 'verdict', verdict: 'accept' }] } });
const set = (t: string, name: string): NftOp => ({ op: 'add', set: { family: 'inet', table: t, name, keyType: 'ipv4_addr' } });
const elems = (t: string, s: string, ...addrs: number[]): NftOp =>
  ({ op: 'add', elements: { family: 'inet', table: t, set: s, elements: addrs.map((a) => ({ key: new Uint8Array([10, 0, 0, a]) })) } });
const fw = (t: string, ...comments: string[]): NftOp[] => [table(t), chain(t, 'in'), set(t, 'deny'), elems(t, 'deny', 1, 2), ...comments.map((c) => rule(t, 'in', c))];

const kinds = (ops: NftOp[]) => ops.map((o) => `${o.op} ${Object.keys(o).find((k) => k !== 'op')}`);
const rulesIn = (k: FakeKernel, t: string, c: string): string[] => (k.state.get(`inet ${t}`)?.chains.get(c)?.rules ?? []).map((r: NftRule) => r.comment ?? '');

function setup(opts: { minIntervalMs?: number; burst?: number; retryMs?: number } = {}) {
  const kernel = new FakeKernel();
  const agg = new Aggregator({ transport: kernel, minIntervalMs: opts.minIntervalMs ?? 0, burst: opts.burst ?? 100, retryMs: opts.retryMs ?? 20 });
  return { kernel, agg };
}

describe('diff', () => {
  const build = (ops: NftOp[]): ProducerState => { const s: ProducerState = new Map(); applyOps(s, ops); return s; };

  test('a new table is created by replacing whatever has its name', () => {
    expect(kinds(diffStates(new Map(), build(fw('a', 'r1'))))).toEqual([
      'add table', 'delete table', 'add table', 'add chain', 'add set', 'add elements', 'add rule',
    ]);
  });

  test('only changed elements and the chains whose rules changed are sent', () => {
    const have = build(fw('a', 'r1', 'r2'));
    const want = build([...fw('a', 'r1', 'r3'), elems('a', 'deny', 3), { op: 'delete', elements: { family: 'inet', table: 'a', set: 'deny', elements: [{ key: new Uint8Array([10, 0, 0, 1]) }] } }]);
    const ops = diffStates(have, want);
    expect(kinds(ops)).toEqual(['flush chain', 'delete elements', 'add elements', 'add rule', 'add rule']);
    const del = ops[1] as Extract<NftOp, { elements: unknown }>;
    const add = ops[2] as Extract<NftOp, { elements: unknown }>;
    expect(del.elements.elements.map((e) => e.key[3])).toEqual([1]);
    expect(add.elements.elements.map((e) => e.key[3])).toEqual([3]);
  });

  test('identical states give no ops, even from different objects', () => {
    expect(diffStates(build(fw('a', 'r1')), build(fw('a', 'r1')))).toEqual([]);
  });

  test('a changed chain definition replaces the table; a removed table is deleted', () => {
    const have = build([...fw('a', 'r1'), ...fw('b')]);
    const want = build([table('a'), chain('a', 'in', 'drop'), set('a', 'deny'), elems('a', 'deny', 1, 2), rule('a', 'in', 'r1')]);
    expect(kinds(diffStates(have, want))).toEqual([
      'add table', 'delete table', 'add table', 'add chain', 'add set', 'add elements', 'add rule', // a replaced
      'add table', 'delete table', // b removed
    ]);
  });

  test('replaying the diff on the applied state reaches the desired state', () => {
    const have = build([...fw('a', 'r1', 'r2'), chain('a', 'extra'), rule('a', 'extra', 'x')]);
    const want = build([...fw('a', 'r2'), elems('a', 'deny', 9), chain('a', 'new'), rule('a', 'new', 'n')]);
    applyOps(have, diffStates(have, want));
    expect(diffStates(have, want)).toEqual([]);
    expect([...have.get('inet a')!.chains.keys()]).toEqual(['in', 'new']);
  });
});

describe('aggregator', () => {
  test('two producers changing in the same turn share ONE transaction; each learns when it is in', async () => {
    const { kernel, agg } = setup();
    const a = agg.connect('kpng');
    const b = agg.connect('firewall');
    const [ia, ib] = await Promise.all([a.declare(fw('svc', 'r1')), b.declare(fw('fw', 'deny'))]);
    expect(kernel.batches).toHaveLength(1);
    expect(ia.commit).toBe(1);
    expect(ib.commit).toBe(1);
    expect(ia.ops + ib.ops).toBe(kernel.batches[0].length);
    expect(rulesIn(kernel, 'svc', 'in')).toEqual(['r1']);
    expect(rulesIn(kernel, 'fw', 'in')).toEqual(['deny']);
    // A second change sends only the difference.
    await a.apply([elems('svc', 'deny', 7)]);
    expect(kinds(kernel.batches[1])).toEqual(['add elements']);
    agg.close();
  });

  test('changes made while a commit is held are coalesced into one', async () => {
    const { kernel, agg } = setup();
    const a = agg.connect('a');
    await a.declare(fw('t', 'r1'));
    agg.pause();
    const p1 = a.apply([elems('t', 'deny', 3)]);
    const p2 = a.apply([{ op: 'delete', elements: { family: 'inet', table: 't', set: 'deny', elements: [{ key: new Uint8Array([10, 0, 0, 3]) }] } }, elems('t', 'deny', 4)]);
    expect(agg.pendingProducers()).toEqual(['a']);
    agg.resume();
    const [i1, i2] = await Promise.all([p1, p2]);
    expect(i1.commit).toBe(2);
    expect(i2.commit).toBe(2);
    expect(kernel.batches).toHaveLength(2);
    // The 3 added then deleted never reaches the kernel.
    expect(kernel.batches[1].flatMap((o) => ('elements' in o ? o.elements.elements.map((e) => `${o.op} ${e.key[3]}`) : []))).toEqual(['add 4']);
    agg.close();
  });

  test('a producer cannot declare a table another producer owns; nothing of the refused change is kept', async () => {
    const { kernel, agg } = setup();
    const a = agg.connect('a');
    const b = agg.connect('b');
    await a.declare(fw('shared', 'r1'));
    await expect(b.declare([...fw('mine', 'x'), table('shared')])).rejects.toThrow(/table inet shared belongs to producer a/);
    await expect(b.apply([rule('shared', 'in', 'sneaky')])).rejects.toBeInstanceOf(DeclarationError);
    expect(agg.pendingProducers()).toEqual([]);
    expect(kernel.state.has('inet mine')).toBe(false);
    // Once a removes its table, b may take the name.
    await a.declare([]);
    expect(kernel.state.has('inet shared')).toBe(false);
    await b.declare(fw('shared', 'now-mine'));
    expect(rulesIn(kernel, 'shared', 'in')).toEqual(['now-mine']);
    expect(agg.status().find((s) => s.name === 'b')!.tables).toEqual(['inet shared']);
    agg.close();
  });

  test('bad references and unsupported features are refused before anything changes', async () => {
    const { agg } = setup();
    const a = agg.connect('a');
    await expect(a.apply([chain('nope', 'in')])).rejects.toThrow(/op #0: table inet nope is not declared/);
    await expect(a.declare([table('t'), rule('t', 'missing', 'x')])).rejects.toThrow(/op #1: chain missing does not exist/);
    await expect(a.declare([...fw('t'), { op: 'delete', rule: { family: 'inet', table: 't', chain: 'in', handle: 4, exprs: [] } }])).rejects.toThrow(/no handles/);
    await expect(a.declare([table('t'), { op: 'add', set: { family: 'inet', table: 't', name: '__set%d', id: 1, keyType: 'ipv4_addr' } }])).rejects.toThrow(/set ids/);
    expect(() => agg.connect('a')).toThrow(/already connected/);
    agg.close();
  });

  test('a refused object: the others commit in the same tick, the culprit learns which object and why, then is resynced alone', async () => {
    const { kernel, agg } = setup({ retryMs: 30 });
    const a = agg.connect('kpng');
    const b = agg.connect('firewall');
    await Promise.all([a.declare(fw('svc', 'r1')), b.declare(fw('fw', 'deny'))]);
    kernel.refuse = (o) => ('rule' in o && o.rule.comment === 'bad' ? 'bad expression' : undefined);
    const events: ProducerEvent[] = [];
    b.on((e) => events.push(e));
    const pa = a.apply([rule('svc', 'in', 'r2')]);
    const pb = b.apply([rule('fw', 'in', 'bad')]);
    const [ra, rb] = await Promise.allSettled([pa, pb]);
    expect(ra.status).toBe('fulfilled');
    expect(rb.status).toBe('rejected');
    const err = (rb as PromiseRejectedResult).reason as ProducerRefused;
    expect(err).toBeInstanceOf(ProducerRefused);
    expect(err.producer).toBe('firewall');
    expect(err.message).toMatch(/producer firewall: the kernel refused add rule fw in: EINVAL \(bad expression\)/);
    expect(err.failures.map((f) => f.index)).toEqual([2]); // within firewall's own ops: flush, rule deny, rule bad
    // Tried together, then kpng alone: kpng's change is in, firewall's kernel state unchanged.
    expect(kernel.batches.length).toBe(3);
    expect(rulesIn(kernel, 'svc', 'in')).toEqual(['r1', 'r2']);
    expect(rulesIn(kernel, 'fw', 'in')).toEqual(['deny']);
    // The retry is a full resync of firewall only (its table replaced), refused again with the same reason.
    await new Promise((r) => setTimeout(r, 80));
    const retry = kernel.batches[3];
    expect(retry.every((o) => opTable(o).table === 'fw')).toBe(true);
    expect(kinds(retry).slice(0, 3)).toEqual(['add table', 'delete table', 'add table']);
    expect(events[0].kind).toBe('refused');
    expect(events.filter((e) => e.kind === 'refused').length).toBeGreaterThanOrEqual(2);
    // Meanwhile kpng keeps landing.
    await a.apply([rule('svc', 'in', 'r3')]);
    expect(rulesIn(kernel, 'svc', 'in')).toEqual(['r1', 'r2', 'r3']);
    // The producer fixes its state: committed at once (no waiting for the backoff).
    await b.declare(fw('fw', 'deny', 'good'));
    expect(rulesIn(kernel, 'fw', 'in')).toEqual(['deny', 'good']);
    expect(agg.status().find((s) => s.name === 'firewall')!.last!.ok).toBe(true);
    agg.close();
  });

  test('a disconnected producer keeps its objects; remove deletes them', async () => {
    const { kernel, agg } = setup();
    const a = agg.connect('a');
    await a.declare(fw('t', 'r1'));
    a.disconnect();
    await expect(a.apply([])).rejects.toThrow(/disconnected/);
    await new Promise((r) => setTimeout(r, 10));
    expect(rulesIn(kernel, 't', 'in')).toEqual(['r1']);
    // Reconnecting and declaring the same state sends nothing.
    const again = agg.connect('a');
    const n = kernel.batches.length;
    expect((await again.declare(fw('t', 'r1'))).ops).toBe(0);
    expect(kernel.batches.length).toBe(n);
    again.disconnect();
    await agg.remove('a');
    expect(kernel.state.has('inet t')).toBe(false);
    expect(agg.status()).toEqual([]);
    agg.close();
  });

  test('scoped diffs (only the chains and sets an op touched) keep the kernel equal to the desired state', async () => {
    const { kernel, agg } = setup();
    const a = agg.connect('a');
    const expected: ProducerState = new Map();
    const base = [...fw('t', 'r0'), chain('t', 'x'), rule('t', 'x', 'x0'), set('t', 's2')];
    applyOps(expected, base);
    await a.declare(base);
    let seed = 7;
    const rnd = (n: number) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
    const el = (n: number) => ({ key: new Uint8Array([10, 0, 1, n]) });
    for (let round = 0; round < 30; round++) {
      const ops: NftOp[] = [];
      for (let i = 0; i < 1 + rnd(4); i++) {
        const s = rnd(2) ? 'deny' : 's2';
        switch (rnd(5)) {
          case 0: ops.push({ op: 'add', elements: { family: 'inet', table: 't', set: s, elements: [el(rnd(20))] } }); break;
          case 1: ops.push({ op: 'delete', elements: { family: 'inet', table: 't', set: s, elements: [el(rnd(20))] } }); break;
          case 2: ops.push(rule('t', rnd(2) ? 'in' : 'x', `r${round}-${i}`)); break;
          case 3: ops.push({ op: 'flush', chain: { family: 'inet', table: 't', name: rnd(2) ? 'in' : 'x' } }); break;
          case 4: ops.push({ op: 'flush', set: { family: 'inet', table: 't', name: s, keyType: 'ipv4_addr' } }); break;
        }
      }
      applyOps(expected, ops);
      const p = a.apply(ops);
      if (rnd(3) === 0) await p; // sometimes several changes coalesce into one commit
    }
    await a.apply([]);
    expect(diffStates(kernel.state, expected)).toEqual([]);
    agg.close();
  });

  test('the commit budget: a burst back to back, then one commit per interval, changes coalescing meanwhile', async () => {
    const { kernel, agg } = setup({ minIntervalMs: 150, burst: 1 });
    const a = agg.connect('a');
    await a.declare(fw('t'));
    const started = kernel.batches.length;
    const ps = [];
    for (let i = 0; i < 5; i++) {
      ps.push(a.apply([rule('t', 'in', `r${i}`)]));
      await new Promise((r) => setTimeout(r, 5));
    }
    const infos = await Promise.all(ps);
    // All five waited for the interval and went as one transaction.
    expect(kernel.batches.length - started).toBe(1);
    expect(new Set(infos.map((i) => i.commit)).size).toBe(1);
    expect(rulesIn(kernel, 't', 'in')).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    agg.close();
  });
});

describe('aggregator: tables changed by another process', () => {
  class WatchedKernel extends FakeKernel {
    foreign?: (c: NftForeignCommit) => void;
    watchForeign(cb: (c: NftForeignCommit) => void): void { this.foreign = cb; }
  }
  const change = (table: string, kind: NftTableChange['kind']): NftForeignCommit => ({ overflow: false, pid: 42, comm: 'nft', changes: [{ family: 'inet', table, kind, count: 1 }] });
  const untilCommits = async (k: FakeKernel, n: number) => { for (let i = 0; i < 200 && k.batches.length < n; i++) await new Promise((r) => setTimeout(r, 5)); };

  test('only the owner\'s changed table is rebuilt whole, logged with who changed it', async () => {
    const kernel = new WatchedKernel();
    const logs: string[] = [];
    const agg = new Aggregator({ transport: kernel, minIntervalMs: 0, log: (m) => logs.push(m) });
    await agg.connect('a').declare(fw('a', 'r1'));
    await agg.connect('b').declare(fw('b', 'r2'));
    kernel.batches = [];
    kernel.foreign!(change('a', 'rule+'));
    kernel.foreign!(change('nobody', 'table-'));
    await untilCommits(kernel, 1);
    expect(kernel.batches).toHaveLength(1);
    expect(new Set(kernel.batches[0]!.map((o) => opTable(o).table))).toEqual(new Set(['a']));
    expect(kinds(kernel.batches[0]!).slice(0, 3)).toEqual(['add table', 'delete table', 'add table']);
    expect(agg.stats.repairs).toBe(1);
    expect(logs.join('\n')).toMatch(/table inet a of producer a changed by another process \(pid 42 nft: 1 rule added\): rebuilding it/);
    agg.close();
  });

  test('lost notifications rebuild every producer\'s tables', async () => {
    const kernel = new WatchedKernel();
    const agg = new Aggregator({ transport: kernel, minIntervalMs: 0 });
    await agg.connect('a').declare(fw('a', 'r1'));
    await agg.connect('b').declare(fw('b', 'r2'));
    kernel.batches = [];
    kernel.foreign!({ overflow: true });
    await untilCommits(kernel, 1);
    expect(new Set(kernel.batches.flat().filter((o) => 'table' in o && o.op === 'delete').map((o) => opTable(o).table))).toEqual(new Set(['a', 'b']));
    expect(agg.stats.repairs).toBe(1);
    agg.close();
  });
});
