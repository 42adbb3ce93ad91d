// The nft sink without a kernel: what it sends for full and incremental syncs, and how it recovers.
import type { Item } from '../../model/enls';
import { modelOptions } from '../../model/options';
import type { Batch, StateView } from '../../sink/sink';
import { cluster, ep, slice, svc as svcObj } from '../../../test/helpers/k8s';
import { NftDataplane, nftKernelSink, type NftKernel } from './sink';
import type { NftForeignCommit } from '../../native/nft-monitor';
import { toNftOps } from './netlink';
import { toNftText } from './text';
import { elemChunks, PICK_SHARDS, type IpFamily, type FamOps, type Op } from './types';
import { fullSyncOps, fullSyncOpsChunked, TableModel } from './plan';
import { Yielder } from '../../util/yielder';
import { encodeFamOps } from './index';
import { encodeOps } from '../../native/encode';

/**
 * The ENLS item of service ns/<name> (UDP 53 -> 5353) with these endpoints, computed by the model for
 * node n1. The endpoints run on n1 unless `remote` names them (only local ones enter the hairpin set).
 */
function svc(name: string, eps: string[], clusterCIDRs: string[] = [], remote: string[] = []): Item {
  const c = cluster('n1', [
    svcObj(name, { ns: 'ns', ports: [{ name: 'p', protocol: 'UDP', port: 53 }] }),
    slice(`${name}-1`, name, eps.map((ip) => ep(ip, { node: remote.includes(ip) ? 'n2' : 'n1' })), { ns: 'ns', ports: [{ name: 'p', protocol: 'UDP', port: 5353 }] }),
  ], { model: modelOptions({ clusterCIDRs }) });
  return c.state.get(`svc/ns/${name}`)!;
}

function view(items: Item[]): StateView {
  const m = new Map(items.map((x) => [x.key, x]));
  return { node: 'n1', revision: 1, get: (k) => m.get(k), items: () => m.values(), size: m.size };
}

class FakeKernel implements NftKernel {
  sent: FamOps[][] = [];
  ct: unknown[] = [];
  fail = false;
  async apply(_table: string, ops: FamOps[]) {
    if (this.fail) throw Object.assign(new Error('EINVAL'), { failed: [{ object: 'x', code: 'EINVAL' }] });
    this.sent.push(ops);
    // Both renderers accept every op.
    for (const f of ops) { toNftOps(f.fam, 'kpng', f.ops); toNftText(f.fam, 'kpng', f.ops); }
    return { messages: ops.reduce((n, f) => n + f.ops.length, 0), bytes: 0, ms: 0 };
  }
  async conntrackDelete(filters: unknown[]) { this.ct.push(...filters); return filters.length; }
  last(): Op[] { return this.sent[this.sent.length - 1].flatMap((f) => f.ops); }
}

const set = (item: Item, revision: number, reset = false): Batch => ({ revision, reset, changes: [{ op: 'set', key: item.key, item }] });

describe('nft sink', () => {
  test('a full sync abandoned by a stop sends nothing and is not counted as a failure; the next is full', async () => {
    const k = new FakeKernel();
    const logs: string[] = [];
    const sink = nftKernelSink({ log: (m) => logs.push(m) }, k);
    const items = Array.from({ length: 50 }, (_, i) => svc(`s${i}`, [`10.244.1.${i + 1}`]));
    const ac = new AbortController();
    ac.abort();
    await expect(sink.apply({ revision: 1, reset: true, changes: items.map((item) => ({ op: 'set' as const, key: item.key, item })) }, view(items), ac.signal)).rejects.toThrow(/abort/i);
    expect(k.sent).toHaveLength(0);
    expect(sink.stats.failures).toBe(0);
    // Not a reset batch: still a full sync, as nothing is known to be in the kernel.
    await sink.apply(set(items[0], 2), view(items));
    expect(k.last()[0]).toEqual({ kind: 'resetTable' });
  });

  test('full sync replaces the table in the same batch, then one endpoint change is two element ops', async () => {
    const k = new FakeKernel();
    const sink = nftKernelSink({ log: () => {} }, k);
    const a = svc('a', ['10.244.1.1', '10.244.1.2', '10.244.1.3'], ['10.244.0.0/16']);
    await sink.apply(set(a, 1, true), view([a]));
    const full = k.last();
    expect(full[0]).toEqual({ kind: 'resetTable' });
    expect(full.filter((o) => o.kind === 'resetTable')).toHaveLength(2); // ip and ip6

    const b = svc('a', ['10.244.1.1', '10.244.1.9', '10.244.1.3'], ['10.244.0.0/16']);
    await sink.apply(set(b, 2), view([b]));
    const inc = k.last();
    expect(inc.map((o) => o.kind).sort()).toEqual(['addElems', 'addElems', 'delElems', 'delElems']); // slot + hairpin
    const slotAdd = inc.find((o) => o.kind === 'addElems' && o.set.startsWith('picks-vip-')) as Extract<Op, { kind: 'addElems' }>;
    expect(slotAdd.elems).toEqual([{ type: 'pick', addr: '10.96.0.1', proto: 'udp', port: 53, slot: 1, epAddr: '10.244.1.9', epPort: 5353 }]);
    // The removed UDP endpoint's conntrack entries go.
    expect(k.ct).toContainEqual({ family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53, replySrc: '10.244.1.2', replySport: 5353 });
  });

  test('over several changes the kernel picks exactly the endpoints (slot state kept when not in key order)', async () => {
    const k = new FakeKernel();
    const sink = nftKernelSink({ log: () => {} }, k);
    // The picks map as the kernel holds it: slot -> endpoint, deletes by key, adds overwrite.
    const picks = new Map<number, string>();
    const replay = () => {
      for (const o of k.sent[k.sent.length - 1].filter((f) => f.fam === 'ip').flatMap((f) => f.ops)) {
        if (o.kind === 'resetTable') picks.clear();
        if ((o.kind !== 'addElems' && o.kind !== 'delElems' && o.kind !== 'addPacked') || !o.set.startsWith('picks-vip-')) continue;
        const elems = o.kind === 'addPacked' ? o.elems.decode() : o.elems;
        for (const e of elems) if (e.type === 'pick') { if (o.kind === 'delElems') picks.delete(e.slot); else picks.set(e.slot, e.epAddr); }
      }
    };
    const steps = [
      ['10.244.1.1', '10.244.1.2', '10.244.1.3'],
      ['10.244.1.1', '10.244.1.9', '10.244.1.3'], // 1.9 takes 1.2's slot: slots no longer in key order
      ['10.244.1.1', '10.244.1.9', '10.244.1.3', '10.244.1.4'],
      ['10.244.1.1', '10.244.1.9', '10.244.1.4'], // 1.3 goes: its slot, not 1.9's, is rewritten
    ];
    for (const [i, eps] of steps.entries()) {
      const item = svc('a', eps);
      await sink.apply(set(item, i + 1, i === 0), view([item]));
      replay();
      expect([...picks.keys()].sort()).toEqual(eps.map((_, j) => j));
      expect([...picks.values()].sort()).toEqual([...eps].sort());
    }
  });

  test('after a full sync no slot state is kept: every list is in key order', () => {
    const model = new TableModel('ip');
    const a = svc('a', ['10.244.1.3', '10.244.1.1', '10.244.1.2']);
    fullSyncOps(model, [[a.key, a.service!]], undefined);
    expect(model.programs.get(a.key)!.slots).toBeUndefined();
  });

  test('no endpoints: reject; some again: conntrack entries of the rejected flow are cleared', async () => {
    const k = new FakeKernel();
    const sink = nftKernelSink({ log: () => {} }, k);
    const empty = svc('a', []);
    await sink.apply(set(empty, 1, true), view([empty]));
    expect(toNftText('ip', 'kpng', k.last())).toContain('10.96.0.1 . udp . 53 : goto reject-chain');
    const one = svc('a', ['10.244.1.1']);
    await sink.apply(set(one, 2), view([one]));
    expect(k.ct).toContainEqual({ family: 'ip', proto: 'udp', origDst: '10.96.0.1', dport: 53 });
    const text = toNftText('ip', 'kpng', k.last());
    expect(text).toContain('10.96.0.1 . udp . 53 : goto pick-vip-c-udp-1-');
    expect(text).toContain('10.96.0.1 . udp . 53 . 0 : 10.244.1.1 . 5353');
  });

  test('a failed batch is reported, and the next batch is a full sync', async () => {
    const k = new FakeKernel();
    const logs: string[] = [];
    const sink = nftKernelSink({ log: (m: string) => logs.push(m) }, k);
    const a = svc('a', ['10.244.1.1', '10.244.1.2']);
    await sink.apply(set(a, 1, true), view([a]));
    k.fail = true;
    const b = svc('a', ['10.244.1.1']);
    await expect(sink.apply(set(b, 2), view([b]))).rejects.toThrow('EINVAL');
    expect(sink.stats.failures).toBe(1);
    expect(logs.join('\n')).toMatch(/failed .* next sync is a full one/);
    k.fail = false;
    const c = svc('a', ['10.244.1.3']);
    await sink.apply(set(c, 3), view([c]));
    expect(k.last()[0]).toEqual({ kind: 'resetTable' });
    expect(sink.stats.fullSyncs).toBe(2);
  });

  test('shared chains: one per endpoint count and shard, created for the first user and deleted after the last', async () => {
    const k = new FakeKernel();
    const sink = nftKernelSink({ log: () => {} }, k);
    const a = svc('a', ['10.244.1.1', '10.244.1.2']);
    await sink.apply(set(a, 1, true), view([a]));
    const full = toNftText('ip', 'kpng', k.last());
    const two = /add chain ip kpng (pick-vip-c-udp-2-\d+)/.exec(full)![1];
    expect(full).toContain('dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 2 map @picks-vip-');
    // a grows: its destination moves to the 5-endpoint chain, and the 2-endpoint one, now unused, goes.
    const big = svc('a', ['10.244.1.1', '10.244.1.2', '10.244.1.3', '10.244.1.4', '10.244.1.5']);
    await sink.apply(set(big, 2), view([big]));
    const grow = toNftText('ip', 'kpng', k.last());
    const five = /add chain ip kpng (pick-vip-c-udp-5-\d+)/.exec(grow)![1];
    expect(grow).toContain(`10.96.0.1 . udp . 53 : goto ${five}`);
    expect(grow).toContain(`delete chain ip kpng ${two}`);
    await sink.apply({ revision: 3, reset: false, changes: [{ op: 'delete', key: big.key }] }, view([]));
    const del = toNftText('ip', 'kpng', k.last());
    expect(del).toContain(`delete chain ip kpng ${five}`);
    expect(del).toContain('delete element ip kpng vips { 10.96.0.1 . udp . 53 }');
  });
});

/** Packed element ops as the plain ones they stand for. */
function unpacked(ops: Op[]): Op[] {
  return ops.flatMap((o): Op[] => {
    if (o.kind !== 'addPacked') return [o];
    return elemChunks(o.elems.decode()).map((elems): Op => ({ kind: 'addElems', set: o.set, elems }));
  });
}

describe('full sync in slices (the event loop gets turns)', () => {
  test('the sliced render and encode give the same ops and bytes as the one-piece ones, with turns taken', async () => {
    const items = Array.from({ length: 40 }, (_, i) => svc(`s${i}`, [`10.180.${i}.1`, `10.180.${i}.2`, `10.180.${i}.3`], ['10.244.0.0/16']));
    const services = items.map((x): [string, NonNullable<Item['service']>] => [x.key, x.service!]);
    const node = cluster('n1', []).state.get('node')?.node ?? undefined;
    const y = new Yielder(0); // every check is due: a turn at each step
    const sliced = await fullSyncOpsChunked(new TableModel('ip'), services, node, y);
    const whole = fullSyncOps(new TableModel('ip'), services, node);
    // The sliced render packs its elements as it goes: the same elements, sets and chunks.
    expect(sliced.some((o) => o.kind === 'addPacked')).toBe(true);
    expect(sliced.some((o) => o.kind === 'addElems')).toBe(false);
    expect(unpacked(sliced)).toEqual(whole);
    expect(Buffer.compare((await encodeFamOps('kpng', [{ fam: 'ip', ops: sliced }])).finish(), encodeOps(toNftOps('ip', 'kpng', whole)).finish())).toBe(0);
    // Chains do not grow with services: one pick (and one dispatch) chain per shard used at most.
    const chains = whole.filter((o) => o.kind === 'addChain').length;
    const many = fullSyncOps(new TableModel('ip'), Array.from({ length: 400 }, (_, i): [string, NonNullable<Item['service']>] => [`svc/ns/m${i}`, { ...services[i % 40][1], name: `m${i}` }]), node);
    expect(many.filter((o) => o.kind === 'addChain').length).toBeLessThanOrEqual(2 * PICK_SHARDS + chains);
    expect(y.turns).toBeGreaterThan(1);
    const y2 = new Yielder(0);
    const a = (await encodeFamOps('kpng', [{ fam: 'ip', ops: whole }], y2)).finish();
    const b = encodeOps(toNftOps('ip', 'kpng', whole)).finish();
    expect(Buffer.compare(a, b)).toBe(0);
    expect(y2.turns).toBeGreaterThanOrEqual(whole.length - 1);
  });
});

describe('hairpin', () => {
  test('only endpoints on this node enter the hairpin set, and moving one away deletes its element', async () => {
    const k = new FakeKernel();
    const sink = nftKernelSink({ log: () => {} }, k);
    const hairpinElems = (ops: Op[], kind: 'addElems' | 'delElems') =>
      unpacked(ops).flatMap((o) => (o.kind === kind && o.set === 'hairpin' ? o.elems : []));
    const a = svc('a', ['10.244.1.1', '10.244.2.1', '10.244.2.2'], ['10.244.0.0/16'], ['10.244.2.1', '10.244.2.2']);
    await sink.apply(set(a, 1, true), view([a]));
    expect(hairpinElems(k.last(), 'addElems')).toEqual([{ type: 'pair', addr: '10.244.1.1' }]);
    expect(toNftText('ip', 'kpng', k.last())).toContain('add element ip kpng hairpin { 10.244.1.1 . 10.244.1.1 }');

    // 10.244.1.1 now runs elsewhere and 10.244.2.1 here: the set follows, the picks do not move.
    const b = svc('a', ['10.244.1.1', '10.244.2.1', '10.244.2.2'], ['10.244.0.0/16'], ['10.244.1.1', '10.244.2.2']);
    await sink.apply(set(b, 2), view([b]));
    expect(hairpinElems(k.last(), 'delElems')).toEqual([{ type: 'pair', addr: '10.244.1.1' }]);
    expect(hairpinElems(k.last(), 'addElems')).toEqual([{ type: 'pair', addr: '10.244.2.1' }]);
    expect(k.last().every((o) => !('set' in o) || o.set === 'hairpin')).toBe(true);
  });
});

describe('set capacities', () => {
  const hairpinSet = (ops: Op[]) => ops.find((o) => o.kind === 'addSet' && o.set.name === 'hairpin') as Extract<Op, { kind: 'addSet' }> | undefined;
  const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.244.${i >> 8}.${i & 255}`);

  test('the big sets are created with a capacity; an update that would overflow one becomes a full sync, not a failure', async () => {
    const k = new FakeKernel();
    const logs: string[] = [];
    const sink = nftKernelSink({ log: (m) => logs.push(m) }, k);
    const a = svc('a', ips(10), ['10.244.0.0/16']);
    await sink.apply(set(a, 1, true), view([a]));
    const full = k.last();
    expect(hairpinSet(full)?.set.size).toBe(1024);
    for (const o of full) if (o.kind === 'addSet' && o.set.name.startsWith('picks-')) expect(o.set.size).toBe(1024);
    expect(full.some((o) => o.kind === 'addSet' && o.set.name === 'vips' && o.set.size === 1024)).toBe(true);
    expect(toNftText('ip', 'kpng', full)).toContain('add set ip kpng hairpin { type ipv4_addr . ipv4_addr; size 1024; }');

    // 1,000 endpoints still fit: an incremental batch.
    const b = svc('a', ips(1000), ['10.244.0.0/16']);
    await sink.apply(set(b, 2), view([b]));
    expect(k.last().some((o) => o.kind === 'resetTable')).toBe(false);

    // 100 more in another service do not (1,100 endpoints in the hairpin set): the sink does a full
    // sync at once, which sizes the set for them. The table is known (every batch committed): the
    // full sync repairs it in place, the set made again at its new size.
    const c = svc('c', ips(1100).slice(1000), ['10.244.0.0/16']);
    await sink.apply(set(c, 3), view([b, c]));
    const again = k.last();
    expect(again[0]).toEqual({ kind: 'addTable' });
    const at = (o: Op | undefined) => again.indexOf(o!);
    expect(at(again.find((o) => o.kind === 'delSet' && o.name === 'hairpin'))).toBeLessThan(at(hairpinSet(again)));
    expect(hairpinSet(again)?.set.size).toBe(2048);
    expect(sink.stats.failures).toBe(0);
    expect(sink.stats.fullSyncs).toBe(2);
    expect(logs.some((l) => /full \(2 services, set ip hairpin would hold 1100 elements, it was created for 1024\)/.test(l))).toBe(true);

    // And the model went on from there: a small change is incremental again.
    const d = svc('c', ips(1099).slice(1000), ['10.244.0.0/16']);
    await sink.apply(set(d, 4), view([b, d]));
    expect(k.last().some((o) => o.kind === 'resetTable')).toBe(false);
    expect(sink.stats.fullSyncs).toBe(2);
  });
});

test('affinity sets carry no size: the kernel would size the hash by it and zero 1 MiB per set at creation', () => {
  const ops = toNftOps('ip', 'kpng', [{ kind: 'addSet', set: { name: 'aff-x', kind: 'affinity', timeoutSec: 600 } }]);
  expect(ops).toEqual([{ op: 'add', set: expect.objectContaining({ name: 'aff-x', timeout: 600_000, flags: { timeout: true, dynamic: true } }) }]);
  expect((ops[0] as { set: { size?: number } }).set.size).toBeUndefined();
  // A sized set (the shared ones) keeps its capacity.
  const sized = toNftOps('ip', 'kpng', [{ kind: 'addSet', set: { name: 'cluster-ips', kind: 'addrSet', size: 4096 } }]);
  expect((sized[0] as { set: { size?: number } }).set.size).toBe(4096);
  expect(toNftText('ip', 'kpng', [{ kind: 'addSet', set: { name: 'aff-x', kind: 'affinity', timeoutSec: 600 } }])).not.toMatch(/size/);
});

describe('tampering (NftDataplane.watch over a kernel that reports other processes\' transactions)', () => {
  const base: NftKernel = { apply: async () => ({ messages: 0, bytes: 0, ms: 0 }), conntrackDelete: async () => 0 };

  test('a change to its own table (either family) is lost state, named; other tables and overflows', () => {
    let report: ((c: NftForeignCommit) => void) | undefined;
    const dp = new NftDataplane('kpng', { ...base, watchForeign: (cb) => { report = cb; } });
    const lost: string[] = [];
    dp.watch((why) => lost.push(why));
    report!({ overflow: false, pid: 42, comm: 'nft', changes: [{ family: 'ip', table: 'kpng', kind: 'table-', count: 1 }, { family: 'ip', table: 'kpng', kind: 'rule-', count: 3 }] });
    report!({ overflow: false, pid: 43, comm: 'firewalld', changes: [{ family: 'inet', table: 'firewalld', kind: 'rule+', count: 9 }, { family: 'inet', table: 'kpng', kind: 'rule+', count: 1 }] });
    report!({ overflow: false, pid: 44, comm: 'nft', changes: [{ family: 'ip6', table: 'kpng', kind: 'element-', count: 2 }] });
    report!({ overflow: true });
    expect(lost).toEqual([
      'table kpng (ip) changed by another process (pid 42 nft: 1 table deleted, 3 rules deleted)',
      'table kpng (ip6) changed by another process (pid 44 nft: 2 elements deleted)',
      'nftables change notifications were lost (socket buffer overflow)',
    ]);
  });

  test('after its table was deleted by another process, the repairing full sync replaces the table; after a rule was added, it repairs in place', async () => {
    let report: ((c: NftForeignCommit) => void) | undefined;
    const batches: FamOps[][] = [];
    const dp = new NftDataplane('kpng', { ...base, apply: async (_t, ops) => { batches.push(ops); return { messages: 0, bytes: 0, ms: 0 }; }, watchForeign: (cb) => { report = cb; } });
    dp.watch(() => {});
    const s = [svc('a', ['10.244.1.1']).service!];
    const first = (fam: IpFamily) => batches[batches.length - 1]!.find((f) => f.fam === fam)!.ops[0]!.kind;
    await dp.fullSync(s, undefined);
    // A periodic resync of a table kpng knows: repaired in place (the affinity sets keep their clients).
    await dp.fullSync(s, undefined);
    expect([first('ip'), first('ip6')]).toEqual(['addTable', 'addTable']);
    // A rule inserted by someone else: in place again.
    report!({ overflow: false, pid: 42, comm: 'nft', changes: [{ family: 'ip', table: 'kpng', kind: 'rule+', count: 1 }] });
    await dp.fullSync(s, undefined);
    expect([first('ip'), first('ip6')]).toEqual(['addTable', 'addTable']);
    // Its ip table deleted: that family's table is replaced (its chains are gone: flushing them would fail).
    report!({ overflow: false, pid: 42, comm: 'nft', changes: [{ family: 'ip', table: 'kpng', kind: 'table-', count: 1 }, { family: 'ip', table: 'kpng', kind: 'chain-', count: 9 }] });
    await dp.fullSync(s, undefined);
    expect([first('ip'), first('ip6')]).toEqual(['resetTable', 'addTable']);
  });

  test('a monitor that cannot start is said once; the dataplane works on (periodic resync only)', () => {
    const logs: string[] = [];
    const dp = new NftDataplane('kpng', { ...base, watchForeign: () => { throw new Error('EPERM: join NFNLGRP_NFTABLES'); } }, (m) => logs.push(m));
    dp.watch(() => { throw new Error('never lost'); });
    expect(logs).toEqual(['nft: cannot watch nftables changes (EPERM: join NFNLGRP_NFTABLES): changes made to table kpng by others are repaired at the periodic resync only']);
  });
});
