// The server's batch encoder frames cached op bytes itself: its messages must be exactly what
// protobufjs encodes for the same OpBatch, chunked as before (~chunkBytes each).
import { spawnSync } from 'node:child_process';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { decodeOpBatch, encodeBatch, MAX_INFLATED_BYTES } from '../src/api/codec';
import { assemble, deflatePiece } from '../src/api/deflate';
import { kpng } from '../src/gen/proto';
import { computeServiceItem } from '../src/model/compute';
import { wireItem, type Item } from '../src/model/enls';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { silentLogger } from '../src/util/log';
import { ep, node, slice, svc } from './helpers/k8s';

const view = { name: 'n1', zone: '', primary: [] };

/** `n` services named PREFIX0.. with 1 to `maxEndpoints` endpoints on node n1, and their items for n1. */
function world(prefix: string, n: number, maxEndpoints: number, net: number) {
  const store = new ClusterStore({ log: silentLogger });
  for (let i = 0; i < n; i++) {
    store.apply('Service', svc(`${prefix}${i}`, { clusterIPs: [`10.96.${net}.${i % 250}`] }));
    store.apply('EndpointSlice', slice(`${prefix}${i}-a`, `${prefix}${i}`, Array.from({ length: 1 + (i % maxEndpoints) }, (_, k) => ep(`10.${244 + net}.${i % 250}.${k + 1}`, { node: 'n1' }))));
  }
  store.flush();
  const items = [...store.serviceKeys()].sort().map((k) => computeServiceItem(store.getService(k)!, store.slicesOf(k), view));
  return { store, items };
}

test('encodeBatch messages equal protobufjs OpBatch encodings, in chunks', () => {
  const { store, items } = world('s', 300, 40, 0);
  const w = kpng.watchv1;
  const check = (reset: boolean, ops: (Item | string)[], chunk: number) => {
    const msgs = [...encodeBatch({ reset, ops, revision: 7 }, items.length, chunk)];
    expect(msgs.length).toBeGreaterThan(2);
    const expected: kpng.watchv1.IOp[] = [...(reset ? [{ reset: {} }] : []), ...ops.map((o) => (typeof o === 'string' ? { delete: { key: o } } : { set: wireItem(o) })), { sync: { revision: 7, items: items.length } }];
    let at = 0;
    for (const m of msgs) {
      const n = w.OpBatch.decode(m).ops.length;
      expect(Buffer.compare(m, Buffer.from(w.OpBatch.encode({ ops: expected.slice(at, at + n) }).finish()))).toBe(0);
      expect(m.length).toBeLessThan(chunk + 4096);
      at += n;
    }
    expect(at).toBe(expected.length);
    return msgs;
  };
  const ops = [...items.slice(0, 200), 'svc/default/gone', ...items.slice(200)];
  expect(decodeOpBatch(check(true, ops, 16 * 1024)[0])[0]).toEqual({ op: 'reset' });
  // Full states met again are copied in runs of ops: the same bytes and message boundaries, also when
  // a run is cut by a boundary (small chunks), or when some of its items are other objects.
  for (const chunk of [16 * 1024, 4 * 1024, 64 * 1024]) {
    check(true, items, chunk);
    check(true, items, chunk);
    const other = items.map((it, i) => (i % 97 === 5 ? computeServiceItem(store.getService(`default/s${i}`)!, [], view) : it));
    check(true, other, chunk);
    check(true, items, chunk);
  }
  // Messages made of shared runs only are then the same buffers for every full state (no copy).
  check(true, items, 32 * 1024); // met once: kept the second time (a)
  const a = check(true, items, 32 * 1024), b = check(true, items, 32 * 1024);
  const reused = a.filter((m, k) => m === b[k]).length;
  expect(a.length).toBeGreaterThan(3);
  expect(reused).toBe(a.length - 2);
  expect(a[0]).not.toBe(b[0]); // the first message holds Reset, the last one Sync: built each time
  expect(a[a.length - 1]).not.toBe(b[b.length - 1]);
});

test('with deflate, full states met again go compressed from shared pieces, and decode to the same ops', () => {
  const { store, items } = world('d', 400, 7, 1);
  // Some items of a node's own, new objects each time (never shared: they go as stored blocks).
  const withOwn = () => items.map((it, i) => (i % 53 === 9 ? computeServiceItem(store.getService(it.key.slice(4))!, [], view) : it));
  const own = withOwn();
  const w = kpng.watchv1;
  const encode = (ops: Item[], deflate: boolean) => [...encodeBatch({ reset: true, ops, revision: 3 }, ops.length, 16 * 1024, deflate)];
  const plainBytes = (msgs: Buffer[]) => msgs.reduce((a, m) => a + m.length, 0);
  const isDeflated = (m: Buffer) => (w.OpBatch.decode(m).deflatedOps?.length ?? 0) > 0;

  // The first full state: nothing is shared yet, so nothing is compressed (plain bytes, as without deflate).
  const first = encode(items, true);
  expect(first.some(isDeflated)).toBe(false);
  for (const ops of [items, own, items]) {
    const plain = encode(ops, false), deflated = encode(ops, true);
    expect(deflated.some(isDeflated)).toBe(true);
    expect(plainBytes(deflated)).toBeLessThan(plainBytes(plain) / 3);
    expect(deflated.flatMap((m) => decodeOpBatch(m))).toEqual(plain.flatMap((m) => decodeOpBatch(m)));
    // Reset first and Sync last, once each, whether or not their message is compressed.
    const ops2 = deflated.flatMap((m) => decodeOpBatch(m));
    expect(ops2[0]).toEqual({ op: 'reset' });
    expect(ops2[ops2.length - 1]).toEqual({ op: 'sync', revision: 3, items: ops.length });
    expect(ops2.filter((o) => o.op === 'reset' || o.op === 'sync')).toHaveLength(2);
  }
  // A message made of shared runs only is one compressed buffer, the same one in every full state.
  const a = encode(items, true), b = encode(items, true);
  expect(a.filter((m, k) => m === b[k] && isDeflated(m)).length).toBeGreaterThan(2);

  // The stream is standard raw DEFLATE (stored blocks between pieces, a final block): Python's zlib
  // reads a message that mixes compressed pieces and stored ops to the same bytes.
  const shared = new Set(encode(items, true));
  const mixed = encode(withOwn(), true).find((m) => isDeflated(m) && !shared.has(m));
  const stream = Buffer.from(w.OpBatch.decode(mixed!).deflatedOps!);
  const py = spawnSync('python3', ['-c', 'import sys,zlib; d=zlib.decompressobj(-15); out=d.decompress(sys.stdin.buffer.read()); assert d.eof, "no final block"; sys.stdout.buffer.write(out)'], { input: stream });
  expect(py.stderr.toString()).toBe('');
  expect(Buffer.compare(py.stdout, inflateRawSync(stream))).toBe(0);
  expect(w.OpBatch.decode(py.stdout).ops.length).toBeGreaterThan(10);
});

test('a stream of stored blocks longer than one block (64 KiB), and hostile deflated_ops', () => {
  const big = Buffer.alloc(200_000, 7);
  const { parts, length } = assemble([Buffer.alloc(10, 1), { piece: deflatePiece(Buffer.alloc(5000, 2)) }, big.subarray(0, 70_000), big.subarray(70_000)]);
  const out = inflateRawSync(Buffer.concat(parts, length));
  expect(out).toEqual(Buffer.concat([Buffer.alloc(10, 1), Buffer.alloc(5000, 2), big]));

  const w = kpng.watchv1;
  const inner = Buffer.from(w.OpBatch.encode({ ops: [{ sync: { revision: 1, items: 0 } }] }).finish());
  const nested = Buffer.from(w.OpBatch.encode({ deflatedOps: deflateRawSync(Buffer.from(w.OpBatch.encode({ deflatedOps: deflateRawSync(inner) }).finish())) }).finish());
  expect(() => decodeOpBatch(nested)).toThrow(/inside deflated_ops/);
  expect(decodeOpBatch(Buffer.from(w.OpBatch.encode({ deflatedOps: deflateRawSync(inner) }).finish()))).toEqual([{ op: 'sync', revision: 1, items: 0 }]);
  // A bomb (a few KB that inflate past the limit) and garbage are errors, not memory.
  const bomb = Buffer.from(w.OpBatch.encode({ deflatedOps: deflateRawSync(Buffer.alloc(MAX_INFLATED_BYTES + 1)) }).finish());
  expect(bomb.length).toBeLessThan(200_000);
  expect(() => decodeOpBatch(bomb)).toThrow(/larger than|maxOutputLength|buffer/i);
  expect(() => decodeOpBatch(Buffer.from(w.OpBatch.encode({ deflatedOps: Buffer.from('not deflate at all') }).finish()))).toThrow();
});

test('a node state\'s full list, read by shared blocks, encodes to the bytes of its items read one by one', () => {
  const store = new ClusterStore({ log: silentLogger });
  store.apply('Node', node('n1'));
  store.apply('Node', node('n2'));
  for (let i = 0; i < 300; i++) {
    store.apply('Service', svc(`b${i}`, { clusterIPs: [`10.96.3.${i % 250}`] }));
    // Every 37th service has an endpoint on n1: n1 holds those items itself, n2 shares them.
    store.apply('EndpointSlice', slice(`b${i}-a`, `b${i}`, [ep(`10.246.${i % 250}.1`, { node: i % 37 === 0 ? 'n1' : 'n9' }), ep(`10.246.${i % 250}.2`)]));
  }
  store.flush();
  const states = ['n1', 'n2'].map((n) => new NodeState(store, n));
  const blocks = (s: NodeState) => { const l = s.fullList(); let n = 0; for (let i = 0; i < l.length; i += 16) if (l.sharedBlock!(i)) n++; return n; };
  expect(blocks(states[1]!)).toBeGreaterThan(blocks(states[0]!)); // n1's own items break some
  expect(blocks(states[0]!)).toBeGreaterThan(5);
  const w = kpng.watchv1;
  for (const deflate of [false, true]) {
    for (const s of states) {
      const byBlocks = (): Buffer[] => [...encodeBatch({ reset: true, ops: s.fullList(), revision: 5 }, s.size, 8 * 1024, deflate)];
      const oneByOne = (): Buffer[] => [...encodeBatch({ reset: true, ops: s.itemList(), revision: 5 }, s.size, 8 * 1024, deflate)];
      // Third time each: every shared run is kept by then, through either path.
      let a: Buffer[] = [], b: Buffer[] = [];
      for (let k = 0; k < 3; k++) { a = byBlocks(); b = oneByOne(); }
      expect(a.length).toBeGreaterThan(5);
      expect(a.map((m) => m.toString('base64'))).toEqual(b.map((m) => m.toString('base64')));
      expect(a.flatMap((m) => decodeOpBatch(m)).filter((o) => o.op === 'set').map((o) => o.op === 'set' && o.item))
        .toEqual(s.itemList().flatMap((it) => decodeOpBatch(Buffer.from(w.OpBatch.encode({ ops: [{ set: wireItem(it) }] }).finish()))).map((o) => o.op === 'set' && o.item));
    }
  }
  for (const s of states) s.close();
});
