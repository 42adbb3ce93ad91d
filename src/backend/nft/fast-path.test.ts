// The fast path's decisions without a kernel: which devices, what a full sync sends with it, how a
// repairing full sync keeps or removes the flowtable, and that a kernel without flowtables turns it
// off with one message instead of failing syncs. With the kernel: test/e2e/fast-path.guest.test.ts
// (the guest's kernel has flowtables) and test/e2e/nft-fast-path-unsupported.test.ts (this one has not).
import type { LinkRow } from '../../native/rtnl';
import { NftBatch } from '../../native/encode';
import { chooseDevices, FastPath, parseFastPathInterfaces } from './fast-path';
import { baseOps, baseOptions } from './base';
import { KernelObjects } from './kernel-objects';
import { stmtExprs, toNftOps } from './netlink';
import { toNftText } from './text';
import { SHARED_NAMES, type FamOps, type Op } from './types';
import { NftDataplane, type NftKernel } from './sink';
import { enlsNode, enlsService } from '../../../test/shared/objects';

const link = (name: string, o: Partial<LinkRow> = {}): LinkRow => ({ name, ifindex: 1, flags: 0x1, master: 0, kind: '', ...o });
const LINKS: LinkRow[] = [
  link('lo', { flags: 0x9 }), link('eth0'), link('cni0', { kind: 'bridge' }), link('veth1', { kind: 'veth', master: 3 }),
  link('eth1', { flags: 0 }), link('cali12', { kind: 'veth' }),
];

describe('nft fast path', () => {
  test('--nft-flowtable: off, auto, or interface names; a bad name is refused', () => {
    expect(parseFastPathInterfaces('')).toBeUndefined();
    expect(parseFastPathInterfaces(' auto ')).toBe('auto');
    expect(parseFastPathInterfaces('eth0, cni0')).toEqual(['eth0', 'cni0']);
    expect(() => parseFastPathInterfaces('eth0,a b')).toThrow(/bad interface name "a b"/);
  });

  test('auto: links that are up and not loopback, bridge ports included (the kernel matches bridged flows on the port)', () => {
    expect(chooseDevices({ interfaces: 'auto', minPackets: 20 }, LINKS)).toEqual({ devices: ['cali12', 'cni0', 'eth0', 'veth1'], missing: [] });
  });

  test('named interfaces: the ones that exist, the others reported', () => {
    expect(chooseDevices({ interfaces: ['eth0', 'bond0'], minPackets: 20 }, LINKS)).toEqual({ devices: ['eth0'], missing: ['bond0'] });
  });

  test('a full sync creates the flowtable before the chain whose rule offloads to it', () => {
    const ops = baseOps('ip', baseOptions('ip', undefined, { devices: ['eth0', 'cni0'], minPackets: 20 }));
    const ft = ops.findIndex((o) => o.kind === 'addFlowtable');
    const rule = ops.findIndex((o) => o.kind === 'addRule' && o.stmt.type === 'flowOffload');
    expect(ft).toBeGreaterThan(0);
    expect(rule).toBeGreaterThan(ft);
    expect(ops[ft]).toEqual({ kind: 'addFlowtable', flowtable: { name: SHARED_NAMES.fastPath, devices: ['eth0', 'cni0'] } });
    expect(ops).toContainEqual({ kind: 'addChain', chain: { name: SHARED_NAMES.fastPathForward, hook: { type: 'filter', hook: 'forward', priority: 60 } } });
    const text = toNftText('ip', 'kpng', ops);
    expect(text).toContain('add flowtable ip kpng fast-path { hook ingress priority 0; devices = { "eth0", "cni0" }; }');
    expect(text).toContain('add rule ip kpng fast-path-forward ct status dnat ct packets > 20 flow add @fast-path');
    // Without devices (or without the option) nothing of it.
    expect(baseOps('ip', baseOptions('ip', undefined, { devices: [], minPackets: 20 })).some((o) => o.kind === 'addFlowtable')).toBe(false);
  });

  test('the offload rule: ct status dnat, ct packets (swapped to network order) > N, flow add', () => {
    const x = stmtExprs('ip', { type: 'flowOffload', flowtable: 'fast-path', minPackets: 20 });
    expect(x.map((e) => e.type)).toEqual(['ct', 'bitwise', 'cmp', 'ct', 'byteorder', 'cmp', 'flowOffload']);
    const cmp = x[5] as { op: string; data: Uint8Array };
    expect(cmp.op).toBe('gt');
    expect([...cmp.data]).toEqual([0, 0, 0, 0, 0, 0, 0, 20]);
    expect(stmtExprs('ip', { type: 'flowOffload', flowtable: 'fast-path', minPackets: 0 }).map((e) => e.type)).toEqual(['ct', 'bitwise', 'cmp', 'flowOffload']);
  });

  test('the batch carries the flowtable with its hook and every device', () => {
    const b = new NftBatch();
    for (const o of toNftOps('ip', 'kpng', [{ kind: 'addFlowtable', flowtable: { name: 'fast-path', devices: ['eth0', 'cni0'] } }])) b.add(o);
    const buf = b.finish();
    expect(b.descs[0]).toMatchObject({ op: 'add', kind: 'flowtable', object: 'flowtable ip kpng fast-path' });
    const text = buf.toString('latin1');
    for (const s of ['kpng\0', 'fast-path\0', 'eth0\0', 'cni0\0']) expect(text).toContain(s);
  });

  test('a repairing full sync keeps a wanted flowtable and deletes an unwanted one after flushing the chains', () => {
    const fast: Op[] = baseOps('ip', baseOptions('ip', undefined, { devices: ['eth0'], minPackets: 20 }));
    const slow: Op[] = baseOps('ip', baseOptions('ip', undefined));
    const had = KernelObjects.of(fast);
    const keep = had.repair(fast, KernelObjects.of(fast));
    expect(keep.some((o) => o.kind === 'delFlowtable')).toBe(false);
    const drop = had.repair(slow, KernelObjects.of(slow));
    const del = drop.findIndex((o) => o.kind === 'delFlowtable');
    expect(del).toBeGreaterThan(drop.findIndex((o) => o.kind === 'flushChain' && o.name === SHARED_NAMES.fastPathForward));
    expect(drop.findIndex((o) => o.kind === 'delChain' && o.name === SHARED_NAMES.fastPathForward)).toBeGreaterThan(-1);
  });

  test('a kernel without flowtables: off, said once, every sync without it', async () => {
    const logs: string[] = [];
    let probes = 0;
    const fp = new FastPath({ interfaces: 'auto', minPackets: 20 }, {
      listLinks: async () => LINKS,
      probe: async () => { probes++; throw new Error('ENOENT: No such file or directory (flowtable ip kpng-flowtable-probe probe)'); },
      log: (m) => logs.push(m),
    });
    expect(await fp.spec()).toBeUndefined();
    expect(await fp.spec()).toBeUndefined();
    expect(probes).toBe(1);
    expect(logs).toEqual([expect.stringMatching(/^nft fast path: off, the kernel refused a flowtable \(ENOENT.*it needs nf_flow_table/)]);
  });

  test('devices are decided at every full sync and said when they change', async () => {
    const logs: string[] = [];
    let links = LINKS;
    const fp = new FastPath({ interfaces: ['eth0', 'cni0', 'wg0'], minPackets: 5 }, { listLinks: async () => links, probe: async () => {}, log: (m) => logs.push(m) });
    expect(await fp.spec()).toEqual({ devices: ['eth0', 'cni0'], minPackets: 5 });
    expect(await fp.spec()).toEqual({ devices: ['eth0', 'cni0'], minPackets: 5 });
    links = [...LINKS, link('wg0')];
    expect(await fp.spec()).toEqual({ devices: ['eth0', 'cni0', 'wg0'], minPackets: 5 });
    expect(logs).toEqual([
      'nft fast path: interface(s) wg0 not found on this node; left out of the flowtable until they exist',
      'nft fast path: flowtable on eth0, cni0, offloading service connections after 5 packets',
      'nft fast path: flowtable on eth0, cni0, wg0, offloading service connections after 5 packets',
    ]);
  });

  test('a link that appears between full syncs (a new pod) joins the flowtable with the next incremental batch', async () => {
    const sent: FamOps[][] = [];
    const kernel: NftKernel = { apply: async (_t, ops) => { sent.push(ops); return { messages: 0, bytes: 0, ms: 0 }; }, conntrackDelete: async () => 0 };
    let links = [link('eth0'), link('cni0', { kind: 'bridge' }), link('veth1', { master: 3 })];
    const logs: string[] = [];
    const fp = new FastPath({ interfaces: 'auto', minPackets: 20 }, { listLinks: async () => links, probe: async () => {}, log: (m) => logs.push(m) });
    const dp = new NftDataplane('kpng', kernel, undefined, fp);
    const svc = (i: number) => enlsService(i).service!;
    await dp.fullSync([svc(0)], enlsNode());
    const flowtableOps = (batch: FamOps[]) => batch.flatMap((f) => f.ops.filter((o) => o.kind === 'addFlowtable').map((o) => `${f.fam} ${JSON.stringify(o)}`));
    expect(flowtableOps(sent[0]!)).toHaveLength(2);
    // Nothing new: an incremental batch leaves the flowtable alone.
    await dp.update([{ key: 'svc/bench/s1', old: null, new: svc(1) }], enlsNode());
    expect(flowtableOps(sent[1]!)).toEqual([]);
    links = [...links, link('veth2', { master: 3 })];
    await dp.update([{ key: 'svc/bench/s2', old: null, new: svc(2) }], enlsNode());
    expect(flowtableOps(sent[2]!)).toEqual(['ip', 'ip6'].map((f) => `${f} ${JSON.stringify({ kind: 'addFlowtable', flowtable: { name: SHARED_NAMES.fastPath, devices: ['cni0', 'eth0', 'veth1', 'veth2'] } })}`));
    expect(logs).toContain('nft fast path: flowtable gains veth2');
  });
});
