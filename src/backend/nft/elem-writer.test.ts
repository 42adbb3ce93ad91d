// ElemWriter writes elements straight into the batch: the bytes must be those of the object path
// (elemObject -> NftBatch.element), which the addon and the kernel already accept.
import { NftBatch } from '../../native/encode';
import { ElemWriter, elemObject, elemText } from './netlink';
import { batchSizeHint, encodeFamOps } from './index';
import { PackedElems } from './packed';
import type { Elem, IpFamily, Op } from './types';

const v4: Elem[] = [
  { type: 'vip', addr: '10.96.0.10', proto: 'udp', port: 53, verdict: { goto: 'pick-vip-c-udp-2-7' } },
  { type: 'vip', addr: '192.168.255.1', proto: 'tcp', port: 65535, verdict: 'drop' },
  { type: 'port', proto: 'sctp', port: 30080, verdict: { goto: 'reject-chain' } },
  { type: 'pick', proto: 'tcp', port: 30443, slot: 4000000000, epAddr: '10.244.1.7', epPort: 8080 },
  { type: 'pick', addr: '10.96.0.1', proto: 'tcp', port: 443, slot: 3, epAddr: '172.18.0.2', epPort: 6443 },
  { type: 'pick', addr: '10.96.0.1', proto: 'tcp', port: 443, slot: 4, epAddr: '172.18.0.3', epPort: 6443 },
  { type: 'pick', proto: 'udp', port: 31000, slot: 0, epAddr: '10.244.0.9', epPort: 1 },
  // The same address again after a key that did not start with it.
  { type: 'pick', addr: '10.96.0.1', proto: 'tcp', port: 443, slot: 5, epAddr: '172.18.0.4', epPort: 6443 },
  { type: 'pick', addr: '10.96.0.2', proto: 'tcp', port: 443, slot: 0, epAddr: '172.18.0.4', epPort: 6443 },
  { type: 'pair', addr: '10.244.3.3' },
  { type: 'pick', addr: '10.96.0.2', proto: 'tcp', port: 443, slot: 1, epAddr: '172.18.0.5', epPort: 6443 },
  { type: 'addr', addr: '0.0.0.0' },
];
const v6: Elem[] = [
  { type: 'vip', addr: 'fd00:10:96::a', proto: 'udp', port: 53, verdict: { goto: 'cls-0123abcd' } },
  { type: 'pick', addr: '2001:db8::1', proto: 'tcp', port: 80, slot: 9, epAddr: 'fd00:10:244::1:2', epPort: 8080 },
  { type: 'pick', proto: 'tcp', port: 30443, slot: 1, epAddr: '::1', epPort: 443 },
  { type: 'pair', addr: 'fd00::5' },
  { type: 'addr', addr: '::' },
];

function viaObjects(fam: IpFamily, op: 'add' | 'delete', elems: Elem[]): Buffer {
  const b = new NftBatch();
  b.add({ op, elements: { family: fam, table: 'kpng', set: 'm', elements: elems.map(elemObject) } });
  return b.finish();
}
function viaWriter(fam: IpFamily, op: 'add' | 'delete', elems: Elem[]): Buffer {
  const b = new NftBatch();
  new ElemWriter().write(b, fam, 'kpng', op, 'm', elems);
  return b.finish();
}

describe('ElemWriter', () => {
  test.each([['ip', v4], ['ip6', v6]] as const)('%s: the same bytes as the object path, for every element kind', (fam, elems) => {
    for (const op of ['add', 'delete'] as const) {
      expect(viaWriter(fam, op, elems).equals(viaObjects(fam, op, elems))).toBe(true);
      for (const e of elems) expect(viaWriter(fam, op, [e]).equals(viaObjects(fam, op, [e]))).toBe(true);
    }
  });

  test('an element is named in error reports by its fields', () => {
    const b = new NftBatch();
    new ElemWriter().write(b, 'ip', 'kpng', 'add', 'm', v4);
    expect(b.descs[0].elementText?.(4)).toBe('10.96.0.1 . tcp . 443 . 3 : 172.18.0.2 . 6443');
  });

  test('a malformed address is refused, not encoded', () => {
    expect(() => viaWriter('ip', 'add', [{ type: 'addr', addr: '10.0.0' }])).toThrow(/bad IPv4 address/);
    expect(() => viaWriter('ip', 'add', [{ type: 'addr', addr: '10.0.0.256' }])).toThrow(/bad IPv4 address/);
  });
});

describe('encodeFamOps', () => {
  const many: Elem[] = Array.from({ length: 2000 }, (_, i) => ({ type: 'pair' as const, addr: `10.244.${i >> 8}.${i & 255}` }));

  test('sizes its first buffer for the batch: small for one change, at most 1 MiB', () => {
    expect(batchSizeHint([{ fam: 'ip', ops: [{ kind: 'addElems', set: 'm', elems: v4.slice(0, 1) }] }])).toBe(4096);
    expect(batchSizeHint([{ fam: 'ip', ops: [{ kind: 'addElems', set: 'm', elems: many }] }])).toBe(256 + 2000 * 48);
    expect(batchSizeHint([{ fam: 'ip', ops: Array.from({ length: 100 }, () => ({ kind: 'addElems' as const, set: 'm', elems: many })) }])).toBe(1 << 20);
  });

  test('the hint is within 2x of the bytes, which are those of one large buffer', async () => {
    const picks: Elem[] = Array.from({ length: 2000 }, (_, i) => ({ type: 'pick' as const, addr: `10.96.${i >> 8}.${i & 255}`, proto: 'tcp' as const, port: 443, slot: i % 7, epAddr: `10.244.${i >> 8}.${i & 255}`, epPort: 8443 }));
    const famOps = [{ fam: 'ip' as const, ops: [{ kind: 'addElems' as const, set: 'm', elems: picks }, { kind: 'delElems' as const, set: 'm', elems: picks.slice(0, 500) }] }];
    const b = new NftBatch(1 << 22);
    const w = new ElemWriter();
    w.write(b, 'ip', 'kpng', 'add', 'm', picks);
    w.write(b, 'ip', 'kpng', 'delete', 'm', picks.slice(0, 500));
    const small = (await encodeFamOps('kpng', famOps)).finish();
    expect(small.length).toBeGreaterThan(batchSizeHint(famOps) / 2);
    expect(small.length).toBeLessThan(batchSizeHint(famOps) * 2);
    expect(small.equals(b.finish())).toBe(true);
  });
});

describe('PackedElems (a full sync packs its elements as it renders)', () => {
  // More than two chunks, every kind, both families; v6 addresses with zero runs of several lengths.
  const mixed4: Elem[] = Array.from({ length: 2600 }, (_, i) => v4[i % v4.length]);
  const v6more: Elem[] = [...v6,
    { type: 'addr', addr: '2001:db8:0:1::1' }, { type: 'addr', addr: '1:0:0:2::3' },
    { type: 'addr', addr: '1:2:3:4:5:6:7:8' }, { type: 'addr', addr: '1::' }, { type: 'addr', addr: '1:0:2:0:3:0:4:0' },
    { type: 'port', proto: 'udp', port: 1, verdict: 'drop' }, { type: 'pick', proto: 'udp', port: 7, slot: 7, epAddr: 'fe80::1', epPort: 2 }];

  test.each([['ip', mixed4], ['ip6', v6more]] as const)('%s: decodes to the elements packed, names each, and encodes the bytes of the plain path', async (fam, elems) => {
    const p = new PackedElems(fam);
    for (const e of elems) p.add(e);
    expect(p.count).toBe(elems.length);
    expect(p.decode()).toEqual(elems);
    for (const i of [0, 1, 999, 1000, elems.length - 1]) if (i < elems.length) expect(p.text(i)).toBe(elemText(elems[i]));
    expect(p.text(elems.length)).toBe(`#${elems.length}`);
    const chunks = [...p.chunks()];
    expect(chunks.map((c) => c.first)).toEqual(Array.from({ length: Math.ceil(elems.length / 1000) }, (_, i) => i * 1000));
    // The batch: packed ops copied in, against the same elements as plain ops of 1000.
    const plain: Op[] = [];
    for (let i = 0; i < elems.length; i += 1000) plain.push({ kind: 'addElems', set: 'm', elems: elems.slice(i, i + 1000) });
    const packedOps: Op[] = [{ kind: 'addPacked', set: 'm', elems: p }];
    const a = (await encodeFamOps('kpng', [{ fam, ops: packedOps }])).finish();
    const b = (await encodeFamOps('kpng', [{ fam, ops: plain }])).finish();
    expect(a.equals(b)).toBe(true);
    // Sized once: the hint covers the packed bytes.
    expect(batchSizeHint([{ fam, ops: packedOps }])).toBeGreaterThanOrEqual(a.length);
    // A rejected element is named by its fields.
    const batch = await encodeFamOps('kpng', [{ fam, ops: packedOps }]);
    const last = batch.descs[batch.descs.length - 1];
    expect(last.elementText?.((elems.length - 1) % 1000)).toBe(elemText(elems[elems.length - 1]));
  });

  test('appending elements outside an element op is refused', () => {
    const p = new PackedElems('ip');
    p.add(v4[0]);
    const b = new NftBatch();
    expect(() => b.appendElements(p.items, 0, p.items.byteLength)).toThrow(/outside an element op/);
  });
});
