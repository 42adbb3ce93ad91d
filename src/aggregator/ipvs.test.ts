// The IPVS subsystem of the aggregator with a fake transport (the real kernel: the qemu guest test
// test/e2e/ipvs-aggregator.guest.test.ts): one batch per tick for every producer's list, failures
// mapped back to the producer that sent the message, the rate limit shared with nothing else.
import type { IpvsApplyResult, IpvsOp } from '../native/ipvs';
import { Aggregator } from './aggregator';
import type { IpvsTransport } from './ipvs';

class FakeIpvs implements IpvsTransport {
  batches: IpvsOp[][] = [];
  refuse: (o: IpvsOp) => boolean = () => false;
  async apply(ops: IpvsOp[]): Promise<IpvsApplyResult> {
    this.batches.push(ops);
    const failed = ops.flatMap((o, index) => (this.refuse(o) ? [{ index, what: `${o.op} ${'service' in o ? o.service.address : ''}`, errno: 17, code: 'EEXIST' }] : []));
    return { messages: ops.length, bytes: 100 * ops.length, ms: 1, encodeMs: 0, failed, unknown: false };
  }
}

const svc = (address: string): IpvsOp => ({ op: 'addService', service: { address, protocol: 'tcp', port: 80, scheduler: 'rr' } });
const nft = { apply: async () => ({ messages: 0, bytes: 0, ms: 0, encodeMs: 0 }) };

test('lists sent in one turn of the event loop go as ONE batch, in order; each producer gets its own share', async () => {
  const k = new FakeIpvs();
  const agg = new Aggregator({ transport: nft, ipvs: k, minIntervalMs: 0 });
  const [a, b] = await Promise.all([agg.ipvs!.send('kpng', [svc('10.96.0.1'), svc('10.96.0.2')]), agg.ipvs!.send('lb', [svc('10.96.0.3')])]);
  expect(k.batches.map((x) => x.map((o) => ('service' in o ? o.service.address : '')))).toEqual([['10.96.0.1', '10.96.0.2', '10.96.0.3']]);
  expect(a).toMatchObject({ messages: 3, failed: [] });
  expect(b).toMatchObject({ messages: 3, failed: [] });
  expect(agg.status().map((s) => [s.name, s.ipvs?.messages])).toEqual([['kpng', 2], ['lb', 1]]);
  agg.close();
});

test('a refused message is reported to the producer that sent it, indexed in its own list; the others are applied', async () => {
  const k = new FakeIpvs();
  k.refuse = (o) => 'service' in o && o.service.address === '10.96.0.3';
  const logs: string[] = [];
  const agg = new Aggregator({ transport: nft, ipvs: k, minIntervalMs: 0, log: (m) => logs.push(m) });
  const [a, b] = await Promise.all([agg.ipvs!.send('kpng', [svc('10.96.0.1')]), agg.ipvs!.send('lb', [svc('10.96.0.2'), svc('10.96.0.3')])]);
  expect(k.batches).toHaveLength(1);
  expect(a.failed).toEqual([]);
  expect(b.failed).toEqual([{ index: 1, what: 'addService 10.96.0.3', errno: 17, code: 'EEXIST' }]);
  const st = new Map(agg.status().map((s) => [s.name, s.ipvs!]));
  expect(st.get('kpng')!.last).toMatchObject({ ok: true, batch: 1 });
  expect(st.get('lb')!.last).toMatchObject({ ok: false, batch: 1, error: 'addService 10.96.0.3: EEXIST' });
  expect(logs.join('\n')).toMatch(/ipvs: producer lb: addService 10.96.0.3: EEXIST \(1 of 2 messages refused\)/);
  agg.close();
});

test('rate limit: after the burst, lists queued during the interval go together in the next batch', async () => {
  const k = new FakeIpvs();
  const agg = new Aggregator({ transport: nft, ipvs: k, minIntervalMs: 150, burst: 1 });
  await agg.ipvs!.send('kpng', [svc('10.96.0.1')]);   // spends the burst
  const later = [agg.ipvs!.send('kpng', [svc('10.96.0.2')])];
  await new Promise((r) => setTimeout(r, 30));
  later.push(agg.ipvs!.send('lb', [svc('10.96.0.3')]));
  expect(agg.ipvs!.pending().sort()).toEqual(['kpng', 'lb']);
  // Held back by the limiter (still pending above), then sent together in one batch.
  expect(k.batches).toHaveLength(1);
  await Promise.all(later);
  expect(k.batches.map((x) => x.length)).toEqual([1, 2]);
  agg.close();
});

test('a transport error rejects every list of the batch; close rejects what is queued', async () => {
  const agg = new Aggregator({ transport: nft, ipvs: { apply: async () => { throw new Error('no such netns'); } }, minIntervalMs: 0 });
  await expect(agg.ipvs!.send('kpng', [svc('10.96.0.1')])).rejects.toThrow('no such netns');
  expect(agg.status()[0].ipvs!.last).toMatchObject({ ok: false, error: 'no such netns' });
  const q = agg.ipvs!.send('kpng', [svc('10.96.0.1')]);
  agg.close();
  await expect(q).rejects.toThrow('aggregator closed');
});
