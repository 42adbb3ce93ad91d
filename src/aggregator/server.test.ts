// The gRPC service over a real unix socket with a fake kernel (the real kernel path is in
// test/e2e/aggregator-publish.test.ts): names, ownership, bad documents, results in order.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ApplyResult, NftOp } from '../native/nft-types';
import { silentLogger } from '../util/log';
import { Aggregator } from './aggregator';
import { aggregatorStatus, DeclareRefused, ProducerClient, removeProducer } from './client';
import { serveAggregator, type AggregatorServer } from './server';

const doc = (table: string, deny: string[]) => ({
  tables: [{ family: 'ip', name: table, sets: [{ name: 'deny', type: 'ipv4_addr', elements: deny }] }],
});

describe('aggregator gRPC service', () => {
  let dir: string;
  let agg: Aggregator;
  let server: AggregatorServer;
  let batches: NftOp[][];
  const clients: ProducerClient[] = [];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kba-aggsrv-'));
    batches = [];
    agg = new Aggregator({ minIntervalMs: 0, transport: { apply: async (ops): Promise<ApplyResult> => { batches.push(ops); return { messages: ops.length + 2, bytes: 1, ms: 0, encodeMs: 0 }; } } });
    server = await serveAggregator(agg, { listen: `unix://${dir}/agg.sock`, log: silentLogger });
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server.close();
    agg.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('declares land in order, each answered with its commit; the socket is 0600', async () => {
    expect(fs.statSync(`${dir}/agg.sock`).mode & 0o777).toBe(0o600);
    const c = await ProducerClient.connect(server.address, 'fw');
    clients.push(c);
    const r1 = await c.declare(doc('fw', ['10.0.0.1']));
    expect(r1).toMatchObject({ ok: true });
    expect(Number(r1.commit)).toBe(1);
    const [r2, r3] = await Promise.all([c.declare(doc('fw', ['10.0.0.2'])), c.declare(doc('fw', ['10.0.0.3']))]);
    expect(Number(r3.commit)).toBeGreaterThanOrEqual(Number(r2.commit));
    const last = batches[batches.length - 1];
    expect(last.map((o) => o.op)).toEqual(['delete', 'add']); // only the element changed
    const st = (await aggregatorStatus(server.address)) as { name: string; tables: string[]; peer: string }[];
    expect(st.map((p) => [p.name, p.tables])).toEqual([['fw', ['ip fw']]]);
    // The peer is this process, by its SO_PEERCRED credentials.
    expect(st[0].peer).toBe(`pid ${process.pid} uid ${process.getuid!()} gid ${process.getgid!()} (${fs.readFileSync('/proc/self/comm', 'utf8').trim()})`);
  });

  test('a second stream with the same name, another producer\'s table and a bad document are refused', async () => {
    const a = await ProducerClient.connect(server.address, 'a');
    clients.push(a);
    await a.declare(doc('shared', []));
    await expect(ProducerClient.connect(server.address, 'a')).rejects.toThrow(/producer a is already connected/);
    const b = await ProducerClient.connect(server.address, 'b');
    clients.push(b);
    await expect(b.declare(doc('shared', []))).rejects.toThrow(/table ip shared belongs to producer a/);
    const bad = await b.declare({ tables: [{ family: 'ip', name: 'x', sets: [{ name: 's', type: 'ipv4_addr', elements: ['nope'] }] }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(DeclareRefused);
    expect((bad as Error).message).toMatch(/producer b: bad objects document: tables\[0\]\.sets\[0\]\.elements\[0\]: bad IPv4 address/);
    // The stream is still usable after refusals.
    expect(await b.declare(doc('mine', ['10.0.0.9']))).toMatchObject({ ok: true });
  });

  test('a closed stream keeps the objects; Remove deletes them; an unknown producer is an error', async () => {
    const a = await ProducerClient.connect(server.address, 'a');
    await a.declare(doc('t', ['10.0.0.1']));
    a.close();
    for (let i = 0; i < 50 && (agg.status()[0]?.connected ?? true); i++) await new Promise((r) => setTimeout(r, 10));
    expect(agg.status()).toMatchObject([{ name: 'a', connected: false, tables: ['ip t'] }]);
    const n = batches.length;
    await removeProducer(server.address, 'a');
    expect(batches.slice(n).flat().map((o) => `${o.op} ${'table' in o ? o.table.name : '?'}`)).toEqual(['add t', 'delete t']);
    expect(agg.status()).toEqual([]);
    await expect(removeProducer(server.address, 'a')).rejects.toThrow(/no producer a/);
  });

  test('a patch sends only its change: elements added and deleted, a chain\'s rules replaced; a bad patch is refused with its path', async () => {
    const c = await ProducerClient.connect(server.address, 'fw');
    clients.push(c);
    const big = Array.from({ length: 1000 }, (_, i) => `10.1.${i >> 8}.${i & 255}`);
    await c.declare({
      tables: [{
        family: 'ip', name: 'fw', sets: [{ name: 'deny', type: 'ipv4_addr', elements: big }],
        chains: [{ name: 'in', hook: 'input', rules: [{ match: { saddr: '@deny' }, verdict: 'drop' }] }],
      }],
    });
    let n = batches.length;
    // One address in, one out: the set's type is known already.
    await c.patch({ set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', elements: ['192.0.2.1'] }] }] }, delete: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', elements: ['10.1.0.0'] }] }] } });
    expect(batches.slice(n).flat().map((o) => `${o.op} ${Object.keys(o)[1]} ${'elements' in o ? o.elements.elements.length : ''}`)).toEqual(['delete elements 1', 'add elements 1']);
    expect(agg.status()[0].desired).toMatchObject({ elements: 1000, rules: 1 });
    // A chain given with rules gets exactly those rules (typed rules may use the declared sets).
    n = batches.length;
    await c.patch({ set: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'in', rules: [{ match: { saddr: '@deny', protocol: 'tcp' }, verdict: { reject: 'tcp-reset' } }, { counter: true }] }] }] } });
    expect(batches.slice(n).flat().map((o) => `${o.op} ${Object.keys(o)[1]}`)).toEqual(['flush chain', 'add rule', 'add rule']);
    // Refusals name the problem; nothing changes.
    n = batches.length;
    await expect(c.patch({ delete: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'nope' }] }] } })).rejects.toThrow(/bad patch: delete\.tables\[0\]\.sets\[0\]\.name: no set nope in table ip fw/);
    await expect(c.patch({ set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', type: 'ipv6_addr' }] }] } })).rejects.toThrow(/cannot change a set's definition/);
    await expect(c.patch({ set: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'in', rules: [{ match: { daddr: '@gone' } }] }] }] } })).rejects.toThrow(/set\.tables\[0\]\.chains\[0\]\.rules\[0\]\.match\.daddr: no set "gone"/);
    await expect(c.patch({ delete: { tables: [{ family: 'ip', name: 'other' }] } })).rejects.toThrow(/table ip other is not declared by this producer/);
    expect(batches.length).toBe(n);
    // Delete the set and set it again with another type, in one patch: the table is rebuilt.
    await c.patch({
      delete: { tables: [{ family: 'ip', name: 'fw', chains: [{ name: 'in' }], sets: [{ name: 'deny' }] }] },
      set: { tables: [{ family: 'ip', name: 'fw', sets: [{ name: 'deny', type: 'inet_service', elements: [23] }] }] },
    });
    expect(agg.status()[0].desired).toMatchObject({ chains: 0, sets: 1, elements: 1, rules: 0 });
  });
});
