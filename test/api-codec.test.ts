// The server's batch encoder frames cached op bytes itself: its messages must be exactly what
// protobufjs encodes for the same OpBatch, chunked as before (~chunkBytes each).
import { decodeOpBatch, encodeBatch } from '../src/api/codec';
import { kpng } from '../src/gen/proto';
import { computeServiceItem } from '../src/model/compute';
import type { Item } from '../src/model/enls';
import { ClusterStore } from '../src/store/cluster';
import { silentLogger } from '../src/util/log';
import { ep, slice, svc } from './helpers/k8s';

test('encodeBatch messages equal protobufjs OpBatch encodings, in chunks', () => {
  const store = new ClusterStore({ log: silentLogger });
  for (let i = 0; i < 300; i++) {
    store.apply('Service', svc(`s${i}`, { clusterIPs: [`10.96.1.${i % 250}`] }));
    store.apply('EndpointSlice', slice(`s${i}-a`, `s${i}`, Array.from({ length: 1 + (i % 40) }, (_, k) => ep(`10.244.${i % 250}.${k + 1}`, { node: 'n1' }))));
  }
  store.flush();
  const view = { name: 'n1', zone: '', primary: [] };
  const items = [...store.serviceKeys()].sort().map((k) => computeServiceItem(store.getService(k)!, store.slicesOf(k), view));
  const w = kpng.watchv1;
  const check = (reset: boolean, ops: (Item | string)[], chunk: number) => {
    const msgs = [...encodeBatch({ reset, ops, revision: 7 }, items.length, chunk)];
    expect(msgs.length).toBeGreaterThan(2);
    const expected: kpng.watchv1.IOp[] = [...(reset ? [{ reset: {} }] : []), ...ops.map((o) => (typeof o === 'string' ? { delete: { key: o } } : { set: o })), { sync: { revision: 7, items: items.length } }];
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
  const a = check(true, items, 64 * 1024), b = check(true, items, 64 * 1024);
  const reused = a.filter((m, k) => m === b[k]).length;
  expect(a.length).toBeGreaterThan(3);
  expect(reused).toBe(a.length - 2);
  expect(a[0]).not.toBe(b[0]); // the first message holds Reset, the last one Sync: built each time
  expect(a[a.length - 1]).not.toBe(b[b.length - 1]);
});
