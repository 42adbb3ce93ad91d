// The Watch client: reconnection after a server restart, TLS with client certificates, and
// the library entry points (watchFileState / watchLocalState / watchClusterState).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveApi, type ApiServer } from '../src/api/server';
import { startApiSource, WatchClient, type ReceivedBatch } from '../src/api/client';
import { ClusterStore } from '../src/store/cluster';
import { NodeState } from '../src/store/node-state';
import { FileSource } from '../src/source/file-source';
import { formatRoutesJsonl } from '../src/sink/routes';
import { silentLogger, type Logger } from '../src/util/log';
import { watchClusterState, watchFileState, watchLocalState, type Batch, type StateView } from '../src/index';
import { waitFor } from './helpers/wait';
import * as k8s from './shared/objects';

const svc = (name: string, ip: string, port = 80) => k8s.svc(name, { clusterIPs: [ip], ports: [{ name: 'http', protocol: 'TCP', port, targetPort: 8080 }] });
const node = (name: string) => k8s.node(name);

function cluster(services: [string, string, number?][]): ClusterStore {
  const c = new ClusterStore({ log: silentLogger });
  c.apply('Node', node('n1'));
  for (const [n, ip, port] of services) c.apply('Service', svc(n, ip, port));
  c.markSynced();
  return c;
}


function recordingLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, debug: () => undefined, info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
}

let dir: string;
beforeEach(() => { dir = mkdtempSync(path.join(os.tmpdir(), 'kpng-apic-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('after a server restart the client reconnects with growing jittered backoff and gets Reset + the full state', async () => {
  const listen = `unix://${dir}/kpng.sock`;
  let server: ApiServer = await serveApi({ store: cluster([['a', '10.96.0.1'], ['b', '10.96.0.2']]), log: silentLogger, listen });
  const log = recordingLog();
  const batches: ReceivedBatch[] = [];
  const client = new WatchClient({ api: listen, node: 'n1', log, backoff: { initialMs: 40, maxMs: 300 } });
  const running = client.run((b) => { batches.push(b); });
  await waitFor('the first state', () => batches.length === 1);
  expect(batches[0]).toMatchObject({ reset: true, items: 3 });

  await server.close();
  await waitFor('a few failed attempts', () => client.stats.failures >= 4);
  const delays = log.lines.map((l) => /reconnecting in (\d+) ms/.exec(l)?.[1]).filter(Boolean).map(Number);
  expect(delays.length).toBeGreaterThanOrEqual(4);
  // Jittered (src/util/backoff.ts): each delay lies between min(300, 40 * 2^n) and twice that, capped at 300.
  delays.slice(0, 4).forEach((d, n) => {
    const base = Math.min(300, 40 * 2 ** n);
    expect(d).toBeGreaterThanOrEqual(base);
    expect(d).toBeLessThanOrEqual(Math.min(300, 2 * base));
  });
  expect(log.lines[0]).toMatch(/following node n1 on unix:\/\/.*: 3 items/);
  expect(log.lines[1]).toMatch(/lost the stream from unix:\/\/.*reconnecting in/);

  // The restarted server has a different state: b changed, c is new, a is gone.
  server = await serveApi({ store: cluster([['b', '10.96.0.2', 81], ['c', '10.96.0.3']]), log: silentLogger, listen });
  await waitFor('the state from the new server', () => batches.length === 2);
  expect(batches[1].reset).toBe(true);
  expect(batches[1].changes.map((c) => c.key)).toEqual(['node', 'svc/default/b', 'svc/default/c']);
  expect(client.stats).toMatchObject({ connects: 2, resets: 2, batches: 2 });
  await client.stop();
  await running;
  await server.close();
});

test('a store fed over the API passes only real differences downstream after a reconnection', async () => {
  const listen = `unix://${dir}/kpng.sock`;
  let server = await serveApi({ store: cluster([['a', '10.96.0.1'], ['b', '10.96.0.2']]), log: silentLogger, listen });
  const src = await startApiSource({ api: listen, node: 'n1', log: silentLogger, backoff: { initialMs: 20, maxMs: 100 } });
  await src.state.whenSynced();
  const sub = src.state.subscribe();
  expect((await sub.next()).reset).toBe(true);
  await server.close();
  server = await serveApi({ store: cluster([['a', '10.96.0.1'], ['b', '10.96.0.2', 81]]), log: silentLogger, listen });
  const b = await sub.next();
  expect(b.reset).toBe(false);
  expect(b.changes.map((c) => c.key)).toEqual(['svc/default/b']);
  sub.close();
  await src.stop();
  await server.close();
});

function openssl(...args: string[]) {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function makeCerts() {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'other-ca']) openssl('req', '-x509', ...ec, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '1', '-subj', `/CN=kpng test ${ca}`);
  writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  writeFileSync(path.join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  const issue = (name: string, ca: string, ext: string) => {
    openssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', '-extfile', ext);
  };
  issue('server', 'ca', 'server.ext');
  issue('client', 'ca', 'client.ext');
  issue('intruder', 'other-ca', 'client.ext');
  const f = (n: string) => path.join(dir, n);
  return { f };
}

test('TCP with TLS: a client certificate from the CA works; none, or another CA\'s, does not', async () => {
  const { f } = makeCerts();
  const store = cluster([['a', '10.96.0.1']]);
  const server = await serveApi({ store, log: silentLogger, listen: 'tcp://127.0.0.1:0', tlsCert: f('server.crt'), tlsKey: f('server.key'), tlsCA: f('ca.crt') });
  expect(server.address).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
  try {
    const ok = await startApiSource({ api: server.address, node: 'n1', log: silentLogger, tlsCA: f('ca.crt'), tlsCert: f('client.crt'), tlsKey: f('client.key') });
    await ok.state.whenSynced();
    expect(ok.state.size).toBe(2);
    expect(server.stats()).toHaveLength(1);
    await ok.stop();

    for (const [name, tls] of [
      ['no client certificate', { tlsCA: f('ca.crt') }],
      ['a certificate from another CA', { tlsCA: f('ca.crt'), tlsCert: f('intruder.crt'), tlsKey: f('intruder.key') }],
      ['a server it does not trust', { tlsCA: f('other-ca.crt'), tlsCert: f('client.crt'), tlsKey: f('client.key') }],
    ] as const) {
      const log = recordingLog();
      const bad = await startApiSource({ api: server.address, node: 'n1', log, backoff: { initialMs: 20, maxMs: 50 }, ...tls });
      await waitFor(`a refused connection (${name})`, () => bad.client.stats.failures >= 2);
      expect(bad.state.synced).toBe(false);
      expect(bad.client.stats.batches).toBe(0);
      expect(log.lines[0]).toMatch(/cannot follow node n1 on tcp:\/\/127\.0\.0\.1:\d+ \(UNAVAILABLE/);
      await bad.stop();
    }
    await expect(startApiSource({ api: server.address, node: 'n1', log: silentLogger, tlsCert: f('client.crt') })).rejects.toThrow(/go together/);
  } finally {
    await server.close();
  }
});

test('TCP with TLS and no CA: server-authenticated only, with a warning', async () => {
  const { f } = makeCerts();
  const log = recordingLog();
  const server = await serveApi({ store: cluster([]), log, listen: 'tcp://127.0.0.1:0', tlsCert: f('server.crt'), tlsKey: f('server.key') });
  expect(log.lines.join('\n')).toMatch(/no --tls-ca/);
  const c = await startApiSource({ api: server.address, node: 'n1', log: silentLogger, tlsCA: f('ca.crt') });
  await c.state.whenSynced();
  expect(c.state.size).toBe(1);
  await c.stop();
  await server.close();
});

describe('the library', () => {
  const file = path.resolve(__dirname, '../examples/cluster.yaml');

  async function inProcessRoutes(n: string): Promise<string> {
    const c = new ClusterStore({ log: silentLogger });
    await new FileSource({ file, store: c, log: silentLogger }).start(false);
    const s = new NodeState(c, n);
    const r = formatRoutesJsonl(s.items());
    s.close();
    return r;
  }

  test('watchFileState: onChange then onState, once', async () => {
    const calls: string[] = [];
    let routes = '';
    const w = await watchFileState({ file, node: 'n1', once: true, log: silentLogger }, {
      name: 'test',
      onChange(batch: Batch) { calls.push(`change reset=${batch.reset} n=${batch.changes.length}`); },
      onState(state: StateView) { calls.push(`state size=${state.size}`); routes = formatRoutesJsonl(state.items()); },
    });
    const stats = await w.done;
    expect(stats.syncs).toBe(1);
    expect(calls[0]).toMatch(/^change reset=true n=\d+$/);
    expect(calls[1]).toMatch(/^state size=\d+$/);
    expect(routes).toBe(await inProcessRoutes('n1'));
  });

  test('watchLocalState over the socket gives the same state; watchClusterState follows a ClusterStore', async () => {
    const c = new ClusterStore({ log: silentLogger });
    await new FileSource({ file, store: c, log: silentLogger }).start(false);
    const server = await serveApi({ store: c, log: silentLogger, listen: `unix://${dir}/kpng.sock` });
    const remote: Batch[] = [];
    const local: Batch[] = [];
    const w1 = await watchLocalState({ api: server.address, node: 'n2', log: silentLogger }, { onChange: (b) => { remote.push(b); } });
    const w2 = watchClusterState({ cluster: c, node: 'n2', log: silentLogger }, { onChange: (b) => { local.push(b); } });
    await Promise.all([w1.firstSync, w2.firstSync]);
    expect(formatRoutesJsonl(w1.state.items())).toBe(await inProcessRoutes('n2'));
    expect(formatRoutesJsonl(w1.state.items())).toBe(formatRoutesJsonl(w2.state.items()));

    c.apply('Service', svc('extra', '10.96.9.9'));
    await waitFor('the change on both', () => remote.length === 2 && local.length === 2);
    expect(remote[1].changes.map((x) => x.key)).toEqual(['svc/default/extra']);
    expect(local[1].changes.map((x) => x.key)).toEqual(['svc/default/extra']);
    await w1.stop();
    await w2.stop();
    await server.close();
  });

  test('a backend that throws gets the full state again', async () => {
    const c = cluster([['a', '10.96.0.1']]);
    const seen: boolean[] = [];
    let fail = true;
    const w = watchClusterState({ cluster: c, node: 'n1', log: silentLogger }, {
      onChange(b) { seen.push(b.reset); if (fail) { fail = false; throw new Error('kernel said no'); } },
    });
    await w.firstSync;
    expect(seen).toEqual([true, true]);
    await w.stop();
  }, 10000);

  test('a backend needs a callback', () => {
    expect(() => watchClusterState({ cluster: cluster([]), node: 'n1' }, {})).toThrow(/onChange or onState/);
  });
});
