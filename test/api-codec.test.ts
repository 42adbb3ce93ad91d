// The server's batch encoder frames cached op bytes itself: its messages must be exactly what
// protobufjs encodes for the same OpBatch, chunked as before (~chunkBytes each).
import { decodeOpBatch, encodeBatch } from '../src/api/codec';
import { kpng } from '../src/gen/proto';
import { computeServiceItem } from '../src/model/compute';
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
  const ops = [...items.slice(0, 200), 'svc/default/gone', ...items.slice(200)];
  const msgs = [...encodeBatch({ reset: true, ops, revision: 7 }, items.length, 16 * 1024)];
  expect(msgs.length).toBeGreaterThan(3);
  const w = kpng.watchv1;
  const expected: kpng.watchv1.IOp[] = [{ reset: {} }, ...ops.map((o) => (typeof o === 'string' ? { delete: { key: o } } : { set: o })), { sync: { revision: 7, items: items.length } }];
  let at = 0;
  for (const m of msgs) {
    const n = w.OpBatch.decode(m).ops.length;
    expect(Buffer.compare(m, Buffer.from(w.OpBatch.encode({ ops: expected.slice(at, at + n) }).finish()))).toBe(0);
    expect(m.length).toBeLessThan(16 * 1024 + 4096);
    at += n;
  }
  expect(at).toBe(expected.length);
  expect(decodeOpBatch(msgs[0])[0]).toEqual({ op: 'reset' });
});
