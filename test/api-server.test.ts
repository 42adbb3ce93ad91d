// The Watch API server and client in one process: several nodes' clients at once, a client
// of a node that does not exist, a slow client whose changes coalesce, hostile clients, and
// the socket's permissions.
import { Client, credentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { serveApi, type ApiServer } from '../src/api/server';
import { startApiSource, WatchClient, type ApiSource, type ReceivedBatch } from '../src/api/client';
import { encodeRequest, WATCH_METHOD } from '../src/api/codec';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import type { ItemStore } from '../src/store/item-store';
import { formatRoutesJsonl } from '../src/sink/routes';
import { silentLogger } from '../src/util/log';
import { waitFor } from './helpers/wait';
import * as k8s from './shared/objects';

const node = (name: string, zone = 'zone-a') => k8s.node(name, zone, k8s.internalIPs('192.168.0.1'));
const svc = (name: string, ip: string, extraSpec: Record<string, unknown> = {}) =>
  k8s.svc(name, { clusterIPs: [ip], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }], extraSpec });
/** Slice <service>-1: (address, node) pairs, ready. */
const slice = (service: string, eps: [string, string][], port = 8080) =>
  k8s.slice(`${service}-1`, service, eps.map(([ip, n]) => k8s.ep(ip, { ready: true, node: n })), { ports: [{ name: 'http', protocol: 'TCP', port }] });

function cluster(): ClusterStore {
  const c = new ClusterStore({ log: silentLogger });
  c.apply('Node', node('n1', 'zone-a'));
  c.apply('Node', node('n2', 'zone-b'));
  c.apply('Service', svc('web', '10.96.0.10'));
  c.apply('EndpointSlice', slice('web', [['10.244.1.5', 'n1'], ['10.244.2.7', 'n2']]));
  // internalTrafficPolicy Local: each node sees only its own endpoint.
  c.apply('Service', svc('local', '10.96.0.11', { internalTrafficPolicy: 'Local' }));
  c.apply('EndpointSlice', slice('local', [['10.244.1.6', 'n1'], ['10.244.2.8', 'n2']]));
  c.markSynced();
  return c;
}


const routes = (s: ItemStore) => formatRoutesJsonl(s.items());
const inProcess = (c: ClusterStore, n: string) => { const s = new NodeState(c, n); const r = routes(s); s.close(); return r; };

/** A raw call with our own serializers: send whatever bytes we like. */
function rawCall(api: string) {
  const client = new Client(api, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  const call = client.makeBidiStreamRequest(WATCH_METHOD, (b: Buffer) => b, (b: Buffer) => b, new Metadata());
  const result = new Promise<{ code: number; details: string; messages: number }>((resolve) => {
    let messages = 0;
    call.on('data', () => messages++);
    call.on('error', (e: ServiceError) => resolve({ code: e.code, details: e.details, messages }));
    call.on('end', () => resolve({ code: status.OK, details: '', messages }));
  });
  return { call, result, close: () => { call.cancel(); client.close(); } };
}

let dir: string;
let store: ClusterStore;
let server: ApiServer;
let api: string;
const stops: (() => Promise<void> | void)[] = [];

beforeEach(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kpng-api-'));
  store = cluster();
  server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/sub/kpng.sock` });
  api = server.address;
});

afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

async function follow(n: string): Promise<ItemStore> {
  const src = await startApiSource({ api, node: n, log: silentLogger });
  stops.push(() => src.stop());
  await src.state.whenSynced();
  return src.state;
}

test('the socket is created with its directory, mode 0600, and removed on close', async () => {
  const p = `${dir}/sub/kpng.sock`;
  const st = statSync(p);
  expect(st.isSocket()).toBe(true);
  expect(st.mode & 0o777).toBe(0o600);
  await server.close();
  expect(() => statSync(p)).toThrow();
});

test('several clients on different nodes get their own node state, equal to the in-process one', async () => {
  const [a, b, a2] = await Promise.all([follow('n1'), follow('n2'), follow('n1')]);
  expect(routes(a)).toBe(inProcess(store, 'n1'));
  expect(routes(b)).toBe(inProcess(store, 'n2'));
  expect(routes(a2)).toBe(routes(a));
  expect(routes(a)).not.toBe(routes(b));
  expect(server.nodes()).toEqual(['n1', 'n2']);
  expect(a.get('node')?.node?.zone).toBe('zone-a');

  // A change reaches every client of the node.
  store.apply('EndpointSlice', slice('web', [['10.244.1.5', 'n1'], ['10.244.2.7', 'n2'], ['10.244.1.9', 'n1']]));
  await waitFor('the change on all clients', () => [a, b, a2].every((s) => routes(s).includes('10.244.1.9')));
  expect(routes(a)).toBe(inProcess(store, 'n1'));
  expect(routes(b)).toBe(inProcess(store, 'n2'));
});

test('full states that nodes share go compressed to clients that accept it, and the same state arrives', async () => {
  for (let i = 0; i < 400; i++) {
    store.apply('Service', svc(`many-${i}`, `10.96.2.${i % 250}`));
    store.apply('EndpointSlice', slice(`many-${i}`, [[`10.244.4.${i % 250}`, 'n2'], [`10.244.5.${i % 250}`, 'n2']]));
  }
  store.flush();
  // Clients one after the other: a shared part is compressed from the second full state that has it.
  const sources: ApiSource[] = [];
  for (const [n, acceptDeflate] of [['n1', true], ['n1', true], ['n1', false], ['n1', true]] as const) {
    const src = await startApiSource({ api, node: n, log: silentLogger, acceptDeflate });
    stops.push(() => src.stop());
    await src.state.whenSynced();
    sources.push(src);
  }
  const expected = inProcess(store, 'n1');
  for (const s of sources) expect(routes(s.state)).toBe(expected);
  const [, , plain, deflated] = sources.map((s) => s.client.stats.bytes);
  expect(deflated).toBeLessThan(plain / 3);

  // Later changes reach both kinds of client (small batches are never compressed).
  store.apply('EndpointSlice', slice('many-7', [['10.244.6.1', 'n1']]));
  await waitFor('the change on all clients', () => sources.every((s) => routes(s.state).includes('10.244.6.1')));
  for (const s of sources) expect(routes(s.state)).toBe(inProcess(store, 'n1'));
});

test('a node state is shared by its clients and dropped with the last one', async () => {
  const c1 = await startApiSource({ api, node: 'n1', log: silentLogger });
  const c2 = await startApiSource({ api, node: 'n1', log: silentLogger });
  await Promise.all([c1.state.whenSynced(), c2.state.whenSynced()]);
  expect(server.nodes()).toEqual(['n1']);
  expect(server.stats()).toHaveLength(2);
  await c1.stop();
  await waitFor('one stream left', () => server.stats().length === 1);
  expect(server.nodes()).toEqual(['n1']);
  await c2.stop();
  await waitFor('no stream left', () => server.stats().length === 0);
  expect(server.nodes()).toEqual([]);
});

test('a node that does not exist gets an empty state, then its state when it appears', async () => {
  const batches: ReceivedBatch[] = [];
  const client = new WatchClient({ api, node: 'ghost', log: silentLogger });
  stops.push(() => client.stop());
  void client.run((b) => { batches.push(b); });
  await waitFor('the first batch', () => batches.length === 1);
  expect(batches[0]).toMatchObject({ reset: true, changes: [], items: 0 });
  await new Promise((r) => setTimeout(r, 200));
  expect(batches).toHaveLength(1); // no error loop, no repeated resets
  expect(client.stats.failures).toBe(0);

  store.apply('Node', node('ghost', 'zone-c'));
  await waitFor('the state of the new node', () => batches.length === 2);
  expect(batches[1].reset).toBe(true);
  expect(batches[1].items).toBe(3);
  expect(batches[1].changes.map((c) => c.key)).toEqual(['node', 'svc/default/local', 'svc/default/web']);

  store.apply('Node', { metadata: { name: 'ghost' } }, true);
  await waitFor('the empty state again', () => batches.length === 3);
  expect(batches[2]).toMatchObject({ reset: true, changes: [], items: 0 });
});

test('a slow client gets the changes made while it held a batch coalesced into one batch', async () => {
  const batches: ReceivedBatch[] = [];
  let release!: () => void;
  let hold = true;
  const client = new WatchClient({ api, node: 'n1', log: silentLogger });
  stops.push(() => client.stop());
  void client.run(async (b) => {
    batches.push(b);
    if (hold) await new Promise<void>((r) => (release = r));
  });
  await waitFor('the first batch', () => batches.length === 1 && release !== undefined);
  const bytesHeld = client.stats.bytes;
  const messagesHeld = client.stats.messages;

  // Meanwhile: 2000 changes to two services, 50 new services, one deleted.
  for (let i = 0; i < 1000; i++) {
    store.apply('EndpointSlice', slice('web', [['10.244.1.5', 'n1'], [`10.244.3.${i % 250}`, 'n2']], 8000 + i));
    store.apply('Service', svc('local', '10.96.0.11', { internalTrafficPolicy: 'Local', sessionAffinity: i % 2 ? 'ClientIP' : 'None' }));
    store.flush();
  }
  for (let i = 0; i < 50; i++) store.apply('Service', svc(`new-${i}`, `10.96.1.${i}`));
  store.apply('Service', { metadata: { namespace: 'default', name: 'local' } }, true);
  store.flush();
  await new Promise((r) => setTimeout(r, 100));

  // Nothing was sent to the client while it held its batch: no queue builds up.
  expect(client.stats.messages).toBe(messagesHeld);
  expect(client.stats.bytes).toBe(bytesHeld);
  const st = server.stats().find((s) => s.node === 'n1')!;
  expect(st.requested).toBe(false);

  hold = false;
  release();
  await waitFor('the coalesced batch', () => batches.length === 2);
  const b = batches[1];
  expect(b.reset).toBe(false);
  const keys = b.changes.map((c) => c.key);
  expect(new Set(keys).size).toBe(keys.length); // each key at most once
  expect(keys).toHaveLength(52); // web, local (deleted), 50 new services
  expect(b.changes.find((c) => c.key === 'svc/default/local')).toEqual({ op: 'delete', key: 'svc/default/local' });
  const web = b.changes.find((c) => c.key === 'svc/default/web');
  expect(web?.op === 'set' && web.item.service?.ports[0].clusterEndpoints.map((e) => e.port)).toEqual([8999, 8999]);
  expect(b.revision).toBeGreaterThan(batches[0].revision + 1000);
  expect(b.items).toBe(52);
});

test('malformed and hostile requests get an error on their own stream; other clients go on', async () => {
  const good = await follow('n1');
  const huge = rawCall(api);
  huge.call.write(Buffer.alloc(1 << 20, 0x41));
  const garbage = rawCall(api);
  garbage.call.write(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])); // a string longer than the message
  const wrongType = rawCall(api);
  wrongType.call.write(Buffer.from([0x08, 0x01])); // field 1 (node) as a varint, not a string
  const noNode = rawCall(api);
  noNode.call.write(encodeRequest({ reset: true }));
  const badName = rawCall(api);
  badName.call.write(encodeRequest({ node: '../../etc/passwd' }));
  const flood = rawCall(api);
  flood.call.write(encodeRequest({ node: 'n1' }));
  for (let i = 0; i < 10; i++) flood.call.write(encodeRequest({}));
  const switcher = rawCall(api);
  switcher.call.write(encodeRequest({ node: 'n1' }));
  await new Promise((r) => setTimeout(r, 100));
  switcher.call.write(encodeRequest({ node: 'n2' }));

  const results = await Promise.all([huge, garbage, wrongType, noNode, badName, flood, switcher].map((c) => c.result));
  for (const c of [huge, garbage, wrongType, noNode, badName, flood, switcher]) c.close();
  expect(results.map((r) => status[r.code])).toEqual([
    'RESOURCE_EXHAUSTED', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION', 'INVALID_ARGUMENT',
  ]);
  expect(results[3].details).toMatch(/must name a node/);
  expect(results[6].details).toMatch(/follows node n1/);

  // The good client was not disturbed and still follows changes.
  store.apply('Service', svc('after', '10.96.0.99'));
  await waitFor('the change after the attacks', () => good.get('svc/default/after') !== undefined);
  expect(routes(good)).toBe(inProcess(store, 'n1'));
});

test('a stream that never asks is closed after the first-request timeout', async () => {
  await server.close();
  server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/t.sock`, firstRequestTimeoutMs: 100 });
  const idle = rawCall(server.address);
  const r = await idle.result;
  idle.close();
  expect(status[r.code]).toBe('DEADLINE_EXCEEDED');
});

test('too many streams: the extra one is refused, the others go on', async () => {
  await server.close();
  server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/m.sock`, maxStreams: 2 });
  api = server.address;
  const [a, b] = await Promise.all([follow('n1'), follow('n2')]);
  const extra = rawCall(api);
  extra.call.write(encodeRequest({ node: 'n1' }));
  const r = await extra.result;
  extra.close();
  expect(status[r.code]).toBe('RESOURCE_EXHAUSTED');
  expect(a.size).toBe(3);
  expect(b.size).toBe(3);
});

test('the socket group makes the socket 0660 and owned by the group', async () => {
  await server.close();
  server = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/g.sock`, socketGroup: '12345' });
  const st = statSync(`${dir}/g.sock`);
  expect(st.mode & 0o777).toBe(0o660);
  expect(st.gid).toBe(12345);
  await expect(serveApi({ store, log: silentLogger, listen: `unix://${dir}/h.sock`, socketGroup: 'no-such-group-here' })).rejects.toThrow(/no such group/);
  // By name, from /etc/group.
  const byName = await serveApi({ store, log: silentLogger, listen: `unix://${dir}/n.sock`, socketGroup: 'root' });
  expect(statSync(`${dir}/n.sock`).gid).toBe(0);
  expect(statSync(`${dir}/n.sock`).mode & 0o777).toBe(0o660);
  await byName.close();
});

test('a stale socket is replaced; a live one or a regular file is not', async () => {
  // Live: the server of beforeEach.
  await expect(serveApi({ store, log: silentLogger, listen: api })).rejects.toThrow(/already listening/);
  // Stale: the socket of a server that was killed (nothing removed it).
  const stale = `${dir}/stale.sock`;
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(stale)}, () => console.log('up'))`]);
  await new Promise((r) => child.stdout.once('data', r));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  expect(statSync(stale).isSocket()).toBe(true);
  const s2 = await serveApi({ store, log: silentLogger, listen: `unix://${stale}` });
  stops.push(() => s2.close());
  const src = await startApiSource({ api: s2.address, node: 'n2', log: silentLogger });
  stops.push(() => src.stop());
  await src.state.whenSynced();
  expect(src.state.size).toBe(3);
  // Not a socket.
  writeFileSync(`${dir}/file.sock`, 'x');
  await expect(serveApi({ store, log: silentLogger, listen: `unix://${dir}/file.sock` })).rejects.toThrow(/not a socket/);
});

test('TCP without TLS is refused', async () => {
  await expect(serveApi({ store, log: silentLogger, listen: 'tcp://127.0.0.1:0' })).rejects.toThrow(/refusing to serve the API on tcp:\/\/127.0.0.1:0 without TLS/);
  await expect(serveApi({ store, log: silentLogger, listen: 'tcp://127.0.0.1:0', tlsCert: '/nonexistent.pem' })).rejects.toThrow(/without TLS/);
  await expect(serveApi({ store, log: silentLogger, listen: 'http://127.0.0.1:80' })).rejects.toThrow(/expected unix/);
});
